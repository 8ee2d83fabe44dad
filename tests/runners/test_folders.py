"""Cells as files: ``draftbench expand`` writes the same cells that ran on the H200, reading a folder back, and
writing runs (``draftbench export``) as the folder that reads back as them."""

import json
import shutil
import string
from pathlib import Path

import pytest
import yaml

from app.schemas.cell import CellSpec
from app.schemas.sweep import SweepSpec
from runners.folders import read_folder, write_cells, write_runs

H200 = Path(__file__).resolve().parents[1] / "data" / "h200-matrix"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "h200-sweep.yaml"
# The sweeps benchmarks/h200_proof.py submits on the H200, with its models' names filled in.
H200_SWEEPS = sorted((EXAMPLE.parent / "h200").glob("*.yaml"))
H200_MODELS = {name: f"/tmp/h200/models/{name.lower()}" for name in ("TARGET", "DFLASH", "QWEN3_8B", "QWEN3_0_6B")} | {
    "GPU_KIND": "H200"}


class _Filled(dict):
    """The models, and an id for each sweep a paired sweep names (``${SWEEP_NAME}``: the harness's, once submitted)."""

    def __missing__(self, key: str) -> str:
        if key.startswith("SWEEP_"):
            return "1"
        raise KeyError(key)


def test_expand_writes_the_same_cells_that_ran_on_the_h200(tmp_path: Path) -> None:
    spec = SweepSpec.model_validate(yaml.safe_load(EXAMPLE.read_text()))
    assert write_cells(spec, tmp_path) == 18
    written = sorted(p.name for p in (tmp_path / "cells").iterdir())
    assert written == sorted(p.name for p in (H200 / "cells").iterdir())
    for name in written:
        # The H200 folder was written with the cell schema's first names (attention_backend, cudagraph_mode).
        ran = CellSpec.model_validate_json((H200 / "cells" / name / "spec.json").read_text())
        assert json.loads((tmp_path / "cells" / name / "spec.json").read_text()) == ran.model_dump(mode="json")


@pytest.mark.parametrize("path", H200_SWEEPS, ids=lambda path: path.name)
def test_every_h200_sweep_expands(path: Path, tmp_path: Path) -> None:
    spec = SweepSpec.model_validate(yaml.safe_load(string.Template(path.read_text()).substitute(_Filled(H200_MODELS))))
    assert write_cells(spec, tmp_path) > 0


def test_reading_a_folder_gives_each_run_its_own_time_and_the_same_digest_twice(tmp_path: Path) -> None:
    found = read_folder(H200)
    spec, ran, digest = found.spec, found.ran, found.digest
    assert spec.build == "vllm-0.26.0-cu130" and len(ran) == 18
    first = next(r for r in ran if (r.cell_index, r.repeat) == (0, 0))
    exit_info = json.loads((H200 / "cells" / "c0000-r0" / "exit.json").read_text())
    assert first.finished_at.strftime("%Y-%m-%dT%H:%M:%SZ") == exit_info["finished_at"]
    assert (first.finished_at - first.started_at).total_seconds() == exit_info["duration_s"]
    assert read_folder(H200).digest == digest
    changed = tmp_path / "changed"
    shutil.copytree(H200, changed)
    (changed / "cells" / "c0003-r0" / "cell.log").write_text("another run\n")
    assert read_folder(changed).digest != digest


def test_written_runs_read_back_as_the_same_runs(tmp_path: Path) -> None:
    found = read_folder(H200)
    write_runs(found.spec, tmp_path / "again", found.ran, {})
    again = read_folder(tmp_path / "again")
    assert again.spec == found.spec and again.ran == found.ran
    log = "cells/c0002-r0/cell.log"  # vLLM's progress bars' \r kept
    assert (tmp_path / "again" / log).read_bytes() == (H200 / log).read_bytes() and b"\r" in (H200 / log).read_bytes()


def test_runs_are_written_only_into_a_new_or_empty_folder(tmp_path: Path) -> None:
    found = read_folder(H200)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="is not empty"):
        write_runs(found.spec, tmp_path, found.ran, {})
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_schema_1_results_spec_is_read_as_its_counters_not_as_the_cell_spec() -> None:
    # Cell schema 1 named the spec-decode counters "spec"; the cell spec is its own file (spec.json), and the
    # job's spec comes from the sweep: neither may take the result's "spec" for the other.
    result = json.loads((H200 / "cells" / "c0000-r0" / "result.json").read_text())
    assert result["schema_version"] == 1 and "spec_decode" not in result
    found = read_folder(H200)
    spec, ran = found.spec, found.ran
    first = next(r for r in ran if (r.cell_index, r.repeat) == (0, 0))
    assert first.outcome.result.spec_decode.model_dump() == result["spec"]
    cell_spec = CellSpec.model_validate_json((H200 / "cells" / "c0000-r0" / "spec.json").read_text())
    assert cell_spec.workload == spec.workload and cell_spec.speculative is not None
