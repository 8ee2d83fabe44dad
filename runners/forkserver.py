"""A build's fork server: a process of the build's Python that imports vLLM once and forks one child per cell.

Usage (the worker starts it: ``runners/execute.py``'s ``ForkServer``):

    python runners/forkserver.py FD

FD is this end of a ``SOCK_SEQPACKET`` socket pair. The server imports ``cell.py`` (beside it), vLLM's engine
API and what vLLM's engine core imports as it starts (``warm_engine``), says ``{"ready": ...}``, then for each
request (JSON with the cell's ``argv``, ``cwd``, ``env``, the environment the server was started in (``given``),
process group ``pgid`` and ``started``, and two file descriptors: the cell's stdin and its log's write end) forks a
child, answers ``{"pid": N}``, waits for the child and answers ``{"returncode": R}`` (negative: killed by that
signal, as ``subprocess`` says it). It exits when the worker closes its end.

Why: every cell paid for importing vLLM before its engine started (``import_s``: 9-13 s on the H200 with the
worker's bytecode cache, about a fifth of a cell's wall time); the server pays it once per build and
environment. vLLM forks its engine core from a process in the same state (imported, CUDA untouched) by default
on GPUs, so the children start as vLLM's own engine cores do; the child is still a process of its own, so a crash
takes only the cell down, and the worker's timeout, stop and lifeline reach it through its process group.

What a child gets, so that it runs as ``python runners/cell.py SPEC RESULT`` would:

- its own process group, the worker's for this cell (``runners/lifeline.py``): the worker's SIGTERM and
  SIGKILL of the group reach the cell and vLLM's processes below it, and the group dies with the worker;
- the cell's stdin (the lifeline's mark, which vLLM's processes inherit), stdout and stderr on the cell's log;
- the cell's working folder and environment (``os.environ``, so processes vLLM spawns get it too), with what the
  build's interpreter added to the server's before Python started (a patched build's wrapper puts its copy of vLLM
  on ``PYTHONPATH``: ``cell_environment``);
- the signal dispositions of a fresh Python (the server changes none) and, as ``os.fork`` does, Python's
  ``random`` reseeded; vLLM seeds its own generators from the engine's ``seed``.

The server refuses to serve (``{"refused": why}``, then exits) when its import of vLLM's API initialised CUDA: a
child of a process with a CUDA context cannot use the GPU; the engine's modules it imports only after a forked probe
found them harmless. The import leaves native threads waiting (two on the CPU build, one started by torch's import
and one by vLLM's, both asleep on a futex); the process vLLM forks its engine core from holds them too. The server
starts no thread of its own.

Standard library only besides the cell's own imports: it runs inside the build being measured.
"""

import importlib
import json
import os
import socket
import sys
import time
import warnings

# cellkit lives beside this file: run by path (the worker), this folder is on sys.path; imported as runners.forkserver
# (tests), it is runners.cellkit. Imported here, not in a child: a child that failed to import it would return into
# this server's loop.
if __package__:
    from runners import cellkit
else:
    import cellkit

# The largest request (a cell's environment) and answer.
MESSAGE_BYTES = 1 << 20
# This process's environment as Python found it: what the worker gave, and what the interpreter (a build's wrapper
# script) added before Python started.
STARTED_ENV = dict(os.environ)
# What vLLM's engine core imports as it starts (its worker: model runner, layers, kernels' wrappers), imported here
# too so that no cell's engine pays for it (``warm_engine``). Names move between releases: a missing one is skipped.
ENGINE_MODULES = ("vllm.v1.worker.gpu_worker", "vllm.v1.worker.gpu_model_runner")
# "0" in the server's environment leaves ENGINE_MODULES to each engine, so a benchmark can measure what importing them
# here saves (benchmarks/cell_efficiency.py's +noengine).
ENGINE_PRELOAD_ENV = "DRAFTBENCH_ENGINE_PRELOAD"
# The probe's exit status when the engine's import initialised CUDA.
PROBE_CUDA = 3


def send(sock: socket.socket, message: dict) -> None:
    sock.send(json.dumps(message).encode())


def preload() -> dict:
    """Import the cell script and what it imports of vLLM before its engine; what the worker is told."""
    started = time.perf_counter()
    import cell  # noqa: F401 - beside this file, as cell.py imports cellkit
    import vllm
    import vllm.engine.arg_utils
    from vllm import LLM  # noqa: F401

    return {"import_s": time.perf_counter() - started, "vllm": vllm.__version__,
            "cuda_initialised": cuda_initialised()}


def cuda_initialised() -> bool:
    """Whether this process has a CUDA context (torch says so, where torch was imported)."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def warm_engine() -> dict:
    """Import ``ENGINE_MODULES`` too, where a forked probe finds that they leave CUDA untouched; what the worker is told.

    vLLM's engine core imports its worker when it starts, in every cell (its parent is the cell, forked from here):
    on the CPU build 0.7 s of its start, against 6.3 s for vLLM's API. A module that initialised CUDA here would
    leave every child without the GPU, so the probe imports them first and the server follows only where it found
    CUDA untouched; a build without them (an older vLLM) is told so and served as before.
    """
    if os.environ.get(ENGINE_PRELOAD_ENV) == "0":
        return {"engine_import_s": None, "engine_modules": [], "engine_skipped": f"{ENGINE_PRELOAD_ENV}=0"}
    started = time.perf_counter()
    pid = fork()
    if pid == 0:
        cellkit.exit_after(lambda: sys.exit(_probe()), returned=0)
    _, status = os.waitpid(pid, 0)
    probe = os.waitstatus_to_exitcode(status)
    if probe != 0:
        why = "its import initialised CUDA" if probe == PROBE_CUDA else f"the probe ended with {probe}"
        return {"engine_import_s": None, "engine_modules": [], "engine_skipped": why}
    imported = _import_engine()
    return {"engine_import_s": time.perf_counter() - started, "engine_modules": imported,
            "engine_skipped": None if imported else "this vLLM has none of them"}


def _probe() -> int:
    """In the probe: the engine's modules imported, ``PROBE_CUDA`` where that initialised CUDA, else 0."""
    _import_engine()
    return PROBE_CUDA if cuda_initialised() else 0


def _import_engine() -> list[str]:
    """Import each of ``ENGINE_MODULES`` this build has; the names imported."""
    imported = []
    for name in ENGINE_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        imported.append(name)
    return imported


def cell_environment(cell: dict[str, str], given: dict[str, str], started: dict[str, str]) -> dict[str, str]:
    """The cell's environment with what the interpreter set on top of ``given`` (the environment the worker started
    the server in) before Python ran, as it would have set it for a cell started anew: the variables of ``started``
    that ``given`` lacks or holds otherwise."""
    return cell | {name: value for name, value in started.items() if given.get(name) != value}


def child(sock: socket.socket, request: dict, stdin: int, log: int) -> None:
    """Become the cell: its group, stdio, folder and environment, then ``cell.main``; never returns
    (``cellkit.exit_after``: ``cell.main`` ends in ``os._exit`` itself, so a return is a failure)."""
    def become() -> None:
        sock.close()
        os.setpgid(0, request["pgid"])
        os.dup2(stdin, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(stdin)
        os.close(log)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(cell_environment(request["env"], request["given"], STARTED_ENV))
        sys.argv = list(request["argv"])
        import cell

        cell.CELL_STARTED = request["started"]
        cell.FORKED = True
        cell.main(sys.argv)

    cellkit.exit_after(become, returned=1)


def fork() -> int:
    """``os.fork``, with what is buffered written first, so that no child repeats it."""
    sys.stdout.flush()
    sys.stderr.flush()
    with warnings.catch_warnings():
        # Python 3.12 warns of forking with threads: the import's are asleep (see the module's docstring).
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def serve(sock: socket.socket) -> None:
    """Fork a child per request until the worker hangs up."""
    while True:
        data, fds, _, _ = socket.recv_fds(sock, MESSAGE_BYTES, 2)
        if not data:
            return
        request = json.loads(data)
        stdin, log = fds
        pid = fork()
        if pid == 0:
            child(sock, request, stdin, log)
        os.close(stdin)
        os.close(log)
        try:
            os.setpgid(pid, request["pgid"])  # as the child does: whichever runs first, the group is set
        except OSError:
            pass  # the child has exec'd nothing, so this fails only when it already joined or died
        send(sock, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        send(sock, {"returncode": os.waitstatus_to_exitcode(status)})


def main(argv: list[str]) -> None:
    sock = socket.socket(fileno=int(argv[1]))
    facts = preload()
    if facts["cuda_initialised"]:
        send(sock, {"refused": "importing vLLM initialised CUDA: a forked cell could not use the GPU"})
        return
    facts |= warm_engine()
    facts["threads"] = len(os.listdir("/proc/self/task"))
    print(f"fork server ready: {json.dumps(facts)}", flush=True)
    send(sock, {"ready": facts})
    serve(sock)


if __name__ == "__main__":
    main(sys.argv)
