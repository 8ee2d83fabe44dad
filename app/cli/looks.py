"""``draftbench ci --budget-gpu-minutes N [--mde 5%]``: after the first pass of a paired base and head, more pairs of
starts for the cells whose tokens/s is still open, look after look, until every cell is decided, the budget is
spent or not one more pair fits. What is decided, how many pairs a cell gets and the comparison the looks add up to
are app.ci.looks; this module asks the service.

Each look reads ``GET /api/v1/compare`` at ``alpha = look_alpha(share before, share now)``
(app.analysis.sequential), the shares being the device time both sweeps used (``gpu_seconds``) over the budget,
capped at 1. More pairs are asked of ``POST /api/v1/sweeps/{head}/more``; a pair is costed at twice the mean device
seconds per start so far.
"""

import sys
from typing import Any

from rich.console import Console

from app.analysis.sequential import look_alpha
from app.analysis.verdicts import SPEED_ALPHA
from app.ci import looks
from app.cli import compare
from app.cli.errors import CliError
from app.cli.http import Api
from app.cli.sweeps import follow
from app.schemas.compare import Comparison, SpeedCall

# Why the looks stopped, as the comment says it of each cell left open.
DECIDED = "every cell is decided"
SPENT = "the budget ran out"


def run(api: Api, base_id: int, head_id: int, *, budget_s: float, mde: float | None, poll: float,
        out: Console) -> tuple[Comparison, looks.Looks]:
    """Look, add pairs where needed and look again until done; the settled comparison and what the looks did."""
    frozen: dict[int, dict[str, Any]] = {}
    share_before, count = 0.0, 0
    while True:
        sweeps = {i: api.get(f"/api/v1/sweeps/{i}") for i in (base_id, head_id)}
        used = sum(s["gpu_seconds"] for s in sweeps.values())
        timed = sum(s["timed_jobs"] for s in sweeps.values())
        share = min(1.0, used / budget_s)
        alpha = look_alpha(share_before, share, alpha=SPEED_ALPHA)
        answer = api.get("/api/v1/compare", base_sweep=base_id, head_sweep=head_id, alpha=alpha)
        count += 1
        if answer["changes"] and not any("tokens_per_s_call" in row for row in answer["changes"]):
            raise CliError(f"the service at {api.server} calls no cell's tokens/s (tokens_per_s_call: is it older than "
                           "draftbench's paired verdicts?): --budget-gpu-minutes needs it")
        cell_of = {job["job_id"]: job["cell_index"] for job in sweeps[head_id]["jobs"]}
        open_calls: dict[int, tuple[tuple[int, ...], SpeedCall]] = {}
        for row in answer["changes"]:
            call = _call(row)
            if call is None or not row["head"]["job_ids"]:
                continue
            cell = min(cell_of[job_id] for job_id in row["head"]["job_ids"])
            if cell in frozen:
                continue
            if looks.decided(call, mde):
                frozen[cell] = row
            else:
                open_calls[cell] = (tuple(row["head"]["job_ids"]), call)
        stopped = _more(api, head_id, open_calls, used=used, timed=timed, budget_s=budget_s, mde=mde)
        print(f"look {count} at alpha {alpha:.3g}: {len(open_calls)} cell(s) open, {used / 60:.1f} of "
              f"{budget_s / 60:g} GPU minutes used; {stopped or 'more pairs asked'}", file=sys.stderr)
        if stopped:
            left = dict(open_calls.values())
            done = looks.Looks(count=count, used_s=used, budget_s=budget_s, stopped=stopped, left=left, mde=mde)
            return compare.parse(looks.settled(answer, frozen.values()), api.server), done
        for sweep_id in (base_id, head_id):
            follow(api, sweep_id, api.get(f"/api/v1/sweeps/{sweep_id}")["total"], poll, out=out)
        share_before = share


def _more(api: Api, head_id: int, open_calls: dict[int, tuple[tuple[int, ...], SpeedCall]], *, used: float,
          timed: int, budget_s: float, mde: float | None) -> str | None:
    """Ask for the pairs the open cells want, within the budget; why the looks stop instead, or None."""
    if not open_calls:
        return DECIDED
    if used >= budget_s:
        return SPENT
    if not timed:
        return "no start has ended to cost more starts by"
    wanted = {cell: looks.pairs_wanted(call, mde) for cell, (_, call) in open_calls.items()}
    chosen = looks.plan(wanted, left_s=budget_s - used, pair_s=2 * used / timed)
    if not chosen:
        return f"{SPENT} (what is left fits not one more pair)"
    body = {"cells": [{"cell_index": cell, "pairs": pairs} for cell, pairs in sorted(chosen.items())]}
    try:
        api.send("POST", f"/api/v1/sweeps/{head_id}/more", json=body)
    except CliError as exc:
        return f"the service took no more starts ({exc})"
    return None


def _call(row: dict[str, Any]) -> SpeedCall | None:
    """The row's call on tokens/s (absent where a side did not run, or from a service before issue 22)."""
    found = row.get("tokens_per_s_call")
    return SpeedCall.model_validate(found) if found else None
