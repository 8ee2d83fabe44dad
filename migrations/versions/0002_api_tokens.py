"""api tokens with scopes; the token that submitted a sweep

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('api_tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('hash', sa.String(length=64), nullable=False),
    sa.Column('scopes', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('hash', name=op.f('uq_api_tokens_hash'))
    )
    # Batch mode: SQLite rebuilds the table to add a foreign key; PostgreSQL alters it in place.
    with op.batch_alter_table('sweeps') as batch_op:
        batch_op.add_column(sa.Column('created_by_token_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f('fk_sweeps_created_by_token_id_api_tokens'), 'api_tokens', ['created_by_token_id'], ['id'],
            ondelete='SET NULL',
        )


def downgrade() -> None:
    with op.batch_alter_table('sweeps') as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_sweeps_created_by_token_id_api_tokens'), type_='foreignkey')
        batch_op.drop_column('created_by_token_id')
    op.drop_table('api_tokens')
