"""``/api/v1/noise``: the spread of tokens/s between engine starts per GPU kind, backend, graph mode, draft or none,
and mode (``app.noise.service``)."""

from fastapi import APIRouter

from app.api.responses import answers
from app.noise import service as noise
from app.schemas.noise import DetectableOut, NoiseOut
from app.sessions import SessionDep

router = APIRouter(prefix="/api/v1", tags=["results"])


@router.get("/noise", response_model=list[NoiseOut], responses=answers(422))
def read_noise(session: SessionDep) -> list[NoiseOut]:
    """Every class's noise, learned from every stored A/A (each cell of one build with two or more succeeded
    starts), with the smallest change 3 and 8 starts a side would find."""
    return [out(c) for c in noise.model(session=session)]


def out(found: noise.ClassNoise) -> NoiseOut:
    key, between, within = found.noise_class, found.between, found.within
    return NoiseOut(
        gpu_kind=key.gpu_kind, backend=key.backend, graph_mode=key.graph_mode, method_class=key.method_class, mode=key.mode,
        concurrency=key.concurrency,
        sd=between.sd, cv=between.cv, df=between.df, cells=between.groups, starts=between.values,
        within_sd=within and within.sd, within_df=within and within.df, within_half_from=found.within_half_from,
        within_starts=within and within.groups, within_uneven=found.within_uneven,
        paired_sd=found.paired and found.paired.sd, paired_df=found.paired and found.paired.df,
        min_detectable=[DetectableOut(starts=n, effect=found.detectable(n)) for n in noise.MDE_STARTS],
        newest=found.newest, oldest=found.oldest, hosts=list(found.hosts), gpu_names=list(found.gpu_names),
        builds=list(found.builds), sweep_ids=list(found.sweep_ids),
    )
