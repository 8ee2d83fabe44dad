"""An engine that died of a timeout is signed by the timeout, named by what timed out.

The logs are written after vLLM's (V1's engine core and its multiprocessing executor, V0's async
engine) and torch.distributed's, shortened: the engine core's RPC to its workers, V0's engine
iteration, torch's store and NCCL watchdog, each before the front end's ``EngineDeadError``.
"""

import hashlib

import pytest

from app.crashes import kinds
from app.crashes.signatures import signature_for
from app.enums import CrashKind

VENV = "/usr/local/lib/python3.12/dist-packages"
CORE = "(EngineCore_DP0 pid=2291) ERROR 09-03 14:02:51 [core.py:720] "
API = "(APIServer pid=2017) ERROR 09-03 14:02:51 [async_llm.py:485] "

ENGINE_DEAD = f"""\
{API}AsyncLLM output_handler failed.
{API}Traceback (most recent call last):
{API}  File "{VENV}/vllm/v1/engine/async_llm.py", line 444, in output_handler
{API}    outputs = await engine_core.get_output_async()
{API}  File "{VENV}/vllm/v1/engine/core_client.py", line 845, in get_output_async
{API}    raise self._format_exception(outputs) from None
{API}vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""

# The worker's message queue gives up (a bare ``raise TimeoutError``), and the executor re-raises it naming the RPC.
_QUEUE_TIMEOUT = f"""\
{CORE}EngineCore encountered a fatal error.
{CORE}Traceback (most recent call last):
{CORE}  File "{VENV}/vllm/v1/executor/multiproc_executor.py", line 264, in collective_rpc
{CORE}    result = get_response(w, dequeue_timeout)
{CORE}  File "{VENV}/vllm/v1/executor/multiproc_executor.py", line 245, in get_response
{CORE}    status, result = w.worker_response_mq.dequeue(
{CORE}  File "{VENV}/vllm/distributed/device_communicators/shm_broadcast.py", line 511, in dequeue
{CORE}    with self.acquire_read(timeout, cancel) as buf:
{CORE}  File "/usr/lib/python3.12/contextlib.py", line 137, in __enter__
{CORE}    return next(self.gen)
{CORE}  File "{VENV}/vllm/distributed/device_communicators/shm_broadcast.py", line 473, in acquire_read
{CORE}    raise TimeoutError
{CORE}TimeoutError
{CORE}
{CORE}The above exception was the direct cause of the following exception:
{CORE}
"""


def rpc_timeout(method: str = "execute_model") -> str:
    """The engine core's traceback of an RPC its workers did not answer in time (from ``Traceback``)."""
    return f"""\
{CORE}Traceback (most recent call last):
{CORE}  File "{VENV}/vllm/v1/engine/core.py", line 711, in run_engine_core
{CORE}    engine_core.run_busy_loop()
{CORE}  File "{VENV}/vllm/v1/engine/core.py", line 290, in step
{CORE}    model_output = self.execute_model_with_error_logging(
{CORE}  File "{VENV}/vllm/v1/executor/multiproc_executor.py", line 178, in {method}
{CORE}    (output, ) = self.collective_rpc(
{CORE}  File "{VENV}/vllm/v1/executor/multiproc_executor.py", line 270, in collective_rpc
{CORE}    raise TimeoutError(f"RPC call to {{method}} timed out.") from e
{CORE}TimeoutError: RPC call to {method} timed out.
"""


def sign(log: str):
    return signature_for(log, exit_code=1, signal=None, timed_out=False)


def test_engine_dead_after_a_timeout_line_without_its_traceback_is_that_timeout():
    # Before: a typed line was an ordinary exception, an untyped one left the bare EngineDeadError.
    typed = sign(f"{CORE}TimeoutError: RPC call to execute_model timed out.\n{ENGINE_DEAD}")
    untyped = sign(f"{CORE}RPC call to execute_model timed out.\n{ENGINE_DEAD}")
    for info in (typed, untyped):
        assert info.kind == CrashKind.TIMEOUT
        assert info.message == "RPC call to execute_model timed out."
    assert typed.signature == untyped.signature != sign(ENGINE_DEAD).signature
    assert untyped.title == "RPC call to execute_model timed out."
    assert typed.title == "TimeoutError: RPC call to execute_model timed out."


def test_an_rpc_timeout_signs_alike_with_or_without_the_message_queues_bare_timeout_above_it():
    # Before: the whole log's first traceback, a TimeoutError without a message, was the cause: its own group.
    whole = sign(_QUEUE_TIMEOUT + rpc_timeout() + ENGINE_DEAD)
    tail = sign(rpc_timeout() + ENGINE_DEAD)
    line = sign(f"{CORE}RPC call to execute_model timed out.\n{ENGINE_DEAD}")
    assert whole.kind == tail.kind == CrashKind.TIMEOUT
    assert whole.message == "RPC call to execute_model timed out."  # the executor's words, not its source line's
    assert whole.signature == tail.signature == line.signature


def test_two_rpcs_that_timed_out_are_two_groups():
    assert sign(rpc_timeout("execute_model") + ENGINE_DEAD).signature != sign(rpc_timeout("sample_tokens") + ENGINE_DEAD).signature


def test_a_bare_timeout_that_says_nothing_is_keyed_by_its_innermost_frame():
    info = sign(_QUEUE_TIMEOUT + ENGINE_DEAD)
    assert (info.kind, info.message) == (CrashKind.TIMEOUT, "")
    assert info.title == "timed out in shm_broadcast.acquire_read"
    other = _QUEUE_TIMEOUT.replace("acquire_read", "acquire_write")
    assert sign(other + ENGINE_DEAD).signature != info.signature


V0 = "/usr/local/lib/python3.10/dist-packages"
V0_LOG = "ERROR 07-18 10:42:07 async_llm_engine.py:61] "
# V0's async engine: its iteration watchdog cancels the step (CancelledError), then raises asyncio's TimeoutError.
V0_ITERATION_TIMEOUT = f"""\
ERROR 07-18 10:42:07 async_llm_engine.py:658] Engine iteration timed out. This should never happen!
{V0_LOG}Engine background task failed
{V0_LOG}Traceback (most recent call last):
{V0_LOG}  File "{V0}/vllm/engine/async_llm_engine.py", line 631, in run_engine_loop
{V0_LOG}    done, _ = await asyncio.wait(
{V0_LOG}  File "/usr/lib/python3.10/asyncio/tasks.py", line 384, in wait
{V0_LOG}    return await _wait(fs, timeout, return_when, loop)
{V0_LOG}asyncio.exceptions.CancelledError
{V0_LOG}
{V0_LOG}During handling of the above exception, another exception occurred:
{V0_LOG}
{V0_LOG}Traceback (most recent call last):
{V0_LOG}  File "{V0}/vllm/engine/async_llm_engine.py", line 630, in run_engine_loop
{V0_LOG}    async with asyncio_timeout(ENGINE_ITERATION_TIMEOUT_S):
{V0_LOG}  File "{V0}/vllm/engine/async_timeout.py", line 178, in _do_exit
{V0_LOG}    raise asyncio.TimeoutError
{V0_LOG}asyncio.exceptions.TimeoutError
Traceback (most recent call last):
  File "{V0}/vllm/engine/async_llm_engine.py", line 65, in _log_task_completion
    raise AsyncEngineDeadError(
vllm.engine.async_llm_engine.AsyncEngineDeadError: Task finished unexpectedly. This should never happen! Please open an issue on Github. See stack trace above for the actual cause.
"""


def test_v0s_engine_iteration_timeout_is_the_timeout_not_the_task_it_cancelled():
    # Before: the first traceback, the cancelled step's CancelledError, was the cause.
    info = sign(V0_ITERATION_TIMEOUT)
    assert (info.kind, info.exception_type) == (CrashKind.TIMEOUT, "asyncio.exceptions.TimeoutError")
    assert info.title == "TimeoutError: Engine iteration timed out."
    lines = V0_ITERATION_TIMEOUT.splitlines()
    line_and_wrapper = "\n".join([lines[0], *lines[-4:]]) + "\n"
    assert sign(line_and_wrapper).signature == info.signature


def test_a_cancelled_task_without_a_timeout_is_still_its_own_cause():
    cancelled = "\n".join(V0_ITERATION_TIMEOUT.splitlines()[1:8]) + "\n"
    info = sign(cancelled)
    assert (info.kind, info.exception_type) == (CrashKind.EXCEPTION, "asyncio.exceptions.CancelledError")
    assert info.title == "CancelledError in async_llm_engine.run_engine_loop"


def test_a_store_timeout_before_engine_dead_is_a_timeout():
    log = f"""\
(VllmWorker TP1 pid=3310) ERROR 09-03 14:02:40 [multiproc_executor.py:559] torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined.
{ENGINE_DEAD}"""
    info = sign(log)
    assert (info.kind, info.title) == (CrashKind.TIMEOUT, "DistStoreError: Timed out after <n> seconds waiting for clients.")


WATCHDOG = (
    "[rank1]:[E903 14:12:52.113000 3310 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=81734, OpType=ALLREDUCE, NumelIn=8388608, NumelOut=8388608, "
    "Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n"
)
WORK = (
    "[rank1]:[E903 14:12:52.113000 3310 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2168] [PG ID 0 PG GUID 0(default_pg) "
    "Rank 1] Timeout at NCCL work: 81734, last enqueued NCCL work: 81734, last completed NCCL work: 81733.\n"
)


def test_an_rpc_timeout_beside_the_nccl_watchdog_is_that_collectives_timeout():
    # The RPC waited on ranks stuck in the all-reduce: the watchdog's line names what hung.
    info = sign(WATCHDOG + rpc_timeout() + ENGINE_DEAD)
    assert (info.kind, info.title) == (CrashKind.NCCL_TIMEOUT, "NCCL ALLREDUCE timed out (watchdog)")
    assert info.signature == sign(WATCHDOG + ENGINE_DEAD).signature == sign(WATCHDOG).signature


def test_the_watchdogs_timeout_at_nccl_work_line_alone_is_an_nccl_timeout():
    info = sign(WORK + ENGINE_DEAD)
    assert (info.kind, info.title) == (CrashKind.NCCL_TIMEOUT, "NCCL collective timed out (watchdog)")
    assert sign(WORK + WATCHDOG + ENGINE_DEAD).title == "NCCL ALLREDUCE timed out (watchdog)"


def test_a_retried_hub_request_that_timed_out_is_not_the_cause():
    hub = (
        "WARNING 09-03 13:58:02 [_http.py:760] '(ReadTimeoutError(\"HTTPSConnectionPool(host='huggingface.co', port=443): "
        "Read timed out. (read timeout=10)\"), '(Request ID: 4f1c2d9e)')' thrown while requesting HEAD "
        "https://huggingface.co/yuhuili/EAGLE3-LLaMA3.1-Instruct-8B/resolve/main/config.json\n"
        "WARNING 09-03 13:58:02 [_http.py:770] Retrying in 1s [Retry 1/5].\n"
    )
    assert sign(hub + ENGINE_DEAD).kind == CrashKind.ENGINE_DEAD


def test_a_source_line_that_says_timed_out_is_code_not_a_timeout():
    source = f'{CORE}    raise TimeoutError(f"RPC call to {{method}} timed out.") from e\n'
    assert sign(source + ENGINE_DEAD).kind == CrashKind.ENGINE_DEAD


def test_a_cell_killed_at_its_timeout_keeps_its_signature():
    info = signature_for("anything", exit_code=None, signal=9, timed_out=True)
    assert (info.kind, info.message, info.title) == (CrashKind.TIMEOUT, "timed out", "timed out")
    # The key every such crash was stored under: re-signing keeps their group.
    assert info.signature == hashlib.sha256(b"timeout\ntimed out").hexdigest()


@pytest.mark.parametrize(
    ("exc_type", "message", "kind"),
    [
        ("TimeoutError", "RPC call to execute_model timed out.", CrashKind.TIMEOUT),
        ("asyncio.exceptions.TimeoutError", "", CrashKind.TIMEOUT),
        ("concurrent.futures._base.TimeoutError", "", CrashKind.TIMEOUT),
        ("subprocess.TimeoutExpired", "Command '['nvidia-smi']' timed out after 10 seconds", CrashKind.TIMEOUT),
        ("torch.distributed.DistStoreError", "wait timeout after 600000ms, keys: /default_pg/0//cuda//0", CrashKind.TIMEOUT),
        ("torch.distributed.DistNetworkError", "The client socket has timed out after 600000ms while trying to connect", CrashKind.TIMEOUT),
        ("RuntimeError", "CUDA error: the launch timed out and was terminated", CrashKind.CUDA_ERROR),
        ("torch.distributed.DistBackendError", "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLGATHER)",
         CrashKind.NCCL_TIMEOUT),
        ("ValueError", "timeout must be positive", CrashKind.EXCEPTION),
    ],
)
def test_timeouts_are_told_by_their_type_or_their_words(exc_type, message, kind):
    assert kinds.classify(exc_type, message) == kind
