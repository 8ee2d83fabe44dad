"""``app.db.plain``: a query's rows as named tuples, what the pages fold."""

from sqlalchemy import create_engine, literal, select

from app import db


def test_plain_rows_hold_the_rows_values_under_their_column_names() -> None:
    engine = create_engine("sqlite://")
    with engine.connect() as conn:
        stmt = select(literal(7).label("id"), literal("H200").label("gpu_kind"), literal(None).label("crash_kind"))
        [row] = db.plain(conn.execute(stmt))
        [again] = db.plain(conn.execute(stmt))
    assert (row.id, row.gpu_kind, row.crash_kind) == (7, "H200", None) and tuple(row) == (7, "H200", None)
    # One shape per statement's columns, made once.
    assert type(row) is type(again) and type(row).__name__ == "Row"


def test_a_column_whose_name_is_no_identifier_is_kept_by_position() -> None:
    with create_engine("sqlite://").connect() as conn:
        [row] = db.plain(conn.execute(select(literal(1).label("class"), literal(2).label("max(x)"))))
    assert tuple(row) == (1, 2)
