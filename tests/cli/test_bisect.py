"""``draftbench bisect`` against the real service, a stand-in worker reporting each build's acceptance."""

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from app.cli import ci
from app.cli.bisect import narrowed, read_series
from app.cli.errors import CliError
from app.cli.http import Api
from tests.conftest import AUTH, TOKEN
from tests.factories import cell_result, sweep_body

ROOT = Path(__file__).resolve().parents[2]
SERIES = [f"c{i}" for i in range(8)]


def _bisect(server: str, cells: Path, *args: str) -> subprocess.Popen:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DRAFTBENCH_")}
    return subprocess.Popen([sys.executable, "-m", "app.cli", "bisect", "--cells", str(cells), "--server", server,
                             "--token", TOKEN, "--poll", "0.2", *args], cwd=ROOT, env=clean, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_bisect_names_the_first_build_that_accepts_less_with_its_evidence(server: str, tmp_path: Path, dataset: Path) -> None:
    worker = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": b} for b in SERIES]}
    registered = httpx.post(f"{server}/api/v1/workers", json=worker, headers=AUTH, timeout=30).json()
    own = {"Authorization": f"Bearer {registered['credential']}"}
    cells = tmp_path / "cells.yaml"
    cells.write_text(yaml.safe_dump(sweep_body(dataset, repeats=1)))
    (tmp_path / "series.txt").write_text("# oldest first\n" + "\n".join(SERIES) + "\n")
    # Only the n-gram cell of the two the sweep file has.
    bisect = _bisect(server, cells, "--series", f"@{tmp_path / 'series.txt'}", "--good", "c0", "--bad", "c7",
                     "--only", "method=ngram")
    ran, deadline = [], time.monotonic() + 240  # a loaded host starts the CLI slowly
    while bisect.poll() is None and time.monotonic() < deadline:
        claimed = httpx.post(f"{server}/api/v1/workers/{registered['id']}/claim", headers=own, timeout=30)
        if claimed.status_code == 204:
            time.sleep(0.1)
            continue
        job = claimed.json()
        build = job["spec"]["build"]
        ran.append((build, job["spec"]["speculative"]["method"]))
        # c2 and later accept 5 of 60 draft tokens, the builds before 30.
        accepted = 5 if SERIES.index(build) >= 2 else 30
        answer = httpx.post(f"{server}/api/v1/jobs/{job['job_id']}/complete",
                            json={"outcome": {"result": cell_result(accepted=accepted)}}, headers=own, timeout=30)
        assert answer.status_code == 200, answer.text
    out, err = bisect.communicate(timeout=60)
    print(out, err)
    assert bisect.returncode == 0, err
    # The good and bad builds, then 3 = ceil(log2(7)) midpoints: c3 bad, c1 good, c2 bad.
    assert ran == [(b, "ngram") for b in ("c0", "c7", "c3", "c1", "c2")]
    assert out.startswith("bisection 1 (t): first bad build: c2 (last good: c1)")
    assert "looked for: cpu ngram k=3 CPU_ATTN NONE: acceptance worse" in out
    assert "round 4: c2 (sweep 5, the good build's 1): bad" in out
    assert "against good: cpu ngram k=3 CPU_ATTN NONE: worse; tokens/s 1.00x, 1 and 1 starts; acceptance 50.0% -> 8.3%: " \
           "-41.7 points [" in out
    assert "against bad: cpu ngram k=3 CPU_ATTN NONE: better; tokens/s 1.00x, 1 and 1 starts; acceptance 8.3% -> 50.0%" in out
    bisections = httpx.get(f"{server}/api/v1/bisections", timeout=30).json()
    assert [(b["state"], b["first_bad"], len(b["steps"])) for b in bisections] == [("found", "c2", 4)]
    sweeps = httpx.get(f"{server}/api/v1/sweeps", timeout=30).json()
    assert sorted(s["build"] for s in sweeps) == ["c0", "c1", "c2", "c3", "c7"]


def test_a_bad_build_submitted_after_a_worker_took_every_good_job_runs_unpaired(server: str, dataset: Path,
                                                                               capsys: pytest.CaptureFixture) -> None:
    # What a fast worker did in CI: the good build's one job claimed before the bad build's sweep was sent, which the
    # service refuses to pair (it pairs with queued jobs only). The bisection goes on, its bad build unpaired.
    worker = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "c0"}, {"label": "c7"}]}
    registered = httpx.post(f"{server}/api/v1/workers", json=worker, headers=AUTH, timeout=30).json()
    spec = sweep_body(dataset, repeats=1) | {"speculative": [sweep_body(dataset)["speculative"][0]]}
    with Api(server, TOKEN) as api:
        good = ci.submit(api, spec | {"build": "c0"}, key="good")
        own = {"Authorization": f"Bearer {registered['credential']}"}
        claimed = httpx.post(f"{server}/api/v1/workers/{registered['id']}/claim", headers=own, timeout=30)
        assert claimed.status_code == 200 and claimed.json()["spec"]["build"] == "c0"
        bad = ci.paired_head(api, spec | {"build": "c7"}, good["id"], key="bad")
    assert bad["paired_with"] is None and bad["total"] == 1
    assert f"c7: workers took every job of sweep {good['id']} before this one was submitted" in capsys.readouterr().err


def test_bisect_of_an_unregistered_build_says_which_in_one_line(server: str, tmp_path: Path, dataset: Path) -> None:
    worker = {"name": "w", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "c0"}, {"label": "c1"}]}
    assert httpx.post(f"{server}/api/v1/workers", json=worker, headers=AUTH, timeout=30).status_code == 201
    cells = tmp_path / "cells.yaml"
    cells.write_text(yaml.safe_dump(sweep_body(dataset)))
    out, err = _bisect(server, cells, "--series", "c0,c1,c9", "--good", "c0", "--bad", "c9").communicate(timeout=60)
    assert out == "" and err.startswith("draftbench: ") and err.count("\n") == 1
    assert "series.2" in err and "'c9' is not registered" in err and "allowed values: c0, c1" in err


def test_read_series_and_only_by_hand(tmp_path: Path) -> None:
    assert read_series(" a, b ,c,") == ["a", "b", "c"]
    with pytest.raises(CliError, match="two builds or more"):
        read_series("a")
    spec = sweep_body("d", backends=["CPU_ATTN"])
    assert [s["method"] for s in narrowed(spec, ["method=draft_model"])["speculative"]] == ["draft_model"]
    with pytest.raises(CliError, match="KEY one of method, backend, graph_mode, gpu_kind"):
        narrowed(spec, ["model=x"])
    with pytest.raises(CliError, match="the sweep's backends has none"):
        narrowed(spec, ["backend=FLASH_ATTN"])
