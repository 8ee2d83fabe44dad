"""names and liveness: jobs.build (was build_label), sweeps.build, stalled jobs found from worker heartbeats

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_claim')
        batch_op.drop_index('ix_jobs_lease')
        batch_op.alter_column('build_label', new_column_name='build', existing_type=sa.String(length=128), existing_nullable=False)
        # A job's lease is its worker's heartbeat now (app.workers.liveness): no clock of its own.
        batch_op.drop_column('lease_expires_at')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_claim', ['state', 'gpu_kind', 'build', 'priority', 'id'], unique=False)
        batch_op.create_index('ix_jobs_state_worker', ['state', 'worker_id'], unique=False)

    with op.batch_alter_table('sweeps', schema=None) as batch_op:
        batch_op.add_column(sa.Column('build', sa.String(length=128), nullable=True))
    sweeps = sa.table('sweeps', sa.column('id', sa.Integer), sa.column('spec', sa.JSON), sa.column('build', sa.String))
    connection = op.get_bind()
    for sweep_id, spec in connection.execute(sa.select(sweeps.c.id, sweeps.c.spec)).all():
        spec = json.loads(spec) if isinstance(spec, str) else spec
        connection.execute(sweeps.update().where(sweeps.c.id == sweep_id).values(build=spec['build']))
    with op.batch_alter_table('sweeps', schema=None) as batch_op:
        batch_op.alter_column('build', existing_type=sa.String(length=128), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table('sweeps', schema=None) as batch_op:
        batch_op.drop_column('build')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_state_worker')
        batch_op.drop_index('ix_jobs_claim')
        batch_op.add_column(sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.alter_column('build', new_column_name='build_label', existing_type=sa.String(length=128), existing_nullable=False)
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_claim', ['state', 'gpu_kind', 'build_label', 'priority', 'id'], unique=False)
        batch_op.create_index('ix_jobs_lease', ['state', 'lease_expires_at'], unique=False)
