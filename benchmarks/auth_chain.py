"""What authentication costs a worker call, on SQLite and PostgreSQL, for chains of several depths.

Every worker call (claim, heartbeat, log, complete) authenticates its credential. For each depth
the script builds a chain through the API (bootstrap -> admin tokens -> a host token -> a worker's
credential), then times ``app.auth.service.authenticate`` in a fresh session per call, as a request
does, and the worker's heartbeat end to end through the app (TestClient). It prints the median and
p95 of each, in milliseconds.

    .venv/bin/python -m benchmarks.auth_chain --calls 2000 --pg postgresql://postgres@127.0.0.1:5432/test
"""

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable

from fastapi.testclient import TestClient

from app.api.main import create_app
from app.auth import service as tokens
from app.config import Settings
from tests import scratchdb

BOOTSTRAP = "bench-token"
AUTH = {"Authorization": f"Bearer {BOOTSTRAP}"}
DEPTHS = (1, 3, 8)  # a credential the bootstrap token registered; admin -> host -> credential; the longest chain


def _credential(client: TestClient, depth: int) -> tuple[int, str]:
    """A worker whose credential is ``depth`` tokens from its root (1: the bootstrap token registered it)."""
    issuer = AUTH
    for level in range(1, depth):
        scopes = ["worker"] if level == depth - 1 else ["admin"]
        made = client.post("/api/v1/tokens", json={"name": f"d{depth}-{level}", "scopes": scopes}, headers=issuer)
        issuer = {"Authorization": f"Bearer {made.raise_for_status().json()['secret']}"}
    body = {"name": f"w{depth}", "host": "h", "gpu_kinds": ["cpu"], "builds": [{"label": "b"}]}
    worker = client.post("/api/v1/workers", json=body, headers=issuer).raise_for_status().json()
    return worker["id"], worker["credential"]


def _times(calls: int, one: Callable[[], object]) -> list[float]:
    for _ in range(min(50, calls)):
        one()
    spent = []
    for _ in range(calls):
        started = time.perf_counter()
        one()
        spent.append((time.perf_counter() - started) * 1000)
    return spent


def _row(label: str, spent: list[float]) -> str:
    p95 = statistics.quantiles(spent, n=20)[-1]
    return f"{label:<40} {statistics.median(spent):8.3f} {p95:8.3f}"


def bench(url: str, calls: int) -> None:
    # The rate limit is off: the figures are of authentication, not of 429s.
    app = create_app(Settings(database_url=url, token=BOOTSTRAP, rate_limit_per_minute=0))
    with TestClient(app) as client:
        for depth in DEPTHS:
            worker_id, secret = _credential(client, depth)

            def authenticate(secret: str = secret) -> None:
                with app.state.sessionmaker() as session:
                    assert tokens.authenticate(session=session, secret=secret, bootstrap=BOOTSTRAP) is not None

            def heartbeat(worker_id: int = worker_id, secret: str = secret) -> None:
                client.post(f"/api/v1/workers/{worker_id}/heartbeat", json={"job_ids": []},
                            headers={"Authorization": f"Bearer {secret}"}).raise_for_status()

            print(_row(f"{url.split(':')[0]} depth {depth} authenticate", _times(calls, authenticate)))
            print(_row(f"{url.split(':')[0]} depth {depth} heartbeat (HTTP)", _times(calls // 4, heartbeat)))
    app.state.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--pg", help="a PostgreSQL admin URL: a scratch database is made there and dropped")
    args = parser.parse_args()
    print(f"{'':<40} {'median':>8} {'p95':>8}  (ms)")
    with tempfile.TemporaryDirectory() as folder:
        bench(f"sqlite:///{folder}/bench.db", args.calls)
    if args.pg:
        with scratchdb.postgres(args.pg) as url:
            bench(url, args.calls)


if __name__ == "__main__":
    main()
