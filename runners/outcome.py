"""What a finished cell process amounts to: its result, what ran, or how it died."""

from pathlib import Path

from pydantic import ValidationError

from app.schemas.cell import CellOutcome, CellResult, CellSpec
from app.vllmlog.ran import parse_log


def outcome_of(
    spec: CellSpec,
    *,
    log: str,
    result_path: Path,
    exit_code: int | None,
    signal: int | None,
    timed_out: bool,
    duration_s: float,
) -> CellOutcome:
    """Validate the cell's result JSON (only trusted after exit 0) and read from the log what ran."""
    outcome = CellOutcome(
        resolved=parse_log(log, backend=spec.backend.value, graph_mode=spec.graph_mode.value, method=spec.method),
        exit_code=exit_code,
        signal=signal,
        timed_out=timed_out,
        duration_s=duration_s,
    )
    if exit_code == 0 and not timed_out:
        try:
            outcome.result = CellResult.model_validate_json(result_path.read_bytes())
        except (OSError, ValidationError) as exc:
            outcome.error = f"the cell exited 0 but its result JSON is unusable: {exc}"
    return outcome
