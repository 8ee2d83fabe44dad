"""A worker refuses to start when it could not run what it would claim: a build without vLLM, absent GPUs."""

import pytest

from app.enums import GpuKind
from runners import gpus
from runners.worker import Build, SetupError, check_gpu_kind
from tests.cli.test_errors import one_line, run
from tests.fake_gpus import fake_nvidia_smi


def test_a_build_whose_interpreter_cannot_import_vllm_is_refused_before_registering() -> None:
    # No service is listening at --server: the worker stops before it would ever call it.
    line = one_line(run("worker", "--server", "http://127.0.0.1:9", "--token", "t", "--gpu-kind", "cpu",
                        "--build", "x=/usr/bin/python3"))
    assert "build x: /usr/bin/python3 cannot import vLLM" in line and "No module named 'vllm'" in line


def test_a_missing_interpreter_is_named() -> None:
    with pytest.raises(SetupError, match="does not exist"):
        Build("y", "/no/such/python").vllm_version()  # type: ignore[arg-type]


def test_a_gpu_kind_the_host_lacks_is_refused_saying_what_it_found(tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_line(run("worker", "--server", "http://127.0.0.1:9", "--token", "t", "--gpu-kind", "H200",
                        "--build", "x=/usr/bin/python3", env={"PATH": f"{empty}:/usr/bin:/bin"}))
    assert "--gpu-kind H200: nvidia-smi lists no GPU on this host" in line
    a100 = "0, GPU-1, NVIDIA A100-SXM4-80GB\n"
    line = one_line(run("worker", "--server", "http://127.0.0.1:9", "--token", "t", "--gpu-kind", "H200",
                        "--build", "x=/usr/bin/python3", env={"PATH": fake_nvidia_smi(tmp_path / "bin", a100)}))
    assert "this host's GPUs are A100 (NVIDIA A100-SXM4-80GB)" in line


def test_naming_the_kind_of_a_gpu_no_kind_matches_is_allowed() -> None:
    check_gpu_kind(GpuKind.H200, [gpus.Gpu("0", "GPU-1", "NVIDIA H200")])
    check_gpu_kind(GpuKind.L4, [gpus.Gpu("0", "GPU-1", "NVIDIA Some Future GPU")])
    check_gpu_kind(GpuKind.CPU, [])
    with pytest.raises(SetupError, match="H100"):
        check_gpu_kind(GpuKind.H200, [gpus.Gpu("0", "GPU-1", "NVIDIA H100 80GB HBM3")])
