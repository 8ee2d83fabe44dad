"""A crashed cell's log turned into a signature, so that reruns of one bug fall into one group.

As Socorro and syzkaller do: find the root-cause exception, reduce its message to its words
(addresses, numbers, paths, pids, times, UUIDs and sizes become placeholders), keep the innermost
frames inside vLLM without line numbers, and hash the lot. Pure functions of the log text.
"""

import hashlib
import re
import signal as signals
from dataclasses import dataclass
from typing import NamedTuple

from app.enums import CrashKind

MAX_FRAMES = 5
MAX_MESSAGE = 500


@dataclass(frozen=True)
class CrashInfo:
    kind: CrashKind
    exception_type: str | None
    message: str
    frames: tuple[str, ...]  # "module:function", innermost first
    signature: str  # sha256 hex of kind, exception_type, message and frames


def signature_for(log: str, *, exit_code: int | None, signal: int | None, timed_out: bool) -> CrashInfo:
    """Classify and sign a crash from its log and the process's end.

    Rules, first match wins:

    1. ``timed_out``: TIMEOUT, message ``"timed out"``, no frames (a hang prints nothing useful).
    2. A Python traceback: the first exception the log printed that is not a wrapper pointing
       "above" (``EngineDeadError``, ``Engine core initialization failed. See root cause above``,
       ``Worker failed with error ..., please check the stack trace above``): later tracebacks are
       its consequences. Kind from its type and message: "illegal memory access" ->
       CUDA_ILLEGAL_MEMORY_ACCESS, "device-side assert" -> CUDA_DEVICE_ASSERT, "out of memory" or
       ``OutOfMemoryError`` -> OUT_OF_MEMORY, other "CUDA error" -> CUDA_ERROR; else EXCEPTION, or
       ENGINE_DEAD when only wrappers were printed.
    3. No traceback but a C++ ``CUDA error: ...`` / ``CUDA out of memory`` line (an abort from
       ``terminate called ...``): the kind of that line, its text as message.
    4. ``signal``: SIGNAL, ``"killed by signal SIGSEGV"``, frames from a ``faulthandler`` dump if any.
    5. Otherwise EXIT, ``"exit code N"``.

    Frames are ``File "..."`` lines of the chosen traceback inside vLLM (path containing ``/vllm/``),
    as ``vllm.x.y:function``, innermost first, at most 5; without any vLLM frame, the innermost
    frames of any module. The signature is the sha256 of kind, exception type, normalised message
    and frames, one per line.

    Parameters
    ----------
    log : str
        The cell's combined stdout and stderr; vLLM's ``(EngineCore_DP0 pid=N)`` and
        ``ERROR mm-dd hh:mm:ss [file.py:N]`` prefixes and ANSI colours are stripped here.
    exit_code, signal : int or None
        How the process ended (``signal`` as a number, e.g. 11).
    timed_out : bool
        The worker killed it at the cell's timeout.

    Returns
    -------
    CrashInfo

    Notes
    -----
    O(len(log)). Never raises on odd logs: the worst case is an EXIT or SIGNAL signature.
    """
    if timed_out:
        return _sign(CrashKind.TIMEOUT, None, "timed out", ())
    streams = _streams(log)
    lines = [line for _, line in sorted(item for stream in streams for item in stream)]
    chosen = _root_exception(sorted(traceback for stream in streams for traceback in _tracebacks(stream)))
    if chosen is not None:
        (_, exc_type, message, frames), wrapper = chosen
        kind = _cuda_kind(f"{exc_type} {message}") or (CrashKind.ENGINE_DEAD if wrapper else CrashKind.EXCEPTION)
        return _sign(kind, exc_type, normalise(message), _render(frames))
    for line in lines:
        found = _CUDA_LINE.search(line)
        if found:
            return _sign(_cuda_kind(found.group()), None, normalise(found.group()), ())
    if signal is not None:
        return _sign(CrashKind.SIGNAL, None, f"killed by signal {_signal_name(signal)}", _render(_faulthandler(lines)))
    return _sign(CrashKind.EXIT, None, f"exit code {'unknown' if exit_code is None else exit_code}", ())


def normalise(message: str) -> str:
    """Replace what changes between runs of one bug with placeholders; keep the words.

    In order: URLs ``<url>``, UUIDs ``<uuid>``, timestamps ``<time>``, file paths ``<path>``
    (absolute, ``./`` or ``../`` relative, or ``a/b.ext``), hex ``<hex>``, sizes such as
    ``1.23 GiB`` ``<size>``, remaining numbers ``<n>`` (pids included); whitespace collapsed,
    cut at 500 characters. Digits inside identifiers (``DP0``, ``float16``) stay.
    """
    for pattern, placeholder in _PLACEHOLDERS:
        message = pattern.sub(placeholder, message)
    return " ".join(message.split())[:MAX_MESSAGE]


_PLACEHOLDERS = [
    (re.compile(r"https?://\S+"), "<url>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (
        re.compile(
            r"\b(?:\d{4}-)?\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
            r"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?"
        ),
        "<time>",
    ),
    (re.compile(r"(?<![\w.<>/-])(?:\.{1,2})?/[^\s'\"`,:;()\[\]{}<>]+|\b[\w.-]+(?:/[\w.-]+)+\.[A-Za-z]\w*\b"), "<path>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:[KMGTP]i?B|bytes)\b"), "<size>"),
    (re.compile(r"\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b"), "<n>"),
]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# "(EngineCore_DP0 pid=1234) " from vLLM's per-process stdout, "ERROR 11-30 00:01:02 [core.py:123] " from its logger.
_PROCESS_PREFIX = re.compile(r"\(([\w.-]+ pid=\d+)(?:, ip=[\d.]+)?\) ?")
_LOGGER_PREFIX = re.compile(
    r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) +\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? +\[[^\]]*\] ?"
)
_TRACEBACK_START = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s+File "([^"]+)", line \d+, in (\S+)')
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?::\s*(.*))?$")
_WRAPPER = re.compile(r"(?:see|check)(?: the)? stack trace \(?above\)?|see root cause above", re.IGNORECASE)
_CUDA_LINE = re.compile(r"CUDA error: .*|CUDA out of memory.*")
_FAULTHANDLER_START = ("Current thread 0x", "Stack (most recent call first)")
_FAULTHANDLER_FRAME = re.compile(r'^\s+File "([^"]+)", line \d+ in (\S+)')
_SITE = re.compile(r"/(?:site|dist)-packages/|/lib/python\d+(?:\.\d+)?/")


class _Traceback(NamedTuple):
    start: int  # line number in the log
    exc_type: str
    message: str
    frames: list[tuple[str, str]]  # (path, function), outermost first, as Python prints them


def _sign(kind: CrashKind, exc_type: str | None, message: str, frames: tuple[str, ...]) -> CrashInfo:
    digest = hashlib.sha256("\n".join([kind.value, exc_type or "", message, *frames]).encode()).hexdigest()
    return CrashInfo(kind=kind, exception_type=exc_type, message=message, frames=frames, signature=digest)


def _streams(log: str) -> list[list[tuple[int, str]]]:
    """The log's lines split by process, each as ``(line number, text)`` with prefixes stripped.

    Processes write concurrently, so one traceback can be cut by another process's lines; each is
    read within its own process (the ``(Name pid=N)`` prefix, or none). A prefix glued after a
    progress bar (no newline) still counts.
    """
    streams: dict[str, list[tuple[int, str]]] = {}
    for number, line in enumerate(log.splitlines()):
        line = _ANSI.sub("", line)
        process = _PROCESS_PREFIX.search(line)
        if process:
            line = line[process.end() :]
        streams.setdefault(process.group(1) if process else "", []).append((number, _LOGGER_PREFIX.sub("", line)))
    return list(streams.values())


def _tracebacks(stream: list[tuple[int, str]]) -> list[_Traceback]:
    """Every traceback in one process's lines, in order.

    The message is the exception line's text plus the indented lines after it, and any line that
    heads indented ones (pydantic prints each invalid field so, its errors indented below).
    Chained exceptions print their cause first, so log order is cause order.
    """
    found = []
    i = 0
    while i < len(stream):
        start, line = stream[i]
        i += 1
        if line.strip() != _TRACEBACK_START:
            continue
        frames = []
        while i < len(stream) and (_indented(stream, i) or not stream[i][1].strip()):
            frame = _FRAME.match(stream[i][1])
            if frame:
                frames.append((frame.group(1), frame.group(2)))
            i += 1
        exception = _EXCEPTION_LINE.match(stream[i][1].strip()) if i < len(stream) else None
        if exception is None:
            continue
        message = [exception.group(2) or ""]
        i += 1
        while (
            i < len(stream)
            and stream[i][1].strip() not in ("", _TRACEBACK_START)
            and (_indented(stream, i) or _indented(stream, i + 1))
        ):
            message.append(stream[i][1].strip())
            i += 1
        found.append(_Traceback(start, exception.group(1), " ".join(message).strip(), frames))
    return found


def _indented(stream: list[tuple[int, str]], i: int) -> bool:
    return i < len(stream) and stream[i][1].startswith((" ", "\t")) and bool(stream[i][1].strip())


def _root_exception(tracebacks: list[_Traceback]) -> tuple[_Traceback, bool] | None:
    """The first traceback that is not a wrapper, else the first wrapper; and whether it is one."""
    for traceback in tracebacks:
        if not _is_wrapper(traceback):
            return traceback, False
    return (tracebacks[0], True) if tracebacks else None


def _is_wrapper(traceback: _Traceback) -> bool:
    return traceback.exc_type.endswith("EngineDeadError") or bool(_WRAPPER.search(traceback.message))


def _cuda_kind(text: str) -> CrashKind | None:
    lowered = text.lower()
    if "illegal memory access" in lowered:
        return CrashKind.CUDA_ILLEGAL_MEMORY_ACCESS
    if "device-side assert" in lowered:
        return CrashKind.CUDA_DEVICE_ASSERT
    if "out of memory" in lowered or "outofmemoryerror" in lowered:
        return CrashKind.OUT_OF_MEMORY
    if "cuda error" in lowered:
        return CrashKind.CUDA_ERROR
    return None


def _render(frames: list[tuple[str, str]]) -> tuple[str, ...]:
    """``module:function``, innermost first, at most 5: vLLM's own frames if there are any."""
    innermost_first = frames[::-1]
    inside = [(path, function) for path, function in innermost_first if "/vllm/" in path]
    return tuple(f"{_module(path)}:{function}" for path, function in (inside or innermost_first)[:MAX_FRAMES])


def _module(path: str) -> str:
    """``.../site-packages/vllm/v1/engine/core.py`` -> ``vllm.v1.engine.core``; else the file's stem."""
    if "/vllm/" in path:
        tail = "vllm/" + path[path.rfind("/vllm/") + len("/vllm/") :]
    else:
        site = list(_SITE.finditer(path))
        tail = path[site[-1].end() :] if site else path.rsplit("/", 1)[-1]
    tail = tail.removesuffix(".py").removesuffix("/__init__")
    return tail.replace("/", ".")


def _faulthandler(lines: list[str]) -> list[tuple[str, str]]:
    """Frames of the crashing thread in a ``faulthandler`` dump, outermost first (it prints innermost first)."""
    start = next((i for i, line in enumerate(lines) if line.startswith(_FAULTHANDLER_START)), None)
    frames = []
    for line in lines[start + 1 :] if start is not None else []:
        frame = _FAULTHANDLER_FRAME.match(line)
        if frame is None:
            break
        frames.append((frame.group(1), frame.group(2)))
    return frames[::-1]


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return str(number)
