"""interval levels: the confidence of each start's tokens/s interval, and the passes it was resampled from

A start's interval came from its rounds alone (order statistics, at the level their count allows: 93.75 % for 5).
From cell schema 6 it comes from the passes inside the rounds where they were kept (a block bootstrap, 95 %:
``app.analysis.passes``), so the level is no longer implied by ``rounds``: ``tokens_per_s_level`` stores it, and
``passes`` how many passes the interval resampled (NULL: the rounds' interval). Rows stored before get the level
their rounds' interval holds (``app.analysis.rounds.interval_rank``: one UPDATE per distinct count of rounds), as a
result stored now, or imported again from its folder, does.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.analysis.rounds import interval_rank

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("tokens_per_s_level", sa.Float(), nullable=True))
        batch.add_column(sa.Column("passes", sa.Integer(), nullable=True))
    conn = op.get_bind()
    with_interval = "tokens_per_s_low IS NOT NULL AND tokens_per_s_high IS NOT NULL"
    for (rounds,) in conn.execute(sa.text(f"SELECT DISTINCT rounds FROM results WHERE {with_interval}")).all():
        rank = interval_rank(rounds)
        if rank is not None:
            conn.execute(sa.text(f"UPDATE results SET tokens_per_s_level = :level WHERE rounds = :rounds AND {with_interval}"),
                         {"level": rank[1], "rounds": rounds})


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.drop_column("passes")
        batch.drop_column("tokens_per_s_level")
