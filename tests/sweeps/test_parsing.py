"""A sweep body is read at a cost bounded by its size: no YAML aliases, no foreign tags, no deep nesting."""

import pytest
from sqlalchemy import func, inspect, select

from app.models import Sweep
from app.sweeps import parsing, service
from tests.conftest import AUTH
from tests.factories import register_worker, sweep_body

# Nine levels of aliases, nine each: 9^9 (387 million) strings when followed (the "billion laughs").
BILLION_LAUGHS = "\n".join(
    ["a: &a [" + ",".join(["lol"] * 9) + "]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]" for i in range(8)]
)


def test_aliases_are_refused_before_anything_is_built() -> None:
    with pytest.raises(parsing.BodyError, match="aliases"):
        parsing.load(BILLION_LAUGHS.encode(), "application/yaml")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("x: !!binary aGVsbG8=", "binary"), ("x: !!python/object:os.system {}", "python/object"),
     ("x: !!set {a: null}", "set"), ("[" * 1100 + "]" * 1100, "deeper than 32")],
)
def test_tags_beyond_json_and_deep_yaml_are_refused(text: str, fragment: str) -> None:
    with pytest.raises(parsing.BodyError, match=fragment):
        parsing.load(text.encode(), "application/yaml")


def test_a_yaml_date_stays_the_text_it_was_written_as() -> None:
    assert parsing.load(b"when: 2026-11-30\nn: 3\nok: true\nnone: null", "application/yaml") == {
        "when": "2026-11-30", "n": 3, "ok": True, "none": None
    }


def test_deep_json_is_refused_with_a_body_error() -> None:
    with pytest.raises(parsing.BodyError, match="deeper than 32"):
        parsing.load(("[" * 1000 + "]" * 1000).encode(), "application/json")
    with pytest.raises(parsing.BodyError, match="deeper than 32"):
        parsing.load(('{"a": ' + "[" * 40 + "]" * 40 + "}").encode(), "application/json")


def test_depth_counts_lists_and_mappings_only() -> None:
    assert parsing.depth(1) == 0 and parsing.depth([]) == 1 and parsing.depth({"a": [1, {"b": []}]}) == 4


@pytest.mark.parametrize(
    ("content", "content_type"),
    [(BILLION_LAUGHS, "application/yaml"), ("[" * 1100, "application/yaml"), ("x: !!binary aGVsbG8=", "application/yaml"),
     ("[" * 1000 + "]" * 1000, "application/json"), (b"\xff\xfe{}", "application/json")],
    ids=["billion-laughs", "deep-yaml", "binary-tag", "deep-json", "not-utf8"],
)
def test_hostile_bodies_get_422_naming_the_body_and_leave_no_rows(client, content, content_type) -> None:
    register_worker(client)
    response = client.post("/api/v1/sweeps", content=content, headers=AUTH | {"content-type": content_type})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body"]
    with client.app.state.sessionmaker() as session:
        assert session.scalar(select(func.count()).select_from(Sweep)) == 0


@pytest.mark.parametrize(
    ("content", "content_type", "key"),
    [('{"name": "a", "build": "b", "name": "c"}', "application/json", "name"),
     ('{"workload": {"seed": 1, "seed": 2}}', "application/json", "seed"),
     ("name: a\nbuild: b\nname: c\n", "application/yaml", "name"),
     ("engine_args:\n  max_num_seqs: 8\n  max_num_seqs: 16\n", "application/yaml", "max_num_seqs")],
    ids=["json", "json-nested", "yaml", "yaml-nested"],
)
def test_a_key_given_twice_is_422_naming_it_not_the_last_one_kept(client, content, content_type, key) -> None:
    # Before: the parsers kept the last value silently ({"name": "a", "name": "b"} made a sweep named b).
    register_worker(client)
    response = client.post("/api/v1/sweeps", content=content, headers=AUTH | {"content-type": content_type})
    assert response.status_code == 422, response.text
    [error] = response.json()["detail"]
    assert error["loc"] == ["body"] and f"key {key!r} is given twice in one mapping" in error["msg"], error


def test_a_sweep_list_does_not_load_the_stored_specs(client, dataset) -> None:
    register_worker(client)
    client.post("/api/v1/sweeps", json=sweep_body(dataset), headers=AUTH)
    with client.app.state.sessionmaker() as session:
        [sweep] = service.list_recent(session=session, limit=10, offset=0)
        assert "spec" in inspect(sweep).unloaded
        assert service.summaries(session=session, limit=10, offset=0)[0].build == "vllm-test"
