"""Dashboard pages over more than 100,000 stored results: p50 and p95 per view, on SQLite and PostgreSQL.

The history is written straight into a fresh database (bulk inserts, not the API: seeding 100k results
through the worker protocol would take hours): ``--builds`` builds, each with ``--sweeps`` sweeps of
3 GPU kinds x 3 backends x 4 graph modes x 3 methods, ``--repeats`` repeats each, five rounds per result
with an order-statistic interval, a capture bug in one build in eight (acceptance 0.91 against 1.00
eager), the B200's draft_model cells calibration cells (synthetic acceptance asked at 0.8/0.5/0.3), 5 % crashed
cells spread over a dozen signatures with logs, the newest crash of ``--big-logs`` of
them with a log of ``--log-mib`` MiB (DRAFTBENCH_MAX_LOG_BYTES by default). Then each view is requested
``--requests`` times in one process (TestClient, no network), the first request of each left out: it
holds the one-time work (compiled SQL and templates, the first drawing of a figure), not the steady state;
it is printed apart (``first``): for the index it also holds reading every cell for the open alerts, which
the first view or /metrics scrape after each finished job repeats.

A page's figures are images of its own URL (``format=svg&figure=N``), drawn only when asked: after a view's page,
each of its figures is requested ``--figure-rounds`` + 1 times, as a browser loads them, and timed apart
(``VIEW: N figures``): p50 and p95 over every figure's later requests, ``first`` the slowest figure's first request
(which draws it). A reader's first view of a page is its page's ``first`` and then its figures' (``VIEW: first view,
all figures``: the page's first and every figure's first draw, one after another, as the service's threads share one
interpreter; a browser asks for the images in view first, so a reader sees the top of a long page sooner). Each
database is timed in a fresh process, so both pay the first drawing of each figure.

Seeding 100k results takes minutes: ``--keep DIR`` seeds once into a SQLite file and a PostgreSQL database named
in ``DIR/seeded.json`` and leaves them; a later run with the same ``--keep DIR`` (and the same ``--builds``,
``--sweeps`` and ``--repeats``) times them again without seeding, so code before and after a change can be timed in
turn on one history. Drop them with ``--drop DIR``.

    .venv/bin/python -m benchmarks.dashboard_load              # SQLite and PostgreSQL
    .venv/bin/python -m benchmarks.dashboard_load --sqlite-only --builds 10
    .venv/bin/python -m benchmarks.dashboard_load --keep /tmp/seeded --only fallback matrix
"""

import argparse
import hashlib
import html
import json
import multiprocessing
import os
import random
import re
import statistics
import time
import uuid
import zlib
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import psycopg
from fastapi.testclient import TestClient
from sqlalchemy import insert

from app import db
from app.alarms import service as alarms
from app.alerts import service as alerts
from app.analysis import request_acceptance
from app.analysis.acceptance import calibration_misses, per_position
from app.api.main import create_app
from app.config import Settings
from app.crashes.excerpt import excerpt
from app.models import Crash, CrashSignature, Job, JobLog, Result, Sweep, Worker
from app.noise import service as noise
from tests import scratchdb

GPUS = ["H200", "H100", "B200"]
BACKENDS = ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"]
MODES = ["NONE", "PIECEWISE", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
METHODS = ["draft_model", "dflash", "eagle3"]
CALIBRATION = {"gpu": "B200", "method": "draft_model", "rates": [0.8, 0.5, 0.3]}
# What a result of 32 requests over the shipped prompts' seven categories keeps of them (migration 0022), the same
# in every seeded result: its size, not its numbers, is what the pages pay for.
REQUESTS_KEPT = request_acceptance.summarise(
    SimpleNamespace(category=category, num_drafts=100, num_draft_tokens=300, num_accepted_tokens=180 + i,
                    accepted_per_position=[80, 60, 40 + i])
    for i, category in enumerate((["conversation", "translation", "summarization", "qa", "math_reasoning", "rag",
                                   "coding"] * 5)[:32])
).to_json()
VIEWS = {
    "index": "/",
    "fallback": "/fallback",
    "matrix": "/matrix",
    "matrix (one sweep)": "/matrix?sweep_id={sweep}&metric=tokens_per_s",
    "serving": "/serving",
    "serving (offline, per k)": "/serving?mode=offline",
    "alarms": "/alarms",
    "compare (two builds)": "/compare?base_build={old}&head_build={new}",
    "history (one cell)": "/history?gpu_kind=H200&method=dflash&backend=FLASHINFER&graph_mode=FULL_AND_PIECEWISE",
    "calibration": "/calibration",
    "crashes": "/crashes",
    "api alarms": "/api/v1/alarms",
    "sweep": "/sweeps/{sweep}",
    "noise": "/noise",
}


CRASH_LOG = "\n".join(f"INFO line {i}" for i in range(200)) + "\nRuntimeError: CUDA error: an illegal memory access was encountered\n"


def seed(url: str, *, builds: int, sweeps: int, repeats: int, big_logs: int = 0, log_mib: int = 32) -> tuple[int, dict]:
    """Write the history; return the number of results and the ids the views' links name."""
    db.upgrade(url)
    engine = db.make_engine(url)
    rng = random.Random(0)
    start = datetime(2026, 6, 1, tzinfo=UTC)
    results = job_id = 0
    signatures = [f"{i:064x}" for i in range(12)]
    with engine.begin() as conn:
        conn.execute(insert(Worker), [{"name": "bench", "host": "h", "gpu_kinds": GPUS, "gpu_count": 8,
                                       "builds": [], "last_heartbeat_at": datetime.now(UTC)}])
        conn.execute(insert(CrashSignature), [
            {"id": i + 1, "signature": s, "title": f"illegal memory access in kernel {i}", "kind": "cuda_illegal_memory_access",
             "exception_type": "RuntimeError", "message": f"CUDA error: an illegal memory access was encountered ({i})",
             "frames": ["vllm/v1/worker/gpu_model_runner.py:execute_model"], "first_seen": start, "last_seen": start, "count": 0}
            for i, s in enumerate(signatures)])
    sweep_id = 0
    for b in range(builds):
        build = f"vllm-0.{20 + b // 10}.{b % 10}"
        buggy = b % 8 == 5
        for s in range(sweeps):
            sweep_id += 1
            when = start + timedelta(hours=6 * (b * sweeps + s))
            jobs, rows, crashes, logs = [], [], [], []
            for gpu in GPUS:
                for backend in BACKENDS:
                    for mode in MODES:
                        for method in METHODS:
                            asked = CALIBRATION["rates"] if (gpu, method) == (CALIBRATION["gpu"], CALIBRATION["method"]) else None
                            speculative = {"method": method, "num_speculative_tokens": 3}
                            if asked:
                                speculative |= {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": asked}
                            config = {"model": "/m/target", "speculative": speculative,
                                      "workload": {"dataset": "draftbench", "num_prompts": 32}, "build": build,
                                      "gpu_kind": gpu, "backend": backend, "graph_mode": mode, "env": {}, "mode": "offline"}
                            for r in range(repeats):
                                job_id += 1
                                crashed = rng.random() < 0.05
                                jobs.append({"id": job_id, "sweep_id": sweep_id, "cell_index": 0, "repeat": r, "build": build,
                                             "gpu_kind": gpu, "backend": backend, "graph_mode": mode, "method": method,
                                             "config": config, "config_hash": hashlib.sha256(repr(config).encode()).hexdigest(),
                                             "state": "crashed" if crashed else "succeeded", "created_at": when,
                                             "started_at": when, "finished_at": when + timedelta(minutes=r)})
                                if crashed:
                                    crashes.append({"job_id": job_id, "signature_id": rng.randrange(12) + 1,
                                                    "kind": "cuda_illegal_memory_access", "message": "illegal memory access",
                                                    "excerpt": excerpt(CRASH_LOG, "RuntimeError"), "created_at": when})
                                    logs.append({"job_id": job_id, "compressed": zlib.compress(CRASH_LOG.encode()), "size": len(CRASH_LOG)})
                                    continue
                                down = backend == "FLASHINFER" and mode.startswith("FULL")
                                rate = 0.91 if buggy and backend == "FLASHINFER" and mode != "NONE" else 0.6 + 0.05 * METHODS.index(method)
                                tokens = 30_000
                                accepted = int(tokens * min(1.0, rate + rng.gauss(0, 0.005)))
                                speed = (3000 + 1000 * MODES.index(mode)) * (0.6 if down else 1.0) * rng.uniform(0.9, 1.1)
                                positions = _positions(accepted, tokens // 3)
                                kept = _rounds(speed, rng)
                                # As the service keeps them when it stores a result (migration 0021).
                                round_speeds, round_squares = noise.round_terms(kept)
                                rows.append({"job_id": job_id, "engine_start_s": 40.0, "generation_s": 10.0, "num_requests": 32,
                                             "output_tokens": 4096, "tokens_per_s": speed, "tokens_per_s_low": speed * 0.93,
                                             "tokens_per_s_high": speed * 1.06, "requests_per_s": 3.0, "rounds": 5,
                                             "num_drafts": tokens // 3, "num_draft_tokens": tokens, "num_accepted_tokens": accepted,
                                             "accepted_per_position": positions,
                                             # None as the service stores it for a cell that asked for no rates: JSON null.
                                             "expected_per_position": asked,
                                             "calibration_miss": any(calibration_misses(asked, per_position(positions, tokens // 3)))
                                             if asked else None,
                                             "acceptance_rate": accepted / tokens, "mean_acceptance_length": 1 + 3 * accepted / tokens,
                                             "output_fingerprint": "f" * 16, "resolved_backend": backend,
                                             "resolved_graph_mode": "PIECEWISE" if down else mode, "graph_downgraded": down,
                                             "draft_eager": down or mode == "NONE", "vllm_version": build[5:], "gpu_name": f"NVIDIA {gpu}",
                                             "versions": {}, "raw": {"rounds": kept}, "ran": {}, "created_at": when,
                                             "round_speeds": round_speeds, "round_squares": round_squares,
                                             "request_acceptance": REQUESTS_KEPT})
            results += len(rows)
            with engine.begin() as conn:
                conn.execute(insert(Sweep), [{"id": sweep_id, "name": f"nightly-{s}", "build": build, "spec": {}, "tags": [],
                                              "created_at": when}])
                conn.execute(insert(Job), jobs)
                conn.execute(insert(Result), rows)
                if crashes:
                    conn.execute(insert(Crash), crashes)
                    conn.execute(insert(JobLog), logs)
    if big_logs:
        _big_logs(engine, big_logs, log_mib, rng)
    # Bulk inserts skip the result-store path that judges the alarm and the schedule that stores the alerts: judge
    # every build once, as migration 0016 does, and store the alerts found, as migration 0018 does.
    with db.session_scope(db.make_sessionmaker(engine)) as session:
        alarms.refresh_all(session=session)
        alerts.store(session=session)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE crash_signatures SET count = "
                             "(SELECT count(*) FROM crashes WHERE crashes.signature_id = crash_signatures.id)")
        # The planner's statistics, as a database that grew over months has them (PostgreSQL's autovacuum
        # analyses on its own schedule; a bulk insert just before timing would leave it guessing).
        conn.exec_driver_sql("ANALYZE")
    engine.dispose()
    return results, linked(builds=builds, sweeps=sweeps)


def linked(*, builds: int, sweeps: int) -> dict:
    """The ids the views' links name in a history that ``seed`` wrote: the newest sweep, the two newest builds."""
    return {"sweep": builds * sweeps, "old": f"vllm-0.{20 + (builds - 2) // 10}.{(builds - 2) % 10}",
            "new": f"vllm-0.{20 + (builds - 1) // 10}.{(builds - 1) % 10}"}


def _big_logs(engine, groups: int, mib: int, rng: random.Random) -> None:
    """The newest crash of ``groups`` signatures gets a log of ``mib`` MiB that compresses as a real one
    does (about 2x: numbers and hex ids), its excerpt taken as the service takes it."""
    lines, size = [], 0
    while size < mib * 2**20:
        line = f"(EngineCore pid=4242) DEBUG step {len(lines)} block {rng.getrandbits(64):016x} t={rng.random():.6f}"
        lines.append(line)
        size += len(line) + 1
    text = "\n".join(lines) + "\n" + CRASH_LOG
    blob, shown = zlib.compress(text.encode(), 6), excerpt(text, "RuntimeError")
    with engine.begin() as conn:
        newest = conn.exec_driver_sql("SELECT signature_id, max(job_id) FROM crashes GROUP BY signature_id "
                                      f"ORDER BY signature_id LIMIT {int(groups)}").all()
        for _, job in newest:
            conn.execute(JobLog.__table__.update().where(JobLog.job_id == job).values(compressed=blob, size=len(text)))
            conn.execute(Crash.__table__.update().where(Crash.job_id == job).values(excerpt=shown))


def _rounds(speed: float, rng: random.Random) -> list[dict]:
    """Five rounds about ``speed``, as a result's raw copy keeps them (``/noise`` reads them)."""
    return [{"seconds": 2.0, "output_tokens": round(2.0 * speed * rng.uniform(0.97, 1.03)), "num_requests": 32}
            for _ in range(5)]


def _positions(accepted: int, drafts: int) -> list[int]:
    """Accepted at each of 3 positions: each at most the drafts, falling, summing to ``accepted``."""
    first = min(drafts, accepted)
    second = min(drafts, accepted - first)
    return [first, second, accepted - first - second]


IMG = re.compile(r'<img src="([^"]+)"')


def measure(url: str, names: dict, requests: int, figure_rounds: int,
            views: list[str] | None = None) -> dict[str, tuple[float | None, float | None, float]]:
    """(p50, p95, first) in ms per view (``views``, or all), and per view's figures (``VIEW: N figures``) where it
    draws any, with the page's first and all its figures' first draws summed (``VIEW: first view, all figures``: no
    p50 or p95)."""
    app = create_app(Settings(database_url=url, token="bench"))
    timings = {}
    with TestClient(app) as client:
        for view, path in VIEWS.items():
            if views and view not in views:
                continue
            path = path.format(**names)
            seconds, page = _timed(client, path, requests + 1)
            timings[view] = (*_p50_p95(seconds[1:]), seconds[0] * 1000)
            figures = [html.unescape(src) for src in IMG.findall(page)]
            if figures:
                each = [_timed(client, src, figure_rounds + 1)[0] for src in figures]
                later = [s for times in each for s in times[1:]]
                firsts = [times[0] * 1000 for times in each]
                timings[f"{view}: {len(figures)} figures"] = (*_p50_p95(later), max(firsts))
                timings[f"{view}: first view, all figures"] = (None, None, timings[view][2] + sum(firsts))
    app.state.engine.dispose()
    return timings


def _timed(client: TestClient, path: str, times: int) -> tuple[list[float], str]:
    """Seconds of each of ``times`` requests of ``path``, and the last answer's text."""
    seconds = []
    for _ in range(times):
        t0 = time.perf_counter()
        response = client.get(path)
        seconds.append(time.perf_counter() - t0)
        assert response.status_code == 200, (path, response.text[:300])
    return seconds, response.text


def _p50_p95(seconds: list[float]) -> tuple[float, float]:
    ordered = sorted(seconds)
    return statistics.median(ordered) * 1000, ordered[max(0, int(0.95 * len(ordered)) - 1)] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--builds", type=int, default=50)
    parser.add_argument("--sweeps", type=int, default=5, help="sweeps per build")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--requests", type=int, default=20, help="timed requests per view")
    parser.add_argument("--figure-rounds", type=int, default=3, help="timed requests per figure of a view")
    parser.add_argument("--big-logs", type=int, default=6, help="crash groups whose newest crash has a big log")
    parser.add_argument("--log-mib", type=int, default=32, help="the size of each big log")
    parser.add_argument("--sqlite-only", action="store_true")
    parser.add_argument("--pg", default=os.environ.get("DRAFTBENCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--only", nargs="+", choices=list(VIEWS), metavar="VIEW",
                        help=f"time these views alone (of: {', '.join(map(repr, VIEWS))})")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="seed once into databases named in DIR/seeded.json and keep them; later runs reuse them")
    parser.add_argument("--drop", type=Path, metavar="DIR", help="drop the databases kept in DIR, and nothing else")
    args = parser.parse_args()
    if args.drop:
        return _drop(args.drop, args.pg)
    backends = [("SQLite", "sqlite")] + ([] if args.sqlite_only else [("PostgreSQL", "postgresql")])
    table = {}
    for name, kind in backends:
        with _database(kind, args.pg, args.keep) as (url, fresh):
            if fresh:
                t0 = time.perf_counter()
                count, names = seed(url, builds=args.builds, sweeps=args.sweeps, repeats=args.repeats,
                                    big_logs=args.big_logs, log_mib=args.log_mib)
                print(f"{name}: {count:,} results in {time.perf_counter() - t0:.0f} s", flush=True)
            else:
                names = linked(builds=args.builds, sweeps=args.sweeps)
                print(f"{name}: the history kept in {args.keep}", flush=True)
            # A fresh process per database: its first requests pay what a new service process pays (nothing drawn or
            # read before), whichever database was timed first.
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as fresh:
                table[name] = fresh.submit(measure, url, names, args.requests, args.figure_rounds, args.only).result()
    # "first": the request left out, with the one-time work; for the index it is also the read of every cell that
    # the open alerts need, which a page view or /metrics scrape repeats once after each finished job.
    rows = list(dict.fromkeys(view for timings in table.values() for view in timings))
    print(f"\n{'view':<45}" + "".join(f"{n + ' p50':>16}{n + ' p95':>16}{n + ' first':>18}" for n in table))
    for view in rows:
        print(f"{view:<45}" + "".join("".join(_ms(ms, width) for ms, width in zip(table[n][view], (16, 16, 18), strict=True))
                                      if view in table[n] else f"{'':>50}" for n in table))


def _ms(value: float | None, width: int) -> str:
    return f"{value:>{width - 3}.0f} ms" if value is not None else " " * width


@contextmanager
def _database(kind: str, pg: str, keep: Path | None):
    """(URL, whether it is empty) of a throwaway database, or with ``keep`` of the one kept there (made and left)."""
    if keep is None:
        with (scratchdb.sqlite() if kind == "sqlite" else scratchdb.postgres(pg)) as url:
            yield url, True
        return
    kept = keep / "seeded.json"
    urls = json.loads(kept.read_text()) if kept.exists() else {}
    if kind in urls:
        yield urls[kind], False
        return
    keep.mkdir(parents=True, exist_ok=True)
    if kind == "sqlite":
        for name in ("draftbench.db", "draftbench.db-wal", "draftbench.db-shm"):
            (keep / name).unlink(missing_ok=True)  # what a run stopped while seeding left
        url = f"sqlite:///{(keep / 'draftbench.db').resolve()}"
    else:
        name = f"draftbench_kept_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = f"{pg.rsplit('/', 1)[0].replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"
    yield url, True
    # Named only once seeded whole: a run stopped while seeding seeds afresh next time.
    kept.write_text(json.dumps(urls | {kind: url}))


def _drop(keep: Path, pg: str) -> None:
    kept = keep / "seeded.json"
    urls = json.loads(kept.read_text()) if kept.exists() else {}
    if "postgresql" in urls:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{urls["postgresql"].rsplit("/", 1)[1]}" WITH (FORCE)')
    for name in ("seeded.json", "draftbench.db", "draftbench.db-wal", "draftbench.db-shm"):
        (keep / name).unlink(missing_ok=True)


if __name__ == "__main__":
    main()
