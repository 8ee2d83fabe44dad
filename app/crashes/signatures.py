"""A crashed cell's log turned into a signature, so that reruns of one bug fall into one group.

As Socorro and Sentry make them: find the root cause, reduce its message to its words
(``app.crashes.normalise``), keep vLLM's own frames without the plumbing (``app.crashes.frames``),
and hash what identifies the cause for its kind. The log is read with ``app.vllmlog``. Pure
functions of the log's text and the cell's configuration.
"""

import hashlib
import re
import signal as signals
from dataclasses import dataclass
from typing import NamedTuple

from app.crashes import kinds, timeouts
from app.crashes.context import CellContext
from app.crashes.frames import innermost, render, site
from app.crashes.normalise import first_sentence, normalise
from app.crashes.titles import title
from app.enums import CrashKind
from app.vllmlog import failures, lines, tracebacks

# The innermost frames a key holds: one, the frame every excerpt of a traceback keeps however far above
# it the paste starts (a deeper key would part two pastes of one traceback cut at different frames).
KEY_FRAMES = 1


@dataclass(frozen=True)
class CrashInfo:
    kind: CrashKind
    exception_type: str | None
    message: str  # normalised
    frames: tuple[str, ...]  # "module:function", innermost first
    title: str
    signature: str  # sha256 hex of the fields that identify the cause for its kind (``_key``)


class _Cause(NamedTuple):
    kind: CrashKind
    exc_type: str | None
    message: str  # as printed
    frames: tuple[str, ...]  # vLLM's own (``frames.render``)
    places: tuple[str, ...] = ()  # any module's (``frames.innermost``), for the title
    statement: str | None = None  # of a traceback cut before its exception: the source line it stops at


def signature_for(
    log: str, *, exit_code: int | None, signal: int | None, timed_out: bool, context: CellContext | None = None
) -> CrashInfo:
    """Classify and sign a crash from its log, how its process ended, and what the cell ran.

    The cause, first found wins:

    1. ``timed_out``: TIMEOUT, ``"timed out"`` (a hang prints nothing useful).
    2. The first traceback that is not a wrapper (``app.vllmlog.tracebacks``), a compiler wrapper's
       inner exception taken out; its kind by ``app.crashes.kinds``. An asynchronous CUDA fault
       beside a device assertion's own line is that KERNEL_ASSERT; a compile or JIT failure beside
       a compiler's error line takes that line for its message.
    3. Failures printed without a Python exception (``app.vllmlog.failures``): a device assertion
       (KERNEL_ASSERT), a C++ CUDA error line, an NCCL watchdog timeout (NCCL_TIMEOUT), a compiler
       error (COMPILE_ERROR).
    4. The first exception line that is not a wrapper, outside any complete traceback (a cut log).
    5. The first traceback cut before its exception line that still says what was raised: the message
       its header was glued after (``Exception in worker X while processing method M: <message>,
       Traceback ...``), or its innermost frame's ``raise X("...")`` line (``CUT_MESSAGE`` without literal).
    6. A start-up refusal that names its cause (``kinds.REFUSALS``: free memory, KV cache) on a line
       without its exception type; a process that says it died of a signal (``Fatal Python error:
       Segmentation fault``, ``*** SIGSEGV received``): SIGNAL, with the frames of its ``faulthandler``
       dump; else a dead worker process (WORKER_DIED).
    7. Only wrappers: the error a ``Worker failed with error '...'`` quotes.
    8. A traceback cut before its exception that says nothing of it, unless a wrapper came before it
       (what follows a wrapper is the shutdown it caused, or the caller's frames): its frames (``CUT_TRACEBACK``).
    9. Only wrappers, in tracebacks or on lines of their own (``EngineDeadError: ...``): the first line
       that says something timed out (``timeouts.timeout_line``: ``RPC call to execute_model timed
       out.``), a TIMEOUT; else ENGINE_DEAD.
    10. ``signal``: SIGNAL, ``"killed by signal SIGSEGV"``, frames from a ``faulthandler`` dump.
    11. EXIT, ``"exit code N"``: a log that holds any traceback never comes to this.

    A timeout is named by what timed out (``_as_timeout``): a cancelled task (``CancelledError``) is
    what a timeout did to it, so the log's first timeout is the cause in its place; a timeout without
    a message (``raise TimeoutError``, as vLLM's message queue and asyncio raise it) takes the words of
    the first line that says what timed out (the engine core's ``RPC call to execute_model timed out.``
    that it is re-raised as, V0's ``Engine iteration timed out.``); and a timeout beside torch's NCCL
    watchdog line is that collective's (NCCL_TIMEOUT: the RPC waited on ranks stuck in it).

    What is hashed, by kind, as fingerprint rules do (never the exception's type, which vLLM and
    torch change between releases, nor line numbers):

    - an asynchronous CUDA fault (illegal memory access, device-side assert, kernel assertion,
      misaligned address, launch failure): its kind, the message's first sentence and ``context``
      (its stack shows only where the fault was noticed);
    - FREE_MEMORY and KV_CACHE_TOO_SMALL: their kind (one cause, whatever the sizes and versions),
      of KV_CACHE_TOO_SMALL with which shortage (``kinds.kv_cache_shortage``);
    - NCCL, worker, compile and JIT failures and exits: kind and first sentence (of an NCCL error, its
      name);
    - OUT_OF_MEMORY: its kind and innermost frame (sizes say nothing of the cause);
    - CAPTURE_ERROR and SIGNAL: kind, first sentence and the innermost frame (which operation);
    - an ``AssertionError`` without a message of its own: kind and its innermost frame, never the
      ``assert`` statement it is shown by (an excerpt without the frames' source lines has none);
    - any other exception, and a timeout: kind and first sentence, which a log cut anywhere keeps; with
      the innermost frame when the sentence has fewer than 4 words and so names no cause by itself;
      of a cut traceback, always with the frame it stops at and that frame's source line.

    Frames are vLLM's own innermost first (``frames.render``), and a key holds at most one
    (``KEY_FRAMES``): the innermost, which every excerpt of a traceback that shows its exception keeps,
    wherever above it the paste begins.

    Parameters
    ----------
    log : str
        The cell's combined stdout and stderr, prefixes and colours included.
    exit_code, signal : int or None
        How the process ended (``signal`` as a number, e.g. 11).
    timed_out : bool
        The worker killed it at the cell's timeout.
    context : CellContext, optional
        What the cell ran (``app.crashes.context.cell_context``); None where unknown.

    Notes
    -----
    O(len(log)) whatever the log holds: lines are cut at 8 KB before any pattern reads them, each
    pattern is linear, tracebacks are read only as far as the root cause, and a message is
    normalised from its first 2,000 characters. Never raises on odd logs: the worst case is an
    EXIT or SIGNAL signature.
    """
    if timed_out:
        return _sign(_Cause(CrashKind.TIMEOUT, None, "timed out", ()), None)
    # A log of nothing but whitespace says nothing: only how the process ended is left.
    read = lines.read("" if log.isspace() else log)
    cause = _cause(read)
    if cause is None and signal is not None:
        frames = render(failures.faulthandler_frames(read))
        cause = _Cause(CrashKind.SIGNAL, None, f"killed by signal {_signal_name(signal)}", frames)
    if cause is None:
        cause = _Cause(CrashKind.EXIT, None, f"exit code {'unknown' if exit_code is None else exit_code}", ())
    return _sign(cause, context)


def _cause(log: lines.Log) -> _Cause | None:
    """Steps 2 to 9 of ``signature_for``, a timeout named by what timed out (``_as_timeout``)."""
    cause = _first_cause(log)
    return None if cause is None else _as_timeout(cause, log)


def _first_cause(log: lines.Log) -> _Cause | None:
    """Steps 2 to 9 of ``signature_for`` as the log's tracebacks and lines give them, before ``_as_timeout``
    names a timeout by what timed out (and finds the one a wrapper's log shows)."""
    found = tracebacks.root(tracebacks.tracebacks(log))
    if found is not None and not found.wrapper and not found.traceback.cut:
        traceback = found.traceback
        paths = [path for path, _ in traceback.frames]
        kind = kinds.classify(traceback.exc_type, traceback.message, paths, traceback.wrapped_by)
        cause = _Cause(kind, traceback.exc_type, traceback.message, render(traceback.frames), innermost(traceback.frames))
        return _refined(cause, log)
    for kind, finder in _LOG_ONLY:
        hit = finder(log)
        if hit is not None:
            return _Cause(kind or kinds.classify(None, hit.message), None, hit.message, ())
    bare_wrapper = None
    for bare in tracebacks.bare_exceptions(log):
        if not tracebacks.is_wrapper(bare.exc_type, bare.message):
            return _Cause(kinds.classify(bare.exc_type, bare.message), bare.exc_type, bare.message, ())
        bare_wrapper = bare_wrapper or bare
    cut = None if found is None or found.cut is None else _cut(found.cut)
    if cut is not None and cut.message != CUT_TRACEBACK:
        return _refined(cut, log)
    refusal = failures.line_with(log, kinds.REFUSALS)
    if refusal is not None:
        return _Cause(kinds.classify(None, refusal.message), None, refusal.message, ())
    fatal = failures.fatal_signal(log)
    if fatal is not None:
        return _Cause(CrashKind.SIGNAL, None, fatal.message, render(failures.faulthandler_frames(log)))
    died = failures.worker_died(log)
    if died is not None:
        return _Cause(CrashKind.WORKER_DIED, None, died.message, ())
    wrapper = found.traceback if found is not None and found.wrapper else None
    quoted = tracebacks.quoted_error(wrapper.message) if wrapper is not None else None
    if quoted:
        return _Cause(kinds.classify(None, quoted), None, quoted, ())
    first_wrapper = min(
        (line for line in (wrapper and wrapper.start, bare_wrapper and bare_wrapper.line) if line is not None),
        default=None,
    )
    if cut is not None and (first_wrapper is None or found.cut.start < first_wrapper):
        return cut
    if wrapper is not None:
        return _Cause(CrashKind.ENGINE_DEAD, wrapper.exc_type, wrapper.message, render(wrapper.frames))
    if bare_wrapper is not None:
        return _Cause(CrashKind.ENGINE_DEAD, bare_wrapper.exc_type, bare_wrapper.message, ())
    return cut


# What a cut traceback's message is when none is left: the exception's type without it, or nothing.
CUT_MESSAGE = "message cut off"
CUT_TRACEBACK = "traceback cut before its exception line"


def _cut(traceback: tracebacks.Traceback) -> _Cause:
    """The cause a traceback cut before its exception line shows (steps 5 and 8 of ``signature_for``)."""
    raised = tracebacks.raised(traceback.statements[-1]) if traceback.statements else None
    exc_type, message = raised or (None, "")
    message = message or traceback.message or (CUT_MESSAGE if exc_type else CUT_TRACEBACK)
    paths = [path for path, _ in traceback.frames]
    frame, statement = site(traceback.frames, traceback.statements)
    frames = render(traceback.frames) or ((frame,) if frame else ())
    kind = kinds.classify(exc_type, message, paths)
    return _Cause(kind, exc_type, message, frames, statement=" ".join(statement.split()))


# Failures without a Python exception, in the order they are looked for: (kind, or None for the
# kind of the line's own words, finder).
_LOG_ONLY = [
    (CrashKind.KERNEL_ASSERT, failures.kernel_assert),
    (None, failures.cuda_line),
    (CrashKind.NCCL_TIMEOUT, failures.nccl_timeout),
    (CrashKind.NCCL_TIMEOUT, timeouts.nccl_work_timeout),
    (CrashKind.COMPILE_ERROR, failures.compiler_error),
]


def _refined(cause: _Cause, log: lines.Log) -> _Cause:
    """A traceback's cause made precise by a line that names it (see step 2 of ``signature_for``)."""
    if kinds.is_asynchronous(cause.kind, cause.message):
        assertion = failures.kernel_assert(log)
        if assertion is not None:
            return cause._replace(kind=CrashKind.KERNEL_ASSERT, message=assertion.message)
    if cause.kind in (CrashKind.COMPILE_ERROR, CrashKind.JIT_ERROR):
        error = failures.compiler_error(log)
        if error is not None:
            return cause._replace(message=error.message)
    return cause


_TIMEOUTS = (CrashKind.TIMEOUT, CrashKind.NCCL_TIMEOUT)
_CANCELLED = "CancelledError"  # asyncio's and concurrent.futures': a task something else cancelled


def _as_timeout(cause: _Cause, log: lines.Log) -> _Cause:
    """The cause named by the timeout the log shows, if it shows one (see ``signature_for``).

    A cancelled task is replaced by the log's first timeout (``_first_timeout``); the engine's death
    (ENGINE_DEAD) by the first line that says something timed out; a TIMEOUT without a message takes
    that line's words; a TIMEOUT or NCCL_TIMEOUT beside torch's watchdog line takes the watchdog's
    words, ``collective operation timeout: OpType=X``, so that an excerpt of the watchdog line alone
    signs alike.
    """
    if (cause.exc_type or "").endswith(_CANCELLED):
        cause = _first_timeout(log) or cause
    elif cause.kind is CrashKind.ENGINE_DEAD:
        line = timeouts.timeout_line(log)
        if line is not None:
            cause = _Cause(kinds.classify(None, line.message), None, line.message, ())
    if cause.kind is CrashKind.TIMEOUT and not cause.message.strip():
        line = timeouts.timeout_line(log)
        if line is not None:
            cause = cause._replace(message=line.message)
    if cause.kind in _TIMEOUTS:
        watchdog = failures.nccl_timeout(log) or timeouts.nccl_work_timeout(log)
        if watchdog is not None:
            cause = cause._replace(kind=CrashKind.NCCL_TIMEOUT, message=watchdog.message)
    return cause


def _first_timeout(log: lines.Log) -> _Cause | None:
    """The log's first timeout: of its whole tracebacks that are not wrappers, then of its exception lines,
    then of its lines that say something timed out (``timeouts.timeout_line``); None if it has none."""
    for traceback in tracebacks.tracebacks(log):
        if traceback.cut or tracebacks.is_wrapper(traceback.exc_type, traceback.message):
            continue
        traceback = tracebacks.unwrap(traceback)
        paths = [path for path, _ in traceback.frames]
        kind = kinds.classify(traceback.exc_type, traceback.message, paths, traceback.wrapped_by)
        if kind in _TIMEOUTS:
            return _Cause(kind, traceback.exc_type, traceback.message, render(traceback.frames), innermost(traceback.frames))
    for bare in tracebacks.bare_exceptions(log):
        kind = kinds.classify(bare.exc_type, bare.message)
        if kind in _TIMEOUTS and not tracebacks.is_wrapper(bare.exc_type, bare.message):
            return _Cause(kind, bare.exc_type, bare.message, ())
    line = timeouts.timeout_line(log)
    return None if line is None else _Cause(kinds.classify(None, line.message), None, line.message, ())


# Causes whose message is made here, from what the log says, rather than printed by the crashed code
# (a TIMEOUT's is the log's words, or "timed out" of a cell killed at its timeout: normalised alike).
_OWN_WORDS = (CrashKind.SIGNAL, CrashKind.EXIT, CrashKind.WORKER_DIED, CrashKind.NCCL_TIMEOUT)


def _sign(cause: _Cause, context: CellContext | None) -> CrashInfo:
    message = cause.message if cause.kind in _OWN_WORDS else normalise(cause.message)
    asynchronous = kinds.is_asynchronous(cause.kind, message)
    sentence = first_sentence(message)
    key = _key(
        cause.kind, sentence, cause.frames, context, asynchronous=asynchronous, statement=cause.statement,
        assertion=_bare_assertion(cause),
    )
    return CrashInfo(
        kind=cause.kind,
        exception_type=cause.exc_type,
        message=message,
        frames=cause.frames,
        title=title(cause.kind, cause.exc_type, message, cause.places or cause.frames, context, asynchronous=asynchronous),
        signature=hashlib.sha256("\n".join(key).encode()).hexdigest(),
    )


def _bare_assertion(cause: _Cause) -> bool:
    """Whether the cause is an ``AssertionError`` without a message of its own: none, or the ``assert``
    statement its innermost frame's source line shows (``app.vllmlog.tracebacks``), which an excerpt
    without the frames' source lines does not have."""
    message = cause.message.strip()
    return (cause.exc_type or "").endswith("AssertionError") and (not message or message.startswith("assert "))


_BY_SENTENCE = (CrashKind.NCCL_TIMEOUT, CrashKind.WORKER_DIED, CrashKind.COMPILE_ERROR, CrashKind.JIT_ERROR, CrashKind.EXIT)
_BY_FRAMES = (CrashKind.CAPTURE_ERROR, CrashKind.SIGNAL)
# ncclGetErrorString's words for each ncclResult_t that is an error.
_NCCL_REASONS = (
    "unhandled system error", "unhandled cuda error", "internal error", "invalid usage", "invalid argument",
    "remote process exited or there was a network error",
)
_NCCL_REASON = re.compile("|".join(_NCCL_REASONS))
_NCCL_PREFIX = "nccl error: "
# A message cut mid-word ("NCCL error: unhandled syst") keeps the one reason it begins, from this many characters.
_REASON_START = 4
# A first sentence of fewer words names no cause by itself ("'model.layers.<n>'", "drafting failed").
SPECIFIC_WORDS = 4


def _key(
    kind: CrashKind, sentence: str, frames: tuple[str, ...], context: CellContext | None, *, asynchronous: bool,
    statement: str | None = None, assertion: bool = False,
) -> list[str]:
    """What identifies the cause for its kind (see ``signature_for``), one field a line; ``statement``
    is a cut traceback's (``_Cause.statement``); ``assertion``, whether it is an ``AssertionError``
    without a message of its own (``_bare_assertion``)."""
    if asynchronous:
        return [kind.value, sentence, *(context.key() if context else [])]
    if assertion and frames:
        return [kind.value, "assert", *frames[:KEY_FRAMES]]
    if kind is CrashKind.KV_CACHE_TOO_SMALL:
        return [kind.value, kinds.kv_cache_shortage(sentence)]
    if kind is CrashKind.FREE_MEMORY:
        return [kind.value]
    if kind in _BY_SENTENCE:
        return [kind.value, sentence]
    if kind is CrashKind.NCCL_ERROR:
        return [kind.value, _nccl_reason(sentence)]
    if kind is CrashKind.OUT_OF_MEMORY:
        return [kind.value, *frames[:KEY_FRAMES]]
    if kind in _BY_FRAMES:
        return [kind.value, sentence, *frames[:KEY_FRAMES]]
    if statement is not None:
        return [kind.value, sentence, *frames[:KEY_FRAMES], statement]
    return [kind.value, sentence, *(frames[:KEY_FRAMES] if len(sentence.split()) < SPECIFIC_WORDS else ())]


def _nccl_reason(sentence: str) -> str:
    """The NCCL error's reason (``_NCCL_REASONS``), whole or the one its cut words begin; else the sentence."""
    reason = _NCCL_REASON.search(sentence)
    if reason:
        return reason.group()
    at = sentence.lower().rfind(_NCCL_PREFIX)
    tail = sentence[at + len(_NCCL_PREFIX) :].lower() if at != -1 else ""
    begun = [reason for reason in _NCCL_REASONS if len(tail) >= _REASON_START and reason.startswith(tail)]
    return begun[0] if len(begun) == 1 else sentence


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return str(number)
