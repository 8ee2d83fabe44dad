"""The JSON files of vLLM's own benchmark tools read as a cell's result, so numbers people already have
compare with sweeps.

- ``vllm bench serve --save-result``: output and request throughput, TTFT/TPOT/ITL in milliseconds
  (``median_*`` always, ``p90_*``/``p99_*`` when it was asked for them), and with speculation the
  server's spec-decode counters over the run (``spec_decode_num_drafts``, ``..._draft_tokens``,
  ``..._accepted_tokens``, per-position rates).
- ``vllm bench throughput --output-json``: requests and *total* (prompt plus output) tokens over
  ``elapsed_time``; output tokens/s needs the output length the run used (``output_len``).

Pure functions of the parsed JSON: they raise BenchFileError naming what is missing.
"""

from typing import Any

from app.schemas.cell import CellResult

SERVE = "serve"
THROUGHPUT = "throughput"


class BenchFileError(ValueError):
    """Not a file of ``vllm bench serve`` or ``vllm bench throughput``, or one missing a needed field."""


def kind_of(data: Any) -> str:  # noqa: ANN401
    """``serve`` or ``throughput``, by the fields each tool writes."""
    if isinstance(data, dict) and "output_throughput" in data and "duration" in data:
        return SERVE
    if isinstance(data, dict) and "elapsed_time" in data and "tokens_per_second" in data:
        return THROUGHPUT
    raise BenchFileError("not a result of `vllm bench serve --save-result` or `vllm bench throughput --output-json`")


def to_result(data: dict[str, Any], *, output_len: int | None = None, concurrency: int | None = None) -> CellResult:
    """A cell result (one round: the tool's whole run) from either tool's JSON."""
    try:
        return _serve(data, concurrency) if kind_of(data) == SERVE else _throughput(data, output_len)
    except KeyError as exc:
        raise BenchFileError(f"the file has no {exc.args[0]!r}") from None


def _serve(data: dict[str, Any], concurrency: int | None) -> CellResult:
    seconds, completed = float(data["duration"]), int(data["completed"])
    output_tokens = int(data["total_output_tokens"])
    counters = None
    if "spec_decode_num_drafts" in data:
        drafts = int(data["spec_decode_num_drafts"])
        counters = {
            "num_drafts": drafts,
            "num_draft_tokens": int(data["spec_decode_draft_tokens"]),
            "num_accepted_tokens": int(data["spec_decode_accepted_tokens"]),
            # The file keeps rates; the counts they came from are rate x drafts.
            "accepted_per_position": [round(rate * drafts) for rate in data.get("spec_decode_per_position_acceptance_rates", [])],
        }
    serving = {
        "concurrency": concurrency or data.get("max_concurrency") or 1,
        **{f"{metric}_ms": _percentiles(data, metric) for metric in ("ttft", "tpot", "itl")},
        "output_tokens_per_s": float(data["output_throughput"]),
        "requests_per_s": float(data["request_throughput"]),
        "completed": completed,
        "failed": int(data.get("failed") or 0),
    }
    return CellResult.model_validate({
        "engine_start_s": 0.0, "warmup_s": 0.0, "generation_s": seconds, "num_requests": completed,
        "prompt_tokens": int(data.get("total_input_tokens") or 0), "output_tokens": output_tokens,
        "tokens_per_s": float(data["output_throughput"]), "requests_per_s": float(data["request_throughput"]),
        "spec_decode": counters, "output_fingerprint": "", "serving": serving,
        "rounds": [{"seconds": seconds, "output_tokens": output_tokens, "num_requests": completed, "spec_decode": counters}],
    })


def _throughput(data: dict[str, Any], output_len: int | None) -> CellResult:
    if not output_len:
        raise BenchFileError(
            "`vllm bench throughput` counts prompt and output tokens together: give the output length it ran with"
        )
    seconds, requests = float(data["elapsed_time"]), int(data["num_requests"])
    output_tokens = requests * output_len
    return CellResult.model_validate({
        "engine_start_s": 0.0, "warmup_s": 0.0, "generation_s": seconds, "num_requests": requests,
        "prompt_tokens": max(0, int(data["total_num_tokens"]) - output_tokens), "output_tokens": output_tokens,
        "tokens_per_s": output_tokens / seconds, "requests_per_s": float(data["requests_per_second"]),
        "output_fingerprint": "",
        "rounds": [{"seconds": seconds, "output_tokens": output_tokens, "num_requests": requests}],
    })


def _percentiles(data: dict[str, Any], metric: str) -> dict[str, float | None]:
    return {
        "p50": float(data[f"median_{metric}_ms"]),
        "p90": _maybe(data.get(f"p90_{metric}_ms")),
        "p99": _maybe(data.get(f"p99_{metric}_ms")),
    }


def _maybe(value: Any) -> float | None:  # noqa: ANN401
    return None if value is None else float(value)
