"""rounds and serving: per-cell intervals, efficiency, model runner, serving metrics, calibration, env and mode axes

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('mode', sa.String(length=16), server_default='offline', nullable=False))
        batch_op.add_column(sa.Column('concurrency', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('env', sa.JSON(), server_default='{}', nullable=False))
    with op.batch_alter_table('results', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tokens_per_s_low', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('tokens_per_s_high', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('rounds', sa.Integer(), server_default='1', nullable=False))
        batch_op.add_column(sa.Column('measured_s', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('efficiency', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('model_runner', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('serving', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('expected_per_position', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('calibration_miss', sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column('source', sa.String(length=32), server_default='cell', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('results', schema=None) as batch_op:
        for column in ('source', 'calibration_miss', 'expected_per_position', 'serving', 'model_runner', 'efficiency',
                       'measured_s', 'rounds', 'tokens_per_s_high', 'tokens_per_s_low'):
            batch_op.drop_column(column)
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('env')
        batch_op.drop_column('concurrency')
        batch_op.drop_column('mode')
