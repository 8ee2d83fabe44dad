"""energy: each result's joules over its measured rounds and tokens per joule with its interval

Cell schema 8 reads the GPUs' energy counters (NVML) around each measured round. A result keeps the joules, the
median over rounds of tokens / joules with the rounds' order-statistic interval (``app.analysis.energy``), and why
there are none where the GPU did not report them. Rows stored before read no energy: every new column stays NULL.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("energy_j", sa.Float(), nullable=True))
        batch.add_column(sa.Column("tokens_per_joule", sa.Float(), nullable=True))
        batch.add_column(sa.Column("tokens_per_joule_low", sa.Float(), nullable=True))
        batch.add_column(sa.Column("tokens_per_joule_high", sa.Float(), nullable=True))
        batch.add_column(sa.Column("energy_reason", sa.String(length=300), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        for name in ("energy_reason", "tokens_per_joule_high", "tokens_per_joule_low", "tokens_per_joule", "energy_j"):
            batch.drop_column(name)
