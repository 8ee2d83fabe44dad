"""``draftbench submit|status|expand|import|export``: sweeps from the command line, and sweeps run without the service."""

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from app.cli.errors import CliError
from app.cli.http import Api
from app.cli.options import Server, SubmitToken
from app.cli.service import DatabaseUrl, upgraded
from app.config import DEFAULT_SERVER
from app.enums import JobState, ResultSource, SweepState

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from app.models import Sweep
    from app.sweeps.imports import RanJob

# Piped output (make, CI logs) gets a wide table instead of rich's 80-column default.
console = Console(width=None if sys.stdout.isatty() else 200)
FINAL = {s.value for s in JobState if s.is_final}


def submit(
    sweep_file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Sweep in YAML or JSON")],
    server: Server = DEFAULT_SERVER,
    token: SubmitToken = "",
    wait: Annotated[bool, typer.Option(help="Show progress until the sweep finishes")] = True,
    idempotency_key: str | None = None,
    poll: float = 2.0,
) -> None:
    """Submit a sweep; by default wait with a progress bar and print the results table."""
    from app import files

    headers = {"content-type": "application/yaml"}
    if idempotency_key:
        headers["Idempotency-Key"] = idempotency_key
    try:
        body = files.read_named(sweep_file, limit=files.body_limit()).data
    except files.FileRefused as exc:
        raise CliError(str(exc)) from None
    with Api(server, token) as api:
        sweep = api.send("POST", "/api/v1/sweeps", content=body, headers=headers).json()
        console.print(f"sweep {sweep['id']} '{sweep['name']}': {sweep['total']} jobs · {api.server}/sweeps/{sweep['id']}")
        for warning in sweep.get("warnings", []):
            console.print(f"[yellow]warning:[/] {warning}")
        if not wait:
            return
        follow(api, sweep["id"], sweep["total"], poll)
        _print_results(api, sweep["id"])


def status(sweep_id: Annotated[int | None, typer.Argument()] = None, server: Server = DEFAULT_SERVER) -> None:
    """List recent sweeps, or show one sweep's results."""
    with Api(server) as api:
        if sweep_id is None:
            table = Table("id", "name", "state", "jobs", "build")
            for s in api.get("/api/v1/sweeps"):
                counts = ", ".join(f"{k} {v}" for k, v in sorted(s["counts"].items()))
                table.add_row(str(s["id"]), s["name"], s["state"], counts, s["build"])
            console.print(table)
        else:
            _print_results(api, sweep_id)


def import_results(
    folder: Annotated[
        Path, typer.Argument(exists=True, file_okay=False, help="A folder made by `draftbench expand` and runners/offline.py")
    ],
    database_url: DatabaseUrl = None,
) -> None:
    """Import cells run elsewhere (runners/offline.py) as a finished sweep, with their logs and crashes.

    The same runs are stored once: a folder whose runs (each known by its cell, repeat and the times in its
    exit.json) a sweep holds already reports that sweep and adds nothing; one run further since its import
    (--only-missing) adds the runs of the jobs that sweep never ran to it, even when it was imported before any
    of its cells ran (its folder.json, written by expand, names its sweep); one that holds them with other content
    (a log, result or exit edited, a cell run again) is refused, naming the sweep and the files.
    Every file is checked before anything is stored: a refused one names itself and nothing is imported.
    """
    from app.files import FileRefused
    from app.sweeps.imports import RunsStored, import_sweep
    from runners.folders import read_folder

    try:
        found = read_folder(folder)
    except FileRefused as exc:
        raise CliError(f"nothing imported: {exc}") from None
    with _importing(database_url) as session:
        try:
            imported = import_sweep(session=session, spec=found.spec, ran=found.ran, digest=found.digest,
                                    layout=found.layout, folder_id=found.folder_id)
        except RunsStored as exc:
            raise CliError(f"nothing imported: {folder}: {exc}") from None
        sweep = imported.sweep
        if imported.created:
            console.print(f"imported sweep {sweep.id} '{sweep.name}': {len(found.ran)} of {len(sweep.jobs)} jobs ran")
        elif imported.added:
            ran = sum(job.state is not JobState.QUEUED for job in sweep.jobs)
            runs = "run" if imported.added == 1 else "runs"
            console.print(f"added {imported.added} {runs} to sweep {sweep.id} '{escape(sweep.name)}': {ran} of "
                          f"{len(sweep.jobs)} jobs ran")
        else:
            console.print(f"{_stored_as(sweep)}: nothing added")


def _stored_as(sweep: "Sweep") -> str:
    """Where runs an import found stored already are: a sweep imported before, or one this service's workers ran."""
    from app.sweeps.service import IMPORT_SCOPE

    if sweep.idempotency_scope == IMPORT_SCOPE:
        return f"already imported as sweep {sweep.id} '{escape(sweep.name)}'"
    return f"already stored as sweep {sweep.id} '{escape(sweep.name)}' (run by this service's workers)"


@contextmanager
def _importing(database_url: str | None) -> Iterator["Session"]:
    """One transaction for a whole import: stored entirely or not at all; a value the database cannot hold
    (an integer past 64 bits, a NUL in PostgreSQL's text) is one line, as the API's 422 for it."""
    from sqlalchemy.exc import DataError

    from app import db

    engine = db.make_engine(upgraded(database_url))
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            yield session
    except (OverflowError, DataError) as exc:
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0][:200]
        raise CliError(f"nothing imported: the database cannot store a value of it ({reason})") from None
    finally:
        engine.dispose()


def export_sweep(
    sweep: Annotated[str, typer.Argument(help="The sweep's id or name")],
    folder: Annotated[Path, typer.Argument(file_okay=False, help="A new or empty folder")],
    database_url: DatabaseUrl = None,
) -> None:
    """Write a sweep of the database as the folder `draftbench import` reads: sweep.json, folder.json (the identity of
    the folder it was imported from, or a new one), and each cell's spec.json with, for a cell that ran, its cell.log,
    exit.json and result.json."""
    from app import db
    from app.errors import NotFoundError
    from app.sweeps import exports
    from runners.folders import write_runs

    engine = db.make_engine(upgraded(database_url))
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            try:
                found = exports.find(session=session, ref=sweep)
                done = exports.export(session=session, sweep=found)
            except (NotFoundError, exports.ExportError) as exc:
                raise CliError(str(exc), code=2) from None
            name, ident = found.name, found.id
    finally:
        engine.dispose()
    try:
        write_runs(done.spec, folder, done.ran, done.cut_logs, done.layout, done.folder_id)
    except FileExistsError as exc:
        raise CliError(f"{exc}: export writes only into a new or empty folder", code=2) from None
    except OSError as exc:
        raise CliError(f"cannot write {exc.filename or folder}: {exc.strerror or exc}", code=2) from None
    states = ", ".join(f"{state} {count}" for state, count in sorted(done.states.items()))
    console.print(f"sweep {ident} '{name}' written under {folder}: {len(done.ran)} of {done.states.total()} jobs ran ({states})")


def import_bench(
    result_file: Annotated[
        Path, typer.Argument(dir_okay=False, help="JSON of `vllm bench serve --save-result` or `vllm bench throughput --output-json`")
    ],
    sweep_file: Annotated[
        Path, typer.Option("--sweep", dir_okay=False, help="A sweep of exactly one cell: the build and config the file measured")
    ],
    output_len: Annotated[int | None, typer.Option(min=1, help="`vllm bench throughput` only: the output length it ran with")] = None,
    database_url: DatabaseUrl = None,
) -> None:
    """Import a result of vLLM's own benchmark tools as a finished one-cell sweep (once), to compare with sweeps."""
    import hashlib
    import json

    from app.errors import InputError
    from app.files import FileRefused
    from app.sweeps import bench_files, imports, matrix
    from app.sweeps import service as sweeps

    spec = _read_sweep(sweep_file)
    try:
        jobs = sweeps.job_count(spec, max_jobs=imports.IMPORT_LIMIT)
    except InputError as exc:
        raise CliError(f"{sweep_file}: {'.'.join(map(str, exc.loc[1:]))}: {exc.msg}") from None
    if jobs != 1:
        raise CliError(f"{sweep_file} describes {jobs // spec.repeats} cells x {spec.repeats} repeats; the file measured one cell once")
    cell = matrix.expand(spec)[0]
    try:
        raw, data, ran = _read_bench(result_file, output_len=output_len, concurrency=cell.spec.concurrency)
    except FileRefused as exc:
        raise CliError(f"nothing imported: {exc}") from None
    digest = hashlib.sha256(raw + json.dumps(spec.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()
    with _importing(database_url) as session:
        try:
            imported = imports.import_sweep(session=session, spec=spec, ran=[ran], digest=digest,
                                            source=ResultSource.VLLM_BENCH)
        except imports.RunsStored as exc:
            raise CliError(f"nothing imported: {result_file}: {exc}") from None
        what = "imported as" if imported.created else "already imported as"
        speed = f"{ran.outcome.result.tokens_per_s:.1f} output tok/s"
        sweep = imported.sweep
        console.print(f"{what} sweep {sweep.id} '{sweep.name}' ({bench_files.kind_of(data)}: {speed})")


def _read_bench(path: Path, *, output_len: int | None, concurrency: int | None) -> "tuple[bytes, object, RanJob]":
    """A ``vllm bench`` file (read by app.files' rules) as its bytes, its JSON and the run it stands for;
    FileRefused naming the file and what is wrong."""
    import pydantic_core

    from app import files
    from app.schemas.cell import JobOutcome
    from app.sweeps import bench_files, imports

    found = files.read_given(path, limit=files.log_limit())
    try:
        data = pydantic_core.from_json(found.data, allow_inf_nan=False)
    except ValueError as exc:
        raise files.FileRefused(f"{path}: not JSON: {exc}") from None
    files.refuse_twice_given_keys(found.data, name=path)
    try:
        result = bench_files.to_result(data, output_len=output_len, concurrency=concurrency)
    except bench_files.BenchFileError as exc:
        raise files.FileRefused(f"{path}: {exc}") from None
    # The file says when it was written only by its modification time.
    try:
        finished = imports.modified(found.mtime)
        started = imports.started(finished, result.generation_s)
    except ValueError as exc:
        raise files.FileRefused(f"{path}: its modification time and duration: {exc}") from None
    ran = imports.RanJob(cell_index=0, repeat=0, outcome=JobOutcome(result=result, exit_code=0), log="",
                          started_at=started, finished_at=finished)
    return found.data, data, ran


def _read_sweep(path: Path):
    """A sweep file (YAML or JSON, read by app.files' rules), validated; CliError with the reason otherwise."""
    import yaml
    from pydantic import ValidationError

    from app import files
    from app.schemas.sweep import SweepSpec
    from app.sweeps import parsing

    try:
        raw = files.read_given(path, limit=files.body_limit()).data
        return SweepSpec.model_validate(parsing.load(raw, parsing.YAML_TYPES[0]))
    except files.FileRefused as exc:
        raise CliError(str(exc)) from None
    except ValidationError as exc:
        raise CliError(f"{path}: {files.describe(exc)}") from None
    except (parsing.BodyError, yaml.YAMLError) as exc:
        raise CliError(f"{path}: {' '.join(str(exc).split())[:800]}") from None


def expand(
    sweep_file: Annotated[Path, typer.Argument(exists=True, dir_okay=False)],
    folder: Annotated[Path, typer.Argument(file_okay=False, help="Where to write sweep.json and cells/NAME/spec.json")],
) -> None:
    """Write a sweep's cells as files for runners/offline.py, for hosts that cannot reach the service."""
    from runners.folders import write_cells

    spec = _read_sweep(sweep_file)
    count = write_cells(spec, folder)
    console.print(f"{count} cells x {spec.repeats} repeats written under {folder}")


def follow(api: Api, sweep_id: int, total: int, poll: float, *, out: Console = console) -> None:
    """A progress bar on ``out`` until the sweep is finished or cancelled."""
    columns = (TextColumn("[bold]sweep {task.fields[sweep]}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[counts]}"), TimeElapsedColumn())
    with Progress(*columns, console=out, transient=not out.is_terminal) as progress:
        task = progress.add_task("run", total=total, sweep=sweep_id, counts="")
        while True:
            sweep = api.get(f"/api/v1/sweeps/{sweep_id}")
            done = sum(v for k, v in sweep["counts"].items() if k in FINAL)
            counts = " ".join(f"{k}:{v}" for k, v in sorted(sweep["counts"].items()))
            progress.update(task, completed=done, counts=counts)
            if sweep["state"] in (SweepState.FINISHED, SweepState.CANCELLED):
                return
            time.sleep(poll)


def _print_results(api: Api, sweep_id: int) -> None:
    sweep = api.get(f"/api/v1/sweeps/{sweep_id}")
    results = {r["job_id"]: r for r in api.get("/api/v1/results", sweep_id=sweep_id)}
    table = Table("job", "GPU kind", "backend", "graph mode → resolved", "method", "rep", "state",
                  escape("acceptance [95% CI]"), escape("accept len [95% CI]"), escape("tok/s [95%] (rounds)"),
                  title=f"sweep {sweep_id}: {sweep['name']} ({sweep['state']})")
    for job in sweep["jobs"]:
        r = results.get(job["job_id"])
        mode = f"{job['graph_mode']} → {r['resolved_graph_mode'] or '?'}" if r else job["graph_mode"]
        acc, length, tps = measured_text(r)
        table.add_row(str(job["job_id"]), job["gpu_kind"], job["backend"], mode, job["method"] or "baseline",
                      str(job["repeat"]), job["state"], escape(acc), escape(length), escape(tps))
    console.print(table)
    for warning in sweep.get("warnings", []):
        console.print(f"[yellow]warning:[/] {warning}")
    for line in findings(api, sweep_id):
        console.print(escape(line), soft_wrap=True)


def findings(api: Api, sweep_id: int) -> list[str]:
    """What the service found in what the sweep ran, as lines: its graph-capture alarms (each judged within its
    whole build) with what became of its other graphed cells, its calibration misses, and the open regressions of
    its cells."""
    counts = api.get("/api/v1/alarms/counts", sweep_id=sweep_id)
    spared = counts["within_by_reason"]
    lines = [f"graph-capture alarms: {counts['alarmed']} of {counts['judged']} graphed cells judged against their eager "
             f"sibling ({spared.get('within_interval', 0)} within their interval, {spared.get('below_min_effect', 0)} below "
             f"the minimum effect, {spared.get('unknown', 0)} judged before either was kept; {counts['cannot_show']} cannot "
             f"show a capture bug: acceptance exactly 0 or 1; {counts['unpaired']} more without an eager sibling)"]
    lines += [f"  alarm ({a['kind']}): {a['sentence']} ({a['successes']}/{a['trials']} against "
              f"{a['eager_successes']}/{a['eager_trials']})" for a in api.get("/api/v1/alarms", sweep_id=sweep_id)]
    misses = api.get("/api/v1/calibration-misses", sweep_id=sweep_id)
    lines.append(f"calibration misses: {misses['count']}")
    lines += [f"  {m['sentence']}" for m in misses["misses"]]
    alerts = api.get("/api/v1/alerts", sweep_id=sweep_id)
    lines.append(f"open regressions of its cells: {len(alerts)}")
    lines += [f"  {a['metric']} {a['gpu_kind']} {a['label']} {a['backend']} {a['graph_mode']}: {a['before']:.3g} -> "
              f"{a['after']:.3g} ({100 * a['change']:+.1f} %) from build {a['first_bad_build']} on (last good "
              f"{a['last_good_build']}), still down at {a['latest_build']}" for a in alerts]
    return lines


def measured_text(r: dict | None) -> tuple[str, str, str]:
    """A result's acceptance, mean acceptance length and tokens/s as the results table shows them (blank without).

    Tokens/s carries its start's interval to 95 % as the pages do for one engine start
    (``app.analysis.fallback.repeat_interval``), not the stored interval at its own level."""
    from app.analysis.fallback import RepeatSpeed, repeat_interval

    acc = length = tps = ""
    if r:
        tps = f"{r['tokens_per_s']:.1f}"
        own = repeat_interval(RepeatSpeed(r["tokens_per_s"], r["tokens_per_s_low"], r["tokens_per_s_high"], r["rounds"],
                                          r.get("tokens_per_s_level")))
        if own is not None:
            tps += f" [{own[0]:.1f}, {own[1]:.1f}]"
        tps += f" ({r['rounds']})"
        if r["acceptance_rate"] is not None:
            acc = f"{r['acceptance_rate']:.3f} [{r['acceptance_rate_low']:.3f}, {r['acceptance_rate_high']:.3f}]"
            length = f"{r['mean_acceptance_length']:.2f}"
            if r["mean_acceptance_length_low"] is not None:
                length += f" [{r['mean_acceptance_length_low']:.2f}, {r['mean_acceptance_length_high']:.2f}]"
    return acc, length, tps


def register(cli: typer.Typer) -> None:
    cli.command()(submit)
    cli.command()(status)
    cli.command()(expand)
    cli.command("import")(import_results)
    cli.command("export")(export_sweep)
    cli.command("import-bench")(import_bench)
