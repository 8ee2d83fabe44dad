"""What a cell's two modes (``cell.py`` offline, ``serving.py``) share: the result's schema version, the
workload's prompts and seeds, the spec-decode counters, the GPUs' energy counters, the rounds and what they add
up to, fingerprints and the build's version facts.

Standard library only (vLLM and torch are imported where the version facts are read), because it runs
inside the build being measured, beside ``cell.py``, which imports it by path when run as a script.
"""

import hashlib
import importlib
import importlib.metadata
import itertools
import json
import os
import platform
import random
import sys
import traceback
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, NoReturn

# app.schemas.cell.CELL_SCHEMA_VERSION and MAX_PASSES; the cell cannot import them (tests/runners/test_cellkit.py
# ties them).
SCHEMA_VERSION = 9
MAX_PASSES = 10_000
# The warm-up's request seeds start here (workload seed + this + index), far from the measured
# requests' (workload seed + k for the k-th), so no measured request replays a warm-up draw.
WARMUP_SEEDS = 1 << 31
# app.enums.BuiltinDataset, by value (tied by tests/runners/test_cellkit.py).
BUILTIN_PROMPTS = "draftbench"
RANDOM_DATASET = "random"
PROMPTS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts", "draftbench.jsonl")
# The category of a prompt whose file gives none (ShareGPT, a Spec-Bench line without one); random token prompts are
# of the category "random".
UNCATEGORISED = "uncategorised"

# The result's counter fields and vLLM's metric names for them (the server's exposition adds ``_total``).
SPEC_DECODE_COUNTERS = {
    "num_drafts": "vllm:spec_decode_num_drafts",
    "num_draft_tokens": "vllm:spec_decode_num_draft_tokens",
    "num_accepted_tokens": "vllm:spec_decode_num_accepted_tokens",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"
# NVML's Python bindings as vLLM ships them (0.26 and 0.32 alike): no package beyond vLLM's own.
NVML_MODULE = "vllm.third_party.pynvml"
# app.enums.GpuKind.CPU, by value: the CPU engine, whose energy no GPU counter measures.
CPU_KIND = "cpu"


# ---------------------------------------------------------------------------- workload


def load_prompts(workload: dict[str, Any]) -> tuple[list[str], list[str]]:
    """First turns of the workload's prompt file, filtered by category, cycled up to ``num_prompts``, and each
    one's category (``UNCATEGORISED`` where the file gives none), in the same order.

    Spec-Bench JSONL (``{"category", "turns": [...]}`` per line) or ShareGPT JSON (a list of
    ``{"conversations": [{"from": "human", "value": ...}, ...]}``; the first human turn, no category).
    """
    path = PROMPTS_FILE if workload["dataset"] == BUILTIN_PROMPTS else workload["dataset"]
    categories = set(workload.get("categories") or [])
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if text.lstrip().startswith("["):
        turns = [first_human_turn(record) for record in json.loads(text)]
        found = [(UNCATEGORISED, q) for q in turns if q is not None and not categories]
    else:
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        found = [(r.get("category") or UNCATEGORISED, r["turns"][0])
                 for r in records if not categories or r.get("category") in categories]
    if not found:
        raise ValueError(f"no prompts in {path} for categories {sorted(categories)}")
    chosen = list(itertools.islice(itertools.cycle(found), workload["num_prompts"]))
    return [q for _, q in chosen], [c for c, _ in chosen]


def first_human_turn(record: dict[str, Any]) -> str | None:
    """The first message a user wrote in a ShareGPT conversation."""
    for turn in record.get("conversations") or []:
        if turn.get("from") in ("human", "user"):
            return turn.get("value")
    return None


def random_prompts(workload: dict[str, Any], tokenizer) -> list[dict[str, Any]]:
    """Token-id prompts as ``vllm bench --dataset-name random`` builds them, seeded by ``workload.seed``.

    Prompt i has a length drawn uniformly from ``input_len * [1 - range_ratio, 1 + range_ratio]``
    and holds consecutive token ids from a random offset (``(offset_i + i + j) mod V``), skipping
    special tokens. The ids go to vLLM as they are, so every length is exact.
    """
    rng = random.Random(workload.get("seed", 0))
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    vocabulary = [token for token in range(len(tokenizer)) if token not in special]
    length, ratio = workload["input_len"], workload.get("range_ratio") or 0.0
    low, high = max(1, int(length * (1 - ratio))), int(length * (1 + ratio))
    prompts = []
    for i in range(workload["num_prompts"]):
        size, offset = rng.randint(low, max(low, high)), rng.randrange(len(vocabulary))
        ids = [vocabulary[(offset + i + j) % len(vocabulary)] for j in range(size)]
        prompts.append({"prompt_token_ids": ids})
    return prompts


# ---------------------------------------------------------------------------- spec-decode counters


def no_counters() -> dict[str, Any]:
    """Spec-decode counters at zero, in the result's field order."""
    return {**dict.fromkeys(SPEC_DECODE_COUNTERS, 0), "accepted_per_position": []}


def add_counters(left: dict[str, Any], right: dict[str, Any], sign: int = 1) -> dict[str, Any]:
    """``left + sign * right``, counter by counter; the per-position counts position by position, the
    shorter list counting as zero-padded. The one sum behind engines', rounds' and differences' counters."""
    total = {key: left[key] + sign * right[key] for key in SPEC_DECODE_COUNTERS}
    ours, theirs = left["accepted_per_position"], right["accepted_per_position"]
    size = max(len(ours), len(theirs))
    ours, theirs = ours + [0] * (size - len(ours)), theirs + [0] * (size - len(theirs))
    total["accepted_per_position"] = [a + sign * b for a, b in zip(ours, theirs, strict=True)]
    return total


def counters_of(samples: Iterable[tuple[str, int | None, int]]) -> dict[str, Any]:
    """Cumulative spec-decode counters from vLLM's samples ``(metric name, position, value)``, summed over
    label sets (several engines); ``position`` is None but for the per-position counts. Other metrics are
    left out."""
    fields = {name: key for key, name in SPEC_DECODE_COUNTERS.items()}
    total = no_counters()
    for name, position, value in samples:
        sample = no_counters()
        if name in fields and position is None:
            sample[fields[name]] = value
        elif name == PER_POSITION and position is not None:
            sample["accepted_per_position"] = [0] * position + [value]
        else:
            continue
        total = add_counters(total, sample)
    return total


def request_counters(num_draft_tokens: int, histogram: list[int]) -> dict[str, Any]:
    """One request's spec-decode counters, in the result's fields, from vLLM's per-request metrics
    (``RequestSpecDecodeMetrics``: ``histogram[j]`` counts its verify steps that accepted ``j`` draft tokens).

    Drafts ``sum_j h_j``, accepted ``sum_j j h_j``, and position ``i`` (1 first) accepted in ``sum_{j >= i} h_j``
    steps: vLLM's aggregate counters count a step that accepted ``j`` once at each of positions 1 to ``j``, so the
    requests' counters add up to the aggregate ones.
    """
    return {
        "num_drafts": sum(histogram),
        "num_draft_tokens": num_draft_tokens,
        "num_accepted_tokens": sum(j * count for j, count in enumerate(histogram)),
        "accepted_per_position": [sum(histogram[i:]) for i in range(1, len(histogram))],
    }


class RequestCounts:
    """Each workload request's spec-decode counters summed over every measured pass, in both modes: a prompt replayed
    pass after pass at temperature 0 repeats its drafts, so the request, not the pass, is the unit the service
    resamples. The one count behind offline and serving cells' ``requests``.

    ``count_request(slot, counters)`` adds one measured request of workload slot ``slot`` (its counters None where
    vLLM reported none: a build without ``per_request_spec_decode_metrics``, a stream that broke off). The counts are
    kept only when every measured request reported them (:meth:`kept`): otherwise the requests' sums would fall short of
    the engine's counters, which the service checks them against; :meth:`reason` then says why there are none.
    """

    def __init__(self, size: int) -> None:
        self.sums: list[dict[str, Any] | None] = [None] * size
        self.measured = 0
        self.missing = 0

    def count_request(self, slot: int, counters: dict[str, Any] | None) -> None:
        self.measured += 1
        if counters is None:
            self.missing += 1
            return
        mine = self.sums[slot]
        self.sums[slot] = dict(counters) if mine is None else add_counters(mine, counters)

    def kept(self) -> list[dict[str, Any] | None]:
        """Each slot's summed counters, or None for every slot unless every measured request reported its own."""
        return list(self.sums) if self.reason() is None else [None] * len(self.sums)

    def reason(self) -> str | None:
        """Why no request's counters are kept, or None when they are."""
        if not self.measured:
            return "no measured request"
        if self.missing:
            return f"{self.missing} of {self.measured} measured requests reported no per-request spec-decode counts"
        return None


def measured_requests(
    outcomes: list[dict[str, Any]], categories: list[str], counts: RequestCounts | None
) -> list[dict[str, Any]]:
    """The result's ``requests``: the workload's requests in order, each its first pass's outcome
    (``num_output_tokens``, ``fingerprint``), its prompt's category and, where every measured request was counted
    (``counts``; None without speculation), its spec-decode counters summed over every measured pass."""
    kept = counts.kept() if counts is not None else [None] * len(outcomes)
    return [{**outcome, "category": category, **(counters or {})}
            for outcome, category, counters in zip(outcomes, categories, kept, strict=True)]


def counters_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What a measured run added to the cumulative counters (vLLM's count from the engine's start)."""
    return add_counters(after, before, sign=-1)


def sum_counters(counters: list[dict[str, Any]]) -> dict[str, Any]:
    """Spec-decode counters of several rounds added up."""
    total = no_counters()
    for more in counters:
        total = add_counters(total, more)
    return total


# ---------------------------------------------------------------------------- energy


class EnergyMeter:
    """The energy counters of the GPUs a cell uses, summed: NVML's ``nvmlDeviceGetTotalEnergyConsumption``,
    millijoules since the driver loaded (Volta and newer).

    A meter that cannot read says why in ``reason`` and reads None from then on: a GPU without the counter, a
    driver NVML cannot reach, or a counter that went back costs the cell its energy, never the cell.
    """

    def __init__(self, nvml: Any = None, handles: dict[str, Any] | None = None, reason: str | None = None):
        self.nvml, self.handles, self.reason = nvml, handles or {}, reason

    @property
    def gpus(self) -> list[str]:
        """The UUIDs of the GPUs read."""
        return list(self.handles)

    def read(self) -> int | None:
        """Millijoules summed over the GPUs; None once any read failed."""
        if self.reason is not None:
            return None
        try:
            return sum(int(self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle)) for handle in self.handles.values())
        except Exception as error:  # NVMLError_NotSupported and kin: the counter is not there to read
            self.reason = f"NVML: {error or type(error).__name__}"
            return None

    def joules(self, before: int | None, after: int | None) -> float | None:
        """``(after - before) / 1000``: the joules between two readings. None without both, or when the counter went
        back (it wrapped, or the driver reloaded between them): then this meter reads nothing more."""
        if before is None or after is None:
            return None
        if after < before:
            self.reason = f"the energy counter went back from {before} to {after} mJ (wrapped, or the driver reloaded)"
            return None
        return (after - before) / 1000


def energy_meter(spec: dict[str, Any], visible: str | None, nvml: Any = None) -> EnergyMeter:
    """The meter of the GPUs ``spec`` runs on: the first ``gpus_used(spec)`` entries of ``visible``
    (CUDA_VISIBLE_DEVICES; unset: every GPU by index), each an index or a UUID, opened by UUID so a GPU named twice
    counts once. Indices are NVML's: the worker sets CUDA_DEVICE_ORDER=PCI_BUS_ID, NVML's own order. ``nvml``: the
    bindings (default ``NVML_MODULE``); a meter with its reason where they cannot be loaded or initialised."""
    if spec.get("gpu_kind") == CPU_KIND:
        return EnergyMeter(reason="the CPU engine")
    try:
        nvml = nvml or importlib.import_module(NVML_MODULE)
        nvml.nvmlInit()
        count = gpus_used(spec)
        entries = [e.strip() for e in visible.split(",") if e.strip()] if visible is not None else [str(i) for i in range(count)]
        if len(entries) < count:
            return EnergyMeter(reason=f"{count} GPUs used but CUDA_VISIBLE_DEVICES names {len(entries)}")
        handles = {}
        for entry in entries[:count]:
            handle = nvml.nvmlDeviceGetHandleByIndex(int(entry)) if entry.isdigit() else nvml.nvmlDeviceGetHandleByUUID(entry)
            uuid = nvml.nvmlDeviceGetUUID(handle)
            handles[uuid.decode() if isinstance(uuid, bytes) else str(uuid)] = handle
    except Exception as error:  # no libnvidia-ml, no driver, a UUID NVML does not know
        return EnergyMeter(reason=f"NVML: {error or type(error).__name__}")
    return EnergyMeter(nvml, handles)


def gpus_used(spec: dict[str, Any]) -> int:
    """GPUs one engine of ``spec`` takes: tensor x pipeline parallel (as app.sweeps.matrix.gpus_needed counts them)."""
    args = spec.get("engine_args") or {}
    return int(args.get("tensor_parallel_size") or 1) * int(args.get("pipeline_parallel_size") or 1)


def energy_of(rounds: list[dict[str, Any]], meter: EnergyMeter) -> dict[str, Any]:
    """The result's ``energy``: the rounds' joules summed and the GPUs read, or None joules and why (a start with
    one round unread reports none: joules over some rounds beside tokens over all would be a wrong tokens/J)."""
    joules = [r.get("energy_j") for r in rounds]
    if rounds and all(j is not None for j in joules):
        return {"joules": sum(joules), "gpus": meter.gpus, "reason": None}
    return {"joules": None, "gpus": meter.gpus, "reason": f"not reported ({meter.reason or 'no measured round'})"}


# ---------------------------------------------------------------------------- rounds


class Totals(NamedTuple):
    """What a cell's rounds add up to, as its result reports them."""

    seconds: float
    # The median over rounds of output tokens / seconds (the upper one of an even count).
    tokens_per_s: float
    requests_per_s: float
    spec_decode: dict[str, Any] | None


def timed_rounds(
    run_round: Callable[[], dict[str, Any]], *, read: Callable[[], dict[str, Any]] | None, count: int,
    meter: EnergyMeter | None = None,
) -> list[dict[str, Any]]:
    """``count`` rounds of ``run_round()`` (a round as the result lists it: its ``seconds``, ``output_tokens``,
    ``num_requests`` and, offline, its ``passes``), each with its spec-decode counters and, with a ``meter``, the
    joules its GPUs used (``energy_j``, None where the meter cannot read).

    ``read()`` gives the cumulative spec-decode counters (None without speculation): a round's are their
    difference across it, read outside its window; the energy counters are read inside those reads, closest to it.
    """
    rounds = []
    for _ in range(count):
        before = read() if read else None
        energy_before = meter.read() if meter else None
        measured = run_round()
        energy = {"energy_j": meter.joules(energy_before, meter.read())} if meter else {}
        rounds.append({**measured, "spec_decode": counters_delta(before, read()) if read else None, **energy})
    return rounds


def totals(rounds: list[dict[str, Any]], *, speculative: bool) -> Totals:
    """The rounds' seconds, their median tokens/s, requests/s over them and, with speculation, their counters."""
    seconds = sum(r["seconds"] for r in rounds)
    speeds = sorted(r["output_tokens"] / r["seconds"] for r in rounds if r["seconds"] > 0)
    return Totals(
        seconds=seconds,
        tokens_per_s=speeds[len(speeds) // 2] if speeds else 0.0,
        requests_per_s=sum(r["num_requests"] for r in rounds) / seconds if seconds > 0 else 0.0,
        spec_decode=sum_counters([r["spec_decode"] for r in rounds]) if speculative else None,
    )


def fingerprint(tokens: Iterable[Any]) -> str:
    """A short, stable identity of one sequence: token ids, texts, or one text's characters."""
    return hashlib.sha256(json.dumps(list(tokens)).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------- versions


def versions() -> dict[str, Any]:
    """The build's vLLM (version and commit), FlashInfer, Python, and torch's and the GPU's facts."""
    import vllm

    return {
        "vllm": vllm.__version__,
        "vllm_commit": vllm_commit(),
        "flashinfer": package_version("flashinfer-python") or package_version("flashinfer"),
        "python": platform.python_version(),
        **gpu_versions(),
    }


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def vllm_commit() -> str | None:
    """The commit vLLM was built from, where the build records it (``vllm._version``)."""
    try:
        version_module = importlib.import_module("vllm._version")
    except ImportError:
        return None
    return getattr(version_module, "__commit_id__", None) or getattr(version_module, "commit_id", None)


def gpu_versions() -> dict[str, Any]:
    """torch and CUDA versions, and the GPU's name, capability and driver when CUDA is available."""
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return {}
    facts: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(0)
        facts["gpu_name"] = torch.cuda.get_device_name(0)
        facts["compute_capability"] = f"{major}.{minor}"
        facts["driver"] = nvidia_driver()
    return facts


def nvidia_driver() -> str | None:
    """The NVIDIA driver version from the kernel module, without needing nvidia-smi."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as handle:
            first = handle.readline()
    except OSError:
        return None
    words = first.split()
    return next((w for w in words if w[0].isdigit() and "." in w), None)


def exit_after(run: Callable[[], object], *, returned: int) -> NoReturn:
    """In a forked child: ``run()``, then end the process with ``os._exit``, so that it never returns into the code of
    the process it was forked from (the fork server's loop, a cell's rounds). The status: ``returned`` when ``run``
    returns, a ``SystemExit``'s as Python gives it (an int as it is, None 0, a message printed to stderr and 1), and 1
    with the traceback printed for anything else. stdout and stderr are flushed first (``os._exit`` does not)."""
    code = returned
    try:
        run()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
        if not isinstance(stop.code, int) and stop.code is not None:
            print(stop.code, file=sys.stderr)
    except BaseException:
        code = 1
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
