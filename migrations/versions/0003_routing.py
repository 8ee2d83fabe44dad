"""routing: GPUs a job needs on one host; indexes for the claim's fairness between sweeps

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        # Jobs queued before this revision were single-GPU (or CPU) cells: 1 lets any GPU worker take them.
        batch_op.add_column(sa.Column('gpus_needed', sa.Integer(), server_default='1', nullable=False))
        batch_op.create_index('ix_jobs_sweep_state', ['sweep_id', 'state'], unique=False)
        batch_op.create_index('ix_jobs_sweep_started', ['sweep_id', 'started_at'], unique=False)
    # CPU-engine cells need no GPU.
    op.execute("UPDATE jobs SET gpus_needed = 0 WHERE gpu_kind = 'cpu'")


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_sweep_started')
        batch_op.drop_index('ix_jobs_sweep_state')
        batch_op.drop_column('gpus_needed')
