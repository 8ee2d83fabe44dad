"""Pooled cells, calibration cells and comparisons as pages read them, and as pandas DataFrames: the one place pages
read ``app.cells`` and ``app.comparisons``. Pages of sweeps, crashes, workers, alerts, alarms and calibration misses
call those services."""

from collections import defaultdict
from functools import lru_cache

import pandas as pd
from sqlalchemy.orm import Session

from app.alarms.service import Alarm, Check
from app.alerts.service import Alert
from app.analysis.intervals import wilson_interval
from app.cells import best_k, identity, serving
from app.cells import calibration as calibration_cells
from app.cells import service as cell_service
from app.cells.calibration import CalibrationCell
from app.cells.pooling import PooledCell, scheduler_differs
from app.cells.scope import CellScope
from app.comparisons import service as comparisons
from app.workers import service as workers
from dashboards import frames, marks
from dashboards.filters import Filters


def cells(*, session: Session, scope: CellScope, speedups: bool = True) -> list[PooledCell]:
    """``app.cells.service.load``: ``speedups=False`` for a page that shows no speedup (a method's baselines unread);
    in its order, but for the numbers in labels, read as numbers (``c=4`` before ``c=16``: ``marks.natural``)."""
    found = cell_service.load(session=session, scope=scope, speedups=speedups)
    return sorted(found, key=_order)


def with_requests(*, session: Session, scope: CellScope, found: list[PooledCell]) -> list[PooledCell]:
    """``found`` with their requests by prompt category (``app.cells.service.with_requests``)."""
    return cell_service.with_requests(session=session, scope=scope, cells=found)


def baselines(found: list[PooledCell]) -> dict[tuple, PooledCell]:
    """Each speculative cell's baseline among ``found``, by the cell's key (``app.cells.service.baselines``)."""
    return cell_service.baselines(found)


def _order(c: PooledCell) -> tuple:
    return c.build, c.gpu_kind, marks.natural(c.label), c.backend, c.graph_mode


def calibration(*, session: Session, scope: CellScope) -> list[CalibrationCell]:
    """``app.cells.calibration.load``, in the order of ``cells``."""
    return sorted(calibration_cells.load(session=session, scope=scope), key=lambda c: _order(c.cell))


def sweep_gpu_kinds(*, session: Session, sweep_ids: list[int]) -> dict[int, str]:
    """The GPU kinds each sweep ran on, in words (``app.cells.service.sweep_gpu_kinds``, one query): the overview names
    them, so an H100's sweeps read H100 beside the H200's, whatever their names say."""
    return {i: ", ".join(kinds) for i, kinds in cell_service.sweep_gpu_kinds(session=session, sweep_ids=sweep_ids).items()}


def recent_builds(*, session: Session) -> tuple[str, ...]:
    return cell_service.recent_builds(session=session)


def latest_cell(*, session: Session) -> dict[str, str | None] | None:
    return cell_service.latest_cell(session=session)


def compare(
    *, session: Session, base: CellScope | None, head: CellScope | None,
) -> tuple[list[PooledCell], list[PooledCell], list[comparisons.Change]]:
    """(base cells, head cells, changes): ``app.comparisons.service.between``."""
    return comparisons.between(session=session, base=base, head=head)


def apart(base: list[PooledCell], head: list[PooledCell]) -> identity.Apart | None:
    """Why two sides share no cell: ``app.cells.identity.apart``."""
    return identity.apart(base, head)


def default_pair(*, session: Session) -> tuple[int, int] | None:
    return comparisons.default_pair(session=session)


def _triple(value: tuple | None) -> tuple:
    return value if value is not None else (None, None, None)


def _per_joule(c: PooledCell) -> dict:
    """A cell's tokens/J columns: the pooled value and its interval, the repeats that reported energy, why others did not."""
    tpj, low, high = _triple(c.tokens_per_joule)
    return {"tokens_per_joule": tpj, "tokens_per_joule_low": low, "tokens_per_joule_high": high,
            "energy_repeats": len(c.energy_repeats), "energy_reasons": marks.energy_why(c.energy_reasons)}


PER_JOULE = ("tokens_per_joule", "tokens_per_joule_low", "tokens_per_joule_high", "energy_repeats", "energy_reasons")
CELL_COLUMNS = (
    "build", "gpu_kind", "method", "variant", "speculative", "backend", "graph_mode", "resolved_graph_mode", "downgraded",
    "draft_eager", "async_scheduling_off_starts", "runs", "ran", "died", "repeats", "rounds", "acceptance", "acceptance_low",
    "acceptance_high", "accepted_tokens", "draft_tokens", "degenerate", "acceptance_length", "acceptance_length_low",
    "acceptance_length_high", "tokens_per_s", "tokens_per_s_low", "tokens_per_s_high", *PER_JOULE, "speedup",
    "speedup_low", "speedup_high", "lossless", "lossless_low", "lossless_high", "lossless_requests", "synthetic_acceptance",
    "crash_kind", "crash_signature", "alarm", "sweeps", "jobs", "crashed_jobs", "vllm_version", "source", "ran_at",
    "first_ran_at",
)


def lossless(c: PooledCell) -> tuple[float, float, float] | None:
    """The share of a cell's requests whose output equals its baseline's (same sweep and repeat), with Wilson's 95 %
    interval over those requests; None where no baseline's outputs were compared."""
    if not c.lossless_total:
        return None
    return (c.lossless_same / c.lossless_total, *wilson_interval(c.lossless_same, c.lossless_total))


def synthetic(c: PooledCell) -> bool:
    """A cell that asked vLLM to accept drafts at set rates (``rejection_sample_method: synthetic``): its outputs
    differ from its baseline's by design, so its lossless share says nothing of a bug."""
    return _synthetic(c.variant)


@lru_cache(maxsize=4096)
def _synthetic(variant: identity.Variant) -> bool:
    # Once per config: a page's thousands of cells share a few dozen.
    return ("speculative.rejection_sample_method", '"synthetic"') in variant.fields


def _ids(ids: list[int]) -> str:
    return " ".join(map(str, ids))


def cells_frame(found: list[PooledCell], alarms: dict[tuple, list[Alarm]] | None = None) -> pd.DataFrame:
    """One row per cell with every number and where it came from: the frame behind figures and CSVs; ``method`` is
    the cell's label and ``variant`` the digest of what it measured (one figure row or series per variant, whatever
    its label); ``alarms`` (``app.alarms.service.by_cell``) fills its alarm column. ``sweeps`` and ``jobs`` are every
    one that holds the cell, queued ones too (``marks.ran_in``: those whose results it pooled); ``crashed_jobs`` those
    that died whose log was kept (``PooledCell.crashed_in``)."""
    rows = []
    for c in found:
        acc, acc_low, acc_high = _triple(c.acceptance)
        length, length_low, length_high = _triple(c.acceptance_length)
        tps, tps_low, tps_high = _triple(c.tokens_per_s)
        same, same_low, same_high = _triple(lossless(c))
        speedup = c.speedup
        rows.append({
            "build": c.build, "gpu_kind": c.gpu_kind, "method": c.label, "variant": c.variant.measured,
            "speculative": c.method is not None, "backend": c.backend,
            "graph_mode": c.graph_mode, "resolved_graph_mode": ", ".join(sorted(c.resolved_graph_modes)),
            "downgraded": c.downgraded, "draft_eager": c.draft_eager, "async_scheduling_off_starts": c.async_off,
            "runs": sum(c.states.values()),
            "ran": c.ran, "died": c.died, "repeats": c.speed.repeats if c.speed else 0,
            "rounds": c.speed.rounds if c.speed else 0,
            "acceptance": acc, "acceptance_low": acc_low, "acceptance_high": acc_high,
            "accepted_tokens": c.accepted, "draft_tokens": c.draft_tokens, "degenerate": c.degenerate,
            "acceptance_length": length, "acceptance_length_low": length_low, "acceptance_length_high": length_high,
            "tokens_per_s": tps, "tokens_per_s_low": tps_low, "tokens_per_s_high": tps_high,
            **_per_joule(c),
            "speedup": speedup.value if speedup else None, "speedup_low": speedup.low if speedup else None,
            "speedup_high": speedup.high if speedup else None, "lossless": same, "lossless_low": same_low,
            "lossless_high": same_high, "lossless_requests": c.lossless_total, "synthetic_acceptance": synthetic(c),
            "crash_kind": ", ".join(sorted(c.crash_kinds)) or None, "crash_signature": c.crash_signature,
            "alarm": ", ".join(sorted({str(a.kind) for a in (alarms or {}).get(c.key, ())})) or None,
            "sweeps": " ".join(str(s) for s in c.sweep_ids), "jobs": " ".join(str(j) for j in c.job_ids),
            "crashed_jobs": _ids(c.crashed_in), "vllm_version": _versions(c.vllm_versions),
            "source": ", ".join(sorted(c.sources)), "ran_at": c.ran_at, "first_ran_at": c.first_ran_at,
        })
    return frames.table(rows, CELL_COLUMNS)


CALIBRATION_COLUMNS = (
    "cell", "build", "gpu_kind", "method", "backend", "graph_mode", "resolved_graph_mode", "downgraded", "draft_eager",
    "position", "expected", "measured", "measured_low", "measured_high", "accepted", "drafts", "miss", "starts", "rounds",
    "starts_missed", "sweeps", "jobs", "vllm_version", "ran_at",
)


def calibration_frame(found: list[CalibrationCell]) -> pd.DataFrame:
    """One row per position of each calibration cell: the rate asked for, the measured ``A_i / D`` with its Wilson
    95 % interval, the counts behind it, the miss, and what was pooled (``app.cells.calibration``)."""
    rows = []
    for c in found:
        sweeps, jobs = marks.ran_in(c.cell)  # what was pooled
        for p in c.positions:
            rate, low, high = _triple(p.measured)
            rows.append({
                "cell": c.label, "build": c.cell.build, "gpu_kind": c.cell.gpu_kind, "method": c.cell.label,
                "backend": c.cell.backend, "graph_mode": c.cell.graph_mode,
                "resolved_graph_mode": ", ".join(sorted(c.cell.resolved_graph_modes)), "downgraded": c.cell.downgraded,
                "draft_eager": c.cell.draft_eager, "position": p.number,
                "expected": p.expected, "measured": rate, "measured_low": low, "measured_high": high,
                "accepted": p.accepted, "drafts": p.drafts, "miss": p.miss, "starts": c.starts, "rounds": c.rounds,
                "starts_missed": c.starts_missed, "sweeps": _ids(sweeps), "jobs": _ids(jobs),
                "vllm_version": _versions(c.cell.vllm_versions), "ran_at": c.cell.ran_at,
            })
    return frames.table(rows, CALIBRATION_COLUMNS)
SERVING_COLUMNS = (
    "build", "gpu_kind", "backend", "graph_mode", "resolved_graph_mode", "downgraded", "draft_eager",
    "async_scheduling_off_starts", "series", "method", "speculative", "concurrency", "baseline", "runs", "ran", "died",
    "starts", *(f"{name}_ms{end}" for name in serving.LATENCIES for end in ("", "_low", "_high", "_level")),
    "completed", "failed", "empty", "empty_as_failed", "sent", "failed_share", "failed_share_low", "failed_share_high",
    "failed_vs_baseline", "failed_vs_baseline_low", "failed_vs_baseline_high", "failed_differs", "tokens_per_s",
    "tokens_per_s_low", "tokens_per_s_high", *PER_JOULE, "speedup", "speedup_low", "speedup_high", "scheduler_differs",
    "unreadable", "crash_kind", "crash_signature", "sweeps", "jobs", "measured_sweeps", "measured_jobs", "crashed_jobs",
    "vllm_version", "source", "ran_at",
)


def serving_frame(found: list[PooledCell]) -> pd.DataFrame:
    """One row per serving cell of ``found`` with its figures (``app.cells.serving``: TTFT, TPOT and ITL p50 and
    p99, each the median over engine starts with its interval and that interval's level; the failed requests
    with Wilson's interval, and against the baseline's), tokens/s and speedup with their intervals, and its
    baseline (``baselines``: the same clients), and whether vLLM turned asynchronous scheduling off for the cell and not
    for that baseline (``scheduler_differs``). Ordered by GPU x backend x graph mode x build, then clients,
    each baseline before the speculative cells of its clients; ``series`` names a line against clients."""
    cells = [c for c in found if c.concurrency is not None]
    paired = baselines(found)
    figures = {c.key: serving.figures(c) for c in cells}
    names = _series_names(cells)
    rows = []
    for c in cells:
        mine, base = figures[c.key], paired.get(c.key)
        theirs = figures.get(base.key) if base else None
        change = serving.failed_against(mine, theirs) if mine and theirs else None
        tps, speedup = _triple(c.tokens_per_s), c.speedup
        measured_sweeps, measured_jobs = marks.ran_in(c)
        row = {
            "build": c.build, "gpu_kind": c.gpu_kind, "backend": c.backend, "graph_mode": c.graph_mode,
            "resolved_graph_mode": ", ".join(sorted(c.resolved_graph_modes)), "downgraded": c.downgraded,
            "draft_eager": c.draft_eager, "async_scheduling_off_starts": c.async_off,
            "series": names[c.key], "method": c.label, "speculative": c.method is not None, "concurrency": c.concurrency,
            "baseline": base.label if base else None, "runs": sum(c.states.values()), "ran": c.ran, "died": c.died,
            "starts": mine.starts if mine else 0,
        }
        for name in serving.LATENCIES:
            m = mine.latency[name] if mine else None
            row |= {f"{name}_ms": m and m.median, f"{name}_ms_low": m and m.low, f"{name}_ms_high": m and m.high,
                    f"{name}_ms_level": m and m.confidence}
        share, low, high = _triple(mine.failed_share if mine else None)
        row |= {
            "completed": mine.completed if mine else None, "failed": mine.failed if mine else None,
            "empty": mine.empty if mine else None, "empty_as_failed": c.empty_as_failed,
            "sent": mine.sent if mine else None, "failed_share": share, "failed_share_low": low, "failed_share_high": high,
            "failed_vs_baseline": change and change.difference, "failed_vs_baseline_low": change and change.low,
            "failed_vs_baseline_high": change and change.high, "failed_differs": bool(change and change.flagged),
            "tokens_per_s": tps[0], "tokens_per_s_low": tps[1], "tokens_per_s_high": tps[2],
            **_per_joule(c),
            "speedup": speedup.value if speedup else None, "speedup_low": speedup.low if speedup else None,
            "speedup_high": speedup.high if speedup else None, "scheduler_differs": scheduler_differs(c, base),
            "unreadable": mine.unreadable if mine else 0,
            "crash_kind": ", ".join(sorted(c.crash_kinds)) or None, "crash_signature": c.crash_signature,
            "sweeps": _ids(c.sweep_ids), "jobs": _ids(c.job_ids), "measured_sweeps": _ids(measured_sweeps),
            "measured_jobs": _ids(measured_jobs), "crashed_jobs": _ids(c.crashed_in),
            "vllm_version": _versions(c.vllm_versions), "source": ", ".join(sorted(c.sources)), "ran_at": c.ran_at,
        }
        rows.append(row)
    if not rows:  # without a serving cell (an offline view): its columns, without pandas' work on none
        return frames.table(rows, SERVING_COLUMNS)
    order = ["gpu_kind", "backend", "graph_mode", "build", "concurrency", "speculative", "series"]
    # Counts stay whole where a cell that never ran has none: a float column would write 192 as 192.0.
    counts = dict.fromkeys(("completed", "failed", "empty", "sent"), "Int64")
    return frames.table(rows, SERVING_COLUMNS).astype(counts).sort_values(order, kind="stable", ignore_index=True)


def speedup_lines(found: list[PooledCell], mode: str) -> list[best_k.Line]:
    """``app.cells.best_k.lines``: each method's cells across k and load, with the best k, break-even and prediction."""
    return best_k.lines(found, mode)


def speedup_sentences(line: best_k.Line) -> dict[str, list[str]]:
    """What a reader reads of a line before its figure: each k's break-even, the best k at each load, the k whose
    scheduling differed from their baselines', a runner's way of counting that is not today's, the cells that ran
    less than they asked (``marks.what_ran``: a line is titled by the mode that ran), and the loads where one k alone
    cannot give a prediction."""
    return {
        "break_even": [best_k.break_even_sentence(line, k) for k in sorted(line.break_even)],
        "best": [best_k.best_sentence(found, at, line.mode) for at, found in sorted(line.best.items())],
        "scheduler": [text] if (text := best_k.scheduler_sentence(line)) else [],
        "counting": [text] if (text := best_k.counting_sentence(line)) else [],
        "what_ran": [text] if (text := marks.what_ran(marks.of(m.cell) for m in line.cells)) else [],
        "one_k": [f"The counters' prediction needs two k: one alone ran at {', '.join(map(str, line.one_k))} "
                  f"{best_k.UNITS[line.mode][1]}."] if line.one_k else [],
    }


SPEEDUP_COLUMNS = (
    "line_number", "line", "build", "gpu_kind", "method", "backend", "resolved_graph_mode", "mode", "load", "load_unit",
    "k", "label", "speedup", "speedup_low", "speedup_high", "tokens_per_s", "tokens_per_s_low", "tokens_per_s_high",
    "baseline_tokens_per_s", "baseline_tokens_per_s_low", "baseline_tokens_per_s_high", "acceptance_length",
    "predicted_speedup", "off_prediction", "best_k_here", "within_noise_of_best", "break_even", "break_even_load",
    "break_even_low", "break_even_high", "scheduler_differs", "starts", "baseline_starts", "sweeps", "jobs",
    "baseline_sweeps", "baseline_jobs",
)


def speedup_frame(lines: list[best_k.Line]) -> pd.DataFrame:
    """One row per speculative cell of ``lines``: its k and load, the speedup over its baseline with its 95 % interval,
    its mean acceptance length and the speedup the counters predict (``off`` when the interval misses it), whether vLLM
    turned asynchronous scheduling off for it and not its baseline (``scheduler_differs``), whether it
    is the best k at its load or within noise of it, where its k stops paying, and the jobs behind it and its
    baseline: the figure's and the tables' numbers on ``/serving`` (``table=speedup``); ``line_number`` counts the lines
    from 1 in their order (two lines may share a title)."""
    rows = []
    for number, line in enumerate(lines, 1):
        for m in line.cells:
            best, ends, s = line.best.get(m.load), line.break_even.get(m.k), m.speedup
            tps, base_tps = _triple(m.cell.tokens_per_s), _triple(m.baseline.tokens_per_s if m.baseline else None)
            ran, base = marks.ran_in(m.cell), marks.ran_in(m.baseline) if m.baseline else None
            rows.append({
                "line_number": number, "line": line.title, "build": line.build, "gpu_kind": line.gpu_kind, "method": line.name,
                "backend": line.backend, "resolved_graph_mode": line.resolved_graph_mode, "mode": line.mode,
                "load": m.load, "load_unit": best_k.UNITS[line.mode][1], "k": m.k, "label": m.cell.label,
                "speedup": s and s.value, "speedup_low": s and s.low, "speedup_high": s and s.high,
                "tokens_per_s": tps[0], "tokens_per_s_low": tps[1], "tokens_per_s_high": tps[2],
                "baseline_tokens_per_s": base_tps[0], "baseline_tokens_per_s_low": base_tps[1],
                "baseline_tokens_per_s_high": base_tps[2], "acceptance_length": m.tau,
                "predicted_speedup": m.prediction and m.prediction.predicted, "off_prediction": bool(m.prediction and m.prediction.off),
                "best_k_here": best.k if best else None, "within_noise_of_best": bool(best and m.k in best.within_noise),
                "break_even": ends and ends.pays.value, "break_even_load": ends and ends.x,
                "break_even_low": ends and ends.low, "break_even_high": ends and ends.high,
                "scheduler_differs": m.scheduler_differs,
                "starts": len(m.cell.repeats), "baseline_starts": len(m.baseline.repeats) if m.baseline else 0,
                "sweeps": _ids(ran[0]), "jobs": _ids(ran[1]), "baseline_sweeps": _ids(base[0]) if base else None,
                "baseline_jobs": _ids(base[1]) if base else None,
            })
    return frames.table(rows, SPEEDUP_COLUMNS)


def _series_names(cells: list[PooledCell]) -> dict[tuple, str]:
    """A line's name within its GPU x backend x graph mode x build: its series label, with the name of the series'
    first sweep where series of other models or workloads share that label."""
    def place(c: PooledCell) -> tuple:
        return (c.build, c.gpu_kind, c.backend, c.graph_mode, c.variant.series_label)

    series: dict[tuple, set[str]] = defaultdict(set)
    first: dict[str, tuple[int, str]] = {}
    for c in cells:
        series[place(c)].add(c.variant.series)
        first[c.variant.series] = min(first.get(c.variant.series, (c.sweep_ids[0], c.sweep_names[0])),
                                      (c.sweep_ids[0], c.sweep_names[0]))
    return {c.key: c.variant.series_label if len(series[place(c)]) == 1 else f"{c.variant.series_label} ({first[c.variant.series][1]})"
            for c in cells}


ALARM_COLUMNS = (
    "alarm_kind", "build", "gpu_kind", "method", "backend", "graph_mode", "resolved_graph_mode", "value", "value_low",
    "value_high", "successes", "trials", "eager_backend", "eager_value", "eager_value_low", "eager_value_high",
    "eager_successes", "eager_trials", "difference", "difference_low", "difference_high", "sweeps", "jobs", "eager_jobs",
)


def alarms_frame(found: list[Alarm]) -> pd.DataFrame:
    """One row per alarm with both cells' proportions (successes of trials, Wilson's interval), the difference with
    its interval, and the jobs each side pooled: the ``/alarms`` CSV."""
    rows = []
    for a in found:
        mine, theirs = a.cell.interval, a.sibling.interval
        rows.append({
            "alarm_kind": a.kind.value, "build": a.build, "gpu_kind": a.gpu_kind, "method": a.label, "backend": a.backend,
            "graph_mode": a.graph_mode, "resolved_graph_mode": ", ".join(a.cell.resolved_graph_modes),
            "value": mine[0], "value_low": mine[1], "value_high": mine[2], "successes": a.cell.successes, "trials": a.cell.trials,
            "eager_backend": a.sibling.backend, "eager_value": theirs[0], "eager_value_low": theirs[1],
            "eager_value_high": theirs[2], "eager_successes": a.sibling.successes, "eager_trials": a.sibling.trials,
            "difference": a.difference.value, "difference_low": a.difference.low, "difference_high": a.difference.high,
            "sweeps": " ".join(map(str, a.sweep_ids)), "jobs": " ".join(map(str, a.cell.job_ids)),
            "eager_jobs": " ".join(map(str, a.sibling.job_ids)),
        })
    return frames.table(rows, ALARM_COLUMNS)


def commit_dates(*, session: Session, builds: set[str]) -> dict:
    """Build label -> when its commit was made, where recorded."""
    return workers.commit_dates(session=session, labels=builds)


def run_facts(found: list[PooledCell] | list[Check]) -> dict[str, str]:
    """What ran, for the top of every page: builds, vLLM versions, GPUs, when, from which sweeps (of cells, or of the
    alarm's checks of them)."""
    if not found:
        return {}
    ends = [c.ran_at for c in found if c.ran_at is not None]
    # A cell's first start where it kept one (a pooled cell), else its newest finish (an alarm's check keeps that alone).
    starts = [first for c in found if (first := getattr(c, "first_ran_at", None) or c.ran_at) is not None]
    return {
        "builds": ", ".join(sorted({c.build for c in found})),
        "vLLM": _versions({v for c in found for v in c.vllm_versions}) or "unknown (nothing ran)",
        "GPU": _gpus(found),
        "ran": f"{min(starts):%Y-%m-%d %H:%M} to {max(ends):%Y-%m-%d %H:%M} UTC" if ends else "not yet",
        "sweeps": _newest(found),
    }


def _newest(found: list[PooledCell] | list[Check], shown: int = 8) -> str:
    """The ``shown`` sweeps that ran last, in id order, and how many ran before them: picked by each sweep's newest
    finish (a pooled cell's ``sweeps_ran``; an alarm's check, its cell's newest for each of its sweeps), never by id
    alone, which an import gives in the order it reads folders (the newest runs once hid among "27 earlier")."""
    names: dict[int, str] = {}
    ran: dict[int, tuple] = {}
    for c in found:
        own = getattr(c, "sweeps_ran", None) or {}
        for i, n in zip(c.sweep_ids, c.sweep_names, strict=True):
            names[i] = n
            when = own.get(i, c.ran_at if not own else None)
            if when is not None and (i not in ran or when > ran[i]):
                ran[i] = when
    # Sweeps with no finish (nothing of them ran yet) first, then by their newest finish; ties by id.
    order = sorted(names, key=lambda i: (i in ran, ran.get(i) or 0, i))
    text = ", ".join(f"{i} ({names[i]})" for i in sorted(order[-shown:]))
    return f"{text} and {len(order) - shown} that ran earlier" if len(order) > shown else text


def _gpus(found: list[PooledCell] | list[Check]) -> str:
    """The GPUs' names, and a GPU kind none of whose cells recorded one (the CPU engine, an imported file) by its kind:
    a page of H200 and CPU cells once read "NVIDIA H200" alone."""
    names: dict[str, set[str]] = {}
    for c in found:
        names.setdefault(c.gpu_kind, set()).update(c.gpu_names)
    return ", ".join(sorted({n for kind, named in names.items() for n in (named or {kind})}))


def _versions(versions: set[str]) -> str:
    """A cell's vLLM versions in words: a result that did not record its version (``app.cells.pooling`` pools it as
    "?", as a ``vllm bench`` file imported) reads "not recorded"."""
    return ", ".join(sorted(v for v in versions if v != "?") + (["not recorded"] if "?" in versions else []))


def with_history_links(found: list[Alert]) -> list[tuple[Alert, str]]:
    """Each alert with its cell's history across builds (``/history``), as ``findings.html`` lists them."""
    return [(a, Filters(gpu_kind=a.cell.gpu_kind, method=a.cell.method, backend=a.cell.backend,
                        graph_mode=a.cell.graph_mode).link("/history")) for a in found]
