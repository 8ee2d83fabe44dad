"""alert snapshots: the open regressions last found, stored, so a process's first page need not find them again

The overview page showed the alerts its process last found; a fresh process found them on its first view, reading
every cell of every build (6.6-10.6 s at 100k results). ``alert_snapshots`` keeps the last answer under the key
it was found for (``app.alerts.service.store``); here it is found once for a database that has results.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.orm import Session

from app import db

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "alert_snapshots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("finished_jobs", sa.BigInteger(), nullable=False),
        sa.Column("newest_finish", sa.DateTime(timezone=True), nullable=True),
        sa.Column("alerts", sa.JSON(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alert_snapshots")),
    )
    # Found with today's code (as 0016 judges alarms), so on today's schema, once the newest revision has run; an
    # empty database has nothing to find.
    if op.get_bind().scalar(sa.text("SELECT count(*) FROM results")):
        db.when_current(context.config, _find)


def _find(conn) -> None:
    from app.alerts import service as alerts

    with Session(bind=conn) as session:
        alerts.store(session=session)
        session.flush()


def downgrade() -> None:
    op.drop_table("alert_snapshots")
