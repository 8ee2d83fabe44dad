"""Pull-request builds on real vLLM (the CPU build): each example patch, made into a build beside the
unpatched one, shows its effect on one n-gram cell, and the verdict calls it worse for the right reason."""

from pathlib import Path

import pytest

from app.analysis.verdicts import CellSample, Change, cell_verdict
from app.builds import patched
from app.enums import BuildKind
from app.schemas.cell import CellResult
from tests.samples import pooled
from tests.vllm_fixtures import CellRun, cell_spec, run_cell

pytestmark = pytest.mark.vllm
PATCHES = Path(__file__).resolve().parents[2] / "examples" / "patches"
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3}


def _sample(run: CellRun) -> CellSample:
    return pooled([CellResult.model_validate(run.result)])


def _patched_cell(name: str, vllm_python: Path, tmp_path_factory, model: Path, prompts: Path) -> CellRun:
    root = tmp_path_factory.mktemp(f"builds-{name}")
    facts = patched.create(label=name, base=str(vllm_python), patch=PATCHES / f"{name}.diff", root=root)
    assert facts.kind is BuildKind.PATCH and facts.patch_files == ["vllm/v1/spec_decode/ngram_proposer.py"]
    run = run_cell(root / name / "python", tmp_path_factory.mktemp(name), cell_spec(model, prompts, NGRAM))
    assert run.returncode == 0 and run.result is not None, run.log[-3000:]
    return run


@pytest.fixture(scope="module")
def base_cell(vllm_python, tmp_path_factory, repeating_model, prompts) -> CellRun:
    """The unpatched build on the same cell (NGRAM as the patched cells run it)."""
    run = run_cell(vllm_python, tmp_path_factory.mktemp("unpatched"), cell_spec(repeating_model, prompts, NGRAM))
    assert run.returncode == 0 and run.result is not None, run.log[-3000:]
    return run


def test_the_slow_drafting_patch_makes_the_cell_slower(base_cell, vllm_python, tmp_path_factory, repeating_model, prompts) -> None:
    slow = _patched_cell("ngram-slow-drafting", vllm_python, tmp_path_factory, repeating_model, prompts)
    verdict = cell_verdict(_sample(base_cell), _sample(slow))
    print("slow drafting:", verdict.reasons)
    assert verdict.change is Change.WORSE
    assert verdict.throughput.change is Change.WORSE and verdict.throughput.ratio.ratio < 0.8
    # Acceptance is untouched: the same drafts, only later.
    assert verdict.acceptance is not None and not verdict.acceptance.flagged


def test_the_corrupt_drafts_patch_lowers_acceptance(base_cell, vllm_python, tmp_path_factory, repeating_model, prompts) -> None:
    corrupt = _patched_cell("ngram-corrupt-drafts", vllm_python, tmp_path_factory, repeating_model, prompts)
    verdict = cell_verdict(_sample(base_cell), _sample(corrupt))
    print("corrupt drafts:", verdict.reasons)
    assert verdict.change is Change.WORSE
    assert verdict.acceptance.flagged and verdict.acceptance.difference < -0.05
    assert _sample(base_cell).accepted_tokens > 0.5 * _sample(base_cell).draft_tokens, "the repeating model's drafts held"
    assert verdict.per_position[0].flagged and verdict.per_position[0].difference < 0
    # Fewer accepted tokens per step lower tokens/s too; one engine start a side may or may not call that on this
    # shared host (starts differ up to 2.16x in tests/data/aa-cpu), but never better.
    assert verdict.throughput.change is not Change.BETTER
