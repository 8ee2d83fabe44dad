"""Every sweep file under examples/ is one the service takes: parsed as a submission is (``app.sweeps.parsing.load``)
and validated as a ``SweepSpec``, its ``${...}`` filled in (a model's path; a ``SWEEP_...`` id, the harness's paired
base; ``GPU_KIND``, the harness's host's). A file the H200 harness submits on a lent GPU must not be refused there,
where each minute is dear."""

from pathlib import Path
from string import Template

import pytest

from app.schemas.sweep import SweepSpec
from app.sweeps import parsing
from app.sweeps.matrix import expand

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SWEEPS = sorted(p for p in EXAMPLES.rglob("*.yaml") if "workflows" not in p.parts)


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_each_example_sweep_is_a_valid_submission_with_cells(path: Path) -> None:
    text = path.read_text()
    names = {named or braced for _, named, braced, _ in Template.pattern.findall(text)} - {""}
    filled = Template(text).substitute({name: "1" if name.startswith("SWEEP_") else "H200" if name == "GPU_KIND"
                                        else f"/models/{name.lower()}" for name in names})
    spec = SweepSpec.model_validate(parsing.load(filled.encode(), "application/yaml"))
    assert expand(spec), path


def test_the_examples_are_found() -> None:
    assert len(SWEEPS) > 30 and EXAMPLES / "h200" / "bestk-8b-k4-c64.yaml" in SWEEPS
