"""Engine, sessions and the start-up schema check."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


class SchemaError(RuntimeError):
    """The database cannot be brought to the schema this code expects."""


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # noqa: ANN001
            # WAL lets readers (dashboards) run beside the one writer; foreign keys are off by default.
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        # pysqlite's own transaction handling defers BEGIN; emit it ourselves so a claim's read and
        # write happen under one write lock (BEGIN IMMEDIATE), never interleaved with another claim.
        @event.listens_for(engine, "connect")
        def _no_pysqlite_begin(dbapi_conn, _record):  # noqa: ANN001
            dbapi_conn.isolation_level = None

        @event.listens_for(engine, "begin")
        def _begin_immediate(conn):  # noqa: ANN001
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


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
    """Bring the database to the newest schema (``alembic upgrade head``)."""
    try:
        command.upgrade(alembic_config(url), "head")
    except Exception as exc:  # the message must reach an operator, whatever the driver raised
        raise SchemaError(
            f"could not migrate the database at {_redact(url)} to the newest schema: {exc}"
        ) from exc


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
