"""vLLM's own benchmark tools on the same cell a sweep measures: the peer check of the H200 proof.

    PYTHONPATH=/tmp/site python3 -m benchmarks.peer_check throughput SWEEP.yaml --out DIR --gpu 0 --runs 6
    PYTHONPATH=/tmp/site python3 -m benchmarks.peer_check serve SWEEP.yaml --out DIR --gpu 1

SWEEP.yaml is a sweep of one cell (``${NAME}`` placeholders filled from ``--models``, as
benchmarks/h200_proof.py fills them). Its engine arguments become the tool's flags exactly as the
serving mode turns them into the server's (``runners/serving.engine_flags``), so both run the same engine.

- ``throughput``: ``vllm bench throughput`` ``--runs`` times, each a new process, on the cell's
  random workload (``--dataset-name random``, the cell's ``input_len``, ``max_tokens`` as output
  length, range ratio 0, ``num_prompts``); it samples at temperature 1 with EOS ignored, so the
  cell must ask for the same. The first run is kept but marked discarded: the tool has no warm-up,
  and a first FlashInfer run can carry JIT compilation inside its measured window.
- ``serve``: the cell's server (``python -m vllm.entrypoints.openai.api_server``), then
  ``vllm bench serve`` once at the cell's concurrency on the same random workload at the cell's
  temperature, EOS ignored, with ``--save-result``; the server's spec-decode counters are read from
  ``/metrics`` before and after, so the tool's own figures can be checked against them too.

Each run's JSON lands in ``--out`` (``throughput-N.json``, ``serve.json``, ``serve-metrics.json``),
with ``cell.json`` (the cell as run) and the tool's output in ``peer.log``; ``draftbench import-bench``
reads the JSON files. The tools are called through their ``add_cli_args`` and ``main`` (the ``vllm``
command imports the server's dependencies even for ``throughput``).
"""

import argparse
import json
import os
import string
import subprocess
import sys
import time
from pathlib import Path

from app.schemas.sweep import SweepSpec
from app.sweeps import matrix, parsing
from runners import serving
from runners.cell import engine_arg_names, engine_kwargs
from runners.cellkit import counters_delta

ROOT = Path(__file__).resolve().parent.parent

# Run as ``python -c``: the tool's parser and main, as the ``vllm bench`` command would call them.
TOOL = """
import sys
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
from vllm.benchmarks import {tool} as tool
parser = FlexibleArgumentParser()
tool.add_cli_args(parser)
tool.main(parser.parse_args(sys.argv[1:]))
"""
RUN_TIMEOUT_S = 600


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tool", choices=["throughput", "serve"])
    parser.add_argument("sweep", type=Path)
    parser.add_argument("--models", type=Path, default=Path("/tmp/h200/models"), help="Where h200_proof.py made the models")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--gpu", default="0", help="CUDA_VISIBLE_DEVICES for the tool")
    parser.add_argument("--runs", type=int, default=6, help="throughput: runs, the first discarded")
    parser.add_argument("--backend", help="The sweep's cell on this backend")
    parser.add_argument("--concurrency", type=int, help="The sweep's cell at this concurrency (serving mode)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    spec = cell_of(args.sweep, args.models, backend=args.backend, concurrency=args.concurrency)
    (args.out / "cell.json").write_text(json.dumps(spec, indent=2))
    kwargs = engine_kwargs(spec, engine_arg_names())
    env = os.environ | {"CUDA_VISIBLE_DEVICES": args.gpu, "PYTHONUNBUFFERED": "1"}
    log = open(args.out / "peer.log", "ab")  # noqa: SIM115 - the children write to it
    if args.tool == "throughput":
        throughput(spec, serving.engine_flags(kwargs), args.out, args.runs, env, log)
    else:
        serve(spec, kwargs, args.out, env, log)


def cell_of(sweep_file: Path, models: Path, *, backend: str | None, concurrency: int | None) -> dict:
    """The sweep's one cell (on ``backend`` at ``concurrency`` where given), as the worker would run it."""
    names = {name.upper(): str(path) for name, path in ((p.name, p) for p in models.iterdir())}
    text = string.Template(sweep_file.read_text()).substitute(names)
    spec = SweepSpec.model_validate(parsing.load(text.encode(), parsing.YAML_TYPES[0]))
    cells = [cell for cell in matrix.expand(spec) if backend in (None, cell.spec.backend)
             and concurrency in (None, cell.spec.concurrency)]
    if len(cells) != 1:
        raise SystemExit(f"{sweep_file} has {len(cells)} cells on backend {backend}, concurrency {concurrency}; the peer check runs one")
    return matrix.canonical(cells[0].spec)


def dataset_flags(workload: dict) -> list[str]:
    if workload["dataset"] != "random":
        raise SystemExit("the peer check needs the cell's workload on the random dataset, which both tools share")
    return ["--dataset-name", "random", "--random-input-len", str(workload["input_len"]),
            "--random-output-len", str(workload["max_tokens"]), "--random-range-ratio", "0",
            "--num-prompts", str(workload["num_prompts"])]


def tool(name: str, argv: list[str], env: dict, log, timeout_s: float = RUN_TIMEOUT_S) -> float:
    started = time.monotonic()
    log.write(f"\n$ vllm bench {name} {' '.join(argv)}\n".encode())
    log.flush()
    subprocess.run([sys.executable, "-c", TOOL.format(tool=name), *argv], env=env, stdout=log, stderr=subprocess.STDOUT,
                   check=True, timeout=timeout_s, cwd=ROOT)
    return time.monotonic() - started


def throughput(spec: dict, flags: list[str], out: Path, runs: int, env: dict, log) -> None:
    workload = spec["workload"]
    if workload.get("temperature", 0.0) != 1.0:
        raise SystemExit("vllm bench throughput samples at temperature 1: the cell must ask for temperature 1")
    for run in range(runs):
        path = out / f"throughput-{run}.json"
        wall = tool("throughput", [*flags, *dataset_flags(workload), "--output-json", str(path)], env, log)
        data = json.loads(path.read_text())
        data["draftbench"] = {"run": run, "discarded": run == 0, "process_wall_s": wall, "output_len": workload["max_tokens"]}
        path.write_text(json.dumps(data, indent=2))
        output_tps = data["num_requests"] * workload["max_tokens"] / data["elapsed_time"]
        print(f"throughput run {run}{' (discarded)' if run == 0 else ''}: {output_tps:.0f} output tok/s "
              f"in {data['elapsed_time']:.2f} s; process {wall:.0f} s", flush=True)


def serve(spec: dict, kwargs: dict, out: Path, env: dict, log) -> None:
    workload = spec["workload"]
    port = serving._free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(serving.server_argv(kwargs, port), env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        serving.wait_healthy(base, server, timeout_s=RUN_TIMEOUT_S)
        before = serving.scrape(base)
        bench = ["--backend", "vllm", "--base-url", base, "--endpoint", "/v1/completions", "--model", spec["model"],
                 "--tokenizer", spec.get("tokenizer") or spec["model"], *dataset_flags(workload),
                 "--max-concurrency", str(spec.get("concurrency") or 1), "--temperature", str(workload.get("temperature", 0.0)),
                 "--ignore-eos", "--seed", str(workload.get("seed", 0)), "--percentile-metrics", "ttft,tpot,itl",
                 "--metric-percentiles", "50,90,99", "--save-result", "--result-dir", str(out), "--result-filename", "serve.json"]
        tool("serve", bench, env, log)
        after = serving.scrape(base)
    finally:
        serving._stop(server)
    delta = counters_delta(before, after)
    (out / "serve-metrics.json").write_text(json.dumps({"before": before, "after": after, "delta": delta}, indent=2))
    saved = json.loads((out / "serve.json").read_text())
    print(f"serve: {saved.get('output_throughput', 0):.0f} output tok/s; /metrics delta {delta}; the tool's own: "
          f"{ {k: saved.get(k) for k in ('spec_decode_num_drafts', 'spec_decode_draft_tokens', 'spec_decode_accepted_tokens')} }",
          flush=True)


if __name__ == "__main__":
    main()
