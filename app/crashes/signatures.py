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

from app.crashes import kinds
from app.crashes.context import CellContext
from app.crashes.frames import innermost, render
from app.crashes.normalise import first_sentence, normalise
from app.crashes.titles import title
from app.enums import CrashKind
from app.vllmlog import failures, lines, tracebacks

KEY_FRAMES = 3


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
    5. A dead worker process (WORKER_DIED).
    6. Only wrappers: the error a ``Worker failed with error '...'`` quotes, else ENGINE_DEAD.
    7. ``signal``: SIGNAL, ``"killed by signal SIGSEGV"``, frames from a ``faulthandler`` dump.
    8. EXIT, ``"exit code N"``.

    What is hashed, by kind, as fingerprint rules do (never the exception's type, which vLLM and
    torch change between releases, nor line numbers):

    - an asynchronous CUDA fault (illegal memory access, device-side assert, kernel assertion,
      misaligned address, launch failure): its kind, the message's first sentence and ``context``
      (its stack shows only where the fault was noticed);
    - FREE_MEMORY and KV_CACHE_TOO_SMALL: their kind (one cause, whatever the sizes and versions);
    - NCCL, worker, compile and JIT failures, timeouts and exits: kind and first sentence (of an NCCL
      error, its name);
    - OUT_OF_MEMORY: its kind and innermost frame (sizes say nothing of the cause);
    - CAPTURE_ERROR and SIGNAL: kind, first sentence and 3 innermost frames (which operation);
    - any other exception: kind and first sentence, which a log cut anywhere keeps; with the
      innermost frame when the sentence has fewer than 4 words and so names no cause by itself.

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
    """Steps 2 to 6 of ``signature_for``."""
    found = tracebacks.root(tracebacks.tracebacks(log))
    if found is not None and not found.wrapper:
        traceback = found.traceback
        paths = [path for path, _ in traceback.frames]
        kind = kinds.classify(traceback.exc_type, traceback.message, paths, traceback.wrapped_by)
        cause = _Cause(kind, traceback.exc_type, traceback.message, render(traceback.frames), innermost(traceback.frames))
        return _refined(cause, log)
    for kind, finder in _LOG_ONLY:
        hit = finder(log)
        if hit is not None:
            return _Cause(kind or kinds.classify(None, hit.message), None, hit.message, ())
    for exc_type, message in tracebacks.bare_exceptions(log):
        if not tracebacks.is_wrapper(exc_type, message):
            return _Cause(kinds.classify(exc_type, message), exc_type, message, ())
    died = failures.worker_died(log)
    if died is not None:
        return _Cause(CrashKind.WORKER_DIED, None, died.message, ())
    if found is None:
        return None
    quoted = tracebacks.quoted_error(found.traceback.message)
    if quoted:
        return _Cause(kinds.classify(None, quoted), None, quoted, ())
    wrapper = found.traceback
    return _Cause(CrashKind.ENGINE_DEAD, wrapper.exc_type, wrapper.message, render(wrapper.frames))


# Failures without a Python exception, in the order they are looked for: (kind, or None for the
# kind of the line's own words, finder).
_LOG_ONLY = [
    (CrashKind.KERNEL_ASSERT, failures.kernel_assert),
    (None, failures.cuda_line),
    (CrashKind.NCCL_TIMEOUT, failures.nccl_timeout),
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


# Causes whose message is made here, from what the log says, rather than printed by the crashed code.
_OWN_WORDS = (CrashKind.TIMEOUT, CrashKind.SIGNAL, CrashKind.EXIT, CrashKind.WORKER_DIED, CrashKind.NCCL_TIMEOUT)


def _sign(cause: _Cause, context: CellContext | None) -> CrashInfo:
    message = cause.message if cause.kind in _OWN_WORDS else normalise(cause.message)
    asynchronous = kinds.is_asynchronous(cause.kind, message)
    key = _key(cause.kind, first_sentence(message), cause.frames, context, asynchronous=asynchronous)
    return CrashInfo(
        kind=cause.kind,
        exception_type=cause.exc_type,
        message=message,
        frames=cause.frames,
        title=title(cause.kind, cause.exc_type, message, cause.places or cause.frames, context, asynchronous=asynchronous),
        signature=hashlib.sha256("\n".join(key).encode()).hexdigest(),
    )


_BY_KIND_ONLY = (CrashKind.FREE_MEMORY, CrashKind.KV_CACHE_TOO_SMALL)
_BY_SENTENCE = (
    CrashKind.NCCL_TIMEOUT, CrashKind.WORKER_DIED, CrashKind.COMPILE_ERROR, CrashKind.JIT_ERROR,
    CrashKind.TIMEOUT, CrashKind.EXIT,
)
_BY_FRAMES = (CrashKind.CAPTURE_ERROR, CrashKind.SIGNAL)
_NCCL_REASON = re.compile(
    r"unhandled system error|unhandled cuda error|internal error|invalid usage|invalid argument"
    r"|remote process exited or there was a network error"
)
# A first sentence of fewer words names no cause by itself ("'model.layers.<n>'", "drafting failed").
SPECIFIC_WORDS = 4


def _key(
    kind: CrashKind, sentence: str, frames: tuple[str, ...], context: CellContext | None, *, asynchronous: bool
) -> list[str]:
    """What identifies the cause for its kind (see ``signature_for``), one field a line."""
    if asynchronous:
        return [kind.value, sentence, *(context.key() if context else [])]
    if kind in _BY_KIND_ONLY:
        return [kind.value]
    if kind in _BY_SENTENCE:
        return [kind.value, sentence]
    if kind is CrashKind.NCCL_ERROR:
        reason = _NCCL_REASON.search(sentence)
        return [kind.value, reason.group() if reason else sentence]
    if kind is CrashKind.OUT_OF_MEMORY:
        return [kind.value, *frames[:1]]
    if kind in _BY_FRAMES:
        return [kind.value, sentence, *frames[:KEY_FRAMES]]
    return [kind.value, sentence, *(frames[:1] if len(sentence.split()) < SPECIFIC_WORDS else ())]


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return str(number)
