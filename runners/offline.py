"""Run a folder of cells without the service: for GPU hosts that can reach nothing.

Standard library only, so it runs beside vLLM alone. ``draftbench expand`` writes the folder;
``draftbench import`` reads the results back into the service's database. From the repository's root:

    python -m runners.offline FOLDER [--python PATH] [--only-missing] [--budget-s SECONDS] [--no-fork-server]

Each ``FOLDER/cells/NAME/spec.json`` gets ``cell.log``, ``exit.json`` and, when the cell ran to
the end, ``result.json`` beside it. With ``--budget-s`` (a lease on a borrowed GPU) a cell that
the budget cuts short is left without ``exit.json``, so it is not mistaken for a timeout and
``--only-missing`` runs it next time. Cells are forked from a fork server of the build's Python, which imports vLLM
once (``runners/forkserver.py``), unless ``--no-fork-server``.
"""

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from runners import execute

CELL_SCRIPT = Path(__file__).with_name("cell.py")
# exit.json's finished_at, in UTC to the second.
FINISHED_AT_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def exit_record(
    *, exit_code: int | None, signal: int | None, timed_out: bool, duration_s: float, finished_at: datetime
) -> dict:
    """What ``exit.json`` says of a cell's process: how it ended, how long it ran, and when it ended."""
    return {
        "exit_code": exit_code,
        "signal": signal,
        "timed_out": timed_out,
        "duration_s": round(duration_s, 3),
        "finished_at": finished_at.astimezone(UTC).strftime(FINISHED_AT_FORMAT),
    }


def run_folder(
    folder: Path, *, python: str, only_missing: bool = False, budget_s: float | None = None,
    pycache: Path | None = execute.DEFAULT_PYCACHE, fork: bool = True,
) -> list[dict]:
    """Run every cell under ``folder/cells`` in name order; returns one summary per cell.

    ``pycache`` is the cells' bytecode cache (``execute.cell_env``); None leaves the environment's
    bytecode settings as they are. ``fork`` forks the cells from a fork server (``execute.ForkServer``).
    """
    servers = execute.ForkServers(folder) if fork else None
    try:
        return _run_cells(folder, python=python, only_missing=only_missing, budget_s=budget_s, pycache=pycache,
                          servers=servers)
    finally:
        if servers is not None:
            servers.close()


def _run_cells(
    folder: Path, *, python: str, only_missing: bool, budget_s: float | None, pycache: Path | None,
    servers: execute.ForkServers | None,
) -> list[dict]:
    deadline = None if budget_s is None else time.monotonic() + budget_s
    summaries = []
    for cell_dir in sorted(p for p in (folder / "cells").iterdir() if (p / "spec.json").is_file()):
        if only_missing and (cell_dir / "exit.json").is_file():
            continue
        spec = json.loads((cell_dir / "spec.json").read_text())
        timeout_s = float(spec["timeout_s"])
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left < 30:
            print(json.dumps({"cell": cell_dir.name, "skipped": "budget spent"}), flush=True)
            break
        (cell_dir / "result.json").unlink(missing_ok=True)
        env = execute.cell_env(spec.get("env", {}), pycache)
        finished = execute.run(
            [python, str(CELL_SCRIPT), str(cell_dir / "spec.json"), str(cell_dir / "result.json")],
            log_path=cell_dir / "cell.log",
            timeout_s=timeout_s if left is None else min(timeout_s, left),
            cwd=cell_dir,
            env=env,
            fork_server=servers.get(python, env, "cells") if servers else None,
        )
        if finished.timed_out and left is not None and left < timeout_s:
            print(json.dumps({"cell": cell_dir.name, "cut": "budget spent mid-cell; run it again"}), flush=True)
            break
        exit_info = exit_record(exit_code=finished.exit_code, signal=finished.signal, timed_out=finished.timed_out,
                                duration_s=finished.duration_s, finished_at=datetime.now(UTC))
        (cell_dir / "exit.json").write_text(json.dumps(exit_info))
        summary = {"cell": cell_dir.name, **exit_info}
        if (cell_dir / "result.json").is_file():
            result = json.loads((cell_dir / "result.json").read_text())
            summary["tokens_per_s"] = result.get("tokens_per_s")
        print(json.dumps(summary), flush=True)
        summaries.append(summary)
    return summaries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--python", default=sys.executable, help="The vLLM build's interpreter")
    parser.add_argument("--only-missing", action="store_true", help="Skip cells that already have exit.json")
    parser.add_argument("--budget-s", type=float, help="Start no cell after this many seconds; cut the last one")
    parser.add_argument("--pycache", default=str(execute.DEFAULT_PYCACHE),
                        help="The cells' Python bytecode folder (PYTHONPYCACHEPREFIX); '' leaves the environment's settings")
    parser.add_argument("--no-fork-server", dest="fork", action="store_false",
                        help="Start each cell in a new Python instead of forking it from one that imported vLLM")
    args = parser.parse_args()
    run_folder(args.folder, python=args.python, only_missing=args.only_missing, budget_s=args.budget_s,
               pycache=Path(args.pycache).expanduser() if args.pycache else None, fork=args.fork)


if __name__ == "__main__":
    main()
