"""runners/serving.py without vLLM: its rounds' seeds, and its reading of a server's counters from ``/metrics``
(a real HTTP server on loopback answers with vLLM's exposition). The serving cell itself runs on real vLLM
in tests/e2e/test_sweep_on_vllm.py."""

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
