"""The frames of a crash that say where it happened: vLLM's own, without the plumbing every crash shares.

As Socorro's skip lists do: frames that every crash passes through (the engine core's busy loop, the
executors' RPC, the engine's start-up, ``torch.nn.Module.__call__``, ``decorate_context``) are dropped, then
the innermost frames inside vLLM are kept as ``vllm.module:function``, innermost first; without any
vLLM frame, the innermost of any module. A frame's module is its path from its package's root, so a
frame is named alike under ``site-packages``, ``dist-packages``, ``lib64`` or a source checkout.
"""

import re
from collections.abc import Sequence

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
    kept = _kept(frames)
    own = [frame for frame in kept if frame.startswith(("vllm.", "vllm:"))]
    return tuple((own or kept)[:MAX_FRAMES])


def innermost(frames: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """``module:function`` of the innermost frames that are not plumbing, any module's, at most 5.

    Where a kernel library (FlashInfer, FlashAttention) was running shows here, not among vLLM's frames.
    """
    return tuple(_kept(frames)[:MAX_FRAMES])


def _kept(frames: Sequence[tuple[str, str]]) -> list[str]:
    named = ((module(path), function) for path, function in reversed(frames))
    return [f"{m}:{f}" for m, f in named if not _skipped(m, f)]


def module(path: str) -> str:
    """``.../dist-packages/vllm/v1/engine/core.py`` -> ``vllm.v1.engine.core``; outside a package, the file's stem."""
    path = path.replace("\\", "/")
    at = path.rfind("/vllm/")
    if at != -1 or path.startswith("vllm/"):
        tail = path[at + 1 :]
    else:
        roots = list(_PACKAGE_ROOT.finditer(path))
        tail = path[roots[-1].end() + 1 :] if roots else path.rsplit("/", 1)[-1]
    tail = tail.removesuffix(".py").removesuffix("/__init__")
    return tail.replace("/", ".")


def _skipped(module_name: str, function: str) -> bool:
    return (
        module_name.startswith(_SKIPPED_PACKAGES)
        or module_name in _SKIPPED_MODULES
        or function in _SKIPPED_FUNCTIONS.get(module_name, ())
    )
