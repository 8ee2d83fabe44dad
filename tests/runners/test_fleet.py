"""``--gpu`` and ``--gpus``: which GPUs a worker owns, its cells' environment, the supervisor."""

import os
import sys
import time
from pathlib import Path

import pytest

from app.enums import GpuKind
from runners import fleet, gpus
from runners.gpus import GpuError
from runners.worker import Worker, detect_gpu_kinds
from tests.fake_gpus import H200_X2, fake_nvidia_smi

FOUND = gpus.parse_nvidia_smi(H200_X2)


def test_gpus_all_means_every_gpu_or_the_visible_ones() -> None:
    assert fleet.worker_ids("all", visible=None, found=FOUND) == ["0", "1"]
    assert fleet.worker_ids("all", visible="1", found=FOUND) == ["1"]
    assert fleet.worker_ids("1,0", visible=None, found=FOUND) == ["1", "0"]
    assert fleet.worker_ids("GPU-bbbbbbbb-0000-0000-0000-000000000000", visible=None, found=FOUND) == ["1"]
    with pytest.raises(GpuError, match="no GPU"):
        fleet.worker_ids("all", visible=None, found=[])
    with pytest.raises(GpuError, match="no GPU '5'"):
        fleet.worker_ids("5", visible=None, found=FOUND)


def test_child_command_is_the_same_worker_on_its_gpus() -> None:
    base = ["draftbench", "worker", "--server", "http://s", "--build=b=/py"]
    assert fleet.child_argv(base, ["0", "1"], name="h") == [*base, "--gpu", "0,1", "--name", "h-gpu0-1"]
    assert fleet.child_argv(base, ["3"], name=None) == [*base, "--gpu", "3"]


def test_cells_see_only_their_workers_gpus_in_nvidia_smi_order() -> None:
    worker = Worker(client=None, builds=[], gpu_kinds=[GpuKind.H200], gpu_count=2, gpu_ids=["2", "3"])  # type: ignore[arg-type]
    env = worker.cell_env(2)
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert worker.cell_env(1)["CUDA_VISIBLE_DEVICES"] == "2"
    # No --gpu: the inherited environment is left as it is.
    plain = Worker(client=None, builds=[], gpu_kinds=[GpuKind.CPU])  # type: ignore[arg-type]
    assert plain.cell_env(0).get("CUDA_VISIBLE_DEVICES") == os.environ.get("CUDA_VISIBLE_DEVICES")


def test_detect_reads_the_chosen_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", fake_nvidia_smi(tmp_path / "bin", H200_X2 + "2, GPU-c, NVIDIA L40S\n"))
    assert detect_gpu_kinds(["1"]) == ([GpuKind.H200], 1)
    assert detect_gpu_kinds(["0", "1"]) == ([GpuKind.H200], 2)
    assert detect_gpu_kinds(["2"]) == ([GpuKind.L40S], 1)
    with pytest.raises(GpuError, match="different kinds"):
        detect_gpu_kinds()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert detect_gpu_kinds() == ([GpuKind.CPU], 0)
    with pytest.raises(GpuError, match="no GPU"):
        detect_gpu_kinds(["0"])


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_supervisor_waits_for_every_worker() -> None:
    assert fleet.supervise([_py("pass"), _py("import time; time.sleep(0.5)")], poll_s=0.05) == 0


def test_a_failing_worker_stops_the_others_and_fails_the_fleet(tmp_path: Path) -> None:
    marker = tmp_path / "stopped"
    # The long-lived child records the SIGTERM it gets, as a worker stops its cell on one.
    survivor = _py(
        "import signal, sys, time, pathlib\n"
        f"signal.signal(signal.SIGTERM, lambda *_: (pathlib.Path({str(marker)!r}).write_text('term'), sys.exit(0)))\n"
        "time.sleep(60)\n"
    )
    start = time.monotonic()
    assert fleet.supervise([survivor, _py("import time, sys; time.sleep(0.5); sys.exit(3)")], poll_s=0.05) == 1
    assert time.monotonic() - start < 30
    assert marker.read_text() == "term"
