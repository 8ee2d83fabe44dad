"""Run a folder of cells without the service: for GPU hosts that can reach nothing.

Standard library only, so it runs beside vLLM alone. ``draftbench expand`` writes the folder;
``draftbench import`` reads the results back into the service's database.

    python runners/offline.py FOLDER [--python PATH] [--only-missing]

Each ``FOLDER/cells/NAME/spec.json`` gets ``cell.log``, ``exit.json`` and, when the cell ran to
the end, ``result.json`` beside it.
"""

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runners import execute  # noqa: E402

CELL_SCRIPT = Path(__file__).with_name("cell.py")


def run_folder(folder: Path, *, python: str, only_missing: bool = False) -> list[dict]:
    """Run every cell under ``folder/cells`` in name order; returns one summary per cell."""
    summaries = []
    for cell_dir in sorted(p for p in (folder / "cells").iterdir() if (p / "spec.json").is_file()):
        if only_missing and (cell_dir / "exit.json").is_file():
            continue
        spec = json.loads((cell_dir / "spec.json").read_text())
        (cell_dir / "result.json").unlink(missing_ok=True)
        finished = execute.run(
            [python, str(CELL_SCRIPT), str(cell_dir / "spec.json"), str(cell_dir / "result.json")],
            log_path=cell_dir / "cell.log",
            timeout_s=float(spec.get("timeout_s", 900)),
            cwd=cell_dir,
        )
        exit_info = {
            "exit_code": finished.exit_code,
            "signal": finished.signal,
            "timed_out": finished.timed_out,
            "duration_s": round(finished.duration_s, 3),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
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
    args = parser.parse_args()
    run_folder(args.folder, python=args.python, only_missing=args.only_missing)


if __name__ == "__main__":
    main()
