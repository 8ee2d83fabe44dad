"""Where a cell's time goes, the same cell started today's way and the new ways, alternating (real vLLM).

    python3 -m benchmarks.cell_efficiency --python BUILD_PYTHON [--shape tiny|qwen3-8b] [--draft none|self]
        [--ways fresh,forked] [--runs 3] [--work DIR] [--out RESULTS.json]

Each run is one cell through ``runners/execute.py``, as the worker runs it (its own process group, log and
timeout, the worker's bytecode cache), and its ``result.json`` as ``runners/cell.py`` wrote it. A way is a base
and modifiers joined by ``+``:

- ``fresh``: a new process of the build's Python per cell, which imports vLLM (the worker before the fork server);
- ``forked``: forked from a fork server of the build's Python that imported vLLM once (``runners/forkserver.py``,
  the worker's default; one server per way, so the first forked run of a way pays the server's import);
- ``+inproc``: vLLM's engine core in the cell's own process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``);
- ``+nogc``, ``+nogc-freeze``, ``+nogc-pause``: the harness's garbage-collector settings off (both, or one:
  ``DRAFTBENCH_GC_FREEZE=0``, ``DRAFTBENCH_GC_PAUSE=0``), to see whether they move the spread;
- ``+noplan``: without vLLM's startup plan (``VLLM_ENABLE_STARTUP_PLAN=0``; the worker sets 1), so every start
  profiles memory again. A run's ``plan`` says what vLLM's log says it did with the plan: ``saved`` (it profiled
  and kept the result), ``applied`` (it skipped profiling), ``refused`` (less free memory than when it was saved);
- ``+noengine``: the fork server leaves vLLM's engine worker to each engine (``DRAFTBENCH_ENGINE_PRELOAD=0``), to
  measure what its import in the server saves.

The ways alternate within each run (fresh, forked, fresh, forked, ...), so a host's drift falls on all alike.
Printed per run: the plan, import_s, engine_start_s, warmup_s, the measured seconds, the cell's wall seconds (to its
result) and the process's (with shutdown), efficiency (measured over wall), tokens/s with the start's interval
(``app.analysis.passes.start_interval``, as the service stores it: a block bootstrap over the passes) and the passes'
spread (coefficient of variation of their tokens/s); then the medians per way, and the spread of tokens/s between
a way's starts.

``--shape tiny`` is the 2-layer random model of the CPU tests (``runners/tiny_model.py``), on the CPU engine;
``--shape qwen3-8b`` is Qwen3-8B's shape, config only (``load_format=dummy``), on FLASH_ATTN with
FULL_AND_PIECEWISE graphs, 32 prompts of 128 tokens, as ``examples/h200/noise-8b.yaml``; ``--draft self`` adds the
target as its own draft (k=3). Models are made once under ``--work``.

Standard library only beside the build (the H200 machine runs it with its python3 and vLLM alone): nothing of the
service is imported.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from app.analysis.passes import start_interval
from runners import execute, forkserver

ROOT = Path(__file__).resolve().parent.parent
CELL_SCRIPT = ROOT / "runners" / "cell.py"
SHAPES = {
    "tiny": {
        "model": [],
        "gpu_kind": "cpu", "backend": "CPU_ATTN", "graph_mode": "NONE",
        "engine_args": {"max_model_len": 512, "kv_cache_memory_bytes": 256 * 2**20, "max_num_seqs": 8},
        "workload": {"num_prompts": 6, "max_tokens": 32},
    },
    "qwen3-8b": {
        # Qwen3-8B's published sizes (benchmarks/h200_proof.py's QWEN3_8B).
        "model": ["--config-only", "--layers", "36", "--hidden", "4096", "--heads", "32", "--kv-heads", "8",
                  "--vocab", "151936"],
        "gpu_kind": "H200", "backend": "FLASH_ATTN", "graph_mode": "FULL_AND_PIECEWISE",
        "engine_args": {"load_format": "dummy", "gpu_memory_utilization": 0.6, "max_num_seqs": 32, "max_model_len": 2048},
        "workload": {"num_prompts": 32, "max_tokens": 128},
    },
}
BASES = ("fresh", "forked")
MODIFIERS = {
    "inproc": {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"},
    "nogc": {"DRAFTBENCH_GC_FREEZE": "0", "DRAFTBENCH_GC_PAUSE": "0"},
    "nogc-freeze": {"DRAFTBENCH_GC_FREEZE": "0"},
    "nogc-pause": {"DRAFTBENCH_GC_PAUSE": "0"},
    "noplan": {"VLLM_ENABLE_STARTUP_PLAN": "0"},
    "noengine": {forkserver.ENGINE_PRELOAD_ENV: "0"},
}
# What vLLM 0.26's v1/worker/startup_plan.py logs for each outcome (a start that profiles may log two: the first counts).
PLAN_LINES = {"Startup plan not applied": "refused", "Applying persisted startup plan": "applied",
              "Saved startup plan": "saved"}
COLUMNS = ("import_s", "engine_start_s", "warmup_s", "measured_s", "wall_s", "run_s", "efficiency", "tokens_per_s",
           "pass_cv")


def parse_way(way: str) -> tuple[bool, dict[str, str]]:
    """``(forked, the cell's extra environment)`` of a way such as ``forked+inproc``; ValueError naming what is allowed."""
    base, *modifiers = way.split("+")
    if base not in BASES:
        raise ValueError(f"way {way!r}: begins with one of {', '.join(BASES)}")
    env: dict[str, str] = {}
    for modifier in modifiers:
        if modifier not in MODIFIERS:
            raise ValueError(f"way {way!r}: {modifier!r} is not one of {', '.join(MODIFIERS)}")
        env |= MODIFIERS[modifier]
    return base == "forked", env


def make_model(python: str, shape: str, folder: Path) -> Path:
    """The shape's model under ``folder`` (made once, by the build's Python: it has transformers and torch)."""
    model = folder / shape
    if not (model / "config.json").exists():
        subprocess.run([python, str(ROOT / "runners" / "tiny_model.py"), str(model), *SHAPES[shape]["model"]], check=True)
    return model


def cell_spec(shape: str, model: Path, *, draft: str, rounds: int, min_window_s: float, timeout_s: float,
              backend: str | None, graph_mode: str | None) -> dict:
    """The cell as runners/cell.py reads it, its workload resolved as the service resolves it."""
    preset = SHAPES[shape]
    workload = {"dataset": "draftbench", "categories": [], "temperature": 0.0, "seed": 0, "rounds": rounds,
                "min_window_s": min_window_s, **preset["workload"]}
    workload["warmup_prompts"] = workload["num_prompts"]
    speculative = {"method": "draft_model", "model": str(model), "num_speculative_tokens": 3} if draft == "self" else None
    return {"build": "benchmark", "gpu_kind": preset["gpu_kind"], "model": str(model), "tokenizer": None,
            "workload": workload, "speculative": speculative, "backend": backend or preset["backend"],
            "graph_mode": graph_mode or preset["graph_mode"], "engine_args": dict(preset["engine_args"]),
            "timeout_s": timeout_s, "mode": "offline", "env": {}}


def plan_outcome(log: str) -> str:
    """What the start did with vLLM's startup plan, by its log (``PLAN_LINES``): the first outcome logged, or "-"."""
    found = [(log.find(line), outcome) for line, outcome in PLAN_LINES.items() if line in log]
    return min(found)[1] if found else "-"


def measured(result: dict, run_s: float, plan: str = "-") -> dict:
    """One run's row: what the start did with vLLM's startup plan, the result's times, efficiency, tokens/s with
    the start's interval, and the passes' spread."""
    rounds = result.get("rounds") or []
    interval, passes = start_interval([(r["seconds"], r["output_tokens"],
                                        [(p["seconds"], p["output_tokens"]) for p in r.get("passes", [])])
                                       for r in rounds])
    speeds = [p["output_tokens"] / p["seconds"] for r in rounds for p in r.get("passes", []) if p["seconds"] > 0]
    seconds = sum(r["seconds"] for r in rounds)
    return {
        "plan": plan, "import_s": result.get("import_s"), "engine_start_s": result["engine_start_s"], "warmup_s": result["warmup_s"],
        "measured_s": seconds, "wall_s": result["wall_s"], "run_s": run_s, "efficiency": seconds / result["wall_s"],
        "tokens_per_s": interval.median, "low": interval.low, "high": interval.high, "level": interval.confidence,
        "passes": passes, "pass_cv": statistics.stdev(speeds) / statistics.fmean(speeds) if len(speeds) > 1 else None,
        "harness": result.get("harness"),
    }


def run_one(python: str, spec: dict, folder: Path, env: dict[str, str], server: execute.ForkServer | None) -> dict:
    """Run the cell once in ``folder``; its row, or why it failed."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spec.json").write_text(json.dumps(spec))
    finished = execute.run([python, str(CELL_SCRIPT), str(folder / "spec.json"), str(folder / "result.json")],
                           log_path=folder / "cell.log", timeout_s=spec["timeout_s"], cwd=folder, env=env,
                           fork_server=server)
    if finished.exit_code != 0 or not (folder / "result.json").is_file():
        return {"failed": f"exit {finished.exit_code}, signal {finished.signal}, timed out {finished.timed_out}: "
                          f"see {folder / 'cell.log'}"}
    log = (folder / "cell.log").read_text(errors="replace") if (folder / "cell.log").is_file() else ""
    return measured(json.loads((folder / "result.json").read_text()), finished.duration_s, plan_outcome(log))


def server_text(ready: dict | None) -> str:
    """A fork server's ready line in words: its imports of vLLM and of vLLM's engine worker (runners/forkserver.py)."""
    if ready is None:
        return "never ready"
    engine = (f"the engine worker in {shown(ready.get('engine_import_s'))} s" if ready.get("engine_modules")
              else f"not the engine worker ({ready.get('engine_skipped') or 'not said'})")
    return f"vLLM in {shown(ready.get('import_s'))} s, {engine}"


def shown(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def row_text(way: str, run: int | str, row: dict) -> str:
    if "failed" in row:
        return f"| {way} | {run} | failed: {row['failed']} |"
    interval = f"{row['tokens_per_s']:.1f} [{shown(row['low'], 1)}, {shown(row['high'], 1)}]"
    cells = [shown(row[c]) for c in COLUMNS[:6]] + [f"{100 * row['efficiency']:.0f} %", interval,
                                                     "-" if row["pass_cv"] is None else f"{100 * row['pass_cv']:.1f} %"]
    return (f"| {way} | {run} | {row['plan']} | " + " | ".join(cells)
            + f" | {shown(row['level'])} | {row['passes'] or '-'} |")


def summary(way: str, rows: list[dict]) -> str:
    """The medians of a way's runs, and the spread of tokens/s between its starts (their coefficient of variation)."""
    done = [row for row in rows if "failed" not in row]
    if not done:
        return f"| {way} | 0 of {len(rows)} ran |"

    def median(column: str) -> float | None:
        values = [row[column] for row in done if row[column] is not None]
        return statistics.median(values) if values else None

    speeds = [row["tokens_per_s"] for row in done]
    between = f"{100 * statistics.stdev(speeds) / statistics.fmean(speeds):.1f} %" if len(speeds) > 1 else "-"
    widths = [(row["high"] - row["low"]) / row["tokens_per_s"] for row in done if row["low"] is not None]
    width = f"{100 * statistics.median(widths):.1f} %" if widths else "-"
    cv = median("pass_cv")
    return (f"| {way} | {len(done)} of {len(rows)} | " + " | ".join(shown(median(c)) for c in COLUMNS[:6])
            + f" | {100 * median('efficiency'):.0f} % | {median('tokens_per_s'):.1f} | {width} | "
            + ("-" if cv is None else f"{100 * cv:.1f} %") + f" | {between} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="The vLLM build's interpreter")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--draft", choices=["none", "self"], default="none", help="self: the target as its own draft, k=3")
    parser.add_argument("--ways", default="fresh,forked", help="Comma-separated ways (see above)")
    parser.add_argument("--runs", type=int, default=3, help="Runs of each way, alternating")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-window-s", type=float, default=5.0)
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--backend", help="Instead of the shape's")
    parser.add_argument("--graph-mode", help="Instead of the shape's")
    parser.add_argument("--work", type=Path, default=Path("/tmp/cell-efficiency"), help="Models, cells and logs")
    parser.add_argument("--pycache", default=str(execute.DEFAULT_PYCACHE), help="The cells' bytecode cache; '' none")
    parser.add_argument("--out", type=Path, help="Write every run's row here as JSON")
    args = parser.parse_args()
    try:
        ways = {way: parse_way(way) for way in args.ways.split(",")}
    except ValueError as exc:
        parser.error(str(exc))
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    # As the worker takes a build's interpreter: a bare name is looked up on PATH, since cells run in other folders.
    python = os.path.abspath(shutil.which(args.python) or args.python) if os.sep not in args.python else os.path.abspath(args.python)
    model = make_model(python, args.shape, args.work / "models")
    spec = cell_spec(args.shape, model, draft=args.draft, rounds=args.rounds, min_window_s=args.min_window_s,
                     timeout_s=args.timeout_s, backend=args.backend, graph_mode=args.graph_mode)
    pycache = Path(args.pycache).expanduser() if args.pycache else None
    envs = {way: execute.cell_env(extra, pycache) for way, (_, extra) in ways.items()}
    # One server per way: ways differ in their environment, which a server is made for.
    servers = {way: execute.ForkServer(python, envs[way], args.work / f"forkserver-{way}.log")
               for way, (forked, _) in ways.items() if forked}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    print(f"# {spec['model']} ({args.shape}, draft {args.draft}), {spec['backend']}/{spec['graph_mode']}, "
          f"{args.rounds} rounds x {args.min_window_s} s; {python}; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}\n")
    print("| way | run | plan | import_s | engine_start_s | warmup_s | measured_s | wall_s | run_s | efficiency | "
          "tokens/s [interval] | pass CV | level | passes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows: dict[str, list[dict]] = {way: [] for way in ways}
    try:
        for run in range(args.runs):
            for way in ways:
                row = run_one(python, spec, args.work / "runs" / stamp / f"{run}-{way}", envs[way], servers.get(way))
                rows[way].append(row)
                print(row_text(way, run, row), flush=True)
        imports = ", ".join(f"{way}'s server: {server_text(server.ready)}" for way, server in servers.items())
    finally:
        for server in servers.values():
            server.close()
    print(f"\n# Medians over runs{' (' + imports + ')' if imports else ''}\n")
    print("| way | runs | import_s | engine_start_s | warmup_s | measured_s | wall_s | run_s | efficiency | tokens/s | "
          "interval width | pass CV | between starts |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for way, found in rows.items():
        print(summary(way, found))
    if args.out:
        args.out.write_text(json.dumps({"spec": spec, "ways": list(ways), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
