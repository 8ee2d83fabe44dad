"""runners/serving.py without vLLM: its rounds' seeds, its reading of a server's counters from ``/metrics``
(a real HTTP server on loopback answers with vLLM's exposition) and of each request's from its stream. The serving
cell itself runs on real vLLM in tests/e2e/test_sweep_on_vllm.py and tests/runners/test_cell.py."""

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from runners import serving

# What vLLM 0.32's server exposes for two engines (label sets) with three speculative positions, among
# other metrics; the ``_created`` samples are prometheus_client's, and no counter of ours.
METRICS = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 2.0
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 30.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 6.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 12.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 3.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 7.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 1.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 1.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 2.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 42.0
vllm:num_requests_running{engine="0",model_name="m"} 3.0
"""


@pytest.fixture
def metrics_server() -> Iterator[tuple[str, list[str]]]:
    """A loopback server answering ``/metrics`` with the text in its list (the test may change it)."""
    answer = [METRICS]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = answer[0].encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", answer
    finally:
        server.shutdown()
        server.server_close()


def test_the_servers_counters_are_summed_over_its_engines(metrics_server: tuple[str, list[str]]) -> None:
    base, _ = metrics_server
    assert serving.scrape(base) == {
        "num_drafts": 12, "num_draft_tokens": 36, "num_accepted_tokens": 15, "accepted_per_position": [9, 4, 2],
    }


def test_a_position_the_server_has_no_count_for_leaves_the_next_ones_in_place(metrics_server: tuple[str, list[str]]) -> None:
    """Positions were listed in sorted order, so counts at 0 and 2 alone came back as positions 0 and 1."""
    base, answer = metrics_server
    answer[0] = "\n".join(line for line in METRICS.splitlines() if 'position="1"' not in line) + "\n"
    assert serving.scrape(base)["accepted_per_position"] == [9, 0, 2]


def test_a_served_round_gives_each_request_its_own_seed_from_where_the_last_round_stopped() -> None:
    sent: list[tuple[str, int]] = []

    def send(prompt: str, *, seed_offset: int) -> dict:
        sent.append((prompt, seed_offset))
        return {"ok": True}

    timings, _ = serving.run_round(send, ["a", "b", "c"], 2, 0.0, first_seed=5)
    assert len(timings) == 3
    assert sorted(sent) == [("a", 5), ("b", 6), ("c", 7)]


def _chunk(text: str | None, finish: str | None = None) -> bytes:
    # vLLM 0.32's completions stream: one chunk per step, ``usage`` null until the last chunk with no choices.
    choices = [] if text is None else [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}]
    return f"data: {json.dumps({'id': 'cmpl-1', 'object': 'text_completion', 'choices': choices, 'usage': None})}\n\n".encode()


USAGE = b'data: {"id": "cmpl-1", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}}\n\n'


@pytest.fixture
def stream_server() -> Iterator[tuple[serving.Client, list[tuple[int, list[bytes]]]]]:
    """A loopback server answering each POST with the status and stream chunks at the head of its list."""
    answers: list[tuple[int, list[bytes]]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            status, chunks = answers.pop(0)
            self.send_response(status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in chunks:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    workload = {"max_tokens": 4, "temperature": 0.0}
    try:
        yield serving.Client(f"http://127.0.0.1:{server.server_address[1]}", "m", workload, chat=False), answers
    finally:
        server.shutdown()
        server.server_close()


def test_a_stream_of_tokens_that_decode_to_no_text_is_completed_and_its_tokens_count(stream_server) -> None:
    # The H200's random Qwen3-8B shape: 102 of 192 streams were 200 OK with 64 tokens and no text, once counted failed.
    send, answers = stream_server
    answers.append((200, [_chunk(""), _chunk(""), _chunk(""), _chunk("", "length"), USAGE, b"data: [DONE]\n\n"]))
    timing = send("p", seed_offset=0)
    assert timing["ok"] and timing["text"] == "" and timing["output_tokens"] == 4
    assert timing["ttft"] is not None and len(timing["itl"]) == 3


def test_a_stream_cut_before_its_done_or_without_tokens_fails_with_its_reason(stream_server) -> None:
    send, answers = stream_server
    answers += [(200, [_chunk("a"), _chunk("b")]), (200, [USAGE, b"data: [DONE]\n\n"]), (503, [b"busy"])]
    cut, tokenless, refused = (send("p", seed_offset=i) for i in range(3))
    assert not cut["ok"] and cut["error"] == "the stream ended before its [DONE]" and cut["text"] == "ab"
    assert not tokenless["ok"] and tokenless["error"] == "the stream carried no token"
    assert not refused["ok"] and refused["error"].startswith("HTTP 503")


def test_a_cells_serving_figures_count_empty_streams_apart_from_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serving.cellkit, "versions", dict)  # the build's facts need vLLM; not what is tested here
    def timing(ok: bool, text: str) -> dict:
        return {"ok": ok, "ttft": 0.01 if ok else None, "itl": [0.002] * 3 if ok else [], "latency": 0.02, "output_tokens": 4 * ok,
                "text": text}

    timings = [timing(True, "abc"), timing(True, ""), timing(True, ""), timing(False, "")]
    rounds = [{"seconds": 1.0, "output_tokens": 12, "num_requests": 3}]
    measured = {"rounds": rounds, "timings": timings, "first": timings, "concurrency": 2, "energy": None,
                "categories": ["random"] * 4, "counts": None}
    result = serving._result({"speculative": None}, measured, engine_start_s=1.0, warmup_s=0.0, started=0.0)
    assert (result["serving"]["completed"], result["serving"]["failed"], result["serving"]["empty"]) == (3, 1, 2)
    assert result["output_tokens"] == 12


# vLLM 0.32's final usage chunk with ``--per-request-spec-decode-metrics summary`` (the shape of
# ``SpeculativeDecodingMetrics``, as its server streams it: k=3, four verify steps accepting 0, 1, 1 and 3 tokens).
SPEC_USAGE = (b'data: {"id": "cmpl-1", "object": "text_completion", "choices": [], "usage": {"prompt_tokens": 5, '
              b'"completion_tokens": 9, "total_tokens": 14}, "metrics": {"speculative_decoding": {'
              b'"mean_acceptance_length": 2.25, "draft_acceptance_rate": 0.4166, "acceptance_histogram": [1, 2, 0, 1], '
              b'"num_spec_steps": 4, "num_accepted_draft_tokens": 5, "num_draft_tokens": 12, "num_spec_tokens": 3}}}\n\n')


def test_a_streams_final_usage_chunk_gives_the_requests_spec_decode_counts(stream_server) -> None:
    send, answers = stream_server
    answers += [(200, [_chunk("a"), _chunk("b", "length"), SPEC_USAGE, b"data: [DONE]\n\n"]),
                (200, [_chunk("a"), _chunk("b", "length"), USAGE, b"data: [DONE]\n\n"])]
    counted, plain = send("p", seed_offset=0), send("p", seed_offset=1)
    assert counted["ok"] and counted["output_tokens"] == 9
    assert counted["spec_decode"] == {"num_drafts": 4, "num_draft_tokens": 12, "num_accepted_tokens": 5,
                                      "accepted_per_position": [3, 1, 1]}
    # A server without the flag (vLLM 0.26) streams no metrics: the request has no counts, not zeros.
    assert plain["ok"] and "spec_decode" not in plain
    assert serving.request_spec_decode({"metrics": {"time_to_first_token_ms": 3.0}}) is None


def test_the_per_request_flag_goes_to_the_server_only_where_the_builds_engine_args_have_it() -> None:
    from runners import cell

    spec = {"model": "m", "workload": {"seed": 0}, "backend": "CPU_ATTN", "graph_mode": "NONE",
            "speculative": {"method": "ngram", "num_speculative_tokens": 3}}
    new = serving.engine_flags(cell.engine_kwargs(spec, {"per_request_spec_decode_metrics"}))
    assert new[new.index("--per-request-spec-decode-metrics") + 1] == "summary"
    old = serving.engine_flags(cell.engine_kwargs(spec, set()))  # vLLM 0.26's EngineArgs: no such field
    assert not any("per-request" in flag for flag in old) and "--disable-log-stats" not in old
    baseline = serving.engine_flags(cell.engine_kwargs({**spec, "speculative": None}, {"per_request_spec_decode_metrics"}))
    assert not any("per-request" in flag for flag in baseline)


def test_a_served_cells_requests_carry_their_categories_and_counts_only_when_every_request_had_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(serving.cellkit, "versions", dict)  # the build's facts need vLLM; not what is tested here
    counted = serving.request_spec_decode(json.loads(SPEC_USAGE.decode()[5:]))
    timing = {"ok": True, "ttft": 0.01, "itl": [0.002] * 8, "latency": 0.03, "output_tokens": 9, "text": "x"}
    timings = [timing] * 4  # two passes of two prompts
    rounds = [{"seconds": 1.0, "output_tokens": 36, "num_requests": 4,
               "spec_decode": serving.cellkit.sum_counters([counted] * 4)}]
    spec = {"speculative": {"method": "ngram", "num_speculative_tokens": 3}}
    for missing in (None, 3):
        counts = serving.cellkit.RequestCounts(2)
        for index in range(4):
            counts.count_request(index % 2, None if index == missing else counted)
        measured = {"rounds": rounds, "timings": timings, "first": timings[:2], "concurrency": 2, "energy": None,
                    "categories": ["qa", "rag"], "counts": counts}
        requests = serving._result(spec, measured, engine_start_s=1.0, warmup_s=0.0, started=0.0)["requests"]
        assert [r["category"] for r in requests] == ["qa", "rag"]
        if missing is None:  # every request counted: they add up to the round's counters
            fields = [*serving.cellkit.SPEC_DECODE_COUNTERS, "accepted_per_position"]
            assert serving.cellkit.sum_counters([{f: r[f] for f in fields} for r in requests]) == rounds[0]["spec_decode"]
        else:
            assert all("num_drafts" not in r for r in requests)
