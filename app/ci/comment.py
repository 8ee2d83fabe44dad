"""The pull-request comment: a comparison (``GET /api/v1/compare``) as Markdown, what changed first.

Pure: reads the ``Comparison`` schema, writes a string. The first line is the verdict; then only what
changed, said where it happened (a change confined to one backend or graph mode is said that way), worst
first; the whole table goes in a collapsed block, the first thing cut to fit GitHub's limit.

Every value that comes from the service (what a worker reported, what the database holds: build labels, backend
names, crash titles, vLLM versions...) goes through ``escape`` where it is written, so it shows as the text it is
and never renders as a link, an image, HTML, a mention, an issue reference or table markup.
"""

import math
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass
from urllib.parse import quote

from app.analysis.verdicts import (
    DEFAULT_THRESHOLD,
    MIN_HISTORY,
    REPEATS_FOR_TEST,
    THROUGHPUT_SPREAD,
    Change,
    level_text,
)
from app.ci.gate import FALLBACKS, slower_fallback
from app.ci.looks import Looks, pairs_needed
from app.enums import Verdict
from app.schemas.compare import CellChange, CellSide, Comparison, Interval, SpeedCall

# The hidden line that marks our comment, so the next push edits it instead of adding another.
MARKER = "<!-- draftbench -->"
# GitHub refuses a comment body over 65,536 characters.
LIMIT = 65_536

_HEADLINE = [  # what the first line counts, in this order
    (Verdict.WORSE, "regression", "regressions"),
    (Verdict.NEWLY_CRASHING, "new crash", "new crashes"),
    (Verdict.NOW_DOWNGRADED, "cell now downgraded", "cells now downgraded"),
    (Verdict.NOW_EAGER_DRAFT, "cell now with an eager draft", "cells now with an eager draft"),
    ("alarms", "graph-capture alarm", "graph-capture alarms"),
    (Verdict.FIXED, "fixed crash", "fixed crashes"),
    (Verdict.BETTER, "improvement", "improvements"),
    (Verdict.UNDECIDED, "cell too noisy to call", "cells too noisy to call"),
    (Verdict.PENDING, "cell not finished", "cells not finished"),
]


@dataclass(frozen=True)
class Context:
    """What the comparison does not know: the commits compared, where the service is (for links), and what the looks
    for more starts did (``draftbench ci --budget-gpu-minutes``; None without)."""

    head_commit: str
    base_commit: str
    server: str
    looks: Looks | None = None


def render(comparison: Comparison, context: Context, *, limit: int = LIMIT) -> str:
    """The comment's Markdown, at most ``limit`` characters.

    Order: the verdict line; regressions (slower, accepting less) worst first, localised; new crashes by
    signature; fixed crashes; cells that now run another graph mode or an eager draft; graph-capture
    alarms; improvements; a collapsed table of every compared cell; the compare page's link; the marker.
    Over ``limit``, rows of the collapsed table go first (the block says how many are shown), then the
    visible part is cut at a line, saying so.
    """
    link = f"{_link(context.server)}/compare?base={comparison.base_sweep}&head={comparison.head_sweep}"
    head = "\n".join([_headline(comparison, context), "", *_changed(comparison, context)])
    tail = f"\n[The whole comparison]({link}) (base sweep {comparison.base_sweep}, head sweep {comparison.head_sweep})\n{MARKER}\n"
    rows = [_row(c) for c in comparison.changes]
    for shown in range(len(rows), -1, -1):
        body = head + _details(rows, shown, len(comparison.changes)) + tail
        if len(body) <= limit:
            return body
    note = "\n\n_Cut to fit GitHub's 65,536-character limit: the compare page has everything._\n"
    room = limit - len(note) - len(tail)
    return head[: head.rfind("\n", 0, room)] + note + tail


def _headline(comparison: Comparison, context: Context) -> str:
    counts: dict[str, int] = {**comparison.counts, "alarms": len(comparison.alarms)}
    said = [f"{n} {one if n == 1 else many}" + _slower(comparison, what) for what, one, many in _HEADLINE
            if (n := counts.get(what, 0))]
    bad = any(counts.get(v) for v in (Verdict.WORSE, Verdict.NEWLY_CRASHING, *FALLBACKS))
    if not bad and not comparison.alarms:
        said.insert(0, "no regression")
    if not comparison.changes:
        said = ["no common cell to compare"]
    gpus = sorted({escape(c.gpu_kind) for c in comparison.changes}) or ["no GPU"]
    versions = sorted({escape(v) for c in comparison.changes for v in c.head.vllm_versions if v != "?"})
    build = f"vLLM build {escape(comparison.head_build)}" + (f" ({', '.join(versions)})" if versions else "")
    if comparison.base_build != comparison.head_build:
        build += f" vs {escape(comparison.base_build)}"
    return (f"**draftbench: {', '.join(said)}** (head {escape(context.head_commit[:7])} vs base "
            f"{escape(context.base_commit[:7])}, {', '.join(gpus)}, {build})")


def _slower(comparison: Comparison, what: object) -> str:
    """`` (1 slower)`` after a fallback's count where its cells' tokens/s were called slower."""
    slower = sum(1 for c in comparison.changes if c.verdict == what and slower_fallback(c)) if what in FALLBACKS else 0
    return f" ({slower} slower)" if slower else ""


def _changed(comparison: Comparison, context: Context) -> list[str]:
    changes = comparison.changes
    worse = [c for c in changes if c.verdict is Verdict.WORSE]
    better = [c for c in changes if c.verdict is Verdict.BETTER]
    lines: list[str] = []
    lines += _section("Regressions", _moves(worse, changes, Change.WORSE))
    lines += _section("New crashes", _crashes([c for c in changes if c.verdict is Verdict.NEWLY_CRASHING], context))
    lines += _section("Fixed crashes", [f"- {_where(c)}: runs again; the base died with {_crash(c.base)}"
                                        for c in changes if c.verdict is Verdict.FIXED])
    lines += _section("Now running something else", [_fallback(c) for c in changes if c.verdict in FALLBACKS])
    lines += _section("Graph-capture alarms (head)", [f"- {escape(a.sentence)}" for a in comparison.alarms])
    lines += _section("Improvements", _moves(better, changes, Change.BETTER))
    lines += _undecided([c for c in changes if c.verdict is Verdict.UNDECIDED])
    lines += _without_model(changes)
    if comparison.apart:
        lines += [f"The sweeps share no cell. {escape(comparison.apart.sentence)}", ""]
    if context.looks is not None:
        lines += _section("Still open after more starts", _left(comparison, context.looks))
        lines += [_spent(context.looks), ""]
    return lines


def _undecided(cells: list[CellChange]) -> list[str]:
    """The cells moved past the minimum effect that their starts could not call: with a noise model, how much these
    starts could find; without one, what the rules without a model need."""
    modelled = [c for c in cells if c.tokens_per_s_call and c.tokens_per_s_call.detectable is not None]
    bare = [c for c in cells if c not in modelled]
    lines = []
    if modelled:
        finds = sorted(c.tokens_per_s_call.detectable for c in modelled)
        wanted = sorted(_deciding(c.tokens_per_s_call) for c in modelled)
        unit = "pairs of starts" if all(c.tokens_per_s_call.pairs for c in modelled) else "starts a side"
        lines.append(f"{_cells(len(modelled))} moved by more than {DEFAULT_THRESHOLD:.0%} but inside the noise of their "
                     f"starts (these starts could detect {_percent(finds[0])}" + (f" to {_percent(finds[-1])}" if len(finds) > 1 else "")
                     + f"): about {wanted[0]}" + (f" to {wanted[-1]}" if wanted[-1] != wanted[0] else "")
                     + f" {unit} would find a change the size of the one seen; see the table.")
    if bare:
        lines.append(f"{_cells(len(bare))} moved by more than {DEFAULT_THRESHOLD:.0%} with too few engine starts to call "
                     f"({REPEATS_FOR_TEST} repeats a side, or {MIN_HISTORY} builds of history): see the table.")
    return [*lines, ""] if lines else []


def _deciding(call: SpeedCall) -> int:
    """The pairs (or starts a side) that would find a change the size of the one seen four times in five
    (``app.ci.looks.pairs_needed``), at least one more than now."""
    n = call.pairs or min(call.base_starts, call.head_starts)
    return max(n + 1, pairs_needed(call, abs(call.ratio - 1)) or 0)


def _without_model(changes: list[CellChange]) -> list[str]:
    """Where no noise model was stored for a cell's class (GPU kind, backend, graph mode, draft or none, mode): its
    tokens/s was judged without one."""
    bare = [c for c in changes if c.tokens_per_s_call and c.tokens_per_s_call.detectable is None]
    if not bare:
        return []
    kinds = ", ".join(sorted({escape(c.gpu_kind) for c in bare}))
    return [f"No noise model for the tokens/s of {_cells(len(bare)).lower()} ({kinds}): judged without one "
            f"(a call needs {REPEATS_FOR_TEST} engine starts a side, {MIN_HISTORY} builds of history or a ratio beyond "
            f"{1 / THROUGHPUT_SPREAD:.2f}x to {THROUGHPUT_SPREAD:.2f}x), and what they could have found is not known. "
            "Repeated starts of a cell on one build teach the model.", ""]


def _cells(n: int) -> str:
    return f"{n} cell{'s' if n != 1 else ''}"


def _left(comparison: Comparison, looks: Looks) -> list[str]:
    """Each cell the looks left open: its call, after how many starts, and why no more were added."""
    return [f"- {_where(c)}: {_open_call(call, looks.mde)}: {looks.stopped}"
            for c in comparison.changes if (call := looks.left.get(tuple(c.head.job_ids))) is not None]


def _open_call(call: SpeedCall, mde: float | None) -> str:
    bounds = f" [{call.low:.2f}, {call.high:.2f}]" if call.low is not None and call.high is not None else ""
    starts = f"{call.pairs} pairs" if call.pairs else f"{call.base_starts} and {call.head_starts} starts"
    said = f"{escape(call.change)}, {call.ratio:.2f}x{bounds} after {starts}"
    if call.detectable is None:
        return said + " (no noise model to size what they could find)"
    if call.change == "unchanged" and mde is not None:
        return said + f", but could detect only {_percent(call.detectable)} ({_percent(mde)} asked)"
    return said + f", could detect {_percent(call.detectable)}"


def _spent(looks: Looks) -> str:
    """``More starts: used 14.2 of 20 GPU minutes in 3 looks.``"""
    return (f"More starts: used {looks.used_s / 60:.1f} of {looks.budget_s / 60:g} GPU minutes in {looks.count} "
            f"look{'s' if looks.count > 1 else ''}; {looks.stopped}.")


def _percent(value: float) -> str:
    """``8 %``, ``2.3 %``: a whole percent from 10 % up, a tenth below."""
    return f"{100 * value:.0f} %" if value >= 0.1 else f"{100 * value:.1f} %"


def _section(title: str, lines: list[str]) -> list[str]:
    return [f"#### {title}", *lines, ""] if lines else []


def _moves(moved: list[CellChange], compared: list[CellChange], direction: Change) -> list[str]:
    """One line per GPU kind x method x measure of the moved cells, localised; the largest move first
    (|ln ratio| for tokens/s, |difference| for acceptance: 0.80x and -20 points rank alike)."""
    words = {"speed": "slower" if direction is Change.WORSE else "faster",
             "acceptance": "accepting less" if direction is Change.WORSE else "accepting more"}
    found: list[tuple[float, str]] = []
    for measure, word in words.items():
        groups: dict[tuple[str, str], list[CellChange]] = defaultdict(list)
        for cell in moved:
            if (cell.tokens_per_s_change if measure == "speed" else cell.acceptance_change) is direction:
                groups[(cell.gpu_kind, cell.label)].append(cell)
        for (gpu, label), cells in groups.items():
            peers = [c for c in compared if (c.gpu_kind, c.label) == (gpu, label) and c.verdict not in _DIED]
            values = [_value(measure, c) for c in cells]
            size = max(abs(math.log(v.value)) if measure == "speed" else abs(v.value) for v in values)
            found.append((size, f"- {word} {_localise(cells, peers)} ({escape(label)}, {escape(gpu)}): "
                                f"{_amount(measure, values)}{_evidence(measure, cells)}"))
    return [line for _, line in sorted(found, key=lambda f: -f[0])]


def _evidence(measure: str, cells: list[CellChange]) -> str:
    """What a moved cell's numbers rest on, after them: `` (3 pairs of starts, 95 %; could detect 9 % or more)`` for
    tokens/s, `` (95 %, 3 and 3 starts)`` for acceptance (Newcombe's interval over the draft tokens of every start); for
    several cells, where each one's is."""
    if len(cells) > 1:
        return " (each with its interval and starts in the table)"
    [cell] = cells
    if measure == "acceptance":
        return f" (95 %, {_starts(cell.base.ran, cell.head.ran, 0)})"
    call = cell.tokens_per_s_call
    if call is None:
        return ""
    level = f", {level_text(call.confidence)}" if call.confidence is not None and call.low is not None else ""
    finds = ("no noise model: what they could find is not known" if call.detectable is None
             else f"could detect {_percent(call.detectable)} or more")
    return f" ({_starts(call.base_starts, call.head_starts, call.pairs)}{level}; {finds})"


def _starts(base: int, head: int, pairs: int) -> str:
    """``3 pairs of starts``, ``1 pair of starts``, ``2 and 3 starts``: what a call on tokens/s rests on."""
    if pairs:
        return f"{pairs} pair{'s' if pairs != 1 else ''} of starts"
    return f"{base} and {head} start{'s' if head != 1 else ''}"


def _value(measure: str, cell: CellChange) -> Interval:
    value = cell.speed_ratio if measure == "speed" else cell.acceptance_difference
    assert value is not None, "a cell whose measure moved has it on both sides"
    return value


_DIED = (Verdict.NEWLY_CRASHING, Verdict.FIXED)


def _localise(cells: list[CellChange], peers: list[CellChange]) -> str:
    """Where in the backend x graph mode plane the change is: everywhere, only on a backend, only with a graph
    mode, on one cell, or the cells listed. "Only" is said when the peers (the same method on the same GPU)
    hold cells that did not move."""
    moved = {(c.backend, c.graph_mode) for c in cells}
    plane = {(c.backend, c.graph_mode) for c in peers} | moved
    if len(plane) > 1 and moved == plane:
        return f"everywhere ({len(moved)} cells)"
    only = "only " if len(plane) > len(moved) else ""
    backends, modes = {b for b, _ in moved}, {g for _, g in moved}
    if len(moved) == 1:
        [(b, g)] = moved
        return f"{only}on {escape(b)} with {escape(g)}"
    if len(backends) == 1 and moved == {p for p in plane if p[0] in backends}:
        return f"{only}on {escape(next(iter(backends)))}"
    if len(modes) == 1 and moved == {p for p in plane if p[1] in modes}:
        return f"{only}with {escape(next(iter(modes)))}"
    return "on " + ", ".join(f"{escape(c.backend)} {escape(c.graph_mode)}" for c in cells)


def _amount(measure: str, values: list[Interval]) -> str:
    """``0.71x [0.66, 0.76]`` or ``-9.0 points [-9.4, -8.6]`` for one cell; the range of values for several."""
    unit = "x" if measure == "speed" else " points"

    def number(v: float) -> str:
        return f"{v:.2f}" if measure == "speed" else f"{round(100 * v, 1) + 0.0:+.1f}"  # + 0.0: never "-0.0"

    if len(values) == 1:
        [one] = values
        bounds = f" [{number(one.low)}, {number(one.high)}]" if one.low is not None and one.high is not None else ""
        return f"{number(one.value)}{unit}{bounds}"
    ordered = sorted(v.value for v in values)
    return f"{number(ordered[0])}{unit} to {number(ordered[-1])}{unit}"


def _crashes(cells: list[CellChange], context: Context) -> list[str]:
    """New crashes grouped by signature: the crash, then where."""
    groups: dict[str | None, list[CellChange]] = defaultdict(list)
    for cell in cells:
        groups[cell.head.crash_signature].append(cell)
    lines = []
    for signature, group in sorted(groups.items(), key=lambda g: -len(g[1])):
        link = f" ([crash group]({_link(context.server)}/crashes/{quote(signature, safe='')}))" if signature else ""
        where = "; ".join(_where(c) for c in group)
        lines.append(f"- {_crash(group[0].head)}{link}, in {len(group)} cell{'s' if len(group) > 1 else ''}: {where}")
    return lines


def _fallback(cell: CellChange) -> str:
    """What the cell runs now instead, and, where its tokens/s was called slower, the call with its interval."""
    if cell.verdict is Verdict.NOW_DOWNGRADED:
        ran, before = (", ".join(escape(m) for m in side.resolved_graph_modes) for side in (cell.head, cell.base))
        line = f"- {_where(cell)}: ran {ran} (the base ran {before})"
    else:
        line = f"- {_where(cell)}: the draft now runs eager (graphed in the base)"
    if slower_fallback(cell):
        line += f", and it is **slower**: {escape(cell.tokens_per_s_call.sentence)}"
    return line


def _where(cell: CellChange) -> str:
    return f"{escape(cell.backend)} {escape(cell.graph_mode)} ({escape(cell.label)}, {escape(cell.gpu_kind)})"


def _crash(side: CellSide) -> str:
    kinds = ", ".join(escape(k) for k in sorted(side.crash_kinds)) or "no crash record"
    return f"{kinds}: {escape(side.crash_title)}" if side.crash_title else kinds


_COLUMNS = ("| verdict | GPU | method | backend | graph mode (what ran) | base tok/s | head tok/s | head / base [95 %] "
            "| could detect | Δ acceptance (points) [95 %] | tok/J head / base [95 %] | why |")


def _details(rows: list[str], shown: int, total: int) -> str:
    if not rows:
        return ""
    cut = "" if shown == len(rows) else (
        f"\n\n_{shown} of {total} cells shown, to fit GitHub's 65,536-character limit: the compare page has all._")
    table = "\n".join([_COLUMNS, "|" + "---|" * 12, *rows[:shown]])
    return f"\n<details><summary>All {total} compared cells</summary>\n\n{table}{cut}\n\n</details>\n"


def _row(c: CellChange) -> str:
    call = c.tokens_per_s_call
    speed = _amount("speed", [c.speed_ratio]) if c.speed_ratio else ""
    if speed and call and call.confidence is not None and level_text(call.confidence) != "95 %":
        speed += f" ({level_text(call.confidence)})"  # a later look of ``draftbench ci --budget-gpu-minutes`` spends less
    moved = _amount("acceptance", [c.acceptance_difference]).replace(" points", "") if c.acceptance_difference else ""
    finds = "no model" if call and call.detectable is None else _percent(call.detectable) if call else ""
    if call:
        finds += f" ({_starts(call.base_starts, call.head_starts, call.pairs)})"
    cells = [c.verdict.value.replace("_", " "), escape(c.gpu_kind), escape(c.label), escape(c.backend), escape(c.graph_mode) + _ran(c),
             _speed(c.base), _speed(c.head), speed, finds, moved, _per_joule(c), escape("; ".join(c.reasons))]
    return "| " + " | ".join(cells) + " |"


def _ran(c: CellChange) -> str:
    """What ran where it is not what the cell asked: `` (ran PIECEWISE: downgraded)``, `` (base ran FULL, head ran
    PIECEWISE: downgraded)``, ``; draft eager`` (beside captured graphs), each side that ran said; empty where both ran
    as asked. The marks' words (``dashboards.marks``)."""
    said = []
    sides = [(name, side) for name, side in (("base", c.base), ("head", c.head)) if side.ran]
    modes = {name: ", ".join(escape(m) for m in sorted(side.resolved_graph_modes)) for name, side in sides if side.downgraded}
    if modes and len(set(modes.values())) == 1 and len(modes) == len(sides):
        said.append(f"ran {next(iter(modes.values()))}: downgraded")
    elif modes:
        said.append(", ".join(f"{name} ran {ran}" for name, ran in modes.items()) + ": downgraded")
    eager = [name for name, side in sides if side.draft_eager and c.graph_mode != "NONE"]
    if eager:
        said.append("draft eager" + (f" in the {eager[0]}" if len(eager) < len(sides) else ""))
    return f" ({'; '.join(said)})" if said else ""


def _per_joule(c: CellChange) -> str:
    """Head / base tokens per joule with its interval (``1.04x [0.98, 1.10]``), "not reported" where a side's GPU
    gave no energy, empty where a side did not run."""
    if c.tokens_per_joule_ratio is not None:
        return _amount("speed", [c.tokens_per_joule_ratio])
    return "not reported" if c.base.ran and c.head.ran else ""


def _speed(side: CellSide) -> str:
    if side.tokens_per_s is None:
        return escape(", ".join(sorted(side.crash_kinds)) or ("died" if side.died else "not finished"))
    return f"{side.tokens_per_s.value:.0f}"


_ZWJ = "\u200d"  # a zero-width joiner: invisible, and it breaks a mention, a reference or an autolink in two
# Markdown's syntax characters, made literal: backslash escapes (CommonMark's, for any ASCII punctuation), entities
# for HTML's; a zero-width joiner after "@" (a mention, an email) and "#" (an issue reference, a heading).
_LITERAL = {"\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "~": "\\~", "[": "\\[", "]": "\\]", "|": "\\|",
            "$": "\\$", "&": "&amp;", "<": "&lt;", ">": "&gt;", "@": "@" + _ZWJ, "#": "#" + _ZWJ}
# An underscore between two letters or digits opens no emphasis, so FULL_DECODE_ONLY stays as it reads.
_SYNTAX = re.compile(r"[\\`*~\[\]|$&<>@#]|_(?![^\W_])|(?<![^\W_])_")
# Where GitHub links bare text: https://..., www...., GH-123.
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?i:(?<=www)(?=\.))|(?i:(?<=gh-)(?=\d))")
# What would open a block at the start of a list item: "- x", "+ x", "1. x", "1) x", and "- --", a rule.
_BLOCK_START = re.compile(r"^(?=[-+])|^(\d+)(?=[.)](?: |$))")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def escape(value: str | None) -> str:
    """Text from the service as Markdown that shows it and does nothing else, on one line.

    Links, images, footnotes and task boxes (``[``, ``]``), HTML tags and comments (``<``, ``>``, ``&``: a
    ``<!-- draftbench -->`` in a crash title is not our marker), code (backticks), emphasis and strikethrough,
    math (``$``), table pipes, mentions and emails (``@``), issue references (``#123``, ``GH-123``), bare URLs
    (``://``, ``www.``), list markers at the start; control characters become spaces, invisible format
    characters (bidirectional overrides, zero-width spaces) are dropped, and whitespace, line breaks included,
    runs together into one space. What GitHub shows is the value, but for the zero-width joiners.
    """
    text = _CONTROL.sub(" ", value or "")
    if not text.isascii():
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    text = _SYNTAX.sub(lambda m: _LITERAL[m.group()], " ".join(text.split()))
    return _BLOCK_START.sub(lambda m: f"{m.group(1)}\\" if m.group(1) else "\\", _AUTOLINK.sub(_ZWJ, text))


def _link(url: str) -> str:
    """A URL as a link's destination: what would end it (spaces, parentheses, angle brackets) percent-encoded."""
    return quote(url.rstrip("/"), safe=":/?#[]@!$&'*+,;=%~")
