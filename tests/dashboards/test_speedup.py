"""``/serving``'s speedup against load per k (``mode=offline``: against batch size), its CSV and ``/api/v1/speedups``,
over ngram k 2 and 4 beside the baseline at batch sizes 1, 4 and 16, reported through the worker protocol at speeds
chosen so that k=2 stops paying between 4 and 16; and what a reader sees of it in Chromium."""

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from tests.browser import WIDTH
from tests.conftest import TOKEN
from tests.dashboards import shown
from tests.factories import claim, complete, register_worker, submit, sweep_body
from tests.live import serve

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "var" / "screenshots"
BATCHES = (1, 4, 16)
# tokens/s by (k, batch size), each reported by two starts at 1 % either side; k None: the baseline.
SPEEDS = {(None, 1): 100.0, (None, 4): 100.0, (None, 16): 400.0,
          (2, 1): 150.0, (2, 4): 130.0, (2, 16): 240.0,
          (4, 1): 148.0, (4, 4): 90.0, (4, 16): 160.0}
RESOLVED = {"resolved_backend": "CPU_ATTN", "resolved_graph_mode": "NONE"}


def _result(speed: float, k: int | None) -> dict:
    drafts = 20 if k else 0
    per_position = [10, 5, 2, 1][:k or 0]
    return {"engine_start_s": 10.0, "warmup_s": 1.0, "generation_s": 2.0, "num_requests": 2, "prompt_tokens": 40,
            "output_tokens": 200, "tokens_per_s": speed, "requests_per_s": 1.0,
            "spec_decode": {"num_drafts": drafts, "num_draft_tokens": drafts * (k or 0), "num_accepted_tokens": sum(per_position),
                            "accepted_per_position": per_position},
            "requests": [{"num_output_tokens": 100, "fingerprint": f} for f in "ab"], "output_fingerprint": "f" * 16,
            "versions": {"vllm": "0.32.0"}}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = f"sqlite:///{tmp_path_factory.mktemp('speedup') / 'site.db'}"
    with serve(Settings(database_url=url, token=TOKEN)) as base, httpx.Client(base_url=base, timeout=30) as http:
        worker = register_worker(http)
        for batch in BATCHES:
            body = sweep_body(ROOT / "runners" / "prompts" / "draftbench.jsonl", name=f"batch-{batch}", repeats=2, baseline=True,
                              workload={"dataset": str(ROOT / "runners" / "prompts" / "draftbench.jsonl"), "num_prompts": batch,
                                        "max_tokens": 8},
                              speculative=[{"method": "ngram", "num_speculative_tokens": [2, 4], "prompt_lookup_max": 4}])
            assert submit(http, body).status_code == 201
            seen: set[int | None] = set()
            for _ in range(6):
                job = claim(http, worker)
                k = (job["spec"]["speculative"] or {}).get("num_speculative_tokens")
                speed = SPEEDS[(k, batch)] * (1.01 if k in seen else 0.99)
                seen.add(k)
                assert complete(http, job["job_id"], worker, {"result": _result(speed, k), "resolved": RESOLVED}).status_code == 200
        yield base


def test_the_api_gives_each_k_its_speedup_best_k_and_break_even(site: str) -> None:
    [line] = httpx.get(f"{site}/api/v1/speedups", params={"mode": "offline"}).json()
    assert (line["method"], line["backend"], line["ks"], line["loads"]) == ("ngram", "CPU_ATTN", [2, 4], list(BATCHES))
    assert line["title"] == "cpu · ngram · CPU_ATTN · NONE · vllm-test"
    speedups = {(c["k"], c["load"]): c["speedup"] for c in line["cells"]}
    assert speedups == pytest.approx({key: SPEEDS[key] / SPEEDS[(None, key[1])] for key in speedups})
    assert [(b["load"], b["k"]) for b in line["best"]] == [(1, 2), (4, 2), (16, 2)]
    assert line["best"][0]["within_noise"] == [4]  # 1.50x against 1.48x, each +- 2 %
    ends = {e["k"]: e for e in line["break_even"]}
    # k=2: 1.3 at 4, 0.6 at 16: share 0.3 / 0.7 of the way on log load.
    assert ends[2]["pays"] == "up_to" and ends[2]["load"] == pytest.approx(4 * 4 ** (0.3 / 0.7))
    assert (ends[2]["low"], ends[2]["high"]) == (4, 16)
    assert ends[4]["sentence"] == f"ngram k=4 on CPU_ATTN pays up to {1 * 4 ** (0.48 / 0.58):.3g} sequences [1, 4]"
    assert httpx.get(f"{site}/api/v1/speedups").json() == []  # no serving cell
    refused = httpx.get(f"{site}/api/v1/speedups", params={"mode": "online"})
    assert refused.status_code == 422 and "mode" in refused.json()["detail"][0]["loc"] and "offline" in refused.text


def test_the_csv_holds_every_number_the_figure_and_tables_show(site: str) -> None:
    answer = httpx.get(f"{site}/serving", params={"mode": "offline", "format": "csv", "table": "speedup"})
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    assert len(rows) == 6 and {r["load_unit"] for r in rows} == {"sequences"}
    row = next(r for r in rows if (r["k"], r["load"]) == ("2", "16"))
    assert float(row["speedup"]) == pytest.approx(0.6) and float(row["baseline_tokens_per_s"]) == pytest.approx(400.0)
    assert row["break_even"] == "up_to" and (row["break_even_low"], row["break_even_high"]) == ("4", "16")
    assert row["best_k_here"] == "2" and len(row["jobs"].split()) == 2 and len(row["baseline_jobs"].split()) == 2
    assert httpx.get(f"{site}/serving", params={"mode": "offline", "format": "svg", "figure": 1}).text.startswith("<?xml")
    assert httpx.get(f"{site}/serving", params={"mode": "batch"}).status_code == 422


def test_a_reader_sees_where_each_k_stops_paying_and_the_best_k(site: str, page) -> None:
    page.goto(f"{site}/serving")
    page.locator("#other-mode").click()
    assert page.locator("#filters select[name=mode]").input_value() == "offline"  # the filters keep the mode
    line = page.locator("section.speedup-line[data-title='cpu · ngram · CPU_ATTN · NONE · vllm-test']")
    said = line.locator("ul.break-even li").all_inner_texts()
    assert said == [f"ngram k=2 on CPU_ATTN pays up to {4 * 4 ** (0.3 / 0.7):.3g} sequences [4, 16]",
                    f"ngram k=4 on CPU_ATTN pays up to {4 ** (0.48 / 0.58):.3g} sequences [1, 4]"]
    best = line.locator("ul.best-k li").all_inner_texts()
    assert best[0].startswith("best k: 2 at 1 sequence (1.50x [") and best[0].endswith("; 4 within noise")
    assert best[2].startswith("best k: 2 at 16 sequences (0.60x [") and "surely slower than the baseline" in best[2]
    rows = [r.split("\t") for r in line.locator("table.speedups tr").all_inner_texts()[1:]]
    assert [(r[0].split()[0], r[1], r[2].split()[0]) for r in rows][:3] == [("2", "1", "1.50x"), ("2", "4", "1.30x"), ("2", "16", "0.60x")]
    assert rows[0][3] == "1.50x"  # two k fit exactly: predicted = measured
    assert shown.loaded(line.locator("figure.chart img"))["natural_width"] > 300
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "serving-speedup.png"), full_page=True)
