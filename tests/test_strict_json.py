"""JSON read strictly (``app.strict_json``): UTF-8 only, each key once, at any depth."""

import json

import pytest

from app import strict_json


def test_a_key_given_twice_at_any_depth_is_named() -> None:
    assert strict_json.problem(b'{"a": 1, "a": 2}') == "key 'a' is given twice in one mapping"
    assert strict_json.problem(b'{"outer": [{"x": 1, "y": 2, "x": 3}]}') == "key 'x' is given twice in one mapping"
    with pytest.raises(strict_json.KeyTwice):
        json.loads('{"k": 1, "k": 1}', object_pairs_hook=strict_json.pairs_once)


def test_json_not_in_utf8_is_refused_and_a_byte_order_mark_read_past() -> None:
    assert strict_json.problem('{"a": 1}'.encode("utf-16")).startswith("not UTF-8")
    assert strict_json.problem(b'\xef\xbb\xbf{"a": 1}') is None
    assert strict_json.utf8(b'\xef\xbb\xbf{"a": 1}') == '{"a": 1}'


def test_text_that_is_no_json_is_left_to_its_reader() -> None:
    assert strict_json.problem(b"{not json") is None and strict_json.problem(b'{"a": [1, 2]}') is None
