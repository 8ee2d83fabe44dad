"""The worker loop: register, claim a job, run its cell in its own process, heartbeat, report.

A crash, hang or garbage output of vLLM becomes an outcome reported to the service; only the
service being away for longer than the client's retry window stops the worker.
"""

import json
import logging
import os
import platform
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from app import files
from app.builds.facts import read_facts
from app.enums import GpuKind
from app.schemas.cell import CellSpec, JobOutcome
from app.schemas.worker import BuildFactsIn, BuildInfo, ClaimedJob, RegisterRequest
from runners import execute, gpus
from runners.client import JobLost, ServiceClient, ServiceRefused, ServiceUnreachable
from runners.execute import DEFAULT_PYCACHE
from runners.outcome import outcome_of

CELL_SCRIPT = Path(__file__).with_name("cell.py")
# What runners/cell.py imports of vLLM before its engine starts (the build check runs the same).
ENGINE_IMPORT = "import vllm, vllm.engine.arg_utils; from vllm import LLM"
log = logging.getLogger("draftbench.worker")


class SetupError(RuntimeError):
    """The worker cannot serve what it was asked to (a build without vLLM, a GPU kind the host lacks)."""


@dataclass(frozen=True)
class Build:
    """A vLLM build this host can run: a label and the Python interpreter of its environment."""

    label: str
    python: Path

    @classmethod
    def parse(cls, text: str) -> "Build":
        """``LABEL=PYTHON``; PYTHON made absolute, a bare command name looked up on PATH (as the start-up check
        runs it): cells run in their own folders, where a relative or bare name names nothing, and every cell
        of the build failed "has no interpreter" (48 jobs of one H200 run). Links are kept: a virtual
        environment's python is one, and resolving it would leave the environment."""
        label, sep, python = text.partition("=")
        if not sep or not label or not python:
            raise ValueError(f"--build takes LABEL=/path/to/python, got {text!r}")
        found = shutil.which(python) if os.sep not in python else None
        return cls(label=label, python=Path(os.path.abspath(found or python)))

    def info(self, env: dict[str, str] | None = None, *, vllm_version: str | None = None) -> BuildInfo:
        """What the worker registers: the label, the version vLLM reports (``vllm_version`` when another label of
        the same interpreter found it already), and how the build was made when ``draftbench build create`` made it
        (its build.json beside the interpreter)."""
        facts = read_facts(self.python)
        made = facts.model_dump(include=set(BuildFactsIn.model_fields)) if facts else {}
        return BuildInfo(label=self.label, vllm_version=vllm_version or self.vllm_version(env=env), **made)

    def vllm_version(self, timeout_s: float = 300.0, env: dict[str, str] | None = None) -> str:
        """Import vLLM's engine API in the build's own interpreter (in ``env``, the cells' environment) and
        return vLLM's version; SetupError when it cannot.

        A real import of what a cell imports, not a metadata lookup: a worker whose build cannot import
        vLLM would claim cells only to fail each one; and in the cells' environment it fills their
        bytecode cache, so the first cell does not compile vLLM's sources.
        """
        code = f"{ENGINE_IMPORT}; print(vllm.__version__)"
        try:
            out = subprocess.run([str(self.python), "-c", code], capture_output=True, text=True, timeout=timeout_s,
                                 env=env)
        except FileNotFoundError:
            raise SetupError(f"build {self.label}: {self.python} does not exist") from None
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SetupError(f"build {self.label}: {self.python} could not be run: {exc}") from None
        if out.returncode != 0:
            last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise SetupError(f"build {self.label}: {self.python} cannot import vLLM: {last}")
        return out.stdout.strip().splitlines()[-1]


def check_gpu_kind(kind: GpuKind, found: list[gpus.Gpu]) -> None:
    """SetupError when ``--gpu-kind`` names GPUs this host does not have (saying what it found).

    GPUs nvidia-smi lists under a name no kind matches are let through: naming the kind is how an
    operator runs such a GPU.
    """
    if kind is GpuKind.CPU:
        return
    if not found:
        raise SetupError(f"--gpu-kind {kind}: nvidia-smi lists no GPU on this host")
    kinds = {gpu.kind for gpu in found}
    if None not in kinds and kind not in kinds:
        names = ", ".join(sorted({gpu.name for gpu in found}))
        raise SetupError(f"--gpu-kind {kind}: this host's GPUs are {', '.join(sorted(kinds))} ({names})")


def detect_gpu_kinds(ids: list[str] | None = None) -> tuple[list[GpuKind], int]:
    """GPU kind and count from nvidia-smi ('NVIDIA H200' -> H200), of the GPUs ``ids`` or of all.

    The CPU engine when the host has no NVIDIA GPU. Raises runners.gpus.GpuError when a GPU asked
    for is missing, of an unknown kind, or the GPUs are of different kinds.
    """
    found = gpus.list_gpus()
    if not found:
        if ids:
            raise gpus.GpuError(f"--gpu {','.join(ids)}: nvidia-smi lists no GPU on this host")
        return [GpuKind.CPU], 0
    chosen = gpus.pick(found, ids) if ids else found
    return gpus.kinds_of(chosen), len(chosen)


class Worker:
    def __init__(
        self,
        client: ServiceClient,
        *,
        builds: list[Build],
        gpu_kinds: list[GpuKind],
        gpu_count: int = 0,
        gpu_ids: list[str] | None = None,
        name: str | None = None,
        workdir: Path | None = None,
        heartbeat_s: float = 10.0,
        echo: bool = True,
        pycache: Path | None = DEFAULT_PYCACHE,
        fork: bool = True,
    ) -> None:
        self.client = client
        self.builds = {b.label: b for b in builds}
        self.gpu_kinds = gpu_kinds
        self.gpu_count = gpu_count
        # The devices this worker owns (``--gpu``); None leaves CUDA_VISIBLE_DEVICES as inherited.
        self.gpu_ids = gpu_ids
        # Set by SIGTERM (see app.cli): the running cell is stopped and no new job is claimed.
        self.stopping = threading.Event()
        self.name = name or f"{socket.gethostname()}-{os.getpid()}"
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="draftbench-worker-"))
        self.heartbeat_s = heartbeat_s
        self.echo = echo
        # The cells' bytecode cache (execute.cell_env); None leaves the interpreter's settings as inherited.
        self.pycache = pycache
        # The builds' fork servers (execute.ForkServer), cells forked from them; None starts each cell anew.
        self.fork_servers = execute.ForkServers(self.workdir) if fork else None
        self.id: int | None = None

    def register(self) -> int:
        """Check every build imports vLLM (SetupError otherwise), then register and take the worker's credential.

        Each interpreter imports vLLM once, however many labels run it: a bisection's series names each commit's
        build, and its unchanged commits share one (16 labels over 3 interpreters took 16 imports of 20-40 s)."""
        versions: dict[Path, str] = {}
        builds = []
        for build in self.builds.values():
            info = build.info(env=self.cell_env(0), vllm_version=versions.get(build.python))
            versions[build.python] = info.vllm_version
            builds.append(info)
        request = RegisterRequest(
            name=self.name,
            host=platform.node() or socket.gethostname(),
            gpu_kinds=self.gpu_kinds,
            gpu_count=self.gpu_count,
            builds=builds,
        )
        registered = self.client.register(request)
        self.id = registered.id
        if self.heartbeat_s * 3 > registered.lease_seconds:
            log.warning(
                "heartbeat every %.0f s against a lease of %.0f s: a late beat or two makes the service requeue our cell",
                self.heartbeat_s, registered.lease_seconds,
            )
        log.info("registered as worker %s (%s; builds %s)", self.id, ", ".join(self.gpu_kinds), ", ".join(self.builds))
        return self.id

    def run(self, *, max_jobs: int | None = None, exit_when_idle: bool = False, idle_sleep_s: float = 2.0) -> int:
        """Claim and run jobs; returns how many ran."""
        if self.id is None:
            self.register()
        done = 0
        while (max_jobs is None or done < max_jobs) and not self.stopping.is_set():
            job = self.client.claim(self.id)
            if job is None:
                if exit_when_idle:
                    break
                self.stopping.wait(idle_sleep_s)
                continue
            self.run_job(job)
            done += 1
        return done

    def close(self) -> None:
        """Stop the builds' fork servers (they die with this process anyway: their lifelines)."""
        if self.fork_servers is not None:
            self.fork_servers.close()

    def cell_env(self, gpus_needed: int, vllm_env: dict[str, str] | None = None) -> dict[str, str]:
        """The cell's environment: the sweep's vLLM variables for this cell, this worker's first
        ``gpus_needed`` GPUs, numbered as nvidia-smi does, and the bytecode cache."""
        env = execute.cell_env(vllm_env or {}, self.pycache)
        if self.gpu_ids:
            env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
            env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpu_ids[: max(gpus_needed, 1)])
        return env

    def _gpu_memory(self, gpus_needed: int) -> dict[str, int]:
        """MiB in use on the GPUs a cell of ``gpus_needed`` runs on (all of the host's without ``--gpu``); empty on CPU."""
        if not self.gpu_count:
            return {}
        used = gpus.memory_used()
        mine = self.gpu_ids[: max(gpus_needed, 1)] if self.gpu_ids else sorted(key for key in used if key.isdigit())
        return {gpu: used[gpu] for gpu in mine if gpu in used}

    def run_job(self, job: ClaimedJob) -> JobOutcome | None:
        """Run one claimed job's cell and report its outcome; None when the service took the job back meanwhile."""
        try:
            spec = CellSpec.model_validate(job.spec)
        except ValidationError as exc:
            # A cell this worker cannot read (a newer service's field, say) fails here, not on every worker.
            error = f"the worker cannot read this cell: {exc}"
            log.error("job %s: %s", job.job_id, error)
            return self._report(job.job_id, error + "\n", JobOutcome(error=error))
        folder = self.workdir / f"job-{job.job_id}-{job.attempt}"
        folder.mkdir(parents=True, exist_ok=True)
        log_path = folder / "cell.log"
        log.info("job %s: %s", job.job_id, _describe(spec))
        sender = _LogSender(self.client, job.job_id)
        beat = _Heartbeat(self, job.job_id, log_path, self.heartbeat_s, sender)
        beat.start()
        try:
            outcome, stopped = self._execute(spec, folder, log_path, beat, gpus_needed=job.gpus_needed)
        except OSError as exc:
            # The cell could not be started or its files not written (an interpreter gone, a full disk): this job's end.
            error = f"the worker could not run this cell: {exc}"
            log.error("job %s: %s", job.job_id, error)
            outcome, stopped = JobOutcome(error=error), False
        finally:
            beat.stop()
        if stopped:
            if self.stopping.is_set():
                log.info("job %s: stopped, the worker is shutting down (requeued when its lease runs out)", job.job_id)
            else:
                log.info("job %s: stopped (cancelled or requeued by the service)", job.job_id)
            return None
        return self._report(job.job_id, _read(log_path), outcome, sender)

    def _report(
        self, job_id: int, log_text: str, outcome: JobOutcome, sender: "_LogSender | None" = None
    ) -> JobOutcome | None:
        """Upload the log and the outcome; returns what the service took, None when the job moved on.

        A report the service refuses (4xx: a value it cannot store, a body over its limit) is one job's
        problem, not the worker's: the log says why, the job is reported failed with that reason, and
        the worker goes on claiming (the job, requeued, would otherwise stop every worker in turn).
        """
        try:
            if refused := (sender or _LogSender(self.client, job_id)).send(log_text):
                log.error("job %s: the service refused its log, reporting without it: %s", job_id, refused)
            if refused := _refusal(self.client.complete, job_id, outcome):
                log.error("job %s: the service refused its report, reporting the job failed: %s", job_id, refused)
                outcome = JobOutcome(error=f"the service refused the worker's report ({refused.status}): {refused.detail}")
                if refused := _refusal(self.client.complete, job_id, outcome):
                    log.error("job %s: the service refused its failure too: %s", job_id, refused)
                    return None
        except JobLost as exc:
            log.warning("job %s: result refused, the job moved on: %s", job_id, exc)
            return None
        except ServiceUnreachable as exc:
            # The lease runs out and the service requeues the job; this worker goes on claiming (and waiting for it).
            log.error("job %s: its report could not reach the service, left to be requeued: %s", job_id, exc)
            return None
        log.info("job %s: %s", job_id, _summary(outcome))
        return outcome

    def _execute(
        self, spec: CellSpec, folder: Path, log_path: Path, beat: "_Heartbeat", *, gpus_needed: int = 1
    ) -> tuple[JobOutcome, bool]:
        build = self.builds.get(spec.build)
        if build is None or not build.python.exists():
            error = f"build {spec.build!r} has no interpreter on this worker ({build.python if build else 'not registered here'})"
            log_path.write_text(error + "\n")
            return JobOutcome(error=error), False
        spec_path, result_path = folder / "spec.json", folder / "result.json"
        spec_path.write_text(json.dumps(spec.model_dump(mode="json")))
        env = self.cell_env(gpus_needed, spec.env)
        memory_before = self._gpu_memory(gpus_needed)
        finished = execute.run(
            [str(build.python), str(CELL_SCRIPT), str(spec_path), str(result_path)],
            log_path=log_path,
            timeout_s=spec.timeout_s,
            cwd=folder,
            env=env,
            on_line=(lambda line: print(f"[cell] {line}", end="", flush=True)) if self.echo else None,
            should_stop=lambda: beat.must_stop.is_set() or self.stopping.is_set(),
            fork_server=self.fork_servers.get(str(build.python), env, build.label) if self.fork_servers else None,
        )
        if memory_before:
            waited = gpus.wait_for_release(memory_before)
            if waited > 1.0:
                log.info("the cell's GPU memory came back %.1f s after it ended (waits at most 60 s)", waited)
        try:
            # By app.files' rules: a cell could leave a FIFO, a link or gigabytes there.
            found = files.read_inside(folder, result_path.name, limit=files.log_limit())
            result_json, unread = (found.data if found else None), None
        except files.FileRefused as exc:
            result_json, unread = None, str(exc)
        outcome = outcome_of(
            spec,
            log=_read(log_path),
            result_json=result_json,
            exit_code=finished.exit_code,
            signal=finished.signal,
            timed_out=finished.timed_out,
            duration_s=finished.duration_s,
            result_unread=unread,
        )
        return outcome, finished.stopped


class _Heartbeat(threading.Thread):
    """Keeps the worker alive in the service's eyes and streams the log while the cell runs; sets must_stop when told."""

    def __init__(self, worker: Worker, job_id: int, log_path: Path, every_s: float, sender: "_LogSender") -> None:
        super().__init__(daemon=True, name=f"heartbeat-{job_id}")
        self.worker, self.job_id, self.log_path, self.every_s, self.sender = worker, job_id, log_path, every_s, sender
        self.must_stop = threading.Event()
        self._done = threading.Event()
        self._sent_size = 0

    def run(self) -> None:
        while not self._done.wait(self.every_s):
            try:
                if self.job_id in self.worker.client.heartbeat(self.worker.id, [self.job_id]):
                    self.must_stop.set()
                    return
                size = self.log_path.stat().st_size if self.log_path.exists() else 0
                if size != self._sent_size:
                    self.sender.send(_read(self.log_path))
                    self._sent_size = size
            except JobLost:
                self.must_stop.set()
                return
            except Exception:  # a failed beat must not kill the cell; the next one retries
                log.exception("heartbeat for job %s failed", self.job_id)

    def stop(self) -> None:
        self._done.set()
        self.join(timeout=self.every_s + 5)


def _refusal(call: Callable[..., None], *args: object) -> ServiceRefused | None:
    """Call the service; the refusal it answered, or None. A lost job (409) is raised: nothing more to send."""
    try:
        call(*args)
    except JobLost:
        raise
    except ServiceRefused as exc:
        return exc
    return None


class _LogSender:
    """Uploads one job's log, each heartbeat's and the report's. Where the service finds it over its limit (413), its
    head and tail, cut smaller and smaller (to 64 KiB), so the end that names the root cause still arrives; the size
    the service took is kept, so the next upload starts there rather than sending the whole log to be refused again."""

    def __init__(self, client: ServiceClient, job_id: int) -> None:
        self.client, self.job_id = client, job_id
        self.fits: int | None = None

    def send(self, text: str) -> ServiceRefused | None:
        """The last refusal, or None."""
        data = text.encode()
        limit = min(len(data), self.fits or len(data))
        while (refused := _refusal(self.client.upload_log, self.job_id, _cut(data, limit).decode(errors="replace"))) \
                and refused.status == 413 and limit > _SMALLEST_LOG:
            limit = max(limit // 4, _SMALLEST_LOG)
        if refused is None and limit < len(data):
            self.fits = limit
        return refused


_SMALLEST_LOG = 64 * 1024
_CUT = b"\n[... draftbench cut the middle of this log ...]\n"


def _read(path: Path, limit: int = 16 * 1024 * 1024) -> str:
    """The log, cut to its head and tail when huge: the root cause sits near the end. Only those are read: a cell
    may write gigabytes."""
    try:
        with open(path, "rb") as log_file:
            size = os.fstat(log_file.fileno()).st_size
            if size <= limit:
                data = log_file.read(limit + 1)
            else:
                head = log_file.read(limit // 2)
                log_file.seek(-(limit // 2), os.SEEK_END)
                data = head + _CUT + log_file.read(limit // 2)
    except OSError:
        return ""
    return _cut(data, limit).decode(errors="replace")


def _cut(data: bytes, limit: int) -> bytes:
    if len(data) <= limit:
        return data
    half = max((limit - len(_CUT)) // 2, 0)
    return data[:half] + _CUT + data[-half:]


def _describe(spec: CellSpec) -> str:
    return f"{spec.gpu_kind}/{spec.backend}/{spec.graph_mode}/{spec.method or 'baseline'}"


def _summary(outcome: JobOutcome) -> str:
    if outcome.result is not None:
        counters = outcome.result.spec_decode
        rate = (
            f", acceptance {counters.num_accepted_tokens / counters.num_draft_tokens:.3f}"
            if counters and counters.num_draft_tokens
            else ""
        )
        return f"succeeded: {outcome.result.tokens_per_s:.1f} tok/s{rate}"
    if outcome.error:
        return f"failed: {outcome.error}"
    if outcome.timed_out:
        return f"timed out after {outcome.duration_s:.0f} s"
    return f"crashed (exit {outcome.exit_code}, signal {outcome.signal})"
