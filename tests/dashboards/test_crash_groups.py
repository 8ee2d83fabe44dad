"""A cell whose starts died two ways links each crash kind to its own crash group, on ``/matrix`` and on its sweep's
page, over real vLLM logs (``tests/data/crashlogs``) reported through the worker protocol."""

import re
from pathlib import Path

from fastapi.testclient import TestClient

from tests.factories import claim, complete, register_worker, submit, sweep_body, upload_log

LOGS = Path(__file__).resolve().parents[1] / "data" / "crashlogs"
BADGE = r'<a class="badge crash" href="/crashes/([0-9a-f]+)"[^>]*>([a-z_]+)</a>'


def _died_two_ways(client: TestClient, dataset: Path) -> tuple[int, dict[str, str]]:
    """A sweep of one n-gram cell, two starts: one dies with vLLM 20305's free-memory log, one with exit code 1 and no
    log kept. Returns the sweep and each crash kind's group, as ``/api/v1/crashes`` says."""
    worker = register_worker(client, gpu_kinds=("H200",))
    body = sweep_body(dataset, gpu_kinds=["H200"], backends=["FLASH_ATTN"], speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep = submit(client, body).json()["id"]
    first, second = claim(client, worker), claim(client, worker)
    assert upload_log(client, first["job_id"], worker, (LOGS / "free-memory-vllm-20305.log").read_text()).status_code == 204
    for job in (first, second):
        assert complete(client, job["job_id"], worker, {"exit_code": 1, "duration_s": 30}).status_code == 200
    groups = {g["kind"]: g["signature"] for g in client.get("/api/v1/crashes").json()}
    assert set(groups) == {"free_memory", "exit"}, groups
    return sweep, groups


def test_each_crash_kind_of_a_cell_links_its_own_group(client: TestClient, dataset: Path) -> None:
    sweep, groups = _died_two_ways(client, dataset)
    for page in (f"/matrix?sweep_id={sweep}", f"/sweeps/{sweep}"):
        html = client.get(page).text
        linked = {kind: signature for signature, kind in re.findall(BADGE, html)}
        # Before: both kinds linked to the group of the cell's last crash, the free-memory badge to "exit code 1".
        assert linked == {kind: groups[kind] for kind in ("free_memory", "exit")}, page
        assert 'title="less free memory at start than gpu_memory_utilization asks for (1 start)"' in html, page
