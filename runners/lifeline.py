"""A command's processes die with the process that started it, however that one ends (SIGKILL included).

``Lifeline.start`` starts a guard, ``python lifeline.py PARENT STDIN MARKER``, as the leader of a new
process group for the command to run in. The guard's own stdin is the read end of a pipe whose write end
only the starting process holds: when that process dies, whatever killed it, the kernel closes the write
end and the guard reads EOF. Then it SIGKILLs its process group (the command, vLLM's EngineCore and its
workers, a serving cell's server: all of them stay in the group) and every process marked as the
command's, wherever it moved to (a group or session of its own, as vLLM's data-parallel launcher's
servers do): a process whose stdin is the command's (``STDIN``, an empty pipe that reads as /dev/null and
that children inherit, vLLM's multiprocessing ones too) or whose environment holds ``MARKER`` (vLLM's
processes rename themselves, which overwrites what /proc shows of their environment; a process that
gave its children another stdin keeps it). Linux's parent-death signal (SIGHUP here) is a second
trigger, for a write end that leaked into a forked copy of the starting process.

The guard ignores SIGTERM (the group's SIGTERM on a timeout is for the command; the guard goes with the
SIGKILL that follows), and it holds the group's id while it lives, so the id is never another's.
Standard library only: it runs in the worker's Python and in runners/offline.py's.
"""

import ctypes
import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# The environment variable that marks a command's processes; its value tells one command's from another's.
MARKER = "DRAFTBENCH_CELL"
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Mark:
    """What makes a process one of the command's: its stdin (``pipe:[inode]`` in /proc), or the marker."""

    stdin: str
    marker: str

    def on(self, pid: int) -> bool:
        # Either may be unreadable (a process gone, another user's, one without a stdin): each on its own.
        try:
            if os.readlink(f"/proc/{pid}/fd/0") == self.stdin:
                return True
        except OSError:
            pass
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                return f"{MARKER}={self.marker}".encode() in handle.read().split(b"\0")
        except OSError:
            return False


class Lifeline:
    """A running guard: start the command in process group ``pgid``, with ``stdin`` and ``env(...)``."""

    def __init__(self, guard: subprocess.Popen, write_end: int, stdin: int, mark: Mark) -> None:
        self.guard, self.write_end, self.stdin, self.mark = guard, write_end, stdin, mark
        self.pgid = guard.pid

    @classmethod
    def start(cls) -> "Lifeline":
        """Start the guard; this process holds the only write end of its pipe until ``cut``."""
        stdin, nobody = os.pipe()
        os.close(nobody)
        mark = Mark(stdin=os.readlink(f"/proc/self/fd/{stdin}"), marker=secrets.token_hex(8))
        read_end, write_end = os.pipe()
        try:
            guard = subprocess.Popen(
                [sys.executable, "-I", "-S", str(Path(__file__).resolve()), str(os.getpid()), mark.stdin, mark.marker],
                stdin=read_end, stdout=subprocess.DEVNULL, process_group=0,
            )
        except BaseException:
            os.close(write_end)
            os.close(stdin)
            raise
        finally:
            os.close(read_end)
        return cls(guard, write_end, stdin, mark)

    def env(self, env: dict[str, str] | None) -> dict[str, str]:
        """``env`` (this process's when None) with the marker."""
        return dict(os.environ if env is None else env) | {MARKER: self.mark.marker}

    def signal_group(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def cut(self) -> None:
        """SIGKILL the command's processes (its group, guard included, and the marked), reap the guard; once."""
        if self.guard.returncode is not None:
            return
        kill(self.mark, self.pgid)
        self.guard.wait()
        os.close(self.write_end)
        os.close(self.stdin)


def kill(mark: Mark, pgid: int) -> None:
    """SIGKILL every other process that bears ``mark``, then the process group ``pgid``."""
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid() and mark.on(int(name)):
            try:
                os.kill(int(name), signal.SIGKILL)
            except ProcessLookupError:
                pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def guard(parent: int, mark: Mark) -> None:
    """Wait for ``parent`` to die (EOF on stdin, or the parent-death signal), then kill the command."""
    pgid = os.getpgid(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, lambda *_: kill(mark, pgid))
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGHUP))
    # The parent may have died before the signal was set: then this process has been adopted already.
    if os.getppid() == parent:
        while os.read(0, 4096):
            pass
    kill(mark, pgid)


if __name__ == "__main__":
    guard(int(sys.argv[1]), Mark(stdin=sys.argv[2], marker=sys.argv[3]))
