"""``draftbench serve`` and ``draftbench migrate``."""

from typing import Annotated

import typer

from app.cli.errors import CliError
from app.config import Settings

DatabaseUrl = Annotated[
    str | None, typer.Option(envvar="DRAFTBENCH_DATABASE_URL", help="Default: DRAFTBENCH_DATABASE_URL, else sqlite:///draftbench.db")
]


def settings_for(database_url: str | None) -> Settings:
    """The service's settings, with the command line's database (if any) over the environment's.

    A bad value is a CliError naming its variable (exit 2), before anything starts.
    """
    from pydantic import ValidationError
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        settings = Settings(**({"database_url": database_url} if database_url else {}))
    except ValidationError as exc:
        wrong = "; ".join(f"DRAFTBENCH_{str(error['loc'][0]).upper()}: {error['msg']}" for error in exc.errors())
        raise CliError(f"cannot start: {wrong}", code=2) from None
    try:
        make_url(settings.database_url)
    except ArgumentError:
        # Not shown: a URL that cannot be parsed cannot have its password hidden either.
        raise CliError("--database-url (DRAFTBENCH_DATABASE_URL): not a database URL such as sqlite:///draftbench.db "
                       "or postgresql+psycopg://HOST/DB", code=2) from None
    return settings


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    processes: Annotated[
        int, typer.Option(min=1, envvar="DRAFTBENCH_PROCESSES", help="service processes (uvicorn workers) on one port")
    ] = 1,
    database_url: DatabaseUrl = None,
) -> None:
    """Run the API and dashboards (migrates the database first, or refuses to start)."""
    import os
    import shutil
    import tempfile

    import uvicorn

    from app.api.main import create_app
    from app.db import SchemaError, upgrade

    settings = settings_for(database_url)
    if not settings.token:
        raise CliError("DRAFTBENCH_TOKEN is not set: the service would refuse every write (workers, submissions)", code=2)
    try:
        # Several processes each build their own app from the environment; here the schema is only
        # brought up to date, so that a refusal shows once, before any process starts.
        if processes == 1:
            app = create_app(settings)
        else:
            upgrade(settings.database_url)
    except SchemaError as exc:
        raise CliError(f"cannot start: {exc}") from exc
    # No proxy headers: uvicorn's would take X-Forwarded-For from any loopback peer as the client's
    # address, a fresh failed-authentication bucket per forged header. The app reads the header
    # itself, from DRAFTBENCH_TRUSTED_PROXIES only (app.auth.addresses).
    if processes == 1:
        uvicorn.run(app, host=host, port=port, log_level="info", proxy_headers=False)
        return
    os.environ["DRAFTBENCH_DATABASE_URL"] = settings.database_url
    # A scrape reaches one process: they keep their counters in files there, summed by each scrape
    # (app.metrics.service). A new folder per start, so no count of an earlier run is added in.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = counters = tempfile.mkdtemp(prefix="draftbench-metrics-")
    try:
        uvicorn.run(
            "app.api.main:create_app", factory=True, workers=processes, host=host, port=port, log_level="info",
            proxy_headers=False,
        )
    finally:
        shutil.rmtree(counters, ignore_errors=True)


def migrate(database_url: DatabaseUrl = None) -> None:
    """Bring the database to the newest schema (alembic upgrade head)."""
    from rich.console import Console

    upgraded(database_url)
    Console().print("database is at the newest schema")


def upgraded(database_url: str | None) -> str:
    """Migrate the database the command names (or the environment's) and return its URL; CliError if it cannot."""
    from app.db import SchemaError, upgrade

    url = settings_for(database_url).database_url
    try:
        upgrade(url)
    except SchemaError as exc:
        raise CliError(str(exc)) from exc
    return url


def register(cli: typer.Typer) -> None:
    cli.command()(serve)
    cli.command()(migrate)
