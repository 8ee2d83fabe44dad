"""The GPU harness's own decisions that cost device time when wrong (benchmarks/h200_proof.py)."""

import subprocess
import time
from pathlib import Path

from benchmarks.h200_proof import running


def test_a_process_that_ended_unreaped_is_not_running(tmp_path: Path) -> None:
    # `draftbench ci`, started by this run, ends as a zombie of it: the wait for its looks must end with it.
    child = subprocess.Popen(["sleep", "0.3"])
    pid_file = tmp_path / "ci.pid"
    pid_file.write_text(str(child.pid))
    assert running(pid_file)
    time.sleep(1)
    assert not running(pid_file)
    child.wait()
    assert not running(pid_file) and not running(tmp_path / "missing.pid")
