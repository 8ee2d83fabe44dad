"""Tracebacks, wrappers and inner exceptions, in the shapes vLLM, torch.compile and the executors print."""

import pytest

from app.vllmlog import lines, tracebacks

VENV = "/usr/local/lib/python3.12/dist-packages"


def root(text: str) -> tracebacks.Root | None:
    return tracebacks.root(tracebacks.tracebacks(lines.read(text)))


def test_the_first_traceback_that_is_not_a_wrapper_is_the_root():
    text = f"""\
Traceback (most recent call last):
  File "{VENV}/vllm/v1/worker/gpu_model_runner.py", line 1, in execute_model
ValueError: bad shape
Traceback (most recent call last):
  File "{VENV}/vllm/v1/engine/core_client.py", line 2, in get_output
vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""
    found = root(text)
    assert (found.traceback.exc_type, found.traceback.message, found.wrapper) == ("ValueError", "bad shape", False)


def test_the_multi_line_worker_failed_wrapper_is_a_wrapper():
    # The worker's error is quoted whole, its line breaks included: the pointer "above" comes lines later.
    text = f"""\
Traceback (most recent call last):
  File "{VENV}/vllm/v1/executor/multiproc_executor.py", line 444, in get_response
    raise RuntimeError(
RuntimeError: Worker failed with error 'CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
', please check the stack trace above for the root cause
"""
    found = root(text)
    assert found.wrapper
    assert tracebacks.quoted_error(found.traceback.message).startswith("CUDA error: an illegal memory access")


def test_backend_compiler_failed_is_unwrapped_to_the_exception_on_its_next_line():
    text = f"""\
Traceback (most recent call last):
  File "{VENV}/torch/_dynamo/output_graph.py", line 1, in call_user_compiler
    raise BackendCompilerFailed(self.compiler_fn, e) from e
torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:
TypeError: 'int' object is not iterable

Set TORCH_LOGS="+dynamo" and TORCHDYNAMO_VERBOSE=1 for more information
"""
    found = root(text).traceback
    assert (found.exc_type, found.message) == ("TypeError", "'int' object is not iterable")
    assert found.wrapped_by == "torch._dynamo.exc.BackendCompilerFailed"


def test_inductor_error_is_unwrapped_to_its_inner_exception():
    text = f"""\
Traceback (most recent call last):
  File "{VENV}/torch/_inductor/compile_fx.py", line 1, in compile_fx
torch._inductor.exc.InductorError: RuntimeError: Failed to find C compiler. Please specify via CC environment variable.
"""
    found = root(text).traceback
    assert (found.exc_type, found.wrapped_by) == ("RuntimeError", "torch._inductor.exc.InductorError")
    assert found.message.startswith("Failed to find C compiler.")


def test_a_log_cut_inside_a_traceback_still_has_one():
    # No header: the paste starts at a frame.
    text = f"""\
(EngineCore pid=79)   File "{VENV}/vllm/v1/worker/utils.py", line 413, in request_memory
(EngineCore pid=79)     raise ValueError(
(EngineCore pid=79) ValueError: Free memory on device cuda:0 (22.76/24.0 GiB) on startup
"""
    found = root(text).traceback
    assert found.exc_type == "ValueError"
    assert found.frames == [(f"{VENV}/vllm/v1/worker/utils.py", "request_memory")]


def test_a_traceback_of_another_process_does_not_cut_this_one():
    text = f"""\
(A pid=1) Traceback (most recent call last):
(A pid=1)   File "{VENV}/vllm/a.py", line 1, in f
(B pid=2) INFO 11-30 00:00:00 [x.py:1] unrelated
(A pid=1) KeyError: 'x'
"""
    assert root(text).traceback.exc_type == "KeyError"


def test_bare_exception_lines_are_read_from_their_line_start_only():
    log = lines.read("note: ValueError: not at the start\nValueError: Free memory on device\n")
    assert list(tracebacks.bare_exceptions(log)) == [(1, "ValueError", "Free memory on device")]


def test_only_the_innermost_frames_are_kept():
    frames = "".join(f'  File "{VENV}/vllm/m{i}.py", line 1, in f{i}\n' for i in range(1000))
    found = root(f"Traceback (most recent call last):\n{frames}ValueError: deep\n").traceback
    assert len(found.frames) == tracebacks.MAX_FRAMES and found.frames[-1][1] == "f999"


def test_only_the_first_thousand_tracebacks_of_a_process_are_read():
    # The bound on work: later tracebacks are consequences of the earlier ones.
    dead = "Traceback (most recent call last):\nvllm.EngineDeadError: see root cause above\n"
    cause = "Traceback (most recent call last):\nValueError: late\n"
    assert root(dead * 999 + cause).traceback.exc_type == "ValueError"
    assert root(dead * tracebacks.MAX_TRACEBACKS + cause).wrapper


def test_a_traceback_cut_before_its_exception_line_is_kept_with_its_frames_source_lines():
    text = f"""\
Traceback (most recent call last):
  File "{VENV}/vllm/v1/worker/gpu_worker.py", line 300, in init_device
    self.requested_memory = request_memory(init_snapshot, self.cache_config)
                            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{VENV}/vllm/v1/worker/utils.py", line 413, in request_memory
    raise ValueError(
"""
    found = root(text)
    assert not found.wrapper and found.cut is found.traceback and found.traceback.cut
    assert found.traceback.exc_type == "" and found.traceback.frames[-1][1] == "request_memory"
    assert found.traceback.statements == (
        "self.requested_memory = request_memory(init_snapshot, self.cache_config)",
        "raise ValueError(",
    )


def test_a_cut_tracebacks_message_is_the_one_a_v0_header_was_glued_after():
    text = f"""\
Exception in worker VllmWorkerProcess while processing method init_device: NCCL error: unhandled system error, Traceback (most recent call last):
  File "{VENV}/vllm/worker/worker.py", line 132, in init_device
"""
    assert root(text).traceback.message == "NCCL error: unhandled system error"


def test_a_whole_traceback_is_the_root_before_a_cut_one():
    text = f"""\
Traceback (most recent call last):
  File "{VENV}/vllm/a.py", line 1, in f
Traceback (most recent call last):
  File "{VENV}/vllm/b.py", line 2, in g
KeyError: 'x'
"""
    found = root(text)
    assert (found.traceback.exc_type, found.cut.frames) == ("KeyError", [(f"{VENV}/vllm/a.py", "f")])


@pytest.mark.parametrize(
    ("statement", "raised"),
    [
        ("raise ValueError(", ("ValueError", "")),
        ('raise RuntimeError(f"NCCL error: {error_str}")', ("RuntimeError", "NCCL error: {error_str}")),
        ('raise ValueError("No available memory for the cache blocks. " "Try increasing " \'it.\')',
         ("ValueError", "No available memory for the cache blocks. Try increasing it.")),
        ("raise torch.cuda.OutOfMemoryError(msg)", ("torch.cuda.OutOfMemoryError", "")),
        ("raise e", None),
        ("raise self._format_exception(outputs) from None", None),
        ("return func(*args, **kwargs)", None),
    ],
)
def test_a_raise_statement_gives_its_type_and_its_string_literals_joined(statement, raised):
    assert tracebacks.raised(statement) == raised


def test_a_bare_exception_line_in_its_repr_form_is_read():
    # V0's engine logs the exception's repr above its traceback.
    log = lines.read("ERROR 04-27 09:07:04 [engine.py:160] OutOfMemoryError('CUDA out of memory. Tried to allocate 1.50 GiB.')\n")
    assert list(tracebacks.bare_exceptions(log)) == [(0, "OutOfMemoryError", "CUDA out of memory. Tried to allocate 1.50 GiB.")]


@pytest.mark.parametrize(
    ("text", "bare"),
    [
        # Indented, as a paste keeps it; behind pytest's "E"; after a header a paste glued to the line before.
        (" RuntimeError: The expanded size of the tensor (1024)", (0, "RuntimeError", "The expanded size of the tensor (1024)")),
        ("E           vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
         (0, "vllm.v1.engine.exceptions.EngineDeadError", "EngineCore encountered an issue.")),
        ("self.all_reduce(data) ERROR 11-04 18:02:56 [multiproc_executor.py:597] RuntimeError: NCCL error: unhandled cuda error",
         (0, "RuntimeError", "NCCL error: unhandled cuda error")),
        # A message that ends with ":" goes on over the next line.
        ("tvm.error.InternalError: Check failed: (status == cudaSuccess) is false:\n"
         "  BatchPrefillWithPagedKVCache failed with error invalid resource handle",
         (0, "tvm.error.InternalError",
          "Check failed: (status == cudaSuccess) is false: BatchPrefillWithPagedKVCache failed with error invalid resource handle")),
        # A name alone takes the assert statement above it.
        ("x = 1\nassert all(v == vocab_size for v in vocab_sizes)\nAssertionError\nProcess SpawnProcess-1:",
         (2, "AssertionError", "assert all(v == vocab_size for v in vocab_sizes)")),
        ("print(x)\nAssertionError", (1, "AssertionError", "")),
    ],
)
def test_bare_exception_lines_in_the_shapes_pastes_keep_them(text, bare):
    assert list(tracebacks.bare_exceptions(lines.read(text)))[:1] == [bare]


def test_a_name_in_the_middle_of_a_line_is_no_bare_exception():
    assert list(tracebacks.bare_exceptions(lines.read("raise ValueError\nthe KeyError was caught\n"))) == []


def test_an_assertion_error_without_a_message_takes_its_assert_statement():
    text = f"""\
Traceback (most recent call last):
  File "{VENV}/vllm/model_executor/parameter.py", line 153, in load_column_parallel_weight
    assert self.data.shape == loaded_weight.shape
AssertionError
"""
    found = root(text).traceback
    assert (found.exc_type, found.message) == ("AssertionError", "assert self.data.shape == loaded_weight.shape")
