"""Crash messages reduced to their words: what changes between runs of one bug becomes a placeholder.

Pure functions; every pattern is linear in the text it reads, and a message is cut before any reads it.
"""

import re
from collections.abc import Callable

MAX_MESSAGE = 500
MAX_SCANNED_MESSAGE = 4 * MAX_MESSAGE
MAX_SENTENCE = 200


def normalise(message: str) -> str:
    """Replace what changes between runs of one bug with placeholders; keep the words.

    In order: the message cut to its first 2,000 characters (``MAX_SCANNED_MESSAGE``); URLs
    ``<url>``, UUIDs ``<uuid>``, timestamps ``<time>``, file paths ``<path>`` (absolute, ``./`` or
    ``../`` relative, ``a/b.ext``, or glued to a compiler flag: ``-I/usr/include``), hex ``<hex>``,
    sizes such as ``1.23 GiB`` ``<size>``, shapes such as ``10x128`` ``<shape>``, remaining numbers ``<n>`` (pids included); whitespace
    collapsed, cut at 500 characters. Digits inside identifiers (``DP0``, ``float16``) stay. A message
    of any length costs at most the time of 2,000 characters, as every pattern is linear in the text
    it reads.
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
    (re.compile(r"(?<=-[IL])/[^\s'\"`,:;()\[\]{}<>]++"), "<path>"),  # -I/usr/include, -L/opt/lib
    (_PATH, _path),
    (re.compile(r"\b0x[0-9a-fA-F]++\b"), "<hex>"),
    (re.compile(r"\b\d++(?:\.\d++)?\s?(?:[KMGTP]i?B|bytes)\b"), "<size>"),
    (re.compile(r"\b\d++(?:x\d++)++\b"), "<shape>"),  # 10x128
    (re.compile(r"\b\d++(?:\.\d++)?(?:[eE][-+]?\d++)?\b"), "<n>"),
]


def first_sentence(normalised: str) -> str:
    """The text up to its first sentence end (``.``, ``!`` or ``?`` then a space), at most 200 characters.

    What a group is keyed by: two cuts of one long message (an out-of-memory message ends with
    sizes, advice and a URL, and logs cut it anywhere) share their first sentence.
    """
    end = _SENTENCE_END.search(normalised, 0, MAX_SENTENCE)
    return normalised[: end.start() if end else MAX_SENTENCE]


_SENTENCE_END = re.compile(r"(?<=[.!?]) ")
