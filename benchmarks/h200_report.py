"""The tables of docs/h200-report.md, from the databases benchmarks/h200_proof.py wrote on the H200.

    .venv/bin/python benchmarks/h200_report.py tests/data/h200-proof-2026-11-30/proof.sqlite \\
        --capture tests/data/h200-proof-2026-11-30/capture-bug.sqlite --before tests/data/h200-matrix

Prints: every cell's tokens/s (median of rounds, order-statistic interval, its relative half-width),
acceptance and efficiency; the efficiency before rounds (the single-window H200 matrix) and after;
the calibration cells position by position against the rates asked for; the capture-bug build
beside the unpatched one; and the sweep's wall time on two GPUs against its jobs' summed time.
Reads only the databases and folders it is given.
"""

import argparse
import json
import sqlite3
import statistics
import sys
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.analysis.acceptance import calibration_misses, per_position  # noqa: E402
from app.analysis.rounds import median_interval  # noqa: E402

CELLS = """
SELECT s.name, j.build, j.backend, j.graph_mode, r.resolved_graph_mode, r.draft_eager, j.method, r.raw,
       r.acceptance_rate, r.accepted_per_position, r.num_drafts, r.expected_per_position, j.started_at, j.finished_at
FROM results r JOIN jobs j ON j.id = r.job_id JOIN sweeps s ON s.id = j.sweep_id ORDER BY j.id
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("--capture", type=Path, help="The database with the capture-bug build's cells")
    parser.add_argument("--before", type=Path, help="A runners/offline.py folder measured before rounds existed")
    args = parser.parse_args()
    rows = _open(args.db).execute(CELLS).fetchall()
    cells(rows)
    efficiency(rows, args.before)
    calibration(rows)
    if args.capture:
        capture(_open(args.capture).execute(CELLS).fetchall(), rows)
    two_gpus(args.db)


def cells(rows: list[tuple]) -> None:
    print("## Cells (tokens/s: median of rounds [interval, its confidence]; half: half-width / median)\n")
    print("| sweep | backend | graph mode -> ran | draft eager | method | tok/s [interval] | half | acceptance | efficiency |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, _, backend, mode, ran, eager, method, raw, accept, *_ in rows:
        raw = json.loads(raw)
        found = median_interval([r["output_tokens"] / r["seconds"] for r in raw["rounds"]])
        half = (found.high - found.low) / 2 / found.median
        eff = _efficiency(raw)
        print(f"| {name} | {backend} | {mode} -> {ran} | {'yes' if eager else ''} | {method} | {found.median:.0f} "
              f"[{found.low:.0f}, {found.high:.0f}] {found.confidence:.1%} | {half:.0%} | {accept:.3f} | {eff:.0%} |")


def efficiency(rows: list[tuple], before: Path | None) -> None:
    after = [_efficiency(json.loads(row[7])) for row in rows]
    print(f"\n## Efficiency (measured seconds / cell wall seconds)\n\nwith rounds: median {statistics.median(after):.0%}, "
          f"mean {statistics.mean(after):.0%}, range {min(after):.0%}-{max(after):.0%} over {len(after)} cells")
    if before:
        measured = wall = 0.0
        for cell in sorted((before / "cells").iterdir()):
            result = json.loads((cell / "result.json").read_text())
            measured += result["generation_s"]
            wall += json.loads((cell / "exit.json").read_text())["duration_s"]
        print(f"before rounds ({before.name}): {measured:.1f} s measured in {wall:.0f} s of cells: {measured / wall:.1%}")


def calibration(rows: list[tuple]) -> None:
    print("\n## Calibration (synthetic acceptance: per-position rate asked vs measured, Wilson 95 %)\n")
    print("| sweep | backend | asked | measured [interval] | miss |")
    print("|---|---|---|---|---|")
    for name, _, backend, _m, _r, _e, _me, _raw, _a, accepted, drafts, expected, *_ in rows:
        expected = json.loads(expected) if expected else None
        if not expected:
            continue
        measured = per_position(json.loads(accepted), drafts)
        misses = calibration_misses(expected, measured)
        shown = ", ".join(f"{rate:.3f} [{low:.3f}, {high:.3f}]" for rate, low, high in measured)
        print(f"| {name} | {backend} | {expected} | {shown} | {sum(misses)} of {len(misses)} |")


def capture(patched: list[tuple], unpatched: list[tuple]) -> None:
    print("\n## The build whose FlashInfer claims full CUDA graphs with spec decode, beside the unpatched one\n")
    print("| build | backend | graph mode -> ran | acceptance | acceptance by round | tok/s |")
    print("|---|---|---|---|---|---|")
    for name, build, backend, mode, ran, _e, method, raw, accept, *_ in [*patched, *unpatched]:
        if backend != "FLASHINFER" or method != "draft_model" or name not in ("h200-capture-bug", "h200-matrix"):
            continue
        raw = json.loads(raw)
        by_round = ", ".join(f"{r['spec_decode']['num_accepted_tokens'] / r['spec_decode']['num_draft_tokens']:.3f}"
                             for r in raw["rounds"])
        print(f"| {build} | {backend} | {mode} -> {ran} | {accept:.3f} | {by_round} | {raw['tokens_per_s']:.0f} |")


def _open(path: Path) -> sqlite3.Connection:
    """Read-only: a missing file is an error, not a new empty database."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _efficiency(raw: dict) -> float:
    return sum(r["seconds"] for r in raw["rounds"]) / raw["wall_s"]


def two_gpus(db: Path) -> None:
    jobs = _open(db).execute(
        "SELECT j.started_at, j.finished_at, w.name FROM jobs j JOIN workers w ON w.id = j.worker_id "
        "WHERE j.state = 'succeeded'"
    ).fetchall()
    spans = [(datetime.fromisoformat(a), datetime.fromisoformat(b), worker) for a, b, worker in jobs]
    wall = (max(b for _, b, _ in spans) - min(a for a, _, _ in spans)).total_seconds()
    busy = sum((b - a).total_seconds() for a, b, _ in spans)
    print(f"\n## Two GPUs\n\n{len(spans)} jobs on {len({w for *_, w in spans})} workers: wall {wall:.0f} s; the jobs' "
          f"summed time {busy:.0f} s (what one GPU would take back to back), half of it {busy / 2:.0f} s: "
          f"wall / half = {wall / (busy / 2):.2f}")


if __name__ == "__main__":
    main()
