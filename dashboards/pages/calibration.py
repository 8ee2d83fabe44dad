"""``/calibration``: cells that asked vLLM for synthetic acceptance at known rates, each position's measured rate
against the rate asked for, with its interval and counts; misses flagged."""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.cells.calibration import Position
from app.sessions import SessionDep
from dashboards import data, render
from dashboards.figures.calibration import calibration
from dashboards.filters import FigureNumber, FiltersDep, Format

router = APIRouter()


@router.get("/calibration")
def calibration_page(request: Request, session: SessionDep, filters: FiltersDep, format: Format = "html",
                     figure: FigureNumber = None) -> Response:
    if (kept := render.kept_figure(request, format, figure)) is not None:
        return kept
    scope = filters.scope(default_builds=data.recent_builds(session=session))
    found = data.calibration(session=session, scope=scope)
    if format == "csv":
        return render.csv(data.calibration_frame(found), "calibration")
    panels = [(c, calibration(c.positions, c.label)) for c in found]
    drawings = [drawing for _, drawing in panels]
    if format == "svg":
        return render.figure(drawings, figure)
    return render.page(request, "calibration.html", filters, drawings=drawings, panels=panels,
                       missed=[(i, c) for i, c in enumerate(found, 1) if c.miss], scope=scope,
                       facts=data.run_facts([c.cell for c in found]), csv_link=filters.link("/calibration", format="csv"),
                       digits=digits)


def digits(position: Position, least: int = 3, most: int = 6) -> int:
    """Enough decimals that the printed ends of the measured interval and the printed asked rate say what the miss
    says: at 3, an end of 0.2003 and an asked 0.2 both read 0.200 (a miss that reads as a hold)."""
    if position.expected is None or position.measured is None:
        return least
    _, low, high = position.measured
    for shown in range(least, most):
        asked = round(position.expected, shown)
        if asked not in (round(low, shown), round(high, shown)):
            return shown
    return most
