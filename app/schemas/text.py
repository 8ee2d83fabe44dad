"""Text fields tied to the column that stores them: the column's length is the field's ``max_length``.

Two kinds of text arrive. A user's (a sweep's name, a worker's host) is refused when it does not fit: a 422
naming the field (``stored``). A worker's report of what happened (``reported``) is data: it is stored, with
what PostgreSQL's text cannot hold taken out (NUL dropped, lone surrogates replaced by U+FFFD) and text
longer than its column cut with a visible mark, so a cell that printed a NUL byte or a 200-character GPU
name is recorded, not refused (a refused report stopped every worker that claimed its job, in turn).

Each field carries a ``StoredIn`` naming its column; ``tests/schemas/test_text.py`` walks every text field
of the input schemas and ties it to one, so a schema and its table cannot drift apart.
"""

import re
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, StringConstraints
from sqlalchemy import String
from sqlalchemy.orm import QueryableAttribute

from app.schemas.base import unstorable

# Lone UTF-16 halves: JSON's "\udc80" decodes to one, and UTF-8 (so no database) can hold it.
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class StoredIn:
    """The column a text field is stored in (a JSON or Text column: no length of its own), and whether text
    that does not fit is cut (a worker's report) or refused (a user's input)."""

    column: QueryableAttribute
    cut: bool = False

    @property
    def length(self) -> int | None:
        kind = self.column.property.columns[0].type
        return kind.length if isinstance(kind, String) else None


def stored(
    column: QueryableAttribute, limit: int | None = None, *, min_length: int = 0, pattern: str | None = None
) -> Any:
    """A user's text kept in ``column``: at most the column's length (or ``limit`` for a JSON or Text column)."""
    where = StoredIn(column)
    constraints = StringConstraints(min_length=min_length, max_length=_length(where, limit), pattern=pattern)
    return Annotated[str, where, constraints, AfterValidator(_storable)]


def reported(column: QueryableAttribute, limit: int | None = None) -> Any:
    """A worker's text kept in ``column``: made storable and cut to the column's length (or ``limit``), never refused."""
    where = StoredIn(column, cut=True)
    length = _length(where, limit)
    fit = BeforeValidator(lambda value: cut(clean(value), length))
    return Annotated[str, where, fit, StringConstraints(max_length=length)]


def clean(value: Any) -> Any:
    """``value`` with every string in it (keys too, through lists and mappings) storable: NUL dropped, lone
    surrogates replaced by U+FFFD. Anything else is left to validation."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value.replace("\x00", ""))
    if isinstance(value, dict):
        return {clean(key): clean(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [clean(inner) for inner in value]
    return value


def cut(value: Any, limit: int | None) -> Any:
    """Text longer than ``limit`` cut to it, ending in ``…[cut N chars]`` (N: how many were left out)."""
    if not isinstance(value, str) or limit is None or len(value) <= limit:
        return value
    keep = limit
    while True:
        mark = f"…[cut {len(value) - keep} chars]"
        if keep + len(mark) <= limit:
            return value[:keep] + mark
        keep = limit - len(mark)
        if keep < 1:  # a column too short for the mark
            return value[:limit]


def _storable(value: str) -> str:
    # Checked here as well as by Input's own check of whole fields, so that the error names a list's item.
    if problem := unstorable(value):
        raise ValueError(problem)
    return value


def _length(where: StoredIn, limit: int | None) -> int | None:
    # One source of truth: a column with a length gives it; only JSON and Text columns take the schema's own.
    if where.length is not None and limit is not None:
        raise TypeError(f"{where.column} has its own length ({where.length}); give no limit")
    return where.length if where.length is not None else limit
