"""Signatures scored on real vLLM crash logs labelled by root cause (tests/data/crashlogs, benchmarks/crash_grouping.py)."""

import re

import pytest

from app.crashes.signatures import signature_for
from app.enums import CrashKind
from tests.crashes.corpus import CORPUS, load, score

ENTRIES = load()


@pytest.fixture(scope="module")
def signed():
    return [
        signature_for(e.log, exit_code=e.exit_code, signal=e.signal, timed_out=False, context=e.context()) for e in ENTRIES
    ]


def test_the_corpus_is_forty_real_logs_or_more_each_with_its_source_and_cause():
    assert len(ENTRIES) >= 40
    assert {path.name for path in CORPUS.glob("*.log")} == {e.file for e in ENTRIES}
    for entry in ENTRIES:
        assert entry.cause and entry.extent in ("whole", "cut")
        assert entry.source.startswith(("https://github.com/", "own run")), entry.file
    # Grouping is tested only where one cause has several logs.
    repeated = [cause for cause in {e.cause for e in ENTRIES} if sum(e.cause == cause for e in ENTRIES) > 1]
    assert len(repeated) >= 8


def test_grouping_scores_meet_the_aims(signed):
    scores = score([e.cause for e in ENTRIES], [i.signature for i in signed])
    assert scores.purity >= 0.9
    assert scores.precision >= 0.8
    assert scores.recall >= 0.8


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
