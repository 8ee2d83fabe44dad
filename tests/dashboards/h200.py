"""The real H200 data as databases a test may change: the proof's SQLite copies, and its sweeps' folders imported."""

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from fastapi.testclient import TestClient

from app.api.main import create_app
from app.config import Settings
from tests.conftest import TOKEN

DATA = Path(__file__).resolve().parents[1] / "data"
PROOF = DATA / "h200-proof-2026-11-30"
# The proof's sweeps as `draftbench export` wrote them (that folder's README): DATABASE/SWEEP.
SWEEPS = DATA / "h200-2026-11-30"
# The 3 backends x 4 graph modes x draft_model/dflash matrix, in two sweeps: the lease ended before its last 3 cells.
MATRIX = ("proof/h200-matrix", "batch2/h200-matrix-rest")
# The noise sweeps of 2026-12-01: three engine starts of each of four cells of one build, in two sweeps.
NOISE = DATA / "h200-2026-12-01" / "noise"


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


def in_process(url: str) -> Iterator[TestClient]:
    """The service over ``url`` in this process, for as long as the caller iterates; its engine closed after."""
    app = create_app(Settings(database_url=url, token=TOKEN))
    with TestClient(app) as client:
        yield client
    app.state.engine.dispose()


def rounded_speedups(line: dict) -> dict[tuple[int, int], tuple[float, float, float]]:
    """A ``/api/v1/speedups`` line's cells as (k, load) -> speedup and its interval, to two decimals as the page says."""
    return {(c["k"], c["load"]): (round(c["speedup"], 2), round(c["speedup_low"], 2), round(c["speedup_high"], 2))
            for c in line["cells"]}


def noise_imported(url: str) -> None:
    """The 2026-12-01 noise sweeps (``NOISE``) imported into ``url``."""
    for sweep in ("h200-noise-8b", "h200-noise-8b-third"):
        imported_folder(url, NOISE / sweep)
