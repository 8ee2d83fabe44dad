"""Speculation against load, from pooled cells: per GPU kind x method x backend x resolved graph mode x build (and
all else measured but k and the load), each k's speedup at each load, the best k there, where each k stops paying
and the speedup its counters predict (``app.analysis.speedup``).

A load is the clients at once of a serving cell, or an offline cell's batch size: its requests in flight, the
smaller of ``workload.num_prompts`` and ``engine_args.max_num_seqs`` (one alone where the other is not set). It
reads the cells a page already pooled (``app.cells.service.load``, speedups included), never the results.
"""

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, replace

from app.analysis.speedup import (
    BestK,
    BreakEven,
    Pays,
    Point,
    Prediction,
    acceptance_length,
    best_k,
    break_even,
    predicted_speedups,
    step_time,
)
from app.cells import service as cell_service
from app.cells import serving
from app.cells.pooling import PooledCell, scheduler_differs
from app.enums import Mode

K = "speculative.num_speculative_tokens"
# A sweep gives each k the first k of its synthetic rates (``app.sweeps.matrix``): one series' cells differ there in length.
RATES = "speculative.synthetic_acceptance_rates"
# The fields a line runs along, by mode: the load (clients, or the batch size's two settings).
LOAD_FIELDS = {Mode.SERVE.value: ("concurrency",), Mode.OFFLINE.value: ("workload.num_prompts", "engine_args.max_num_seqs")}
UNITS = {Mode.SERVE.value: ("client", "clients"), Mode.OFFLINE.value: ("sequence", "sequences")}


@dataclass(frozen=True)
class KCell:
    """One speculative cell on a line: its k, load, measured speedup (None without a baseline that ran), mean
    acceptance length ``tau`` (None without drafts) and the counters' prediction."""

    cell: PooledCell
    k: int
    load: int
    speedup: Point | None
    tau: float | None
    baseline: PooledCell | None
    prediction: Prediction | None = None

    @property
    def scheduler_differs(self) -> bool:
        """``app.cells.pooling.scheduler_differs`` of the cell and its baseline."""
        return scheduler_differs(self.cell, self.baseline)


@dataclass(frozen=True)
class Line:
    """One method's cells of one place (GPU kind x backend x resolved graph mode x build x what else they measured),
    across k and load."""

    build: str
    gpu_kind: str
    method: str
    backend: str
    resolved_graph_mode: str
    name: str  # the method and what tells the line apart, as labels write them (``dflash``, ``draft_model draft=qwen3_0_6b``)
    mode: str
    cells: tuple[KCell, ...]
    best: dict[int, BestK]  # by load
    break_even: dict[int, BreakEven]  # by k
    # Loads where the counters' prediction needs a second k: one k alone ran there with a baseline.
    one_k: tuple[int, ...] = ()

    @property
    def title(self) -> str:
        return " · ".join((self.gpu_kind, self.name, self.backend, self.resolved_graph_mode, self.build))

    @property
    def ks(self) -> list[int]:
        return sorted({c.k for c in self.cells})

    @property
    def loads(self) -> list[int]:
        return sorted({c.load for c in self.cells})


def lines(cells: list[PooledCell], mode: str) -> list[Line]:
    """The lines of ``cells`` (pooled with their speedups, baselines among them) in ``mode``, in title order.
    Speculative cells without an integer k or a load, and those that measured nothing yet (queued, running, or failed:
    the serving table lists them), are left out: they sit on no line. O(n) but for the synthetic rates' series
    (``_series``)."""
    paired = cell_service.baselines(cells)
    grouped: dict[tuple, list[tuple[tuple, KCell]]] = defaultdict(list)
    for cell in cells:
        if cell.method is None or cell.mode != mode or not cell.measured_in:
            continue
        if (k := _k(cell)) is None or (at := load(cell)) is None:
            continue
        speedup = Point(at, cell.speedup.value, cell.speedup.low, cell.speedup.high) if cell.speedup else None
        # Rows stored without per-position counts still hold their sum, the accepted tokens.
        tau = acceptance_length(cell.accepted_per_position or (cell.accepted,), cell.drafts) if cell.drafts else None
        key = (cell.build, cell.gpu_kind, cell.method, cell.backend, ", ".join(sorted(cell.resolved_graph_modes)), _rest(cell))
        rates = tuple(json.loads(dict(cell.variant.fields).get(RATES, "null")) or ())
        grouped[key].append((rates, KCell(cell, k, at, speedup, tau, paired.get(cell.key))))
    found = [_line(key, members, mode) for key, group in grouped.items() for members in _series(group)]
    return sorted(found, key=lambda line: (line.title, line.cells[0].cell.sweep_ids[0]))


def _series(group: list[tuple[tuple, KCell]]) -> list[list[KCell]]:
    """The lines of cells alike but for k, the load and their synthetic acceptance rates: one per longest rates
    (those no other's begin with), holding every cell whose rates begin its own. A sweep's k=1, 2, 4 cells of the
    rates (0.7, 0.5, 0.35, 0.25) hold (0.7), (0.7, 0.5) and the first four: one line. A cell that begins two
    (k=1 of (0.7, 0.5) and of (0.7, 0.6): the same cell, pooled) sits on both. O(n x lines)."""
    longest = {rates for rates, _ in group}
    longest = [r for r in longest if not any(len(o) > len(r) and o[:len(r)] == r for o in longest)]
    return [[m for rates, m in group if top[:len(rates)] == rates] for top in sorted(longest)]


def load(cell: PooledCell) -> int | None:
    """A cell's load: its clients in serving mode; offline its requests in flight, ``min(num_prompts, max_num_seqs)``
    of those set; None where none is a positive integer."""
    if cell.mode == Mode.SERVE.value:
        found = [cell.concurrency]
    else:
        fields = dict(cell.variant.fields)
        found = [json.loads(fields[f]) for f in LOAD_FIELDS[Mode.OFFLINE.value] if f in fields]
    # A load is drawn and interpolated on a log scale: anything but a positive integer places no point.
    found = [n for n in found if isinstance(n, int) and n > 0]
    return min(found) if found else None


def _k(cell: PooledCell) -> int | None:
    value = json.loads(dict(cell.variant.fields).get(K, "null"))
    return value if isinstance(value, int) else None


def _rest(cell: PooledCell) -> str:
    """What the cell measured but k and the load: cells that agree here are one line."""
    rest = [(path, value) for path, value in cell.variant.fields
            if path not in (K, RATES) and path not in LOAD_FIELDS[cell.mode]]
    return hashlib.sha256(json.dumps(rest).encode()).hexdigest()[:12]


def _line(key: tuple, members: list[KCell], mode: str) -> Line:
    build, gpu_kind, method, backend, resolved, _ = key
    by_load: dict[int, list[KCell]] = defaultdict(list)
    for member in members:
        by_load[member.load].append(member)
    found, best, one_k = [], {}, []
    for at, here in sorted(by_load.items()):
        measured = {m.k: m.speedup for m in here if m.speedup is not None}
        if (best_here := best_k(measured)) is not None:
            best[at] = best_here
        predictions = _predictions(here, mode) or {}
        if len(predictions) == 1:
            one_k.append(at)
        found += [replace(m, prediction=predictions.get(m.k)) for m in here]
    cells = tuple(sorted(found, key=lambda m: (m.k, m.load)))
    by_k: dict[int, list[Point]] = defaultdict(list)
    for m in cells:
        if m.speedup is not None:
            by_k[m.k].append(m.speedup)
    ends = {k: found for k, points in by_k.items() if (found := break_even(points)) is not None}
    name = max((_name(m) for m in cells), key=len)
    return Line(build, gpu_kind, method, backend, resolved, name, mode, cells, best, ends, tuple(one_k))


def _name(member: KCell) -> str:
    """A cell's label (``app.cells.identity.labels``: what tells it from the cells read with it) without its k and load:
    the longest of a line's names holds every field that tells the line from another."""
    load_words = ("c=",) if member.cell.mode == Mode.SERVE.value else tuple(
        f"{path.split('.')[-1]}=" for path in LOAD_FIELDS[Mode.OFFLINE.value])
    return " ".join(word for word in member.cell.label.split() if word != f"k={member.k}" and not word.startswith(load_words))


def _predictions(here: list[KCell], mode: str) -> dict[int, Prediction] | None:
    """The counters' predictions at one load (``predicted_speedups``), over the k that drafted, ran and have a
    baseline whose step time is known; None when none has."""
    taus, times, measured, baseline_time = {}, {}, {}, None
    for m in here:
        if m.tau is None or m.baseline is None or (base := _step_time(m.baseline, 1.0, m.load, mode)) is None:
            continue
        if (mine := _step_time(m.cell, m.tau, m.load, mode)) is None:
            continue
        baseline_time = base
        taus[m.k], times[m.k] = m.tau, mine
        if m.speedup is not None:
            measured[m.k] = m.speedup
    if baseline_time is None:
        return None
    return predicted_speedups(taus=taus, times=times, baseline_time=baseline_time, measured=measured)


def _step_time(cell: PooledCell, tau: float, at: int, mode: str) -> float | None:
    """``step_time`` of a cell: serving from its TPOT p50 (the median over its starts), offline from its tokens/s."""
    if mode == Mode.SERVE.value:
        figures = serving.figures(cell)
        tpot = figures.latency["tpot_p50"] if figures else None
        return step_time(tau=tau, tpot=tpot.median) if tpot is not None and tpot.median > 0 else None
    return step_time(tau=tau, tokens_per_s=cell.speed.median, in_flight=at) if cell.speed is not None else None


def units(mode: str, n: float) -> str:
    one, many = UNITS[mode]
    return one if n == 1 else many


def best_sentence(best: BestK, at: int, mode: str) -> str:
    """``best k: 4 at 1 client (1.52x [1.40, 1.65]); 2 within noise``; a best whose interval lies below 1 says so, and
    a k measured alone at its load says it is the only one (``only k=4 ran here``), not that it beat others."""
    s = best.speedup
    interval = f" [{s.low:.2f}, {s.high:.2f}]" if s.low is not None and s.high is not None else " (no interval)"
    text = f"best k: {best.k} at {at} {units(mode, at)} ({s.value:.2f}x{interval})"
    if s.below:
        text += ", surely slower than the baseline"
    if best.measured == 1:
        text += f"; only k={best.k} ran here"
    elif best.within_noise:
        listed = ", ".join(map(str, best.within_noise))
        text += f"; {listed} within noise"
    else:
        text += "; no other k within noise"
    return text


def scheduler_sentence(line: Line) -> str | None:
    """``vLLM turned asynchronous scheduling off for draft_model k=1, 2 and kept it for their baselines: ...``; None when
    no cell of the line differs from its baseline there (``KCell.scheduler_differs``)."""
    ks = sorted({m.k for m in line.cells if m.scheduler_differs})
    if not ks:
        return None
    return (f"vLLM turned asynchronous scheduling off for {line.method} k={', '.join(map(str, ks))} and kept it for "
            "their baselines (each start's log says so): these speedups hold the scheduler's cost as well as the drafting's.")


def counting_sentence(line: Line) -> str | None:
    """What a line measured by the serving runner before cell schema 5 (``Result.empty_as_failed``) does not say on its
    own; None for a line of today's runner. Such starts are a line of their own (``app.cells.identity.counted``)."""
    if not any(m.cell.empty_as_failed for m in line.cells):
        return None
    return ("Measured by the serving runner before cell schema 5, which counted a stream whose tokens decoded to no text "
            "as failed and left its tokens out of tokens/s, the baselines' as the drafts': where one side had more such "
            "streams, these speedups compare unequal work. They stand apart from today's runner's.")


def break_even_sentence(line: Line, k: int) -> str:
    """``dflash k=3 on FLASHINFER pays up to 12 clients [8, 16]``: an open end of the interval says where it lies
    beyond the loads measured."""
    found = line.break_even[k]
    loads = [c.load for c in line.cells if c.k == k and c.speedup is not None]
    unit = UNITS[line.mode][1]
    method, *rest = line.name.split()
    who = " ".join([method, f"k={k}", *rest, "on", line.backend])
    if found.pays is Pays.EVERYWHERE:
        return f"{who} pays at every load measured ({min(loads)} to {max(loads)} {unit})"
    if found.pays is Pays.NOWHERE:
        return f"{who} pays at none of the loads measured ({min(loads)} to {max(loads)} {unit})"
    if found.pays is Pays.UNDECIDED:
        return f"{who}: undecided, {found.why} (loads in {unit})"
    low = str(found.low) if found.low is not None else f"below {min(loads)}"
    high = str(found.high) if found.high is not None else f"beyond {max(loads)}"
    return f"{who} pays up to {found.x:.3g} {unit} [{low}, {high}]"
