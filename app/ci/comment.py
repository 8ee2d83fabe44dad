"""The pull-request comment: a comparison (``GET /api/v1/compare``) as Markdown, what changed first.

Pure: reads the ``Comparison`` schema, writes a string. The first line is the verdict; then only what
changed, said where it happened (a change confined to one backend or graph mode is said that way), worst
first; the whole table goes in a collapsed block, the first thing cut to fit GitHub's limit.
"""

import math
from collections import defaultdict
from dataclasses import dataclass

from app.analysis.verdicts import DEFAULT_THRESHOLD, MIN_HISTORY, REPEATS_FOR_TEST, Change
from app.enums import Verdict
from app.schemas.compare import CellChange, CellSide, Comparison, Interval

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
]


@dataclass(frozen=True)
class Context:
    """What the comparison does not know: the commits compared and where the service is (for links)."""

    head_commit: str
    base_commit: str
    server: str


def render(comparison: Comparison, context: Context, *, limit: int = LIMIT) -> str:
    """The comment's Markdown, at most ``limit`` characters.

    Order: the verdict line; regressions (slower, accepting less) worst first, localised; new crashes by
    signature; fixed crashes; cells that now run another graph mode or an eager draft; graph-capture
    alarms; improvements; a collapsed table of every compared cell; the compare page's link; the marker.
    Over ``limit``, rows of the collapsed table go first (the block says how many are shown), then the
    visible part is cut at a line, saying so.
    """
    link = f"{context.server.rstrip('/')}/compare?base={comparison.base_sweep}&head={comparison.head_sweep}"
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
    said = [f"{n} {one if n == 1 else many}" for what, one, many in _HEADLINE if (n := counts.get(what, 0))]
    bad = any(counts.get(v) for v in (Verdict.WORSE, Verdict.NEWLY_CRASHING, Verdict.NOW_DOWNGRADED, Verdict.NOW_EAGER_DRAFT))
    if not bad and not comparison.alarms:
        said.insert(0, "no regression")
    if not comparison.changes:
        said = ["no common cell to compare"]
    gpus = sorted({c.gpu_kind for c in comparison.changes}) or ["no GPU"]
    versions = sorted({v for c in comparison.changes for v in c.head.vllm_versions if v != "?"})
    build = f"vLLM build {comparison.head_build}" + (f" ({', '.join(versions)})" if versions else "")
    if comparison.base_build != comparison.head_build:
        build += f" vs {comparison.base_build}"
    return (f"**draftbench: {', '.join(said)}** (head {_sha(context.head_commit)} vs base {_sha(context.base_commit)}, "
            f"{', '.join(gpus)}, {_text(build)})")


def _changed(comparison: Comparison, context: Context) -> list[str]:
    changes = comparison.changes
    worse = [c for c in changes if c.verdict is Verdict.WORSE]
    better = [c for c in changes if c.verdict is Verdict.BETTER]
    lines: list[str] = []
    lines += _section("Regressions", _moves(worse, changes, Change.WORSE))
    lines += _section("New crashes", _crashes([c for c in changes if c.verdict is Verdict.NEWLY_CRASHING], context))
    lines += _section("Fixed crashes", [f"- {_where(c)}: runs again; the base died with {_crash(c.base)}"
                                        for c in changes if c.verdict is Verdict.FIXED])
    lines += _section("Now running something else", [_fallback(c) for c in changes
                                                       if c.verdict in (Verdict.NOW_DOWNGRADED, Verdict.NOW_EAGER_DRAFT)])
    lines += _section("Graph-capture alarms (head)", [f"- {_text(a.sentence)}" for a in comparison.alarms])
    lines += _section("Improvements", _moves(better, changes, Change.BETTER))
    undecided = [c for c in changes if c.verdict is Verdict.UNDECIDED]
    if undecided:
        lines += [f"{len(undecided)} cell{'s' if len(undecided) > 1 else ''} moved by more than {DEFAULT_THRESHOLD:.0%} with "
                  f"too few engine starts to call ({REPEATS_FOR_TEST} repeats a side, or {MIN_HISTORY} builds of history): "
                  "see the table.", ""]
    return lines


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
            found.append((size, f"- {word} {_localise(cells, peers)} ({_text(label)}, {gpu}): {_amount(measure, values)}"))
    return [line for _, line in sorted(found, key=lambda f: -f[0])]


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
        return f"{only}on {b} with {g}"
    if len(backends) == 1 and moved == {p for p in plane if p[0] in backends}:
        return f"{only}on {next(iter(backends))}"
    if len(modes) == 1 and moved == {p for p in plane if p[1] in modes}:
        return f"{only}with {next(iter(modes))}"
    return "on " + ", ".join(f"{c.backend} {c.graph_mode}" for c in cells)


def _amount(measure: str, values: list[Interval]) -> str:
    """``0.71x [0.66, 0.76]`` or ``-9.0 points [-9.4, -8.6]`` for one cell; the range of values for several."""
    unit = "x" if measure == "speed" else " points"

    def number(v: float) -> str:
        return f"{v:.2f}" if measure == "speed" else f"{100 * v:+.1f}"

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
        link = f" ([crash group]({context.server.rstrip('/')}/crashes/{signature}))" if signature else ""
        where = "; ".join(_where(c) for c in group)
        lines.append(f"- {_crash(group[0].head)}{link}, in {len(group)} cell{'s' if len(group) > 1 else ''}: {where}")
    return lines


def _fallback(cell: CellChange) -> str:
    if cell.verdict is Verdict.NOW_DOWNGRADED:
        ran, before = ", ".join(cell.head.resolved_graph_modes), ", ".join(cell.base.resolved_graph_modes)
        return f"- {_where(cell)}: ran {ran} (the base ran {before})"
    return f"- {_where(cell)}: the draft now runs eager (graphed in the base)"


def _where(cell: CellChange) -> str:
    return f"{cell.backend} {cell.graph_mode} ({_text(cell.label)}, {cell.gpu_kind})"


def _crash(side: CellSide) -> str:
    kinds = ", ".join(f"`{k}`" for k in sorted(side.crash_kinds)) or "no crash record"
    return f"{kinds} {_text(side.crash_title)}" if side.crash_title else kinds


_COLUMNS = "| verdict | GPU | method | backend | graph mode | base tok/s | head tok/s | head / base | Δ acceptance (points) | why |"


def _details(rows: list[str], shown: int, total: int) -> str:
    if not rows:
        return ""
    cut = "" if shown == len(rows) else (
        f"\n\n_{shown} of {total} cells shown, to fit GitHub's 65,536-character limit: the compare page has all._")
    table = "\n".join([_COLUMNS, "|" + "---|" * 10, *rows[:shown]])
    return f"\n<details><summary>All {total} compared cells</summary>\n\n{table}{cut}\n\n</details>\n"


def _row(c: CellChange) -> str:
    speed = f"{c.speed_ratio.value:.2f}x" if c.speed_ratio else ""
    moved = f"{100 * c.acceptance_difference.value:+.1f}" if c.acceptance_difference else ""
    cells = [c.verdict.value.replace("_", " "), c.gpu_kind, _text(c.label), c.backend, c.graph_mode,
             _speed(c.base), _speed(c.head), speed, moved, _text("; ".join(c.reasons))]
    return "| " + " | ".join(cells) + " |"


def _speed(side: CellSide) -> str:
    if side.tokens_per_s is None:
        return _text(", ".join(sorted(side.crash_kinds)) or "died")
    return f"{side.tokens_per_s.value:.0f}"


def _sha(commit: str) -> str:
    return _text(commit[:7])


def _text(value: str | None) -> str:
    """Free text made safe inside a table cell or a line: no pipes, no HTML, one line."""
    return (value or "").replace("|", "\\|").replace("<", "&lt;").replace("\n", " ")
