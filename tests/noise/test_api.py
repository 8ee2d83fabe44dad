"""``GET /api/v1/noise`` and the ``/noise`` page over A/A groups stored through the worker protocol."""

import math
from pathlib import Path

from fastapi.testclient import TestClient

from tests.factories import register_worker
from tests.noise.test_service import run


def test_the_api_gives_each_class_its_spread_and_detectable_changes(client: TestClient, dataset: Path) -> None:
    run(client, register_worker(client, builds=("b1",)), dataset, "b1",
        {"ngram": [100.0, 400.0, 200.0], None: [1000.0, 1000.0, 1000.0 * math.exp(0.3)]})
    answer = client.get("/api/v1/noise")
    assert answer.status_code == 200, answer.text
    draft, none = answer.json()
    assert ((draft["gpu_kind"], draft["backend"], draft["graph_mode"], draft["method_class"], draft["mode"], draft["concurrency"])
            == ("cpu", "CPU_ATTN", "NONE", "draft", "offline", None))
    assert none["method_class"] == "none" and (none["cells"], none["starts"], none["df"]) == (1, 3, 2)
    # Baseline: logs 0, 0, 0.3 about ln 1000: mean 0.1, squares 0.01 + 0.01 + 0.04 = 0.06 over 2: s = sqrt 0.03.
    assert math.isclose(none["sd"], math.sqrt(0.03)) and math.isclose(none["cv"], math.exp(math.sqrt(0.03)) - 1)
    # Three starts a side: se = s sqrt(2/3), on df 2 + 2 + 2 = 6; t_{6, 0.975} + t_{6, 0.8} = 2.44691 + 0.90570.
    [three, eight] = none["min_detectable"]
    assert (three["starts"], eight["starts"]) == (3, 8)
    assert math.isclose(three["effect"], math.exp(3.35261 * math.sqrt(0.03) * math.sqrt(2 / 3)) - 1, rel_tol=1e-5)
    assert eight["effect"] < three["effect"]
    assert none["within_df"] == 6 and math.isclose(none["within_sd"], 0.2 / math.sqrt(3))
    assert none["hosts"] == ["h"] and none["newest"]
    assert (none["paired_sd"], none["paired_df"]) == (None, None)  # no A/A pairs: starts of unpaired sweeps


def test_the_page_shows_a_table_per_gpu_kind_and_is_in_the_navigation(client: TestClient, dataset: Path) -> None:
    empty = client.get("/noise")
    assert empty.status_code == 200 and 'id="empty"' in empty.text and 'href="/noise" class="here"' in empty.text
    run(client, register_worker(client, builds=("b1",)), dataset, "b1",
        {"ngram": [100.0, 400.0], None: [1000.0, 1000.0 * math.exp(0.1)]})
    page = client.get("/noise")
    assert page.status_code == 200 and 'id="noise-cpu"' in page.text and 'id="empty"' not in page.text
    # The baseline's CV: exp(0.1 / sqrt 2) - 1 = 7.33 %; the draft's: exp(sqrt 2 ln 2) - 1 = 166.51 %.
    assert "7.33 %" in page.text and "166.51 %" in page.text
    assert 'href="/noise"' in client.get("/crashes").text
