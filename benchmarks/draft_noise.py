"""Acceptance against noise: the tiny target's perturbed drafts on real vLLM (CPU), greedy.

    .venv/bin/python -m benchmarks.draft_noise [--noise 0 0.01 0.02 0.03 0.05 0.1] [--target-seeds 0 1]
                                               [--workload demo|tests] [--python PATH]

For each target seed it makes the tiny random target (``runners/tiny_model.py --seed``), then for each
noise level the draft ``--draft-of TARGET --noise S`` (every weight ``w + S * std(w) * N(0, 1)``, noise
seed 0) and runs one ``draft_model`` cell (k=3, temperature 0, one engine start each, one at a time).
``--workload demo`` is the workload of ``examples/demo-sweep.yaml``; ``tests`` that of the cells in
``tests/vllm_fixtures.py``. It prints, per seed and noise, the acceptance rate with its Wilson interval
and the mean acceptance length with its interval (``app.analysis.acceptance.derive``, as the service
derives them), and the per-position rates. Another target seed stands for another random target, which
is what a new transformers or torch may give for the same seed: a noise is robust when every seed's
acceptance lies in the band.
"""

import argparse
import string
import subprocess
import tempfile
from pathlib import Path

import yaml

from app.analysis.acceptance import derive
from app.schemas.cell import CellResult
from tests.vllm_fixtures import DEFAULT_VLLM_PYTHON, NUM_SPECULATIVE_TOKENS, cell_spec, run_cell

ROOT = Path(__file__).resolve().parents[1]

PROMPTS = ROOT / "runners" / "prompts" / "draftbench.jsonl"
TINY_MODEL = ROOT / "runners" / "tiny_model.py"


def demo_workload() -> dict:
    """The workload ``make demo`` runs (its sweep file, the model left as a placeholder)."""
    text = string.Template((ROOT / "examples" / "demo-sweep.yaml").read_text()).substitute(MODEL="unused")
    return yaml.safe_load(text)["workload"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.01, 0.02, 0.03, 0.05, 0.1])
    parser.add_argument("--target-seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--workload", choices=["demo", "tests"], default="demo")
    parser.add_argument("--python", type=Path, default=Path(DEFAULT_VLLM_PYTHON))
    args = parser.parse_args()
    if any(not noise >= 0 for noise in args.noise):
        parser.error("--noise levels must be >= 0")
    out = Path(tempfile.mkdtemp(prefix="draftbench-noise-"))
    print(f"# draft_model k={NUM_SPECULATIVE_TOKENS}, temperature 0, workload {args.workload!r}; {args.python}")
    print("| target seed | noise | acceptance [95% CI] | mean acceptance length [95% CI] | per position | drafts |")
    print("|---|---|---|---|---|---|")
    for seed in args.target_seeds:
        target = out / f"target-{seed}"
        _make(args.python, target, "--seed", str(seed), "--corpus", str(PROMPTS))
        for noise in args.noise:
            draft = out / f"target-{seed}-noise-{noise}"
            _make(args.python, draft, "--draft-of", str(target), "--noise", str(noise))
            spec = cell_spec(target, PROMPTS, {"method": "draft_model", "model": str(draft),
                                               "num_speculative_tokens": NUM_SPECULATIVE_TOKENS})
            if args.workload == "demo":
                spec["workload"] = {**spec["workload"], **demo_workload()}
            folder = out / f"cell-{seed}-{noise}"
            folder.mkdir()
            run = run_cell(args.python, folder, spec)
            if run.result is None:
                raise SystemExit(f"seed {seed} noise {noise}: the cell failed (exit {run.returncode}); log in {folder}")
            result = CellResult.model_validate(run.result)
            found = derive(result.spec_decode, result.requests, [r.spec_decode for r in result.rounds if r.spec_decode])
            positions = " ".join(f"{rate:.2f}" for rate, _, _ in found.per_position)
            print(f"| {seed} | {noise:g} | {found.acceptance_rate:.3f} [{found.acceptance_rate_low:.3f}, "
                  f"{found.acceptance_rate_high:.3f}] | {found.mean_acceptance_length:.2f} "
                  f"[{found.mean_acceptance_length_low:.2f}, {found.mean_acceptance_length_high:.2f}] | "
                  f"{positions} | {result.spec_decode.num_drafts} |", flush=True)


def _make(python: Path, out: Path, *options: str) -> None:
    subprocess.run([str(python), str(TINY_MODEL), str(out), *options], check=True, capture_output=True, timeout=300)


if __name__ == "__main__":
    main()
