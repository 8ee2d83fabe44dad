"""What ran against what a cell asked for, and where its numbers came from: one wording for every page.

vLLM downgrades a graph mode silently and runs some drafts eagerly, so a page that titles cells by the mode they asked
for says what ran beside it (``what_ran``), with the marks ``/matrix`` gives each cell (``badges``: one word and one
colour per meaning on every page, ``base.html``'s colours). A cell's links go to the jobs whose results it pooled
(``PooledCell.measured_in``), never to a queued job, which has no log, and to the logs of its starts that died where
they were kept (``PooledCell.crashed_in``).

The marks and links are made here, not by template macros: a Jinja macro call per cell cost ``/matrix`` 100-150 ms
at 4,320 cells, a call of ``cell_badges`` 13 ms, so ``/matrix`` writes the same marks out in its template
(``tests/dashboards/test_serving.py`` holds them to ``badges``).
"""

import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from markupsafe import Markup, escape

from app.cells.pooling import PooledCell
from app.enums import ResultSource


@dataclass(frozen=True)
class Ran:
    """What one cell asked for and what its starts ran (``PooledCell``'s fields, or a frame row's)."""

    asked: str
    ran: tuple[str, ...]
    downgraded: bool
    draft_eager: bool
    drafted: bool  # a speculative cell: a baseline has no draft to run eagerly


def of(cell: PooledCell) -> Ran:
    return Ran(cell.graph_mode, tuple(sorted(cell.resolved_graph_modes)), cell.downgraded, cell.draft_eager,
               cell.method is not None)


def of_row(row: dict) -> Ran:
    """A frame row's (``dashboards.data.serving_frame``: ``resolved_graph_mode`` its modes joined)."""
    ran = row["resolved_graph_mode"]
    return Ran(row["graph_mode"], tuple(ran.split(", ")) if ran else (), bool(row["downgraded"]), bool(row["draft_eager"]),
               bool(row["speculative"]))


def what_ran(cells: Iterable[Ran]) -> str | None:
    """A sentence on the cells (of one heading) that did not run what they asked: downgraded to another graph mode, or
    a draft run without CUDA graphs beside captured ones (counted among the cells with a draft); None when every cell
    that ran ran as asked. The words are the marks' (``downgraded``, ``draft eager``)."""
    ran = [c for c in cells if c.ran]
    down = Counter((c.asked, ", ".join(c.ran)) for c in ran if c.downgraded)
    eager = sum(c.draft_eager and c.asked != "NONE" for c in ran)
    if not down and not eager:
        return None
    total = len(ran)
    parts = [f"{n} of {total} {'cell' if total == 1 else 'cells'} asked {asked} and vLLM ran {modes} (downgraded)"
             for (asked, modes), n in sorted(down.items())]
    if eager:
        drafted = sum(c.drafted for c in ran)
        parts.append(f"the draft ran without CUDA graphs in {eager} of {drafted} {'cell' if drafted == 1 else 'cells'} "
                     "with a draft (draft eager)")
    return "Not what was asked: " + "; ".join(parts) + ". Their numbers measure what ran."


def ran_in(cell: PooledCell) -> tuple[list[int], list[int]]:
    """(sweeps, jobs) whose results ``cell`` pooled, in order: where its numbers came from, each job with a log."""
    return sorted(set(cell.measured_in.values())), sorted(cell.measured_in)


def energy_why(reasons: Collection[str]) -> str | None:
    """Why a cell has no tokens/J, in words: each start's reason (``app.cells.pooling.add_energy``: for a row stored
    without one, that it was stored before energy was read, not that the GPU failed to report it)."""
    if not reasons:
        return None
    return "; ".join(sorted(reasons))


@lru_cache(maxsize=8192)
def natural(label: str) -> tuple:
    """A label's sort key with its numbers as numbers: ``c=4`` before ``c=16``, ``k=2`` before ``k=10``."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", label))


SYNC = "vLLM's log says it turned asynchronous scheduling off for {} of this cell's starts"
NOTHING = Markup("")


@lru_cache(maxsize=1024)
def badges(asked: str, ran: str, downgraded: bool, eager: bool, sync: int = 0, sync_title: str | None = None) -> Markup:
    """The marks of what ran: ``downgraded`` and ``draft eager`` in red where the cell ran less than it asked (a draft
    eager where graph mode NONE asked for it in grey), ``sync scheduling`` in blue; ``ran``: the modes its starts ran,
    in words; ``sync``: its starts whose log says vLLM turned asynchronous scheduling off (``sync_title`` where a page
    says it against a baseline). Kept per distinct mark: a page's cells share a few."""
    if not (downgraded or eager or sync):
        return NOTHING
    out = []
    if downgraded:
        out.append(f'<span class="badge downgraded" title="asked {escape(asked)}; vLLM ran {escape(ran)}">downgraded</span> ')
    if eager and asked != "NONE":
        out.append(f'<span class="badge eager" title="the draft ran without CUDA graphs beside the target&#39;s captured ones '
                   f'(asked {escape(asked)})">draft eager</span> ')
    elif eager:
        out.append('<span class="badge" title="the draft ran without CUDA graphs, as graph mode NONE asks">draft eager</span> ')
    if sync:
        out.append(f'<span class="badge sync" title="{escape(sync_title or SYNC.format(sync))}">sync scheduling</span> ')
    return Markup("".join(out))


def cell_badges(c: PooledCell, sync_title: str | None = None) -> Markup:
    """``badges`` of a pooled cell."""
    if not (c.downgraded or c.draft_eager or c.async_off):
        return NOTHING
    ran = ", ".join(sorted(c.resolved_graph_modes)) if c.downgraded else ""
    return badges(c.graph_mode, ran, c.downgraded, c.draft_eager, c.async_off, sync_title)


def links(sweeps: Iterable[int | str], jobs: list[int] | list[str], held: Iterable[int | str] = (), shown: int = 6,
          crashed: Sequence[int | str] = (), died: int = 0) -> Markup:
    """Where a cell's numbers came from: the sweeps and jobs whose results it pooled, each job's log (``shown`` of
    them, then how many more); where none ran yet, the sweeps that hold it (``held``); then its deaths' logs
    (``crash_logs`` of ``crashed`` and ``died``)."""
    # Ids, as numbers: nothing to escape.
    deaths = crash_logs(crashed, died)
    if not jobs:
        held_links = "".join(f' · <a href="/sweeps/{int(s)}">sweep {int(s)}</a>' for s in held)
        return Markup("no result yet" + held_links + (f" · {deaths}" if deaths else ""))
    out = [f'<a href="/sweeps/{int(s)}">sweep {int(s)}</a> ' for s in sweeps]
    out += [f'<a href="/api/v1/jobs/{int(j)}/log">log {int(j)}</a> ' for j in jobs[:shown]]
    if len(jobs) > shown:
        out.append(f"and {len(jobs) - shown} more")
    return Markup("".join(out).rstrip() + (f" · {deaths}" if deaths else ""))


def crash_logs(crashed: Sequence[int | str], died: int, shown: int = 3) -> Markup:
    """The logs of a cell's starts that died (``PooledCell.crashed_in``: those whose log was kept), ``shown`` of them,
    then how many more, and how many died without one: a worker reports a death without its log when the service
    refused the log, so a death with no link is said, not hidden. Empty where none died."""
    if not died:
        return NOTHING
    out = [f'<a class="crash-log" href="/api/v1/jobs/{int(j)}/log">crash log {int(j)}</a>' for j in crashed[:shown]]
    if len(crashed) > shown:
        out.append(f"and {len(crashed) - shown} more")
    if died > len(crashed):
        out.append(f"{died - len(crashed)} died without a log kept")
    return Markup(" ".join(out))


def crash_groups(c: PooledCell) -> Markup:
    """A cell's crash groups (``PooledCell.crash_groups``) as badges, the largest first, each its kind linked to its own
    group, titled by the group's title and how many of the cell's starts fell in it."""
    out = [f'<a class="badge crash" href="/crashes/{escape(signature)}" title="{escape(title)} ({n} start{"s" if n != 1 else ""})">'
           f'{escape(kind)}</a>' for (kind, signature, title), n in c.crash_groups.most_common()]
    return Markup(" ".join(out))


def cell_crash_logs(c: PooledCell) -> Markup:
    """``crash_logs`` of a pooled cell."""
    return crash_logs(c.crashed_in, c.died)


def measured_by(c: PooledCell) -> Markup:
    """How a cell's tokens/s was measured, under its number: ``3 starts × 5 rounds`` (each start's rounds, ``3/5``
    where starts ran different counts), and where a result came from vLLM's own bench tools (``draftbench
    import-bench``: one number per run, no rounds, so no interval), that it is such a number: a hint, not a result."""
    per_start = sorted({r.rounds for r in c.repeats})
    starts = len(c.repeats)
    text = f"{starts} start{'s' if starts != 1 else ''} × {'/'.join(map(str, per_start))} round{'s' if per_start != [1] else ''}"
    return Markup(text) + source_note(c.sources, starts)


def source_note(sources: Collection[str], runs: int) -> Markup:
    """Where tokens/s came from vLLM's own bench tools (``ResultSource.VLLM_BENCH``), that it is one number a run
    without an interval: a hint. Empty for the cell runner's results."""
    if ResultSource.VLLM_BENCH not in sources:
        return NOTHING
    return Markup('<br><span class="source vllm-bench" title="imported by draftbench import-bench from vLLM\'s own '
                  'benchmark: one number a run, without rounds to give it an interval">from vllm bench: '
                  f'{"one run" if runs == 1 else f"{runs} runs"}, no interval (a hint)</span>')


def cell_links(c: PooledCell, shown: int = 6) -> Markup:
    sweeps, jobs = ran_in(c)
    return links(sweeps, jobs, c.sweep_ids, shown, c.crashed_in, c.died)


def row_links(row: dict, shown: int = 6) -> Markup:
    """``links`` of a frame row (``sweeps``, ``measured_sweeps``, ``measured_jobs``, ``crashed_jobs``: ids separated by
    spaces; ``died``)."""
    return links(row["measured_sweeps"].split(), row["measured_jobs"].split(), row["sweeps"].split(), shown,
                 row["crashed_jobs"].split(), row["died"])
