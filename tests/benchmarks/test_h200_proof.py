"""The GPU harness's own decisions that cost device time when wrong (benchmarks/h200_proof.py)."""

import json
import subprocess
import time
from pathlib import Path

from fastapi.testclient import TestClient

from benchmarks.h200_proof import running, submit_new
from tests.conftest import AUTH
from tests.factories import register_worker, sweep_body


def test_a_process_that_ended_unreaped_is_not_running(tmp_path: Path) -> None:
    # `draftbench ci`, started by this run, ends as a zombie of it: the wait for its looks must end with it.
    child = subprocess.Popen(["sleep", "0.3"])
    pid_file = tmp_path / "ci.pid"
    pid_file.write_text(str(child.pid))
    assert running(pid_file)
    time.sleep(1)
    assert not running(pid_file)
    child.wait()
    assert not running(pid_file) and not running(tmp_path / "missing.pid")


def test_a_call_on_a_warm_machine_submits_only_the_sweep_files_its_service_has_not_had(client: TestClient,
                                                                                       dataset: Path, tmp_path: Path) -> None:
    # 2026-12-05: a second call naming a new file submitted nothing (only the call that started the service did), and
    # two device calls went by before the sweep was posted by hand.
    register_worker(client)
    client.headers.update(AUTH)  # as the harness's client carries its token
    files = {}
    for name, extra in (("first", {}), ("second", {}), ("paired", {"paired_with": "${SWEEP_FIRST}"}),
                        ("bad", {"graph_modes": ["SOMETIMES"]})):
        files[name] = tmp_path / f"{name}.yaml"
        files[name].write_text(json.dumps(sweep_body(dataset, name=name, model="${TARGET}", **extra)))
    models = {"TARGET": "/models/tiny"}
    work = tmp_path / "work"
    work.mkdir()
    submit_new(client, work, [files["first"]], dict(models))
    submit_new(client, work, [files["first"], files["second"], files["paired"], files["bad"]], dict(models))
    sweeps = {s["name"]: s for s in client.get("/api/v1/sweeps").json()}
    assert sorted(sweeps) == ["first", "paired", "second"]  # the first once; the bad one refused
    # The paired sweep's ${SWEEP_FIRST} was filled with the id the earlier call recorded.
    assert client.get(f"/api/v1/sweeps/{sweeps['paired']['id']}").json()["spec"]["paired_with"] == sweeps["first"]["id"]
    recorded = json.loads((work / "submitted.json").read_text())
    assert sorted(Path(f).name for f in recorded) == ["first.yaml", "paired.yaml", "second.yaml"]
    # Called once more with the refused file mended: it is tried again, the others are not.
    files["bad"].write_text(json.dumps(sweep_body(dataset, name="bad", model="${TARGET}")))
    submit_new(client, work, list(files.values()), dict(models))
    assert sorted(s["name"] for s in client.get("/api/v1/sweeps").json()) == ["bad", "first", "paired", "second"]
