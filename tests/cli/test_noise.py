"""``draftbench noise``: a sweep file's cells started again and again on one build, then the noise model they teach."""

import os
import subprocess
import time

import httpx
import yaml

from tests.cli.test_errors import DRAFTBENCH, run
from tests.conftest import AUTH, TOKEN
from tests.factories import cell_result, sweep_body


def test_noise_runs_each_cell_again_and_prints_the_model(server: str, tmp_path, dataset) -> None:
    worker = {"name": "w", "host": "gpu-host-1", "gpu_kinds": ["cpu"], "builds": [{"label": "vllm-other"}]}
    registered = httpx.post(f"{server}/api/v1/workers", json=worker, headers=AUTH, timeout=30).json()
    own = {"Authorization": f"Bearer {registered['credential']}"}
    path = tmp_path / "cells.yaml"
    path.write_text(yaml.safe_dump(sweep_body(dataset, repeats=1, speculative=[{"method": "ngram", "num_speculative_tokens": 3}],
                                              baseline=True)))
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DRAFTBENCH_")}
    noise = subprocess.Popen([str(DRAFTBENCH), "noise", str(path), "--starts", "3", "--build", "vllm-other", "--server", server,
                              "--token", TOKEN, "--poll", "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=clean)
    # Each cell's three starts at 100, 102 and 104 tokens per second: ln spread s = 0.0198 on 2 df a cell.
    done, deadline, started = 0, time.monotonic() + 60, {}
    while done < 6 and time.monotonic() < deadline:
        claimed = httpx.post(f"{server}/api/v1/workers/{registered['id']}/claim", headers=own, timeout=30)
        if claimed.status_code == 204:
            time.sleep(0.1)
            continue
        job = claimed.json()
        method = (job["spec"].get("speculative") or {}).get("method")
        started[method] = started.get(method, -1) + 1
        speed = 100 + 2 * started[method]
        result = cell_result() | {"rounds": [{"seconds": 1.0, "output_tokens": speed, "num_requests": 2}]}
        answer = httpx.post(f"{server}/api/v1/jobs/{job['job_id']}/complete", json={"outcome": {"result": result}},
                            headers=own, timeout=30)
        assert answer.status_code == 200, answer.text
        done += 1
    out, err = noise.communicate(timeout=60)
    assert noise.returncode == 0, err
    sweep = httpx.get(f"{server}/api/v1/sweeps", timeout=30).json()[0]
    spec = httpx.get(f"{server}/api/v1/sweeps/{sweep['id']}", timeout=30).json()["spec"]
    assert (sweep["build"], sweep["total"], spec["repeats"], spec["tags"]) == ("vllm-other", 6, 3, ["noise"])
    # ln(100), ln(102), ln(104): squares 0.000769 on 2 df; s = 0.019612, exp(s) - 1 = 1.98 %: one cell a class.
    rows = [line.split("│") for line in out.splitlines() if line.startswith("│ cpu")]
    assert [[c.strip() for c in row[1:9]] for row in rows] == [
        ["cpu", "CPU_ATTN", "NONE", "draft", "offline", "1.98 %", "2", "1"],
        ["cpu", "CPU_ATTN", "NONE", "none", "offline", "1.98 %", "2", "1"]]


def test_noise_refuses_a_single_start() -> None:
    done = run("noise", __file__, "--starts", "1")
    assert done.returncode == 2 and "Invalid value for '--starts'" in done.stderr and "greater than or equal to 2" in done.stderr
