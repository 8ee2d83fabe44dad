"""Each speculative job's result against its baseline's, as ``/api/v1/results`` shows it: speedup and losslessness."""

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.analysis import request_acceptance
from app.analysis.acceptance import lossless_share, per_position, speedup
from app.analysis.alarms import is_degenerate
from app.analysis.fallback import RepeatSpeed, repeat_level
from app.cells import identity
from app.cells.pooling import impossible_counts
from app.models import Job, Result, Sweep
from app.results import counters
from app.schemas.result import CategoryOut, RequestsOut, ResultOut


def baselines(*, session: Session, jobs: list[Job]) -> dict[int, Result]:
    """Each speculative job's baseline result, by job id: the job without speculation of its sweep and repeat
    whose identity is its baseline's (``app.cells.identity.baseline``). One query, and one for configs not seen."""
    sweep_ids = {job.sweep_id for job in jobs if job.method is not None}
    if not sweep_ids:
        return {}
    found = session.execute(
        select(Result, Job).join(Result.job).where(Job.sweep_id.in_(sorted(sweep_ids)), Job.method.is_(None))
    ).all()
    variants = identity.variants(session=session, hashes={job.config_hash for job in jobs} | {j.config_hash for _, j in found})
    by_key = {(j.sweep_id, j.repeat, identity.measured(j, variants[j.config_hash])): result for result, j in found}
    mine = {}
    for job in jobs:
        key = (job.sweep_id, job.repeat, identity.baseline(job, variants[job.config_hash]))
        if job.method is not None and key in by_key:
            mine[job.id] = by_key[key]
    return mine


# Fields ResultOut copies from the Result row as they are (the levels are filled in: rows keep no tokens/J level, and
# rows stored before 0020 no tokens/s level).
_RESULT_FIELDS = [name for name in ResultOut.model_fields if name not in ("job_id", "tokens_per_s_level", "tokens_per_joule_level")
                  and hasattr(Result, name)]


def to_out(rows: list[tuple[Result, Job, Sweep]], bases: dict[int, Result]) -> list[ResultOut]:
    """Render rows, each speculative one compared with its baseline (``baselines``)."""
    out = []
    for result, job, sweep in rows:
        base = bases.get(job.id)
        out.append(
            ResultOut(
                job_id=job.id,
                sweep_id=sweep.id,
                sweep_name=sweep.name,
                repeat=job.repeat,
                config_hash=job.config_hash,
                build=job.build,
                gpu_kind=job.gpu_kind,
                method=job.method,
                backend=job.backend,
                graph_mode=job.graph_mode,
                mode=job.mode,
                concurrency=job.concurrency,
                env=job.env,
                import_s=result.raw.get("import_s"),
                speedup=speedup(result.tokens_per_s, base.tokens_per_s) if base and base.tokens_per_s > 0 else None,
                lossless_share=_lossless(result, base) if base else None,
                # A row from before impossible counts were refused has no intervals to show.
                per_position=[] if impossible_counts(result)
                else list(per_position(result.accepted_per_position, result.num_drafts)),
                counter_problems=counters.problems(result, job),
                requests=_requests(result),
                degenerate=is_degenerate(result.num_accepted_tokens, result.num_draft_tokens),
                tokens_per_s_level=repeat_level(RepeatSpeed(result.tokens_per_s, result.tokens_per_s_low,
                                                            result.tokens_per_s_high, result.rounds,
                                                            result.tokens_per_s_level)),
                tokens_per_joule_level=None if result.tokens_per_joule is None else repeat_level(
                    RepeatSpeed(result.tokens_per_joule, result.tokens_per_joule_low, result.tokens_per_joule_high,
                                result.rounds)),
                **{name: getattr(result, name) for name in _RESULT_FIELDS},
            )
        )
    return out


def _requests(result: Result) -> RequestsOut | None:
    """The result's stored per-request sums as the API shows them, or None where they were not recorded."""
    kept = request_acceptance.from_json(result.request_acceptance)
    if kept is None:
        return None
    return RequestsOut(categories=[CategoryOut(**vars(c)) for c in request_acceptance.by_category(kept)],
                       rate_bins=kept.rate_bins, no_drafts=kept.no_drafts, over=kept.over)


def _lossless(result: Result, base: Result) -> float | None:
    mine = [r["fingerprint"] for r in result.raw.get("requests", [])]
    theirs = [r["fingerprint"] for r in base.raw.get("requests", [])]
    if not mine or len(mine) != len(theirs):
        return None
    return lossless_share(mine, theirs)
