"""A build from a wheel: its own vLLM, the base's dependencies (this test's Python and its packages)."""

import subprocess
import zipfile
from pathlib import Path

import pytest

from app.builds import wheels
from app.builds.facts import BuildError, read_facts
from app.enums import BuildKind


def _wheel(folder: Path, version: str) -> Path:
    """A real (tiny) wheel of a package named vllm."""
    path = folder / f"vllm-{version}-py3-none-any.whl"
    info = f"vllm-{version}.dist-info"
    files = {
        "vllm/__init__.py": f'__version__ = "{version}"\n',
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: draftbench-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        archive.writestr(f"{info}/RECORD", "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"]))
    return path


def test_a_wheel_build_runs_the_wheels_vllm_over_the_bases_packages(tmp_path: Path, base_python: Path) -> None:
    wheel = _wheel(tmp_path, "0.33.0.dev1")
    facts = wheels.create(label="pr-9", base=str(base_python), requirement=str(wheel), kind=BuildKind.WHEEL,
                          root=tmp_path / "builds", commit="f00d")
    python = tmp_path / "builds" / "pr-9" / "python"
    code = "import vllm, pydantic; print(vllm.__version__, pydantic.__name__)"
    assert subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout.split() == [
        "0.33.0.dev1", "pydantic"]
    assert (facts.kind, facts.vllm_version, facts.source, facts.commit) == (BuildKind.WHEEL, "0.33.0.dev1", str(wheel), "f00d")
    assert read_facts(python) == facts


def test_a_wheel_pip_cannot_install_leaves_nothing(tmp_path: Path, base_python: Path) -> None:
    with pytest.raises(BuildError, match="pip install failed"):
        wheels.create(label="pr-9", base=str(base_python), requirement=str(tmp_path / "missing.whl"),
                      kind=BuildKind.WHEEL, root=tmp_path / "builds")
    assert not (tmp_path / "builds" / "pr-9").exists()
