"""Stand-ins, for the tests only, for what issue 22's paired verdicts add elsewhere (the lead's branch), until they
land: the look's spending function ``app.analysis.sequential.look_alpha``, and each compare row's
``tokens_per_s_call`` with the route's ``alpha`` query parameter. Each steps aside once the real one exists: then
this module can go, and the tests run ``python -m app.cli`` and ``tests.live.serve`` as they are.

- ``python -m tests.ci.stand_in ARGS`` runs ``draftbench ARGS``, with ``look_alpha`` spending linearly
  (``alpha x (share now - share before)``, which sums to ``alpha`` over any looks) where the checkout has none.
- ``prepare(app)`` (for ``tests.live.serve``) adds a middleware to ``GET /api/v1/compare``: ``alpha`` is taken off
  the query where the route does not declare it, and each row without a ``tokens_per_s_call`` gets one from its
  pairs' ``d_i = ln(head_i / base_i)``: ``ratio = exp(mean d)``, interval ``exp(mean d +- t_{n-1, 1-alpha/2} s/sqrt n)``,
  ``detectable = exp((t_{n-1, 1-alpha/2} + t_{n-1, 0.8}) s/sqrt n) - 1``; ``worse`` or ``better`` when the interval
  excludes 1 and the ratio moved 5 %, ``undecided`` when it moved but the interval holds 1, else ``unchanged``;
  ``undecided`` without a detectable below two pairs.
"""

import importlib.util
import json
import math
import sys
import types
from urllib.parse import parse_qsl, urlencode

from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import select

from app.analysis.noise import ALPHA, POWER, t_quantile
from app.analysis.verdicts import DEFAULT_THRESHOLD
from app.models import Job, Result

SEQUENTIAL = "app.analysis.sequential"


def look_alpha(spent_before: float, spent_now: float, *, alpha: float) -> float:
    return alpha * (spent_now - spent_before)


def prepare(app: FastAPI) -> None:
    declared = app.openapi()["paths"]["/api/v1/compare"]["get"]["parameters"]
    takes_alpha = any(param["name"] == "alpha" for param in declared)

    @app.middleware("http")
    async def paired_calls(request: Request, call_next):
        if request.url.path != "/api/v1/compare":
            return await call_next(request)
        query = parse_qsl(request.scope["query_string"].decode())
        alpha = float(dict(query).get("alpha", ALPHA))
        if not takes_alpha:
            request.scope["query_string"] = urlencode([(k, v) for k, v in query if k != "alpha"]).encode()
        response = await call_next(request)
        body = b"".join([chunk async for chunk in response.body_iterator])
        if response.status_code == 200:
            # Off the event loop, as the routes read: a SQLite transaction may wait on another's lock.
            body = await run_in_threadpool(_with_calls, app, body, alpha)
        headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
        return Response(body, status_code=response.status_code, headers=headers)


def _with_calls(app: FastAPI, body: bytes, alpha: float) -> bytes:
    answer = json.loads(body)
    with app.state.sessionmaker() as session:
        for row in answer["changes"]:
            if "tokens_per_s_call" not in row:
                row["tokens_per_s_call"] = _call(session, row, alpha)
    return json.dumps(answer).encode()


def _call(session, row: dict, alpha: float) -> dict:
    ids = row["base"]["job_ids"] + row["head"]["job_ids"]
    speeds = session.execute(
        select(Job.sweep_id, Job.pair_id, Result.tokens_per_s).join(Result, Result.job_id == Job.id).where(Job.id.in_(ids))
    ).all()
    head_sweep = row["head"]["sweep_ids"][0]
    sides: dict[str, dict[bool, float]] = {}
    for sweep_id, pair_id, speed in speeds:
        if pair_id is not None:
            sides.setdefault(pair_id, {})[sweep_id == head_sweep] = speed
    d = [math.log(pair[True] / pair[False]) for pair in sides.values() if len(pair) == 2]
    base_starts = sum(1 for sweep_id, _, _ in speeds if sweep_id != head_sweep)
    call = {"rule": "paired", "base_starts": base_starts, "head_starts": len(speeds) - base_starts, "pairs": len(d),
            "confidence": 1 - alpha}
    if len(d) < 2:
        ratio = math.exp(sum(d) / len(d)) if d else 1.0
        return call | {"change": "undecided", "ratio": ratio, "low": None, "high": None, "detectable": None}
    n = len(d)
    mean = sum(d) / n
    se = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1) / n)
    t = t_quantile(1 - alpha / 2, n - 1)
    low, high = math.exp(mean - t * se), math.exp(mean + t * se)
    moved = abs(math.exp(mean) - 1) >= DEFAULT_THRESHOLD
    change = ("undecided" if low <= 1 <= high else "better" if mean > 0 else "worse") if moved else "unchanged"
    detectable = math.exp((t + t_quantile(POWER, n - 1)) * se) - 1
    return call | {"change": change, "ratio": math.exp(mean), "low": low, "high": high, "detectable": detectable}


def main() -> None:
    if importlib.util.find_spec(SEQUENTIAL) is None:
        module = types.ModuleType(SEQUENTIAL)
        module.look_alpha = look_alpha
        sys.modules[SEQUENTIAL] = module
    from app.cli.main import main as draftbench

    draftbench()


if __name__ == "__main__":
    main()
