"""Engine, sessions and the start-up schema check."""

import contextlib
import fcntl
from collections import namedtuple
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, Result, create_engine, event, text
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


class SchemaError(RuntimeError):
    """The database cannot be brought to the schema this code expects."""


# Where a migration's data step that reads the database with today's code (the app's services) waits for the last
# revision (``when_current``).
_TODAYS_CODE = "steps_on_todays_schema"


def when_current(config: Config, step: Callable[[Connection], None]) -> None:
    """Run ``step`` once the upgrade has reached the newest revision, in its transaction (``migrations/env.py``).

    For a data step that reads with today's code: today's models map every column of the newest schema, so at its
    own revision the step read columns a later one adds (0016's judgement of the alarms and 0018's alerts failed on a
    database of results once 0019 added a column the pooled cells read). An upgrade that stops short of the newest
    revision leaves the step out, as a migration at that revision would have found nothing to read.
    """
    config.attributes.setdefault(_TODAYS_CODE, []).append(step)


def run_waiting_steps(config: Config, connection: Connection, *, current: str | None) -> None:
    """Run the steps ``when_current`` left, in the order their migrations ran, when ``current`` is the newest revision."""
    steps = config.attributes.pop(_TODAYS_CODE, [])
    if current == ScriptDirectory.from_config(config).get_current_head():
        for step in steps:
            step(connection)


# Connections a process keeps, and so the requests it admits and the threads that run them at once
# (app.api.main). Requests beyond it wait in arrival order (app.api.admission), not on the pool: the pool's
# waiters are not served in order (some waited 20-30 s under saturation while later ones went
# ahead). Few threads also share the GIL fairly: with 20, CPU-heavy pages starved for 20 s.
POOL_SIZE = 8


def make_engine(url: str) -> Engine:
    # The overflow is for the rare second connection of one thread (a /metrics scrape's own session).
    pool = {"pool_size": POOL_SIZE, "max_overflow": POOL_SIZE}
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, **pool)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):
            # WAL lets readers (dashboards) run beside the one writer; foreign keys are off by default.
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        # pysqlite's own transaction handling defers BEGIN; emit it ourselves so a claim's read and
        # write happen under one write lock (BEGIN IMMEDIATE), never interleaved with another claim.
        @event.listens_for(engine, "connect")
        def _no_pysqlite_begin(dbapi_conn, _record):
            dbapi_conn.isolation_level = None

        @event.listens_for(engine, "begin")
        def _begin_immediate(conn):
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    # PostgreSQL's default random_page_cost (4) prices an index lookup for a disk that seeks; the service's tables
    # sit in memory or on SSD, where 1.1 is PostgreSQL's own advice. At 4 a page's read of two builds' 4,300 jobs
    # scanned all 102,611 results and hashed them (110 ms) instead of looking up each job's result (36 ms).
    return create_engine(url, pool_pre_ping=True, connect_args={"options": "-c random_page_cost=1.1"}, **pool)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def session_scope(factory: sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error."""
    session = factory()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str) -> None:
    """Bring the database to the newest schema (``alembic upgrade head``).

    Safe to call from many processes at once (``uvicorn --workers N`` starts N apps together): the
    migration runs under a lock, so one process migrates and the others then find the schema current.
    """
    try:
        with _migration_lock(url) as connection:
            cfg = alembic_config(url)
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, "head")
    except Exception as exc:  # the message must reach an operator, whatever the driver raised
        raise SchemaError(
            f"could not migrate the database at {_redact(url)} to the newest schema: {exc}"
        ) from exc


# Any constant works: it names the lock among this database's advisory locks.
_PG_MIGRATION_LOCK = 0x64726166  # "draf"


@contextmanager
def _migration_lock(url: str) -> Iterator[Connection]:
    """A connection that holds the database's migration lock until the migration commits.

    PostgreSQL: a transaction-level advisory lock, released by the commit. SQLite has no such lock,
    and only processes of one host share a file, so a lock file beside the database serves.
    """
    engine = create_engine(url, poolclass=NullPool)
    try:
        if engine.dialect.name == "postgresql":
            with engine.begin() as connection:
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
                yield connection
            return
        database = engine.url.database
        with contextlib.ExitStack() as stack:
            if database and database != ":memory:":
                lock = stack.enter_context(open(f"{database}.migrate-lock", "a"))
                fcntl.flock(lock, fcntl.LOCK_EX)
            with engine.begin() as connection:
                yield connection
    finally:
        engine.dispose()


def check_current(engine: Engine) -> None:
    """Refuse to run against a database whose schema is not the newest revision."""
    head = ScriptDirectory.from_config(alembic_config(str(engine.url))).get_current_head()
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    if current != head:
        raise SchemaError(
            f"database schema is at revision {current!r} but this draftbench needs {head!r}; "
            "run `draftbench migrate`"
        )


def _redact(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def plain(result: Result[Any]) -> list[NamedTuple]:
    """The rows of ``result`` as plain named tuples of its columns, for code that folds thousands of rows.

    SQLAlchemy's ``Row`` answers an attribute in about 0.8 µs, a named tuple in 0.08 µs: folding the 4,320 jobs of
    a page (40 attributes each) took 150 ms with rows and 75 with named tuples (on a loaded host), which cost about
    1 µs a row to make.
    """
    return list(map(_shape(tuple(result.keys()))._make, result.all()))


@cache
def _shape(columns: tuple[str, ...]) -> type:
    # A statement's columns are fixed, so there are as many shapes as statements.
    return namedtuple("Row", columns, rename=True)
