"""Processes as Linux's /proc shows them, for tests that check what a killed process left running."""

import os
import signal
import time
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...); None when gone."""
    try:
        # The command name may hold spaces and parentheses: the fields after the last ')' are fixed.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs: a zombie waiting for whoever adopted it is dead."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def table() -> dict[int, tuple[int, int]]:
    """Every live process: pid -> (parent pid, process group)."""
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        fields = _stat(int(entry))
        if fields is not None and fields[0] not in ("Z", "X"):
            found[int(entry)] = (int(fields[1]), int(fields[2]))
    return found


def children(pid: int) -> set[int]:
    return {child for child, (parent, _) in table().items() if parent == pid}


def descendants(pid: int) -> set[int]:
    rows, found, queue = table(), set(), [pid]
    while queue:
        above = queue.pop()
        below = {child for child, (parent, _) in rows.items() if parent == above}
        found |= below
        queue += below
    return found


def group(pgid: int) -> set[int]:
    """The live members of process group ``pgid``."""
    return {pid for pid, (_, member_of) in table().items() if member_of == pgid}


def pgid(pid: int) -> int:
    fields = _stat(pid)
    assert fields is not None, f"process {pid} is gone"
    return int(fields[2])


def cmdline(pid: int) -> str:
    """The command line as the process shows it (vLLM retitles its EngineCore ``VLLM::EngineCore``)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def seconds_until_gone(pids: list[int] | set[int], timeout_s: float) -> float | None:
    """Seconds until none of ``pids`` runs, polling /proc; None if some still run after ``timeout_s``."""
    started = time.monotonic()
    while any(alive(pid) for pid in pids):
        if time.monotonic() - started > timeout_s:
            return None
        time.sleep(0.05)
    return time.monotonic() - started


def identities(pids: list[int] | set[int]) -> dict[int, str]:
    """pid -> start time (clock ticks since boot) of those of ``pids`` that run: a pid with its start time
    names one process, never one that took the pid since."""
    found = {}
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            found[pid] = fields[19]
    return found


def kill_all(processes: dict[int, str]) -> None:
    """SIGKILL those of ``processes`` (``identities``) that still run: a test's leftovers."""
    for pid, started_at in identities(processes).items():
        if started_at == processes[pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
