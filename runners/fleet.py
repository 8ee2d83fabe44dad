"""One worker process per GPU (or per group of GPUs) on this host, supervised.

``draftbench worker --gpus all`` starts ``draftbench worker ... --gpu 0``, ``--gpu 1``, ... and waits.
A child that ends with 0 (``--exit-when-idle``, ``--max-jobs``) is done. A child that fails takes
the whole fleet down with a non-zero exit: the others are stopped (SIGTERM: each stops its running
cell, which the service requeues when the lease runs out) and the supervisor exits 1, so whatever
restarts it (docker's ``restart: unless-stopped``, systemd) brings the host back whole.
"""

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from runners import gpus

log = logging.getLogger("draftbench.worker")


def worker_ids(spec: str, *, visible: str | None, found: Sequence[gpus.Gpu]) -> list[str]:
    """The GPUs ``--gpus`` names: ``all`` or a list ``0,1,2``.

    ``all`` honours a CUDA_VISIBLE_DEVICES the supervisor was started with (``visible``), else it
    means every GPU nvidia-smi lists. Raises GpuError when there is none, or one is unknown.
    """
    if spec.strip().lower() != "all":
        return [gpu.index for gpu in gpus.pick(found, gpus.parse_ids(spec))] if found else gpus.parse_ids(spec)
    if visible is not None and visible.strip():
        return gpus.parse_ids(visible)
    if not found:
        raise gpus.GpuError("--gpus all: nvidia-smi lists no GPU on this host")
    return [gpu.index for gpu in found]


def child_argv(base: Sequence[str], group: Sequence[str], *, name: str | None) -> list[str]:
    """The command line of the worker for one group of GPUs: the same options plus ``--gpu`` and a name."""
    label = "-".join(group)
    argv = [*base, "--gpu", ",".join(group)]
    if name:
        argv += ["--name", f"{name}-gpu{label}"]
    return argv


def supervise(argvs: Sequence[Sequence[str]], *, env: Mapping[str, str] | None = None, poll_s: float = 0.5) -> int:
    """Run the workers until each has ended; 0 when all ended with 0, else 1 (the others are stopped).

    SIGTERM and SIGINT to the supervisor are passed on to every worker.
    """
    children = [subprocess.Popen(list(argv), env=dict(env) if env is not None else None) for argv in argvs]
    for argv, child in zip(argvs, children, strict=True):
        log.info("started worker pid %s: %s", child.pid, " ".join(_redact(argv)))

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    failed = False
    try:
        running = list(children)
        while running and not failed:
            for child in list(running):
                code = child.poll()
                if code is None:
                    continue
                running.remove(child)
                if code == 0:
                    log.info("worker pid %s finished", child.pid)
                    continue
                log.error("worker pid %s ended with %s: stopping the other workers", child.pid, _describe(code))
                failed = True
                _stop(running)
                break
            else:
                time.sleep(poll_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 1 if failed else 0


def cli_base() -> list[str]:
    """How to run this CLI again: the ``draftbench`` script beside this Python, or ``python -m app.cli``."""
    script = os.path.join(os.path.dirname(sys.executable), "draftbench")
    if os.path.exists(script):
        return [script]
    return [sys.executable, "-m", "app.cli"]


def _stop(children: Sequence[subprocess.Popen], grace_s: float = 30.0) -> None:
    for child in children:
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + grace_s
    for child in children:
        try:
            child.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _describe(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"exit code {code}"


def _redact(argv: Sequence[str]) -> list[str]:
    out, hide = [], False
    for arg in argv:
        out.append("***" if hide else arg)
        hide = arg == "--token"
    return out
