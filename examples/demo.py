"""``make demo``: a service, a CPU worker and a small sweep on real vLLM, from nothing but this checkout.

Starts both processes in the background (their pids and logs under the demo folder), so the
dashboard stays up after the sweep; ``make demo-stop`` ends them. The sweep runs the prompts
shipped in runners/prompts on a tiny random-weight model made here.

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

ROOT = Path(__file__).resolve().parent.parent
BUILD_LABEL = "vllm-0.32-cpu"


def run_demo(*, folder: Path, vllm_python: Path, port: int, token: str) -> None:
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    server = f"http://127.0.0.1:{port}"
    model = folder / "model"
    if not (model / "config.json").is_file():
        _say(f"generating a tiny random Qwen3 model in {model}")
        subprocess.run([str(vllm_python), str(ROOT / "runners" / "tiny_model.py"), str(model)], check=True)
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
    sweep_file.write_text(template.substitute(MODEL=model))
    subprocess.run([*draftbench, "submit", str(sweep_file)], env=env, check=True, cwd=ROOT)
    _say(f"dashboard: {server}/  (API docs: {server}/docs; stop with `make demo-stop`)")


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
    run_demo(folder=args.folder, vllm_python=args.vllm_python, port=args.port, token=args.token)


if __name__ == "__main__":
    main()
