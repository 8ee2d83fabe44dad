"""Signatures scored on real vLLM crash logs labelled by root cause (tests/data/crashlogs, benchmarks/crash_grouping.py).

The corpus is split by issue date (index.json's split): the tuning part (older issues and our own
runs) is held to the aims; the held-out part (newer issues, never looked into while rules change) to
a lower bar that says how the rules do on logs they were not shaped by, and its scores are printed.
"""

import re
from datetime import date

import pytest

from app.crashes.signatures import signature_for
from app.enums import CrashKind
from tests.crashes.corpus import CORPUS, CUTS, HELD_OUT, TUNING, load, parts, score

ENTRIES = load()
PARTS = parts(ENTRIES)


@pytest.fixture(scope="module")
def signed():
    return [
        signature_for(e.log, exit_code=e.exit_code, signal=e.signal, timed_out=False, context=e.context()) for e in ENTRIES
    ]


def test_the_corpus_is_forty_real_logs_or_more_each_with_its_source_and_cause():
    assert len(ENTRIES) >= 100
    assert {path.name for path in CORPUS.glob("*.log")} == {e.file for e in ENTRIES}
    for entry in ENTRIES:
        assert entry.cause and entry.extent in ("whole", "cut")
        assert entry.source.startswith(("https://github.com/", "own run")), entry.file
    # Grouping is tested only where one cause has several logs.
    repeated = [cause for cause in {e.cause for e in ENTRIES} if sum(e.cause == cause for e in ENTRIES) > 1]
    assert len(repeated) >= 8


def test_every_log_has_its_date_and_how_it_was_cut():
    for entry in ENTRIES:
        date.fromisoformat(entry.date)
        assert entry.date_basis, entry.file
        assert set(entry.cuts) <= set(CUTS), entry.file
    # Each way reports cut a traceback is in the corpus, public logs all.
    assert {cut for e in ENTRIES if not e.own for cut in e.cuts} == set(CUTS)


def test_the_held_out_part_is_the_newest_issues_and_at_least_30_percent():
    held_out, tuning = ([ENTRIES[i] for i in PARTS[part]] for part in (HELD_OUT, TUNING))
    assert len(held_out) >= 10 and len(held_out) >= 0.3 * len(ENTRIES)
    assert not any(e.own for e in held_out)
    # The first logs are split by date; a later batch (``gathered``) by issue, each issue on one side.
    first = [e for e in ENTRIES if e.gathered is None]
    assert max(e.date for e in tuning if not e.own and e in first) < min(e.date for e in held_out if e in first)
    later = [e for e in ENTRIES if e.gathered is not None]
    assert len(later) >= 25 and {e.source for e in later}.isdisjoint({e.source for e in first})
    for source in {e.source for e in later}:
        assert len({e in held_out for e in later if e.source == source}) == 1, source


def _part_scores(signed, part, batch=None):
    """Scores of one part, of the first batch (``batch`` "first": logs before 2026-12-05's), the later one ("later")
    or both (None)."""
    indices = [i for i in PARTS[part] if batch is None or (ENTRIES[i].gathered is None) == (batch == "first")]
    scores = score([ENTRIES[i].cause for i in indices], [signed[i].signature for i in indices])
    by_exit = sum(signed[i].kind is CrashKind.EXIT for i in indices)
    print(f"{part} ({batch or 'all'}): {len(indices)} logs, purity {scores.purity:.3f}, precision {scores.precision:.3f}, "
          f"recall {scores.recall:.3f}, signed by exit code {by_exit}")
    return scores, by_exit


def test_the_tuning_part_meets_the_aims(signed):
    scores, by_exit = _part_scores(signed, TUNING)
    assert scores.purity >= 0.9 and scores.precision >= 0.8 and scores.recall >= 0.8 and by_exit == 0, scores


def test_the_held_out_part_meets_a_lower_bar(signed):
    # Measured when the split was made: purity 0.810, precision 0.625, recall 0.652, 3 logs by exit code.
    scores, by_exit = _part_scores(signed, HELD_OUT, "first")
    assert scores.purity >= 0.9 and scores.precision >= 0.8 and scores.recall >= 0.6 and by_exit == 0, scores


def test_the_later_held_out_logs_score_no_worse_than_when_they_were_gathered(signed):
    # The 20 held-out logs gathered on 2026-12-05, scored before that day's rule changes and after them alike:
    # purity 0.900, precision 0.250, recall 0.167, none by exit code. Most are excerpts cut before anything names
    # their cause, and two excerpts of one traceback cut at different frames are not grouped: a floor that says
    # what the rules do on logs they were not shaped by, not an aim.
    scores, by_exit = _part_scores(signed, HELD_OUT, "later")
    assert scores.purity >= 0.9 and scores.precision >= 0.25 and scores.recall >= 0.16 and by_exit == 0, scores


def test_grouping_scores_meet_the_aims(signed):
    scores = score([e.cause for e in ENTRIES if e.gathered is None],
                   [s.signature for e, s in zip(ENTRIES, signed, strict=True) if e.gathered is None])
    assert scores.purity >= 0.9
    assert scores.precision >= 0.8
    assert scores.recall >= 0.8
    # With the logs of 2026-12-05, whose held-out half groups little (above): 0.621.
    assert score([e.cause for e in ENTRIES], [s.signature for s in signed]).recall >= 0.6


def test_no_group_is_a_catch_all(signed):
    # Before: one group titled "exit code 1" held 13 causes.
    assert score([e.cause for e in ENTRIES], [i.signature for i in signed]).most_causes <= 3


_EXCEPTION_LINE = re.compile(r"^\S*?(?:\w+\.)*[A-Z]\w*(?:Error|Exception): ", re.MULTILINE)


def test_no_log_of_a_python_exception_is_titled_by_its_exit_code(signed):
    for entry, info in zip(ENTRIES, signed, strict=True):
        assert info.kind is not CrashKind.EXIT, entry.file
        if _EXCEPTION_LINE.search(entry.log):
            assert "exit code" not in info.title, entry.file


def test_distinct_causes_sharing_one_cuda_message_are_apart(signed):
    illegal = [(e.cause, i.signature) for e, i in zip(ENTRIES, signed, strict=True) if i.kind is CrashKind.CUDA_ILLEGAL_MEMORY_ACCESS]
    assert len({cause for cause, _ in illegal}) >= 3
    assert len({signature for _, signature in illegal}) == len({cause for cause, _ in illegal})


def test_score_of_a_known_grouping():
    scores = score(["a", "a", "b", "b"], ["x", "x", "x", "y"])
    assert (scores.purity, scores.precision, scores.recall, scores.groups, scores.most_causes) == (0.75, 1 / 3, 0.5, 2, 2)
