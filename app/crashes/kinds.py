"""What kind of crash an exception is, from its type, its message and where it was raised.

Rules, first match wins; texts are compared lower-cased, in the exception's type and message:

1. FREE_MEMORY: "free memory on device ... less than desired gpu memory utilization" (vLLM refuses to
   start when another process holds the GPU's memory), and the CPU backend's "available memory on
   node ... is less than" (its NUMA node's free memory against what gpu_memory_utilization reserves,
   at start or for the KV cache);
2. KV_CACHE_TOO_SMALL: "to serve at least one request with the model", "larger than the available kv
   cache memory", "larger than the maximum number of tokens that can be stored in kv cache" (too
   small for one request of max_model_len), "no available memory for the cache blocks" (nothing left
   for it: ``kv_cache_shortage`` tells the two apart);
3. NCCL_TIMEOUT: "watchdog caught collective operation timeout", "timeout at nccl work" (the line
   newer torch prints beside it);
4. CAPTURE_ERROR: "stream is capturing", "cudaerrorstreamcapture", "error during capture";
5. CUDA_ILLEGAL_MEMORY_ACCESS: "illegal memory access"; CUDA_DEVICE_ASSERT: "device-side assert";
   CUDA_ERROR for the other asynchronous faults (``ASYNC_FAULTS``: misaligned address, launch
   failure, illegal instruction);
6. OUT_OF_MEMORY: "out of memory", ``OutOfMemoryError``;
7. NCCL_ERROR: "nccl error", "ncclsystemerror", ``DistBackendError``, ...;
8. JIT_ERROR: "ninja build failed", or raised under ``flashinfer/jit``;
9. COMPILE_ERROR: raised by or under torch.compile (``BackendCompilerFailed``, ``InductorError``,
   frames in ``torch/_inductor``, ``torch/_dynamo``) or Triton (``OutOfResources``,
   ``CompilationError``, frames in ``triton/compiler``);
10. CUDA_ERROR: any other "cuda error" (``the launch timed out and was terminated`` is one);
11. TIMEOUT: a timeout's type (``TimeoutError`` of any module: the builtin, asyncio's, concurrent.futures';
    ``subprocess.TimeoutExpired``, ``ReadTimeout``) or a message that says something "timed out" or
    gave up with a "timeout after": the engine core's RPC to its workers (``RPC call to execute_model
    timed out.``), V0's engine iteration, torch.distributed's store (``DistStoreError: Timed out after
    601 seconds waiting for clients``);
12. EXCEPTION.

Faults reported asynchronously (``is_asynchronous``) surface at whatever call next syncs the
device: their stack says where the fault was noticed, not where it happened.
"""

from collections.abc import Sequence

from app.enums import CrashKind

ASYNC_FAULTS = (
    "illegal memory access",
    "device-side assert",
    "misaligned address",
    "unspecified launch failure",
    "illegal instruction",
)
_NO_KV_CACHE_MEMORY = "no available memory for the cache blocks"
_RULES: list[tuple[CrashKind, tuple[str, ...]]] = [
    (CrashKind.KV_CACHE_TOO_SMALL, (
        "to serve at least one request with the model",
        "larger than the available kv cache memory",
        "larger than the maximum number of tokens that can be stored in kv cache",
        _NO_KV_CACHE_MEMORY,
    )),
    (CrashKind.NCCL_TIMEOUT, ("watchdog caught collective operation timeout", "timeout at nccl work")),
    (CrashKind.CAPTURE_ERROR, ("stream is capturing", "cudaerrorstreamcapture", "error during capture")),
    (CrashKind.CUDA_ILLEGAL_MEMORY_ACCESS, ("illegal memory access",)),
    (CrashKind.CUDA_DEVICE_ASSERT, ("device-side assert",)),
    (CrashKind.CUDA_ERROR, ASYNC_FAULTS[2:]),
    (CrashKind.OUT_OF_MEMORY, ("out of memory", "outofmemoryerror")),
    (CrashKind.NCCL_ERROR, ("nccl error", "ncclsystemerror", "ncclinternalerror", "ncclunhandledcudaerror",
                            "distbackenderror")),
    (CrashKind.JIT_ERROR, ("ninja build failed",)),
    (CrashKind.COMPILE_ERROR, ("backendcompilerfailed", "inductorerror", "outofresources", "compilationerror")),
]
# vLLM's start-up refusals that name their cause in a line of their own, found even where a paste kept
# the message without its exception type, or the engine logged it without raising (V0's "The model's
# max seq len ... is larger than the maximum number of tokens that can be stored in KV cache").
REFUSALS = (
    "o serve at least one request with the model", "larger than the available KV cache memory",
    "larger than the maximum number of tokens that can be stored in KV cache",
    "No available memory for the cache blocks", "less than desired GPU memory utilization",
)
# A timeout, by its type's name (its last dotted part) or by its words (``TIMED_OUT`` finds them in a log).
_TIMEOUT_TYPES = ("TimeoutError", "Timeout", "TimeoutExpired")
TIMEOUT_WORDS = ("timed out", "timeout after")
_JIT_FRAMES = ("/flashinfer/jit/",)
_COMPILE_FRAMES = ("/torch/_inductor/", "/torch/_dynamo/", "/triton/compiler/")
_ASYNC_KINDS = (CrashKind.CUDA_ILLEGAL_MEMORY_ACCESS, CrashKind.CUDA_DEVICE_ASSERT, CrashKind.KERNEL_ASSERT)


def classify(exc_type: str | None, message: str, paths: Sequence[str] = (), wrapped_by: str | None = None) -> CrashKind:
    """The kind of an exception by the rules in the module docstring; ``paths`` are its frames' files."""
    text = f"{exc_type or ''} {wrapped_by or ''} {message}".lower()
    if "free memory on device" in text and "less than desired gpu memory utilization" in text:
        return CrashKind.FREE_MEMORY
    if "available memory on node" in text and " is less than " in text:
        return CrashKind.FREE_MEMORY
    for kind, needles in _RULES:
        if any(needle in text for needle in needles):
            return kind
    if any(part in path for path in paths for part in _JIT_FRAMES):
        return CrashKind.JIT_ERROR
    if any(part in path for path in paths for part in _COMPILE_FRAMES):
        return CrashKind.COMPILE_ERROR
    if "cuda error" in text:
        return CrashKind.CUDA_ERROR
    if (exc_type or "").rpartition(".")[2].endswith(_TIMEOUT_TYPES) or any(words in text for words in TIMEOUT_WORDS):
        return CrashKind.TIMEOUT
    return CrashKind.EXCEPTION


def kv_cache_shortage(message: str) -> str:
    """Which KV_CACHE_TOO_SMALL a message is: ``"none"`` (no memory left for any block once the weights
    and activations are in) or ``"max_model_len"`` (some, too little for one request of max_model_len)."""
    return "none" if _NO_KV_CACHE_MEMORY in message.lower() else "max_model_len"


def is_asynchronous(kind: CrashKind, message: str) -> bool:
    """Whether the fault was reported asynchronously, so that its stack says nothing of its cause."""
    if kind in _ASYNC_KINDS:
        return True
    lowered = message.lower()
    return kind is CrashKind.CUDA_ERROR and any(fault in lowered for fault in ASYNC_FAULTS)
