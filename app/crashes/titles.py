"""A crash group's title: what a vLLM developer recognises at a glance.

- An asynchronous CUDA fault: the fault, where it was noticed when a frame names a kernel library or a
  phase (``in FlashInfer decode``, ``in CUDA-graph replay``), and the cell's configuration, which is
  what tells two such faults apart: ``illegal memory access in FlashInfer decode (DFlash draft,
  FULL graphs)``.
- A failure with a cause of its own (free memory, KV cache, NCCL, a dead worker): that cause in words; a
  timeout, what timed out (``TimeoutError: RPC call to execute_model timed out.``; the innermost frame
  where the log does not say what);
  a fatal signal with where its ``faulthandler`` dump says it was: ``killed by signal SIGSEGV in
  model_runner.capture``.
- A traceback cut before its exception: what was raised, if its ``raise`` line shows, and where:
  ``traceback cut before its exception line in deepseek_v2.forward``.
- A compile or JIT failure: ``compile failed: Type: first sentence`` (its frames are the compiler's).
- Anything else: ``Type: first sentence in module.function`` of the innermost vLLM frame (``Type in
  module.function`` of an exception without a message).

At most ``MAX_TITLE`` characters.
"""

from collections.abc import Sequence

from app.crashes import kinds
from app.crashes.context import CellContext
from app.crashes.normalise import first_sentence
from app.enums import CrashKind, GraphMode

MAX_TITLE = 200

# Frames (innermost first) that say where a fault was noticed: (module prefix, function or None, words).
_PLACES: list[tuple[str, str | None, str]] = [
    ("flashinfer.decode", None, "FlashInfer decode"),
    ("flashinfer.prefill", None, "FlashInfer prefill"),
    ("flashinfer.sampling", None, "FlashInfer sampling"),
    ("flashinfer", None, "FlashInfer"),
    ("flash_attn", None, "FlashAttention"),
    ("vllm.vllm_flash_attn", None, "FlashAttention"),
    ("vllm.compilation.cuda_graph", None, "CUDA-graph replay"),
    ("vllm.v1.worker.gpu_model_runner", "_capture_cudagraphs", "CUDA-graph capture"),
    ("vllm.v1.sample.rejection_sampler", None, "rejection sampling"),
    ("vllm.v1.sample", None, "sampling"),
    ("vllm.v1.spec_decode.", None, "drafting"),
    ("vllm.v1.attention.backends.", None, "attention"),
]
_METHODS = {
    "ngram": "n-gram", "ngram_gpu": "GPU n-gram", "suffix": "suffix decoding", "draft_model": "draft model",
    "eagle": "EAGLE draft", "eagle3": "EAGLE-3 draft", "mtp": "MTP draft", "dflash": "DFlash draft",
    "dspark": "DSpark draft", "custom_class": "custom draft",
}
_BUILDS = {CrashKind.COMPILE_ERROR: "compile failed: ", CrashKind.JIT_ERROR: "JIT build failed: "}
_CAUSES = {
    CrashKind.FREE_MEMORY: "less free memory at start than gpu_memory_utilization asks for",
    CrashKind.KV_CACHE_TOO_SMALL: "KV cache too small for one request of max_model_len",
    CrashKind.ENGINE_DEAD: "engine died; its root cause is not in the log",
}


def title(
    kind: CrashKind, exc_type: str | None, message: str, frames: Sequence[str], context: CellContext | None,
    *, asynchronous: bool,
) -> str:
    """The title by the rules in the module docstring; ``message`` normalised, ``frames`` innermost first."""
    sentence = first_sentence(message)
    if asynchronous:
        text = f"{_fault(kind, sentence)}{_place(frames)}{_configuration(context)}"
    elif kind is CrashKind.KV_CACHE_TOO_SMALL and kinds.kv_cache_shortage(sentence) == "none":
        text = "no memory left for the KV cache at start"
    elif kind in _CAUSES:
        text = _CAUSES[kind]
    elif kind is CrashKind.NCCL_TIMEOUT:
        operation = sentence.partition("OpType=")[2]  # a watchdog line that names no collective leaves it out
        text = f"NCCL {operation or 'collective'} timed out (watchdog)"
    elif kind is CrashKind.SIGNAL:
        text = f"{sentence}{_where(frames)}"  # where the faulthandler dump says it was
    elif kind is CrashKind.TIMEOUT:
        text = f"{_named(exc_type)}{sentence}" if sentence else f"timed out{_where(frames)}"
    elif kind in (CrashKind.WORKER_DIED, CrashKind.EXIT):
        text = sentence
    elif kind is CrashKind.OUT_OF_MEMORY:
        text = f"out of GPU memory{_where(frames)}"
    elif kind in _BUILDS:
        text = f"{_BUILDS[kind]}{_named(exc_type)}{sentence}"  # the frames are the compiler's own
    else:
        prefix = "CUDA-graph capture failed: " if kind is CrashKind.CAPTURE_ERROR else ""
        what = f"{_named(exc_type)}{sentence}" if sentence else (exc_type or "").rpartition(".")[2]
        text = f"{prefix}{what}{_where(frames)}".strip()
    return text[:MAX_TITLE]


def _named(exc_type: str | None) -> str:
    return f"{exc_type.rpartition('.')[2]}: " if exc_type else ""


def _fault(kind: CrashKind, sentence: str) -> str:
    if kind is CrashKind.CUDA_ILLEGAL_MEMORY_ACCESS:
        return "illegal memory access"
    if kind is CrashKind.CUDA_DEVICE_ASSERT:
        return "device-side assert"
    return sentence.removeprefix("CUDA error: ")


def _place(frames: Sequence[str]) -> str:
    """`` in <place>`` for the innermost frame that names one, else the innermost frame's function."""
    for frame in frames:
        module, _, function = frame.partition(":")
        for prefix, only, words in _PLACES:
            if module.startswith(prefix) and only in (None, function):
                if words in ("drafting", "attention"):
                    return f" in {module.rpartition('.')[2]} {words}"
                return f" in {words}"
    return _where(frames)


def _where(frames: Sequence[str]) -> str:
    """`` in module.function`` of the innermost frame (the module's last part), or nothing."""
    if not frames:
        return ""
    module, _, function = frames[0].partition(":")
    return f" in {module.rpartition('.')[2]}.{function}"


def _configuration(context: CellContext | None) -> str:
    """`` (DFlash draft, FLASHINFER, FULL graphs, eager draft)``, or nothing without a context."""
    if context is None:
        return ""
    parts = [_METHODS.get(context.method, context.method) if context.method else "no speculation"]
    if context.backend:
        parts.append(context.backend)
    if context.graph_mode:
        parts.append("eager" if context.graph_mode == GraphMode.NONE else f"{context.graph_mode} graphs")
    if context.draft_eager and context.method:
        parts.append("eager draft")
    return f" ({', '.join(parts)})"
