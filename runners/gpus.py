"""The GPUs of this host, from nvidia-smi: which kind each one is, and how workers split them.

``kind_of``, ``parse_nvidia_smi`` and ``parse_memory_used`` are pure (tests pass nvidia-smi's text in);
``list_gpus`` and ``memory_used`` are the only functions here that run a command.
"""

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from app.enums import GpuKind

# nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader
QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"]
MEMORY_QUERY = ["nvidia-smi", "--query-gpu=index,uuid,memory.used", "--format=csv,noheader,nounits"]
_SEPARATORS = re.compile(r"[\s\-_/]+")


@dataclass(frozen=True)
class Gpu:
    index: str
    uuid: str
    name: str

    @property
    def kind(self) -> GpuKind | None:
        return kind_of(self.name)


class GpuError(RuntimeError):
    """The GPUs asked for do not exist, or their kind cannot be told."""


def kind_of(name: str) -> GpuKind | None:
    """The GPU kind of a device name as nvidia-smi (or rocm-smi) prints it; None for an unknown GPU.

    Each kind is matched as whole words, so ``H20`` is not read inside ``H200`` nor ``B200``
    inside ``GB200``: ``NVIDIA H100 80GB HBM3`` -> H100, ``NVIDIA A100-SXM4-80GB`` -> A100,
    ``NVIDIA RTX PRO 6000 Blackwell Server Edition`` -> RTX_PRO_6000,
    ``AMD Instinct MI300X`` -> MI300X. Unknown names (``NVIDIA L40``, ``NVIDIA GH200 480GB``)
    give None rather than a near miss.
    """
    words = _SEPARATORS.split(name.upper().strip())
    best: tuple[int, GpuKind] | None = None
    for kind in GpuKind:
        if kind is GpuKind.CPU:
            continue
        wanted = kind.value.upper().split("_")
        if _contains(words, wanted) and (best is None or len(wanted) > best[0]):
            best = (len(wanted), kind)
    return None if best is None else best[1]


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """Rows of ``nvidia-smi --query-gpu=index,uuid,name --format=csv,noheader``."""
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        parts = [part.strip() for part in line.split(",", 2)]
        if len(parts) != 3:
            raise GpuError(f"unexpected nvidia-smi line: {line!r}")
        gpus.append(Gpu(index=parts[0], uuid=parts[1], name=parts[2]))
    return gpus


def list_gpus() -> list[Gpu]:
    """This host's NVIDIA GPUs in nvidia-smi's (PCI bus) order; empty without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return []
    out = subprocess.run(QUERY, capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise GpuError(f"nvidia-smi failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")
    return parse_nvidia_smi(out.stdout)


def parse_memory_used(text: str) -> dict[str, int]:
    """MiB in use per GPU, under its index and its UUID, from ``MEMORY_QUERY``'s output."""
    used: dict[str, int] = {}
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 3 or not parts[2].isdigit():
            if line.strip():
                raise GpuError(f"unexpected nvidia-smi line: {line!r}")
            continue
        used[parts[0]] = used[parts[1]] = int(parts[2])
    return used


def memory_used() -> dict[str, int]:
    """MiB in use per GPU of this host (``parse_memory_used``); empty without nvidia-smi, or when it fails or
    prints what it cannot read (a GPU without the figure): the worker then waits for nothing."""
    if shutil.which("nvidia-smi") is None:
        return {}
    try:
        out = subprocess.run(MEMORY_QUERY, capture_output=True, text=True, timeout=30)
        return parse_memory_used(out.stdout) if out.returncode == 0 else {}
    except (subprocess.TimeoutExpired, GpuError):
        return {}


def wait_for_release(
    before: Mapping[str, int],
    *,
    read: Callable[[], Mapping[str, int]] = memory_used,
    timeout_s: float = 60.0,
    margin_mib: int = 1024,
    poll_s: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> float:
    """Wait until each GPU in ``before`` uses at most ``before[gpu] + margin_mib`` MiB again; the seconds waited.

    Why: a cell's engine processes are killed when it ends, but the driver hands their memory back a moment
    later. A cell forked from a build's fork server starts its engine within a second, and vLLM refuses to start
    when less is free than ``gpu_memory_utilization`` asks for: two cells at 0.6 back to back would fail on
    the first one's memory. Gives up after ``timeout_s`` (the memory is someone else's, or stays lost): the next
    cell then starts and, if memory is short, fails with its own ``free_memory`` crash, which says so.
    """
    start = clock()
    while True:
        now = read()
        if all(now.get(gpu, 0) <= used + margin_mib for gpu, used in before.items()):
            return clock() - start
        if clock() - start >= timeout_s:
            return clock() - start
        sleep(poll_s)


def pick(gpus: Sequence[Gpu], ids: Sequence[str]) -> list[Gpu]:
    """The GPUs named by index or UUID, in the order given; GpuError for one that does not exist."""
    chosen = []
    for wanted in ids:
        match = [gpu for gpu in gpus if wanted in (gpu.index, gpu.uuid)]
        if not match:
            known = ", ".join(f"{gpu.index} ({gpu.name})" for gpu in gpus) or "none"
            raise GpuError(f"no GPU {wanted!r} on this host; nvidia-smi lists: {known}")
        chosen.append(match[0])
    return chosen


def kinds_of(gpus: Sequence[Gpu]) -> list[GpuKind]:
    """The one kind of a group of GPUs; GpuError when one is unknown or they differ."""
    kinds = {gpu.kind for gpu in gpus}
    if None in kinds:
        unknown = sorted({gpu.name for gpu in gpus if gpu.kind is None})
        raise GpuError(f"unknown GPU kind for {', '.join(unknown)}: pass --gpu-kind (one of {', '.join(GpuKind)})")
    if len(kinds) > 1:
        raise GpuError(
            f"GPUs {', '.join(g.index for g in gpus)} are of different kinds ({', '.join(sorted(kinds))}): "
            "a cell runs on GPUs of one kind, start one worker per kind"
        )
    return sorted(kinds)  # type: ignore[arg-type]


def parse_ids(text: str) -> list[str]:
    """``"0"``, ``"0,1"`` or ``"GPU-3f..."`` -> the device ids, as CUDA_VISIBLE_DEVICES takes them."""
    ids = [part.strip() for part in text.split(",") if part.strip()]
    if not ids:
        raise GpuError(f"no GPU in {text!r}")
    if len(set(ids)) != len(ids):
        raise GpuError(f"a GPU is named twice in {text!r}")
    return ids


def groups(ids: Sequence[str], per_worker: int) -> list[list[str]]:
    """Split the GPUs into one group per worker process: ``0..7`` by 2 -> ``[0,1] [2,3] [4,5] [6,7]``.

    Raises GpuError when the count does not divide evenly (a GPU would sit idle, or be shared).
    """
    if per_worker < 1:
        raise GpuError("--gpus-per-worker must be at least 1")
    if not ids or len(ids) % per_worker:
        raise GpuError(f"{len(ids)} GPUs cannot be split into workers of {per_worker}")
    return [list(ids[i : i + per_worker]) for i in range(0, len(ids), per_worker)]


def _contains(words: Sequence[str], wanted: Sequence[str]) -> bool:
    n = len(wanted)
    return any(list(words[i : i + n]) == list(wanted) for i in range(len(words) - n + 1))
