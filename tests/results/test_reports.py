"""What a worker reports at ``complete`` and what ``import`` stores: text the database cannot hold is stored
made storable and cut with a mark, numbers no run can make are refused naming their field."""

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from app.files import FileRefused
from app.models import CrashSignature, Result
from app.sweeps.imports import import_sweep
from runners.folders import read_folder
from tests.conftest import AUTH
from tests.factories import cell_result, claim, complete, register_worker, submit, sweep_body, upload_log

H200 = Path(__file__).resolve().parents[1] / "data" / "h200-matrix"

NUL_CRASH = """\
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/vllm/v1/engine/core.py", line 88, in run_engine_core
    raise RuntimeError(name)
RuntimeError: unexpected token '\x00' in the tokenizer's vocabulary
"""


@pytest.fixture
def running(client, dataset):
    """A worker holding the first of a sweep's jobs (the sweep has four)."""
    worker = register_worker(client)
    submit(client, sweep_body(dataset, repeats=2))
    return worker, claim(client, worker)


def _count(client, model: type) -> int:
    with client.app.state.sessionmaker() as session:
        return session.scalar(select(func.count()).select_from(model))


def test_a_crash_whose_exception_line_holds_a_nul_byte_is_recorded(client, running) -> None:
    worker, job = running
    assert upload_log(client, job["job_id"], worker, NUL_CRASH).status_code == 204
    response = complete(client, job["job_id"], worker, {"exit_code": 1, "duration_s": 3.0})
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "crashed" and "\x00" not in response.json()["error"]
    [group] = client.get("/api/v1/crashes").json()
    assert group["message"].startswith("unexpected token '' in the tokenizer") and group["count"] == 1
    # The log itself is kept as it came.
    assert "'\x00'" in client.get(f"/api/v1/jobs/{job['job_id']}/log").text


def _with(path: str, value: Any) -> dict[str, Any]:
    """A cell result with one field (dotted path) set to ``value``."""
    result = cell_result()
    *parents, last = path.split(".")
    inner = result
    for part in parents:
        inner = inner.setdefault(part, {})
    inner[last] = value
    return result


@pytest.mark.parametrize(
    ("path", "sent", "stored_as"),
    [("versions.vllm", "0.32.0.dev1234+g" + "a" * 80, "0.32.0.dev1234+g" + "a" * 33 + "…[cut 47 chars]"),
     ("versions.gpu_name", "NVIDIA " + "H" * 150, "NVIDIA " + "H" * 106 + "…[cut 44 chars]"),
     ("output_fingerprint", "f" * 128, "f" * 128),
     ("output_fingerprint", "e" * 300, "e" * 112 + "…[cut 188 chars]"),
     ("model_runner", "V2-and-more-words", "V…[cut 16 chars]"),
     ("versions.vllm", "0.32.0\x00rc1", "0.32.0rc1"),
     ("versions.gpu_name", "NVIDIA H200\udc80", "NVIDIA H200\ufffd")],
    ids=["vllm-version-over-64", "gpu-name-over-128", "fingerprint-of-128", "fingerprint-over-128", "model-runner-over-16",
         "nul-in-version", "surrogate-in-gpu-name"],
)
def test_text_a_worker_reports_is_stored_cut_to_its_column(client, running, path, sent, stored_as) -> None:
    worker, job = running
    body = json.dumps({"outcome": {"result": _with(path, sent), "exit_code": 0}}).encode()  # \udc80 as JSON sends it
    response = client.post(f"/api/v1/jobs/{job['job_id']}/complete", content=body,
                           headers=worker.headers | {"content-type": "application/json"})
    assert response.status_code == 200, response.text
    [row] = client.get("/api/v1/results").json()
    column = {"versions.vllm": "vllm_version", "versions.gpu_name": "gpu_name"}.get(path, path)
    assert row[column] == stored_as


def test_a_long_error_or_nul_in_what_ran_is_stored_not_refused(client, running, dataset) -> None:
    worker, job = running
    response = complete(client, job["job_id"], worker, {"error": "the cell's result JSON is unusable: \x00" + "x" * 6000})
    assert response.status_code == 200 and response.json()["state"] == "failed"
    error = response.json()["error"]
    assert len(error) == 4000 and error.endswith("…[cut 2053 chars]") and "\x00" not in error
    second = claim(client, worker)
    resolved = {"resolved_backend": "CPU_ATTN\x00", "downgrades": ["Cudagraph mode FULL\x00 " + "y" * 3000]}
    response = complete(client, second["job_id"], worker, {"result": cell_result(), "resolved": resolved})
    assert response.status_code == 200, response.text
    [row] = client.get("/api/v1/results").json()
    assert row["resolved_backend"] == "CPU_ATTN"


@pytest.mark.parametrize(
    ("outcome", "loc"),
    [({"result": _with("tokens_per_s", 1e308)}, ["result", "tokens_per_s"]),
     ({"result": _with("requests_per_s", 1e9)}, ["result", "requests_per_s"]),
     ({"result": _with("generation_s", 1e12)}, ["result", "generation_s"]),
     ({"result": _with("engine_start_s", -1.0)}, ["result", "engine_start_s"]),
     ({"result": _with("output_tokens", 10**16)}, ["result", "output_tokens"]),
     ({"result": _with("spec_decode.num_drafts", 2**63)}, ["result", "spec_decode", "num_drafts"]),
     ({"result": _with("spec_decode.num_accepted_tokens", 61)}, ["result", "spec_decode"]),
     ({"result": _with("spec_decode.accepted_per_position", [21, 0, 0])}, ["result", "spec_decode"]),
     ({"result": _with("rounds", [{"seconds": 1e-6, "output_tokens": 100, "num_requests": 1}])}, ["result", "rounds", 0]),
     ({"result": _with("serving", {"concurrency": 1, "ttft_ms": {"p50": 1e20}, "tpot_ms": {"p50": 1}, "itl_ms": {"p50": 1},
                                   "output_tokens_per_s": 1, "requests_per_s": 1, "completed": 1})},
      ["result", "serving", "ttft_ms", "p50"]),
     ({"exit_code": 1, "duration_s": 1e308}, ["duration_s"])],
    ids=["tokens-per-s", "requests-per-s", "generation-s", "negative-start", "output-tokens", "drafts-past-64-bits",
         "accepted-past-drafted", "position-past-drafts", "round-faster-than-physics", "ttft", "duration"],
)
def test_numbers_no_run_can_make_are_refused_naming_the_field(client, running, outcome, loc) -> None:
    worker, job = running
    response = complete(client, job["job_id"], worker, outcome)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "outcome", *loc]
    assert client.get(f"/api/v1/jobs/{job['job_id']}").json()["state"] == "running" and _count(client, Result) == 0


_SERVING = {"concurrency": 4, "ttft_ms": {"p50": 1}, "tpot_ms": {"p50": 1}, "itl_ms": {"p50": 1},
            "output_tokens_per_s": 1, "requests_per_s": 1, "completed": 2}


@pytest.mark.parametrize(
    ("outcome", "loc"),
    [({"result": _with("tokens_per_s", True)}, ["result", "tokens_per_s"]),
     ({"result": _with("tokens_per_s", "100")}, ["result", "tokens_per_s"]),
     ({"result": _with("num_requests", "2")}, ["result", "num_requests"]),
     ({"exit_code": 1, "duration_s": False}, ["duration_s"]),
     ({"result": _with("schema_version", 999)}, ["result", "schema_version"]),
     ({"result": _with("schema_version", 0)}, ["result", "schema_version"]),
     ({"result": _with("rounds", [{"seconds": 0, "output_tokens": 10**15, "num_requests": 1}])}, ["result", "rounds", 0]),
     ({"result": _with("serving", {**_SERVING, "concurrency": 2**70})}, ["result", "serving", "concurrency"]),
     ({"result": _with("serving", {**_SERVING, "ttft_ms": {"p50": 900, "p90": 5, "p99": 1}})}, ["result", "serving", "ttft_ms"])],
    ids=["tokens-per-s-true", "tokens-per-s-text", "count-as-text", "duration-false", "schema-from-the-future",
         "schema-zero", "tokens-in-no-time", "concurrency-past-64-bits", "percentiles-out-of-order"],
)
def test_a_report_of_the_wrong_type_or_shape_is_refused_naming_the_field(client, running, outcome, loc) -> None:
    # Before each was stored: true as 1 tokens/s, "100" as 100, a round of 10**15 tokens in 0 s as 0 tokens/s (the
    # rounds' median, read as a regression), a cell schema no runner writes, a p50 above its p99.
    worker, job = running
    response = complete(client, job["job_id"], worker, outcome)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "outcome", *loc]
    assert client.get(f"/api/v1/jobs/{job['job_id']}").json()["state"] == "running" and _count(client, Result) == 0


def test_the_report_of_a_cell_of_20000_prompts_is_stored(client, running) -> None:
    worker, job = running
    result = cell_result(fingerprints=[f"{i:016x}" for i in range(20_000)])
    outcome = {"result": result, "exit_code": 0}
    assert len(json.dumps({"outcome": outcome})) > 1024 * 1024  # past the limit of other bodies
    response = complete(client, job["job_id"], worker, outcome)
    assert response.status_code == 200, response.text
    [row] = client.get("/api/v1/results").json()
    assert row["num_requests"] == 20_000


def _import(session, folder: Path):
    found = read_folder(folder)
    return import_sweep(session=session, spec=found.spec, ran=found.ran, digest=found.digest, layout=found.layout).sweep


def test_an_imported_result_past_the_ceilings_is_refused_naming_the_file_and_field(migrated_sessions, tmp_path: Path) -> None:
    folder = tmp_path / "absurd"
    shutil.copytree(H200, folder)
    path = folder / "cells" / "c0000-r0" / "result.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {"tokens_per_s": 1e308}))
    # An import is checked whole before the database is touched: the folder is refused, nothing is stored.
    with pytest.raises(FileRefused, match=r"c0000-r0/result.json: tokens_per_s: .*less than or equal to 10000000"):
        read_folder(folder)
    with migrated_sessions() as session:
        assert session.scalar(select(func.count()).select_from(Result)) == 0


def test_an_imported_crash_whose_log_holds_a_nul_byte_is_recorded(migrated_sessions, tmp_path: Path) -> None:
    folder = tmp_path / "nul"
    shutil.copytree(H200, folder)
    crashed = folder / "cells" / "c0003-r0"
    (crashed / "result.json").unlink()
    (crashed / "cell.log").write_text(NUL_CRASH)
    (crashed / "exit.json").write_text(json.dumps(json.loads((crashed / "exit.json").read_text()) | {"exit_code": 1}))
    with migrated_sessions.begin() as session:
        job = next(job for job in _import(session, folder).jobs if job.cell_index == 3)
        assert job.state.value == "crashed" and "\x00" not in job.crash.message
        assert session.scalars(select(CrashSignature)).one().message.startswith("unexpected token ''")


def test_a_worker_whose_build_has_a_long_development_version_registers(client) -> None:
    version = "0.11.1rc6.dev14+g0f9a8e3b5.d20251118.cu129.precxx11abi.torch2.9.0.rocm-none"
    body = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "dev", "vllm_version": version}]}
    assert client.post("/api/v1/workers", json=body, headers=AUTH).status_code == 201
    [build] = [b for b in client.get("/api/v1/builds").json() if b["label"] == "dev"]
    assert build["vllm_version"] == version[:49] + f"…[cut {len(version) - 49} chars]"
    # The same version registers again: what is stored is what it is compared with.
    assert client.post("/api/v1/workers", json=body, headers=AUTH).status_code == 201
    body["builds"] = [{"label": "nul", "vllm_version": "0.32.0\x00"}]
    assert client.post("/api/v1/workers", json=body, headers=AUTH).status_code == 201
    assert [b["vllm_version"] for b in client.get("/api/v1/builds").json() if b["label"] == "nul"] == ["0.32.0"]
