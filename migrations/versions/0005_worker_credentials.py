"""worker credentials and scoped idempotency: a worker row is bound to its own token; keys belong to their sender

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.add_column(sa.Column('token_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f('fk_workers_token_id_api_tokens'), 'api_tokens', ['token_id'], ['id'], ondelete='SET NULL'
        )
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.add_column(sa.Column('worker_id', sa.Integer(), nullable=True))
        batch_op.create_unique_constraint(batch_op.f('uq_api_tokens_worker_id'), ['worker_id'])
        batch_op.create_foreign_key(
            batch_op.f('fk_api_tokens_worker_id_workers'), 'workers', ['worker_id'], ['id'], ondelete='CASCADE'
        )
    with op.batch_alter_table('sweeps', schema=None) as batch_op:
        batch_op.drop_constraint('uq_sweeps_idempotency_key', type_='unique')
        batch_op.add_column(sa.Column('idempotency_scope', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('request_hash', sa.String(length=64), nullable=True))
        batch_op.create_unique_constraint(
            batch_op.f('uq_sweeps_idempotency_scope'), ['idempotency_scope', 'idempotency_key']
        )
    # Keys sent before this revision were global: keep them answering as they did, under one scope.
    op.execute("UPDATE sweeps SET idempotency_scope = 'legacy' WHERE idempotency_key IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table('sweeps', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('uq_sweeps_idempotency_scope'), type_='unique')
        batch_op.drop_column('request_hash')
        batch_op.drop_column('idempotency_scope')
        batch_op.create_unique_constraint('uq_sweeps_idempotency_key', ['idempotency_key'])
    with op.batch_alter_table('api_tokens', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_api_tokens_worker_id_workers'), type_='foreignkey')
        batch_op.drop_constraint(batch_op.f('uq_api_tokens_worker_id'), type_='unique')
        batch_op.drop_column('worker_id')
    with op.batch_alter_table('workers', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_workers_token_id_api_tokens'), type_='foreignkey')
        batch_op.drop_column('token_id')
