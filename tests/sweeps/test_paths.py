"""The path rule for models and datasets, on tiny hand-built inputs (no database)."""

import pytest

from app.sweeps import engine_args, paths


@pytest.mark.parametrize(
    ("value", "roots", "hub_ok", "expected"),
    [
        ("Qwen/Qwen3-0.6B", ["/models"], True, None),
        ("gpt2", ["/models"], True, None),
        ("Qwen/Qwen3-0.6B", ["/models"], False, "absolute path"),
        ("/models/tiny", ["/models"], True, None),
        ("/models", ["/models/"], True, None),
        ("/models-evil/tiny", ["/models"], True, "outside"),  # a sibling with the root as its prefix
        ("/anything/at/all", ["/"], True, None),
        ("/anything/at/all", [], True, None),
        ("relative/path/x", [], True, None),  # no roots: local use
        ("a/b/../../etc", [], True, "'..'"),  # '..' is refused even without roots
        ("org..name/x", [], True, "'..'"),
        ("/models/a b", [], True, "may contain only"),
        ("", [], True, "may contain only"),
    ],
)
def test_path_rule(value, roots, hub_ok, expected) -> None:
    found = paths.problem(value, roots=roots, kind="model", hub_ok=hub_ok)
    assert (found is None) if expected is None else (expected in found), found


def test_import_path_rule() -> None:
    assert paths.import_path_problem("my_pkg.proposers.Mine") is None
    for bad in ("Mine", "/tmp/x.py", "pkg.mod; rm", "pkg..Mine"):
        assert "import path" in paths.import_path_problem(bad)


def test_engine_args_the_cpu_tests_and_examples_use_are_accepted() -> None:
    accepted = {"max_model_len": 512, "kv_cache_memory_bytes": 256 * 2**20, "max_num_seqs": 8,
                "load_format": "dummy", "gpu_memory_utilization": 0.3, "dtype": "float7", "max_num_batched_tokens": None}
    assert engine_args.problems(accepted) == []


def test_engine_args_report_every_problem_with_its_loc() -> None:
    found = engine_args.problems({"nope": 1, "block_size": 1.5, "compilation_config": {"cache_dir": "/x", "mode": 3}})
    assert [loc for loc, _, _ in found] == [["nope"], ["block_size"], ["compilation_config", "cache_dir"]]
    assert "max_num_seqs" in found[0][2] and found[1][2] is None
