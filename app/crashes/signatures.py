"""A crashed cell's log turned into a signature, so that reruns of one bug fall into one group.

As Socorro and syzkaller do: find the root-cause exception, reduce its message to its words
(addresses, numbers, paths, pids, times, UUIDs and sizes become placeholders), keep the innermost
frames inside vLLM without line numbers, and hash the lot. Pure functions of the log text.
"""

import hashlib
import heapq
import re
import signal as signals
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from app.enums import CrashKind

MAX_FRAMES = 5
MAX_MESSAGE = 500
MAX_SCANNED_MESSAGE = 4 * MAX_MESSAGE
MAX_LINE = 8192


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
    O(len(log)) whatever the log holds: each pattern runs in time linear in the text it reads,
    lines and messages are read to 8 KB (``MAX_LINE``), and a message is normalised from its
    first 2,000 characters. Never raises on odd logs: the worst case is an EXIT or SIGNAL signature.
    """
    if timed_out:
        return _sign(CrashKind.TIMEOUT, None, "timed out", ())
    if "\x1b" in log:
        log = _ANSI.sub("", log)  # no colour sequence holds a line break: the same as line by line
    lines, streams = _streams(log)
    # In log order across processes, read only as far as the root cause: a log of a million
    # tracebacks after it costs nothing more, nor one without any.
    tracebacks = heapq.merge(*(_tracebacks(stream) for stream in streams)) if _TRACEBACK_START in log else ()
    chosen = _root_exception(tracebacks)
    if chosen is not None:
        (_, exc_type, message, frames), wrapper = chosen
        kind = _cuda_kind(f"{exc_type} {message}") or (CrashKind.ENGINE_DEAD if wrapper else CrashKind.EXCEPTION)
        return _sign(kind, exc_type, normalise(message), _render(frames))
    # The lines are searched joined, in one call each: no line holds a line break, so a match ends
    # at its line's end as when each line was searched alone.
    text = "\n".join(lines)
    found = _CUDA_LINE.search(text)
    if found:
        return _sign(_cuda_kind(found.group()), None, normalise(found.group()), ())
    if signal is not None:
        frames = _render(_faulthandler(lines, text))
        return _sign(CrashKind.SIGNAL, None, f"killed by signal {_signal_name(signal)}", frames)
    return _sign(CrashKind.EXIT, None, f"exit code {'unknown' if exit_code is None else exit_code}", ())


def normalise(message: str) -> str:
    """Replace what changes between runs of one bug with placeholders; keep the words.

    In order: the message cut to its first 2,000 characters (``MAX_SCANNED_MESSAGE``); URLs
    ``<url>``, UUIDs ``<uuid>``, timestamps ``<time>``, file paths ``<path>`` (absolute, ``./`` or
    ``../`` relative, or ``a/b.ext``), hex ``<hex>``, sizes such as ``1.23 GiB`` ``<size>``,
    remaining numbers ``<n>`` (pids included); whitespace collapsed, cut at 500 characters. Digits
    inside identifiers (``DP0``, ``float16``) stay. A message of any length costs at most the time
    of 2,000 characters, as every pattern is linear in the text it reads.
    """
    # The message is the crashed code's own text, of any length: cut before any pattern reads it.
    # 4x the kept length, because placeholders and collapsed whitespace shrink the text, so that
    # messages of long paths or URLs still fill their 500 characters.
    message = message[:MAX_SCANNED_MESSAGE]
    for pattern, placeholder in _PLACEHOLDERS:
        message = pattern.sub(placeholder, message)
    return " ".join(message.split())[:MAX_MESSAGE]


# Every pattern here reads text the crashed code printed, so each must run in time linear in it
# whatever the text: a quantifier that the next token cannot follow into is possessive (``++``,
# ``*+``; the same matches, minus the retries), and no pattern may try again, from each later
# start, characters that an earlier start already read to the end.

# "a/b.ext": the run of "/"-joined words is taken whole and possessively, then ``_RELATIVE_PATH``
# (once the whole pattern) reads it once, from its start, for the path it begins with. On its own
# it was tried again from every word boundary inside a run, each try reading to the run's end: 12 s
# on "a." * 16000. A try inside a run finds nothing that the try at its start did not, so the run
# is passed over whole, and the matches are the same.
_RELATIVE_PATH = re.compile(r"\b[\w.-]+(?:/[\w.-]+)+\.[A-Za-z]\w*\b")
_PATH = re.compile(
    r"(?<![\w.<>/-])(?:\.{1,2})?/[^\s'\"`,:;()\[\]{}<>]++"  # absolute, ./ or ../
    r"|(?P<run>\b[\w.-]++(?:/[\w.-]++)*+)"
)


def _path(found: re.Match[str]) -> str:
    """``<path>`` for an absolute path; for a run, its path prefix replaced, if it has one."""
    if found.group("run") is None:
        return "<path>"
    path = _RELATIVE_PATH.match(found.string, found.start())
    return found.group() if path is None else "<path>" + found.string[path.end() : found.end()]


_PLACEHOLDERS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"https?://\S++"), "<url>"),
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<uuid>"),
    (
        re.compile(
            r"\b(?:\d{4}-)?\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d++)?(?:Z|[+-]\d{2}:?\d{2})?"
            r"|\b\d{2}:\d{2}:\d{2}(?:[.,]\d++)?"
        ),
        "<time>",
    ),
    (_PATH, _path),
    (re.compile(r"\b0x[0-9a-fA-F]++\b"), "<hex>"),
    (re.compile(r"\b\d++(?:\.\d++)?\s?(?:[KMGTP]i?B|bytes)\b"), "<size>"),
    (re.compile(r"\b\d++(?:\.\d++)?(?:[eE][-+]?\d++)?\b"), "<n>"),
]

_ANSI = re.compile(r"\x1b\[[0-9;]*+[A-Za-z]")
# "(EngineCore_DP0 pid=1234) " from vLLM's per-process stdout, "ERROR 11-30 00:01:02 [core.py:123] " from its logger.
_PROCESS_PREFIX = re.compile(r"\(([\w.-]++ pid=\d++)(?:, ip=[\d.]++)?\) ?")
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_LOGGER_PREFIX = re.compile(
    r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) ++\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d++)? ++\[[^\]]*+\] ?"
)
_LINE_BREAK = re.compile(r"[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # where str.splitlines splits
_TRACEBACK_START = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s++File "([^"]++)", line \d++, in (\S++)')
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*+)(?::\s*+(.*+))?$")
_WRAPPER = re.compile(r"(?:see|check)(?: the)? stack trace \(?above\)?|see root cause above", re.IGNORECASE)
_CUDA_LINE = re.compile(r"CUDA error: .*+|CUDA out of memory.*+")
_FAULTHANDLER_START = re.compile(r"^(?:Current thread 0x|Stack \(most recent call first\))", re.MULTILINE)
_FAULTHANDLER_FRAME = re.compile(r'^\s++File "([^"]++)", line \d++ in (\S++)')
_SITE = re.compile(r"/(?:site|dist)-packages/|/lib/python\d++(?:\.\d++)?/")


class _Traceback(NamedTuple):
    start: int  # line number in the log
    exc_type: str
    message: str
    frames: list[tuple[str, str]]  # (path, function), outermost first, as Python prints them


def _sign(kind: CrashKind, exc_type: str | None, message: str, frames: tuple[str, ...]) -> CrashInfo:
    digest = hashlib.sha256("\n".join([kind.value, exc_type or "", message, *frames]).encode()).hexdigest()
    return CrashInfo(kind=kind, exception_type=exc_type, message=message, frames=frames, signature=digest)


class _Stream(NamedTuple):
    numbers: Sequence[int]  # each line's number in the log
    texts: list[str]


def _streams(log: str) -> tuple[list[str], list[_Stream]]:
    """The log's lines with prefixes stripped, in log order and split by process.

    Processes write concurrently, so one traceback can be cut by another process's lines; each is
    read within its own process (the ``(Name pid=N)`` prefix, or none). A prefix glued after a
    progress bar (no newline) still counts. Lines are cut at 8 KB (``MAX_LINE``); ``log`` has no
    colours left.

    A log can be millions of lines: where a prefix occurs nowhere in the log, it is not looked for
    line by line, and no line becomes an object of its own beyond its text.
    """
    lines = log.splitlines()
    # A line of the log is whatever the crashed code printed: a dumped tensor, a runaway print
    # without newlines, megabytes long. Every later step reads each line again (prefixes, frame,
    # exception, CUDA line), and the message taken from it is read only to 2,000 characters;
    # cutting here bounds that work per line. Past 8 KB a line can only add kind keywords to a
    # message, and vLLM and PyTorch print those at its start.
    if _has_long_line(log, lines):
        lines = [line[:MAX_LINE] for line in lines]
    if " pid=" not in log:
        if any(level in log for level in _LEVELS):
            lines = [_LOGGER_PREFIX.sub("", line) if line.startswith(_LEVELS) else line for line in lines]
        return lines, [_Stream(range(len(lines)), lines)]
    ordered = []
    streams: dict[str, _Stream] = {}
    for number, line in enumerate(lines):
        process = _PROCESS_PREFIX.search(line) if " pid=" in line else None
        if process:
            line = line[process.end() :]
        if line.startswith(_LEVELS):
            line = _LOGGER_PREFIX.sub("", line)
        ordered.append(line)
        name = process.group(1) if process else ""
        stream = streams.get(name)
        if stream is None:
            stream = streams[name] = _Stream([], [])
        stream.numbers.append(number)
        stream.texts.append(line)
    return ordered, list(streams.values())


def _has_long_line(log: str, lines: list[str]) -> bool:
    """Whether one of ``log``'s ``lines`` is longer than ``MAX_LINE``, without a step per line.

    Such a line holds a whole block of ``MAX_LINE // 2`` characters (blocks laid end to end from
    the log's start) with no line break in it; lengths are compared only when a block has none.
    """
    block = MAX_LINE // 2
    starts = range(0, len(log) - block + 1, block)
    unbroken = any(_LINE_BREAK.search(log, start, start + block) is None for start in starts)
    return unbroken and max(map(len, lines)) > MAX_LINE


def _tracebacks(stream: _Stream) -> Iterator[_Traceback]:
    """Every traceback in one process's lines, in order, read as they are asked for.

    The message is the exception line's text plus the indented lines after it, and any line that
    heads indented ones (pydantic prints each invalid field so, its errors indented below), cut at
    8 KB (``MAX_LINE``). Chained exceptions print their cause first, so log order is cause order.
    """
    texts = stream.texts
    stripped = list(map(str.strip, texts))
    end = len(texts)

    def indented(i: int) -> bool:
        return i < end and bool(stripped[i]) and texts[i].startswith((" ", "\t"))

    i = 0
    while True:
        try:
            start = stripped.index(_TRACEBACK_START, i)  # the lines before are skipped in one call
        except ValueError:
            return
        i = start + 1
        frames = []
        while i < end and (not stripped[i] or texts[i].startswith((" ", "\t"))):
            frame = _FRAME.match(texts[i])
            if frame:
                frames.append(frame.groups())
            i += 1
        exception = _EXCEPTION_LINE.match(stripped[i]) if i < end else None
        if exception is None:
            continue
        exc_type, text = exception.groups("")
        message = [text]
        i += 1
        while i < end and stripped[i] not in ("", _TRACEBACK_START) and (indented(i) or indented(i + 1)):
            message.append(stripped[i])
            i += 1
        # Read further by _cuda_kind and _WRAPPER, which search all of it: a message of a million
        # indented lines would otherwise hold them (and the GIL) for a second in one regex call.
        yield _Traceback(stream.numbers[start], exc_type, " ".join(message).strip()[:MAX_LINE], frames)


def _root_exception(tracebacks: Iterable[_Traceback]) -> tuple[_Traceback, bool] | None:
    """The first traceback that is not a wrapper, else the first wrapper; and whether it is one."""
    first = None
    for traceback in tracebacks:
        if not _is_wrapper(traceback):
            return traceback, False
        if first is None:
            first = traceback
    return None if first is None else (first, True)


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


def _faulthandler(lines: list[str], text: str) -> list[tuple[str, str]]:
    """Frames of the crashing thread in a ``faulthandler`` dump, outermost first (it prints innermost first).

    ``text`` is ``lines`` joined by newlines, where the dump's first line is found in one search.
    """
    found = _FAULTHANDLER_START.search(text)
    start = text.count("\n", 0, found.start()) if found else None
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
