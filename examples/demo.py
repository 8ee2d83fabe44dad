"""``make demo``: a service, a CPU worker and a small sweep on real vLLM, from nothing but this checkout.

Starts both processes in the background (their pids and logs under the demo folder), so the
dashboard stays up after the sweep; ``make demo-stop`` ends them. The sweep runs the prompts
shipped in runners/prompts on a tiny random-weight model made here, with three drafts: ngram, the
target as its own draft (acceptance 1, the ceiling) and the target with noise on its weights
(``runners/tiny_model.py --draft-of``), which accepts some tokens and not others as a real draft
does; and the baseline without speculation, which each draft's speedup divides by. The table it prints
ends with what each row is; the last lines name the page with the speedups and their intervals.

    python examples/demo.py --vllm-python PATH [--folder var/demo --port 8765 --token demo-token]
"""

import argparse
import os
import string
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from rich.markup import escape
from rich.table import Table

from app.cli.errors import CliError
from app.cli.http import Api
from app.cli.sweeps import console, follow, measured_text
from app.schemas.sweep import SweepSpec
from app.sweeps.matrix import expand
from runners.tiny_model import MIDDLE_NOISE

ROOT = Path(__file__).resolve().parent.parent
BUILD_LABEL = "vllm-0.32-cpu"
TINY_MODEL = ROOT / "runners" / "tiny_model.py"


def run_demo(*, folder: Path, vllm_python: Path, port: int, token: str) -> None:
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    server = f"http://127.0.0.1:{port}"
    model, draft = folder / "model", folder / f"draft-noise-{MIDDLE_NOISE:g}"
    fresh = not (model / "config.json").is_file()
    if fresh:
        _say(f"generating a tiny random Qwen3 model in {model}")
        subprocess.run([str(vllm_python), str(TINY_MODEL), str(model)], check=True)
    # Its weights are written last: a draft cut short, or one of an older target, is made again.
    if fresh or not (draft / "model.safetensors").is_file():
        _say(f"perturbing it into a draft (noise {MIDDLE_NOISE:g}) in {draft}")
        subprocess.run([str(vllm_python), str(TINY_MODEL), str(draft), "--draft-of", str(model),
                        "--noise", str(MIDDLE_NOISE)], check=True)
    env = os.environ | {
        "DRAFTBENCH_DATABASE_URL": f"sqlite:///{folder / 'draftbench.db'}",
        "DRAFTBENCH_TOKEN": token,
        "DRAFTBENCH_SERVER": server,
    }
    draftbench = [sys.executable, "-m", "app.cli"]
    _start(folder, "service", [*draftbench, "serve", "--port", str(port)], env)
    _wait_for(lambda: httpx.get(f"{server}/api/v1/sweeps", timeout=2).status_code == 200, "the service", 60)
    _start(folder, "worker", [*draftbench, "worker", "--build", f"{BUILD_LABEL}={vllm_python}", "--gpu-kind", "cpu", "--quiet"], env)
    _wait_for(
        lambda: BUILD_LABEL in [b["label"] for b in httpx.get(f"{server}/api/v1/builds", timeout=2).json()],
        "the worker to register",
        180,
    )
    template = string.Template((ROOT / "examples" / "demo-sweep.yaml").read_text())
    sweep_file = folder / "sweep.yaml"
    sweep_file.write_text(template.substitute(MODEL=model, DRAFT=draft))
    with Api(server, token) as api:
        sweep = api.send("POST", "/api/v1/sweeps", content=sweep_file.read_bytes(),
                         headers={"content-type": "application/yaml"}).json()
        _say(f"sweep {sweep['id']}: {sweep['total']} jobs, {server}/sweeps/{sweep['id']}")
        follow(api, sweep["id"], sweep["total"], 2.0)
        console.print(results_table(api, sweep["id"], target=model, draft=draft))
    _say(f"each draft's speedup over the baseline, with its interval: {server}/matrix?sweep_id={sweep['id']}&metric=speedup")
    _say(f"dashboard: {server}/  (API docs: {server}/docs; stop with `make demo-stop`)")


def results_table(api: Api, sweep_id: int, *, target: Path, draft: Path) -> Table:
    """The sweep's results, each row saying which draft it ran and why its acceptance is what it is."""
    sweep = api.get(f"/api/v1/sweeps/{sweep_id}")
    results = {r["job_id"]: r for r in api.get("/api/v1/results", sweep_id=sweep_id)}
    configs = {cell.index: cell.spec.speculative for cell in expand(SweepSpec.model_validate(sweep["spec"]))}
    table = Table("job", "rep", "state", "draft", escape("acceptance [95% CI]"), escape("accept len [95% CI]"),
                  escape("tok/s [interval] (rounds)"), "speedup", "what this row is",
                  title=f"sweep {sweep_id}: {sweep['name']} ({sweep['state']})",
                  caption="acceptance: accepted / drafted tokens; accept len: 1 + accepted per draft (at most 1 + k); "
                          "speedup: tok/s over the baseline's of the same repeat")
    for job in sweep["jobs"]:
        name, why = describe(configs[job["cell_index"]], target=target, draft=draft)
        result = results.get(job["job_id"])
        acc, length, tps = measured_text(result)
        speedup = f"{result['speedup']:.2f}x" if result and result.get("speedup") is not None else ""
        table.add_row(str(job["job_id"]), str(job["repeat"]), job["state"], name, escape(acc), escape(length),
                      escape(tps), speedup, why)
    return table


def describe(speculative: dict | None, *, target: Path, draft: Path) -> tuple[str, str]:
    """A row's draft in a few words, and why its acceptance is what it is."""
    method = speculative["method"] if speculative else None
    model = speculative.get("model") if speculative else None
    if method == "ngram":
        return "ngram", "copies what followed an earlier match: random text repeats only by chance"
    if method == "draft_model" and model == str(target):
        return "the target itself", "the target drafting for itself: all accepted at temperature 0, the ceiling"
    if method == "draft_model" and model == str(draft):
        return f"target + noise {MIDDLE_NOISE:g}", "its weights plus noise: agrees often, not always, as real drafts do"
    if method is None:
        return "no speculation", "the baseline: each draft's speedup is its tok/s over this row's"
    return method, ""


def _start(folder: Path, name: str, argv: list[str], env: dict[str, str]) -> None:
    pid_file = folder / f"{name}.pid"
    if pid_file.is_file():
        try:
            os.kill(int(pid_file.read_text()), 0)
            _say(f"{name} already running (pid {pid_file.read_text().strip()})")
            return
        except (ProcessLookupError, ValueError):
            pid_file.unlink()
    with open(folder / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    pid_file.write_text(str(proc.pid))
    _say(f"{name} started (pid {proc.pid}, log {folder / f'{name}.log'})")


def _wait_for(check: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"demo: gave up waiting for {what} after {timeout_s:.0f} s")


def _say(text: str) -> None:
    print(f"==> {text}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-python", type=Path, required=True, help="The CPU vLLM build's interpreter")
    parser.add_argument("--folder", type=Path, default=ROOT / "var" / "demo")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--token", default="demo-token")
    args = parser.parse_args()
    if not args.vllm_python.is_file():
        raise SystemExit(f"demo: {args.vllm_python} does not exist: run `make vllm-env` first")
    try:
        run_demo(folder=args.folder, vllm_python=args.vllm_python, port=args.port, token=args.token)
    except CliError as exc:
        raise SystemExit(f"demo: {exc}") from None


if __name__ == "__main__":
    main()
