"""Pooled cells and comparisons as pages read them, and as pandas DataFrames: the one place pages read
``app.cells`` and ``app.comparisons``. Pages of sweeps, crashes, workers, alerts, alarms and calibration misses
call those services."""

import pandas as pd
from sqlalchemy.orm import Session

from app.alarms.service import Alarm, Check
from app.alerts.service import Alert
from app.cells import service as cell_service
from app.cells.pooling import PooledCell
from app.cells.scope import CellScope
from app.comparisons import service as comparisons
from app.workers import service as workers
from dashboards.filters import Filters


def cells(*, session: Session, scope: CellScope) -> list[PooledCell]:
    return cell_service.load(session=session, scope=scope)


def recent_builds(*, session: Session) -> tuple[str, ...]:
    return cell_service.recent_builds(session=session)


def latest_cell(*, session: Session) -> dict[str, str | None] | None:
    return cell_service.latest_cell(session=session)


def compare(
    *, session: Session, base: CellScope | None, head: CellScope | None,
) -> tuple[list[PooledCell], list[PooledCell], list[comparisons.Change]]:
    """(base cells, head cells, changes): ``app.comparisons.service.between``."""
    return comparisons.between(session=session, base=base, head=head)


def default_pair(*, session: Session) -> tuple[int, int] | None:
    return comparisons.default_pair(session=session)


def _triple(value: tuple | None) -> tuple:
    return value if value is not None else (None, None, None)


def cells_frame(found: list[PooledCell], alarms: dict[tuple, list[Alarm]] | None = None) -> pd.DataFrame:
    """One row per cell with every number and where it came from: the frame behind figures and CSVs; ``alarms``
    (``app.alarms.service.by_cell``) fills its alarm column."""
    rows = []
    for c in found:
        acc, acc_low, acc_high = _triple(c.acceptance)
        length, length_low, length_high = _triple(c.acceptance_length)
        tps, tps_low, tps_high = _triple(c.tokens_per_s)
        speedup = c.speedup
        rows.append({
            "build": c.build, "gpu_kind": c.gpu_kind, "method": c.label, "backend": c.backend,
            "graph_mode": c.graph_mode, "resolved_graph_mode": ", ".join(sorted(c.resolved_graph_modes)),
            "downgraded": c.downgraded, "draft_eager": c.draft_eager, "runs": sum(c.states.values()),
            "ran": c.ran, "died": c.died, "repeats": c.speed.repeats if c.speed else 0,
            "rounds": c.speed.rounds if c.speed else 0,
            "acceptance": acc, "acceptance_low": acc_low, "acceptance_high": acc_high,
            "accepted_tokens": c.accepted, "draft_tokens": c.draft_tokens, "degenerate": c.degenerate,
            "acceptance_length": length, "acceptance_length_low": length_low, "acceptance_length_high": length_high,
            "tokens_per_s": tps, "tokens_per_s_low": tps_low, "tokens_per_s_high": tps_high,
            "speedup": speedup.value if speedup else None, "speedup_low": speedup.low if speedup else None,
            "speedup_high": speedup.high if speedup else None, "lossless": c.lossless,
            "crash_kind": ", ".join(sorted(c.crash_kinds)) or None, "crash_signature": c.crash_signature,
            "alarm": ", ".join(sorted({str(a.kind) for a in (alarms or {}).get(c.key, ())})) or None,
            "sweeps": " ".join(str(s) for s in c.sweep_ids), "jobs": " ".join(str(j) for j in c.job_ids),
            "vllm_version": ", ".join(sorted(c.vllm_versions)), "ran_at": c.ran_at,
        })
    return pd.DataFrame(rows)


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
    return pd.DataFrame(rows)


def commit_dates(*, session: Session, builds: set[str]) -> dict:
    """Build label -> when its commit was made, where recorded."""
    return workers.commit_dates(session=session, labels=builds)


def run_facts(found: list[PooledCell] | list[Check]) -> dict[str, str]:
    """What ran, for the top of every page: builds, vLLM versions, GPUs, when, from which sweeps (of cells, or of the
    alarm's checks of them)."""
    if not found:
        return {}
    times = [c.ran_at for c in found if c.ran_at is not None]
    return {
        "builds": ", ".join(sorted({c.build for c in found})),
        "vLLM": ", ".join(sorted({v for c in found for v in c.vllm_versions})) or "unknown (nothing ran)",
        "GPU": ", ".join(sorted({g for c in found for g in c.gpu_names} or {c.gpu_kind for c in found})),
        "ran": f"{min(times):%Y-%m-%d %H:%M} to {max(times):%Y-%m-%d %H:%M} UTC" if times else "not yet",
        "sweeps": _first(sorted({(i, n) for c in found for i, n in zip(c.sweep_ids, c.sweep_names, strict=True)})),
    }


def _first(sweeps: list[tuple[int, str]], shown: int = 8) -> str:
    text = ", ".join(f"{i} ({n})" for i, n in sweeps[-shown:])
    return f"{text} and {len(sweeps) - shown} earlier" if len(sweeps) > shown else text


def with_history_links(found: list[Alert]) -> list[tuple[Alert, str]]:
    """Each alert with its cell's history across builds (``/history``), as ``findings.html`` lists them."""
    return [(a, Filters(gpu_kind=a.cell.gpu_kind, method=a.cell.method, backend=a.cell.backend,
                        graph_mode=a.cell.graph_mode).link("/history")) for a in found]
