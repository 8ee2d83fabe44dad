"""Prefixes taken off vLLM log lines, in the formats real logs show them (see tests/data/crashlogs)."""

import pytest

from app.vllmlog.lines import MAX_LINE, TRACEBACK_START, read, split_line

MESSAGE = "ValueError: Free memory on device cuda:0 (1.53/22.05 GiB) on startup"


@pytest.mark.parametrize(
    ("line", "label"),
    [
        (f"(EngineCore_DP0 pid=972) ERROR 01-28 15:59:42 [core.py:935] {MESSAGE}", "EngineCore_DP0 pid=972"),
        (f"ERROR 06-30 13:53:19 [core.py:515] {MESSAGE}", None),
        # The older header: no opening bracket before the file.
        (f"(VllmWorkerProcess pid=236) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] {MESSAGE}",
         "VllmWorkerProcess pid=236"),
        (f"ERROR 07-01 13:54:43 multiproc_worker_utils.py:120] {MESSAGE}", None),
        (f"ERROR [core.py:902] {MESSAGE}", None),
        (f"(Worker_TP7 pid=380351) ERROR 04-28-2026-15:50:31.931 [multiproc_executor.py:706] {MESSAGE}",
         "Worker_TP7 pid=380351"),
        (f"(VllmWorker rank=1 pid=115) ERROR 07-27 23:31:27 [multiproc_executor.py:522] {MESSAGE}",
         "VllmWorker rank=1 pid=115"),
        (f"(RayWorkerWrapper pid=336, ip=10.99.48.129) ERROR 03-24 17:44:46 worker_base.py:581] {MESSAGE}",
         "RayWorkerWrapper pid=336"),
        # A run of labels names the innermost process.
        ((f"(APIServer pid=1) (EngineCore_DP6 pid=2454) (Worker_DP6_EP6 pid=2516) ERROR 10-30 17:32:00 "
         f"[v1/executor/multiproc_executor.py:671] {MESSAGE}"), "Worker_DP6_EP6 pid=2516"),
        # Launchers' prefixes before the label or the header.
        (f"[2026-02-24T20:21:58Z] (EngineCore_DP0 pid=6940) {MESSAGE}", "EngineCore_DP0 pid=6940"),
        (f"Aug 19 18:34:27 vllm vllm[8727]: (EngineCore pid=8727) {MESSAGE}", "EngineCore pid=8727"),
        (f"eap-llm-server-on-arc  | ERROR 11-08 11:01:29 [multiproc_executor.py:135] {MESSAGE}", None),
        ((f"2025-06-27 17:14:23: (VllmWorker rank=1 pid=776294) ERROR 06-27 17:14:23 [multiproc_executor.py:522] "
         f"{MESSAGE}"), "VllmWorker rank=1 pid=776294"),
        # What a paste left of a header.
        (f"[multiproc_executor.py:492] {MESSAGE}", None),
        (f"[rank0]:[rank0]: {MESSAGE}", None),
        (f"(RayWorkerWrapper pid=880) ERROR 04-16 01:01:44 [worker_base.py:620] {MESSAGE} [repeated 6x across cluster]",
         "RayWorkerWrapper pid=880"),
        # torch's C++-style header, after the rank, with dynamo's compile id.
        (f"[rank0]:E0701 14:28:21.083000 911603 torch/_inductor/runtime/triton_heuristics.py:539] [0/0] {MESSAGE}", None),
        (f"W1203 10:00:00.5 42 torch/distributed/run.py:793] {MESSAGE}", None),
        # A terminal viewer's box around each line.
        (f"│ ERROR 09-27 06:46:46 engine.py:157] {MESSAGE}                      │", None),
    ],
)
def test_every_prefix_format_comes_off(line, label):
    assert split_line(line) == (label, MESSAGE)


def test_the_older_header_without_a_bracket_is_stripped_so_its_traceback_is_found():
    log = read(
        "ERROR 11-29 10:12:13 core.py:42] Traceback (most recent call last):\n"
        'ERROR 11-29 10:12:13 core.py:42]   File "/x/vllm/a.py", line 1, in f\n'
    )
    assert log.lines == [TRACEBACK_START, '  File "/x/vllm/a.py", line 1, in f']


def test_colours_come_off_before_the_prefixes():
    coloured = (
        "\x1b[0;36m(EngineCore_DP0 pid=738)\x1b[0;0m \x1b[31mERROR\x1b[0m \x1b[90m01-26 09:25:37\x1b[0m "
        f"\x1b[90m[core.py:935]\x1b[0m {MESSAGE}"
    )
    assert read(coloured).lines == [MESSAGE]
    assert split_line(coloured) == ("EngineCore_DP0 pid=738", MESSAGE)


def test_a_traceback_header_after_a_message_starts_its_line():
    glued = "ERROR 05-06 01:55:26 [core.py:383] EngineCore hit an exception: Traceback (most recent call last):"
    assert read(glued).lines == [TRACEBACK_START]
    assert read("EngineCore hit an exception: Traceback (most recent call last):\n").lines == [TRACEBACK_START]


def test_indentation_after_the_prefix_is_kept():
    line = '(EngineCore pid=79)   File "/x/vllm/v1/worker/utils.py", line 413, in request_memory'
    assert read(line).lines == ['  File "/x/vllm/v1/worker/utils.py", line 413, in request_memory']


def test_lines_are_split_by_process_in_log_order():
    log = read("(A pid=1) one\n(B pid=2) two\nplain\n(A pid=1) three\n")
    assert [stream.texts for stream in log.streams] == [["one", "three"], ["two"], ["plain"]]
    assert [list(stream.numbers) for stream in log.streams] == [[0, 3], [1], [2]]


def test_a_line_is_cut_at_8_kb():
    assert read("x" * (3 * MAX_LINE)).lines == ["x" * MAX_LINE]


def test_a_message_mentioning_a_pid_in_its_middle_is_left_alone():
    # Prefixes are looked for at the start of a line only.
    line = "RuntimeError: " + "a" * 300 + " (Worker pid=3) ERROR 11-30 00:00:00 [x.py:1] y"
    assert read(line).lines == [line]


def test_a_launchers_tag_before_the_rank_prefix_comes_off():
    line = '[vllm]: [rank0]:   File "/x/vllm/distributed/parallel_state.py", line 889, in initialize_model_parallel'
    assert read(line).lines == ['  File "/x/vllm/distributed/parallel_state.py", line 889, in initialize_model_parallel']


def test_a_tag_between_the_process_label_and_the_logger_header_comes_off():
    line = "(Worker pid=2291010) [Stage-0] ERROR 03-12 08:22:28 [multiproc_executor.py:800]     raise ValueError("
    log = read(line)
    assert log.lines == ["    raise ValueError("] and log.streams[0].texts == log.lines


def test_the_message_a_traceback_header_was_glued_after_is_kept_apart():
    glued = "ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] Exception in worker W while processing method m: boom, Traceback (most recent call last):"
    for log in (read(f"INFO x\n{glued}\n"), read("x\nException in worker W while processing method m: boom, Traceback (most recent call last):\n")):
        assert log.lines[1] == TRACEBACK_START
        assert log.above == {1: "Exception in worker W while processing method m: boom,"}
