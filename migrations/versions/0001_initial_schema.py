"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('builds',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('label', sa.String(length=128), nullable=False),
    sa.Column('vllm_version', sa.String(length=64), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_builds')),
    sa.UniqueConstraint('label', name=op.f('uq_builds_label'))
    )
    op.create_table('crash_signatures',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('signature', sa.String(length=64), nullable=False),
    sa.Column('kind', sa.Enum('cuda_illegal_memory_access', 'cuda_device_assert', 'out_of_memory', 'cuda_error', 'timeout', 'signal', 'engine_dead', 'exception', 'exit', name='crashkind', native_enum=False, length=32), nullable=False),
    sa.Column('exception_type', sa.String(length=255), nullable=True),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('frames', sa.JSON(), nullable=False),
    sa.Column('first_seen', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen', sa.DateTime(timezone=True), nullable=False),
    sa.Column('count', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_crash_signatures')),
    sa.UniqueConstraint('signature', name=op.f('uq_crash_signatures_signature'))
    )
    op.create_table('sweeps',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('spec', sa.JSON(), nullable=False),
    sa.Column('priority', sa.Integer(), nullable=False),
    sa.Column('pull_request', sa.Integer(), nullable=True),
    sa.Column('branch', sa.String(length=255), nullable=True),
    sa.Column('commit', sa.String(length=64), nullable=True),
    sa.Column('tags', sa.JSON(), nullable=False),
    sa.Column('submitted_by', sa.String(length=200), nullable=True),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('idempotency_key', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('cancelled_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sweeps')),
    sa.UniqueConstraint('idempotency_key', name=op.f('uq_sweeps_idempotency_key'))
    )
    op.create_table('workers',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('gpu_kinds', sa.JSON(), nullable=False),
    sa.Column('gpu_count', sa.Integer(), nullable=False),
    sa.Column('builds', sa.JSON(), nullable=False),
    sa.Column('registered_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_heartbeat_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_workers'))
    )
    op.create_table('jobs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('sweep_id', sa.Integer(), nullable=False),
    sa.Column('cell_index', sa.Integer(), nullable=False),
    sa.Column('repeat', sa.Integer(), nullable=False),
    sa.Column('build_label', sa.String(length=128), nullable=False),
    sa.Column('gpu_kind', sa.String(length=32), nullable=False),
    sa.Column('backend', sa.String(length=32), nullable=False),
    sa.Column('graph_mode', sa.String(length=32), nullable=False),
    sa.Column('method', sa.String(length=32), nullable=True),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('config_hash', sa.String(length=64), nullable=False),
    sa.Column('state', sa.Enum('queued', 'running', 'succeeded', 'crashed', 'timed_out', 'failed', 'cancelled', name='jobstate', native_enum=False, length=32), nullable=False),
    sa.Column('priority', sa.Integer(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('max_attempts', sa.Integer(), nullable=False),
    sa.Column('worker_id', sa.Integer(), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['sweep_id'], ['sweeps.id'], name=op.f('fk_jobs_sweep_id_sweeps'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['worker_id'], ['workers.id'], name=op.f('fk_jobs_worker_id_workers'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs'))
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_claim', ['state', 'gpu_kind', 'build_label', 'priority', 'id'], unique=False)
        batch_op.create_index(batch_op.f('ix_jobs_config_hash'), ['config_hash'], unique=False)
        batch_op.create_index('ix_jobs_lease', ['state', 'lease_expires_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_jobs_sweep_id'), ['sweep_id'], unique=False)

    op.create_table('crashes',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('signature_id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.Enum('cuda_illegal_memory_access', 'cuda_device_assert', 'out_of_memory', 'cuda_error', 'timeout', 'signal', 'engine_dead', 'exception', 'exit', name='crashkind', native_enum=False, length=32), nullable=False),
    sa.Column('exit_code', sa.Integer(), nullable=True),
    sa.Column('signal', sa.Integer(), nullable=True),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('duration_s', sa.Float(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_crashes_job_id_jobs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['signature_id'], ['crash_signatures.id'], name=op.f('fk_crashes_signature_id_crash_signatures')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_crashes')),
    sa.UniqueConstraint('job_id', name=op.f('uq_crashes_job_id'))
    )
    with op.batch_alter_table('crashes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_crashes_signature_id'), ['signature_id'], unique=False)

    op.create_table('job_logs',
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('compressed', sa.LargeBinary(), nullable=False),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_job_logs_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('job_id', name=op.f('pk_job_logs'))
    )
    op.create_table('results',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('engine_start_s', sa.Float(), nullable=False),
    sa.Column('generation_s', sa.Float(), nullable=False),
    sa.Column('num_requests', sa.Integer(), nullable=False),
    sa.Column('output_tokens', sa.Integer(), nullable=False),
    sa.Column('tokens_per_s', sa.Float(), nullable=False),
    sa.Column('requests_per_s', sa.Float(), nullable=False),
    sa.Column('num_drafts', sa.Integer(), nullable=False),
    sa.Column('num_draft_tokens', sa.Integer(), nullable=False),
    sa.Column('num_accepted_tokens', sa.Integer(), nullable=False),
    sa.Column('accepted_per_position', sa.JSON(), nullable=False),
    sa.Column('acceptance_rate', sa.Float(), nullable=True),
    sa.Column('acceptance_rate_low', sa.Float(), nullable=True),
    sa.Column('acceptance_rate_high', sa.Float(), nullable=True),
    sa.Column('mean_acceptance_length', sa.Float(), nullable=True),
    sa.Column('mean_acceptance_length_low', sa.Float(), nullable=True),
    sa.Column('mean_acceptance_length_high', sa.Float(), nullable=True),
    sa.Column('output_fingerprint', sa.String(length=64), nullable=False),
    sa.Column('resolved_backend', sa.String(length=64), nullable=True),
    sa.Column('resolved_draft_backend', sa.String(length=64), nullable=True),
    sa.Column('resolved_graph_mode', sa.String(length=32), nullable=True),
    sa.Column('resolved_draft_graph_mode', sa.String(length=32), nullable=True),
    sa.Column('graph_downgraded', sa.Boolean(), nullable=False),
    sa.Column('draft_eager', sa.Boolean(), nullable=False),
    sa.Column('vllm_version', sa.String(length=64), nullable=True),
    sa.Column('gpu_name', sa.String(length=128), nullable=True),
    sa.Column('versions', sa.JSON(), nullable=False),
    sa.Column('raw', sa.JSON(), nullable=False),
    sa.Column('ran', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], name=op.f('fk_results_job_id_jobs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_results')),
    sa.UniqueConstraint('job_id', name=op.f('uq_results_job_id'))
    )


def downgrade() -> None:
    op.drop_table('results')
    op.drop_table('job_logs')
    with op.batch_alter_table('crashes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_crashes_signature_id'))

    op.drop_table('crashes')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_jobs_sweep_id'))
        batch_op.drop_index('ix_jobs_lease')
        batch_op.drop_index(batch_op.f('ix_jobs_config_hash'))
        batch_op.drop_index('ix_jobs_claim')

    op.drop_table('jobs')
    op.drop_table('workers')
    op.drop_table('sweeps')
    op.drop_table('crash_signatures')
    op.drop_table('builds')
