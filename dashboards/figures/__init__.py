"""DataFrames to inline SVG figures with matplotlib (no display, no pyplot): one module per figure."""

import io

from matplotlib.figure import Figure


def to_svg(fig: Figure) -> str:
    """The figure as inline SVG, without the XML prolog (it goes inside HTML)."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    svg = buffer.getvalue()
    return svg[svg.index("<svg"):]
