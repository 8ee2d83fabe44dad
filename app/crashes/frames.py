"""The frames of a crash that say where it happened: vLLM's own, without the plumbing every crash shares.

As Socorro's skip lists do: frames that every crash passes through (the engine core's busy loop, the
executors' RPC, the engine's start-up, ``torch.nn.Module.__call__``, ``decorate_context``) are dropped, then
the innermost frames inside vLLM are kept as ``vllm.module:function``, innermost first; without any
vLLM frame, the innermost of any module. A frame's module is its path from its package's root, so a
frame is named alike under ``site-packages``, ``dist-packages``, ``lib64`` or a source checkout; of a
path holding both a package root and a ``vllm`` directory, whichever comes last (an environment named
``vllm`` holds torch's frames too).
"""

import re
from collections.abc import Iterator, Sequence

MAX_FRAMES = 5

# Plumbing: packages and modules whose every frame is, and single functions of modules that also work.
_SKIPPED_PACKAGES = (
    "vllm.v1.executor.",
    "vllm.executor.",
    "vllm.tracing.",
    "concurrent.futures.",
    "multiprocessing.",
    "asyncio.",
)
_SKIPPED_MODULES = {
    "vllm.v1.engine.utils",
    "vllm.v1.serial_utils",
    "vllm.v1.worker.worker_base",
    "vllm.worker.worker_base",
    "torch.nn.modules.module",
    "torch.utils._contextlib",
    "torch._dynamo.eval_frame",
    "threading",
    "contextlib",
    "runpy",
}
_SKIPPED_FUNCTIONS = {
    "vllm.v1.engine.core": {
        "run_engine_core", "run_busy_loop", "_process_engine_step", "step", "step_with_batch_queue",
        "execute_model_with_error_logging", "_process_input_queue", "_handle_client_request", "__init__",
    },
    "vllm.utils": {"inner"},
}
# Ends before the slash that follows, so that ".../lib/python3.12/dist-packages/" holds two roots.
_PACKAGE_ROOT = re.compile(r"/(?:site|dist)-packages(?=/)|/lib(?:64)?/python\d++(?:\.\d++)?(?=/)")


def render(frames: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """``module:function`` of ``frames`` (outermost first, as Python prints them), innermost first, at most 5.

    vLLM's own frames that are not plumbing if there are any, else any frames that are not plumbing.
    """
    return tuple(name for _, name in _shown(frames)[:MAX_FRAMES])


def site(frames: Sequence[tuple[str, str]], statements: Sequence[str]) -> tuple[str, str]:
    """``(module:function, source line)`` of where a traceback cut before its exception stops: the frame
    ``render`` shows first, else (every frame plumbing) the innermost frame; ``("", "")`` without frames.

    ``statements`` are the source lines of the innermost frames, innermost last (fewer than the frames:
    a frame beyond them has an empty line). The line tells apart two calls in one function.
    """
    shown = _shown(frames) or [(i, f"{m}:{f}") for i, m, f in _named(frames)][:1]
    if not shown:
        return "", ""
    index, name = shown[0]
    inside = len(frames) - 1 - index  # frames the chosen one called
    return name, statements[-1 - inside] if inside < len(statements) else ""


def innermost(frames: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """``module:function`` of the innermost frames that are not plumbing, any module's, at most 5.

    Where a kernel library (FlashInfer, FlashAttention) was running shows here, not among vLLM's frames.
    """
    return tuple(name for _, name in _kept(frames)[:MAX_FRAMES])


def _shown(frames: Sequence[tuple[str, str]]) -> list[tuple[int, str]]:
    """``(index in frames, "module:function")`` of vLLM's frames that are not plumbing, else of any, innermost first."""
    kept = _kept(frames)
    own = [frame for frame in kept if frame[1].startswith(("vllm.", "vllm:"))]
    return own or kept


def _kept(frames: Sequence[tuple[str, str]]) -> list[tuple[int, str]]:
    return [(i, f"{m}:{f}") for i, m, f in _named(frames) if not _skipped(m, f)]


def _named(frames: Sequence[tuple[str, str]]) -> Iterator[tuple[int, str, str]]:
    """``(index in frames, module, function)``, innermost first."""
    for i in range(len(frames) - 1, -1, -1):
        path, function = frames[i]
        yield i, module(path), function


def module(path: str) -> str:
    """``.../dist-packages/vllm/v1/engine/core.py`` -> ``vllm.v1.engine.core``; outside a package, the file's stem."""
    path = path.replace("\\", "/")
    # The rightmost anchor wins: a package root after "/vllm/" (a conda env or venv named "vllm",
    # ``/envs/vllm/lib/python3.10/site-packages/torch/...``) roots a package of its own, and "/vllm/"
    # after a package root (an egg, ``dist-packages/vllm-0.10.1-py3.12.egg/vllm/...``) is vLLM's.
    at = path.rfind("/vllm/")
    roots = list(_PACKAGE_ROOT.finditer(path, max(at, 0)))  # only those after "/vllm/" can win
    if roots:
        tail = path[roots[-1].end() + 1 :]
    elif at != -1 or path.startswith("vllm/"):
        tail = path[at + 1 :]
    else:
        tail = path.rsplit("/", 1)[-1]
    tail = tail.removesuffix(".py").removesuffix("/__init__")
    return tail.replace("/", ".")


def _skipped(module_name: str, function: str) -> bool:
    return (
        module_name.startswith(_SKIPPED_PACKAGES)
        or module_name in _SKIPPED_MODULES
        or function in _SKIPPED_FUNCTIONS.get(module_name, ())
    )
