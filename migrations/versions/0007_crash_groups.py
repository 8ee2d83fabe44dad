"""crash groups: a title per group; merges and splits made by hand, kept across rederive

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0007'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('crash_signatures', schema=None) as batch_op:
        batch_op.add_column(sa.Column('title', sa.String(length=300), server_default='', nullable=False))
    op.create_table('crash_overrides',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('action', sa.String(length=16), nullable=False),
    sa.Column('signature', sa.String(length=64), nullable=False),
    sa.Column('into', sa.String(length=64), nullable=False),
    sa.Column('job_ids', sa.JSON(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_crash_overrides'))
    )
    with op.batch_alter_table('crash_overrides', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_crash_overrides_signature'), ['signature'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('crash_overrides', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_crash_overrides_signature'))
    op.drop_table('crash_overrides')
    with op.batch_alter_table('crash_signatures', schema=None) as batch_op:
        batch_op.drop_column('title')
