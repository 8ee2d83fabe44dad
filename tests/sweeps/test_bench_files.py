"""vLLM's own benchmark files as results: read by hand-worked numbers, imported once as a one-cell sweep."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from app.sweeps import bench_files
from tests.factories import sweep_body

FILES = Path(__file__).resolve().parents[1] / "data" / "vllm-bench"
DRAFTBENCH = Path(sys.executable).with_name("draftbench")


def test_a_serve_file_gives_throughput_latency_and_the_servers_counters() -> None:
    result = bench_files.to_result(json.loads((FILES / "serve.json").read_text()))
    assert (result.tokens_per_s, result.requests_per_s, result.output_tokens, result.generation_s) == (640.0, 5.0, 5120, 8.0)
    counters = result.spec_decode
    # Rates 0.7, 0.5, 0.3 of 1000 drafts.
    assert (counters.num_drafts, counters.num_accepted_tokens, counters.accepted_per_position) == (1000, 1500, [700, 500, 300])
    serving = result.serving
    assert serving.concurrency == 4 and serving.ttft_ms.p50 == 20.0 and serving.ttft_ms.p99 == 31.0
    assert serving.ttft_ms.p90 is None  # the file holds only the percentiles it was asked for
    assert [r.output_tokens for r in result.rounds] == [5120]


def test_a_throughput_file_needs_the_output_length_to_give_output_tokens_per_second() -> None:
    data = json.loads((FILES / "throughput.json").read_text())
    with pytest.raises(bench_files.BenchFileError, match="output length"):
        bench_files.to_result(data)
    # 32 requests x 128 output tokens over 4 s; the rest of the 6144 tokens were prompts.
    result = bench_files.to_result(data, output_len=128)
    assert (result.tokens_per_s, result.output_tokens, result.prompt_tokens) == (1024.0, 4096, 2048)


def test_anything_else_is_refused_by_name() -> None:
    with pytest.raises(bench_files.BenchFileError, match="not a result"):
        bench_files.to_result({"results": []})


def test_import_bench_makes_one_finished_cell_once(tmp_path: Path, dataset: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    sweep = tmp_path / "cell.yaml"
    body = sweep_body("draftbench", repeats=1, mode="serve", concurrency=[4], name="peer",
                      speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep.write_text(yaml.safe_dump(body))
    argv = [str(DRAFTBENCH), "import-bench", str(FILES / "serve.json"), "--sweep", str(sweep), "--database-url", url]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "imported as sweep 1 'peer' (serve: 640.0 output tok/s)" in first.stdout
    again = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert "already imported as sweep 1" in again.stdout

    from app import db
    from app.models import Result

    engine = db.make_engine(url)
    with db.make_sessionmaker(engine)() as session:
        [row] = session.query(Result).all()
        assert (row.source, row.tokens_per_s, row.job.mode, row.job.concurrency) == ("vllm-bench", 640.0, "serve", 4)
        assert row.serving["ttft_ms"]["p50"] == 20.0 and row.job.sweep.tags == ["imported", "vllm-bench"]
    engine.dispose()
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump(body | {"concurrency": [1, 4]}))
    refused = subprocess.run([*argv[:4], str(two), *argv[5:]], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "describes 2 cells" in refused.stderr
