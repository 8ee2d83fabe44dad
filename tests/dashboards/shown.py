"""The figures a page shows, as a reader's browser gets them: each ``<figure>``'s ``<img>`` fetched from its ``src``.

A page's HTML carries no drawing (``dashboards.render.figure``): tests that read what a figure says fetch its SVG
through the same client, and check it comes back as an image.
"""

import html as html_lib
import re
from dataclasses import dataclass

import httpx

FIGURE = re.compile(r"<figure([^>]*)>\s*<img ([^>]*)>\s*</figure>", re.S)
ATTRIBUTE = re.compile(r'([\w-]+)="([^"]*)"')
TEXT = re.compile(r"<text\b[^>]*>(.*?)</text>", re.S)
# An x tick's place and label; a bar's path, from its left edge to its right (``dashboards.figures.bars``).
X_TICK = re.compile(r'<g id="xtick_\d+">.*?<use [^>]*x="([-\d.]+)".*?<text[^>]*>([^<]+)</text>', re.S)
BAR = re.compile(r'<path d="M ([-\d.]+) [-\d.]+ \s*L ([-\d.]+) ')


@dataclass(frozen=True)
class Shown:
    """One figure of a page: its ``<figure>``'s and its ``<img>``'s attributes (unescaped), and the SVG its src gives."""

    figure: dict[str, str]
    img: dict[str, str]
    svg: str

    @property
    def title(self) -> str | None:
        return self.figure.get("data-title")

    def texts(self) -> list[str]:
        return texts(self.svg)

    def bars(self) -> list[float]:
        """A bar figure's bars, top to bottom, each as long as it is drawn in its x axis' units (the axis' first two
        ticks give the scale)."""
        (x0, v0), (x1, v1) = [(float(x), float(label.replace(",", ""))) for x, label in X_TICK.findall(self.svg)[:2]]
        group = self.svg[self.svg.index('<g id="PolyCollection_1">'):]
        return [(float(end) - float(start)) * (v1 - v0) / (x1 - x0) for start, end in BAR.findall(group[:group.index("</g>")])]


def texts(svg: str) -> list[str]:
    """The texts matplotlib wrote in an SVG document, a line each (``<text>`` elements; a formula's parts joined)."""
    return [html_lib.unescape(re.sub(r"<[^>]+>|\s*\n\s*", "", inner)) for inner in TEXT.findall(svg)]


def figures(client: httpx.Client, page: str) -> list[Shown]:
    """Every figure of ``page`` (its HTML), in page order, each SVG fetched from its ``src``."""
    shown = []
    for figure_attrs, img_attrs in FIGURE.findall(page):
        img = _attributes(img_attrs)
        response = client.get(img["src"])
        assert response.status_code == 200, (img["src"], response.text[:300])
        assert response.headers["content-type"].startswith("image/svg+xml"), response.headers["content-type"]
        shown.append(Shown(_attributes(figure_attrs), img, response.text))
    return shown


def _attributes(text: str) -> dict[str, str]:
    return {name: html_lib.unescape(value) for name, value in ATTRIBUTE.findall(text)}


def loaded(img) -> dict[str, float]:
    """A Playwright ``<img>`` once its image has loaded (scrolled to first: figures load lazily): its natural width and
    height (0 for an image the browser could not load or decode) and its box on the page."""
    img.scroll_into_view_if_needed()
    natural = img.evaluate("i => i.decode().then(() => [i.naturalWidth, i.naturalHeight], () => [0, 0])")
    return {"natural_width": natural[0], "natural_height": natural[1], **img.bounding_box()}


def opened(page, img):
    """A new tab of ``page``'s browser (JavaScript off, the page's window) showing the SVG document ``img`` loaded, so a
    test can locate what the figure draws (its legend, its plots) as a reader's browser lays it out; close it after."""
    tab = page.context.browser.new_page(viewport=page.viewport_size, java_script_enabled=False)
    response = tab.goto(img.evaluate("i => i.currentSrc"))
    assert response.status == 200 and response.headers["content-type"].startswith("image/svg+xml")
    return tab
