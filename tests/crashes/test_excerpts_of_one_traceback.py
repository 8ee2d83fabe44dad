"""Excerpts of one traceback cut at different frames sign alike; different crashes of one exception type do not.

Reports paste a traceback's tail from wherever their screen or patience began: one from the engine
core's loop, another from the model runner, a third from the drafter; some without the frames' source
lines (a log viewer that drops them, Python run without its sources). What every such excerpt of one
traceback keeps is its exception line and its innermost frames, so that is what a signature keys on.
The tracebacks are written after vLLM 0.10-0.11's (paths, functions, calls), shortened.
"""

import pytest

from app.crashes.signatures import signature_for
from app.enums import CrashKind

VENV = "/opt/conda/envs/py312/lib/python3.12/site-packages"
WORKER = "(VllmWorker TP0 pid=52817) ERROR 10-14 09:31:07 [multiproc_executor.py:596] "

# (file under site-packages, line, function, source line), outermost first, as Python prints them.
_EAGLE_PROPOSE = [
    ("vllm/v1/executor/multiproc_executor.py", 591, "worker_busy_loop", "output = func(*args, **kwargs)"),
    ("torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
    ("vllm/v1/worker/gpu_worker.py", 447, "execute_model", "output = self.model_runner.execute_model(scheduler_output,"),
    ("torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
    ("vllm/v1/worker/gpu_model_runner.py", 1788, "execute_model", "self._draft_token_ids = self.propose_draft_token_ids("),
    ("vllm/v1/worker/gpu_model_runner.py", 1977, "propose_draft_token_ids", "draft_token_ids = self.drafter.propose("),
    ("vllm/v1/spec_decode/eagle.py", 214, "propose", "hidden_states = self.model("),
    ("torch/nn/modules/module.py", 1773, "_wrapped_call_impl", "return self._call_impl(*args, **kwargs)"),
    ("torch/nn/modules/module.py", 1784, "_call_impl", "return forward_call(*args, **kwargs)"),
    ("vllm/model_executor/models/llama_eagle3.py", 231, "forward", "hidden_states, residual = self.layers[0]("),
    ("vllm/model_executor/models/llama_eagle3.py", 98, "forward", "assert embeds.shape[-1] == hidden_states.shape[-1]"),
]


def traceback(frames, exception: str, *, start: int = 0, sources: bool = True, prefix: str = WORKER) -> str:
    """The traceback of ``frames`` from frame ``start`` (a paste that begins there, without its header),
    with or without the frames' source lines, then ``exception``."""
    lines = [f"{prefix}WorkerProc hit an exception.", f"{prefix}Traceback (most recent call last):"] if start == 0 else []
    for path, number, function, source in frames[start:]:
        lines.append(f'{prefix}  File "{VENV}/{path}", line {number}, in {function}')
        if sources:
            lines.append(f"{prefix}    {source}")
    lines.append(f"{prefix}{exception}")
    return "\n".join(lines) + "\n"


def sign(log: str):
    return signature_for(log, exit_code=1, signal=None, timed_out=False)


def _excerpts(frames, exception: str) -> list[str]:
    """The whole traceback, pastes from frames 3, 5 and the innermost vLLM frame, each with and without sources."""
    return [traceback(frames, exception, start=start, sources=sources) for start in (0, 3, 5, len(frames) - 1) for sources in (True, False)]


@pytest.mark.parametrize(
    "exception",
    [
        "AssertionError",  # a bare assert: its message is its statement, when the source line is there
        "KeyError: 'layers.0'",  # a message of too few words to name a cause: keyed with its frame
        "RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at non-singleton dimension 1",
    ],
)
def test_excerpts_of_one_traceback_cut_at_different_frames_sign_alike(exception):
    signed = [sign(log) for log in _excerpts(_EAGLE_PROPOSE, exception)]
    assert {info.signature for info in signed} == {signed[0].signature}
    assert {info.frames[0] for info in signed} == {"vllm.model_executor.models.llama_eagle3:forward"}


def test_a_bare_assertion_without_its_source_line_signs_as_with_it():
    # Before: keyed by the ``assert`` statement its source line shows ("assert embeds.shape[-1] == ..."),
    # or by nothing where an excerpt had no source lines: two groups of one crash.
    shown = sign(traceback(_EAGLE_PROPOSE, "AssertionError"))
    hidden = sign(traceback(_EAGLE_PROPOSE, "AssertionError", start=4, sources=False))
    assert shown.message == "assert embeds.shape[-<n>] == hidden_states.shape[-<n>]" and hidden.message == ""
    assert shown.signature == hidden.signature
    assert shown.title == "AssertionError: assert embeds.shape[-<n>] == hidden_states.shape[-<n>] in llama_eagle3.forward"
    assert hidden.title == "AssertionError in llama_eagle3.forward"


_PREPARE_INPUTS = [
    *_EAGLE_PROPOSE[:4],
    ("vllm/v1/worker/gpu_model_runner.py", 1694, "execute_model", "attn_metadata, logits_indices, spec_decode_metadata = self._prepare_inputs("),
    ("vllm/v1/worker/gpu_model_runner.py", 912, "_prepare_inputs", "assert total_num_scheduled_tokens > 0"),
]
_MTP_PROPOSE = [
    *_EAGLE_PROPOSE[:6],
    ("vllm/v1/spec_decode/eagle.py", 187, "propose", "assert self.runner is not None"),
]
_MEDUSA_PROPOSE = [
    *_EAGLE_PROPOSE[:5],
    ("vllm/v1/worker/gpu_model_runner.py", 1940, "propose_draft_token_ids", "draft_token_ids = self.drafter.propose("),
    ("vllm/v1/spec_decode/medusa.py", 51, "propose", "assert self.runner is not None"),
]


@pytest.mark.parametrize("sources", [True, False])
def test_two_assertions_in_different_functions_sign_apart(sources):
    eagle = sign(traceback(_EAGLE_PROPOSE, "AssertionError", sources=sources))
    prepare = sign(traceback(_PREPARE_INPUTS, "AssertionError", sources=sources))
    assert eagle.kind == prepare.kind == CrashKind.EXCEPTION
    assert eagle.signature != prepare.signature


def test_one_assert_statement_in_two_functions_is_two_crashes():
    # ``assert self.runner is not None`` is five words, enough to stand alone as a message: before, the
    # drafters' two asserts of it were one group whatever function they were in.
    eagle, medusa = sign(traceback(_MTP_PROPOSE, "AssertionError")), sign(traceback(_MEDUSA_PROPOSE, "AssertionError"))
    assert eagle.message == medusa.message == "assert self.runner is not None"
    assert eagle.signature != medusa.signature


def test_two_messages_of_one_exception_type_in_one_function_sign_apart():
    first = sign(traceback(_EAGLE_PROPOSE, "AssertionError: draft hidden size does not match the target's"))
    second = sign(traceback(_EAGLE_PROPOSE, "AssertionError: only one KV cache group is supported for EAGLE"))
    assert first.signature != second.signature


def test_an_assertion_with_a_message_is_keyed_by_it_not_by_its_function():
    # A message of its own names the cause wherever the paste starts: its frames stay out of the key.
    message = "AssertionError: Synthetic acceptance not supported with CPU sampling"
    assert sign(traceback(_EAGLE_PROPOSE, message)).signature == sign(traceback(_PREPARE_INPUTS, message)).signature


# CUDA-graph capture of the EAGLE-3 drafter: an operation that syncs the device, refused while capturing.
_CAPTURE = [
    ("vllm/v1/worker/gpu_worker.py", 368, "compile_or_warm_up_model", "self.model_runner.capture_model()"),
    ("vllm/v1/worker/gpu_model_runner.py", 3301, "capture_model", "self._capture_cudagraphs("),
    ("vllm/v1/worker/gpu_model_runner.py", 3371, "_capture_cudagraphs", "self._dummy_run(num_tokens,"),
    ("torch/utils/_contextlib.py", 116, "decorate_context", "return func(*args, **kwargs)"),
    ("vllm/v1/worker/gpu_model_runner.py", 2911, "_dummy_run", "self.drafter.dummy_run(num_tokens)"),
    ("vllm/v1/spec_decode/eagle.py", 811, "dummy_run", "self.model("),
    ("torch/nn/modules/module.py", 1784, "_call_impl", "return forward_call(*args, **kwargs)"),
    ("vllm/model_executor/models/llama_eagle3.py", 240, "forward", "if self.norm_before_residual.item():"),
]


def test_a_capture_error_pasted_from_below_its_third_vllm_frame_signs_as_the_whole():
    # Before: keyed by the 3 innermost vLLM frames, so a paste that kept 2 of them was a group of its own.
    error = "RuntimeError: CUDA error: operation not permitted when stream is capturing"
    whole, tail = sign(traceback(_CAPTURE, error)), sign(traceback(_CAPTURE, error, start=5))
    assert whole.kind == tail.kind == CrashKind.CAPTURE_ERROR
    assert len(tail.frames) == 2 and len(whole.frames) >= 3
    assert whole.signature == tail.signature
    other_op = [*_CAPTURE[:-1], ("vllm/model_executor/models/llama_eagle3.py", 251, "combine_hidden_states", "return self.fc(x.tolist())")]
    assert sign(traceback(other_op, error)).signature != whole.signature


def _segfault(frames: int) -> str:
    """A ``faulthandler`` dump of a segfault in custom all-reduce, its current thread cut after ``frames`` frames."""
    stack = [
        ("vllm/distributed/device_communicators/custom_all_reduce.py", 260, "all_reduce"),
        ("vllm/distributed/device_communicators/cuda_communicator.py", 89, "all_reduce"),
        ("vllm/distributed/parallel_state.py", 487, "_all_reduce_out_place"),
        ("vllm/distributed/parallel_state.py", 121, "all_reduce"),
        ("vllm/model_executor/layers/linear.py", 1315, "forward"),
    ]
    lines = [
        "Fatal Python error: Segmentation fault",
        "",
        "Thread 0x00007f51c57fe640 (most recent call first):",
        '  File "/usr/lib/python3.12/threading.py", line 355 in wait',
        "",
        "Current thread 0x00007f53ea4cf740 (most recent call first):",
        *(f'  File "{VENV}/{path}", line {line} in {function}' for path, line, function in stack[:frames]),
    ]
    return "\n".join(lines) + "\n"


def test_a_fault_handler_dump_cut_after_two_frames_signs_as_the_whole():
    whole, cut = sign(_segfault(5)), sign(_segfault(2))
    assert whole.kind == cut.kind == CrashKind.SIGNAL
    assert whole.signature == cut.signature
    assert whole.title == "killed by signal SIGSEGV in custom_all_reduce.all_reduce"
