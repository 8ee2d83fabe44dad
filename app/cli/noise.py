"""``draftbench noise``: an A/A on a host, the starts the noise model learns from (``GET /api/v1/noise``).

A sweep file names a fixed set of cells (a baseline and a draft on the backends that matter); this runs each of
them ``--starts`` times on one build, so every cell becomes an A/A group, then prints the noise model of the GPU
kinds it ran on. The verdicts call tokens/s by that model from then on.
"""

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from app.cli import ci
from app.cli.errors import CliError
from app.cli.http import Api
from app.cli.options import Server, SubmitToken
from app.cli.sweeps import console, follow
from app.config import DEFAULT_SERVER


def noise(
    sweep_file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="The cells to start again and again (YAML or JSON)")],
    starts: Annotated[int, typer.Option(min=2, max=50, help="Engine starts of each cell (the sweep's repeats)")] = 4,
    build: Annotated[str | None, typer.Option(help="Build label to run (default: the sweep file's)")] = None,
    server: Server = DEFAULT_SERVER,
    token: SubmitToken = "",
    wait: Annotated[bool, typer.Option(help="Wait for the starts and print the noise model")] = True,
    poll: float = 5.0,
) -> None:
    """Run every cell of a sweep file STARTS times on one build (an A/A), then print the noise model it teaches."""
    spec = ci.read_sweep(sweep_file)
    spec["repeats"] = starts
    spec["tags"] = [*(spec.get("tags") or []), "noise"]
    spec.setdefault("reason", "an A/A for the noise model (draftbench noise)")
    if build:
        spec["build"] = build
    with Api(server, token) as api:
        sweep = api.send("POST", "/api/v1/sweeps", json=spec).json()
        console.print(f"sweep {sweep['id']} '{sweep['name']}': {sweep['total']} jobs ({starts} starts a cell) · "
                      f"{api.server}/sweeps/{sweep['id']}")
        if not wait:
            return
        follow(api, sweep["id"], sweep["total"], poll)
        kinds = set(api.get(f"/api/v1/sweeps/{sweep['id']}")["spec"]["gpu_kinds"])
        rows = [r for r in api.get("/api/v1/noise") if r["gpu_kind"] in kinds]
    if not rows:
        raise CliError(f"sweep {sweep['id']} left no cell with two succeeded starts: no noise model (see its page)")
    starts_shown = [d["starts"] for d in rows[0]["min_detectable"]]
    table = Table("GPU kind", "backend", "graph mode", "draft", "mode", "CV between starts", "df", "cells",
                  *(f"finds at {n} a side" for n in starts_shown), title="the noise model (GET /api/v1/noise)")
    for r in rows:
        mode = r["mode"] + (f" c={r['concurrency']}" if r["concurrency"] else "")
        finds = {d["starts"]: d["effect"] for d in r["min_detectable"]}
        table.add_row(r["gpu_kind"], r["backend"], r["graph_mode"], r["method_class"], mode, f"{100 * r['cv']:.2f} %", str(r["df"]),
                      str(r["cells"]), *(f"{100 * finds[n]:.1f} %" for n in starts_shown))
    console.print(table)


def register(cli: typer.Typer) -> None:
    cli.command()(noise)
