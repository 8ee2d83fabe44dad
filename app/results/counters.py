"""Stored results whose spec-decode counters disagree with each other (``app.analysis.counters.counter_problems``),
read from the stored columns whenever they are shown: nothing is stored for it."""

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.analysis import request_acceptance
from app.analysis.counters import counter_problems
from app.models import Job, Result


def depth(spec: dict[str, Any] | None) -> int | None:
    """The cell's ``num_speculative_tokens`` (k) from its cell spec; None for a baseline or a spec that does not say."""
    speculative = (spec or {}).get("speculative")
    k = speculative.get("num_speculative_tokens") if isinstance(speculative, dict) else None
    return k if isinstance(k, int) and not isinstance(k, bool) and k > 0 else None


def problems(result: Result, job: Job) -> list[str]:
    """The rules ``result``'s counters break, for ``job``'s k and method; empty when they agree or count nothing."""
    return counter_problems(result, k=depth(job.spec), method=job.method,
                            requests=request_acceptance.from_json(result.request_acceptance))


@dataclass(frozen=True)
class CounterProblems:
    """One stored result whose counters break a rule: where it ran and each rule it breaks, as sentences."""

    job_id: int
    where: str  # "H200 FLASH_ATTN FULL, draft_model k=3"
    problems: list[str]


def of_sweep(*, session: Session, sweep_id: int) -> list[CounterProblems]:
    """The results of ``sweep_id`` whose counters break a rule, by job id: one query over the sweep's results (at most
    ``DRAFTBENCH_MAX_JOBS`` rows, each checked in O(k))."""
    rows = session.execute(
        select(Result.num_drafts, Result.num_draft_tokens, Result.num_accepted_tokens, Result.accepted_per_position,
               Result.request_acceptance, Job.id, Job.spec, Job.method, Job.gpu_kind, Job.backend, Job.graph_mode)
        .join(Job, Job.id == Result.job_id).where(Job.sweep_id == sweep_id).order_by(Job.id)
    ).all()
    found = []
    for row in rows:
        k = depth(row.spec)
        if broken := counter_problems(row, k=k, method=row.method, requests=request_acceptance.from_json(row.request_acceptance)):
            where = f"{row.gpu_kind} {row.backend} {row.graph_mode}, {row.method or 'baseline'}" + (f" k={k}" if k else "")
            found.append(CounterProblems(row.id, where, broken))
    return found
