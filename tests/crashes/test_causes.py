"""The causes today's signatures missed (issue 13), each pinned by a test named after the miss."""

import pytest

from app.crashes.context import CellContext
from app.crashes.signatures import signature_for
from app.enums import CrashKind

VENV = "/usr/local/lib/python3.12/dist-packages"
IMA = "CUDA error: an illegal memory access was encountered"


def sign(log: str, context: CellContext | None = None, **end):
    return signature_for(log, exit_code=end.get("exit_code", 1), signal=end.get("signal"), timed_out=False, context=context)


def test_the_older_logger_prefix_no_longer_hides_the_traceback():
    log = f"""\
(VllmWorkerProcess pid=236) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] Traceback (most recent call last):
(VllmWorkerProcess pid=236) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226]   File "{VENV}/vllm/distributed/device_communicators/pynccl_wrapper.py", line 223, in NCCL_CHECK
(VllmWorkerProcess pid=236) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226]     raise RuntimeError(f"NCCL error: {{error_str}}")
(VllmWorkerProcess pid=236) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)
"""
    info = sign(log)
    assert (info.kind, info.exception_type) == (CrashKind.NCCL_ERROR, "RuntimeError")
    assert info.frames == ("vllm.distributed.device_communicators.pynccl_wrapper:NCCL_CHECK",)


def test_a_traceback_header_after_engine_core_hit_an_exception_is_seen():
    log = f"""\
ERROR 05-06 01:55:26 [core.py:383] EngineCore hit an exception: Traceback (most recent call last):
ERROR 05-06 01:55:26 [core.py:383]   File "{VENV}/vllm/v1/spec_decode/eagle.py", line 144, in propose
ERROR 05-06 01:55:26 [core.py:383] AttributeError: 'GPUModelRunner' object has no attribute 'attn_metadata_builder'
"""
    info = sign(log)
    assert info.kind == CrashKind.EXCEPTION and info.frames == ("vllm.v1.spec_decode.eagle:propose",)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        (("ValueError: Free memory on device cuda:0 (1.53/22.05 GiB) on startup is less than desired GPU memory "
         "utilization (0.9, 19.84 GiB). Decrease GPU memory utilization"), CrashKind.FREE_MEMORY),
        ("AttributeError: 'GPUModelRunner' object has no attribute 'drafter'", CrashKind.EXCEPTION),
    ],
)
def test_a_lone_exception_line_is_the_cause_not_exit_code_1(line, kind):
    info = sign(f"INFO 11-30 00:00:00 [core.py:1] starting\n(EngineCore_DP0 pid=9) ERROR 01-28 15:59:42 [core.py:935] {line}\n")
    assert info.kind == kind and "exit code" not in info.title


CPU_NODE = "(VllmWorker-0 pid=21844) ERROR 12-01 18:55:09 [multiproc_executor.py:953] ValueError: Available memory on node 0 "


@pytest.mark.parametrize(
    "message",
    [
        ("(9.64/11.71 GiB) on startup is less than desired CPU memory utilization (0.99, 11.6 GiB). On the CPU backend, "
         "the `--gpu-memory-utilization` flag controls the fraction of CPU memory reserved (despite its name)."),
        "(3.1/11.71 GiB) on kv cache allocation is less than requested memory for kv (4.0/11.6 GiB). Reduce CPU memory used by other processes.",
    ],
)
def test_the_cpu_backends_available_memory_refusal_is_free_memory(message):
    # Before: kind exception, a group of its own apart from the GPU's refusal of the same setting.
    gpu = sign("ValueError: Free memory on device cuda:0 (1.53/22.05 GiB) on startup is less than desired GPU memory utilization (0.9, 19.84 GiB).\n")
    info = sign(CPU_NODE + message + "\n")
    assert info.kind == CrashKind.FREE_MEMORY and info.signature == gpu.signature
    assert "GPU" not in info.title


def test_no_kv_cache_memory_left_is_apart_from_a_kv_cache_too_small_for_max_model_len():
    none_left = sign("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.\n")
    too_small = sign(
        "ValueError: To serve at least one request with the model's max seq len (180000), 3.05 GiB KV cache is needed, "
        "which is larger than the available KV cache memory (2.17 GiB).\n"
    )
    older = sign("ValueError: The model's max seq len (8192) is larger than the maximum number of tokens that can be stored in KV cache (2400).\n")
    assert none_left.kind == too_small.kind == older.kind == CrashKind.KV_CACHE_TOO_SMALL
    assert none_left.signature != too_small.signature == older.signature
    assert none_left.title != too_small.title


def test_engine_dead_beside_a_cuda_error_line_is_that_cuda_error():
    log = f"""\
(EngineCore pid=175) torch.AcceleratorError: {IMA}
(APIServer pid=100) ERROR 05-05 14:59:18 [serving.py:1137] Traceback (most recent call last):
(APIServer pid=100) ERROR 05-05 14:59:18 [serving.py:1137]   File "{VENV}/vllm/v1/engine/async_llm.py", line 481, in output_handler
(APIServer pid=100) ERROR 05-05 14:59:18 [serving.py:1137] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
"""
    assert sign(log).kind == CrashKind.CUDA_ILLEGAL_MEMORY_ACCESS


def test_the_multi_line_worker_failed_wrapper_is_not_taken_for_the_cause():
    log = f"""\
(Worker pid=7) ERROR 11-30 00:00:00 [multiproc_executor.py:1063] Traceback (most recent call last):
(Worker pid=7) ERROR 11-30 00:00:00 [multiproc_executor.py:1063]   File "{VENV}/vllm/v1/spec_decode/dflash.py", line 12, in propose
(Worker pid=7) ERROR 11-30 00:00:00 [multiproc_executor.py:1063] torch.AcceleratorError: {IMA}
(EngineCore pid=6) ERROR 11-30 00:00:00 [core.py:1512] Traceback (most recent call last):
(EngineCore pid=6) ERROR 11-30 00:00:00 [core.py:1512]   File "{VENV}/vllm/v1/executor/multiproc_executor.py", line 444, in get_response
(EngineCore pid=6) ERROR 11-30 00:00:00 [core.py:1512] RuntimeError: Worker failed with error '{IMA}
(EngineCore pid=6) ERROR 11-30 00:00:00 [core.py:1512] CUDA kernel errors might be asynchronously reported at some other API call
(EngineCore pid=6) ERROR 11-30 00:00:00 [core.py:1512] ', please check the stack trace above for the root cause
"""
    info = sign(log)
    assert (info.kind, info.exception_type) == (CrashKind.CUDA_ILLEGAL_MEMORY_ACCESS, "torch.AcceleratorError")


def test_inductors_wrapper_is_signed_by_the_inner_error():
    log = f"""\
Traceback (most recent call last):
  File "{VENV}/torch/_dynamo/output_graph.py", line 1, in call_user_compiler
torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:
TypeError: 'int' object is not iterable
"""
    info = sign(log)
    assert (info.kind, info.exception_type, info.message) == (CrashKind.COMPILE_ERROR, "TypeError", "'int' object is not iterable")
    assert info.title == "compile failed: TypeError: 'int' object is not iterable"


@pytest.mark.parametrize(
    ("log", "kind", "title"),
    [
        (("[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, "
         "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600059 milliseconds before timing out."),
         CrashKind.NCCL_TIMEOUT, "NCCL ALLREDUCE timed out (watchdog)"),
        (('/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:93: operator(): block: [0,0,0], thread: [0,0,0] Assertion '
         '`-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.'), CrashKind.KERNEL_ASSERT,
         'IndexKernel.cu: operator(): Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed'),
        ("ERROR 07-04 17:35:16 [multiproc_executor.py:140] Worker proc VllmWorker-1 died unexpectedly, shutting down executor.",
         CrashKind.WORKER_DIED, "worker process died unexpectedly"),
        ("kernel.cu(12): error: identifier \"foo\" is undefined", CrashKind.COMPILE_ERROR,
         'compile failed: kernel.cu: error: identifier "foo" is undefined'),
        ("/usr/include/x.h:3:10: fatal error: cuda_bf16.h: No such file or directory", CrashKind.COMPILE_ERROR,
         "compile failed: x.h: error: cuda_bf16.h: No such file or directory"),
    ],
)
def test_failures_without_a_python_exception_get_their_own_kind(log, kind, title):
    info = sign(log + "\n")
    assert (info.kind, info.title) == (kind, title)


def test_compiler_flags_glued_to_paths_are_normalised():
    def log(home: str) -> str:
        return (f"Traceback (most recent call last):\n  File \"{VENV}/torch/_inductor/codecache.py\", line 1, in build\n"
                f"subprocess.CalledProcessError: Command '['/usr/bin/gcc', '-I{home}/include', '-L{home}/lib']' "
                f"returned non-zero exit status 1.\n")

    first, second = sign(log("/home/alice/venv")), sign(log("/opt/conda/envs/b"))
    assert first.kind == CrashKind.COMPILE_ERROR and "-I<path>" in first.message
    assert first.signature == second.signature


def test_site_and_dist_packages_name_one_frame_alike():
    def log(root: str) -> str:
        return f'Traceback (most recent call last):\n  File "{root}/vllm/v1/spec_decode/eagle.py", line 9, in propose\nKeyError: \'x\'\n'

    assert sign(log(VENV)).frames == sign(log("/opt/venv/lib64/python3.12/site-packages")).frames


def test_two_cuts_of_one_out_of_memory_message_share_a_group():
    full = ("CUDA out of memory. Tried to allocate 786.00 MiB. GPU 0 has a total capacity of 79.11 GiB of which 140.75 "
            "MiB is free. Process 3270336 has 78.96 GiB memory in use. If reserved but unallocated memory is large try")
    assert sign(f"torch.OutOfMemoryError: {full}\n").signature == sign(f"torch.OutOfMemoryError: {full[:140]}\n").signature


def fault(where: str, pid: int) -> str:
    """An illegal memory access noticed at ``where``, another place in every run."""
    return f"""\
(EngineCore_DP0 pid={pid}) ERROR 11-30 03:12:45 [core.py:843] Traceback (most recent call last):
(EngineCore_DP0 pid={pid}) ERROR 11-30 03:12:45 [core.py:843]   File "{VENV}/vllm/v1/worker/gpu_model_runner.py", line 1, in {where}
(EngineCore_DP0 pid={pid}) ERROR 11-30 03:12:45 [core.py:843] torch.AcceleratorError: {IMA}
"""


DFLASH_FULL = CellContext(method="dflash", backend="FLASHINFER", graph_mode="FULL", draft_eager=False)


def test_one_illegal_memory_access_noticed_in_two_places_is_one_group():
    assert sign(fault("execute_model", 1), DFLASH_FULL).signature == sign(fault("_bookkeeping_sync", 2), DFLASH_FULL).signature


def test_two_illegal_memory_accesses_of_different_cells_are_two_groups():
    eagle = CellContext(method="eagle3", backend="FLASH_ATTN", graph_mode="PIECEWISE", draft_eager=False)
    assert sign(fault("execute_model", 1), DFLASH_FULL).signature != sign(fault("execute_model", 1), eagle).signature
    eager_draft = CellContext(method="dflash", backend="FLASHINFER", graph_mode="FULL", draft_eager=True)
    assert sign(fault("execute_model", 1), DFLASH_FULL).signature != sign(fault("execute_model", 1), eager_draft).signature


def test_the_configuration_is_not_in_the_key_of_an_ordinary_exception():
    log = 'Traceback (most recent call last):\n  File "/x/vllm/a.py", line 1, in f\nValueError: target_layer_ids [9] out of range\n'
    assert sign(log, DFLASH_FULL).signature == sign(log, None).signature


def test_the_title_of_an_asynchronous_fault_says_where_and_what_ran():
    log = f"""\
Traceback (most recent call last):
  File "{VENV}/vllm/v1/attention/backends/flashinfer.py", line 1102, in forward
  File "{VENV}/flashinfer/decode.py", line 1290, in run
RuntimeError: {IMA}
"""
    assert sign(log, DFLASH_FULL).title == "illegal memory access in FlashInfer decode (DFlash draft, FLASHINFER, FULL graphs)"
