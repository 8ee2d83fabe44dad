"""Logs whose traceback stops before its exception line (an excerpt, a log cut at its byte limit, a
process killed while printing): signed by what is left of the cause, never by the exit code."""

import pytest

from app.crashes.signatures import CUT_MESSAGE, CUT_TRACEBACK, signature_for
from app.enums import CrashKind

VENV = "/usr/local/lib/python3.12/dist-packages"
HEADER = "Traceback (most recent call last):"


def sign(log: str):
    return signature_for(log, exit_code=1, signal=None, timed_out=False)


def frame(module: str, function: str, code: str, line: int = 10) -> str:
    return f'  File "{VENV}/{module.replace(".", "/")}.py", line {line}, in {function}\n    {code}\n'


RUNNER = frame("vllm.v1.worker.gpu_model_runner", "load_model", "self.model = get_model(vllm_config=self.vllm_config)")


@pytest.mark.parametrize(
    "log",
    [
        f"{HEADER}\n{RUNNER}",  # the log ends inside the traceback
        f"{HEADER}\n{RUNNER}  File \"{VENV}/vllm/model_executor/model_loader/__init__.py\", li",  # cut mid-line
        f"{HEADER}\n",  # the header alone
        RUNNER,  # an excerpt from a frame on, no header
        f"{HEADER}\n{RUNNER}Process EngineCore_DP0:\n",  # another line where the exception should be
        "".join(f"(Worker pid=7) ERROR 11-30 00:00:00 [multiproc_executor.py:1] {line}\n" for line in f"{HEADER}\n{RUNNER}".splitlines()),
    ],
    ids=["ends-inside", "mid-line", "header-only", "headless", "interrupted", "prefixed"],
)
def test_a_log_holding_any_traceback_is_never_signed_by_its_exit_code(log):
    info = sign(log)
    assert info.kind is not CrashKind.EXIT and "exit code" not in info.title


def test_a_cut_traceback_is_signed_by_its_innermost_vllm_frame_and_that_frames_line():
    # Before: both were "exit code 1", one group with every other log cut so.
    layer = frame("vllm.model_executor.models.deepseek_v2", "forward", "hidden_states, residual = layer(positions, hidden_states, residual)", 646)
    attention = frame("vllm.model_executor.models.deepseek_v2", "forward", "return self.mla_attn(hidden_states_or_q_c,", 467)
    torch = frame("torch.nn.modules.module", "_call_impl", "return forward_call(*args, **kwargs)")
    a, b = sign(f"{HEADER}\n{layer}{torch}"), sign(f"{HEADER}\n{attention}{torch}")
    assert a.frames == b.frames == ("vllm.model_executor.models.deepseek_v2:forward",)
    assert a.signature != b.signature
    assert a.title == f"{CUT_TRACEBACK} in deepseek_v2.forward"
    # The same stop, printed by another process and version (other line numbers), is the same group.
    again = "".join(f"(Worker_TP1 pid=3) ERROR 02-27 20:37:29 [core.py:303] {line}\n" for line in f"{HEADER}\n{frame('vllm.model_executor.models.deepseek_v2', 'forward', 'return self.mla_attn(hidden_states_or_q_c,', 470)}".splitlines())
    assert sign(again).signature == b.signature


def test_only_plumbing_frames_still_give_the_innermost_frame():
    log = HEADER + "\n" + frame("vllm.worker.worker_base", "execute_method", "raise e")
    info = sign(log)
    assert info.frames == ("vllm.worker.worker_base:execute_method",) and info.kind is CrashKind.EXCEPTION


def test_a_raise_line_names_the_exception_and_its_message():
    # The innermost frame's source, as Python 3.11+ prints a statement over several lines.
    log = f"""\
{HEADER}
  File "{VENV}/vllm/v1/core/kv_cache_utils.py", line 699, in check_enough_kv_cache_memory
    raise ValueError("No available memory for the cache blocks. "
                     "Try increasing `gpu_memory_utilization` when "
                     "initializing the engine.")
ERROR 10-25"""
    whole = f"""\
{HEADER}
  File "{VENV}/vllm/v1/core/kv_cache_utils.py", line 616, in _check_enough_kv_cache_memory
    raise ValueError(
ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.
"""
    info = sign(log)
    assert (info.kind, info.exception_type) == (CrashKind.KV_CACHE_TOO_SMALL, "ValueError")
    assert info.signature == sign(whole).signature


def test_a_raise_line_without_its_message_is_the_type_raised_there():
    log = HEADER + "\n" + frame("vllm.v1.core.kv_cache_utils", "_check_enough_kv_cache_memory", "raise ValueError(") + "(EngineCore pid=47)"
    info = sign(log)
    assert (info.exception_type, info.message) == ("ValueError", CUT_MESSAGE)
    assert info.title == f"ValueError: {CUT_MESSAGE} in kv_cache_utils._check_enough_kv_cache_memory"


def test_the_message_printed_above_a_cut_traceback_signs_it():
    # V0's executors print the worker's exception before the traceback's header, on its line.
    above = (
        "(VllmWorkerProcess pid=232) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] Exception in worker "
        "VllmWorkerProcess while processing method init_device: NCCL error: unhandled system error (run with "
        "NCCL_DEBUG=INFO for details), Traceback (most recent call last):\n"
        f'(VllmWorkerProcess pid=232) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226]   File "{VENV}/vllm/worker/worker.py", line 132, in init_device\n'
        "(VllmWorkerProcess pid=232) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226]     init_worker_distributed_environment(\n"
    )
    whole = f"""\
{HEADER}
  File "{VENV}/vllm/distributed/device_communicators/pynccl_wrapper.py", line 223, in NCCL_CHECK
    raise RuntimeError(f"NCCL error: {{error_str}}")
RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)
"""
    info = sign(above)
    assert info.kind is CrashKind.NCCL_ERROR and info.signature == sign(whole).signature


def test_a_message_glued_before_a_header_that_says_nothing_is_not_taken():
    log = f"ERROR 05-06 01:55:26 [core.py:383] EngineCore hit an exception: {HEADER}\n{RUNNER}"
    assert sign(log).message == CUT_TRACEBACK


def test_a_dead_worker_outranks_a_cut_traceback_that_says_nothing():
    log = (
        "ERROR 11-08 11:01:29 [multiproc_executor.py:135] Worker proc VllmWorker-3 died unexpectedly, shutting down executor.\n"
        f"{HEADER}\n" + frame("vllm.v1.engine.core", "run_engine_core", "engine_core.run_busy_loop()")
    )
    assert sign(log).kind is CrashKind.WORKER_DIED


def test_a_cut_traceback_that_names_its_cause_outranks_a_dead_worker():
    log = (
        "Worker proc VllmWorker-1 died unexpectedly, shutting down executor.\n"
        f"{HEADER}\n" + frame("vllm.worker.worker", "init_device", 'raise RuntimeError(f"NCCL error: {error_str}")')
    )
    assert sign(log).kind is CrashKind.NCCL_ERROR


def test_a_whole_traceback_is_the_cause_before_an_earlier_cut_one():
    log = f"{HEADER}\n{RUNNER}{HEADER}\n" + frame("vllm.v1.spec_decode.eagle", "propose", "x = self.positions") + "AttributeError: 'EagleProposer' object has no attribute 'positions'\n"
    info = sign(log)
    assert (info.exception_type, info.frames) == ("AttributeError", ("vllm.v1.spec_decode.eagle:propose",))


def test_an_nccl_reason_cut_mid_word_keeps_its_reason():
    whole = sign("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n")
    cut = sign("RuntimeError: NCCL error: unhandled syst")
    other = sign("RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n")
    assert cut.signature == whole.signature != other.signature
    # Too few characters to tell "unhandled system error" from "unhandled cuda error": not guessed.
    assert sign("RuntimeError: NCCL error: unhandled").signature != whole.signature
