"""What a sweep may hand to vLLM: engine arguments and speculative-config keys, each on an allow-list with its type.

Values stay data: the worker writes the cell as JSON and ``runners/cell.py`` passes them as keyword
arguments, never through a shell; strings are still held to the characters of names
(``dtype: bfloat16``, ``revision: refs/pr/1``). The lists keep out what would load code or touch
files chosen by the request (``trust_remote_code``, a compiler backend given as an import path,
dump and cache folders, a draft's load config) and what the sweep's own fields already set.
Free-form mappings that reach vLLM (``hf_overrides``, ``compilation_config.pass_config``, ...)
have no list of keys, so their keys must be names, their strings safe, their size bounded, and a
key that names a file is a path like any model's (``references``). Numbers are held to the range vLLM
gives them meaning in (``Number``), so a sweep that can only fail (``max_num_seqs: 0``,
``gpu_memory_utilization: 5``, a parallel size past any worker's GPUs) is refused naming the field and the
range, instead of queueing cells that crash or wait forever. Pure functions, no I/O.
"""

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.enums import AttentionBackend
from app.schemas.physical import MAX_GPUS
from app.schemas.sweep import MAX_K
from app.sweeps.paths import SAFE, SAFE_CHARS

Problem = tuple[list[str | int], str, list[str] | None]

# A scalar engine argument given as a list is an axis (``axes``), of at most this many values.
MAX_AXIS_VALUES = 16
# The serialised size of engine_args, and of one speculative config: each job stores a copy.
MAX_ENGINE_ARGS_BYTES = 16 * 1024
MAX_SPECULATIVE_BYTES = 8 * 1024
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
# A key of a free-form mapping that names a file or a model: its value is checked as a path.
_PATH_KEY = re.compile(r"(?:^|_)(?:path|dir|file|folder|model)$|^model_", re.IGNORECASE)

BOOL, TEXT, LIST, MAPPING = "boolean", "string", "list", "object"

# Upper bounds where vLLM sets none: counts of tokens, sequences, blocks and requests index 32-bit tensors inside
# vLLM; a KV cache of over 1 TiB or an offload of over 16 TiB is more memory than any GPU or host has.
MAX_INT32 = 2**31 - 1
MAX_KV_CACHE_BYTES = 2**40
MAX_GIB = 2**14


@dataclass(frozen=True)
class Number:
    """A number an argument takes: an integer (a float too unless ``integer``) from ``low`` to ``high``, ``low`` itself
    left out when ``above`` (vLLM's ``gt``), and the ``also`` values besides (``max_model_len: -1``, vLLM's automatic
    length). The lower bounds are vLLM's own (``ge=1``, ``gt=0``, ``le=1`` in ``vllm/config/``, vLLM 0.32)."""

    low: int | float
    high: int | float
    integer: bool = True
    above: bool = False
    also: tuple[int, ...] = ()

    def holds(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int if self.integer else int | float):
            return False  # JSON true is not a number, although Python's bool is an int
        if value in self.also:
            return True
        return (self.low < value if self.above else self.low <= value) and value <= self.high

    def describe(self) -> str:
        span = f"above {self.low} and at most {self.high}" if self.above else f"from {self.low} to {self.high}"
        besides = "".join(f", or {value}" for value in self.also)
        return f"{'an integer' if self.integer else 'a number'} {span}{besides}"


@dataclass(frozen=True)
class Items:
    """A non-empty list of numbers (``cudagraph_capture_sizes``: vLLM asserts at least one size)."""

    item: Number

    def holds(self, value: Any) -> bool:
        return isinstance(value, list) and bool(value) and all(self.item.holds(each) for each in value)

    def describe(self) -> str:
        return f"a non-empty list, each item {self.item.describe()}"


Kind = str | tuple[str, ...] | Number | Items
TOKENS = Number(1, MAX_INT32)  # a count of tokens, sequences or blocks: at least one
GPUS = Number(1, MAX_GPUS)  # a parallel size: GPUs of one worker

# Names as vLLM's EngineArgs spells them (checked against vLLM 0.32). None is accepted for each:
# it means vLLM's default. A value vLLM itself refuses ({"dtype": "float7"}) fails in the cell and
# is recorded as a crash, like any other bug.
ENGINE_ARGS: dict[str, Kind] = {
    "max_num_seqs": TOKENS,
    "max_num_batched_tokens": TOKENS,
    "max_model_len": Number(1, MAX_INT32, also=(-1,)),
    "gpu_memory_utilization": Number(0, 1, integer=False, above=True),
    "kv_cache_memory_bytes": Number(1, MAX_KV_CACHE_BYTES),
    "num_gpu_blocks_override": TOKENS,
    "block_size": TOKENS,
    "cpu_offload_gb": Number(0, MAX_GIB, integer=False),
    "kv_offloading_size": Number(0, MAX_GIB, integer=False, above=True),
    "tensor_parallel_size": GPUS,
    "pipeline_parallel_size": GPUS,
    "data_parallel_size": GPUS,
    "enable_expert_parallel": BOOL,
    "distributed_executor_backend": ("mp", "uni", "ray"),
    "disable_custom_all_reduce": BOOL,
    "dtype": TEXT,
    "kv_cache_dtype": TEXT,
    "quantization": TEXT,
    "load_format": TEXT,
    "revision": TEXT,
    "tokenizer_mode": TEXT,
    "enable_prefix_caching": BOOL,
    "prefix_caching_hash_algo": TEXT,
    "enable_chunked_prefill": BOOL,
    "long_prefill_token_threshold": Number(0, MAX_INT32),
    "async_scheduling": BOOL,
    "scheduling_policy": TEXT,
    "max_logprobs": Number(-1, MAX_INT32),
    "max_cudagraph_capture_size": TOKENS,
    "hf_overrides": MAPPING,
    "limit_mm_per_prompt": MAPPING,
    "compilation_config": MAPPING,
}

# Keys of ``compilation_config``; ``backend`` (an import path), ``inductor_compile_config`` (compiler
# commands), dump and cache folders stay out.
COMPILATION_CONFIG: dict[str, Kind] = {
    "mode": Number(0, 3),  # vLLM's CompilationMode: NONE .. VLLM_COMPILE
    "cudagraph_capture_sizes": Items(TOKENS),
    "max_cudagraph_capture_size": TOKENS,
    "cudagraph_num_of_warmups": Number(0, MAX_INT32),
    "cudagraph_copy_inputs": BOOL,
    "compile_sizes": LIST,
    "custom_ops": LIST,
    "splitting_ops": LIST,
    "use_inductor_graph_partition": BOOL,
    "pass_config": MAPPING,
    "dynamic_shapes_config": MAPPING,
}

# Keys of a speculative config beyond ``method``, ``num_speculative_tokens`` and ``model`` (checked
# against vLLM 0.32's SpeculativeConfig; older names kept where releases still take them).
SPECULATIVE: dict[str, Kind] = {
    "enforce_eager": BOOL,
    "draft_tensor_parallel_size": GPUS,
    "tensor_parallel_size": GPUS,
    "quantization": TEXT,
    "moe_backend": TEXT,
    "attention_backend": tuple(b.value for b in AttentionBackend),
    "kv_cache_dtype": TEXT,
    "max_model_len": TOKENS,
    "revision": TEXT,
    "index_share_for_mtp_iteration": BOOL,
    "disable_padded_drafter_batch": BOOL,
    "disable_eagle_block_drop": BOOL,
    "use_local_argmax_reduction": BOOL,
    "use_heterogeneous_vocab": BOOL,
    "prompt_lookup_max": TOKENS,
    "prompt_lookup_min": TOKENS,
    "parallel_drafting": BOOL,
    "num_speculative_tokens_per_batch_size": LIST,
    "suffix_decoding_max_tree_depth": TOKENS,
    "suffix_decoding_max_cached_requests": Number(0, MAX_INT32),
    "suffix_decoding_max_spec_factor": Number(0, MAX_INT32, integer=False),
    "suffix_decoding_min_token_prob": Number(0, 1, integer=False),
    "rejection_sample_method": TEXT,
    "synthetic_acceptance_rates": LIST,
    "synthetic_acceptance_length": Number(1, MAX_K + 1, integer=False),  # 1 to k + 1
    "enable_adaptive_verification": BOOL,
    "draft_sample_method": TEXT,
    "dspark_draft_topk": TOKENS,
    "disable_by_batch_size": Number(2, MAX_INT32),  # older vLLM: above 1
    "speculative_token_tree": TEXT,
}

SPECULATIVE_REFUSED: dict[str, str] = {
    "draft_load_config": "a load config names download folders and model loaders, which would touch files or load code",
    "code_revision": "it selects remote code to run",
    "target_model_config": "vLLM fills it from the target",
    "target_parallel_config": "vLLM fills it from the target",
    "draft_model_config": "vLLM builds it from `model`",
    "draft_parallel_config": "vLLM builds it from the parallel sizes",
}

# vLLM's own environment variables a sweep may set per cell (its ``env`` axis), with what each takes.
# Read by vLLM at start-up, so each cell process gets them; nothing else of the worker's environment changes.
VLLM_ENV: dict[str, str] = {
    "VLLM_USE_V2_MODEL_RUNNER": "0 or 1: the V2 model runner (vllm/v1/worker/gpu/), where DFlash and DSpark drafts live",
    "VLLM_BATCH_INVARIANT": "0 or 1: batch-invariant kernels",
    "VLLM_USE_FLASHINFER_SAMPLER": "0 or 1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0 or 1",
    # A serving cell's server forks its engine core unless a sweep says spawn, as `vllm serve` does (runners/serving.py).
    "VLLM_WORKER_MULTIPROC_METHOD": "fork or spawn: how vLLM starts its engine core and workers",
    "VLLM_DISABLE_COMPILE_CACHE": "0 or 1",
    "VLLM_USE_AOT_COMPILE": "0 or 1",
    "VLLM_USE_STANDALONE_COMPILE": "0 or 1",
    "VLLM_USE_DEEP_GEMM": "0 or 1",
    "VLLM_USE_TRITON_AWQ": "0 or 1",
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "0 or 1",
    # vLLM 0.21+ estimates the CUDA graphs' memory at start (2 s of an H100 start, as its log times it:
    # tests/data/h100-2026-12-05) and sizes the KV cache after it; 0 is the older sizing (a larger KV cache).
    "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS": "0 or 1: estimate the CUDA graphs' memory before sizing the KV cache",
    # The worker sets 1 (runners/execute.py's START_ENV); 0 profiles memory at every start, as vLLM does by default.
    "VLLM_ENABLE_STARTUP_PLAN": "0 or 1: reuse a configuration's KV cache size from an earlier start instead of profiling",
    "VLLM_CPU_KVCACHE_SPACE": "GiB of KV cache on the CPU engine",
    "VLLM_CPU_OMP_THREADS_BIND": "CPU cores for the CPU engine's threads",
    "VLLM_LOGGING_LEVEL": "DEBUG, INFO, WARNING, ...",
}
_ENV_VALUE = re.compile(r"[A-Za-z0-9_.,:|-]{1,64}")


def env_problems(env: Mapping[str, Any]) -> list[Problem]:
    """Every variable of a sweep's ``env`` axis that is not one of vLLM's on the list, or has a bad value."""
    found: list[Problem] = []
    for name, values in env.items():
        if name not in VLLM_ENV:
            found.append(([name], f"env.{name} is not one of vLLM's variables a sweep may set", sorted(VLLM_ENV)))
            continue
        for index, value in enumerate(values):
            if not _ENV_VALUE.fullmatch(value):
                found.append(([name, index], f"env.{name} value {value!r} may contain only letters, digits and _ . , : | -", None))
    return found


# Keys refused inside a free-form mapping, wherever it sits.
FREE_FORM_REFUSED: dict[str, str] = {
    "auto_map": "it names remote code for transformers to load",
    "trust_remote_code": "it runs Python code shipped with the model",
}

# Refused with a reason, because the reason is the useful part of the answer.
REFUSED: dict[str, str] = {
    "trust_remote_code": "it runs Python code shipped with the model",
    "enforce_eager": "the cell's graph mode sets it (graph mode NONE runs eagerly)",
    "model": "use the sweep's `model`",
    "tokenizer": "use the sweep's `tokenizer`",
    "speculative_config": "use the sweep's `speculative` list",
    "attention_backend": "use the sweep's `backends`",
    "seed": "use `workload.seed`",
    "disable_log_stats": "the cell reads vLLM's stats for the spec-decode counters",
    "cudagraph_mode": "use the sweep's `graph_modes`",
    "backend": "a compiler backend is an import path, which would load code",
    "inductor_compile_config": "it can name compiler commands",
}

_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    BOOL: (bool,),
    TEXT: (str,),
    LIST: (list,),
    MAPPING: (dict,),
}


def problems(engine_args: Mapping[str, Any]) -> list[Problem]:
    """Every engine argument that is not allowed, has the wrong JSON type, or is too large.

    Returns
    -------
    list of (loc, message, allowed)
        ``loc`` below ``engine_args`` (``["compilation_config", "backend"]``); ``allowed`` lists the
        accepted names where the name itself is the problem, else None. Empty when all is well.
    """
    found: list[Problem] = []
    size = len(json.dumps(engine_args))
    if size > MAX_ENGINE_ARGS_BYTES:
        found.append(([], f"engine_args is {size} bytes as JSON, over the limit of {MAX_ENGINE_ARGS_BYTES}", None))
        return found
    _check(engine_args, ENGINE_ARGS, REFUSED, [], "engine_args", "engine argument", found)
    nested = engine_args.get("compilation_config")
    if isinstance(nested, Mapping):
        _check(nested, COMPILATION_CONFIG, REFUSED, ["compilation_config"], "engine_args", "compilation_config key", found)
    if gpus := _gpus_problem(engine_args):
        found.append(gpus)
    return found


def _gpus_problem(engine_args: Mapping[str, Any]) -> Problem | None:
    """A cell takes ``tensor_parallel_size`` x ``pipeline_parallel_size`` GPUs of one worker (``matrix.gpus_needed``):
    with the largest size of each axis that is more than any worker has, some cell could never be claimed. None
    when it fits, or when a size is refused on its own."""
    largest = 1
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        value = engine_args.get(key)
        sizes = (value if isinstance(value, list) else [value]) or [None]
        if not all(size is None or GPUS.holds(size) for size in sizes):
            return None
        largest *= max(size or 1 for size in sizes)
    if largest <= MAX_GPUS:
        return None
    return (["tensor_parallel_size"], f"engine_args.tensor_parallel_size x pipeline_parallel_size asks for {largest} GPUs "
                                      f"of one worker; a worker has at most {MAX_GPUS}", None)


def axes(engine_args: Mapping[str, Any]) -> dict[str, list]:
    """The engine arguments given as a list where vLLM takes one value (``tensor_parallel_size: [1, 2]``): each is an
    axis of the sweep (``app.sweeps.matrix.expand``), in its listed order. Arguments that take a list or a mapping are
    never axes."""
    return {key: list(value) for key, value in engine_args.items()
            if isinstance(value, list) and key in ENGINE_ARGS and _scalar(ENGINE_ARGS[key])}


def speculative_problems(extra: Mapping[str, Any]) -> list[Problem]:
    """Every key of one speculative config (beyond method, num_speculative_tokens, model) that may not reach vLLM."""
    found: list[Problem] = []
    size = len(json.dumps(extra))
    if size > MAX_SPECULATIVE_BYTES:
        return [([], f"the speculative config is {size} bytes as JSON, over the limit of {MAX_SPECULATIVE_BYTES}", None)]
    allowed = {**SPECULATIVE, "method": TEXT, "num_speculative_tokens": Number(1, MAX_K), "model": TEXT}
    _check(extra, allowed, SPECULATIVE_REFUSED, [], "speculative", "speculative-config key", found)
    return found


def references(engine_args: Mapping[str, Any]) -> list[tuple[list[str | int], str]]:
    """(loc, value) of every string in engine_args' free-form mappings whose key names a file or a model.

    The caller holds each to the path rules (app.sweeps.paths), as it does the sweep's own model.
    """
    return [(loc, value) for loc, key, value in _walk(engine_args, []) if isinstance(value, str) and _PATH_KEY.search(key)]


def _check(
    args: Mapping[str, Any],
    allowed: Mapping[str, Kind],
    refused: Mapping[str, str],
    prefix: list[str | int],
    root: str,
    what: str,
    found: list[Problem],
) -> None:
    where = ".".join([root, *map(str, prefix)])
    for key, value in args.items():
        loc = [*prefix, key]
        if key in refused and key not in allowed:
            found.append((loc, f"{where}.{key} is not accepted: {refused[key]}", None))
        elif key not in allowed:
            found.append((loc, f"{where}.{key} is not an accepted {what}", sorted(allowed)))
        elif isinstance(value, list) and root == "engine_args" and not prefix and _scalar(allowed[key]):
            if problem := _axis_problem(value, allowed[key]):
                found.append((loc, f"{where}.{key} {problem}", None))
        elif value is not None and not _fits(value, allowed[key]):
            found.append((loc, f"{where}.{key} must be {_describe(allowed[key])}, not {value!r}", None))
        elif isinstance(value, str) and not SAFE.fullmatch(value):
            found.append((loc, f"{where}.{key} {value!r} may contain only {SAFE_CHARS}", None))
        elif isinstance(value, Mapping | list) and key != "compilation_config":
            _free_form(value, loc, f"{where}.{key}", found)


def _free_form(value: Mapping[str, Any] | list, prefix: list[str | int], where: str, found: list[Problem]) -> None:
    """Keys that are names (and not refused), strings of safe characters, all the way down."""
    for loc, key, inner in _walk(value, prefix):
        label = where + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc[len(prefix):])
        if isinstance(key, str) and key and not isinstance(loc[-1], int):
            if not _NAME.fullmatch(key):
                found.append((loc, f"{label}: a key must be a name (letters, digits, _ . -)", None))
                return
            if key in FREE_FORM_REFUSED:
                found.append((loc, f"{label} is not accepted: {FREE_FORM_REFUSED[key]}", None))
                return
        if isinstance(inner, str) and not SAFE.fullmatch(inner):
            found.append((loc, f"{label} {inner!r} may contain only {SAFE_CHARS}", None))
            return


def _walk(value: Any, prefix: list[str | int]) -> list[tuple[list[str | int], str, Any]]:
    """(loc, key, value) of everything inside mappings and lists, without recursion; key '' for list items."""
    out: list[tuple[list[str | int], str, Any]] = []
    stack: list[tuple[list[str | int], Any]] = [(prefix, value)]
    while stack:
        loc, item = stack.pop()
        if isinstance(item, Mapping):
            for key, inner in item.items():
                out.append(([*loc, key], str(key), inner))
                stack.append(([*loc, key], inner))
        elif isinstance(item, list):
            for index, inner in enumerate(item):
                out.append(([*loc, index], "", inner))
                stack.append(([*loc, index], inner))
    return out


def _scalar(kind: Kind) -> bool:
    return kind not in (LIST, MAPPING) and not isinstance(kind, Items)


def _axis_problem(values: list, kind: Kind) -> str | None:
    """Why ``values`` cannot be an axis of a scalar argument of ``kind``, or None: 1 to ``MAX_AXIS_VALUES`` distinct
    values, each of the kind (strings of safe characters)."""
    if not 1 <= len(values) <= MAX_AXIS_VALUES:
        return f"as an axis takes 1 to {MAX_AXIS_VALUES} values, not {len(values)}"
    for value in values:
        if value is None or not _fits(value, kind):
            return f"must be {_describe(kind)}, or a list of them (an axis), not {value!r} in {values!r}"
        if isinstance(value, str) and not SAFE.fullmatch(value):
            return f"{value!r} may contain only {SAFE_CHARS}"
    if len({json.dumps(v) for v in values}) < len(values):
        return f"lists a value twice: {values!r}"
    return None


def _fits(value: Any, kind: Kind) -> bool:
    if isinstance(kind, tuple):
        return value in kind
    if isinstance(kind, Number | Items):
        return kind.holds(value)
    return isinstance(value, _PYTHON_TYPES[kind])


def _describe(kind: Kind) -> str:
    if isinstance(kind, tuple):
        return "one of " + ", ".join(repr(choice) for choice in kind)
    if isinstance(kind, Number | Items):
        return kind.describe()
    return {BOOL: "true or false", LIST: "a list", MAPPING: "a mapping"}.get(kind, f"a {kind}")
