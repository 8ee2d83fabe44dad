"""folder ids: an imported sweep keeps the identity of the folder of cells it came from

``draftbench expand`` writes a random ``folder_id`` into ``folder.json`` beside ``sweep.json``, and ``export`` writes a
sweep's own. An import finds the sweep of a folder by it, so a folder imported before any of its cells ran (no run to
be known by) and again after they ran is one sweep, not two. One folder is one sweep: the index is unique. Sweeps
stored before keep NULL and are found by their runs, as before.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("sweeps") as batch_op:
        batch_op.add_column(sa.Column("folder_id", sa.String(length=32), nullable=True))
        batch_op.create_index("ix_sweeps_folder_id", ["folder_id"], unique=True)


def downgrade() -> None:
    with op.batch_alter_table("sweeps") as batch_op:
        batch_op.drop_index("ix_sweeps_folder_id")
        batch_op.drop_column("folder_id")
