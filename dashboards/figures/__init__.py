"""DataFrames to inline SVG figures with matplotlib (no display, no pyplot): one module per figure."""

import io
import math
from collections.abc import Sequence

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


def to_svg(fig: Figure) -> str:
    """The figure as inline SVG, without the XML prolog (it goes inside HTML)."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]
