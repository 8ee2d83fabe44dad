"""Failures that print no Python exception, in the words real logs print them (see tests/data/crashlogs)."""

from app.vllmlog import failures, lines


def find(finder, text: str) -> str | None:
    found = finder(lines.read(text))
    return None if found is None else found.message


def test_watchdog_timeout_is_kept_as_its_collective():
    text = (
        "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=134217728, NumelOut=134217728, Timeout(ms)=600000) "
        "ran for 600059 milliseconds before timing out.\n"
    )
    assert find(failures.nccl_timeout, text) == "collective operation timeout: OpType=ALLREDUCE"


def test_kernel_assertion_names_file_kernel_and_condition():
    text = (
        '/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [10,0,0], thread: '
        '[64,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.\n'
    )
    assert find(failures.kernel_assert, text) == (
        'ScatterGatherKernel.cu: operator(): Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed'
    )


def test_dead_worker_in_each_format():
    assert find(failures.worker_died, "ERROR 07-04 17:35:16 [multiproc_executor.py:140] Worker proc VllmWorker-1 "
                "died unexpectedly, shutting down executor.") == "worker process died unexpectedly"
    assert find(failures.worker_died, "Worker proc VllmWorker-0 died unexpectedly (exit code: -9), shutting down "
                "executor.") == "worker process died unexpectedly (exit code -9)"
    assert find(failures.worker_died, "ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] Worker VllmWorkerProcess "
                "pid 1159 died, exit code: -6") == "worker process died unexpectedly (exit code -6)"


def test_compiler_errors_of_nvcc_and_gcc():
    assert find(failures.compiler_error, "batch_prefill.cu(123): error: identifier \"x\" is undefined\n") == (
        'batch_prefill.cu: error: identifier "x" is undefined'
    )
    assert find(failures.compiler_error, "/opt/x/tensor_fill.h:12:10: fatal error: curand_kernel.h: No such file or "
                "directory\n") == "tensor_fill.h: error: curand_kernel.h: No such file or directory"
    assert find(failures.compiler_error, "nvcc fatal   : Unknown option '-static-global-template-stub=false'\n") == (
        "fatal: Unknown option '-static-global-template-stub=false'"
    )


def test_a_cut_cuda_message_is_read_from_torchs_search_hint():
    text = "(Worker_TP1 pid=15193) Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com for more.\n"
    assert find(failures.cuda_line, text) == "CUDA error: operation not permitted when stream is capturing"


def test_near_misses_beyond_the_first_thousand_lines_are_not_read():
    # The bound on work: a log of a million "Assertion `" lines costs a thousand bounded reads.
    text = "Assertion `x` never\n" * 2000 + "a.cu:1: k: block: [0,0,0], thread: [0,0,0] Assertion `x` failed.\n"
    assert find(failures.kernel_assert, text) is None


def test_vllms_own_cuda_check_keeps_its_error_and_file_whole_or_cut():
    whole = "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:368 'invalid argument'\n"
    assert find(failures.cuda_line, whole) == "CUDA error: invalid argument in custom_all_reduce.cuh"
    assert find(failures.cuda_line, "Failed: Cuda error /workspace/csrc/custom_all_red") == (
        "CUDA error: message cut off in custom_all_red"
    )


def test_a_ptxas_error_behind_torchs_logger_header_comes_before_its_fatal_line():
    prefix = "[rank0]:E0701 14:28:21.083000 911603 torch/_inductor/runtime/triton_heuristics.py:539] [0/0] "
    text = (
        f"{prefix}ptxas /tmp/tmpmwke15zw.ptx, line 6; error   : PTX .version 8.4 does not support .target sm_120a\n"
        f"{prefix}ptxas fatal   : Ptx assembly aborted due to errors\n"
    )
    assert find(failures.compiler_error, text) == "ptxas error: PTX .version 8.4 does not support .target sm_120a"
    assert find(failures.compiler_error, text.splitlines()[1]) == "fatal: Ptx assembly aborted due to errors"
