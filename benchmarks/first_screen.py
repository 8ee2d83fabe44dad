"""A reader's first view of each dashboard page in Chromium, from a fresh service process, over a kept history of more
than 100,000 results: the page's HTML, the figures in the window, and every figure.

    .venv/bin/python -m benchmarks.dashboard_load --keep /tmp/seeded --only index   # seeds both databases once
    .venv/bin/python -m benchmarks.first_screen --keep /tmp/seeded                  # then times them here

For each kept database, view and ``--starts`` times: ``draftbench serve`` starts on the database (no page read,
compiled or drawn yet in it, the slowest a reader can find a page; its start reads the verdicts' noise model), and
Chromium, in a window of 1400 x 900 CSS pixels as a laptop shows, opens the view. Three times are taken from the
navigation's start: ``html`` when the page's HTML is parsed (DOMContentLoaded); ``in view`` when every figure that
lies in the window has loaded (its ``<img>`` complete), which is when a reader sees the first screen whole; ``all``
when every figure of the page has loaded, after the page's lazy images are all asked for at once. The figures are
``loading="lazy"``: Chromium also asks for those near the window while the first screen loads, and the service draws
them on its one interpreter, so they are paid for where they compete. Printed: the median and the largest over the
starts, and how many figures were in the window and on the page. ``benchmarks/dashboard_load.py`` times the same
views' steady state (p50, p95) and their first requests one after another in one process, without a browser.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.dashboard_load import VIEWS, linked

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WINDOW = {"width": 1400, "height": 900}
# Pages only: an API answer has no figures and no browser view.
PAGES = [view for view, path in VIEWS.items() if not path.startswith("/api/")]
IN_VIEW = """() => [...document.images].filter(i => { const r = i.getBoundingClientRect();
    return r.top < innerHeight && r.bottom > 0 && r.left < innerWidth && r.right > 0; })"""
LOADED = f"() => ({IN_VIEW})().every(i => i.complete)"
EVERY_LOADED = "() => [...document.images].every(i => i.complete)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, required=True, help="The folder benchmarks/dashboard_load.py --keep seeded")
    parser.add_argument("--builds", type=int, default=50, help="as the history was seeded")
    parser.add_argument("--sweeps", type=int, default=5, help="as the history was seeded")
    parser.add_argument("--starts", type=int, default=3, help="fresh service processes per view and database")
    parser.add_argument("--only", nargs="+", choices=PAGES, metavar="VIEW", help=f"some of: {', '.join(PAGES)}")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    urls = json.loads((args.keep / "seeded.json").read_text())
    names = linked(builds=args.builds, sweeps=args.sweeps)
    views = args.only or PAGES
    print(f"{'view':<24} {'database':<11} {'html p50/max':>15} {'in view p50/max':>17} {'all p50/max':>15} "
          f"{'figures in view/all':>20}")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for view in views:
            for kind, url in urls.items():
                timed = []
                for _ in range(args.starts):
                    with service(url) as server:
                        timed.append(first_view(browser, server + VIEWS[view].format(**names)))
                html, in_view, every = ([t[i] for t in timed] for i in range(3))
                shown, total = timed[-1][3], timed[-1][4]
                print(f"{view:<24} {kind:<11} {_pair(html):>15} {_pair(in_view):>17} {_pair(every):>15} "
                      f"{f'{shown}/{total}':>20}", flush=True)
        browser.close()


def first_view(browser, url: str) -> tuple[float, float, float, int, int]:
    """(html, in view, all) in ms from the navigation's start, and the figures in the window and on the page."""
    tab = browser.new_page(viewport=WINDOW)
    try:
        start = time.perf_counter()
        tab.goto(url, wait_until="domcontentloaded", timeout=180_000)
        html = time.perf_counter() - start
        tab.wait_for_function(LOADED, timeout=180_000, polling=10)
        in_view = time.perf_counter() - start
        shown = tab.evaluate(f"() => ({IN_VIEW})().length")
        total = tab.evaluate("() => document.images.length")
        tab.evaluate("() => document.querySelectorAll('img[loading=lazy]').forEach(i => { i.loading = 'eager'; })")
        tab.wait_for_function(EVERY_LOADED, timeout=180_000, polling=10)
        every = time.perf_counter() - start
        broken = tab.evaluate("() => [...document.images].filter(i => i.naturalWidth === 0).length")
        if broken:
            raise SystemExit(f"{url}: {broken} figure(s) did not load")
        return 1000 * html, 1000 * in_view, 1000 * every, shown, total
    finally:
        tab.close()


@contextmanager
def service(url: str) -> Iterator[str]:
    """``draftbench serve`` on ``url`` at a free port, answering TCP (no request made: nothing warmed); stopped after."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = os.environ | {"DRAFTBENCH_DATABASE_URL": url, "DRAFTBENCH_TOKEN": "first-screen"}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the service did not start on {url.split('@')[-1]}") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def _pair(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} / {max(values):.0f}"


if __name__ == "__main__":
    main()
