"""``draftbench submit`` prints the service's warnings: a sweep no live worker serves is accepted, and said so."""

import json

import httpx
import yaml
from typer.testing import CliRunner

from app.cli.main import cli
from tests.cli.test_errors import run
from tests.conftest import AUTH, TOKEN
from tests.dashboards.test_pages import matrix_rows
from tests.factories import cell_result, sweep_body


def test_submit_prints_why_the_jobs_will_wait(server: str, tmp_path, dataset) -> None:
    # The only worker serves H200 cells of the build; the sweep asks for the CPU engine.
    worker = {"name": "w", "host": "h", "gpu_kinds": ["H200"], "builds": [{"label": "vllm-test"}]}
    assert httpx.post(f"{server}/api/v1/workers", json=worker, headers=AUTH, timeout=30).status_code == 201
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep_body(dataset, repeats=1)))
    done = run("submit", str(path), "--no-wait", "--server", server, "--token", TOKEN)
    assert done.returncode == 0, done.stderr
    assert "warning: no live worker serves GPU kind cpu with build vllm-test: 2 job(s) wait" in done.stdout


def test_status_shows_each_result_with_its_interval(server: str, dataset) -> None:
    worker = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "vllm-test"}]}
    registered = httpx.post(f"{server}/api/v1/workers", json=worker, headers=AUTH, timeout=30).json()
    own = {"Authorization": f"Bearer {registered['credential']}"}
    sweep = httpx.post(f"{server}/api/v1/sweeps", json=sweep_body(dataset, repeats=1), headers=AUTH, timeout=30).json()
    job = httpx.post(f"{server}/api/v1/workers/{registered['id']}/claim", headers=own, timeout=30).json()
    result = cell_result() | {"rounds": [{"seconds": 1.0, "output_tokens": n, "num_requests": 2} for n in (90, 100, 120)]}
    httpx.post(f"{server}/api/v1/jobs/{job['job_id']}/complete", json={"outcome": {"result": result}}, headers=own, timeout=30)
    done = run("status", str(sweep["id"]), "--server", server)
    assert done.returncode == 0, done.stderr
    # Rich reads square brackets as markup: the header and the cells must keep theirs.
    assert "tok/s [95%] (rounds)" in done.stdout and "acceptance [95% CI]" in done.stdout
    assert "accept len [95% CI]" in done.stdout
    # The rounds' range [90, 120] holds the median of 3 at 75 %; carried to 95 % as the sweep page does.
    assert "100.0 [83.6, 136.4] (3)" in done.stdout


def test_status_and_the_sweep_page_give_one_job_the_same_interval(server: str, dataset) -> None:
    # They once printed [146, 3524] and [17.7, 3993] for one job: the stored interval at its own level, and 95 %.
    worker = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "vllm-test"}]}
    registered = httpx.post(f"{server}/api/v1/workers", json=worker, headers=AUTH, timeout=30).json()
    own = {"Authorization": f"Bearer {registered['credential']}"}
    body = sweep_body(dataset, repeats=1, speculative=[{"method": "ngram", "num_speculative_tokens": 3}])
    sweep = httpx.post(f"{server}/api/v1/sweeps", json=body, headers=AUTH, timeout=30).json()
    job = httpx.post(f"{server}/api/v1/workers/{registered['id']}/claim", headers=own, timeout=30).json()
    rounds = [{"seconds": 1.0, "output_tokens": n, "num_requests": 2} for n in (40, 150, 160, 170, 900)]
    outcome = {"result": cell_result() | {"rounds": rounds}}
    httpx.post(f"{server}/api/v1/jobs/{job['job_id']}/complete", json={"outcome": outcome}, headers=own, timeout=30)
    [row] = matrix_rows(httpx.get(f"{server}/sweeps/{sweep['id']}", timeout=30).text)
    shown = row["tokens/s [95 %]"].split("]")[0] + "]"
    assert shown.startswith("160.0 [") and float(shown.split("[")[1].split(",")[0]) < 40
    done = run("status", str(sweep["id"]), "--server", server)
    assert done.returncode == 0, done.stderr
    assert f"{shown} (5)" in done.stdout


def test_expand_writes_one_cell_per_k_of_a_list(tmp_path, dataset) -> None:
    # In this process, not through the installed script: what is tested is this checkout's code.
    path = tmp_path / "sweep.yaml"
    body = sweep_body(dataset, repeats=2, speculative=[{"method": "ngram", "num_speculative_tokens": [4, 2], "prompt_lookup_max": 4}])
    path.write_text(yaml.safe_dump(body))
    done = CliRunner().invoke(cli, ["expand", str(path), str(tmp_path / "run")])
    assert done.exit_code == 0, done.output
    assert "2 cells x 2 repeats written" in done.output
    cells = tmp_path / "run" / "cells"
    written = {p.name: json.loads((p / "spec.json").read_text())["speculative"] for p in sorted(cells.iterdir())}
    assert written == {name: {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4}
                       for name, k in [("c0000-r0", 2), ("c0000-r1", 2), ("c0001-r0", 4), ("c0001-r1", 4)]}
    assert json.loads((tmp_path / "run" / "sweep.json").read_text())["speculative"][0]["num_speculative_tokens"] == [2, 4]
