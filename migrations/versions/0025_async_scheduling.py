"""async scheduling: whether vLLM's log said it turned asynchronous scheduling off for the result's cell

vLLM 0.26 turns it off for draft-model speculation ("Async scheduling not supported with draft_model-based speculative
decoding and will be disabled."), so a draft cell ran with a scheduler its baseline did not have. Rows stored before
keep NULL (not read) until `draftbench rederive` reads their stored logs again.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("async_scheduling_off", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.drop_column("async_scheduling_off")
