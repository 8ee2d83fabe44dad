"""What every page shares: its templates, the filter form's choices, the CSV of a page's table and the SVG of its
figures."""

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode

import pandas as pd
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from app import spreadsheets
from app.cells.scope import CellScope
from app.enums import AttentionBackend, GpuKind, GraphMode, SpecMethod, allowed
from app.errors import NotFoundError
from dashboards import frames, marks
from dashboards.cache import SHOWN_FOR_S
from dashboards.filters import Filters


class Drawing(Protocol):
    """What a page needs of a figure (``dashboards.figures.Drawing``): its SVG and size; a protocol, as the figures
    import ``dashboards.frames`` and a folder's imports flow one way."""

    def svg(self) -> str: ...

    @property
    def width(self) -> int: ...

    @property
    def height(self) -> int: ...


templates = Jinja2Templates(directory=Path(__file__).parent / "templates")

CHOICES = {
    "gpu_kind": allowed(GpuKind),
    "method": allowed(SpecMethod),
    "backend": allowed(AttentionBackend),
    "graph_mode": allowed(GraphMode),
}


def page(request: Request, template: str, filters: Filters | None, *, status_code: int = 200,
         drawings: Sequence[Drawing | None] = (), **context: Any) -> HTMLResponse:
    """The page's HTML; its ``drawings`` (the figures it names, in order) kept for ``kept_figure``."""
    if drawings:
        request.app.state.shown_figures.put(_shown_as(request), (time.monotonic(), tuple(drawings)))
    return templates.TemplateResponse(
        request, template, {"filters": filters, "choices": CHOICES, "path": request.url.path, **context},
        status_code=status_code,
    )


def csv(frame: pd.DataFrame, name: str) -> Response:
    """The table behind a page's figure, as a spreadsheet opens it (``format=csv``), by the service's one CSV writer."""
    return spreadsheets.csv_response(list(frame.columns), frames.rows(frame), name=name)


def figure(drawings: Sequence[Drawing | None], number: int | None) -> Response:
    """Figure ``number`` of a page's ``drawings`` (from 1, in the page's order, as ``figure_src`` names them), drawn now
    from the values the page read (``format=svg``): 422 without a number, 404 for one the page does not draw."""
    drawn = [n for n, d in enumerate(drawings, 1) if d is not None]
    if number is None:
        raise RequestValidationError([{
            "loc": ("query", "figure"), "type": "missing",
            "msg": "format=svg needs figure, the number of one of the page's figures; allowed values: "
                   + (", ".join(map(str, drawn)) or "none (the page draws no figure now)"),
        }])
    if number not in drawn:
        raise NotFoundError("figure", f"{number} (this page draws {_numbers(drawn)})")
    return Response(drawings[number - 1].svg(), media_type="image/svg+xml")


def _numbers(drawn: list[int]) -> str:
    if not drawn:
        return "no figure"
    return f"figure {drawn[0]}" if len(drawn) == 1 else f"figures {', '.join(map(str, drawn))}"


def kept_figure(request: Request, format: str, number: int | None) -> Response | None:
    """With ``format=svg``, figure ``number`` as this page's HTML named it in the last ``SHOWN_FOR_S`` seconds (in this
    process), so a browser's images come from the values its page read without reading them again; None otherwise
    (the page reads its values and answers ``figure``)."""
    if format != "svg":
        return None
    kept = request.app.state.shown_figures.get(_shown_as(request))
    if kept is None or time.monotonic() - kept[0] > SHOWN_FOR_S:
        return None
    return figure(kept[1], number)


def _shown_as(request: Request) -> tuple:
    """A page's URL without ``format`` and ``figure``: the page whose figures an image's URL names."""
    return request.url.path, tuple(sorted((k, v) for k, v in request.query_params.multi_items() if k not in ("format", "figure")))


def figure_src(request: Request, number: int) -> str:
    """The URL of figure ``number`` of this page: the page's own path and query, with ``format=svg&figure=N``."""
    query = [(k, v) for k, v in request.query_params.multi_items() if k not in ("format", "figure")]
    return f"{request.url.path}?{urlencode([*query, ('format', 'svg'), ('figure', number)])}"


def number(value: float | None, digits: int = 3) -> str:
    value = frames.known_float(value)
    return "" if value is None else _fixed(value, digits)


def _fixed(value: float, digits: int) -> str:
    """``value`` to ``digits`` places, never ``-0.000``: a difference that rounds to nothing has no sign."""
    text = f"{value:.{digits}f}"
    return text[1:] if text[0] == "-" and not text.strip("-0.") else text


def interval(value: float | None, low: float | None, high: float | None, digits: int = 3, unit: str = "") -> str:
    """``0.910 [0.906, 0.914]``; the point alone when there is no interval. ``unit`` follows the point, as the CI
    comment and every sentence write a ratio: ``0.89x [0.85, 0.93]``, never ``0.89 [0.85, 0.93]x``."""
    value, low, high = frames.known_float(value), frames.known_float(low), frames.known_float(high)
    if value is None:
        return ""
    if low is None or high is None:
        return _fixed(value, digits) + unit
    return f"{_fixed(value, digits)}{unit} [{_fixed(low, digits)}, {_fixed(high, digits)}]"


def interval_cell(value: float | None, low: float | None, high: float | None, digits: int = 3, unit: str = "") -> Markup:
    """``interval`` for a table's cell, its bracket in one unbreakable span: a narrow column puts the interval under
    its point, never ``[0.906,`` on one line and ``0.914]`` on the next; the cell's text is ``interval``'s. Formatted
    here, not split from ``interval``'s: a page writes thousands."""
    value, low, high = frames.known_float(value), frames.known_float(low), frames.known_float(high)
    if value is None or low is None or high is None:
        return Markup(escape(interval(value, low, high, digits, unit)))
    return Markup(f'{_fixed(value, digits)}{escape(unit)} <span class="ci">[{_fixed(low, digits)}, {_fixed(high, digits)}]</span>')


class Breakable(dict[str, Markup]):
    """``breakable[text]``: ``text`` with a line-break opportunity after each underscore and equals sign
    (``FULL_AND_<wbr>PIECEWISE``, ``dataset=<wbr>draftbench``). To a browser a graph mode or a config's ``key=value``
    is one word, which would hold a column of a wide table at its whole width; ``<wbr>`` is no text, so the cell reads
    and copies as ``text``. Each text is made once and kept (as many as the stored cells' labels and graph modes):
    a page's thousands of rows repeat a few, and a look-up from a template costs a third of a call."""

    def __missing__(self, text: str) -> Markup:
        self[text] = Markup(str(escape(text)).replace("_", "_<wbr>").replace("=", "=<wbr>"))
        return self[text]


def described(scope: CellScope, builds: Iterable[str]) -> str:
    """Where a page's cells come from, for its heading: ``scope.describe()``, but where the page read the newest sweeps'
    builds unasked, the builds of the cells it shows (``builds``), so a heading names no build it has nothing of."""
    shown = sorted(set(builds))
    if scope.builds is None or scope.sweep_id is not None or scope.build is not None or not shown:
        return scope.describe()
    return f"build{'s' if len(shown) > 1 else ''} {', '.join(shown)} (of the newest sweeps' builds)"


templates.env.filters["num"] = number
templates.env.filters["known"] = frames.known
templates.env.globals["interval"] = interval_cell
templates.env.globals["breakable"] = Breakable()
templates.env.globals["figure_src"] = figure_src
templates.env.globals["described"] = described
templates.env.globals["ran_in"] = marks.ran_in
templates.env.globals["ran_marks"] = marks.badges
templates.env.globals["cell_marks"] = marks.cell_badges
templates.env.globals["cell_links"] = marks.cell_links
templates.env.globals["crash_marks"] = marks.crash_groups
templates.env.globals["measured_by"] = marks.measured_by
templates.env.globals["source_note"] = marks.source_note
templates.env.globals["row_links"] = marks.row_links
templates.env.globals["crash_logs"] = marks.crash_logs
templates.env.globals["cell_crash_logs"] = marks.cell_crash_logs
templates.env.globals["what_ran"] = marks.what_ran
templates.env.globals["ran_of"] = marks.of
templates.env.filters["ran_row"] = marks.of_row
templates.env.globals["energy_why"] = marks.energy_why
