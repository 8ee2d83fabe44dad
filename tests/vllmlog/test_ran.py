"""parse_log on hand-written excerpts in vLLM's own formats (0.32.0 sources; 0.26.0 lines seen on the H200)."""

import json
from pathlib import Path

from app.vllmlog.lines import split_line
from app.vllmlog.ran import parse_log

ENGINE = "(EngineCore_DP0 pid=123) {level} 11-30 00:00:00 [{file}] {message}"
WORKER = "(Worker_TP0 pid=456) {level} 11-30 00:00:01 [{file}] {message}"

FLASHINFER_SPEC_DOWNGRADE = (
    "CUDAGraphMode.FULL_AND_PIECEWISE is not supported with spec-decode for attention backend "
    "FlashInferBackend (support: AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); setting cudagraph_mode=PIECEWISE"
)
DFLASH_DRAFT_EAGER = (
    "DFlash draft attention (FlashInferBackend) does not support full CUDA graphs; running the draft eagerly."
)


def engine(message: str, level: str = "INFO", file: str = "core.py:12") -> str:
    return ENGINE.format(level=level, file=file, message=message)


def worker(message: str, level: str = "INFO", file: str = "cuda.py:507") -> str:
    return WORKER.format(level=level, file=file, message=message)


def log(*lines: str) -> str:
    return "\n".join(
        [
            engine("Initializing a V1 LLM engine (v0.26.0) with config: model='m', compilation_config={...}"),
            *lines,
            engine("init engine (profile, create kv cache, warmup model) took 9.10 s"),
        ]
    )


def test_split_line_strips_process_level_time_and_file():
    message = "Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN']."
    line = "Nov 30 00:00:00 host env[9]: " + engine(message)
    assert split_line(line) == ("EngineCore_DP0 pid=123", message)
    assert split_line("Traceback (most recent call last):") == (None, "Traceback (most recent call last):")


def test_clean_gpu_log_keeps_the_request():
    text = log(
        worker("Using AttentionBackendEnum.FLASH_ATTN backend."),
        worker("Graph capturing finished in 12 secs, took 0.45 GiB", file="gpu_model_runner.py:6582"),
    )
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="FULL_AND_PIECEWISE", method=None)
    assert resolved.resolved_backend == "FLASH_ATTN"
    assert resolved.resolved_draft_backend is None
    assert resolved.resolved_graph_mode == "FULL_AND_PIECEWISE"
    assert not resolved.graph_downgraded
    assert not resolved.draft_eager
    assert resolved.resolved_draft_graph_mode is None
    assert resolved.downgrades == []


def test_flashinfer_spec_decode_downgrade_to_piecewise_and_dflash_draft_backend():
    """The H200 case: FLASHINFER target, DFlash draft that picks FLASH_ATTN on its own."""
    text = log(
        worker("Using AttentionBackendEnum.FLASHINFER backend."),
        worker("Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLEX_ATTENTION']."),
        engine(FLASHINFER_SPEC_DOWNGRADE, level="WARNING", file="compilation.py:1459"),
    )
    resolved = parse_log(text, backend="FLASHINFER", graph_mode="FULL_AND_PIECEWISE", method="dflash")
    assert resolved.resolved_backend == "FLASHINFER"
    assert resolved.resolved_draft_backend == "FLASH_ATTN"
    assert resolved.resolved_graph_mode == "PIECEWISE"
    assert resolved.graph_downgraded
    assert resolved.downgrades == [FLASHINFER_SPEC_DOWNGRADE]


def test_dflash_draft_eager_line():
    text = log(
        worker("Using AttentionBackendEnum.TRITON_ATTN backend."),
        worker(DFLASH_DRAFT_EAGER, level="WARNING", file="speculator.py:133"),
    )
    resolved = parse_log(text, backend="TRITON_ATTN", graph_mode="FULL", method="dflash")
    assert resolved.draft_eager
    assert resolved.resolved_draft_graph_mode == "NONE"
    assert resolved.resolved_graph_mode == "FULL"
    assert not resolved.graph_downgraded
    assert resolved.downgrades == [DFLASH_DRAFT_EAGER]
    # The draft printed no selection line of its own: it resolved to the target's backend.
    assert resolved.resolved_draft_backend == "TRITON_ATTN"


def test_backend_without_full_graph_support_downgrades():
    message = (
        "CUDAGraphMode.FULL is not supported with TritonAttentionBackend backend "
        "(support: AttentionCGSupport.NEVER); setting cudagraph_mode=NONE because attention is not compiled piecewise"
    )
    text = log(engine(message, level="WARNING", file="compilation.py:1439"))
    resolved = parse_log(text, backend="TRITON_ATTN", graph_mode="FULL", method=None)
    assert resolved.resolved_graph_mode == "NONE"
    assert resolved.graph_downgraded
    assert resolved.downgrades == [message]


def test_mixed_full_not_supported_goes_to_full_decode_only():
    message = (
        "CUDAGraphMode.FULL is not supported with FlashInferBackend backend "
        "(support: AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE); setting cudagraph_mode=FULL_DECODE_ONLY"
    )
    resolved = parse_log(
        log(engine(message, level="WARNING")), backend="FLASHINFER", graph_mode="FULL", method=None
    )
    assert resolved.resolved_graph_mode == "FULL_DECODE_ONLY"
    assert resolved.downgrades == [message]


def test_compilation_mode_override():
    message = (
        "Cudagraph mode FULL_AND_PIECEWISE is not compatible with compilation mode 0. Overriding to FULL_DECODE_ONLY."
    )
    text = log(engine(message, file="vllm.py:1087"))
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="FULL_AND_PIECEWISE", method=None)
    assert resolved.resolved_graph_mode == "FULL_DECODE_ONLY"
    assert resolved.graph_downgraded
    assert resolved.downgrades == [message]


def test_enforce_eager_is_no_downgrade_when_none_was_asked():
    text = log(
        engine(
            "Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup. This is equivalent to "
            "setting -cc.mode=none -cc.cudagraph_mode=none and --kernel_config.enable_jit_warmup=False",
            level="WARNING",
            file="vllm.py:1703",
        ),
        worker("Using AttentionBackendEnum.FLASH_ATTN backend."),
    )
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="NONE", method=None)
    assert resolved.resolved_graph_mode == "NONE"
    assert not resolved.graph_downgraded
    assert resolved.downgrades == []


def test_skipped_capture_when_graphs_were_asked_is_a_downgrade():
    message = (
        "Skipping CUDA graph capture. To turn on CUDA graph capture, ensure `cudagraph_mode` was not manually "
        "set to `NONE`"
    )
    text = log(
        engine("Cudagraph is disabled under eager mode", file="vllm.py:1929"),
        worker(message, file="gpu_model_runner.py:6485"),
    )
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="PIECEWISE", method=None)
    assert resolved.resolved_graph_mode == "NONE"
    assert resolved.graph_downgraded
    assert resolved.downgrades == ["Cudagraph is disabled under eager mode", message]


def test_draft_model_and_ngram_drafts_never_capture():
    text = log(worker("Using AttentionBackendEnum.FLASH_ATTN backend."))
    graphs = {"backend": "FLASH_ATTN", "graph_mode": "FULL_AND_PIECEWISE"}
    draft = parse_log(text, **graphs, method="draft_model")
    assert draft.draft_eager and draft.resolved_draft_graph_mode == "NONE"
    assert draft.resolved_draft_backend == "FLASH_ATTN"
    ngram = parse_log(text, **graphs, method="ngram")
    assert ngram.draft_eager and ngram.resolved_draft_backend is None
    eager = parse_log(text, backend="FLASH_ATTN", graph_mode="NONE", method="draft_model")
    assert not eager.draft_eager and eager.resolved_draft_graph_mode == "NONE"


def test_tensor_parallel_peers_are_not_the_draft():
    text = log(
        worker("Using AttentionBackendEnum.FLASHINFER backend."),
        "(Worker_TP1 pid=457) INFO 11-30 00:00:01 [cuda.py:446] Using AttentionBackendEnum.FLASH_ATTN backend.",
    )
    resolved = parse_log(text, backend="FLASHINFER", graph_mode="NONE", method="eagle3")
    assert resolved.resolved_backend == "FLASHINFER"
    assert resolved.resolved_draft_backend == "FLASHINFER"


def test_cpu_log_is_cpu_attn_without_graphs():
    text = log(
        "(Worker pid=8517) INFO 11-30 00:41:05 [cpu_model_runner.py:68] Starting to load model /tmp/tiny...",
        "(Worker pid=8517) INFO 11-30 00:41:05 [cpu.py:178] Cannot use AttentionBackendEnum.FLASH_ATTN backend on CPU.",
    )
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="FULL_AND_PIECEWISE", method="ngram")
    assert resolved.resolved_backend == "CPU_ATTN"
    assert resolved.resolved_graph_mode == "NONE"
    assert resolved.graph_downgraded
    assert resolved.downgrades == ["Cannot use AttentionBackendEnum.FLASH_ATTN backend on CPU."]


def test_duplicate_lines_from_several_processes_are_kept_once():
    line = "Cudagraph mode PIECEWISE is not compatible with compilation mode 0. Overriding to NONE."
    text = log(
        "(MainProcess pid=1) INFO 11-30 00:00:00 [vllm.py:1087] " + line,
        engine(line, file="vllm.py:1087"),
    )
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="PIECEWISE", method=None)
    assert resolved.downgrades == [line]
    assert resolved.resolved_graph_mode == "NONE"


def test_piecewise_without_splitting_ops_goes_to_none():
    message = (
        "Piecewise compilation with empty splitting_ops does not contain piecewise cudagraph. Setting cudagraph_mode "
        "to NONE. Hint: If you are using attention backends that support cudagraph, consider manually setting "
        "cudagraph_mode to FULL or FULL_DECODE_ONLY to enable full cudagraphs."
    )
    text = log(engine(message, level="WARNING", file="compilation.py:1217"))
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="PIECEWISE", method=None)
    assert resolved.resolved_graph_mode == "NONE"
    assert resolved.downgrades == [message]


# Seen on the H200 (vLLM 0.26.0): graph capture lines, as tqdm writes them (carriage returns inside).
def capture(label: str) -> str:
    return engine(f"{label}:   0%|          | 0/17 [00:00<?, ?it/s]\r{label}: 100%|##########| 17/17 [00:00<00:00, 120.00it/s]")


def test_capture_lines_confirm_full_and_piecewise_and_the_dflash_draft_graphs():
    text = log(
        engine("Using AttentionBackendEnum.FLASH_ATTN backend.", file="cuda.py:422"),
        capture("Capturing CUDA graphs (FULL)"),
        capture("Capturing CUDA graphs (PIECEWISE)"),
        capture("Capturing dflash CUDA graphs (FULL)"),
    )
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="FULL_AND_PIECEWISE", method="dflash")
    assert (resolved.resolved_graph_mode, resolved.graph_downgraded) == ("FULL_AND_PIECEWISE", False)
    assert (resolved.resolved_draft_graph_mode, resolved.draft_eager) == ("FULL", False)


def test_v1_runner_decode_only_capture_is_full_decode_only():
    text = log(capture("Capturing CUDA graphs (decode, FULL)"))
    resolved = parse_log(text, backend="TRITON_ATTN", graph_mode="FULL_DECODE_ONLY", method="draft_model")
    assert (resolved.resolved_graph_mode, resolved.graph_downgraded) == ("FULL_DECODE_ONLY", False)


def test_capture_wins_over_a_request_no_line_downgraded():
    # A downgrade vLLM did not log still shows in what it captured.
    text = log(capture("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)"))
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="FULL_AND_PIECEWISE", method=None)
    assert (resolved.resolved_graph_mode, resolved.graph_downgraded) == ("PIECEWISE", True)


def test_dflash_draft_beside_a_downgraded_flashinfer_target_runs_eagerly_without_a_word():
    # c0011 of the H200 matrix: the target fell back to PIECEWISE and no dflash graphs were captured.
    text = log(
        engine("Using AttentionBackendEnum.FLASHINFER backend.", file="cuda.py:422"),
        engine("Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER'].", file="cuda.py:482"),
        engine(FLASHINFER_SPEC_DOWNGRADE, level="WARNING", file="compilation.py:1290"),
        capture("Capturing CUDA graphs (PIECEWISE)"),
    )
    resolved = parse_log(text, backend="FLASHINFER", graph_mode="FULL_AND_PIECEWISE", method="dflash")
    assert (resolved.resolved_backend, resolved.resolved_draft_backend) == ("FLASHINFER", "FLASH_ATTN")
    assert (resolved.resolved_graph_mode, resolved.graph_downgraded) == ("PIECEWISE", True)
    assert (resolved.resolved_draft_graph_mode, resolved.draft_eager) == ("NONE", True)
    assert resolved.downgrades == [FLASHINFER_SPEC_DOWNGRADE]


def test_the_eager_fallback_example_patch_reads_as_a_draft_made_eager():
    # examples/h200/dflash-draft-eager.diff quotes the line vLLM 0.26.0 then logs; beside a FLASH_ATTN target
    # that keeps its full graphs, the DFlash draft (FLASH_ATTN, picked by itself) captures none.
    patch = Path(__file__).resolve().parents[2] / "examples" / "h200" / "dflash-draft-eager.diff"
    line = next(text.strip() for text in patch.read_text().splitlines() if text.endswith("running the draft eagerly."))
    text = log(
        engine("Using AttentionBackendEnum.FLASH_ATTN backend.", file="cuda.py:422"),
        engine("Using FLASH_ATTN attention backend out of potential backends: ['FLASH_ATTN', 'FLASHINFER'].", file="cuda.py:482"),
        engine(line, level="WARNING", file="speculator.py:106"),
        capture("Capturing CUDA graphs (FULL)"),
        capture("Capturing CUDA graphs (PIECEWISE)"),
    )
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="FULL_AND_PIECEWISE", method="dflash")
    assert (resolved.resolved_graph_mode, resolved.graph_downgraded) == ("FULL_AND_PIECEWISE", False)
    assert (resolved.resolved_draft_backend, resolved.resolved_draft_graph_mode) == ("FLASH_ATTN", "NONE")
    assert resolved.draft_eager
    assert resolved.downgrades == [line]


def test_eager_request_runs_the_draft_eagerly_without_calling_it_a_fallback():
    text = log(engine("Enforce eager set, disabling torch.compile and CUDAGraphs.", level="WARNING"))
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="NONE", method="dflash")
    assert (resolved.resolved_graph_mode, resolved.resolved_draft_graph_mode, resolved.draft_eager, resolved.graph_downgraded) == ("NONE", "NONE", False, False)


APISERVER = "(APIServer pid=3103) WARNING 12-04 17:17:32 [vllm.py:1077] {message}"
ASYNC_OFF_DRAFT_MODEL = "Async scheduling not supported with draft_model-based speculative decoding and will be disabled."


def test_async_scheduling_turned_off_is_recorded_with_its_line():
    text = log(APISERVER.format(message=ASYNC_OFF_DRAFT_MODEL), worker("Using AttentionBackendEnum.FLASH_ATTN backend."))
    resolved = parse_log(text, backend="FLASH_ATTN", graph_mode="FULL_AND_PIECEWISE", method="draft_model")
    # Its own flag: the graph mode and backends it leaves as they were, so it is no downgrade of theirs.
    assert resolved.async_scheduling_off and resolved.downgrades == [] and not resolved.graph_downgraded
    # vLLM 0.32's other reasons name it the same way.
    for message in ("Async scheduling is disabled because the V1 model runner does not support it with pipeline parallelism.",
                    "Async scheduling will be disabled because it is not supported with the `ray` distributed executor backend. "):
        assert parse_log(log(engine(message, level="WARNING")), backend="FLASH_ATTN", graph_mode="NONE", method=None).async_scheduling_off


def test_a_log_that_says_nothing_of_async_scheduling_kept_vllms_default():
    for message in ("Async scheduling is not compatible with ROCm DeepEP high-throughput DBO. Please use --no-async-scheduling",
                    "The scheduler ran asynchronous scheduling: disabled later maybe"):
        resolved = parse_log(log(engine(message)), backend="FLASH_ATTN", graph_mode="NONE", method=None)
        assert not resolved.async_scheduling_off
    assert not parse_log(log(), backend="FLASH_ATTN", graph_mode="NONE", method=None).async_scheduling_off


def test_the_h200_draft_model_cells_ran_without_async_scheduling_and_the_baselines_with_it():
    folder = Path(__file__).parents[1] / "data" / "h200-2026-12-04c" / "h200-bestk-8b" / "cells"
    seen = {True: 0, False: 0}
    # Cells the device time left unrun have no log.
    for cell in sorted(c for c in folder.iterdir() if (c / "cell.log").is_file()):
        spec = json.loads((cell / "spec.json").read_text())
        text = (cell / "cell.log").read_text()
        method = (spec["speculative"] or {}).get("method")
        resolved = parse_log(text, backend=spec["backend"], graph_mode=spec["graph_mode"], method=method)
        drafted = method == "draft_model"
        assert resolved.async_scheduling_off is drafted, cell.name
        seen[drafted] += 1
    assert seen == {True: 7, False: 4}  # 7: the one the device time cut short logged too
