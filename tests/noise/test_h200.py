"""The noise model over the H200 noise sweeps (tests/data/h200-2026-12-01/noise): three engine starts of each of
four cells of one build (Qwen3-8B shape, FLASH_ATTN and FLASHINFER, draft_model k=3 and its baseline), imported as
a user imports them.

By hand, from the stored medians (tokens/s, each the median of its start's 5 rounds):

- baseline FLASH_ATTN 5044.9, 4956.6, 5025.6; FLASHINFER 4743.7, 4607.9, 4696.8;
- draft_model FLASH_ATTN 3747.2, 3824.2, 3813.9; FLASHINFER 3437.5, 2743.4, 3467.5.

Per class ``s^2 = sum_cells sum_starts (ln v - mean_cell)^2 / (2 + 2)``: baseline s = 0.01233 (CV 1.24 %), draft
s = 0.09423 (CV 9.88 %, nearly all of it FLASHINFER's slow start); each 4 degrees of freedom of 2 cells and 6 starts.
"""

import math

import pytest
from fastapi.testclient import TestClient

from tests.dashboards.h200 import in_process, noise_imported


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory):
    url = f"sqlite:///{tmp_path_factory.mktemp('noise') / 'noise.db'}"
    noise_imported(url)
    yield from in_process(url)


def test_the_h200_baseline_spreads_about_one_percent_and_the_draft_about_ten(h200: TestClient) -> None:
    found = {c["method_class"]: c for c in h200.get("/api/v1/noise").json()}
    for c in found.values():
        print(c["method_class"], f"s={c['sd']:.5f} cv={c['cv']:.4f} df={c['df']} within={c['within_sd']:.5f}",
              [round(d["effect"], 4) for d in c["min_detectable"]])
    none, draft = found["none"], found["draft"]
    assert {(c["gpu_kind"], c["mode"], c["cells"], c["starts"], c["df"]) for c in found.values()} == {("H200", "offline", 2, 6, 4)}
    assert none["sd"] == pytest.approx(0.012329, abs=2e-6) and none["cv"] == pytest.approx(0.012406, abs=2e-6)
    assert draft["sd"] == pytest.approx(0.094232, abs=2e-6) and draft["cv"] == pytest.approx(0.098814, abs=2e-6)
    # Within a start: 12 starts of 5 rounds, 4 degrees of freedom each, 24 a class.
    assert none["within_df"] == draft["within_df"] == 24
    assert none["gpu_names"] == ["NVIDIA H200"] and none["newest"]
    # 3 starts a side, df 4: (2.77645 + 0.94096) s sqrt(2/3): a 3.8 % change is found on a baseline, 33 % with a draft.
    assert none["min_detectable"][0]["effect"] == pytest.approx(math.exp(3.71741 * 0.012329 * math.sqrt(2 / 3)) - 1, rel=1e-3)
    assert draft["min_detectable"][0]["effect"] == pytest.approx(math.exp(3.71741 * 0.094232 * math.sqrt(2 / 3)) - 1, rel=1e-3)


def test_the_page_shows_the_h200_classes(h200: TestClient) -> None:
    page = h200.get("/noise")
    assert page.status_code == 200 and 'id="noise-H200"' in page.text
    assert "1.24 %" in page.text and "9.88 %" in page.text and "NVIDIA H200" in page.text
