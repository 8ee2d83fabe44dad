"""A vLLM log's lines with the prefixes taken off, in log order and split by process.

What comes off a line, in the order it is printed:

1. ANSI colour sequences, anywhere (vLLM colours its prefixes on a terminal);
2. anything before a process label, and the label: ``(EngineCore_DP0 pid=12) ``,
   ``(VllmWorker rank=1 pid=115) ``, Ray's ``(RayWorkerWrapper pid=336, ip=10.0.0.1) ``; of a run of
   labels (``(EngineCore_DP0 pid=1) (Worker_TP0 pid=2) ``) the last names the process. What precedes
   it is a launcher's (journald's ``Nov 30 00:00:00 host vllm[9]: ``, a CI runner's timestamp, a
   progress bar without its newline);
3. vLLM's logger header, ``ERROR 11-29 10:12:13 [core.py:42] ``, the older ``ERROR 11-29 10:12:13
   core.py:42] `` (no opening bracket), with or without the time; after a process label, a tag may come
   first (vllm-omni's ``(Worker pid=9) [Stage-0] ERROR ...``); without a process label it is looked
   for anywhere in the prefix window, after a launcher's prefix;
4. torch.distributed's ``[rank0]: `` (repeated when nested), and a launcher's tag before it
   (``[vllm]: [rank0]: ``);
5. without any of the above, a leading ISO timestamp (``[2026-01-28T23:59:42Z] ``, ``2025-06-27 17:14:23: ``),
   when the log's first line starts with one (a CI runner stamps every line);
6. torch's C++-style logger header, ``E0701 14:28:21.083000 911603 torch/_inductor/x.py:539] ``, after
   the rank when there is one (``[rank0]:E0701 ...``), with the compile id dynamo adds (``[0/0] ``).

Ray's `` [repeated 6x across cluster]`` comes off the end, and so does the right border a terminal
viewer draws (`` │``, as Kubernetes dashboards print a pod's log). A traceback header glued after a message
(``EngineCore hit an exception: Traceback (most recent call last):``) starts its line; the message
is kept apart (``Log.above``): the V0 executors print the worker's exception there, ``Exception in
worker VllmWorkerProcess while processing method init_device: NCCL error: ..., Traceback ...``.

Prefixes are looked for in a line's first ``PREFIX_WINDOW`` characters only, and every line is cut at
``MAX_LINE`` characters: a line is whatever the crashed code printed (a dumped tensor, megabytes
without a newline), and every later rule reads each line again. Indentation after the prefixes is
kept: tracebacks are read by it.
"""

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

MAX_LINE = 8192
PREFIX_WINDOW = 256
MAX_CANDIDATES = 1000
TRACEBACK_START = "Traceback (most recent call last):"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

_ANSI = re.compile(r"\x1b\[[0-9;]*+[A-Za-z]")
_PROCESS = re.compile(r"\((?P<label>(?:[\w.-]++ )?(?:rank=\d++ )?pid=\d++)(?:, ip=[\d.]++)?\) ?")
# The file part is short and has no spaces: bounded, so a line of repeated headers stays linear.
_HEADER = re.compile(
    r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) ++"
    r"(?:\d\d-\d\d(?:-\d{4})?[ -]\d\d:\d\d:\d\d(?:[.,]\d++)? ++)?"
    r"(?:\[[^\]\s]{1,200}\]|[\w./-]{1,200}:\d++\]) ?"
)
# What is left of a header whose line a paste cut: "[multiproc_executor.py:492] ValueError: ...".
_HEADER_TAIL = re.compile(r"\[[\w./-]{1,200}:\d++\] ?")
_RANK = re.compile(r"(?:\[rank\d++\]: ?)++")
_TAG = re.compile(r"\[[\w.-]{1,64}\] ")  # between a process label and the header: "[Stage-0] "
_RANK_TAG = re.compile(r"\[[\w.-]{1,64}\]: (?=\[rank\d)")  # a launcher's "[vllm]: " before the rank
_STAMP = re.compile(r"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d++)?(?:Z|[+-]\d\d:?\d\d)?\]?:? ?")
_REPEATED = re.compile(r" *+\[repeated \d++x across cluster\]$")
_TORCH_HEADER = re.compile(r"[DIWEF]\d{4} \d\d:\d\d:\d\d(?:\.\d++)? ++\d++ [\w./-]{1,200}:\d++\] (?:\[[\d/_]{1,40}\] )?")
_BORDERS = ("│", "┃")
_LINE_BREAK = re.compile(r"[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")  # where str.splitlines splits
# A line with a prefix holds one of these (Ray's "[repeated ...]" comes with a process label); a log
# holding none is not read line by line.
_MARKERS = ("pid=", "] ", "[rank")


@dataclass(frozen=True)
class Stream:
    """One process's lines: each line's number in the log, and its text."""

    numbers: Sequence[int]
    texts: list[str]


@dataclass(frozen=True)
class Log:
    """The log's lines without prefixes, in log order (``lines``) and split by process (``streams``)."""

    lines: list[str]
    streams: list[Stream]
    above: dict[int, str] = field(default_factory=dict)  # line number: the message a traceback header was glued after

    @cached_property
    def text(self) -> str:
        """The lines joined by newlines: a pattern searched here once ends at a line's end, as line by line."""
        return "\n".join(self.lines)

    def candidates(self, needle: re.Pattern[str]) -> Iterator[tuple[int, int, int]]:
        """``(line start, needle's start, line end)`` in ``text`` of the first lines ``needle`` is found on.

        At most ``MAX_CANDIDATES`` lines, one search each: a rule that needs more than a literal
        looks for its literal here (the regex engine skips to a literal at C speed), then reads only
        around it, so a log full of near-misses costs a bounded amount.
        """
        text = self.text
        at = 0
        for _ in range(MAX_CANDIDATES):
            found = needle.search(text, at)
            if found is None:
                return
            start = text.rfind("\n", 0, found.start()) + 1
            end = text.find("\n", found.start())
            end = len(text) if end == -1 else end
            yield start, found.start(), end
            at = end + 1

    def line_number(self, position: int) -> int:
        """The number of the line ``position`` of ``text`` lies on."""
        return self.text.count("\n", 0, position)


def read(log: str) -> Log:
    """The log's lines, prefixes off, each cut at ``MAX_LINE``, split by process (the label's text, or none).

    A log can be millions of lines: where no prefix occurs in the log it is not looked for line by
    line, and no line becomes an object of its own beyond its text. O(len(log)).
    """
    log = decolour(log)
    lines = log.splitlines()
    if _has_long_line(log, lines):
        lines = [line[:MAX_LINE] for line in lines]
    if any(marker in log for marker in _MARKERS) or _STAMP.match(log[:PREFIX_WINDOW].lstrip()):
        stripped = _strip_lines(lines)
        texts = [text for _, text in stripped]
        above = _unglue_all(texts) if TRACEBACK_START in log else {}
        return _split([label for label, _ in stripped], texts, above)
    above = _unglue_all(lines) if _glued_header(log) else {}
    return Log(lines, [Stream(range(len(lines)), lines)], above)


def _split(labels: list[str | None], texts: list[str], above: dict[int, str]) -> Log:
    """The lines in log order, and split by process label (a line without one is of the unlabelled stream)."""
    streams: dict[str | None, Stream] = {}
    for number, (label, text) in enumerate(zip(labels, texts, strict=True)):
        stream = streams.get(label)
        if stream is None:
            stream = streams[label] = Stream([], [])
        stream.numbers.append(number)
        stream.texts.append(text)
    if len(streams) == 1:
        return Log(texts, [Stream(range(len(texts)), texts)], above)
    return Log(texts, list(streams.values()), above)


def decolour(text: str) -> str:
    """``text`` without ANSI colour sequences; none holds a line break, so the same as line by line."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def split_line(line: str) -> tuple[str | None, str]:
    """(process label, message) of one line, the message stripped of its prefixes and whitespace."""
    label, text = _strip(decolour(line[:MAX_LINE]))
    return label, _unglue(text)[0].strip()


def _strip(line: str) -> tuple[str | None, str]:
    """(process label, the line without prefixes) by the rules in the module docstring."""
    label, start, _ = _prefix(line)
    return label, _rest(line, start)


def _strip_lines(lines: list[str]) -> list[tuple[str | None, str]]:
    """``_strip`` of every line. The lines of one logger call (a traceback's) share their prefix to the
    character: a line that starts with the line before's whole prefix, header included, is cut
    there without reading its prefix again."""
    stripped = []
    shared = None
    label = None
    for line in lines:
        if shared is not None and line.startswith(shared):
            start = len(shared)
        else:
            label, start, header = _prefix(line)
            shared = line[:start] if header and line[start - 1] == " " else None
        stripped.append((label, _rest(line, start)))
    return stripped


def _prefix(line: str) -> tuple[str | None, int, bool]:
    """(process label, where the text starts, whether a logger header was found): rules 2 to 5."""
    label = None
    start = 0
    process = _PROCESS.search(line, 0, PREFIX_WINDOW) if "pid=" in line else None
    if process:
        label, start = process.group("label"), process.end()
        while line.startswith("(", start):  # a run of labels: the last names the process
            inner = _PROCESS.match(line, start, PREFIX_WINDOW)
            if inner is None:
                break
            label, start = inner.group("label"), inner.end()
        header = _HEADER.match(line, start, PREFIX_WINDOW)
        if header is None and line.startswith("[", start):
            tag = _TAG.match(line, start, PREFIX_WINDOW)
            header = tag and _HEADER.match(line, tag.end(), PREFIX_WINDOW)
    elif line.startswith(LEVELS) or "] " in line:
        header = _HEADER.search(line, 0, PREFIX_WINDOW) or _HEADER_TAIL.match(line, 0, PREFIX_WINDOW)
    else:
        header = None
    if header:
        start = header.end()
    if not (process or header) and line[:1] in "[0123456789" and not line.startswith("[rank"):
        stamp = _STAMP.match(line, 0, PREFIX_WINDOW)
        start = stamp.end() if stamp else 0
    return label, start, header is not None


def _rest(line: str, start: int) -> str:
    """The line from ``start``, torch.distributed's rank prefix (and a tag before it) and Ray's repeat count off."""
    if line.startswith("[", start) and not line.startswith("[rank", start):
        tag = _RANK_TAG.match(line, start, PREFIX_WINDOW)
        start = tag.end() if tag else start
    if line.startswith("[rank", start):
        start = _RANK.match(line, start, PREFIX_WINDOW).end()
    if line[start : start + 1] in "DIWEF" and line[start + 1 : start + 2].isdigit():
        torch_header = _TORCH_HEADER.match(line, start, PREFIX_WINDOW)
        start = torch_header.end() if torch_header else start
    text = line[start:] if start else line
    if text.endswith("cluster]"):
        text = _REPEATED.sub("", text)
    elif text.endswith(_BORDERS):
        text = text.rstrip(" " + "".join(_BORDERS))
    return text


def _unglue(text: str) -> tuple[str, str]:
    """(the text from a traceback header printed after a message, the message), or (``text``, "")."""
    at = text.find(TRACEBACK_START)
    lead = text[:at].strip() if at > 0 else ""
    return (text[at:], lead) if lead else (text, "")


def _unglue_all(texts: list[str]) -> dict[int, str]:
    """Every glued header of ``texts`` made to start its line, in place; the messages, by line number."""
    above = {}
    for number, text in enumerate(texts):
        if TRACEBACK_START in text:
            texts[number], lead = _unglue(text)
            if lead:
                above[number] = lead
    return above


def _glued_header(log: str) -> bool:
    """Whether some traceback header does not start its line: two counts at C speed, no step per line."""
    headers = log.count(TRACEBACK_START)
    if not headers:
        return False
    alone = log.count("\n" + TRACEBACK_START) + log.startswith(TRACEBACK_START)
    return alone != headers


def _has_long_line(log: str, lines: list[str]) -> bool:
    """Whether one of ``log``'s ``lines`` is longer than ``MAX_LINE``, without a step per line.

    Such a line holds a whole block of ``MAX_LINE // 2`` characters (blocks laid end to end from
    the log's start) with no line break in it; lengths are compared only when a block has none.
    """
    block = MAX_LINE // 2
    starts = range(0, len(log) - block + 1, block)
    unbroken = any(_LINE_BREAK.search(log, start, start + block) is None for start in starts)
    return unbroken and max(map(len, lines)) > MAX_LINE
