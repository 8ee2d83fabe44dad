"""Speculative cells against their sweep's baseline: speedup and losslessness."""

from app.analysis.acceptance import lossless_share, per_position, speedup
from app.analysis.alarms import is_degenerate
from app.models import Job, Result, Sweep
from app.results.cells import impossible_counts
from app.schemas.result import ResultOut


def baseline_key(job: Job) -> tuple:
    """A speculative cell's baseline shares its sweep, GPU, backend, graph mode and repeat."""
    return (job.sweep_id, job.gpu_kind, job.backend, job.graph_mode, job.repeat)


# Fields ResultOut copies from the Result row as they are.
_RESULT_FIELDS = [name for name in ResultOut.model_fields if name != "job_id" and hasattr(Result, name)]


def to_out(rows: list[tuple[Result, Job, Sweep]], baselines: dict[tuple, Result]) -> list[ResultOut]:
    """Render rows, each speculative one compared with its baseline (see ``baseline_key``)."""
    out = []
    for result, job, sweep in rows:
        base = baselines.get(baseline_key(job)) if job.method is not None else None
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
                degenerate=is_degenerate(result.num_accepted_tokens, result.num_draft_tokens),
                **{name: getattr(result, name) for name in _RESULT_FIELDS},
            )
        )
    return out


def _lossless(result: Result, base: Result) -> float | None:
    mine = [r["fingerprint"] for r in result.raw.get("requests", [])]
    theirs = [r["fingerprint"] for r in base.raw.get("requests", [])]
    if not mine or len(mine) != len(theirs):
        return None
    return lossless_share(mine, theirs)
