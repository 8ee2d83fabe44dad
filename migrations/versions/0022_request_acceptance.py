"""request acceptance: each result's per-category request sums and its histogram of per-request acceptance

Cells of schema 7 report each request's prompt category and spec-decode counters. ``request_acceptance`` keeps
what the pages read of them, compact (``app.analysis.request_acceptance.RequestAcceptance``): per category the
counts and the sums of squares behind a cluster interval, and a fixed histogram of per-request rates, so no page
reads a row per request. Rows stored before have no per-request draft tokens to sum: they stay NULL, "not
recorded", never zeros.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("request_acceptance", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.drop_column("request_acceptance")
