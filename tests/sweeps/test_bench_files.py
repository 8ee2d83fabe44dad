"""vLLM's own benchmark files as results: read by hand-worked numbers, imported once as a one-cell sweep."""

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
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


def _cell_sweep(tmp_path: Path) -> Path:
    sweep = tmp_path / "cell.yaml"
    sweep.write_text(yaml.safe_dump(sweep_body("draftbench", repeats=1, mode="serve", concurrency=[4], name="peer",
                                               speculative=[{"method": "ngram", "num_speculative_tokens": 3}])))
    return sweep


def _import_bench(result: Path, sweep: Path, url: str, *more: str, **env: str) -> str:
    """The one line of a refused ``import-bench``, after checking the database holds no sweep."""
    from sqlalchemy import func, select

    from app import db
    from app.models import Sweep
    from tests.cli.test_errors import one_line, run

    line = one_line(run("import-bench", str(result), "--sweep", str(sweep), "--database-url", url, *more, env=env))
    db.upgrade(url)
    engine = db.make_engine(url)
    with engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(Sweep)) == 0
    engine.dispose()
    return line


def _serve_with(**fields: object) -> bytes:
    data = json.loads((FILES / "serve.json").read_text()) | fields
    return json.dumps({k: v for k, v in data.items() if v is not None}).encode()


@pytest.mark.parametrize("which", ["result", "sweep"])
def test_import_bench_refuses_a_file_that_is_a_symlink(tmp_path: Path, db_url: str, which: str) -> None:
    result, sweep = tmp_path / "serve.json", _cell_sweep(tmp_path)
    result.write_bytes((FILES / "serve.json").read_bytes())
    link = result if which == "result" else sweep
    link.unlink()
    link.symlink_to("/etc/passwd")
    line = _import_bench(result, sweep, db_url)
    assert f"{link}: a symbolic link" in line and "root:" not in line


def test_import_bench_holds_the_file_to_the_log_limit(tmp_path: Path, sqlite_url: str) -> None:
    result = tmp_path / "serve.json"
    result.write_bytes((FILES / "serve.json").read_bytes() + b" " * 4096)
    line = _import_bench(result, _cell_sweep(tmp_path), sqlite_url, DRAFTBENCH_MAX_LOG_BYTES="4096")
    assert "over the limit of 4096 (DRAFTBENCH_MAX_LOG_BYTES)" in line


MALFORMED = {
    "duration as text": (_serve_with(duration="8 s"), "duration"),
    "duration zero": (_serve_with(duration=0), "duration"),
    "duration 1e300": (_serve_with(duration=1e300), "generation_s: Input should be less than or equal to 2592000"),
    "duration NaN": (_serve_with(duration=float("nan")), "not JSON"),
    "throughput 1e400": (_serve_with().replace(b'"output_throughput": 640.0', b'"output_throughput": 1e400'), "output_throughput"),
    "completed negative": (_serve_with(completed=-40), "completed"),
    "completed a list": (_serve_with(completed=[40]), "completed"),
    "no total_output_tokens": (_serve_with(total_output_tokens=None), "total_output_tokens"),
    "drafts without draft tokens": (_serve_with(spec_decode_draft_tokens=None), "spec_decode_draft_tokens"),
    "rates not a list": (_serve_with(spec_decode_per_position_acceptance_rates="0.7"), "spec_decode_per_position_acceptance_rates"),
    "a rate of 1e300": (_serve_with(spec_decode_per_position_acceptance_rates=[1e300]), "spec_decode_per_position_acceptance_rates"),
    "throughput over zero seconds": (
        b'{"elapsed_time": 0, "num_requests": 32, "total_num_tokens": 6144, "requests_per_second": 8, "tokens_per_second": 1}',
        "elapsed_time"),
    "a list": (b"[1, 2]", "not a result of `vllm bench"),
    "a key given twice": (_serve_with().rstrip(b"}") + b', "completed": 4000}', "key 'completed' is given twice"),
    "binary garbage": (bytes(range(256)), "not JSON"),
    "not UTF-8": (b'{"duration": "\xff"}', "not JSON"),
    "nested 100,000 deep": (b"[" * 100_000, "not JSON"),
    "empty": (b"", "not JSON"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_import_bench_refuses_a_malformed_file_in_one_line_naming_the_field(tmp_path: Path, sqlite_url: str, case: str) -> None:
    data, field = MALFORMED[case]
    result = tmp_path / "serve.json"
    result.write_bytes(data)
    line = _import_bench(result, _cell_sweep(tmp_path), sqlite_url, "--output-len", "128")
    assert line.startswith(f"draftbench: nothing imported: {result}: ") and field in line, line


@pytest.mark.parametrize("when", ["2099-01-01", "1990-01-01"])
def test_import_bench_refuses_a_file_written_at_an_implausible_time(tmp_path: Path, db_url: str, when: str) -> None:
    # The file says when it ran only by its modification time, which a copy from another host can carry.
    result = tmp_path / "serve.json"
    result.write_bytes((FILES / "serve.json").read_bytes())
    stamp = datetime.fromisoformat(when).replace(tzinfo=UTC).timestamp()
    os.utime(result, (stamp, stamp))
    line = _import_bench(result, _cell_sweep(tmp_path), db_url)
    assert f"{result}: its modification time" in line and f"{when}T00:00:00Z is not a plausible time" in line
