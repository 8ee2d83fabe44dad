"""The H200 proof of the measurements issue: sweeps through the real service and worker on one GPU host.

    PYTHONPATH=/tmp/site python3 -m benchmarks.h200_proof --work /tmp/h200 --out $OUT \\
        examples/h200/calibration.yaml examples/h200/matrix.yaml ...

It makes the config-only models (``runners/tiny_model.py``; examples/h200/README.md says which), starts
``draftbench serve`` on SQLite and ``draftbench worker --gpus all`` (one worker per GPU) with the build
``vllm-0.26.0`` (this Python) and, for each ``--patch LABEL=FILE``, a build LABEL: a copy of the installed
vLLM (hard links, the files the patch changes copied) that the worker runs through a small wrapper
interpreter (``draftbench build create``'s patched build). It submits every sweep at once (their
priorities order them), then, until all are finished or ``--budget-s`` is spent, copies the database and the cells' logs to ``--out`` after
each poll, and prints a table of what finished. Run again with the same ``--work`` (the service and
worker keep running in the background while the machine is held) to wait for the rest; sweep files it names that
this service has not had are submitted then (``submit_new``).
"""

import argparse
import json
import os
import shutil
import sqlite3
import string
import subprocess
import sys
import time
from pathlib import Path

import httpx

from app.builds import patched
from app.builds.diffs import DiffError
from app.builds.facts import WRAPPER, BuildError
from runners import gpus

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "h200-proof"
PORT = 8877
BUILD = "vllm-0.26.0"
MODELS = {
    "TARGET": ["--layers", "8", "--hidden", "1024", "--heads", "16", "--kv-heads", "8"],
    # Qwen3-8B's published sizes: 36 layers, hidden 4096 (intermediate 3 x 4096), 32 heads of 128, 8 KV heads.
    "QWEN3_8B": ["--layers", "36", "--hidden", "4096", "--heads", "32", "--kv-heads", "8", "--vocab", "151936"],
    # A draft for it of Qwen3-0.6B's depth and width (28 layers, hidden 1024) and the same tokenizer.
    "QWEN3_0_6B": ["--layers", "28", "--hidden", "1024", "--heads", "16", "--kv-heads", "8", "--vocab", "151936"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="*", type=Path)
    parser.add_argument("--work", type=Path, required=True, help="Models, database and logs; kept between runs")
    parser.add_argument("--out", type=Path, required=True, help="Where the database and logs are copied")
    parser.add_argument("--python", default=sys.executable, help="The vLLM build's interpreter")
    parser.add_argument("--service-python", default=sys.executable, help="The interpreter of draftbench's service")
    parser.add_argument("--patch", action="append", default=[], metavar="LABEL=FILE",
                        help="A build LABEL: vLLM with the diff FILE applied (again for more builds)")
    parser.add_argument("--budget-s", type=float, default=540.0, help="Seconds from this start to the last poll")
    parser.add_argument("--gpus", default="all", help="The worker's --gpus; empty: one worker for the whole host")
    parser.add_argument("--import", dest="imports", action="append", default=[], type=Path, metavar="FOLDER",
                        help="An exported sweep stored before the service starts (an earlier session's history)")
    parser.add_argument("--ci", metavar="SWEEP:BASE:HEAD:MINUTES",
                        help="Also run `draftbench ci --mde 5%% --budget-gpu-minutes MINUTES` on SWEEP, build HEAD against BASE, "
                        "in the background; its comment and log go to --out")
    args = parser.parse_args()
    # The budget counts from here: making models and builds and starting the worker come out of it.
    deadline = time.monotonic() + args.budget_s
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    server = f"http://127.0.0.1:{PORT}"
    env = os.environ | {"DRAFTBENCH_DATABASE_URL": f"sqlite:///{args.work / 'draftbench.db'}", "DRAFTBENCH_TOKEN": TOKEN,
                        "DRAFTBENCH_LEASE_SECONDS": "60", "DRAFTBENCH_STALL_CHECK_SECONDS": "10",
                        "PYTHONPATH": f"{os.environ.get('PYTHONPATH', '')}:{ROOT}"}
    models = make_models(args.work, args.python)
    started = not running(args.work / "service.pid")
    if started:
        if answering(server):
            sys.exit(f"a service from an earlier run still answers at {server}: stop it before starting another")
        for folder in args.imports:
            subprocess.run([args.service_python, "-m", "app.cli", "import", str(folder)], cwd=ROOT, env=env, check=True)
        start(args.work, "service", [args.service_python, "-m", "app.cli", "serve", "--port", str(PORT)], env)
        wait(lambda: httpx.get(f"{server}/api/v1/sweeps", timeout=2).status_code == 200, 120)
        builds = {BUILD: args.python}
        for given in args.patch:
            label, _, patch = given.partition("=")
            try:
                builds[label] = patched_build(args.work, label, Path(patch), args.python)
            except (BuildError, DiffError) as exc:
                print(f"no build {label}: {exc}", flush=True)
        gpu_args = ["--gpus", args.gpus] if args.gpus else []
        worker = start(args.work, "worker", [args.service_python, "-m", "app.cli", "worker", "--server", server,
                                             *(f"--build={label}={python}" for label, python in builds.items()),
                                             "--gpu-kind", "auto", *gpu_args, "--quiet", "--heartbeat", "10"], env)
        # The worker's own builds, not the count of known ones: an imported sweep makes its build known before any worker
        # runs it, and a sweep submitted before the worker registers its build is refused.
        wait(lambda: builds.keys() <= served_builds(server), 300, alive=lambda: worker.poll() is None, log=args.work / "worker.log")
    with httpx.Client(base_url=server, timeout=60, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
        submit_new(client, args.work, args.sweeps, models)
    if args.ci and started:
        start_ci(args.work, args.ci, models, server, env, args.service_python)
    while True:
        sweeps = httpx.get(f"{server}/api/v1/sweeps", timeout=30).json()
        keep(args.work, args.out)
        # By id: an imported sweep and a new run of the same file share a name.
        states = {f'{s["id"]} {s["name"]}': (s["state"], s["counts"]) for s in sweeps}
        print(time.strftime("%H:%M:%S"), json.dumps(states), flush=True)
        # While `draftbench ci` runs, its sweeps may not be submitted yet, or all be finished between two looks.
        done = all(state in ("finished", "cancelled") for state, _ in states.values()) and not running(args.work / "ci.pid")
        if done or time.monotonic() > deadline:
            break
        time.sleep(20)
    table(server)
    compared(server)


def submit_new(client: httpx.Client, work: Path, sweeps: list[Path], models: dict[str, str]) -> None:
    """Submits, in the order given, each sweep file this work folder's service has not had from this harness
    (``work/submitted.json``: file -> the sweep's id and name), its placeholders filled from ``models``. So a call on a
    warm machine may name more files, and a call naming the same ones again waits for them instead of running them
    twice (before, only the call that started the service submitted: a file named later was dropped without a word).
    A paired sweep names its base by ``${SWEEP_NAME}`` (the base's name, upper case, '-' as '_'): the ids of this
    call's and earlier calls' submissions fill it, so a head comes right after its base (a base job claimed between
    the two would run unpaired). A refused file is not recorded: the next call tries it again."""
    record = work / "submitted.json"
    done: dict[str, dict] = json.loads(record.read_text()) if record.exists() else {}
    for entry in done.values():
        models[f"SWEEP_{entry['name'].upper().replace('-', '_')}"] = str(entry["id"])
    for sweep in sweeps:
        if str(sweep) in done:
            print(f"{sweep.name}: submitted before, as sweep {done[str(sweep)]['id']}", flush=True)
            continue
        body = string.Template(sweep.read_text()).substitute(models)
        answer = client.post("/api/v1/sweeps", content=body, headers={"content-type": "application/yaml"})
        if answer.status_code != 201:
            print(f"{sweep.name} refused ({answer.status_code}): {answer.text[:500]}", flush=True)
            continue
        submitted = answer.json()
        done[str(sweep)] = {"id": submitted["id"], "name": submitted["name"]}
        record.write_text(json.dumps(done, indent=1))
        models[f"SWEEP_{submitted['name'].upper().replace('-', '_')}"] = str(submitted["id"])
        print(f"submitted {sweep.name}: sweep {submitted['id']}, {submitted['total']} jobs", flush=True)


def answering(server: str) -> bool:
    """Whether any service answers at ``server``."""
    try:
        httpx.get(f"{server}/api/v1/sweeps", timeout=2)
    except httpx.HTTPError:
        return False
    return True


def served_builds(server: str) -> set[str]:
    """The builds the service's live workers registered."""
    return {b for w in httpx.get(f"{server}/api/v1/workers", timeout=2).json() if w["alive"] for b in w["builds"]}


def start_ci(work: Path, given: str, models: dict[str, str], server: str, env: dict[str, str], python: str) -> None:
    """``draftbench ci`` as a pull request's check runs it, with no GitHub to post to (the comment is saved)."""
    sweep, base, head, minutes = given.split(":")
    spec = work / "ci-sweep.yaml"
    spec.write_text(string.Template(Path(sweep).read_text()).substitute(models))
    start(work, "ci", [python, "-m", "app.cli", "ci", "--sweep", str(spec), "--repo", "draftbench/h200-proof", "--pr", "22",
                       "--head", "0" * 40, "--base", "1" * 40, "--build", head, "--base-build", base, "--server", server,
                       "--token", TOKEN, "--github-api", "http://127.0.0.1:9", "--comment-file", str(work / "ci-comment.md"),
                       "--poll", "10", "--mde", "5%", "--budget-gpu-minutes", minutes], env | {"GITHUB_TOKEN": ""})


def make_models(work: Path, python: str) -> dict[str, str]:
    """Config-only models (and a DFlash draft for the small target), made once per machine; and ``GPU_KIND``, the kind
    of this host's GPUs, which the sweep files name (a device lent for an H200 may be an H100)."""
    models = {name: str(work / "models" / name.lower()) for name in MODELS}
    [models["GPU_KIND"]] = gpus.kinds_of(gpus.list_gpus())
    models["DFLASH"] = str(work / "models" / "dflash")
    for name, flags in MODELS.items():
        if not (Path(models[name]) / "config.json").exists():
            extra = ["--dflash-draft", models["DFLASH"]] if name == "TARGET" else []
            subprocess.run([python, str(ROOT / "runners" / "tiny_model.py"), models[name], "--config-only", *flags, *extra],
                           check=True)
    return models


def patched_build(work: Path, label: str, patch: Path, python: str) -> str:
    """The build ``label``: the installed vLLM with ``patch`` applied (``app.builds.patched``), made once per --work."""
    root = work / "builds"
    if not (root / label / WRAPPER).exists():
        patched.create(label=label, base=python, patch=patch, root=root)
    return str(root / label / WRAPPER)


def running(pid_file: Path) -> bool:
    """Whether the process a previous run started is still there (the machine keeps it while held); one that ended but
    is not yet reaped (a zombie of this run) is not."""
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, ValueError, IndexError):
        return False
    return state != "Z"


def start(work: Path, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    log = open(work / f"{name}.log", "ab")  # noqa: SIM115 - the child holds it
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    (work / f"{name}.pid").write_text(str(proc.pid))
    print(f"{name} started (pid {proc.pid})", flush=True)
    return proc


def wait(check, timeout_s: float, *, alive=lambda: True, log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            tail = log.read_text(errors="replace").splitlines()[-20:] if log else []
            raise SystemExit("the process ended:\n" + "\n".join(tail))
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise SystemExit(f"gave up after {timeout_s:.0f} s")


def keep(work: Path, out: Path) -> None:
    """The database (a consistent copy through SQLite's backup) and the service's and worker's logs."""
    source = sqlite3.connect(work / "draftbench.db")
    target = sqlite3.connect(out / "draftbench.db")
    with target:
        source.backup(target)
    source.close()
    target.close()
    for name in ("service.log", "worker.log", "ci.log", "ci-comment.md"):
        if (work / name).exists():
            shutil.copy(work / name, out / name)


def table(server: str) -> None:
    rows = httpx.get(f"{server}/api/v1/results", params={"limit": 10000}, timeout=60).json()
    print(f"\n{'sweep':<26} {'backend':<12} {'mode':<19} {'ran':<19} {'method':<12} {'conc':>4} "
          f"{'tok/s':>8} {'[low, high]':>18} {'accept':>6} {'eff':>5} {'cal':>5}")
    for r in rows:
        interval = f"[{r['tokens_per_s_low']:.0f}, {r['tokens_per_s_high']:.0f}]" if r["tokens_per_s_low"] else ""
        accept = "" if r["acceptance_rate"] is None else f"{r['acceptance_rate']:.3f}"
        eff = "" if r["efficiency"] is None else f"{r['efficiency']:.2f}"
        cal = "" if r["calibration_miss"] is None else ("MISS" if r["calibration_miss"] else "ok")
        print(f"{r['sweep_name'][:26]:<26} {r['backend']:<12} {r['graph_mode']:<19} {r['resolved_graph_mode']!s:<19} "
              f"{r['method']!s:<12} {r['concurrency'] or ''!s:>4} {r['tokens_per_s']:>8.0f} {interval:>18} "
              f"{accept:>6} {eff:>5} {cal:>5}")


def compared(server: str) -> None:
    """Each paired sweep against its base, as ``GET /api/v1/compare`` calls it: the verdict and the tokens/s call."""
    for sweep in httpx.get(f"{server}/api/v1/sweeps", timeout=30).json():
        base = httpx.get(f"{server}/api/v1/sweeps/{sweep['id']}", timeout=30).json().get("paired_with")
        if base is None or base > sweep["id"]:
            continue
        answer = httpx.get(f"{server}/api/v1/compare", params={"base_sweep": base, "head_sweep": sweep["id"]}, timeout=120)
        print(f"\n{sweep['name']} against sweep {base}:")
        for row in answer.json().get("changes", []):
            call = row.get("tokens_per_s_call") or {}
            print(f"  {row['verdict']:<10} {row['backend']:<11} {row['graph_mode']:<19} {row['label']:<22} "
                  f"{call.get('sentence', '')}")


if __name__ == "__main__":
    main()
