"""The base of every model that reads input (requests, sweep files, a cell's JSON): only values a database,
a JSON document and vLLM can all hold get through, each refusal naming its field.

Three kinds of value pass JSON and Pydantic's own checks and then fail later: a lone UTF-16 surrogate
(``"\\udc80"``: valid JSON, valid Python, but not encodable as UTF-8, so the database driver raises), a
NUL character (PostgreSQL's text holds none) and NaN or Infinity (``allow_inf_nan`` covers typed floats
only, not floats inside free-form mappings such as ``engine_args``; and a 422 that echoes NaN cannot
itself be rendered). A worker's report is cleaned of the first two instead (``app.schemas.text``).
"""

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

# Lists and mappings inside a value nest at most this deep (a sweep's body as a whole: app.sweeps.parsing).
MAX_DEPTH = 32


class Input(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        problem = unstorable(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _storable_extras(self) -> "Input":
        # Models that allow extra keys (Versions, a speculative config) hold values no field validates.
        problem = unstorable(self.__pydantic_extra__ or {})
        if problem:
            raise ValueError(problem)
        return self


def unstorable(value: Any) -> str | None:
    """Why ``value`` (and everything inside it) cannot be stored and echoed as JSON, or None.

    Walks lists and mappings without recursion, refusing nesting deeper than ``MAX_DEPTH``
    (the database's JSON encoder recurses); models inside are checked by their own validators.
    """
    stack: list[tuple[str, Any, int]] = [("", value, 0)]
    while stack:
        path, item, level = stack.pop()
        where = f" at {path}" if path else ""
        if isinstance(item, str):
            if _has_surrogate(item):
                return f"text{where} holds a lone surrogate (not valid Unicode)"
            if "\x00" in item:
                return f"text{where} holds a NUL character, which the database cannot store"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"number{where} must be finite, not {item}"
        elif isinstance(item, dict | list | tuple):
            if level >= MAX_DEPTH:
                return f"value{where} is nested deeper than {MAX_DEPTH} levels"
            if isinstance(item, dict):
                for key, inner in item.items():
                    if isinstance(key, str) and (_has_surrogate(key) or "\x00" in key):
                        return f"key{where} holds a lone surrogate or a NUL character"
                    stack.append((f"{path}.{key}" if path else str(key), inner, level + 1))
            else:
                stack.extend((f"{path}[{index}]", inner, level + 1) for index, inner in enumerate(item))
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
