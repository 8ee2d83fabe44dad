"""Python tracebacks in a vLLM log, their exceptions, and the wrappers that point at another one.

A traceback is a header line (or, in a log cut inside one, its first frame line), indented frame
lines (``File "path", line N, in function``, the code, carets), then the exception line ``Type:
message``. The message goes on over:

- indented lines, and a line that heads indented ones (pydantic prints each invalid field so);
- the next non-blank line when it ends with ``:`` (``BackendCompilerFailed: backend='inductor'
  raised:`` then the inner exception);
- every line up to the one that closes the quote of ``Worker failed with error '...'`` (the worker's
  error is quoted whole, line breaks included), at most ``MAX_QUOTED_LINES``.

An ``AssertionError`` without a message takes its ``assert`` statement for one, as pytest shows it
(the innermost frame's source line, or the line just above a bare ``AssertionError``).

Chained exceptions print their cause first, so log order is cause order within a process. The first
``MAX_TRACEBACKS`` traceback headers of each process are read, no more: later ones are consequences.

A traceback **cut** before its exception line (a log excerpt, a log cut at its byte limit, a process
killed while printing) is kept too, with what is left of its exception: the message its header was
glued after (the V0 executors' ``Exception in worker X while processing method M: <message>,
Traceback ...``), and the source lines of its innermost frames (``statements``), where a ``raise
X("...")`` names the exception and its message (``raised``).

A **wrapper** points at a root cause printed elsewhere: ``EngineDeadError``, ``see root cause above``,
``check the stack trace above`` (``Worker failed with error '...'``), ``See stack trace for the root
cause``. An **inner** exception is the cause a compiler's wrapper carries in its own message:
``BackendCompilerFailed: backend='inductor' raised: X: m`` and ``InductorError: X: m`` are ``X: m``.
"""

import bisect
import heapq
import re
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from app.vllmlog.lines import MAX_LINE, TRACEBACK_START, Log, Stream

MAX_QUOTED_LINES = 64
MAX_TRACEBACKS = 1000  # read per process: a cause printed after a thousand tracebacks is not looked for
MAX_FRAMES = 256  # the innermost frames kept: a traceback's cause is in its innermost frames
MAX_STATEMENTS = 8  # a cut traceback's innermost frames whose source lines are kept
MAX_STATEMENT_LINES = 8  # a statement over more lines (a raise with its message split) is cut

_FRAME = re.compile(r'^\s++File "([^"]++)", line \d++, in (\S++)')
_FRAME_TEXT = '  File "'
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*+(?:\([\w.]++\))?)(?::\s*+(.*+))?$")
# A bare exception line outside any traceback: a dotted name whose last part is an exception's,
# found by that ending (at C speed), then read from its line's start.
# Its repr too, ``OutOfMemoryError('CUDA out of memory. ...')``, as V0's engine logs it above the traceback.
# A name alone on its line too (``AssertionError``), which Python prints for an exception without a message.
_ENDINGS = ("Error:", "Exception:", "Failed:", "Error('", 'Error("', "Exception('", 'Exception("')
_EXCEPTION_ENDING = re.compile("|".join(map(re.escape, _ENDINGS)) + r"|(?:Error|Exception)$", re.MULTILINE)
_BARE_EXCEPTION = re.compile(
    r"((?:[A-Za-z_]\w*+\.)*+[A-Z]\w{0,80}?(?:Error|Exception|Failed))(?:: ?(.*+)|\((['\"])(.*+))?"
)
# Before a bare exception: its indentation, and pytest's "E   " on the lines of an exception it reports.
_BARE_LEAD = re.compile(r"\s*+(?:E\s++)?")
_HEADER_END = "] "  # what is left of a logger header where a paste lost the line breaks before it
_WRAPPER = re.compile(
    r"(?:see|check)(?: the)? stack trace \(?above\)?|see root cause above|see stack trace for the root cause",
    re.IGNORECASE,
)
_QUOTED_ERROR = "Worker failed with error '"
_QUOTE_END = "', please check the stack trace above"
_COMPILER_WRAPPERS = ("BackendCompilerFailed", "InductorError")
_INNER = re.compile(r"^(?:backend='\w++' raised:\s*+)?((?:[A-Za-z_]\w*+\.)*+[A-Z]\w*+): ?(.*+)$")
_CARETS = re.compile(r"[\s^~]*+")
# The V0 executors' lead-in before the worker's exception message, glued to the traceback's header.
_LEAD_IN = re.compile(r"Exception in worker \S{1,200}? while processing method \S{1,200}?: ")
_RAISE = re.compile(r"raise ((?:[A-Za-z_]\w*+\.)*+[A-Z]\w*+)\((.*+)")
_LITERAL = re.compile(r'"([^"]*+)"|\'([^\']*+)\'')


class Bare(NamedTuple):
    line: int  # its line number in the log
    exc_type: str
    message: str


class Traceback(NamedTuple):
    start: int  # line number in the log
    exc_type: str
    message: str  # cut at MAX_LINE
    frames: list[tuple[str, str]]  # (path, function), outermost first as Python prints them; the innermost 256
    wrapped_by: str | None = None  # the compiler wrapper an inner exception was taken out of
    cut: bool = False  # no exception line: exc_type is "", message the one its header was glued after, or ""
    statements: tuple[str, ...] = ()  # of a cut traceback: its innermost frames' source lines, innermost last


class Root(NamedTuple):
    """The traceback taken for the cause, whether it is only a wrapper, and the first cut traceback.

    ``traceback`` is the first whole one that is not a wrapper, else the first wrapper, else the
    first cut one (then ``wrapper`` is False and ``traceback.cut`` True).
    """

    traceback: Traceback
    wrapper: bool
    cut: Traceback | None = None


def tracebacks(log: Log) -> Iterator[Traceback]:
    """Every traceback in the log, processes merged in log order, read only as far as they are asked for.

    A log cut inside a traceback starts with its frames: frame lines before any header start one.
    """
    header = log.text.find(TRACEBACK_START)
    headless = _headless(log, header)
    if header == -1 and headless is None:
        return iter(())
    starts = [headless[1] if headless and headless[0] is stream else None for stream in log.streams]
    if len(log.streams) == 1:
        return _stream_tracebacks(log.streams[0], starts[0], log.above)
    streams = (_stream_tracebacks(stream, start, log.above) for stream, start in zip(log.streams, starts, strict=True))
    return heapq.merge(*streams)


def root(found: Iterable[Traceback]) -> Root | None:
    """The first whole traceback that is not a wrapper, its inner exception taken out; else the first
    wrapper; else the first cut traceback (see ``Root``).

    Later tracebacks are consequences of the first: a log of a million tracebacks after the root
    cause costs nothing more.
    """
    first = cut = None
    for traceback in found:
        if traceback.cut:
            cut = cut or traceback
        elif not is_wrapper(traceback.exc_type, traceback.message):
            return Root(unwrap(traceback), False, cut)
        else:
            first = first or traceback
    if first is not None:
        return Root(first, True, cut)
    return None if cut is None else Root(cut, False, cut)


def is_wrapper(exc_type: str | None, message: str) -> bool:
    """Whether an exception only points at a root cause printed elsewhere (see the module docstring)."""
    return bool(exc_type and exc_type.endswith("EngineDeadError")) or bool(_WRAPPER.search(message))


def unwrap(traceback: Traceback) -> Traceback:
    """The inner exception of a compiler's wrapper, else the traceback unchanged."""
    if not traceback.exc_type.endswith(_COMPILER_WRAPPERS):
        return traceback
    inner = _INNER.match(traceback.message)
    if inner is None:
        return traceback._replace(wrapped_by=traceback.exc_type)
    return traceback._replace(exc_type=inner.group(1), message=inner.group(2).strip(), wrapped_by=traceback.exc_type)


def quoted_error(message: str) -> str | None:
    """The worker's error quoted in ``Worker failed with error '...'``, or None."""
    at = message.find(_QUOTED_ERROR)
    if at == -1:
        return None
    end = message.find(_QUOTE_END, at)
    return message[at + len(_QUOTED_ERROR) : end if end != -1 else None].strip()


def raised(statement: str) -> tuple[str, str] | None:
    """(type, message) of a ``raise X("...")`` statement: the string literals in its call, joined as
    Python joins adjacent literals (an f-string's fields stay as written); None for any other statement."""
    found = _RAISE.match(statement)
    if found is None:
        return None
    literals = (a or b for a, b in _LITERAL.findall(found.group(2)[: 4 * MAX_LINE]))
    return found.group(1), "".join(literals).strip()


def bare_exceptions(log: Log) -> Iterator[Bare]:
    """Exception lines outside tracebacks too, in log order (a cut log keeps some).

    Lines that start with the exception (``Type: message``, its repr ``Type('message')``, or ``Type``
    alone), after indentation or pytest's ``E``, or that hold it right after a logger header's ``] ``
    (a paste that lost its line breaks); among the first ``MAX_CANDIDATES`` lines holding an
    exception's ending (``Error:``...). A message that ends with ``:`` goes on over the next line, as
    in a traceback; an ``AssertionError`` alone takes the ``assert`` line above it.
    """
    text = log.text
    if "Error" not in text and "Exception" not in text and "Failed:" not in text:
        return
    number = counted = 0  # line numbers counted on from the last one, once over the text
    for start, at, end in log.candidates(_EXCEPTION_ENDING):
        found = _BARE_EXCEPTION.fullmatch(text, _BARE_LEAD.match(text, start, end).end(), end)
        if found is None and (glued := text.rfind(_HEADER_END, start, at)) != -1:
            found = _BARE_EXCEPTION.fullmatch(text, glued + len(_HEADER_END), end)
        if found is None:
            continue
        exc_type, message, quote, quoted = found.groups()
        message = (message or "") if quote is None else quoted.removesuffix(")").removesuffix(quote)
        number += text.count("\n", counted, start)
        counted = start
        if message.endswith(":") and number + 1 < len(log.lines):
            message = f"{message} {log.lines[number + 1].strip()}"
        elif not message and exc_type == _ASSERTION and number > 0:
            message = _assertion(log.lines[number - 1].strip())
        yield Bare(number, exc_type, message.strip())


_ASSERTION = "AssertionError"


def _assertion(statement: str) -> str:
    """The message an ``AssertionError`` without one gets from its source line: the ``assert`` statement, else ""."""
    return statement if statement.startswith("assert ") else ""


def _headless(log: Log, header: int) -> tuple[Stream, int] | None:
    """(stream, index in it) of a frame line that comes before the log's first traceback header, if any."""
    at = log.text.find(_FRAME_TEXT, 0, None if header == -1 else header)
    if at == -1:
        return None
    number = log.line_number(at)
    for stream in log.streams:
        index = bisect.bisect_left(stream.numbers, number)
        if index < len(stream.numbers) and stream.numbers[index] == number:
            return (stream, index) if _FRAME.match(stream.texts[index]) else None
    return None


def _stream_tracebacks(stream: Stream, headless: int | None, above: dict[int, str]) -> Iterator[Traceback]:
    """Every traceback in one process's lines, in order, read as they are asked for; the first one
    starts at ``headless`` (a frame line) when given. ``above``: the log's glued messages by line number."""
    texts, numbers = stream.texts, stream.numbers
    stripped = list(map(str.strip, texts))
    end = len(texts)
    frame_match, exception_match = _FRAME.match, _EXCEPTION_LINE.match
    i = 0
    for _ in range(MAX_TRACEBACKS):
        if headless is not None:
            start = i = headless
            headless = None
        else:
            try:
                start = stripped.index(TRACEBACK_START, i)  # the lines before are skipped in one call
            except ValueError:
                return
            i = start + 1
        frames = []
        at = []  # the frames' line indices
        while i < end and (not stripped[i] or texts[i].startswith(_INDENT)):
            frame = frame_match(texts[i])
            if frame:
                frames.append(frame.groups())
                at.append(i)
            i += 1
        exception = exception_match(stripped[i]) if i < end else None
        if exception is None:
            message = _lead_message(above.get(numbers[start], ""))
            statements = _statements(stripped, at[-MAX_STATEMENTS:], i)
            yield Traceback(numbers[start], "", message, frames[-MAX_FRAMES:], cut=True, statements=statements)
            continue
        exc_type, text = exception.groups("")
        if not text and exc_type.endswith(_ASSERTION) and at:
            text = _assertion(_statements(stripped, at[-1:], i)[0])
        i += 1
        # Most messages end on their line: the next is blank or another traceback's header.
        if (i < end and stripped[i] not in _ENDS) or (_QUOTED_ERROR in text and _QUOTE_END not in text):
            text, i = _message(texts, stripped, i, text)
        if len(frames) > MAX_FRAMES:
            frames = frames[-MAX_FRAMES:]
        yield Traceback(numbers[start], exc_type, text.strip()[:MAX_LINE], frames)


_INDENT = (" ", "\t")
_ENDS = ("", TRACEBACK_START)


def _lead_message(lead: str) -> str:
    """The exception's message in the text a header was glued after, when a lead-in (``_LEAD_IN``) says
    it is one: other leads (``EngineCore hit an exception:``) only announce the traceback."""
    found = _LEAD_IN.match(lead)
    return lead[found.end() :].rstrip(", ") if found else ""


def _statements(stripped: list[str], at: list[int], end: int) -> tuple[str, ...]:
    """The source lines under each frame line at ``at`` (up to the next frame line, or ``end``), carets
    left out, joined by spaces: at most ``MAX_STATEMENT_LINES`` lines each."""
    statements = []
    for k, first in enumerate(at):
        last = min(at[k + 1] if k + 1 < len(at) else end, first + 1 + MAX_STATEMENT_LINES)
        code = (line for line in stripped[first + 1 : last] if not _CARETS.fullmatch(line))
        statements.append(" ".join(code)[: 2 * MAX_LINE])
    return tuple(statements)


def _message(texts: list[str], stripped: list[str], i: int, text: str) -> tuple[str, int]:
    """The message that goes on from an exception line's ``text`` at line ``i`` (see the module
    docstring), joined by spaces, and the line after it."""
    end = len(texts)

    def indented(k: int) -> bool:
        return k < end and bool(stripped[k]) and texts[k].startswith(_INDENT)

    message = [text]
    if _QUOTED_ERROR in text and _QUOTE_END not in text:
        last = min(end, i + MAX_QUOTED_LINES)
        while i < last and _QUOTE_END not in stripped[i]:
            message.append(stripped[i])
            i += 1
        if i < last:
            message.append(stripped[i])
            i += 1
    elif text.endswith(":") and i < end and stripped[i] not in _ENDS:
        message.append(stripped[i])
        i += 1
    # Kept to twice MAX_LINE, read further by patterns that search all of it: a message of a million
    # indented lines would otherwise hold them (and the GIL) for a second in one regex call. Its
    # lines past that are not read here: the search for the next header passes over them.
    kept = sum(map(len, message))
    while i < end and kept <= 2 * MAX_LINE and stripped[i] not in _ENDS and (indented(i) or indented(i + 1)):
        message.append(stripped[i])
        kept += len(stripped[i]) + 1
        i += 1
    return " ".join(message)[: 2 * MAX_LINE], i
