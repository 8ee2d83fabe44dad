"""Hostile sweeps, written by hand: each gets a 4xx naming the field, and leaves no rows behind.

What is refused and what is kept as data, field by field:

- model, tokenizer, draft models (and speculative keys ending in ``model``, ``path`` or ``dir``),
  the dataset: refused unless a hub id or a path of plain characters, never with ``..``, and
  inside the allowed roots when the operator set them (symlinks followed);
- engine_args: refused unless on the allow-list, of the right JSON type, with plain strings;
- name, reason, tags, branch, workload categories, other speculative values: free text, stored
  verbatim. They reach vLLM (if at all) as JSON data: the worker writes the cell to a file and
  runs ``[python, cell.py, spec.json, result.json]``; nothing in the code base starts a shell.
"""

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.api.main import create_app
from app.config import Settings
from app.models import Job, Sweep
from tests.conftest import AUTH, DATASET, TOKEN, _pg_database
from tests.factories import register_worker, sweep_body

REPO = Path(__file__).resolve().parents[2]
ALL_GPUS = ["A100", "H100", "H200", "H20", "L4", "L40S", "B200", "GB200", "B300", "RTX_PRO_6000"]
ALL_BACKENDS = ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TREE_ATTN"]
ALL_MODES = ["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"]
ALL_METHODS = ["ngram", "ngram_gpu", "suffix", "draft_model", "eagle", "eagle3", "mtp", "dflash", "dspark"]


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Allowed roots ``models/`` (a model ``tiny``, a symlink ``escape`` -> /etc) and ``data/``."""
    base = tmp_path_factory.mktemp("roots")
    (base / "models" / "tiny").mkdir(parents=True)
    (base / "models" / "escape").symlink_to("/etc")
    (base / "data").mkdir()
    shutil.copy(DATASET, base / "data" / "questions.jsonl")
    (base / "data" / "evil.jsonl").symlink_to("/etc/passwd")
    return base


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def hostile_client(request: pytest.FixtureRequest, roots: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """One app per database for the whole module: every case must leave it empty anyway."""
    urls = iter([f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'draftbench.db'}"]) if request.param == "sqlite" else _pg_database()
    url = next(urls)
    settings = Settings(database_url=url, token=TOKEN, allowed_model_roots=[str(roots / "models")],
                        allowed_dataset_roots=[str(roots / "data")])
    app = create_app(settings)
    with TestClient(app) as client:
        register_worker(client, gpu_kinds=["cpu", "H200"])
        yield client
    app.state.engine.dispose()
    next(urls, None)  # drops the PostgreSQL database


def _body(roots: Path, **overrides: Any) -> dict[str, Any]:
    model = str(roots / "models" / "tiny")
    body = sweep_body(roots / "data" / "questions.jsonl", model=model)
    body["speculative"][1]["model"] = model
    body.update(overrides)
    return body


def _workload(roots: Path, **changes: Any) -> dict[str, Any]:
    return {"dataset": str(roots / "data" / "questions.jsonl"), "num_prompts": 4, "max_tokens": 8, **changes}


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"k": value}
    return value


def _rows(client: TestClient) -> tuple[int, int]:
    with client.app.state.sessionmaker() as session:
        return session.scalar(select(func.count()).select_from(Sweep)), session.scalar(select(func.count()).select_from(Job))


# (id, overrides as a function of the roots folder, expected loc, a fragment of the message)
CASES: list[tuple[str, Any, list[Any], str]] = [
    # Path traversal and paths outside the roots.
    ("dataset-dotdot", lambda r: {"workload": _workload(r, dataset="../../etc/passwd")}, ["body", "workload", "dataset"], "'..'"),
    ("dataset-dotdot-inside-root", lambda r: {"workload": _workload(r, dataset=f"{r}/data/../../../etc/passwd")}, ["body", "workload", "dataset"], "'..'"),
    ("model-dotdot", lambda r: {"model": "../../etc/passwd"}, ["body", "model"], "'..'"),
    ("model-outside-roots", lambda r: {"model": "/etc/passwd"}, ["body", "model"], "outside the allowed model roots"),
    ("tokenizer-outside-roots", lambda r: {"tokenizer": "/root/.ssh"}, ["body", "tokenizer"], "outside the allowed model roots"),
    ("dataset-outside-roots", lambda r: {"workload": _workload(r, dataset="/etc/passwd")}, ["body", "workload", "dataset"], "outside the allowed dataset roots"),
    ("dataset-relative", lambda r: {"workload": _workload(r, dataset="data/questions.jsonl")}, ["body", "workload", "dataset"], "absolute path"),
    ("model-relative-path", lambda r: {"model": "models/tiny/weights"}, ["body", "model"], "absolute path"),
    ("model-symlink-escape", lambda r: {"model": f"{r}/models/escape/passwd"}, ["body", "model"], "outside the allowed model roots"),
    ("dataset-symlink-escape", lambda r: {"workload": _workload(r, dataset=f"{r}/data/evil.jsonl")}, ["body", "workload", "dataset"], "outside the allowed dataset roots"),
    ("draft-outside-roots", lambda r: {"speculative": [{"method": "draft_model", "model": "/etc", "num_speculative_tokens": 3}]}, ["body", "speculative", 0, "model"], "outside"),
    ("draft-extra-path-key", lambda r: {"speculative": [{"method": "eagle", "model": f"{r}/models/tiny", "num_speculative_tokens": 3, "draft_tokenizer_path": "/etc/shadow"}]}, ["body", "speculative", 0, "draft_tokenizer_path"], "not an accepted speculative-config key"),
    ("custom-class-file-path", lambda r: {"speculative": [{"method": "custom_class", "model": "/tmp/evil.py", "num_speculative_tokens": 3}]}, ["body", "speculative", 0, "model"], "Python import path"),
    # Shell metacharacters where a name or a path is expected.
    ("model-semicolon", lambda r: {"model": f"{r}/models/tiny; rm -rf /"}, ["body", "model"], "may contain only"),
    ("model-subshell", lambda r: {"model": "$(reboot)"}, ["body", "model"], "may contain only"),
    ("tokenizer-backticks", lambda r: {"tokenizer": "`reboot`"}, ["body", "tokenizer"], "may contain only"),
    ("dataset-pipe", lambda r: {"workload": _workload(r, dataset=f"{r}/data/questions.jsonl | sh")}, ["body", "workload", "dataset"], "may contain only"),
    ("draft-newline", lambda r: {"speculative": [{"method": "draft_model", "model": "org/name\nrm -rf /", "num_speculative_tokens": 3}]}, ["body", "speculative", 0, "model"], "may contain only"),
    ("engine-arg-value-subshell", lambda r: {"engine_args": {"load_format": "$(reboot)"}}, ["body", "engine_args", "load_format"], "may contain only"),
    ("engine-arg-key-shell", lambda r: {"engine_args": {"; rm -rf /": 1}}, ["body", "engine_args", "; rm -rf /"], "max_num_seqs"),
    # Engine arguments off the allow-list.
    ("unknown-engine-arg", lambda r: {"engine_args": {"no_such_engine_arg": 1}}, ["body", "engine_args", "no_such_engine_arg"], "allowed values: "),
    ("trust-remote-code", lambda r: {"engine_args": {"trust_remote_code": True}}, ["body", "engine_args", "trust_remote_code"], "runs Python code"),
    ("enforce-eager", lambda r: {"engine_args": {"enforce_eager": True}}, ["body", "engine_args", "enforce_eager"], "graph mode"),
    ("download-dir", lambda r: {"engine_args": {"download_dir": "/tmp"}}, ["body", "engine_args", "download_dir"], "not an accepted engine argument"),
    ("compile-backend-import", lambda r: {"engine_args": {"compilation_config": {"backend": "os.system"}}}, ["body", "engine_args", "compilation_config", "backend"], "load code"),
    ("compile-dump-path", lambda r: {"engine_args": {"compilation_config": {"debug_dump_path": "/etc"}}}, ["body", "engine_args", "compilation_config", "debug_dump_path"], "cudagraph_capture_sizes"),
    ("executor-import-path", lambda r: {"engine_args": {"distributed_executor_backend": "evil.Executor"}}, ["body", "engine_args", "distributed_executor_backend"], "one of 'mp'"),
    ("engine-arg-wrong-type", lambda r: {"engine_args": {"max_num_seqs": "many"}}, ["body", "engine_args", "max_num_seqs"], "must be an integer"),
    ("engine-arg-bool-as-int", lambda r: {"engine_args": {"max_model_len": True}}, ["body", "engine_args", "max_model_len"], "must be an integer"),
    # Nested mappings that reach vLLM: the speculative config, hf_overrides, compilation_config.
    ("draft-load-config", lambda r: {"speculative": [{"method": "draft_model", "model": f"{r}/models/tiny", "num_speculative_tokens": 3,
                                                       "draft_load_config": {"download_dir": "/etc/cron.d", "load_format": "tensorizer",
                                                                             "model_loader_extra_config": {"tensorizer_uri": "s3://x"}}}]},
     ["body", "speculative", 0, "draft_load_config"], "load config"),
    ("speculative-unknown-key", lambda r: {"speculative": [{"method": "ngram", "num_speculative_tokens": 3, "shell": "sh"}]},
     ["body", "speculative", 0, "shell"], "prompt_lookup_max"),
    ("speculative-value-subshell", lambda r: {"speculative": [{"method": "ngram", "num_speculative_tokens": 3, "rejection_sample_method": "$(id)"}]},
     ["body", "speculative", 0, "rejection_sample_method"], "may contain only"),
    ("speculative-backend-unknown", lambda r: {"speculative": [{"method": "eagle", "num_speculative_tokens": 3, "attention_backend": "EVIL"}]},
     ["body", "speculative", 0, "attention_backend"], "one of 'FLASH_ATTN'"),
    ("hf-overrides-auto-map", lambda r: {"engine_args": {"hf_overrides": {"auto_map": {"AutoModel": "evil.Model"}}}},
     ["body", "engine_args", "hf_overrides", "auto_map"], "remote code"),
    ("hf-overrides-file", lambda r: {"engine_args": {"hf_overrides": {"tokenizer_file": "/etc/passwd"}}},
     ["body", "engine_args", "hf_overrides", "tokenizer_file"], "outside the allowed model roots"),
    ("hf-overrides-subshell", lambda r: {"engine_args": {"hf_overrides": {"note": "$(reboot)"}}},
     ["body", "engine_args", "hf_overrides", "note"], "may contain only"),
    ("hf-overrides-key", lambda r: {"engine_args": {"hf_overrides": {"a b; c": 1}}},
     ["body", "engine_args", "hf_overrides", "a b; c"], "must be a name"),
    ("pass-config-dump-dir", lambda r: {"engine_args": {"compilation_config": {"pass_config": {"dump_dir": "/etc"}}}},
     ["body", "engine_args", "compilation_config", "pass_config", "dump_dir"], "outside the allowed model roots"),
    ("engine-args-too-large", lambda r: {"engine_args": {"hf_overrides": {f"k{i}": "x" * 100 for i in range(300)}}},
     ["body", "engine_args"], "over the limit of 16384"),
    ("engine-args-deep", lambda r: {"engine_args": {"hf_overrides": _nested(40)}}, ["body"], "nested deeper than 32"),
    # Wrong types.
    ("repeats-string", lambda r: {"repeats": "three"}, ["body", "repeats"], "integer"),
    ("gpus-string", lambda r: {"gpu_kinds": "H200"}, ["body", "gpu_kinds"], "list"),
    ("speculative-dict", lambda r: {"speculative": {}}, ["body", "speculative"], "list"),
    ("workload-null", lambda r: {"workload": None}, ["body", "workload"], "dictionary"),
    ("engine-args-list", lambda r: {"engine_args": [1, 2]}, ["body", "engine_args"], "dictionary"),
    ("model-number", lambda r: {"model": 123}, ["body", "model"], "string"),
    ("tokens-string", lambda r: {"speculative": [{"method": "ngram", "num_speculative_tokens": "3x"}]}, ["body", "speculative", 0, "num_speculative_tokens"], "integer"),
    # Huge matrices: refused by their count, before a single cell is built.
    ("huge-matrix", lambda r: {"gpu_kinds": ALL_GPUS, "backends": ALL_BACKENDS, "graph_modes": ALL_MODES,
                               "speculative": [{"method": m, "num_speculative_tokens": 3} for m in ALL_METHODS], "repeats": 100},
     ["body", "repeats"], "over the limit of 2000"),
    ("thousands-of-drafts", lambda r: {"gpu_kinds": ALL_GPUS, "backends": ALL_BACKENDS, "graph_modes": ALL_MODES,
                                       "speculative": [{"method": "ngram", "num_speculative_tokens": 3}] * 5000},
     ["body", "repeats"], "1250000 cells"),
    ("repeats-over-schema-limit", lambda r: {"repeats": 10**9}, ["body", "repeats"], "less than or equal to 100"),
]


@pytest.mark.parametrize(("overrides", "loc", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_sweep_gets_4xx_naming_the_field_and_leaves_no_rows(hostile_client, roots, overrides, loc, fragment) -> None:
    response = hostile_client.post("/api/v1/sweeps", json=_body(roots, **overrides(roots)), headers=AUTH)
    assert response.status_code == 422, response.text
    error = response.json()["detail"][0]
    assert error["loc"] == loc, error
    assert fragment in error["msg"], error
    assert _rows(hostile_client) == (0, 0)


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (b"name: !!python/object/apply:os.system ['reboot']", "application/yaml", 422),
        (b'"just a string"', "application/json", 422),
        (b"[1, 2, 3]", "application/json", 422),
        (b"null", "application/json", 422),
        (b"x" * (1024 * 1024 + 1), "application/json", 413),
    ],
    ids=["yaml-python-tag", "json-string", "json-list", "json-null", "over-one-mib"],
)
def test_hostile_bodies_are_refused_without_rows(hostile_client, content, content_type, status) -> None:
    response = hostile_client.post("/api/v1/sweeps", content=content, headers=AUTH | {"content-type": content_type})
    assert response.status_code == status, response.text
    assert _rows(hostile_client) == (0, 0)


def test_the_valid_body_of_these_cases_is_accepted(roots, db_url) -> None:
    """The control: without its hostile change the base body passes, also by a hub id and inside the roots."""
    settings = Settings(database_url=db_url, token=TOKEN, allowed_model_roots=[str(roots / "models")],
                        allowed_dataset_roots=[str(roots / "data")])
    app = create_app(settings)
    with TestClient(app) as client:
        register_worker(client)
        assert client.post("/api/v1/sweeps", json=_body(roots), headers=AUTH).status_code == 201
        hub = _body(roots, model="Qwen/Qwen3-0.6B", tokenizer="gpt2", engine_args={
            "dtype": "bfloat16", "max_model_len": 512, "revision": "refs/pr/1", "distributed_executor_backend": "mp",
            "compilation_config": {"cudagraph_capture_sizes": [1, 2, 4], "pass_config": {"enable_fusion": True}},
            "hf_overrides": {"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "yarn", "factor": 2.0}}})
        assert client.post("/api/v1/sweeps", json=hub, headers=AUTH).status_code == 201, "hub ids need no root"
    app.state.engine.dispose()


def test_free_text_is_stored_verbatim_as_data(client, dataset) -> None:
    """Free text that never reaches vLLM (names, reasons, tags, categories) may hold anything: it is kept as
    given, and the cell carries it as JSON values only. Values that reach vLLM are held to names (above)."""
    register_worker(client)
    hostile = "x; rm -rf / && $(reboot) `id` | sh > /etc/passwd"
    body = sweep_body(dataset, name=hostile, reason=hostile, tags=[hostile], branch=hostile, submitted_by=hostile,
                      workload={"dataset": str(dataset), "categories": [hostile], "num_prompts": 4, "max_tokens": 8})
    response = client.post("/api/v1/sweeps", json=body, headers=AUTH)
    assert response.status_code == 201, response.text
    assert response.json()["name"] == hostile and response.json()["tags"] == [hostile]
    job = client.get("/api/v1/jobs", params={"sweep_id": response.json()["id"]}).json()[0]
    assert job["spec"]["workload"]["categories"] == [hostile]


def test_nothing_in_the_code_base_starts_a_shell() -> None:
    """What makes free text safe: the cell runs from an argv list and a JSON file, and no code uses a shell."""
    shell = re.compile(r"shell\s*=\s*True|os\.system\(|os\.popen\(|subprocess\.getoutput\(|create_subprocess_shell\(|os\.exec\w*p?e?\(")
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for folder in ("app", "runners", "dashboards", "migrations")
        for path in (REPO / folder).rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if shell.search(line)
    ]
    assert offenders == []
    worker = (REPO / "runners" / "worker.py").read_text()
    assert "json.dumps(spec.model_dump" in worker and "execute.run(" in worker
    assert os.path.isfile(REPO / "runners" / "execute.py")


# What a refusal tells about the service's host (docs/security.md#paths).

def _refusal(client: TestClient, roots: Path, dataset: str) -> str:
    response = client.post("/api/v1/sweeps", json=_body(roots, workload=_workload(roots, dataset=dataset)), headers=AUTH)
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "workload", "dataset"], error
    return error["msg"].replace(repr(dataset), "PATH")


def test_a_path_outside_the_roots_gets_one_refusal_whatever_it_resolves_to(hostile_client, roots) -> None:
    # Before: "dataset '/proc/self/cwd' resolves to '/tmp/probe', outside ...": the service's working directory,
    # its interpreter (/proc/self/exe) and where any symlink leads, told to any submit token.
    plain = _refusal(hostile_client, roots, "/nowhere/questions.jsonl")
    for value in (f"{roots}/data/evil.jsonl", "/proc/self/cwd", "/proc/self/exe", "/proc/self/root/etc/passwd"):
        assert _refusal(hostile_client, roots, value) == plain
    assert "/etc/passwd" not in _refusal(hostile_client, roots, f"{roots}/data/evil.jsonl")
    assert plain.startswith("dataset PATH is outside the allowed dataset roots") and plain.endswith("or cannot be read")


def test_a_link_the_service_cannot_read_is_a_422_not_a_500(hostile_client, roots, monkeypatch) -> None:
    # os.path.realpath raises for a link it may not read (/proc/1/cwd: EACCES, unless the service runs as PID 1's
    # user); made certain here, whoever runs the test.
    real = os.path.realpath

    def realpath(path: str, *args: Any, **kwargs: Any) -> str:
        if str(path).startswith("/proc/1/cwd"):
            raise PermissionError(13, "Permission denied", path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os.path, "realpath", realpath)
    plain = _refusal(hostile_client, roots, "/nowhere/x.jsonl")
    assert _refusal(hostile_client, roots, "/proc/1/cwd/x.jsonl") == plain
    response = hostile_client.post("/api/v1/sweeps", json=_body(roots, model="/proc/1/cwd/model"), headers=AUTH)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "model"], response.text
    assert _rows(hostile_client) == (0, 0)


def test_a_dataset_name_too_long_to_stat_is_a_422_not_a_500(hostile_client, roots) -> None:
    # pathlib's is_file() raised ENAMETOOLONG (and EACCES) instead of answering False: a 500, inside the roots or
    # without roots (below).
    refusal = _refusal(hostile_client, roots, f"{roots}/data/{'a' * 300}.jsonl")
    assert refusal == "dataset PATH cannot be read: the service finds no file there it may read"


def test_without_roots_a_dataset_is_a_readable_file_or_one_refusal(client, roots, tmp_path, monkeypatch) -> None:
    """Without roots a submit token learns only whether a path is a file the service may read: missing, a folder,
    unreadable (``/etc/shadow`` to a service not run as root) and unstattable get the same answer."""
    register_worker(client)
    secret = tmp_path / "secret.jsonl"
    shutil.copy(DATASET, secret)
    access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: str(path) != str(secret) and access(path, mode, **kw))
    answers = {_refusal(client, roots, value) for value in (
        str(secret), str(tmp_path / "missing.jsonl"), str(tmp_path), f"{secret}/below", f"/tmp/{'a' * 300}")}
    assert answers == {"dataset PATH cannot be read: the service finds no file there it may read"}
    readable = client.post("/api/v1/sweeps", json=_body(roots, workload=_workload(roots, dataset=str(DATASET))), headers=AUTH)
    assert readable.status_code == 201, readable.text
