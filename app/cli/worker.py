"""``draftbench worker``: claim cells from the service and run each in its own vLLM process."""

from pathlib import Path
from typing import Annotated

import typer

from app.cli.errors import CliError
from app.cli.options import HostToken, Server
from app.config import DEFAULT_SERVER
from app.enums import GpuKind
from runners.execute import DEFAULT_PYCACHE


def worker(
    server: Server = DEFAULT_SERVER,
    token: HostToken = "",
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
    pycache: Annotated[
        str,
        typer.Option(envvar="DRAFTBENCH_PYCACHE",
                     help="Folder of the cells' Python bytecode (PYTHONPYCACHEPREFIX), so no cell compiles vLLM's "
                     "sources again; '' leaves the environment's bytecode settings as they are"),
    ] = str(DEFAULT_PYCACHE),
    fork_server: Annotated[
        bool,
        typer.Option(help="Fork each cell from its build's fork server, a process that imported vLLM once, instead of "
                     "starting a Python that imports it again (each cell is still a process of its own)"),
    ] = True,
) -> None:
    """Claim cells from the service and run each in its own vLLM subprocess.

    It refuses to start when a build's interpreter cannot import vLLM, or when --gpu-kind names
    GPUs this host does not have.
    """
    import logging
    import signal

    from runners import gpus as gpu_devices
    from runners.client import ServiceClient, ServiceRefused
    from runners.worker import Build, SetupError, Worker, check_gpu_kind, detect_gpu_kinds

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not build:
        raise CliError("give at least one --build LABEL=/path/to/python")
    if not token.strip():
        raise CliError("no token: set DRAFTBENCH_TOKEN or pass --token (`draftbench token create --scope worker`)")
    try:
        builds = [Build.parse(b) for b in build]
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if gpu_kind != "auto" and gpu_kind not in {k.value for k in GpuKind}:
        raise CliError(f"unknown GPU kind {gpu_kind!r} for --gpu-kind; allowed values: auto, {', '.join(GpuKind)}")
    if gpu is not None and gpus is not None:
        raise CliError("give --gpu (this process) or --gpus (one process per GPU), not both")
    if gpus is not None:
        raise typer.Exit(_fleet(server=server, token=token, build=build, gpu_kind=gpu_kind, gpus=gpus,
                                per_worker=gpus_per_worker, name=name, heartbeat=heartbeat, max_jobs=max_jobs,
                                exit_when_idle=exit_when_idle, quiet=quiet, pycache=pycache, fork_server=fork_server))
    try:
        gpu_ids = gpu_devices.parse_ids(gpu) if gpu is not None else None
        if gpu_kind == "auto":
            kinds, count = detect_gpu_kinds(gpu_ids)
        elif gpu_kind == GpuKind.CPU:
            if gpu_ids:
                raise gpu_devices.GpuError("--gpu-kind cpu runs the CPU engine: drop --gpu")
            kinds, count = [GpuKind.CPU], 0
        else:
            found = gpu_devices.list_gpus()
            chosen = gpu_devices.pick(found, gpu_ids) if gpu_ids and found else found
            check_gpu_kind(GpuKind(gpu_kind), chosen)
            kinds, count = [GpuKind(gpu_kind)], len(gpu_ids) if gpu_ids else 1
    except (gpu_devices.GpuError, SetupError) as exc:
        raise CliError(str(exc)) from None
    client = ServiceClient(server, token)
    runner = Worker(client, builds=builds, gpu_kinds=kinds, gpu_count=count, gpu_ids=gpu_ids, name=name,
                    heartbeat_s=heartbeat, echo=not quiet, pycache=Path(pycache).expanduser() if pycache else None,
                    fork=fork_server)
    # SIGTERM (docker stop, the --gpus supervisor) stops the running cell and ends the loop.
    signal.signal(signal.SIGTERM, lambda *_: runner.stopping.set())
    try:
        runner.register()
        runner.run(max_jobs=max_jobs, exit_when_idle=exit_when_idle)
    except (SetupError, ServiceRefused) as exc:
        raise CliError(str(exc)) from None
    finally:
        runner.close()
        client.close()


def _fleet(*, server: str, token: str, build: list[str], gpu_kind: str, gpus: str, per_worker: int,
           name: str | None, heartbeat: float, max_jobs: int | None, exit_when_idle: bool, quiet: bool,
           pycache: str, fork_server: bool) -> int:
    """``--gpus``: one ``draftbench worker --gpu ...`` per group of GPUs, supervised; their exit code."""
    import os
    import socket

    from runners import fleet
    from runners import gpus as gpu_devices

    try:
        ids = fleet.worker_ids(gpus, visible=os.environ.get("CUDA_VISIBLE_DEVICES"), found=gpu_devices.list_gpus())
        groups = gpu_devices.groups(ids, per_worker)
    except gpu_devices.GpuError as exc:
        raise CliError(str(exc)) from None
    base = [*fleet.cli_base(), "worker", "--server", server, *(f"--build={b}" for b in build), "--gpu-kind", gpu_kind,
            "--heartbeat", str(heartbeat), "--pycache", pycache, "--fork-server" if fork_server else "--no-fork-server"]
    base += ["--max-jobs", str(max_jobs)] if max_jobs is not None else []
    base += ["--exit-when-idle"] if exit_when_idle else []
    base += ["--quiet"] if quiet else []
    # The token travels in the environment, never on a command line other users can read.
    env = os.environ | {"DRAFTBENCH_TOKEN": token}
    argvs = [fleet.child_argv(base, group, name=name or socket.gethostname()) for group in groups]
    return fleet.supervise(argvs, env=env)


def register(cli: typer.Typer) -> None:
    cli.command()(worker)
