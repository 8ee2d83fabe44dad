"""DataFrames to SVG figures with matplotlib (no display, no pyplot): one module per figure.

A figure function reads a frame into the values it draws and returns a ``Drawing`` of them, drawn only when its
SVG is asked for: a page's HTML names each figure by an ``<img>`` of the page's own URL with ``format=svg&figure=N``
(``dashboards.render.figure``), so the HTML comes back without drawing and the SVG from the same values.
"""

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from matplotlib.figure import Figure

from dashboards.frames import known_float

# Matplotlib's ticks and margins overflow well before the largest float (an error bar at 1e308 fails): a value
# past this is drawn as missing, and the table beside the figure shows it as stored.
DRAWABLE = 1e150


def drawable(value: object) -> float | None:
    """``value`` as a float a figure can place, or None (missing, NaN, infinite, or past ``DRAWABLE``)."""
    number = known_float(value)
    return number if number is not None and math.isfinite(number) and abs(number) <= DRAWABLE else None


def whiskers(values: Sequence[float | None], lows: Sequence[float | None], highs: Sequence[float | None],
             missing: float = 0.0) -> list[list[float]]:
    """Matplotlib's ``xerr``/``yerr``: the lengths below and above each value, ``missing`` where a value or its
    end is None; never negative (matplotlib refuses those), so an interval not holding its value draws no whisker."""
    def length(a: float | None, b: float | None) -> float:
        return missing if a is None or b is None else max(a - b, 0.0)

    return [[length(v, lo) for v, lo in zip(values, lows, strict=True)],
            [length(hi, v) for v, hi in zip(values, highs, strict=True)]]


# CSS pixels per inch: the width and height an ``<img>`` reserves for a figure of matplotlib's inches.
PX_PER_INCH = 96


@dataclass(frozen=True)
class Drawing:
    """A figure not drawn yet: ``draw(*args)`` is its SVG document (each figure module's ``_draw``, kept per distinct
    content), ``alt`` says what it shows to a reader who cannot see it, ``size`` is (width, height) in inches before
    the saved figure is cropped to what it holds (so the ``<img>``'s box is near, not exact)."""

    draw: Callable[..., str]
    args: tuple
    alt: str
    size: tuple[float, float]

    def svg(self) -> str:
        return self.draw(*self.args)

    @property
    def width(self) -> int:
        return round(self.size[0] * PX_PER_INCH)

    @property
    def height(self) -> int:
        return round(self.size[1] * PX_PER_INCH)


def to_svg(fig: Figure) -> str:
    """The figure as a standalone SVG document (served as ``image/svg+xml``), cropped to what it holds."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    return buffer.getvalue()
