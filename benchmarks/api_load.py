"""API latency under load: 50 concurrent clients submit sweeps, read results and open dashboards.

The service runs as it does in production, ``draftbench serve --processes N`` (2 by default, as
docker-compose.yml runs it), over a fresh PostgreSQL database (``--pg``, the default) or a SQLite file
(``--sqlite``). The script first seeds it through the API: a fake worker registers a build (with the
bootstrap token) and acts from then on with the credential the registration returned, a few sweeps (speculative cells and baselines, several
repeats) are submitted and the fake worker claims and completes every job with a plausible result.
Each load client then gets its own ``submit`` token (created through ``/api/v1/tokens``, as CI jobs
would hold theirs), so the per-token rate limit applies as deployed.

Every sweep's workload names ``--dataset``: by default ``draftbench``, the prompt set shipped with
the project (``runners/prompts/draftbench.jsonl``); ``random`` or a file path work too. No cell
runs here, the fake worker only reports results, so the dataset merely has to pass the service's checks.

Then ``--clients`` clients (asyncio + httpx, one keep-alive connection each) loop for ``--seconds``
over a weighted mix of requests:

    submit         POST /api/v1/sweeps                   a small sweep (2 jobs)
    results        GET  /api/v1/results?sweep_id=ID      a seeded sweep's results with derived metrics
    sweep          GET  /api/v1/sweeps/ID                one sweep with every cell
    sweeps         GET  /api/v1/sweeps                   the sweep list
    page:sweep     GET  /sweeps/ID                       the sweep's dashboard page (table and chart)
    page:index     GET  /                                the dashboard's sweep list

Each client waits ``--think-ms`` (uniformly 0..2x, mean as given) between its requests. The default,
1 s, is 50 busy users and CI jobs at once (about 45 requests/s, some 4 million a day), the load the
latency aim is for. 0 makes every client send back to back, which measures throughput: latency is
then queueing, clients / throughput by Little's law, whatever the service does per request. Every loop is
bounded by time and by ``--max-requests`` per client, and all traffic goes to 127.0.0.1. An error is a
transport failure or any status other than the expected one.

The first ``--warmup-s`` seconds are the same loop, reported on a line of their own and left out of
the table: they hold each service process's one-time work (its first connections, compiled SQL and
templates, each seeded sweep's chart) under all clients arriving at once, which is the start-up
cost, not the steady state the latency aim is about. Their errors still count in the exit status.

    .venv/bin/python -m benchmarks.api_load                       # PostgreSQL, 50 clients, 10 + 60 s
    .venv/bin/python -m benchmarks.api_load --think-ms 0            # saturated: requests/s
    .venv/bin/python -m benchmarks.api_load --sqlite --seconds 20
"""

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests import scratchdb

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = "draftbench"  # the prompts shipped in runners/prompts/draftbench.jsonl
TOKEN = "api-load-bootstrap-token"
BUILD = "load-build"
HOST = "127.0.0.1"

# kind -> (weight, is a read)
MIX = {
    "submit": (10, False),
    "results": (30, True),
    "sweep": (20, True),
    "sweeps": (10, True),
    "page:sweep": (15, True),
    "page:index": (15, True),
}


# --- the service -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


@contextmanager
def service(database_url: str, *, processes: int, rate_limit: int | None) -> Iterator[str]:
    """``draftbench serve`` in its own process group; yields its base URL."""
    port = free_port()
    env = os.environ | {"DRAFTBENCH_DATABASE_URL": database_url, "DRAFTBENCH_TOKEN": TOKEN}
    if rate_limit is not None:
        env["DRAFTBENCH_RATE_LIMIT_PER_MINUTE"] = str(rate_limit)
    log = tempfile.NamedTemporaryFile(prefix="draftbench-load-service-", suffix=".log", delete=False)  # noqa: SIM115
    # `draftbench serve`, as docker-compose.yml runs it: access log on, uvicorn's own keep-alive.
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--host", HOST, "--port", str(port), "--processes", str(processes)],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/api/v1/sweeps", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the service did not start; its log:\n{Path(log.name).read_text()[-4000:]}") from None
                time.sleep(0.2)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        errors = [line for line in Path(log.name).read_text().splitlines() if "Traceback" in line or "ERROR" in line]
        if errors:
            print(f"service log {log.name}: {len(errors)} error lines, first: {errors[0]}", file=sys.stderr)
        else:
            os.unlink(log.name)


# --- seeding through the API -------------------------------------------------------------------


def workload(dataset: str) -> dict:
    """The workload of every sweep: a built-in dataset name (``draftbench``, ``random``) or a path."""
    extra = {"input_len": 128} if dataset == "random" else {}
    return {"dataset": dataset, "num_prompts": 8, "max_tokens": 64, **extra}


def sweep_body(dataset: str, *, name: str, repeats: int, baseline: bool, n_spec: int) -> dict:
    speculative = [
        {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
        {"method": "draft_model", "model": "/models/draft", "num_speculative_tokens": 3},
    ][:n_spec]
    return {
        "name": name, "build": BUILD, "model": "/models/target",
        "workload": workload(dataset),
        "speculative": speculative, "backends": ["CPU_ATTN"], "graph_modes": ["NONE"],
        "gpu_kinds": ["cpu"], "repeats": repeats, "baseline": baseline, "tags": ["api-load"],
    }


def fake_result(rng: random.Random, speculative: bool) -> dict:
    """A plausible cell result: 8 requests of 64 tokens, consistent spec counters when the cell speculated."""
    tps = rng.uniform(80, 160)
    result = {
        "engine_start_s": 12.0, "warmup_s": 1.0, "generation_s": 512 / tps, "num_requests": 8, "prompt_tokens": 400,
        "output_tokens": 512, "tokens_per_s": tps, "requests_per_s": tps / 64, "spec_decode": None,
        "requests": [{"num_output_tokens": 64, "fingerprint": f"{i:016x}"} for i in range(8)],
        "output_fingerprint": "f" * 16, "versions": {"vllm": "0.32.0", "gpu_name": "CPU"},
    }
    if speculative:
        drafts = [rng.randint(20, 30) for _ in result["requests"]]
        total = sum(drafts)
        positions = [int(total * rate) for rate in (rng.uniform(0.6, 0.8), rng.uniform(0.4, 0.6), rng.uniform(0.2, 0.4))]
        accepted = sum(positions)
        for request, d in zip(result["requests"], drafts, strict=True):
            request |= {"num_drafts": d, "num_accepted_tokens": min(3 * d, round(accepted * d / total * rng.uniform(0.8, 1.2)))}
        result["spec_decode"] = {"num_drafts": total, "num_draft_tokens": 3 * total, "num_accepted_tokens": accepted,
                          "accepted_per_position": positions}
    return result


def seed(url: str, dataset: str, *, sweeps: int, repeats: int, clients: int) -> tuple[list[int], list[str]]:
    """Seeded sweep ids (every job succeeded) and one submit token per client."""
    admin = {"Authorization": f"Bearer {TOKEN}"}
    rng = random.Random(0)
    with httpx.Client(base_url=url, headers=admin, timeout=60) as http:
        worker = {"name": "load-seed", "host": "load", "gpu_kinds": ["cpu"], "builds": [{"label": BUILD}]}
        registered = http.post("/api/v1/workers", json=worker).raise_for_status().json()
        worker_id = registered["id"]
        # Claim and complete take the worker's own credential, not the token that registered it.
        as_worker = {"Authorization": f"Bearer {registered['credential']}"}
        ids = []
        for i in range(sweeps):
            body = sweep_body(dataset, name=f"seed-{i}", repeats=repeats, baseline=True, n_spec=2)
            ids.append(http.post("/api/v1/sweeps", json=body).raise_for_status().json()["id"])
        while True:
            response = http.post(f"/api/v1/workers/{worker_id}/claim", headers=as_worker).raise_for_status()
            if response.status_code == 204:
                break
            job = response.json()
            outcome = {"result": fake_result(rng, job["spec"]["speculative"] is not None),
                       "resolved": {"resolved_backend": "CPU_ATTN", "resolved_graph_mode": "NONE"},
                       "exit_code": 0, "duration_s": 20.0}
            http.post(f"/api/v1/jobs/{job['job_id']}/complete", json={"outcome": outcome},
                      headers=as_worker).raise_for_status()
        tokens = []
        for i in range(clients):
            created = http.post("/api/v1/tokens", json={"name": f"load-client-{i}", "scopes": ["submit"]})
            tokens.append(created.raise_for_status().json()["secret"])
    return ids, tokens


# --- the load ----------------------------------------------------------------------------------


@dataclass
class Samples:
    ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter = field(default_factory=Counter)
    error_kinds: Counter = field(default_factory=Counter)


async def client_loop(
    index: int, url: str, token: str, seeded: list[int], dataset: str, *, measure_from: float, end: float,
    max_requests: int, think_ms: float, weights: dict[str, int], warmup: Samples, samples: Samples,
) -> None:
    rng = random.Random(index)
    kinds = [k for k in MIX if weights[k] > 0]
    chances = [weights[k] for k in kinds]
    headers = {"Authorization": f"Bearer {token}"}
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as http:
        for n in range(max_requests):
            if time.monotonic() >= end:
                break
            kind = rng.choices(kinds, chances)[0]
            sweep_id = rng.choice(seeded)
            started = time.perf_counter()
            try:
                if kind == "submit":
                    body = sweep_body(dataset, name=f"load-{index}-{n}", repeats=1, baseline=False, n_spec=2)
                    response = await http.post("/api/v1/sweeps", json=body, headers=headers)
                    expected = 201
                else:
                    path, params = {
                        "results": ("/api/v1/results", {"sweep_id": sweep_id}),
                        "sweep": (f"/api/v1/sweeps/{sweep_id}", None),
                        "sweeps": ("/api/v1/sweeps", None),
                        "page:sweep": (f"/sweeps/{sweep_id}", None),
                        "page:index": ("/", None),
                    }[kind]
                    response = await http.get(path, params=params)
                    expected = 200
                ok = response.status_code == expected
                failure = None if ok else f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                ok, failure = False, type(exc).__name__
            into = samples if time.monotonic() >= measure_from else warmup
            into.ms[kind].append((time.perf_counter() - started) * 1000)
            if not ok:
                into.errors[kind] += 1
                into.error_kinds[f"{kind}: {failure}"] += 1
            if think_ms:
                await asyncio.sleep(rng.uniform(0, 2 * think_ms) / 1000)


async def drive(url: str, tokens: list[str], seeded: list[int], dataset: str, *, warmup_s: float, seconds: float,
                max_requests: int, think_ms: float, weights: dict[str, int]) -> tuple[Samples, Samples, float]:
    """Samples of the warm-up and of the measured window, and the measured window's length."""
    warmup, samples = Samples(), Samples()
    measure_from = time.monotonic() + warmup_s
    end = measure_from + seconds
    await asyncio.gather(*(
        client_loop(i, url, token, seeded, dataset, measure_from=measure_from, end=end, max_requests=max_requests,
                    think_ms=think_ms, weights=weights, warmup=warmup, samples=samples)
        for i, token in enumerate(tokens)
    ))
    return warmup, samples, time.monotonic() - measure_from


# --- output ------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest rank: the p99 is a request that happened."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def table(samples: Samples, wall: float) -> str:
    header = ("request", "count", "errors", "p50 ms", "p99 ms", "max ms")

    def row(name: str, values: list[float], errors: int) -> tuple[str, ...]:
        return (name, str(len(values)), str(errors), f"{statistics.median(values):.1f}" if values else "-",
                f"{percentile(values, 99):.1f}", f"{max(values):.1f}" if values else "-")

    rows = [header] + [row(kind, samples.ms[kind], samples.errors[kind]) for kind in MIX if samples.ms[kind]]
    reads = [ms for kind in MIX if MIX[kind][1] for ms in samples.ms[kind]]
    writes = [ms for kind in MIX if not MIX[kind][1] for ms in samples.ms[kind]]
    every = reads + writes
    rows.append(row("all reads", reads, sum(samples.errors[k] for k in MIX if MIX[k][1])))
    rows.append(row("all", every, sum(samples.errors.values())))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 2, "-" * len(lines[0]))
    lines.append("")
    lines.append(f"{len(every)} requests in {wall:.1f} s: {len(every) / wall:.0f} requests/s")
    for what, n in samples.error_kinds.most_common(10):
        lines.append(f"error: {what} x{n}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--pg", default="postgresql://postgres@127.0.0.1:5432/test",
                       help="server (and an existing database to connect to) where a fresh database is made")
    where.add_argument("--sqlite", action="store_true", help="a temporary SQLite file instead of PostgreSQL")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window, after the warm-up")
    parser.add_argument("--warmup-s", type=float, default=10.0, help="load sent before the measured window")
    parser.add_argument("--max-requests", type=int, default=100_000, help="per client")
    parser.add_argument("--think-ms", type=float, default=1000.0,
                        help="mean pause of a client between requests (0: back to back, a throughput test)")
    parser.add_argument("--service-processes", type=int, default=2, help="draftbench serve --processes")
    parser.add_argument("--rate-limit", type=int, default=None,
                        help="DRAFTBENCH_RATE_LIMIT_PER_MINUTE for the service (default: the service's own)")
    parser.add_argument("--weight", action="append", default=[], metavar="KIND=W",
                        help=f"change the mix (kinds: {', '.join(MIX)}); W=0 leaves a kind out")
    parser.add_argument("--seed-sweeps", type=int, default=5)
    parser.add_argument("--seed-repeats", type=int, default=8, help="each seed sweep has 3 cells (2 + baseline)")
    parser.add_argument("--dataset", default=DEFAULT_DATASET,
                        help="workload.dataset of every sweep: 'draftbench' (the shipped prompts, default), "
                             "'random', or a file path the service accepts")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    weights = {kind: weight for kind, (weight, _) in MIX.items()}
    for item in args.weight:
        kind, _, value = item.partition("=")
        if kind not in MIX or not value.isdigit():
            raise SystemExit(f"--weight takes KIND=W with KIND one of {', '.join(MIX)}, got {item!r}")
        weights[kind] = int(value)
    if not any(weights.values()):
        raise SystemExit("every weight is 0: nothing to send")
    database = scratchdb.sqlite() if args.sqlite else scratchdb.postgres(args.pg)
    with database as db_url, service(db_url, processes=args.service_processes, rate_limit=args.rate_limit) as url:
        t = time.monotonic()
        seeded, tokens = seed(url, args.dataset, sweeps=args.seed_sweeps, repeats=args.seed_repeats, clients=args.clients)
        print(f"seeded {len(seeded)} sweeps of {3 * args.seed_repeats} results and {len(tokens)} tokens in "
              f"{time.monotonic() - t:.1f} s; {args.clients} clients for {args.warmup_s:.0f} + {args.seconds:.0f} s "
              f"(think {args.think_ms:.0f} ms) on {'SQLite' if args.sqlite else 'PostgreSQL'}, "
              f"{args.service_processes} service process(es); mix {weights}")
        warmup, samples, wall = asyncio.run(drive(url, tokens, seeded, args.dataset, warmup_s=args.warmup_s,
                                                  seconds=args.seconds, max_requests=args.max_requests,
                                                  think_ms=args.think_ms, weights=weights))
    every = [ms for values in warmup.ms.values() for ms in values]
    if every:
        print(f"warm-up ({args.warmup_s:.0f} s, not in the table): {len(every)} requests, "
              f"{sum(warmup.errors.values())} errors, p50 {statistics.median(every):.1f} ms, "
              f"p99 {percentile(every, 99):.1f} ms, max {max(every):.1f} ms")
    print(table(samples, wall))
    return 1 if sum(samples.errors.values()) + sum(warmup.errors.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
