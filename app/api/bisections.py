"""``/api/v1/bisections``: ``draftbench bisect``'s record of a series of builds and the steps it ran on it."""

from typing import Annotated

from fastapi import APIRouter, Path, Query, status

from app.analysis.bisection import ACCEPTANCE
from app.api.deps import Submitter
from app.api.responses import answers
from app.bisections import service
from app.models import Bisection
from app.schemas.bisection import BisectionIn, BisectionOut, Evidence, StepIn, StepOut
from app.schemas.ids import Id
from app.sessions import SessionDep

router = APIRouter(prefix="/api/v1/bisections", tags=["bisections"])

BisectionId = Annotated[Id, Path(description="A bisection's id")]


@router.post("", response_model=BisectionOut, status_code=status.HTTP_201_CREATED,
             responses=answers(401, 403, 413, 422, 429))
def create(by: Submitter, body: BisectionIn, session: SessionDep) -> BisectionOut:
    """Start recording a bisection of ``series`` (registered builds, oldest first) between ``good`` and ``bad``; its
    first step is the bad build against the good one. 422 names an unregistered build and lists the registered ones."""
    found = service.create(session=session, name=body.name, series=body.series, good=body.good, bad=body.bad,
                           created_by=f"{by.name} ({by.key})"[:200])
    return out(found)


@router.get("", response_model=list[BisectionOut], responses=answers(422))
def list_bisections(session: SessionDep,
                    limit: Annotated[int, Query(ge=1, le=100, description="The newest this many")] = 20) -> list[BisectionOut]:
    """The newest bisections, newest first (by when each started, ``app.newest``), each with its steps and where it
    stands."""
    return [out(b) for b in service.recent(session=session, limit=limit)]


@router.get("/{bisection_id}", response_model=BisectionOut, responses=answers(404, 422))
def get(bisection_id: BisectionId, session: SessionDep) -> BisectionOut:
    return out(service.get(session=session, bisection_id=bisection_id))


@router.post("/{bisection_id}/steps", response_model=BisectionOut, status_code=status.HTTP_201_CREATED,
             responses=answers(401, 403, 404, 409, 413, 422, 429))
def add_step(_: Submitter, bisection_id: BisectionId, body: StepIn, session: SessionDep) -> BisectionOut:
    """Call the next step: its sweep (of the build the bisection runs next, finished) against a finished sweep of the
    good build and, after the first step, against the first step's sweep of the bad build, compared cell by cell by
    the ``/compare`` rule. The step is bad when some cell's tokens/s or acceptance moved as the bad build's did
    against the good build, good when each such change is clear (unchanged against the good build, or the other way
    against the bad one), else undecided, which stops the bisection at the range it reached
    (``app.analysis.bisection``)."""
    found = service.add_step(session=session, bisection_id=bisection_id, sweep_id=body.sweep_id,
                             against_sweep_id=body.against_sweep_id)
    return out(found)


def out(found: Bisection) -> BisectionOut:
    """A bisection as the API (and the history page) shows it."""
    now = service.standing(found)
    symptoms = sorted(f"{s.cell}: {'acceptance' if s.metric == ACCEPTANCE else 'tokens/s'} {s.change}" for s in now.symptoms)
    steps = [StepOut(position=s.position, build=s.build, sweep_id=s.sweep_id, against_sweep_id=s.against_sweep_id,
                     call=s.call, evidence=[Evidence.model_validate(e) for e in s.evidence], created_at=s.created_at)
             for s in found.steps]
    return BisectionOut(id=found.id, name=found.name, series=list(found.series), good=found.good, bad=found.bad,
                        state=now.state, last_good=now.last_good, first_bad=now.first_bad, next_build=now.next_build,
                        steps_left=now.steps_left, symptoms=symptoms, bad_sweep_id=service.bad_sweep(found), steps=steps,
                        created_by=found.created_by, created_at=found.created_at)
