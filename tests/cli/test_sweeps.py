"""``draftbench submit`` prints the service's warnings: a sweep no live worker serves is accepted, and said so."""

import httpx
import yaml

from tests.cli.test_errors import run
from tests.conftest import AUTH, TOKEN
from tests.factories import sweep_body


def test_submit_prints_why_the_jobs_will_wait(server: str, tmp_path, dataset) -> None:  # noqa: ANN001
    # The only worker serves H200 cells of the build; the sweep asks for the CPU engine.
    worker = {"name": "w", "host": "h", "gpu_kinds": ["H200"], "builds": [{"label": "vllm-test"}]}
    assert httpx.post(f"{server}/api/v1/workers", json=worker, headers=AUTH, timeout=30).status_code == 201
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep_body(dataset, repeats=1)))
    done = run("submit", str(path), "--no-wait", "--server", server, "--token", TOKEN)
    assert done.returncode == 0, done.stderr
    assert "warning: no live worker serves GPU kind cpu with build vllm-test: 2 job(s) wait" in done.stdout
