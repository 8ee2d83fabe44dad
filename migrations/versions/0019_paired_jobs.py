"""paired jobs: a base job and a head job of one cell and repeat run back to back on one worker

``pair_id`` names the pair (the same on both jobs), ``pair_order`` which of the two runs first (0). The claim
(app.jobs.queue) reads a candidate's partner through ``ix_jobs_pair``. Jobs stored before are not paired.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("pair_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("pair_order", sa.Integer(), nullable=True))
        batch_op.create_index("ix_jobs_pair", ["pair_id"])


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_index("ix_jobs_pair")
        batch_op.drop_column("pair_order")
        batch_op.drop_column("pair_id")
