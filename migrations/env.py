"""Alembic environment: the URL comes from the caller's Config (see app.db.alembic_config)."""

from alembic import context
from sqlalchemy import engine_from_config, pool, text
from sqlalchemy.orm import Session

from app.models import Base

config = context.config
target_metadata = Base.metadata
# Tables derived from the results by today's code (the stored alarm judgement, the alerts' snapshot): the migration
# that makes one names it in ``config.attributes["derive"]``, and it is filled once the run has reached its target,
# in the same transaction. Filled inside its own migration, today's code would read columns later migrations add.
DERIVE = "derive"


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connectable = config.attributes.get("connection")
    if connectable is not None:
        _run(connectable)
        return
    engine = engine_from_config(
        config.get_section(config.config_ini_section, {}), prefix="sqlalchemy.", poolclass=pool.NullPool
    )
    with engine.connect() as connection:
        _run(connection)


def _run(connection) -> None:
    # SQLite cannot ALTER most things in place: batch mode rebuilds tables for later migrations.
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
        _derived(connection)


def _derived(connection) -> None:
    wanted = config.attributes.pop(DERIVE, set())
    # An empty database has nothing to derive.
    if not wanted or not connection.scalar(text("SELECT count(*) FROM results")):
        return
    from app.alarms import service as alarms
    from app.alerts import service as alerts

    with Session(bind=connection) as session:
        if "alarms" in wanted:
            alarms.refresh_all(session=session)
        if "alerts" in wanted:
            alerts.store(session=session)
        session.flush()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
