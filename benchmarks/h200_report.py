"""The tables of docs/h200-report.md, from the databases benchmarks/h200_proof.py wrote on the H200.

    D=tests/data/h200-proof-2026-11-30
    .venv/bin/python -m benchmarks.h200_report $D/proof.sqlite --capture $D/capture-bug.sqlite \\
        --before tests/data/h200-matrix --more $D/batch2.sqlite --peer batch2=$D/peer

Prints: every cell's tokens/s (median of rounds, order-statistic interval, its relative half-width),
acceptance and efficiency; the efficiency before rounds (the single-window H200 matrix) and after;
the calibration cells position by position against the rates asked for; the capture-bug build
beside the unpatched one; the sweep's wall time on two GPUs against its jobs' summed time; with
``--more``, further batches' cells (their own two-GPU figure each, where two workers ran); with
``--peer BATCH=FOLDER``, the peer check (benchmarks/peer_check.py's files) beside that batch's peer
cells; and the serving cells' latencies. A calibration cell whose passes replayed the first one's
random draws (cells before 2026-12-01 at temperature > 0) is shown twice: counted as run, and with
one pass counted once.
Reads only the databases and folders it is given. Each database is read through the service's models
from a copy brought to the current schema (the stored ones are older), so the originals never change.
"""

import argparse
import json
import math
import sqlite3
import statistics
import tempfile
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from app import db
from app.analysis.acceptance import calibration_misses, per_position
from app.analysis.fallback import CellSpeed, RepeatSpeed, pool_repeats, ratio
from app.analysis.intervals import Z_95
from app.analysis.rounds import median_interval
from app.enums import JobState, Mode
from app.models import Job, Result, Sweep, Worker
from app.schemas.cell import CellResult
from benchmarks.stats.acceptance import per_pass_counts
from benchmarks.stats.rounds import aa_check


@dataclass(frozen=True)
class Cell:
    """One job with a result: what was asked (``job``) and what ran (``result``)."""

    batch: str  # the database's name: later batches reuse sweep names
    sweep: str
    job: Job
    result: Result


@dataclass(frozen=True)
class Batch:
    """One database of the proof: its cells in job order, its serving cells, and its finished jobs' spans."""

    path: Path
    cells: list[Cell]
    # Ordered by sweep, backend, baseline first, then clients: the serving tables' rows.
    serving: list[Cell]
    # Each succeeded job's start, end and worker name.
    spans: list[tuple[datetime, datetime, str]]


def read(path: Path, folder: Path) -> Batch:
    """The batch in the database at ``path``, through a copy in ``folder`` migrated to the current schema.

    The copy goes through SQLite's backup of a read-only connection: a missing file is an error, not a
    new empty database, and a write-ahead log beside the file is copied too.
    """
    folder.mkdir(parents=True)
    copy = folder / path.name
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as source, closing(sqlite3.connect(copy)) as target:
        source.backup(target)
    url = f"sqlite:///{copy}"
    db.upgrade(url)
    engine = db.make_engine(url)
    finished = select(Sweep.name, Job, Result).select_from(Result).join(Result.job).join(Job.sweep)
    serve = finished.where(Job.mode == Mode.SERVE).order_by(
        Sweep.name, Job.backend, Job.method.is_not(None), Job.concurrency, Job.id
    )
    spans = (
        select(Job.started_at, Job.finished_at, Worker.name)
        .join(Worker, Worker.id == Job.worker_id)
        .where(Job.state == JobState.SUCCEEDED)
    )
    try:
        with db.make_sessionmaker(engine)() as session:
            return Batch(
                path,
                cells=_cells(session, path.stem, finished.order_by(Job.id)),
                serving=_cells(session, path.stem, serve),
                spans=[tuple(row) for row in session.execute(spans)],
            )
    finally:
        engine.dispose()


def _cells(session: Session, batch: str, query: Select) -> list[Cell]:
    return [Cell(batch, name, job, result) for name, job, result in session.execute(query)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("--capture", type=Path, help="The database with the capture-bug build's cells")
    parser.add_argument("--before", type=Path, help="A runners/offline.py folder measured before rounds existed")
    parser.add_argument("--more", type=Path, action="append", default=[], help="Another batch's database")
    parser.add_argument("--peer", action="append", default=[], metavar="BATCH=FOLDER",
                        help="benchmarks/peer_check.py's output folders (one per check) beside that batch's cells")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="draftbench-h200-report-") as scratch:
        batches = [read(path, Path(scratch) / str(i)) for i, path in enumerate((args.db, *args.more))]
        patched = read(args.capture, Path(scratch) / "capture").cells if args.capture else None
    rows = [cell for batch in batches for cell in batch.cells]
    serve_rows = [cell for batch in batches for cell in batch.serving]
    cells(rows)
    efficiency(rows, args.before)
    time_spent(rows)
    half_widths(rows)
    calibration(rows)
    if patched is not None:
        capture(patched, rows)
    serving(serve_rows)
    speedups(serve_rows)
    between_starts(rows)
    if args.peer:
        peer([(batch, Path(folder)) for batch, _, folder in (p.partition("=") for p in args.peer)], rows, serve_rows)
    for batch in batches:
        two_gpus(batch)


def cells(rows: list[Cell]) -> None:
    print("## Cells (tokens/s: median of rounds [interval, its confidence]; half: half-width / median)\n")
    print("| batch | sweep | backend | graph mode -> ran | draft eager | method | tok/s [interval] | half | acceptance | efficiency |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for cell in rows:
        job, result = cell.job, cell.result
        found = median_interval(_speeds(result.raw))
        half = (found.high - found.low) / 2 / found.median
        eff = _efficiency(result.raw)
        print(f"| {cell.batch} | {cell.sweep} | {job.backend} | {job.graph_mode} -> {result.resolved_graph_mode} | "
              f"{'yes' if result.draft_eager else ''} | {job.method} | {found.median:.0f} "
              f"[{found.low:.0f}, {found.high:.0f}] {found.confidence:.1%} | {half:.0%} | {_maybe(result.acceptance_rate)} | {eff:.0%} |")


def efficiency(rows: list[Cell], before: Path | None) -> None:
    after = [_efficiency(cell.result.raw) for cell in rows]
    print(f"\n## Efficiency (measured seconds / cell wall seconds)\n\nwith rounds: median {statistics.median(after):.0%}, "
          f"mean {statistics.mean(after):.0%}, range {min(after):.0%}-{max(after):.0%} over {len(after)} cells")
    if before:
        measured = wall = 0.0
        for cell in sorted((before / "cells").iterdir()):
            result = json.loads((cell / "result.json").read_text())
            measured += result["generation_s"]
            wall += json.loads((cell / "exit.json").read_text())["duration_s"]
        print(f"before rounds ({before.name}): {measured:.1f} s measured in {wall:.0f} s of cells: {measured / wall:.1%}")


def calibration(rows: list[Cell]) -> None:
    print("\n## Calibration (synthetic acceptance: per-position rate asked vs measured, Wilson 95 %)\n")
    print("| batch | sweep | backend | asked | draws | measured [interval] | miss |")
    print("|---|---|---|---|---|---|---|")
    for cell in rows:
        result, expected = cell.result, cell.result.expected_per_position
        if not expected:
            continue
        replayed = one_pass(result.raw)
        counted = [("every pass", result.accepted_per_position, result.num_drafts)]
        if replayed:
            counted.append((f"one pass of {replayed[2]} (the others replayed it)", *replayed[:2]))
        for draws, at, trials in counted:
            measured = per_position(at, trials)
            misses = calibration_misses(expected, measured)
            shown = ", ".join(f"{rate:.3f} [{low:.3f}, {high:.3f}]" for rate, low, high in measured)
            print(f"| {cell.batch} | {cell.sweep} | {cell.job.backend} | {expected} | {draws} | {shown} | {sum(misses)} of {len(misses)} |")


def one_pass(raw: dict) -> tuple[list[int], int, int] | None:
    """A cell whose passes replayed the first one's draws: its per-position accepted counts and drafts for
    one pass, and how many passes it ran; None if its passes differ.

    Before session 4 every pass of a cell reused the same request seeds, so at temperature > 0 each pass
    repeated the first one's random draws (``stats.acceptance.per_pass_counts``: one tuple in every round).
    """
    result = CellResult.model_validate(raw)
    if result.spec_decode is None or any(r.spec_decode is None for r in result.rounds):
        return None
    counts = set(per_pass_counts([(r.num_requests, r.spec_decode) for r in result.rounds], result.num_requests))
    passes = sum(r.num_requests for r in result.rounds) // result.num_requests
    if len(counts) != 1 or passes < 2:
        return None
    drafts, *accepted = counts.pop()
    return accepted, drafts, passes


def capture(patched: list[Cell], unpatched: list[Cell]) -> None:
    print("\n## The build whose FlashInfer claims full CUDA graphs with spec decode, beside the unpatched one\n")
    print("| build | backend | graph mode -> ran | acceptance | acceptance by round | tok/s |")
    print("|---|---|---|---|---|---|")
    for cell in [*patched, *unpatched]:
        job, result = cell.job, cell.result
        if job.backend != "FLASHINFER" or job.method != "draft_model" or cell.sweep not in ("h200-capture-bug", "h200-matrix"):
            continue
        by_round = ", ".join(f"{r['spec_decode']['num_accepted_tokens'] / r['spec_decode']['num_draft_tokens']:.3f}"
                             for r in result.raw["rounds"])
        print(f"| {job.build} | {job.backend} | {job.graph_mode} -> {result.resolved_graph_mode} | {result.acceptance_rate:.3f} | "
              f"{by_round} | {result.raw['tokens_per_s']:.0f} |")


def serving(rows: list[Cell]) -> None:
    print("\n## Serving (vLLM's OpenAI server; milliseconds p50 / p90 / p99 over every measured request)\n")
    print("| sweep | backend | ran | draft | clients | requests | output tok/s [interval] | TTFT | TPOT | ITL | acceptance |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for cell in rows:
        job, result, facts = cell.job, cell.result, cell.result.serving
        found = median_interval(_speeds(result.raw))
        spans = {m: " / ".join(f"{facts[f'{m}_ms'][p]:.1f}" for p in ("p50", "p90", "p99")) for m in ("ttft", "tpot", "itl")}
        shown = f"{result.num_accepted_tokens / result.num_draft_tokens:.3f}" if result.num_draft_tokens else ""
        print(f"| {cell.sweep} | {job.backend} | {result.resolved_graph_mode} | {job.method or 'none'} | {job.concurrency} | "
              f"{facts['completed']} | {found.median:.0f} [{found.low:.0f}, {found.high:.0f}] | {spans['ttft']} | "
              f"{spans['tpot']} | {spans['itl']} | {shown} |")


def speedups(rows: list[Cell]) -> None:
    """Speculation against the same server without it (the sweep's baseline cells), per client count."""
    print("\n## Serving: speculation against no speculation (output tok/s ratio, 95 % interval; TPOT p50 ms)\n")
    print("| sweep | backend | clients | with draft | without | ratio [interval] | TPOT p50 with / without |")
    print("|---|---|---|---|---|---|---|")
    baselines = {(cell.sweep, cell.job.backend, cell.job.concurrency): cell for cell in rows if cell.job.method is None}
    for cell in rows:
        base = baselines.get((cell.sweep, cell.job.backend, cell.job.concurrency))
        if cell.job.method is None or base is None:
            continue
        spec, plain = _speed(cell.result.raw), _speed(base.result.raw)
        found = ratio(spec, plain)
        tpot = cell.result.serving["tpot_ms"]["p50"], base.result.serving["tpot_ms"]["p50"]
        print(f"| {cell.sweep} | {cell.job.backend} | {cell.job.concurrency} | {spec.median:.0f} | {plain.median:.0f} | "
              f"{found.value:.2f}x [{found.low:.2f}, {found.high:.2f}] | {tpot[0]:.1f} / {tpot[1]:.1f} |")


def between_starts(rows: list[Cell]) -> None:
    """The A/A check between engine starts: the cells run more than once in one sweep, start by start, against
    what their intervals would give if starts did not differ (``rounds.aa_check``)."""
    print("\n## A/A between engine starts (same sweep, same cell, separate engine starts)\n")
    print("| sweep | backend | graph mode -> ran | method | each start: median [interval] | starts' medians inside "
          "another start's interval (expected if starts did not differ; permutation p) | between starts: max / min "
          "median | within one start: half-width (median) | pooled over starts (fallback.pool_repeats) [95 %] |")
    print("|---|---|---|---|---|---|---|---|---|")
    groups: dict[tuple, list[Cell]] = {}
    for cell in rows:
        job = cell.job
        key = (cell.batch, job.config_hash, cell.sweep, job.backend, job.graph_mode, cell.result.resolved_graph_mode, job.method)
        groups.setdefault(key, []).append(cell)
    cells = []
    for (_, _, name, backend, mode, ran, method), starts in groups.items():
        if len(starts) < 2:
            continue
        rounds = [_speeds(cell.result.raw) for cell in starts]
        cells.append(rounds)
        check = aa_check([rounds])
        found = [median_interval(start) for start in rounds]
        pooled = pool_repeats([RepeatSpeed(f.median, f.low, f.high, f.n) for f in found])
        low, high = _bounds(pooled)
        shown = "; ".join(f"{f.median:.0f} [{f.low:.0f}, {f.high:.0f}]" for f in found)
        medians = [f.median for f in found]
        within = statistics.median((f.high - f.low) / 2 / f.median for f in found)
        print(f"| {name} | {backend} | {mode} -> {ran} | {method} | {shown} | {check.hits} of {check.pairs} "
              f"({check.expected:.1f}; p = {check.p_value:.2f}) | {max(medians) / min(medians):.2f} | {within:.0%} | "
              f"{pooled.median:.0f} [{low:.0f}, {high:.0f}] |")
    if cells:
        check = aa_check(cells)
        print(f"\nA start's median inside another start's interval: {check.hits} of {check.pairs} "
              f"({check.hits / check.pairs:.0%}); if starts did not differ (every round of a cell exchangeable, "
              f"`rounds.inside_probability`): {check.expected:.1f} ({check.expected / check.pairs:.0%}). So few hits or "
              f"fewer with the rounds shuffled among each cell's starts: p = {check.p_value:.2f} (10,000 shuffles).")


def _default_rounds(raw: dict) -> bool:
    """Measured with the default rounds: 5, each at least 5 s."""
    return len(raw["rounds"]) == 5 and min(r["seconds"] for r in raw["rounds"]) >= 5.0


def half_widths(rows: list[Cell]) -> None:
    """The tokens/s interval's half-width over its median, by model, for offline cells with the default rounds."""
    print("\n## Half-width by model (offline cells with the default rounds: half of the 93.75 % interval over the median)\n")
    print("| model | cells | median | range | within 5 % |")
    print("|---|---|---|---|---|")
    by_model: dict[str, list[float]] = {}
    for cell in rows:
        raw = cell.result.raw
        if cell.job.concurrency is None and _default_rounds(raw):
            found = median_interval(_speeds(raw))
            by_model.setdefault(Path(cell.job.spec["model"]).name, []).append((found.high - found.low) / 2 / found.median)
    for model, halves in sorted(by_model.items()):
        print(f"| {model} | {len(halves)} | {statistics.median(halves):.1%} | {min(halves):.1%}-{max(halves):.1%} | "
              f"{sum(h <= 0.05 for h in halves)} of {len(halves)} |")


def time_spent(rows: list[Cell]) -> None:
    """Where a cell's wall time went, for the cells measured with the default rounds (5 x at least 5 s)."""
    print("\n## Where the time goes (cells with the default rounds; seconds, medians over the cells)\n")
    print("| cells | before the engine (Python, imports) | engine start | warm-up | measured | wall | efficiency |")
    print("|---|---|---|---|---|---|---|")
    default = [raw for raw in (cell.result.raw for cell in rows) if _default_rounds(raw)]
    if not default:
        return
    parts = {
        "before": [r["wall_s"] - r["engine_start_s"] - r["warmup_s"] - r["generation_s"] for r in default],
        "engine": [r["engine_start_s"] for r in default],
        "warmup": [r["warmup_s"] for r in default],
        "measured": [r["generation_s"] for r in default],
        "wall": [r["wall_s"] for r in default],
        "eff": [_efficiency(r) for r in default],
    }
    mid = {k: statistics.median(v) for k, v in parts.items()}
    print(f"| {len(default)} | {mid['before']:.1f} | {mid['engine']:.1f} | {mid['warmup']:.1f} | {mid['measured']:.1f} | "
          f"{mid['wall']:.1f} | {mid['eff']:.0%} (range {min(parts['eff']):.0%}-{max(parts['eff']):.0%}) |")


def _maybe(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _speeds(raw: dict) -> list[float]:
    """Tokens/s of each measured round of a cell's result."""
    return [r["output_tokens"] / r["seconds"] for r in raw["rounds"]]


def _speed(raw: dict) -> CellSpeed:
    found = median_interval(_speeds(raw))
    return pool_repeats([RepeatSpeed(found.median, found.low, found.high, found.n)])


def _bounds(speed: CellSpeed) -> tuple[float, float]:
    half = Z_95 * (speed.se_log or 0.0)
    return speed.median * math.exp(-half), speed.median * math.exp(half)


def peer(folders: list[tuple[str, Path]], rows: list[Cell], serve_rows: list[Cell]) -> None:
    """Each ``throughput-*`` folder's runs (the first discarded) beside the cell of the same backend in its
    batch's peer sweep (``h200-peer-*``); each ``serve-*`` folder's counters beside the serving cell's,
    per request."""
    print("\n## Peer check: `vllm bench throughput` (5 runs after 1 discarded, each a new process) beside the cell\n")
    print("| batch | backend | cell: median of 5 rounds [interval] | its half-width | peer: median (min-max) of 5 runs | "
          "peer's half-range | peer median inside the cell's interval |")
    print("|---|---|---|---|---|---|---|")
    for batch, folder in folders:
        for check in sorted(folder.glob("throughput-*")):
            spec = json.loads((check / "cell.json").read_text())
            runs = [json.loads(p.read_text()) for p in sorted(check.glob("throughput-*.json"))]
            speeds = [r["num_requests"] * r["draftbench"]["output_len"] / r["elapsed_time"]
                      for r in runs if not r["draftbench"]["discarded"]]
            mid = statistics.median(speeds)
            raw = next((cell.result.raw for cell in rows
                        if cell.batch == batch and cell.sweep.startswith("h200-peer") and cell.job.backend == spec["backend"]), None)
            if raw is None:
                raise SystemExit(f"--peer {batch}={folder}: batch {batch} holds no h200-peer cell on {spec['backend']} for {check.name} "
                                 "to stand beside (give that batch's database with --more)")
            found = median_interval(_speeds(raw))
            print(f"| {batch} | {spec['backend']} | {found.median:.0f} [{found.low:.0f}, {found.high:.0f}] {found.confidence:.1%} | "
                  f"{(found.high - found.low) / 2 / found.median:.0%} | {mid:.0f} ({min(speeds):.0f}-{max(speeds):.0f}) | "
                  f"{(max(speeds) - min(speeds)) / 2 / mid:.0%} | {'yes' if found.low <= mid <= found.high else 'no'} |")
    print("\n## Peer check: `vllm bench serve` against the same server config (spec-decode counters per request)\n")
    print("| batch | backend | clients | source | requests | drafts / request | draft tokens / request | accepted / request |")
    print("|---|---|---|---|---|---|---|---|")
    for batch, folder in folders:
        for check in sorted(folder.glob("serve-*")):
            spec = json.loads((check / "cell.json").read_text())
            saved = json.loads((check / "serve.json").read_text())
            scraped = json.loads((check / "serve-metrics.json").read_text())["delta"]
            n = saved["completed"]
            tool = (saved["spec_decode_num_drafts"], saved["spec_decode_draft_tokens"], saved["spec_decode_accepted_tokens"])
            mine = (scraped["num_drafts"], scraped["num_draft_tokens"], scraped["num_accepted_tokens"])
            cell = next((c.result for c in serve_rows
                         if c.sweep == "h200-serving" and c.job.backend == spec["backend"] and c.job.concurrency == spec["concurrency"]),
                        None)
            if cell is None:
                raise SystemExit(f"--peer {batch}={folder}: no h200-serving cell on {spec['backend']} at {spec['concurrency']} "
                                 f"clients for {check.name} to stand beside")
            stored = (cell.num_drafts, cell.num_draft_tokens, cell.num_accepted_tokens)
            for source, requests, counts in (("vllm bench serve (its file)", n, tool),
                                             ("the server's /metrics, read around it", n, mine),
                                             ("draftbench serving cell", cell.serving["completed"], stored)):
                print(f"| {batch} | {spec['backend']} | {spec['concurrency']} | {source} | {requests} | "
                      + " | ".join(f"{c / requests:.2f}" for c in counts) + " |")


def _efficiency(raw: dict) -> float:
    return sum(r["seconds"] for r in raw["rounds"]) / raw["wall_s"]


def two_gpus(batch: Batch) -> None:
    spans = batch.spans
    if len({worker for *_, worker in spans}) < 2:
        return
    wall = (max(b for _, b, _ in spans) - min(a for a, _, _ in spans)).total_seconds()
    busy = sum((b - a).total_seconds() for a, b, _ in spans)
    print(f"\n## Two GPUs ({batch.path.name})\n\n{len(spans)} jobs on {len({w for *_, w in spans})} workers: wall {wall:.0f} s; the jobs' "
          f"summed time {busy:.0f} s (what one GPU would take back to back), half of it {busy / 2:.0f} s: "
          f"wall / half = {wall / (busy / 2):.2f}")


if __name__ == "__main__":
    main()
