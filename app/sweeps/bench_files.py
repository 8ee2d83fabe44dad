"""The JSON files of vLLM's own benchmark tools read as a cell's result, so numbers people already have
compare with sweeps.

- ``vllm bench serve --save-result``: output and request throughput, TTFT/TPOT/ITL in milliseconds
  (``median_*`` always, ``p90_*``/``p99_*`` when it was asked for them), and with speculation the
  server's spec-decode counters over the run (``spec_decode_num_drafts``, ``..._draft_tokens``,
  ``..._accepted_tokens``, per-position rates).
- ``vllm bench throughput --output-json``: requests and *total* (prompt plus output) tokens over
  ``elapsed_time``; output tokens/s needs the output length the run used (``output_len``).

Pure functions of the parsed JSON: the fields read are validated first (types, NaN, negative or zero
durations), and BenchFileError names the one that is missing or wrong.
"""

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.files import describe
from app.schemas.cell import CellResult

SERVE = "serve"
THROUGHPUT = "throughput"

Count = Annotated[int, Field(ge=0, strict=True)]
Amount = Annotated[float, Field(ge=0)]
Seconds = Annotated[float, Field(gt=0)]


class BenchFileError(ValueError):
    """Not a file of ``vllm bench serve`` or ``vllm bench throughput``, or one with a field missing or wrong."""


class _File(BaseModel):
    # The tools write many more fields than are read here; NaN or Infinity in a read one is refused.
    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)


class ServeFile(_File):
    """The fields of ``vllm bench serve --save-result`` read as a result."""

    duration: Seconds
    completed: Count
    failed: Count | None = None
    total_input_tokens: Count | None = None
    total_output_tokens: Count
    output_throughput: Amount
    request_throughput: Amount
    max_concurrency: Annotated[int, Field(ge=1, strict=True)] | None = None
    median_ttft_ms: Amount
    median_tpot_ms: Amount
    median_itl_ms: Amount
    p90_ttft_ms: Amount | None = None
    p90_tpot_ms: Amount | None = None
    p90_itl_ms: Amount | None = None
    p99_ttft_ms: Amount | None = None
    p99_tpot_ms: Amount | None = None
    p99_itl_ms: Amount | None = None
    spec_decode_num_drafts: Count | None = None
    spec_decode_draft_tokens: Count | None = None
    spec_decode_accepted_tokens: Count | None = None
    spec_decode_per_position_acceptance_rates: list[Annotated[float, Field(ge=0, le=1)]] = Field(default_factory=list, max_length=64)

    @model_validator(mode="after")
    def _all_counters(self) -> "ServeFile":
        if self.spec_decode_num_drafts is not None:
            missing = [name for name in ("spec_decode_draft_tokens", "spec_decode_accepted_tokens") if getattr(self, name) is None]
            if missing:
                raise ValueError(f"spec_decode_num_drafts without {' and '.join(missing)}")
        return self


class ThroughputFile(_File):
    """The fields of ``vllm bench throughput --output-json`` read as a result."""

    elapsed_time: Seconds
    num_requests: Count
    total_num_tokens: Count
    requests_per_second: Amount


def kind_of(data: Any) -> str:
    """``serve`` or ``throughput``, by the fields each tool writes."""
    if isinstance(data, dict) and "output_throughput" in data and "duration" in data:
        return SERVE
    if isinstance(data, dict) and "elapsed_time" in data and "tokens_per_second" in data:
        return THROUGHPUT
    raise BenchFileError("not a result of `vllm bench serve --save-result` or `vllm bench throughput --output-json`")


def to_result(data: object, *, output_len: int | None = None, concurrency: int | None = None) -> CellResult:
    """A cell result (one round: the tool's whole run) from either tool's JSON; BenchFileError naming the field
    that is missing or wrong (the file's own, or the result's it became)."""
    try:
        if kind_of(data) == SERVE:
            return _serve(ServeFile.model_validate(data), concurrency)
        return _throughput(ThroughputFile.model_validate(data), output_len)
    except ValidationError as exc:
        raise BenchFileError(describe(exc)) from None


def _serve(data: ServeFile, concurrency: int | None) -> CellResult:
    seconds, completed, output_tokens = data.duration, data.completed, data.total_output_tokens
    counters = None
    if data.spec_decode_num_drafts is not None:
        drafts = data.spec_decode_num_drafts
        counters = {
            "num_drafts": drafts,
            "num_draft_tokens": data.spec_decode_draft_tokens,
            "num_accepted_tokens": data.spec_decode_accepted_tokens,
            # The file keeps rates; the counts they came from are rate x drafts.
            "accepted_per_position": [round(rate * drafts) for rate in data.spec_decode_per_position_acceptance_rates],
        }
    serving = {
        "concurrency": concurrency or data.max_concurrency or 1,
        **{f"{metric}_ms": _percentiles(data, metric) for metric in ("ttft", "tpot", "itl")},
        "output_tokens_per_s": data.output_throughput,
        "requests_per_s": data.request_throughput,
        "completed": completed,
        "failed": data.failed or 0,
    }
    return CellResult.model_validate({
        "engine_start_s": 0.0, "warmup_s": 0.0, "generation_s": seconds, "num_requests": completed,
        "prompt_tokens": data.total_input_tokens or 0, "output_tokens": output_tokens,
        "tokens_per_s": data.output_throughput, "requests_per_s": data.request_throughput,
        "spec_decode": counters, "output_fingerprint": "", "serving": serving,
        "rounds": [{"seconds": seconds, "output_tokens": output_tokens, "num_requests": completed, "spec_decode": counters}],
    })


def _throughput(data: ThroughputFile, output_len: int | None) -> CellResult:
    if not output_len:
        raise BenchFileError(
            "`vllm bench throughput` counts prompt and output tokens together: give the output length it ran with"
        )
    seconds, requests = data.elapsed_time, data.num_requests
    output_tokens = requests * output_len
    return CellResult.model_validate({
        "engine_start_s": 0.0, "warmup_s": 0.0, "generation_s": seconds, "num_requests": requests,
        "prompt_tokens": max(0, data.total_num_tokens - output_tokens), "output_tokens": output_tokens,
        "tokens_per_s": output_tokens / seconds, "requests_per_s": data.requests_per_second,
        "output_fingerprint": "",
        "rounds": [{"seconds": seconds, "output_tokens": output_tokens, "num_requests": requests}],
    })


def _percentiles(data: ServeFile, metric: str) -> dict[str, float | None]:
    return {
        "p50": getattr(data, f"median_{metric}_ms"),
        "p90": getattr(data, f"p90_{metric}_ms"),
        "p99": getattr(data, f"p99_{metric}_ms"),
    }
