"""Pages that list sweeps, crashes, calibration misses or bisections newest first order them as the API does
(``app.newest``: by when each happened, the later stored first among equal times) and say so; a list in another order
says which."""

import re

from fastapi.testclient import TestClient

from app.api.main import create_app
from app.config import Settings
from tests.api.test_newest import crashes_stored_out_of_order, three_nightlies
from tests.conftest import TOKEN
from tests.dashboards.test_pages import tables
from tests.live import serve


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_overview_and_compare_list_sweeps_newest_first_and_say_so(client: TestClient, dataset) -> None:
    first, imported, tied = three_nightlies(client, dataset)
    html = client.get("/").text
    assert [int(cells[0]) for _, cells in tables(html)["sweeps"][1:]] == [tied, first, imported]
    assert "The newest first: by when each was submitted (an imported sweep, when its first run started)" in _text(html)
    compare = client.get("/compare").text
    # Unasked, the newest sweep against the newest earlier one of its name: sweep 1, not the import stored after it.
    assert f"Compare sweep {first} → sweep {tied}" in _text(compare)
    picked = re.findall(r'<option value="(\d+)"', compare.split('name="base"')[1].split("</select>")[0])
    assert picked == [str(tied), str(first), str(imported)]


def test_crashes_list_groups_and_jobs_newest_first_and_link_only_kept_logs(client: TestClient, dataset) -> None:
    jobs = crashes_stored_out_of_order(client, dataset)
    html = client.get("/crashes").text
    assert "Groups newest first (by when they were last seen), each group's jobs newest first." in _text(html)
    groups = html.split('<section class="crash-group"')[1:]
    assert "out of range" in groups[0] and f"job {jobs['bare'][0]} (no log kept)" in _text(groups[1])
    assert "size mismatch" in groups[2]
    r1, r2, r3 = jobs["range"]
    assert re.findall(r"log (\d+)</a>", groups[0].split('class="crash-jobs"')[1]) == [str(r3), str(r1), str(r2)]
    assert f"log excerpt (job {r3}," in _text(groups[0])  # the crash its last seen is from
    linked = set(re.findall(r'href="(/api/v1/jobs/\d+/log)"', html))
    assert f"/api/v1/jobs/{jobs['bare'][0]}/log" not in linked
    assert all(client.get(link).status_code == 200 for link in linked)


def test_a_browser_reads_the_overview_sweeps_newest_first(sqlite_url: str, chromium, dataset) -> None:
    settings = Settings(database_url=sqlite_url, token=TOKEN)
    app = create_app(settings)
    with TestClient(app) as client:
        first, imported, tied = three_nightlies(client, dataset)
    app.state.engine.dispose()
    page = chromium.new_page(java_script_enabled=False)
    try:
        with serve(settings) as url:
            page.goto(f"{url}/")
            table = page.locator("#sweeps")
            assert table.locator("caption").is_visible() and "newest first" in table.locator("caption").inner_text()
            assert [row.locator("td").first.inner_text() for row in table.locator("tr").all()[1:]] == [
                str(tied), str(first), str(imported)]
    finally:
        page.close()
