"""Rounds a start against starts a verdict: the split of a GPU minute that buys the most precision, per noise class.

    .venv/bin/python -m benchmarks.round_allocation                    # every H200 folder under tests/data
    .venv/bin/python -m benchmarks.round_allocation --database-url sqlite:////tmp/store.db

For each class of the noise model (GPU kind x backend x graph mode x a draft or none x mode, ``app.analysis.noise``)
with cells of at least two starts that kept their rounds: the starts' fixed cost ``C`` (wall less measured seconds:
import, engine start, warm-up; median), a round's seconds ``T`` (median), the rounds they ran ``R0``, the spread
between starts ``s_b`` and within a start between rounds ``s_w`` (pooled over cells, with degrees of freedom), the
start-to-start part ``s_s`` left once rounds are averaged out, and the best whole number of rounds
(``benchmarks.stats.allocation``) with a 95 % interval from resampling the class's cells (2000 draws, percentiles;
none under three cells). ``GPU time`` is what the rounds the starts ran need for the same interval as the best rounds
(1.30: 30 % more GPU time); ``eff`` a start's efficiency at ``R0`` and at the best.

Without ``--database-url`` the H200 folders are imported into a temporary SQLite file first (``draftbench import``).
A class's figures hold for the cells it pooled: the model does not tell an 8B cell from a small one, so ``C`` and
``T`` are medians over both.
"""

import argparse
import math
import random
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from app.analysis.noise import NoiseClass, Spread, group_terms, pooled_terms
from app.cells.service import plausible_speed_sql
from app.enums import JobState
from app.models import Job, Result
from benchmarks.stats.allocation import best_rounds, cost_of_precision, efficiency, start_variance

ROOT = Path(__file__).resolve().parents[1]
DRAWS = 2000


@dataclass
class Cell:
    """One build's starts of one config counted one way (``Result.empty_as_failed``, as the noise model keeps them
    apart): each start's ln tokens/s, its rounds' terms, fixed cost and round length. Finer than the noise model's
    cells, which also join configs that measured the same (``app.noise.service``): never coarser."""

    starts: list[float] = field(default_factory=list)
    rounds: list[tuple[int, float]] = field(default_factory=list)
    overhead_s: list[float] = field(default_factory=list)
    round_s: list[float] = field(default_factory=list)
    ran: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Allocation:
    between: Spread
    within: Spread
    overhead_s: float
    round_s: float
    rounds: float
    start_var: float
    best: int

    @property
    def gpu_time(self) -> float:
        """GPU time at the rounds run over that at the best, for the same interval."""
        ran = max(round(self.rounds), 1)
        args = (self.start_var, self.within.sd ** 2, self.overhead_s, self.round_s)
        return cost_of_precision(*args, ran) / cost_of_precision(*args, self.best)


def read_cells(session: Session) -> dict[NoiseClass, list[Cell]]:
    """Every cell with at least two succeeded starts that kept their rounds' terms and their measured seconds."""
    rows = session.execute(
        select(Job.gpu_kind, Job.backend, Job.graph_mode, Job.method, Job.mode, Job.concurrency, Job.build,
               Job.config_hash, Result.empty_as_failed, Result.tokens_per_s, Result.round_speeds, Result.round_squares, Result.measured_s,
               Result.efficiency, Result.rounds)
        .join(Result, Result.job_id == Job.id)
        .where(Job.state == JobState.SUCCEEDED, plausible_speed_sql()).order_by(Job.id)
    ).all()
    cells: dict[tuple, Cell] = defaultdict(Cell)
    for row in rows:
        if not (row.measured_s and row.efficiency and row.round_speeds and row.round_speeds >= 2):
            continue
        cell = cells[(NoiseClass.of(*row[:6]), row.build, row.config_hash, row.empty_as_failed)]
        cell.starts.append(math.log(row.tokens_per_s))
        cell.rounds.append((row.round_speeds, row.round_squares or 0.0))
        cell.overhead_s.append(row.measured_s / row.efficiency - row.measured_s)
        cell.round_s.append(row.measured_s / row.rounds)
        cell.ran.append(row.rounds)
    by_class: dict[NoiseClass, list[Cell]] = defaultdict(list)
    for (noise_class, *_), cell in cells.items():
        if len(cell.starts) >= 2:
            by_class[noise_class].append(cell)
    return dict(by_class)


def allocate(cells: list[Cell]) -> Allocation | None:
    """The class's spreads pooled over ``cells`` and the best rounds they imply; None without both spreads."""
    between = pooled_terms(group_terms(c.starts) for c in cells)
    within = pooled_terms(r for c in cells for r in c.rounds)
    if between is None or within is None:
        return None
    overhead = statistics.median(x for c in cells for x in c.overhead_s)
    round_s = statistics.median(x for c in cells for x in c.round_s)
    ran = statistics.median(x for c in cells for x in c.ran)
    start_var = start_variance(between.sd, within.sd, ran)
    best = best_rounds(start_var, within.sd ** 2, overhead, round_s)
    return Allocation(between, within, overhead, round_s, ran, start_var, best)


def best_interval(cells: list[Cell], rng: random.Random) -> tuple[int, int] | None:
    """The 2.5th and 97.5th percentiles of the best rounds over ``DRAWS`` resamplings of the cells (with
    replacement); None under three cells, where resampling says nothing."""
    if len(cells) < 3:
        return None
    found = sorted(a.best for a in (allocate(rng.choices(cells, k=len(cells))) for _ in range(DRAWS)) if a)
    return found[int(0.025 * (len(found) - 1))], found[int(0.975 * (len(found) - 1))]


def imported_h200(url: str) -> None:
    """Every exported H200 sweep under tests/data imported into ``url``, as ``draftbench import`` does."""
    env = {"DRAFTBENCH_DATABASE_URL": url, "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-m", "app.cli", "migrate"], check=True, env=env, cwd=ROOT, capture_output=True)
    for folder in sorted({p.parent for p in (ROOT / "tests" / "data").glob("h200-*/**/sweep.json")}):
        subprocess.run([sys.executable, "-m", "app.cli", "import", str(folder)], check=True, env=env, cwd=ROOT,
                       capture_output=True)


def table(by_class: dict[NoiseClass, list[Cell]], rng: random.Random) -> list[str]:
    lines = ["| class | cells | starts | C s | T s | R0 | s_b (df) | s_w (df) | s_s | best R [95 %] | GPU time at R0 | eff R0 -> best |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for noise_class in sorted(by_class, key=lambda c: tuple(str(x) for x in c)):
        cells = by_class[noise_class]
        found = allocate(cells)
        if found is None:
            continue
        interval = best_interval(cells, rng)
        name = " ".join(str(x) for x in (noise_class.gpu_kind, noise_class.backend, noise_class.graph_mode,
                                          noise_class.method_class, noise_class.mode, noise_class.concurrency or ""))
        ran = max(round(found.rounds), 1)
        lines.append(
            f"| {name.strip()} | {len(cells)} | {sum(len(c.starts) for c in cells)} | {found.overhead_s:.0f} | "
            f"{found.round_s:.1f} | {found.rounds:g} | {found.between.sd:.3f} ({found.between.df}) | "
            f"{found.within.sd:.3f} ({found.within.df}) | {math.sqrt(found.start_var):.3f} | {found.best}"
            f"{f' [{interval[0]}, {interval[1]}]' if interval else ' (under 3 cells)'} | {found.gpu_time:.2f} | "
            f"{efficiency(found.overhead_s, found.round_s, ran):.0%} -> "
            f"{efficiency(found.overhead_s, found.round_s, found.best):.0%} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", help="a store to read (default: the H200 folders, imported afresh)")
    parser.add_argument("--seed", type=int, default=0, help="the resampling's seed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = args.database_url
        if url is None:
            url = f"sqlite:///{folder}/h200.db"
            imported_h200(url)
        engine = create_engine(url)
        with Session(engine) as session:
            by_class = read_cells(session)
        engine.dispose()
    print("\n".join(table(by_class, random.Random(args.seed))))


if __name__ == "__main__":
    main()
