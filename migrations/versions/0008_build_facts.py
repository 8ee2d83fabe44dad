"""build facts: how a build was made (kind, base, patch sha256, wheel or pip source, commit)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('builds', schema=None) as batch_op:
        batch_op.add_column(sa.Column('kind', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('base', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('patch_sha256', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('source', sa.String(length=1024), nullable=True))
        batch_op.add_column(sa.Column('commit', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('builds', schema=None) as batch_op:
        for column in ('commit', 'source', 'patch_sha256', 'base', 'kind'):
            batch_op.drop_column(column)
