"""Expand a sweep into its cells: pure functions, no database."""

import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Any

from app.enums import AttentionBackend, GpuKind, Mode
from app.schemas.cell import CellSpec
from app.schemas.sweep import SpeculativeConfig, SweepSpec
from app.sweeps import engine_args as allowed


@dataclass(frozen=True)
class Cell:
    index: int
    spec: CellSpec

    @property
    def method(self) -> str | None:
        return self.spec.method


def runs_on(backend: AttentionBackend, gpu: GpuKind) -> bool:
    """CPU_ATTN is the CPU engine's only backend and runs nowhere else."""
    return (backend is AttentionBackend.CPU_ATTN) == (gpu is GpuKind.CPU)


def expand(spec: SweepSpec) -> list[Cell]:
    """The cartesian product GPU kind x backend x graph mode x speculative config (plus baselines)
    x env combination x concurrency (serve mode) x engine-argument combination.

    A config whose ``num_speculative_tokens`` is a list is one config per k, in its place and in
    ascending k (``each_k``). Backend/GPU pairs that cannot run (``runs_on``) are left out; repeats
    are not cells, the caller makes one job per cell and repeat.
    """
    speculative: list[dict[str, Any] | None] = [config for draft in spec.speculative for config in each_k(draft)]
    if spec.baseline:
        speculative = [None, *speculative]
    cells = []
    for gpu, backend, mode, spec_config, env, concurrency, engine in itertools.product(
        spec.gpu_kinds, spec.backends, spec.graph_modes, speculative, env_combinations(spec.env), concurrencies(spec),
        engine_args_combinations(spec.engine_args),
    ):
        if not runs_on(backend, gpu):
            continue
        cell = CellSpec(
            build=spec.build,
            gpu_kind=gpu,
            model=spec.model,
            tokenizer=spec.tokenizer,
            workload=spec.workload,
            speculative=spec_config,
            backend=backend,
            graph_mode=mode,
            engine_args=engine,
            timeout_s=spec.timeout_s,
            mode=spec.mode,
            concurrency=concurrency,
            env=env,
        )
        cells.append(Cell(index=len(cells), spec=cell))
    return cells


def k_values(draft: SpeculativeConfig) -> list[int]:
    """The config's k: its one integer, or each of its list (ascending: the schema sorts it)."""
    k = draft.num_speculative_tokens
    return [k] if isinstance(k, int) else list(k)


def each_k(draft: SpeculativeConfig, *, mode: str = "python") -> list[dict[str, Any]]:
    """The config as vLLM takes it (``model_dump(exclude_none=True)``), once per k of ``k_values``.

    A config with one integer is its dump unchanged, so its cells and config hashes are what they were. On a k axis,
    ``synthetic_acceptance_rates`` (one rate per position up to the largest k: the schema checks it) gives each cell
    its first k rates, as vLLM takes one per drafted position: position i's rate does not depend on k.
    """
    dumped = draft.model_dump(exclude_none=True, mode=mode)
    rates = dumped.get("synthetic_acceptance_rates")
    return [{**dumped, "num_speculative_tokens": k, **({"synthetic_acceptance_rates": rates[:k]} if rates else {})}
            for k in k_values(draft)]


def repeated_draft(spec: SweepSpec) -> tuple[int, int, int] | None:
    """The first speculative config that makes a cell an earlier one makes already, as (its index, the earlier one's,
    the k), or None. Identical entries do, and so do k axes that share a k with all else equal: each such cell would
    run, and cost, twice. Walks every config of ``each_k``: call it once the job count has bounded them."""
    made: dict[str, int] = {}
    for index, draft in enumerate(spec.speculative):
        for config in each_k(draft, mode="json"):
            key = json.dumps(config, sort_keys=True)
            if key in made:  # one entry's ks are distinct, so the earlier one is another entry
                return index, made[key], config["num_speculative_tokens"]
            made[key] = index
    return None


def speculative_count(spec: SweepSpec) -> int:
    """How many speculative configs ``expand`` crosses with the other axes: one per k, and the baseline."""
    return sum(len(k_values(draft)) for draft in spec.speculative) + spec.baseline


def env_combinations(env: dict[str, list[str]]) -> list[dict[str, str]]:
    """``{A: [0, 1], B: [x]}`` -> ``[{A: 0, B: x}, {A: 1, B: x}]``; one empty combination without an axis."""
    names = sorted(env)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*(env[name] for name in names))]


def engine_args_combinations(engine_args: dict[str, Any]) -> list[dict[str, Any]]:
    """``{tensor_parallel_size: [1, 2], max_num_seqs: 8}`` -> ``[{tensor_parallel_size: 1, max_num_seqs: 8},
    {tensor_parallel_size: 2, max_num_seqs: 8}]``: each argument ``engine_args.axes`` names is an axis, in its listed
    order; ``engine_args`` alone without one, so a sweep without an axis keeps its cells and config hashes."""
    axes = allowed.axes(engine_args)
    names = sorted(axes)
    return [{**engine_args, **dict(zip(names, values, strict=True))} for values in itertools.product(*(axes[n] for n in names))]


def concurrencies(spec: SweepSpec) -> list[int | None]:
    """The serve mode's client counts (default one client); offline cells have none."""
    if spec.mode is Mode.OFFLINE:
        return [None]
    return list(spec.concurrency) or [1]


def gpus_needed(cell: CellSpec) -> int:
    """GPUs the cell takes on one host: ``tensor_parallel_size`` x ``pipeline_parallel_size``.

    0 on the CPU engine. Raises ValueError when either size is not a positive integer, on the CPU engine too.
    """
    total = 1
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        # None is vLLM's default, one (app.sweeps.engine_args).
        size = 1 if cell.engine_args.get(key) is None else cell.engine_args[key]
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"engine_args.{key} must be a positive integer, got {size!r}")
        total *= size
    return 0 if cell.gpu_kind is GpuKind.CPU else total


def canonical(cell: CellSpec) -> dict[str, Any]:
    """The cell as plain JSON with a stable key order: what the job stores and the worker runs."""
    return json.loads(json.dumps(cell.model_dump(mode="json"), sort_keys=True))


def config_hash(cell: CellSpec) -> str:
    """sha256 of the canonical cell: equal hashes mean the same experiment, across sweeps."""
    return hashlib.sha256(json.dumps(canonical(cell), sort_keys=True, separators=(",", ":")).encode()).hexdigest()
