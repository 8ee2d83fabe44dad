"""``draftbench build create`` as a user runs it: the worker's --build argument, or one line saying what is wrong."""

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.builds.facts import read_facts
from tests.builds.conftest import PROPOSER, diff

REPO = Path(__file__).resolve().parents[2]


def _draftbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, cwd=REPO)


def test_create_prints_the_workers_build_argument(tmp_path: Path, base_python: Path) -> None:
    patch = tmp_path / "pr.diff"
    patch.write_text(diff("vllm/v1/proposer.py", PROPOSER, "def propose(tokens):\n    return []\n"))
    done = _draftbench("build", "create", "pr-1", "--from", str(base_python), "--patch", str(patch),
                       "--root", str(tmp_path / "builds"), "--commit", "abc1234", "--commit-date", "2026-11-20T09:00:00Z")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"--build=pr-1={tmp_path / 'builds' / 'pr-1' / 'python'}"
    facts = read_facts(tmp_path / "builds" / "pr-1" / "python")
    assert (facts.commit, facts.committed_at) == ("abc1234", datetime(2026, 11, 20, 9, tzinfo=UTC))


def test_create_refuses_a_compiled_change_in_one_line(tmp_path: Path, base_python: Path) -> None:
    patch = tmp_path / "pr.diff"
    patch.write_text(diff("csrc/attention.cu", "a\n", "b\n"))
    done = _draftbench("build", "create", "pr-1", "--from", str(base_python), "--patch", str(patch),
                       "--root", str(tmp_path / "builds"))
    assert done.returncode == 1
    assert done.stderr.startswith("draftbench: the patch changes compiled sources (csrc/attention.cu)")


def test_create_wants_one_source_and_a_clean_label(tmp_path: Path, base_python: Path) -> None:
    done = _draftbench("build", "create", "pr-1", "--from", str(base_python), "--pip", "vllm", "--wheel", "x.whl")
    assert done.stderr.strip() == "draftbench: give exactly one of --patch, --wheel or --pip (got --wheel, --pip)"
    done = _draftbench("build", "create", "pr 1", "--from", str(base_python), "--pip", "vllm")
    assert done.stderr.strip() == "draftbench: label 'pr 1': use letters, digits and . _ + - only"
    done = _draftbench("build", "create", "pr-1", "--from", str(base_python), "--pip", "vllm", "--commit-date", "2026-11-20 09:00")
    assert done.stderr.strip() == "draftbench: --commit-date '2026-11-20 09:00': give its zone (e.g. +00:00 or Z)"
    done = _draftbench("build", "create", "pr-1", "--from", str(base_python), "--pip", "vllm", "--commit-date", "yesterday")
    assert done.stderr.strip().startswith("draftbench: --commit-date 'yesterday': not an ISO 8601 date")
    done = _draftbench("build", "create", "pr-1", "--from", str(base_python), "--pip", "vllm", "--commit-date", "0001-01-01T00:00:00+01:00")
    assert done.stderr.strip().startswith("draftbench: --commit-date '0001-01-01T00:00:00+01:00': ")
    assert "not a plausible time" in done.stderr


def _one_line(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith("draftbench: "), done.stderr
    return lines[0]


def test_create_refuses_a_patch_file_that_is_a_symlink(tmp_path: Path, base_python: Path) -> None:
    real = tmp_path / "real.diff"
    real.write_text(diff("vllm/v1/proposer.py", PROPOSER, "def propose(tokens):\n    return []\n"))
    for target in (real, Path("/etc/passwd")):
        link = tmp_path / "pr.diff"
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        line = _one_line(_draftbench("build", "create", "pr-1", "--from", str(base_python), "--patch", str(link),
                                     "--root", str(tmp_path / "builds")))
        assert line == f"draftbench: --patch {link}: a symbolic link, not a regular file (links are never followed: copy the file itself)"
    assert not (tmp_path / "builds" / "pr-1").exists()


def test_create_refuses_a_patch_that_is_not_utf8_or_over_the_log_limit(tmp_path: Path, base_python: Path) -> None:
    patch = tmp_path / "pr.diff"
    patch.write_bytes(diff("vllm/v1/proposer.py", PROPOSER, "def propose(tokens):\n    return []\n").encode() + b"+# \xff\n")
    line = _one_line(_draftbench("build", "create", "pr-1", "--from", str(base_python), "--patch", str(patch),
                                 "--root", str(tmp_path / "builds")))
    assert line.startswith(f"draftbench: --patch {patch}: not UTF-8 text")
    patch.write_text(diff("vllm/v1/proposer.py", PROPOSER, "def propose(tokens):\n    return []\n") + "#" * 100)
    done = subprocess.run([sys.executable, "-m", "app.cli", "build", "create", "pr-1", "--from", str(base_python), "--patch",
                           str(patch), "--root", str(tmp_path / "builds")], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "DRAFTBENCH_MAX_LOG_BYTES": "100"})
    assert "over the limit of 100 (DRAFTBENCH_MAX_LOG_BYTES)" in _one_line(done)
    assert not (tmp_path / "builds" / "pr-1").exists()


@pytest.mark.parametrize(("flag", "spec"), [
    ("--pip", "-r/tmp/reqs.txt"),
    ("--pip", "--index-url=http://127.0.0.1:9/simple"),
    ("--pip", "vllm==0.33.0 --index-url http://127.0.0.1:9/simple"),
    ("--pip", "vllm\n-r /tmp/reqs.txt"),
    ("--wheel", "-r/tmp/reqs.txt"),
])
def test_create_refuses_a_pip_option_given_as_the_requirement(tmp_path: Path, base_python: Path, flag: str, spec: str) -> None:
    line = _one_line(_draftbench("build", "create", "pr-9", "--from", str(base_python), flag, spec, "--root", str(tmp_path / "builds")))
    assert line.startswith(f"draftbench: {flag} {spec!r}: ") and ("requirement specifier" in line or "wheel's path or URL" in line), line
    assert not (tmp_path / "builds" / "pr-9").exists()
