"""Headless Chromium through Playwright, for the tests that look at pages as a user does."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# The window the page tests read at: what a laptop shows, and what nothing on a page may be wider than.
WIDTH = 1400
# As the machine's own probe starts it: without the background-networking flags Chromium keeps
# trying hosts this closed network refuses.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def emptied(folder: Path) -> Path:
    """``folder``, made empty: where a module's screenshots go, so the last run's are never mistaken for this one's."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


@pytest.fixture
def chromium() -> Iterator:
    """Headless system Chromium through Playwright; a missing browser is a failure, never a skip."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: the browser test needs Chromium; install it with `make browser`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium) -> Iterator:
    """A tab at WIDTH x 1000 with JavaScript off: the pages must say what they say without scripts."""
    tab = chromium.new_page(viewport={"width": WIDTH, "height": 1000}, java_script_enabled=False)
    yield tab
    tab.close()
