"""The SQL statements a block of code sends: how a test shows that a page or a lookup costs a fixed number of queries,
whatever the rows."""

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, event


@contextmanager
def recorded(engine: Engine) -> Iterator[list[tuple[str, object]]]:
    """Each statement ``engine`` executes inside the block, as (SQL, parameters), in order."""
    statements: list[tuple[str, object]] = []

    def keep(conn, cursor, sql, params, *_) -> None:
        statements.append((sql, params))

    event.listen(engine, "before_cursor_execute", keep)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", keep)


def reads(statements: list[tuple[str, object]]) -> list[tuple[str, object]]:
    """The statements that read (SELECT, or a WITH before one)."""
    return [(sql, params) for sql, params in statements if sql.lstrip().upper().startswith(("SELECT", "WITH"))]
