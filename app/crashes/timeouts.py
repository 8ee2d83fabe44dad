"""Lines of a log that say what timed out, where no exception line says it.

- ``timeout_line``: the first line that says something timed out (``RPC call to execute_model timed
  out.``, V0's ``Engine iteration timed out. This should never happen!``, torch's ``[c10d] The client
  socket has timed out after 600s ...``), from the last exception type on it if it has one; what an
  HTTP client says of a request it retries (the hub's ``HTTPSConnectionPool(...): Read timed out.``,
  ``Retrying in 1s``) is not a crash, and a traceback's source line (``raise TimeoutError(f"RPC call to
  {method} timed out.")``) is code, not what happened: both are passed over;
- ``nccl_work_timeout``: newer torch's watchdog line ``[PG 0 Rank 0] Timeout at NCCL work: 12, last
  enqueued NCCL work: 12, ...``, which an excerpt may keep without the ``Watchdog caught collective
  operation timeout`` line beside it.

Each is one search of the text for a literal, then a bounded read of the lines it is found on.
"""

import re

from app.vllmlog.failures import Found
from app.vllmlog.lines import Log

# "timed out", "timeout after" (``kinds.TIMEOUT_WORDS``), capitalised or not: found without their first
# letter, as an alternation of literals with no prefix in common costs the regex engine a try at every
# character (25 times slower on 16 MB), and that letter checked after.
_TIMED_OUT = re.compile("imed out|imeout after")
_FIRST = "tT"
_RETRIED = re.compile(r"ConnectionPool\(|\b[Rr]etr(?:y|ying|ies|ied)\b")
# A source line a traceback shows: a statement, a comment, a string literal, or a line holding an f-string.
_STATEMENT = re.compile(r"""\s*+(?:(?:raise|return|assert|await|yield|if|elif)\b|logger\.|#|[rbfu]?["'])""")
_F_STRING = re.compile(r"""(?<!\w)f["']""")
_TYPE_ENDS = ("Error: ", "Exception: ", "Expired: ", "Timeout: ")
_NCCL_WORK = re.compile(r"Timeout at NCCL work")
NCCL_WORK_TIMEOUT = "collective operation timeout"


def timeout_line(log: Log) -> Found | None:
    """What the first line saying something timed out says (``_TIMED_OUT``), after the last exception type
    on it; lines of a retried request (``_RETRIED``) and source lines (``_STATEMENT``, ``_F_STRING``)
    passed over. None where no line says it."""
    text = log.text
    for start, at, end in log.candidates(_TIMED_OUT):
        if at == start or text[at - 1] not in _FIRST:
            continue
        if _RETRIED.search(text, start, end) or _STATEMENT.match(text, start, end) or _F_STRING.search(text, start, end):
            continue
        ends = [typed + len(ending) for ending in _TYPE_ENDS if (typed := text.rfind(ending, start, at - 1)) != -1]
        message = text[max(ends, default=start) : end].strip()
        if message:
            return Found(log.line_number(start), message)
    return None


def nccl_work_timeout(log: Log) -> Found | None:
    """``collective operation timeout`` (which collective, the line does not say) of the first ``Timeout at NCCL work`` line."""
    found = _NCCL_WORK.search(log.text)
    return None if found is None else Found(log.line_number(found.start()), NCCL_WORK_TIMEOUT)
