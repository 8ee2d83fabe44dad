"""The real H200 data as databases a test may change: the proof's SQLite copies, and the matrix folder imported."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
PROOF = DATA / "h200-proof-2026-11-30"


def copy_of(name: str, folder: Path) -> str:
    """A SQLite URL of a copy of one of the proof's databases (``proof`` or ``capture-bug``)."""
    target = folder / f"{name}.sqlite"
    shutil.copy(PROOF / f"{name}.sqlite", target)
    return f"sqlite:///{target}"


def imported_matrix(url: str) -> None:
    """``draftbench import tests/data/h200-matrix`` into ``url``, as a user does."""
    env = {**os.environ, "DRAFTBENCH_DATABASE_URL": url}
    subprocess.run([sys.executable, "-m", "app.cli", "import", str(DATA / "h200-matrix")], check=True, env=env,
                   capture_output=True, cwd=Path(__file__).resolve().parents[2])
