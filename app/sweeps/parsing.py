"""A sweep's body, JSON or YAML, read into plain JSON values at a cost bounded by its size.

YAML is read with a loader that accepts only what JSON can say: no aliases (a 762-byte "billion
laughs" body expanded to 69 MB and stalled the service), no tags beyond JSON's types (``!!binary``
made bytes the database could not store; dates stay text), and no nesting deeper than
``MAX_DEPTH``, in either format (Python's parsers recurse, and past about 1,000 levels they raise
RecursionError). A key given twice in one mapping is refused in both formats: their parsers keep the last
silently (``{"name": "a", "name": "b"}`` was named b). Pure functions.
"""

import json
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError

from app import strict_json

MAX_DEPTH = 32
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
JSON_TYPE = "application/json"


class BodyError(ValueError):
    """The body cannot be read as a sweep; the message says why."""


class _JsonOnlyLoader(yaml.SafeLoader):
    """SafeLoader without aliases, deep nesting, or types JSON lacks."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ComposerError(None, None, "aliases (*name) are not accepted in a sweep", event.start_mark)
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise ConstructorError(None, None, strict_json.twice(key), key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_JsonOnlyLoader.yaml_constructors = {
    tag: constructor
    for tag, constructor in yaml.SafeLoader.yaml_constructors.items()
    if tag is None or tag.rsplit(":", 1)[-1] in ("null", "bool", "int", "float", "str", "seq", "map")
}
# A date or time stays the text it was written as.
_JsonOnlyLoader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)


def is_json(content_type: str | None) -> bool:
    """Whether a Content-Type header names JSON (``application/json``, or a ``+json`` type), parameters aside."""
    kind = (content_type or "").split(";")[0].strip().lower()
    return kind == JSON_TYPE or (kind.startswith("application/") and kind.endswith("+json"))


def load(raw: bytes, content_type: str) -> Any:
    """The body as JSON values; BodyError naming the format and the problem."""
    if content_type in YAML_TYPES:
        try:
            data = yaml.load(raw, Loader=_JsonOnlyLoader)
        except (ComposerError, ConstructorError) as exc:
            raise BodyError(f"body is not a valid sweep in YAML: {_first_line(exc)}") from None
        except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
            raise BodyError(f"body is not valid YAML: {_first_line(exc)}") from None
    else:
        try:
            data = json.loads(strict_json.utf8(raw or b"null"), object_pairs_hook=strict_json.pairs_once)
        except strict_json.KeyTwice as exc:
            raise BodyError(f"body is not a valid sweep in JSON: {exc}") from None
        except RecursionError:
            raise BodyError(f"body is not a valid sweep in JSON: nested deeper than {MAX_DEPTH} levels") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise BodyError(f"body is not valid JSON: {exc}") from None
    if depth(data) > MAX_DEPTH:
        raise BodyError(f"body is nested deeper than {MAX_DEPTH} levels")
    return data


def depth(value: Any) -> int:
    """How deep lists and mappings nest (a scalar is 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children)
    return deepest


def _first_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
