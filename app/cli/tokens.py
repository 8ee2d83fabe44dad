"""``draftbench token create|list|revoke``: manage API tokens straight in the database, like ``migrate``."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from sqlalchemy.orm import Session

from app.cli.errors import CliError
from app.cli.service import DatabaseUrl, upgraded
from app.enums import TokenScope
from app.schemas.ids import MAX_ID

token_cli = typer.Typer(help="Create, list and revoke API tokens (straight in the database).", no_args_is_help=True)
console = Console()


@contextmanager
def _session(database_url: str | None) -> Iterator[Session]:
    """One transaction on the migrated database; the engine is closed afterwards."""
    from app import db

    engine = db.make_engine(upgraded(database_url))
    try:
        with db.session_scope(db.make_sessionmaker(engine)) as session:
            yield session
    finally:
        engine.dispose()


@token_cli.command("create")
def create(
    name: Annotated[str, typer.Option(help="Who or what holds it: 'ci', 'h200-host-3'")],
    scope: Annotated[list[TokenScope], typer.Option(help="submit, worker or admin; repeatable")],
    database_url: DatabaseUrl = None,
) -> None:
    """Create a token and print its secret: this is the only time it is shown.

    It is a root: no token issued it, so it stands until it is revoked itself.
    """
    from pydantic import ValidationError

    from app.auth import service
    from app.files import describe
    from app.schemas.token import TokenCreate

    try:
        # The API's rules for a new token (``POST /tokens``): a name its column holds, each scope once.
        asked = TokenCreate(name=name, scopes=scope)
    except ValidationError as exc:
        raise CliError(f"token create: {describe(exc)}", code=2) from None
    with _session(database_url) as session:
        token, secret = service.create(session=session, name=asked.name, scopes=asked.scopes, issued_by=None)
        console.print(f"token {token.id} '{token.name}' with scopes {', '.join(token.scopes)}; its secret, shown once:")
    print(secret)


@token_cli.command("list")
def list_tokens(database_url: DatabaseUrl = None) -> None:
    """List tokens (never their secrets); workers' own credentials show their worker, issued tokens their issuer."""
    from app.auth import service

    table = Table("id", "name", "scopes", "worker", "issued by", "created", "last used", "revoked")
    with _session(database_url) as session:
        for t in service.list_all(session=session):
            when = [f"{d:%Y-%m-%d %H:%M}" if d else "" for d in (t.created_at, t.last_used_at, t.revoked_at)]
            ids = [str(t.worker_id or ""), str(t.issued_by_id or "")]
            table.add_row(str(t.id), t.name, ", ".join(t.scopes), *ids, *when)
    console.print(table)


@token_cli.command("revoke")
def revoke(
    token_id: Annotated[int, typer.Argument(min=1, max=MAX_ID, help="The token's id, from `draftbench token list`")],
    database_url: DatabaseUrl = None,
) -> None:
    """Revoke a token: later requests with it, or with any token issued under it (workers' credentials too), get 401."""
    from app.auth import service
    from app.errors import NotFoundError

    try:
        with _session(database_url) as session:
            token = service.revoke(session=session, token_id=token_id)
            console.print(f"token {token.id} '{token.name}' revoked")
    except NotFoundError as exc:
        raise CliError(str(exc)) from None
