"""The real H200 data as databases a test may change: the proof's SQLite copies, and its sweeps' folders imported."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
PROOF = DATA / "h200-proof-2026-11-30"
# The proof's sweeps as `draftbench export` wrote them (that folder's README): DATABASE/SWEEP.
SWEEPS = DATA / "h200-2026-11-30"
# The 3 backends x 4 graph modes x draft_model/dflash matrix, in two sweeps: the lease ended before its last 3 cells.
MATRIX = ("proof/h200-matrix", "batch2/h200-matrix-rest")


def copy_of(name: str, folder: Path) -> str:
    """A SQLite URL of a copy of one of the proof's databases (``proof``, ``batch2`` or ``capture-bug``)."""
    target = folder / f"{name}.sqlite"
    shutil.copy(PROOF / f"{name}.sqlite", target)
    return f"sqlite:///{target}"


def imported(url: str, *sweeps: str) -> None:
    """``draftbench import`` of each folder of ``SWEEPS`` named (default: all) into ``url``, as a user does."""
    for sweep in sweeps or sorted(str(p.relative_to(SWEEPS)) for p in SWEEPS.glob("*/*") if p.is_dir()):
        imported_folder(url, SWEEPS / sweep)


def imported_folder(url: str, folder: Path) -> None:
    """``draftbench import FOLDER`` into ``url``, as a user runs it."""
    env = {**os.environ, "DRAFTBENCH_DATABASE_URL": url}
    subprocess.run([sys.executable, "-m", "app.cli", "import", str(folder)], check=True, env=env,
                   capture_output=True, cwd=Path(__file__).resolve().parents[2])
