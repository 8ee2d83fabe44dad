"""``draftbench rederive``: read every stored log again with today's rules, straight in the database, like ``migrate``."""

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from app.cli.service import DatabaseUrl, upgraded

console = Console()


def rederive(
    database_url: DatabaseUrl = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would move, write nothing")] = False,
) -> None:
    """Read what ran and why cells died again from the stored logs, and show what moved.

    Results with a stored log get their resolved backends, graph modes and draft eagerness again;
    every crash is signed again and regrouped, merges and splits made by hand kept; every build's graph-capture
    alarm is judged again, with today's rule, from what is now stored.
    """
    from app import db
    from app.alarms import service as alarms
    from app.crashes.rederive import rederive as run

    engine = db.make_engine(upgraded(database_url))
    try:
        with db.make_sessionmaker(engine)() as session:
            report = run(session=session)
            alarms.refresh_all(session=session)
            if dry_run:
                session.rollback()
            else:
                session.commit()
    finally:
        engine.dispose()

    if report.results:
        table = Table("job", "field", "was", "now", title="results whose reading of the log moved")
        for move in report.results:
            table.add_row(str(move.job_id), move.field, str(move.old), str(move.new))
        console.print(table)
    if report.crashes:
        table = Table("job", "was", "now", "title", title="crashes that changed group")
        for move in report.crashes:
            table.add_row(str(move.job_id), move.old[:12], move.new[:12], move.title)
        console.print(table)
    for label, signatures in (("groups created", report.created), ("groups emptied", report.emptied)):
        if signatures:
            console.print(f"{label}: {', '.join(s[:12] for s in signatures)}")
    console.print(
        f"read {report.results_read} results and {report.crashes_read} crashes: {len(report.results)} result "
        f"fields and {len(report.crashes)} crashes moved" + ("; dry run, nothing written" if dry_run else ""),
        soft_wrap=True,
    )


def register(cli: typer.Typer) -> None:
    cli.command()(rederive)
