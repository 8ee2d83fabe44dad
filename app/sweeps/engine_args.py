"""The engine arguments a sweep may hand to vLLM's ``LLM(...)``: an allow-list, with each value's JSON type.

Values stay data: the worker writes the cell as JSON and ``runners/cell.py`` passes them as keyword
arguments, never through a shell; top-level strings are still held to the characters of names
(``dtype: bfloat16``, ``revision: refs/pr/1``). The list keeps out what would load code or touch
files chosen by the request (``trust_remote_code``, a compiler backend given as an import path,
dump and cache folders) and what the sweep's own fields already set. Pure functions, no I/O.
"""

from collections.abc import Mapping
from typing import Any

from app.sweeps.paths import SAFE, SAFE_CHARS

INT, NUMBER, BOOL, TEXT, LIST, MAPPING = "integer", "number", "boolean", "string", "list", "object"

# Names as vLLM's EngineArgs spells them (checked against vLLM 0.32). None is accepted for each:
# it means vLLM's default. A value vLLM itself refuses ({"dtype": "float7"}) fails in the cell and
# is recorded as a crash, like any other bug.
ENGINE_ARGS: dict[str, str | tuple[str, ...]] = {
    "max_num_seqs": INT,
    "max_num_batched_tokens": INT,
    "max_model_len": INT,
    "gpu_memory_utilization": NUMBER,
    "kv_cache_memory_bytes": INT,
    "num_gpu_blocks_override": INT,
    "block_size": INT,
    "cpu_offload_gb": NUMBER,
    "kv_offloading_size": NUMBER,
    "tensor_parallel_size": INT,
    "pipeline_parallel_size": INT,
    "data_parallel_size": INT,
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
    "long_prefill_token_threshold": INT,
    "async_scheduling": BOOL,
    "scheduling_policy": TEXT,
    "max_logprobs": INT,
    "max_cudagraph_capture_size": INT,
    "hf_overrides": MAPPING,
    "limit_mm_per_prompt": MAPPING,
    "compilation_config": MAPPING,
}

# Keys of ``compilation_config``; ``backend`` (an import path), ``inductor_compile_config`` (compiler
# commands), dump and cache folders stay out.
COMPILATION_CONFIG: dict[str, str | tuple[str, ...]] = {
    "mode": INT,
    "cudagraph_capture_sizes": LIST,
    "max_cudagraph_capture_size": INT,
    "cudagraph_num_of_warmups": INT,
    "cudagraph_copy_inputs": BOOL,
    "compile_sizes": LIST,
    "custom_ops": LIST,
    "splitting_ops": LIST,
    "use_inductor_graph_partition": BOOL,
    "pass_config": MAPPING,
    "dynamic_shapes_config": MAPPING,
}

# Refused with a reason, because the reason is the useful part of the answer.
REFUSED: dict[str, str] = {
    "trust_remote_code": "it runs Python code shipped with the model",
    "enforce_eager": "the cell's graph mode sets it (graph mode NONE runs eagerly)",
    "model": "use the sweep's `model`",
    "tokenizer": "use the sweep's `tokenizer`",
    "speculative_config": "use the sweep's `speculative` list",
    "attention_backend": "use the sweep's `attention_backends`",
    "seed": "use `workload.seed`",
    "disable_log_stats": "the cell reads vLLM's stats for the spec-decode counters",
    "cudagraph_mode": "use the sweep's `cudagraph_modes`",
    "backend": "a compiler backend is an import path, which would load code",
    "inductor_compile_config": "it can name compiler commands",
}

_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    INT: (int,),
    NUMBER: (int, float),
    BOOL: (bool,),
    TEXT: (str,),
    LIST: (list,),
    MAPPING: (dict,),
}


def problems(engine_args: Mapping[str, Any]) -> list[tuple[list[str], str, list[str] | None]]:
    """Every engine argument that is not allowed or has the wrong JSON type.

    Returns
    -------
    list of (loc, message, allowed)
        ``loc`` below ``engine_args`` (``["compilation_config", "backend"]``); ``allowed`` lists the
        accepted names where the name itself is the problem, else None. Empty when all is well.
    """
    found: list[tuple[list[str], str, list[str] | None]] = []
    _check(engine_args, ENGINE_ARGS, [], found)
    nested = engine_args.get("compilation_config")
    if isinstance(nested, Mapping):
        _check(nested, COMPILATION_CONFIG, ["compilation_config"], found)
    return found


def _check(
    args: Mapping[str, Any],
    allowed: Mapping[str, str | tuple[str, ...]],
    prefix: list[str],
    found: list[tuple[list[str], str, list[str] | None]],
) -> None:
    where = ".".join(["engine_args", *prefix])
    for key, value in args.items():
        loc = [*prefix, key]
        if key in REFUSED and key not in allowed:
            found.append((loc, f"{where}.{key} is not accepted: {REFUSED[key]}", None))
        elif key not in allowed:
            found.append((loc, f"{where}.{key} is not an accepted engine argument", sorted(allowed)))
        elif value is not None and not _fits(value, allowed[key]):
            found.append((loc, f"{where}.{key} must be {_describe(allowed[key])}, not {value!r}", None))
        elif isinstance(value, str) and not SAFE.fullmatch(value):
            found.append((loc, f"{where}.{key} {value!r} may contain only {SAFE_CHARS}", None))


def _fits(value: Any, kind: str | tuple[str, ...]) -> bool:
    if isinstance(kind, tuple):
        return value in kind
    if isinstance(value, bool) and kind in (INT, NUMBER):
        return False  # JSON true is not a number, although Python's bool is an int
    return isinstance(value, _PYTHON_TYPES[kind])


def _describe(kind: str | tuple[str, ...]) -> str:
    if isinstance(kind, tuple):
        return "one of " + ", ".join(repr(choice) for choice in kind)
    return {INT: "an integer", BOOL: "true or false", LIST: "a list", MAPPING: "a mapping"}.get(kind, f"a {kind}")
