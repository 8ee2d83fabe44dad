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
        """The texts matplotlib wrote, a line each (as a comment before its glyphs)."""
        return re.findall(r"<!-- (.*?) -->", self.svg, re.S)


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
