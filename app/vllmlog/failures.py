"""Failures a vLLM log shows without a Python exception, each found by one search of the whole text.

- ``kernel_assert``: a device assertion, ``IndexKernel.cu:93: operator(): block: [0,0,0], thread:
  [0,0,0] Assertion `idx < size` failed.`` (CUDA's own line; Triton's ``device_assert`` prints the
  same shape with a ``.py`` file);
- ``cuda_line``: a C++ ``CUDA error: ...`` or ``CUDA out of memory ...`` line (``terminate called
  ... what(): CUDA error: ...``, or vLLM's line beside an ``EngineDeadError``), else vLLM's own CUDA
  check (``Failed: Cuda error /csrc/custom_all_reduce.cuh:368 'invalid argument'``), else torch's
  ``Search for `cudaErrorX'`` line;
- ``nccl_timeout``: ``Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5,
  OpType=ALLREDUCE, ...)``, kept as its collective;
- ``compiler_error``: nvcc's ``kernel.cu(12): error: ...``, gcc's ``x.cpp:3:4: error: ...`` and
  ``fatal error: x.h: No such file or directory``, ptxas's ``ptxas /tmp/k.ptx, line 6; error   : ...``,
  ``nvcc fatal : ...``, ``ptxas fatal : ...``;
- ``worker_died``: ``Worker proc VllmWorker-2 died unexpectedly (exit code: -9)``, the older ``Worker
  VllmWorkerProcess pid 1159 died, exit code: -6``, Ray's ``RayWorkerProc rank=1 died unexpectedly``;
- ``faulthandler_frames``: the crashing thread's frames of a ``faulthandler`` dump;
- ``fatal_signal``: the signal a process died of, as Python's ``faulthandler`` (``Fatal Python error:
  Segmentation fault``), Ray's and abseil's handlers (``*** SIGSEGV received at time=...``) and a shell
  (``Segmentation fault (core dumped)``) print it;
- ``line_with``: the first line holding a caller's phrase, its exception type (if any) taken off (a
  message vLLM logs without raising it, or a paste that kept the message and lost the type).

Each pattern is linear in the text: a file name is one word from a word boundary (read once), and
every repeat that could run on is bounded.
"""

import re
from typing import NamedTuple

from app.vllmlog.lines import Log


class Found(NamedTuple):
    line: int  # the line it was found on
    message: str  # what the failure says, in the words a developer would search for


# Each rule: the literal its lines hold (found at C speed), then the pattern read around it only.
_AROUND = 600
_ASSERTION = re.compile(r"Assertion `")
_KERNEL_ASSERT = re.compile(
    r"\b(\w++\.(?:cuh?|py)):\d++: ([^\n]{0,300}?) ?block: \[[\d,]{0,40}\], thread: \[[\d,]{0,40}\] "
    r"Assertion `([^\n]{0,500}?)` failed"
)
_CUDA_LINE = re.compile(r"CUDA (?:error: |out of memory)[^\n]*+")
_CUDA_HINT = re.compile(r"Search for `(cudaError\w++)'")
# vLLM's CUDACHECK in its C++ kernels: printf("Failed: Cuda error %s:%d '%s'\n", __FILE__, __LINE__, ...),
# the file and error kept; a paste may cut the line anywhere after "Cuda error".
_VLLM_CHECK = re.compile(r"Failed: Cuda error (?:\S{0,300}?/)?([^\s/:]{1,200}+)(?!/)(?::\d++ '([^'\n]{1,200})')?")
# What torch says for the error names its "Search for `cudaErrorX'" line gives, when its message is cut off.
_CUDA_ERRORS = {
    "cudaErrorIllegalAddress": "an illegal memory access was encountered",
    "cudaErrorAssert": "device-side assert triggered",
    "cudaErrorMisalignedAddress": "misaligned address",
    "cudaErrorLaunchFailure": "unspecified launch failure",
    "cudaErrorIllegalInstruction": "an illegal instruction was encountered",
    "cudaErrorStreamCaptureUnsupported": "operation not permitted when stream is capturing",
    "cudaErrorStreamCaptureInvalidated": "operation failed due to a previous error during capture",
    "cudaErrorMemoryAllocation": "out of memory",
}
_NCCL_TIMEOUT = re.compile(r"Watchdog caught collective operation timeout: WorkNCCL\([^)\n]{0,300}?OpType=(\w++)")
_ERROR = re.compile(r"error: ")
_SOURCE_ERROR = re.compile(
    r"\b(\w++\.(?:cu|cuh|cpp|cc|c|h|hpp))(?:\(\d++\)|:\d++(?::\d++)?): (?:fatal )?error: ([^\n]{0,500})"
)
_PTXAS = re.compile(r"ptxas")
_PTXAS_ERROR = re.compile(r"ptxas\b[^\n]{0,300}?\berror +: ([^\n]{0,500})")
_FATAL = re.compile(r"fatal")
_FATAL_LINE = re.compile(r"[ \t]*+(?:fatal error|(?:nvcc|ptxas) fatal *+): ([^\n]{0,500})")
_DIED = re.compile(r"died")
_WORKER_DIED = re.compile(
    r"Worker proc \S{1,200}? died unexpectedly(?: \(exit code: (-?\d++|None)\))?"
    r"|Worker \S{1,200}? pid \d++ died, exit code: (-?\d++)"
    r"|RayWorkerProc rank=\d++ died unexpectedly"
)
_FAULTHANDLER_STARTS = ("Current thread 0x", "Stack (most recent call first)")
_FAULTHANDLER_FRAME = re.compile(r'^\s++File "([^"]++)", line \d++ in (\S++)')


def kernel_assert(log: Log) -> Found | None:
    """``file: kernel: Assertion `what` failed`` of the first device assertion line."""
    found = _around(log, _ASSERTION, _KERNEL_ASSERT)
    if found is None:
        return None
    source, kernel, what = found.groups()
    return Found(log.line_number(found.start()), f"{source}: {kernel.strip().rstrip(':')}: Assertion `{what}` failed")


def cuda_line(log: Log) -> Found | None:
    """The first ``CUDA error: ...`` or ``CUDA out of memory ...`` text, to its line's end; or torch's
    ``Search for `cudaErrorX'`` line (what is left when a paste cut the message), as ``CUDA error: <its words>``."""
    found = _CUDA_LINE.search(log.text)
    if found is not None:
        return Found(log.line_number(found.start()), found.group())
    check = _VLLM_CHECK.search(log.text)
    if check is not None:
        source, error = check.groups()
        return Found(log.line_number(check.start()), f"CUDA error: {error or 'message cut off'} in {source}")
    hint = _CUDA_HINT.search(log.text)
    if hint is None:
        return None
    return Found(log.line_number(hint.start()), f"CUDA error: {_CUDA_ERRORS.get(hint.group(1), hint.group(1))}")


def nccl_timeout(log: Log) -> Found | None:
    """``collective operation timeout: OpType=X`` of the first watchdog line (counts and times left out)."""
    found = _NCCL_TIMEOUT.search(log.text)
    if found is None:
        return None
    return Found(log.line_number(found.start()), f"collective operation timeout: OpType={found.group(1)}")


def compiler_error(log: Log) -> Found | None:
    """``file: error: what``, ``ptxas error: what`` (or ``fatal: what``) of the first compiler error line."""
    found = [
        (hit.start(), words(hit)) for hit, words in (
            (_around(log, _ERROR, _SOURCE_ERROR), lambda hit: f"{hit.group(1)}: error: {hit.group(2).strip()}"),
            (_around(log, _PTXAS, _PTXAS_ERROR), lambda hit: f"ptxas error: {hit.group(1).strip()}"),
            (_around(log, _FATAL, _FATAL_LINE, whole_line=True), lambda hit: f"fatal: {hit.group(1).strip()}"),
        ) if hit is not None
    ]
    if not found:
        return None
    start, message = min(found)
    return Found(log.line_number(start), message)


def worker_died(log: Log) -> Found | None:
    """``worker process died unexpectedly``, with its exit code when the line gives one."""
    found = _around(log, _DIED, _WORKER_DIED)
    if found is None:
        return None
    code = found.group(1) or found.group(2)
    known = f" (exit code {code})" if code and code != "None" else ""
    return Found(log.line_number(found.start()), f"worker process died unexpectedly{known}")


_SIGNAL_WORDS = {
    "Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL",
}
# Each found by its literal (str.find, at C speed), then read on its own line only.
_FATAL_LITERALS = ("Fatal Python error: ", " received at time=", " (core dumped)")
_SIGNAL_LINE = re.compile(
    r".{0,300}?(?:Fatal Python error: (" + "|".join(_SIGNAL_WORDS) + r")"
    r"|\*\*\* (SIG[A-Z]{2,6}) received at time="
    r"|(?<![\w ])(" + "|".join(_SIGNAL_WORDS) + r") \(core dumped\))"
)
_TYPE_ENDS = ("Error: ", "Exception: ")


def fatal_signal(log: Log) -> Found | None:
    """``killed by signal SIGSEGV`` of the first line that says a process died of a signal."""
    text = log.text
    for at in sorted(at for at in (text.find(literal) for literal in _FATAL_LITERALS) if at != -1):
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        found = _SIGNAL_LINE.match(text, start, len(text) if end == -1 else end)
        if found is not None:
            words, name, shell = found.groups()
            return Found(log.line_number(start), f"killed by signal {name or _SIGNAL_WORDS[words or shell]}")
    return None


def line_with(log: Log, phrases: tuple[str, ...]) -> Found | None:
    """The first line holding one of ``phrases`` (each found by str.find, at C speed), from the last
    ``...Error: `` before it if there is one, else whole (stripped)."""
    text = log.text
    at = min((at for at in (text.find(phrase) for phrase in phrases) if at != -1), default=-1)
    if at == -1:
        return None
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    end = len(text) if end == -1 else end
    ends = [typed + len(ending) for ending in _TYPE_ENDS if (typed := text.rfind(ending, start, at)) != -1]
    return Found(log.line_number(start), text[max(ends, default=start) : end].strip())


def faulthandler_frames(log: Log) -> list[tuple[str, str]]:
    """Frames of the crashing thread in a ``faulthandler`` dump, outermost first (it prints innermost first)."""
    starts = [at for at in (log.text.find(start) for start in _FAULTHANDLER_STARTS) if at != -1]
    frames = []
    for line in log.lines[log.line_number(min(starts)) + 1 :] if starts else []:
        frame = _FAULTHANDLER_FRAME.match(line)
        if frame is None:
            break
        frames.append((frame.group(1), frame.group(2)))
    return frames[::-1]


def _around(log: Log, literal: re.Pattern[str], pattern: re.Pattern[str], *, whole_line: bool = False) -> re.Match[str] | None:
    """The first match of ``pattern`` on a line holding ``literal``, read within ``_AROUND`` characters of it."""
    for start, at, end in log.candidates(literal):
        if whole_line:
            found = pattern.match(log.text, start, end)
        else:
            found = pattern.search(log.text, max(start, at - _AROUND), min(end, at + _AROUND))
        if found is not None:
            return found
    return None
