"""What a finished cell process amounts to: its result, what ran, or how it died."""

from app import files
from app.schemas.cell import CellResult, CellSpec, JobOutcome
from app.vllmlog.ran import parse_log


def outcome_of(
    spec: CellSpec,
    *,
    log: str,
    result_json: bytes | None,
    exit_code: int | None,
    signal: int | None,
    timed_out: bool,
    duration_s: float,
    result_unread: str | None = None,
) -> JobOutcome:
    """Validate the cell's result JSON (only trusted after exit 0; None: it wrote none, or ``result_unread`` says why it
    was not read) and read from the log what ran."""
    outcome = JobOutcome(
        resolved=parse_log(log, backend=spec.backend.value, graph_mode=spec.graph_mode.value, method=spec.method),
        exit_code=exit_code,
        signal=signal,
        timed_out=timed_out,
        duration_s=duration_s,
    )
    if exit_code == 0 and not timed_out:
        if result_unread is not None:
            outcome.error = f"the cell exited 0 but its result JSON is unusable: {result_unread}"
            return outcome
        if result_json is None:
            outcome.error = "the cell exited 0 but wrote no result JSON"
            return outcome
        try:
            # As an import reads it (``app.files.validated``): a lone surrogate in a text is kept as U+FFFD, as the API keeps it.
            outcome.result = files.validated(CellResult, result_json, name="result.json")
        except files.FileRefused as exc:
            outcome.error = f"the cell exited 0 but its result JSON is unusable: {exc}"
    return outcome
