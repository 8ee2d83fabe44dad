"""Where merges and splits made by hand send a crash (app.crashes.overrides), on hand-built overrides."""

from app.crashes.overrides import MERGE, SPLIT, Override, group_of, split_signature


def merge(signature: str, into: str, *jobs: int) -> Override:
    return Override(MERGE, signature, into, frozenset(jobs))


def split(signature: str, into: str, *jobs: int) -> Override:
    return Override(SPLIT, signature, into, frozenset(jobs))


def test_without_overrides_a_crash_stays_in_its_signatures_group():
    assert group_of("a", 1, []) == "a"


def test_a_merge_catches_later_crashes_signed_like_the_merged_group():
    assert group_of("a", 99, [merge("a", "b", 1, 2)]) == "b"
    assert group_of("c", 99, [merge("a", "b", 1, 2)]) == "c"


def test_a_merge_keeps_its_jobs_together_whatever_they_are_signed_now():
    # After the rules change, job 1 is signed "a2": the merge still holds it.
    assert group_of("a2", 1, [merge("a", "b", 1, 2)]) == "b"


def test_merges_chain_in_the_order_they_were_made():
    assert group_of("a", 99, [merge("a", "b"), merge("b", "c")]) == "c"
    assert group_of("a", 99, [merge("b", "c"), merge("a", "b")]) == "b"


def test_a_split_sends_only_its_jobs_to_its_group():
    made = [split("a", "s", 3)]
    assert (group_of("a", 3, made), group_of("a", 4, made)) == ("s", "a")


def test_a_later_merge_of_a_split_group_wins():
    assert group_of("a", 3, [split("a", "s", 3), merge("s", "b", 3)]) == "b"


def test_split_signatures_depend_on_the_group_and_the_jobs_only():
    assert split_signature("a", [2, 1]) == split_signature("a", [1, 2])
    assert len({split_signature("a", [1]), split_signature("a", [2]), split_signature("b", [1])}) == 3
