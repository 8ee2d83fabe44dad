"""DataFrames to SVG figures with matplotlib (no display, no pyplot): one module per figure.

A figure function reads a frame into the values it draws and returns a ``Drawing`` of them, drawn only when its
SVG is asked for: a page's HTML names each figure by an ``<img>`` of the page's own URL with ``format=svg&figure=N``
(``dashboards.render.figure``), so the HTML comes back without drawing and the SVG from the same values.

Drawing is most of what a reader's first view of a page waits for, and matplotlib's time goes per artist and per
text: a figure draws once (no crop: each lays itself out, by matplotlib's constrained layout or by margins from
``text_inches``), writes its texts as SVG text (the reader's browser draws the glyphs), and keeps to the artists that
say something the page's table does not.
"""

import io
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache

import matplotlib
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties, findfont
from matplotlib.ft2font import FT2Font

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
    """A figure not drawn yet: ``figure(*args)`` is its matplotlib figure (each figure module's ``_figure``), drawn to
    SVG once per distinct content and kept (``svg``), ``alt`` says what it shows to a reader who cannot see it,
    ``size`` is (width, height) in inches, the figure's own."""

    figure: Callable[..., Figure]
    args: tuple
    alt: str
    size: tuple[float, float]

    def svg(self) -> str:
        return _svg(self.figure, self.args)

    @property
    def width(self) -> int:
        return round(self.size[0] * PX_PER_INCH)

    @property
    def height(self) -> int:
        return round(self.size[1] * PX_PER_INCH)


# Drawings a process keeps, of every figure: at 20 to 130 KiB each, at most about 40 MiB.
KEPT = 1024


@lru_cache(maxsize=KEPT)
def _svg(figure: Callable[..., Figure], args: tuple) -> str:
    return to_svg(figure(*args))


# Texts are SVG text in the figure's font, not glyph outlines: a third of the size, and no outlines to compute. Set
# once for the process, not around each drawing: matplotlib's rc_context restores what it found when it ends, so two
# figures drawn at once on the service's threads left one of them to write outlines.
matplotlib.rcParams["svg.fonttype"] = "none"


def to_svg(fig: Figure) -> str:
    """The figure as a standalone SVG document (served as ``image/svg+xml``), as laid out: nothing cropped; no date in
    its metadata, so one figure is one document."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()


def text_inches(texts: Iterable[str], size: float) -> float:
    """The width in inches of the widest line of ``texts`` at ``size`` points in matplotlib's default font, for a
    figure that places its own margins around what it writes: the sum of its characters' advances (kerning, which only
    narrows, left out) and ``SLACK`` more. Cost: a dictionary look-up per character."""
    return max((sum(map(_advance, line)) for text in texts for line in text.split("\n")), default=0.0) * size / 72 * SLACK


def wrapped(text: str, size: float, width: float) -> str:
    """``text`` broken at its spaces into lines at most ``width`` inches wide at ``size`` points (``text_inches``; a
    word wider than that alone on its line): a title that would run past its figure's edges or into its neighbour's."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and text_inches([f"{lines[-1]} {word}"], size) <= width:
            lines[-1] += f" {word}"
        else:
            lines.append(word)
    return "\n".join(lines)


def grid(size: tuple[float, float], *, left: float, right: float, top: float, bottom: float, across: float = 0.0,
         down: float = 0.0, columns: int = 1, rows: int = 1) -> dict[str, float]:
    """Matplotlib's subplot parameters (fractions) for margins and gaps between ``columns`` x ``rows`` axes given in
    inches: a figure that reserves room for its labels lays itself out in one pass, where constrained layout measures
    every label (half of a six-panel figure's time)."""
    width, height = size
    axis_width = (width - left - right - across * (columns - 1)) / columns
    axis_height = (height - top - bottom - down * (rows - 1)) / rows
    return {"left": left / width, "right": 1 - right / width, "top": 1 - top / height, "bottom": bottom / height,
            "wspace": across / axis_width, "hspace": down / axis_height}


def legend_inches(labels: Sequence[str], size: float, columns: int) -> float:
    """The width in inches of a legend of ``labels`` in ``columns`` at ``size`` points with matplotlib's spacing, in
    em: a 2 em handle and 0.8 to its label per entry, 2 between columns, 0.4 of padding and 0.5 to the edge each side.
    Each column taken as wide as the widest label: at most that wide."""
    em = size / 72
    return columns * (text_inches(labels, size) + 2.8 * em) + (columns - 1) * 2 * em + 1.8 * em


# What a renderer that hints its glyphs at a small size (matplotlib's PNG: 3 % at 80 dpi) may add to a line's width;
# a browser without the font sets a narrower one in its place.
SLACK = 1.05


_FONT_LOCK = threading.Lock()


@cache
def _font() -> FT2Font:
    # A font object of our own: matplotlib's renderers set the size of the ones they share.
    font = FT2Font(findfont(FontProperties()))
    font.set_size(1000, 72)  # 1000 points to the em at 72 dpi: advances in thousandths of an em
    return font


@cache
def _advance(char: str) -> float:
    """``char``'s advance in em."""
    with _FONT_LOCK:
        return _font().load_char(ord(char)).linearHoriAdvance / 65536 / 1000
