"""Alembic environment: the URL comes from the caller's Config (see app.db.alembic_config)."""

from alembic import context
from sqlalchemy import engine_from_config, pool

from app.db import run_waiting_steps
from app.models import Base

config = context.config
target_metadata = Base.metadata


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
        run_waiting_steps(config, connection, current=context.get_context().get_current_revision())


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
