"""Run one benchmark cell inside a vLLM build's own Python and write what it measured as JSON.

Usage:

    python runners/cell.py SPEC.json RESULT.json

SPEC.json is a ``CellSpec`` and RESULT.json a ``CellResult``: the contract is ``app/schemas/cell.py``,
and the version this script writes is ``cellkit.SCHEMA_VERSION``. This file runs offline mode itself,
hands mode "serve" to ``serving.py`` and takes what both modes share from ``cellkit.py``, both beside
it. The three import only the standard library and vLLM (torch only for version and GPU facts),
because they run inside whatever build is being measured; the worker validates the JSON written.

What is measured and how (offline mode; serving.py says how the serving mode differs):
- import_s is the time from this script's start until vLLM's engine API is imported. Where the build
  has no bytecode and Python may not write any, compiling vLLM's sources is half of it or more; the
  worker gives cells a bytecode cache (``runners/execute.py``'s ``bytecode_env``).
- engine_start_s is the ``LLM(...)`` construction (model load, KV cache, compile and graph capture).
- Warm-up runs ``warmup_prompts`` prompts first, as one batch (the schema's default is the whole
  workload, so the rounds' batch shapes are compiled and captured before any is measured: with a
  few prompts, H200 cells' first rounds ran at a third of the speed of the rest).
- Then ``rounds`` measured rounds inside the same engine: each repeats the workload until
  ``min_window_s`` has passed (a 1-s window cannot tell a 10% effect from noise, and another engine
  start costs far more than another round). Each round reports its seconds, tokens and spec-decode
  counters (vLLM's are cumulative: read before and after each round, the difference reported);
  tokens_per_s is the median over rounds, the counters are summed with each round's kept.
- Where NVML reports it, each round's energy: the GPUs' energy counters (``cellkit.EnergyMeter``: millijoules since
  the driver loaded, summed over the cell's GPUs) read just inside the counters' reads around the round. Where it
  does not (the CPU engine, no driver, a GPU without the counter), ``energy`` says why and the joules are null.
- Each round keeps its passes (one run of the workload each): its seconds, from the end of the pass
  before (or the round's start) to its own end, so the passes tile the round, and its output tokens.
  The service's interval for the start resamples them (``app/analysis/passes.py``).
- The harness keeps its own noise out of the passes (``harness`` in the result says what ran): after the
  warm-up, ``gc.collect()`` then ``gc.freeze()``, so no collection scans the engine's long-lived objects
  again; during each pass the collector is off (on between passes, so garbage cannot pile up over a long
  round). ``DRAFTBENCH_GC_FREEZE=0`` and ``DRAFTBENCH_GC_PAUSE=0`` in the cell's environment turn each
  off (``benchmarks/cell_efficiency.py`` compares). Times come from ``time.perf_counter``, Linux's
  ``CLOCK_MONOTONIC``: clock steps cannot move it. vLLM's engine core freezes its own heap after start.
- ``wall_s`` is the process's time up to the result, so measured seconds over it is the cell's
  efficiency; ``model_runner`` says which of vLLM's model runners (V1, V2) the engine chose.
- Requests use ``ignore_eos=True``: every request produces exactly ``max_tokens`` tokens, so a
  speculative cell and its baseline do the same amount of work and tokens/s compare like for like
  (with random-weight test models EOS would otherwise end requests at arbitrary points).
- Each request gets its own sampling seed, so outputs do not depend on how vLLM batches the
  requests: the k-th measured request of the cell gets workload seed + k, so every pass draws anew
  (had each pass repeated its seeds, a pass at temperature > 0 would replay the first one's draws,
  and an interval over the counts of all passes would claim as many independent trials as were
  replayed); the warm-up's seeds start at ``cellkit.WARMUP_SEEDS``. ``request_seeds: false`` sends them
  unseeded instead, as ``vllm bench`` does (to compare with it: vLLM samples seeded requests one by one).
- Each request of the result is one of the workload's prompts, with its category and, where vLLM reports per-request
  spec-decode metrics (``per_request_spec_decode_metrics``, vLLM 0.32) for every measured request, its counters summed
  over every measured pass, so the requests add up to the rounds' counters (``cellkit.RequestCounts``, which serving
  cells share); its output tokens and fingerprint are the first pass's.
- Prompts come from the workload's dataset: ``draftbench`` (``runners/prompts/draftbench.jsonl``,
  shipped beside this file), ``random`` (token ids as ``vllm bench --dataset-name random`` makes
  them), or a path to Spec-Bench JSONL or ShareGPT JSON.

A worker may start the cell from its build's fork server (``forkserver.py`` beside this file), a process that
imported vLLM once and forks a child per cell: the child sets ``FORKED`` and ``CELL_STARTED`` and calls ``main``.

The result is written before vLLM is shut down (engine shutdown can hang); then vLLM gets a bounded
chance to stop, any engine process still alive is killed, and the process exits with ``os._exit(0)``.
On any exception the traceback is printed, leftover engine processes are killed and the exit code is 1.
"""

import contextlib
import dataclasses
import gc
import hashlib
import itertools
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

# cellkit (what both modes share) and serving live beside this file: run as a script, this folder is on
# sys.path; imported (tests, benchmarks), they are modules of the runners package.
if __package__:
    from runners import cellkit, serving
else:
    import cellkit
    import serving

# When this process started: a cell's wall time counts its imports and engine start. A fork server's child is
# given when the worker asked for it (perf_counter is CLOCK_MONOTONIC, one clock for every process of a host).
CELL_STARTED = time.perf_counter()
# Set in a fork server's child (forkserver.py): vLLM was imported before the cell started.
FORKED = False
# How long vLLM may take to stop its engine processes after the result is written.
SHUTDOWN_GRACE_S = 20.0
# The harness's noise controls, on unless the cell's environment sets these to 0.
GC_FREEZE_ENV = "DRAFTBENCH_GC_FREEZE"
GC_PAUSE_ENV = "DRAFTBENCH_GC_PAUSE"
# vLLM's own: a start may take the KV cache's size from an earlier start of its configuration (runners/execute.py).
STARTUP_PLAN_ENV = "VLLM_ENABLE_STARTUP_PLAN"


# ---------------------------------------------------------------------------- engine


def engine_kwargs(spec: dict[str, Any], engine_arg_names: set[str]) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM``: the cell's ``engine_args`` plus its backend, graph mode and speculation.

    The cell's own dimensions win over ``engine_args`` (they are what the cell measures); a
    ``compilation_config`` in ``engine_args`` is kept, with the cell's graph mode set in it.
    """
    kwargs: dict[str, Any] = dict(spec.get("engine_args") or {})
    kwargs.update(
        model=spec["model"],
        tokenizer=spec.get("tokenizer") or spec["model"],
        seed=spec["workload"].get("seed", 0),
        # Spec-decode counters only exist when stats are logged.
        disable_log_stats=False,
        attention_backend=spec["backend"],
    )
    if spec["graph_mode"] == "NONE":
        kwargs["enforce_eager"] = True
    else:
        compilation = kwargs.get("compilation_config", {})
        kwargs["compilation_config"] = {**compilation, "cudagraph_mode": spec["graph_mode"]}
    if spec.get("speculative") is not None:
        kwargs["speculative_config"] = dict(spec["speculative"])
        # Per-request acceptance only where this vLLM offers it (0.32 does; older builds reject the name).
        if "per_request_spec_decode_metrics" in engine_arg_names:
            kwargs["per_request_spec_decode_metrics"] = "summary"
    return kwargs


def engine_arg_names() -> set[str]:
    """Field names ``EngineArgs`` accepts in this vLLM build."""
    from vllm.engine.arg_utils import EngineArgs

    return {field.name for field in dataclasses.fields(EngineArgs)}


def has_chat_template(llm) -> bool:
    """Whether prompts should go through the chat template (only if the tokenizer has one)."""
    return bool(getattr(llm.get_tokenizer(), "chat_template", None))


def sampling_params(workload: dict[str, Any], count: int, offset: int = 0) -> list:
    """One ``SamplingParams`` per request; the seed is per request so batching cannot change outputs."""
    from vllm import SamplingParams

    seeded = workload.get("request_seeds", True)
    return [
        SamplingParams(
            temperature=workload.get("temperature", 0.0),
            max_tokens=workload["max_tokens"],
            seed=workload.get("seed", 0) + offset + index if seeded else None,
            ignore_eos=True,
        )
        for index in range(count)
    ]


def run_prompts(llm, prompts: list, params: list, chat: bool) -> list:
    """Generate for ``prompts`` (text, or token ids), text through the chat template when ``chat``."""
    if chat and prompts and isinstance(prompts[0], str):
        conversations = [[{"role": "user", "content": prompt}] for prompt in prompts]
        return llm.chat(conversations, params, use_tqdm=False)
    return llm.generate(prompts, params, use_tqdm=False)


# ---------------------------------------------------------------------------- metrics


def read_spec_decode_counters(llm) -> dict[str, Any]:
    """Current cumulative spec-decode counters, summed over engines (labels) if there are several."""
    return cellkit.counters_of(spec_decode_samples(llm.get_metrics()))


def spec_decode_samples(metrics: list) -> Iterator[tuple[str, int | None, int]]:
    """``(name, position, value)`` of vLLM's spec-decode metrics from ``LLM.get_metrics()``."""
    for metric in metrics:
        if metric.name == cellkit.PER_POSITION:
            yield from ((metric.name, position, int(value)) for position, value in enumerate(metric.values))
        elif metric.name in cellkit.SPEC_DECODE_COUNTERS.values():
            yield metric.name, None, int(metric.value)


def request_outcome(output) -> dict[str, Any]:
    """One request's output tokens and fingerprint."""
    completion = output.outputs[0]
    return {"num_output_tokens": len(completion.token_ids), "fingerprint": cellkit.fingerprint(completion.token_ids)}


def request_counters(output) -> dict[str, Any] | None:
    """One request's spec-decode counters, where vLLM filled per-request metrics (``per_request_spec_decode_metrics``)."""
    metrics = getattr(output.outputs[0], "spec_decode_metrics", None)
    if metrics is None:
        return None
    return cellkit.request_counters(metrics.num_draft_tokens, list(metrics.histogram))


def output_fingerprint(outputs: list) -> str:
    """sha256 over every request's token ids, in request order."""
    digest = hashlib.sha256()
    for output in outputs:
        digest.update(json.dumps(list(output.outputs[0].token_ids)).encode())
        digest.update(b"\n")
    return digest.hexdigest()


# ---------------------------------------------------------------------------- the cell


def run_cell(spec: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Start the engine, warm up, measure the rounds; return the result dict and what must be shut down."""
    kwargs = engine_kwargs(spec, engine_arg_names())
    if spec.get("mode") == "serve":
        return serving.run(spec, kwargs, started=CELL_STARTED)
    from vllm import LLM

    import_s = time.perf_counter() - CELL_STARTED
    workload = spec["workload"]
    random_tokens = workload["dataset"] == cellkit.RANDOM_DATASET
    prompts, categories = ([], []) if random_tokens else cellkit.load_prompts(workload)
    speculative = spec.get("speculative") is not None

    started = time.perf_counter()
    llm = LLM(**kwargs)
    engine_start_s = time.perf_counter() - started
    chat = has_chat_template(llm)
    if random_tokens:
        prompts = cellkit.random_prompts(workload, llm.get_tokenizer())
        categories = [cellkit.RANDOM_DATASET] * len(prompts)

    warmup = list(itertools.islice(itertools.cycle(prompts), workload.get("warmup_prompts", 0)))
    started = time.perf_counter()
    if warmup:
        run_prompts(llm, warmup, sampling_params(workload, len(warmup), offset=cellkit.WARMUP_SEEDS), chat)
    warmup_s = time.perf_counter() - started

    # Each workload request's spec-decode counters summed over the measured passes (cellkit.RequestCounts).
    counts = cellkit.RequestCounts(len(prompts)) if speculative else None

    def run_pass(index: int) -> list:
        outputs = run_prompts(llm, prompts, sampling_params(workload, len(prompts), offset=index * len(prompts)), chat)
        if counts is not None:
            for slot, output in enumerate(outputs):
                counts.count_request(slot, request_counters(output))
        return outputs

    harness = harness_settings(os.environ)
    if harness["gc_freeze"]:
        # What the engine's start left behind is long-lived: out of every later collection's scan.
        gc.collect()
        gc.freeze()
    meter = cellkit.energy_meter(spec, os.environ.get("CUDA_VISIBLE_DEVICES"))
    with counted_collections() as collections:
        rounds, outputs = measure_rounds(
            run_pass, read=(lambda: read_spec_decode_counters(llm)) if speculative else None,
            count=workload.get("rounds", 1), min_window_s=workload.get("min_window_s", 0.0),
            gc_pause=harness["gc_pause"], meter=meter,
        )
    harness["gc_collections"] = collections
    total = cellkit.totals(rounds, speculative=speculative)
    if counts is not None and (why := counts.reason()):
        print(f"per-request spec-decode counts not recorded: {why}", flush=True)
    result = {
        "schema_version": cellkit.SCHEMA_VERSION,
        "import_s": import_s,
        "engine_start_s": engine_start_s,
        "warmup_s": warmup_s,
        "generation_s": total.seconds,
        # The first pass of the workload: its requests, tokens and outputs.
        "num_requests": len(outputs),
        "prompt_tokens": sum(len(o.prompt_token_ids or []) for o in outputs),
        "output_tokens": sum(len(o.outputs[0].token_ids) for o in outputs),
        "tokens_per_s": total.tokens_per_s,
        "requests_per_s": total.requests_per_s,
        "spec_decode": total.spec_decode,
        "rounds": rounds,
        "energy": cellkit.energy_of(rounds, meter),
        "requests": cellkit.measured_requests([request_outcome(o) for o in outputs], categories, counts),
        "output_fingerprint": output_fingerprint(outputs),
        "versions": cellkit.versions(),
        "model_runner": model_runner(llm),
        "harness": harness,
        "wall_s": time.perf_counter() - CELL_STARTED,
    }
    return result, lambda: shutdown_engine(llm, SHUTDOWN_GRACE_S)


def harness_settings(env) -> dict[str, Any]:
    """What the harness does about its own noise in this cell (the result's ``harness``), read from ``env`` (a
    mapping) when the cell runs: a fork server's child gets its environment after its server imported this."""
    return {
        "gc_freeze": env.get(GC_FREEZE_ENV, "1") != "0",
        "gc_pause": env.get(GC_PAUSE_ENV, "1") != "0",
        "clock": time.get_clock_info("perf_counter").implementation,
        "cpus": len(os.sched_getaffinity(0)),
        "forked": FORKED,
        "startup_plan": env.get(STARTUP_PLAN_ENV, "0") != "0",
    }


@contextlib.contextmanager
def counted_collections() -> Iterator[list[int]]:
    """The garbage collector's runs of generations 0, 1 and 2 while the block runs, in the list it yields."""
    counts = [0, 0, 0]

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and 0 <= info.get("generation", -1) < len(counts):
            counts[info["generation"]] += 1

    gc.callbacks.append(count)
    try:
        yield counts
    finally:
        gc.callbacks.remove(count)


def measure_rounds(
    run_once, *, read, count: int, min_window_s: float, gc_pause: bool = False, meter: cellkit.EnergyMeter | None = None
) -> tuple[list[dict[str, Any]], list]:
    """``count`` rounds, each running passes ``run_once(index)`` until ``min_window_s`` has passed; the
    rounds, each with its passes, and the first pass's outputs. ``index`` counts the passes over all rounds
    (0, 1, 2, ...). A pass's seconds run from the previous pass's end (or the round's start) to its own, so
    the passes add up to their round; a round of more than ``cellkit.MAX_PASSES`` keeps none.

    ``read()`` gives the cumulative spec-decode counters (None without speculation): each round's are
    the difference across it. ``gc_pause`` turns the garbage collector off during each pass. ``meter`` reads each
    round's joules (``cellkit.timed_rounds``).
    """
    first, passes = None, itertools.count()

    def one_round() -> dict[str, Any]:
        nonlocal first
        started = mark = time.perf_counter()
        tokens = requests = 0
        timed: list[dict[str, Any]] = []
        while True:
            outputs = run_pass(run_once, next(passes), gc_pause)
            first = first if first is not None else outputs
            made = sum(len(o.outputs[0].token_ids) for o in outputs)
            tokens += made
            requests += len(outputs)
            now = time.perf_counter()
            timed.append({"seconds": now - mark, "output_tokens": made})
            mark = now
            if now - started >= min_window_s:
                kept = timed if len(timed) <= cellkit.MAX_PASSES else []
                return {"seconds": now - started, "output_tokens": tokens, "num_requests": requests, "passes": kept}

    rounds = cellkit.timed_rounds(one_round, read=read, count=count, meter=meter)
    return rounds, first


def run_pass(run_once, index: int, gc_pause: bool) -> list:
    """``run_once(index)``, with the garbage collector off while it runs when ``gc_pause``."""
    if not gc_pause:
        return run_once(index)
    gc.disable()
    try:
        return run_once(index)
    finally:
        gc.enable()


def model_runner(llm) -> str | None:
    """"V2" or "V1": which model runner this engine chose (None where the build does not say)."""
    config = getattr(getattr(llm, "llm_engine", None), "vllm_config", None)
    try:
        uses_v2 = getattr(config, "use_v2_model_runner", None)
    except Exception:
        return None
    return None if uses_v2 is None else ("V2" if uses_v2 else "V1")


def write_json(path: str, data: dict[str, Any]) -> None:
    """Write atomically (temp file + rename) and fsync, so the worker never reads half a result."""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def shutdown_engine(llm, grace_s: float) -> None:
    """Ask vLLM to stop its engine processes, waiting at most ``grace_s`` (shutdown can hang)."""
    engine_core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
    stop = getattr(engine_core, "shutdown", None)
    if stop is None:
        return
    thread = threading.Thread(target=stop, daemon=True)
    thread.start()
    thread.join(grace_s)


def descendants(root: int) -> list[int]:
    """Process ids below ``root`` in the process tree (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                # The command name (field 2) may hold spaces; the parent id is the 2nd field after it.
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, queue = [], [root]
    while queue:
        below = children.get(queue.pop(), [])
        found += below
        queue += below
    return found


def is_resource_tracker(pid: int) -> bool:
    """multiprocessing's resource tracker: it exits with us and frees shared memory vLLM leaked."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return b"multiprocessing.resource_tracker" in handle.read()
    except OSError:
        return False


def kill_descendants() -> None:
    """SIGKILL whatever vLLM left running (engine core, workers), so no orphan outlives the cell."""
    for pid in descendants(os.getpid()):
        if is_resource_tracker(pid):
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def finish(exit_code: int) -> None:
    """Kill leftover engine processes, flush, and exit now (Python's teardown can hang in vLLM's)."""
    kill_descendants()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        sys.exit(f"usage: {argv[0]} SPEC.json RESULT.json")
    with open(argv[1], encoding="utf-8") as handle:
        spec = json.load(handle)
    try:
        result, shutdown = run_cell(spec)
    except BaseException:
        # Print the root cause for the worker's crash signatures, then leave no engine process behind.
        traceback.print_exc()
        finish(exit_code=1)
    write_json(argv[2], result)
    print(f"cell result written to {argv[2]}", flush=True)
    # The result is safe on disk: give vLLM a bounded chance to stop cleanly, then make sure its
    # processes are gone (orphans would hold the worker's log pipe open) and exit without Python's
    # own teardown, which would run vLLM's shutdown again and can hang.
    shutdown()
    finish(exit_code=0)


if __name__ == "__main__":
    main(sys.argv)
