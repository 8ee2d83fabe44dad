"""The pages as a reader sees them in headless Chromium over the H100 the device lent on 2026-12-05
(``tests/data/h100-2026-12-05``: issue 22's 5 ms spin checked by ``draftbench ci``, and two sweeps at the default rounds)
beside H200 sweeps of the same builds and cell (``tests/data/h200-2026-12-04``).

The H100's folders are imported first, as a store that reads every folder in name order does: its sweeps get the
lowest ids though they ran last. Each test names what a reader once saw wrong there: a run's facts that named the
H200's sweeps as the newest and gave the H100 pair's runs one minute of the thirteen they took, a history that ringed
the base build as the change, a fallback headline that costed a cell against itself, a noise class that did not say
where it came from, a sweep list without its GPUs, and a compare row that wrote its ratio ``0.89 [0.85, 0.93]x`` and
its acceptance difference as the zero-width ``0.000 [0.000, 0.000]``."""

from collections.abc import Iterator

import httpx
import pytest

from app.config import Settings
from tests.conftest import TOKEN
from tests.dashboards.h200 import DATA, imported_folder
from tests.live import serve

H100 = DATA / "h100-2026-12-05"
H200 = DATA / "h200-2026-12-04"
H100_NAME = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, list[int]]]]:
    """(the address, each sweep name's ids, lowest first): the H100's four sweeps (ids 1 to 4), then six H200 sweeps
    of 2026-12-04 (two A/A, two CI pairs of slowed builds)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('h100-pages') / 'store.db'}"
    for folder in [*sorted(p for p in H100.iterdir() if p.is_dir()), *sorted(p for p in H200.iterdir() if p.is_dir())]:
        imported_folder(url, folder)
    with serve(Settings(database_url=url, token=TOKEN)) as base:
        ids: dict[str, list[int]] = {}
        for sweep in sorted(httpx.get(f"{base}/api/v1/sweeps", timeout=30).json(), key=lambda s: s["id"]):
            ids.setdefault(sweep["name"], []).append(sweep["id"])
        yield base, ids


def _facts(page) -> dict[str, str]:
    return dict(zip(page.locator("#facts dt").all_inner_texts(), page.locator("#facts dd").all_inner_texts(), strict=True))


def test_the_overview_names_each_sweeps_gpu(site, page) -> None:
    base, _ = site
    page.goto(f"{base}/")
    rows = {r.locator("td").nth(1).inner_text(): r.locator("td.gpu").inner_text()
            for r in page.locator("#sweeps tr").all()[1:]}
    assert rows["h100-efficiency-8b"] == rows["h100-proof22-slow10-ci"] == "H100", rows
    assert rows["h200-proof22-aa-fi"] == rows["h200-proof22-slow10-ci"] == "H200", rows
    assert page.locator("#sweeps th").all_inner_texts()[3] == "GPU"


def test_the_h100_pairs_comparison_says_worse_with_its_pairs_interval_and_energy(site, page) -> None:
    base, ids = site
    head_base, head = ids["h100-proof22-slow10-ci"]
    page.goto(f"{base}/compare?base={head_base}&head={head}")
    [row] = page.locator("#changes tr").all()[1:]
    cells = row.locator("td").all_inner_texts()
    header = page.locator("#changes th").all_inner_texts()
    said = dict(zip(header, cells, strict=True))
    assert (said["verdict"], said["GPU"]) == ("worse", "H100")
    # The ratio as the comment and the reasons write it, its unit on the point: not "0.89 [0.85, 0.93]x".
    assert said["head / base [95 %]"] == "0.89x [0.85, 0.93]"
    assert said["could detect"] == "6 % (6 pairs)"
    assert said["tokens/J head / base [95 %]"] == "0.97x [0.96, 0.99]"
    assert said["base tokens/J"].startswith("6.63 [6.55, 6.71]") and said["head tokens/J"].startswith("6.45 [6.40, 6.50]")
    # 0.996 on both sides over 560k draft tokens: an interval of a few hundredths of a point, never "[0.000, 0.000]".
    assert said["Δ acceptance, points [95 %]"] == "0.00 [-0.04, 0.03]"
    assert said["ran (base → head)"].count("draft eager") == 2
    assert "(6 pairs of starts, 95 %)" in said["why"] and "100 %" not in page.content()
    facts = _facts(page)
    assert facts["GPU"] == H100_NAME
    # The six pairs ran from 12:32 (the base's first start) to 12:45, not from 12:44, the base's last finish.
    assert facts["ran"] == "2026-12-05 12:32 to 2026-12-05 12:45 UTC"
    assert facts["sweeps"] == f"{head_base} (h100-proof22-slow10-ci), {head} (h100-proof22-slow10-ci)"


def test_a_paired_sweeps_page_says_its_gpu_and_opens_its_comparison(site, page) -> None:
    base, ids = site
    first, second = ids["h100-proof22-slow10-ci"]
    page.goto(f"{base}/sweeps/{second}")
    facts = _facts(page)
    assert facts["GPU"] == H100_NAME and facts["vLLM"] == "0.26.0" and facts["builds"] == "vllm-0.26.0-slow-gpu-5ms"
    assert facts["ran"] == "2026-12-05 12:35 to 2026-12-05 12:44 UTC"
    link = page.locator("#compare-pair")
    assert link.inner_text() == f"compare with its pair (base sweep {first}, head sweep {second})"
    link.click()
    assert page.url.endswith(f"/compare?base={first}&head={second}")
    assert page.locator("#changes tr").nth(1).locator("td").first.inner_text() == "worse"
    # The base's page opens the same comparison.
    page.goto(f"{base}/sweeps/{first}")
    assert page.locator("#compare-pair").get_attribute("href") == f"/compare?base={first}&head={second}"


def test_the_noise_page_says_where_the_h100_class_came_from(site, page) -> None:
    base, ids = site
    page.goto(f"{base}/noise")
    section = page.locator("#noise-H100")
    assert section.locator("h2").inner_text() == "H100"
    [row] = section.locator("tr").all()[1:]
    said = dict(zip(section.locator("th").all_inner_texts(), row.locator("td").all_inner_texts(), strict=True))
    # Two cells (the base build's 10 starts, the 5 ms spin's 6): df 16 - 2.
    assert (said["CV between starts"], said["df"], said["cells pooled"], said["starts"]) == ("3.42 %", "14", "2", "16")
    assert said["starts finished"] == "2026-12-05 12:35 to\n2026-12-05 12:50"
    h100_sweeps = sorted(ids["h100-efficiency-8b"] + ids["h100-efficiency-8b-again"] + ids["h100-proof22-slow10-ci"])
    assert said["from (builds, sweeps)"] == ("vllm-0.26.0, vllm-0.26.0-slow-gpu-5ms\n"
                                             + " ".join(f"sweep {i}" for i in h100_sweeps))
    assert said["hosts (GPUs)"] == f"none recorded (imported starts)\n{H100_NAME}"
    # No H200 row names an H100 sweep, nor the H100 by name.
    h200 = page.locator("#noise-H200").inner_text()
    assert H100_NAME not in h200 and not any(f"sweep {i}\n" in h200 or f"sweep {i} " in h200 for i in h100_sweeps)


def test_the_h100_history_places_the_base_first_and_rings_the_slowed_build(site, page) -> None:
    base, _ = site
    # Unasked, the history shows the cell of the newest result: the H100's draft cell.
    page.goto(f"{base}/history")
    assert page.locator("h1").inner_text() == "History: H100 · draft_model · FLASH_ATTN · FULL_AND_PIECEWISE"
    rows = [r.locator("td").all_inner_texts() for r in page.locator("#points tr").all()[1:]]
    # The base build ran again after the check (the efficiency sweeps, 12:45-12:50): placed by its newest run it came
    # after the 5 ms spin's build and was ringed as the change, a speed-up.
    assert [(r[1], r[2], r[7]) for r in rows] == [
        ("vllm-0.26.0", "2026-12-05 12:32 (first ran)", ""),
        ("vllm-0.26.0-slow-gpu-5ms", "2026-12-05 12:35 (first ran)", "tokens/s"),
    ]
    assert _facts(page)["ran"] == "2026-12-05 12:32 to 2026-12-05 12:50 UTC"


def test_the_matrix_facts_name_the_sweeps_that_ran_last_and_both_gpus(site, page) -> None:
    base, ids = site
    page.goto(f"{base}/matrix")
    facts = _facts(page)
    assert facts["GPU"] == f"{H100_NAME}, NVIDIA H200"
    # Ten sweeps: the eight that ran last are named (the H100's four among them, though their ids are the lowest).
    for name in ("h100-efficiency-8b", "h100-efficiency-8b-again", "h100-proof22-slow10-ci"):
        for i in ids[name]:
            assert f"{i} ({name})" in facts["sweeps"], facts["sweeps"]
    assert facts["sweeps"].endswith(" and 2 that ran earlier") and facts["ran"].endswith("2026-12-05 12:50 UTC")
    # Each H100 row reads H100, the matrix's two H100 panels say H100 in their titles.
    gpus = [r.locator("td").first.inner_text() for r in page.locator("#cells tr").all()[1:]]
    assert gpus.count("H100") == 2 and set(gpus) == {"H100", "H200"}, gpus
    titles = [f.get_attribute("alt") or "" for f in page.locator("img").all()]
    assert sum(t.startswith("H100 · draft_model k=3") for t in titles) == 2, titles


def test_a_fallback_that_is_its_own_reference_is_not_costed_against_itself(site, page) -> None:
    base, _ = site
    page.goto(f"{base}/fallback?gpu_kind=H100")
    # Both H100 draft cells ran their draft eagerly in every start: no cell of their config ran it captured, so each
    # is its own reference. The headline once read "1.00x [0.97, 1.03] of FLASH_ATTN ... against 10 starts".
    headline = page.locator("#headline").inner_text()
    assert "1.00x" not in headline and "none with a cost to name" in headline, headline
    assert "H100 FLASH_ATTN draft_model k=3 draft eager on vllm-0.26.0" in headline
    rows = [r.locator("td").all_inner_texts() for r in page.locator("#costs tr").all()[1:]]
    assert [r[8] for r in rows] == ["the reference\nthe fastest whose target ran FULL_AND_PIECEWISE as asked"] * 2
    assert {r[1] for r in rows} == {"H100"} and all(r[6] == "draft eager" for r in rows)
