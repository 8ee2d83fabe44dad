"""``draftbench bisect``: the first build of an ordered series that shows what the bad build changed.

Client-side, through the REST API as ``draftbench ci`` is: records the bisection (``POST /api/v1/bisections``, where
the service checks the series), runs the sweep on the good build and on the bad one paired with it, then on each
midpoint the service names; after each sweep the service compares it with the good build's and calls the step
(``POST /api/v1/bisections/{id}/steps``), so the history page shows every step with its evidence. Stops when one
step remains (the first bad build found), when the bad build shows no change, or at an undecided step (the range
reached is printed: bisect it again with more ``repeats``).
"""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from app.cli import ci
from app.cli.errors import CliError
from app.cli.http import Api
from app.cli.options import Server, SubmitToken
from app.cli.sweeps import follow
from app.config import DEFAULT_SERVER

# The exit code when no first bad build was named (nothing changed, or a step could not be called).
EXIT_NOT_FOUND = 3
# What --only narrows: a sweep's list field and, for the speculative configs, the key each entry is matched on.
FILTERS = {"method": ("speculative", "method"), "backend": ("backends", None), "graph_mode": ("graph_modes", None),
           "gpu_kind": ("gpu_kinds", None)}
_progress = Console(stderr=True)


def bisect(
    cells: Annotated[Path, typer.Option(exists=True, dir_okay=False, help="The sweep each step runs (YAML or JSON)")],
    series: Annotated[str, typer.Option(help="Build labels oldest first, comma-separated, or @FILE with one a line")],
    good: Annotated[str, typer.Option(help="A build of the series without the change")],
    bad: Annotated[str, typer.Option(help="A later build of the series with it")],
    only: Annotated[list[str] | None, typer.Option(
        help="Keep only the sweep's cells with KEY=VALUE (method, backend, graph_mode, gpu_kind); repeatable")] = None,
    server: Server = DEFAULT_SERVER,
    token: SubmitToken = "",
    poll: Annotated[float, typer.Option(help="Seconds between progress reads")] = 5.0,
) -> None:
    """Find the first build of a series whose cells moved as the bad build's did against the good build."""
    labels = read_series(series)
    spec = narrowed(ci.read_sweep(cells), only or [])
    with Api(server, token) as api:
        found = api.send("POST", "/api/v1/bisections", json={"name": spec.get("name") or cells.stem, "series": labels,
                                                              "good": good, "bad": bad}).json()
        key = f"draftbench-bisect:{found['id']}"
        tagged = spec | {"tags": [*spec.get("tags", []), "bisect"], "reason": f"bisection {found['id']}"}
        print(f"bisection {found['id']}: {len(labels)} builds, at most {found['steps_left']} rounds", file=sys.stderr)
        good_sweep = ci.submit(api, tagged | {"build": good}, key=f"{key}:{good}")["id"]
        # The bad build's starts run beside the good build's (a pair per repeat), so the host's drift falls out; unpaired
        # when a worker took every good job first.
        sweep = ci.paired_head(api, tagged | {"build": bad}, good_sweep, key=f"{key}:{bad}")
        follow(api, good_sweep, api.get(f"/api/v1/sweeps/{good_sweep}")["total"], poll, out=_progress)
        while True:
            follow(api, sweep["id"], sweep["total"], poll, out=_progress)
            found = api.send("POST", f"/api/v1/bisections/{found['id']}/steps",
                             json={"sweep_id": sweep["id"], "against_sweep_id": good_sweep}).json()
            print(step_line(found["steps"][-1]), file=sys.stderr)
            if found["state"] != "running":
                break
            sweep = ci.submit(api, tagged | {"build": found["next_build"]}, key=f"{key}:{found['next_build']}")
    print(report(found))
    if found["state"] != "found":
        raise CliError(f"bisection {found['id']} is {found['state']}: no first bad build named", EXIT_NOT_FOUND)


def read_series(value: str) -> list[str]:
    """``a,b,c`` or ``@FILE`` (one label a line, ``#`` comments) as labels; CliError when fewer than two."""
    if value.startswith("@"):
        from app import files

        try:
            lines = files.read_named(Path(value[1:]), limit=files.body_limit()).data.decode().splitlines()
        except files.FileRefused as exc:
            raise CliError(f"--series {value}: cannot read it ({exc})") from None
        except UnicodeDecodeError as exc:
            raise CliError(f"--series {value}: not UTF-8 text (byte {exc.start}): one build label a line") from None
        labels = [line.split("#")[0].strip() for line in lines]
    else:
        labels = [part.strip() for part in value.split(",")]
    labels = [label for label in labels if label]
    if len(labels) < 2:
        raise CliError(f"--series needs two builds or more, oldest first; got {labels}")
    return labels


def narrowed(spec: dict[str, Any], only: list[str]) -> dict[str, Any]:
    """The sweep with each ``KEY=VALUE`` of ``only`` keeping its list's matching entries; CliError for an unknown key
    (the known ones named) or a filter that keeps nothing."""
    spec = dict(spec)
    for item in only:
        name, _, wanted = item.partition("=")
        if name not in FILTERS or not wanted:
            raise CliError(f"--only {item!r}: give KEY=VALUE with KEY one of {', '.join(FILTERS)}")
        field, key = FILTERS[name]
        entries = spec.get(field) or []
        kept = [e for e in entries if (e.get(key) if key and isinstance(e, dict) else e) == wanted]
        if not kept:
            raise CliError(f"--only {item}: the sweep's {field} has none (it has {entries})")
        spec[field] = kept
    return spec


def step_line(step: dict[str, Any]) -> str:
    """One step as progress shows it: ``s4 (position 4): bad`` and the cells that decided it."""
    moved = "; ".join(f"{e['cell']}: {e['verdict']} against {e['against']}" for e in step["evidence"])
    return f"{step['build']} (position {step['position']}, sweep {step['sweep_id']}): {step['call']} ({moved})"


def report(found: dict[str, Any]) -> str:
    """The outcome: the first bad build with the evidence of each step, or the range reached and why it stopped."""
    head = {"found": f"first bad build: {found['first_bad']} (last good: {found['last_good']})",
            "no_change": f"{found['bad']} shows no change against {found['good']} on these cells: nothing to bisect",
            "undecided": f"undecided: the first bad build lies after {found['last_good']} and at or before "
                         f"{found['first_bad']}; bisect that range again with more repeats"}[found["state"]]
    lines = [f"bisection {found['id']} ({found['name']}): {head}"]
    if found["symptoms"]:
        lines.append(f"looked for: {'; '.join(found['symptoms'])}")
    for i, step in enumerate(found["steps"]):
        lines.append(f"round {i + 1}: {step['build']} (sweep {step['sweep_id']}, the good build's {step['against_sweep_id']}): "
                     f"{step['call']}")
        lines.extend(f"  {evidence_line(e)}" for e in step["evidence"])
    return "\n".join(lines)


def evidence_line(row: dict[str, Any]) -> str:
    """``against good: cpu ngram k=3 CPU_ATTN NONE: worse; tokens/s 0.13x [0.10, 0.17], 1 and 1 starts; <the verdict's
    reasons>``."""
    speed = row["speed_ratio"]
    ratio = ""
    if speed:
        bounds = f" [{speed['low']:.2f}, {speed['high']:.2f}]" if speed["low"] is not None and speed["high"] is not None else ""
        ratio = f"tokens/s {speed['value']:.2f}x{bounds}, "
    said = "; ".join(row["reasons"]) or "no change called"
    return f"against {row['against']}: {row['cell']}: {row['verdict']}; {ratio}{row['compared_starts']} and {row['starts']} starts; {said}"


def register(cli: typer.Typer) -> None:
    cli.command()(bisect)
