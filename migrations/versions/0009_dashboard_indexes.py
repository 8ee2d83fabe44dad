"""Indexes the dashboards read by: jobs by build, and by method x backend x graph mode (a cell's history).

Revision ID: 0009
Revises: 0008
"""

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_jobs_build", "jobs", ["build"])
    op.create_index("ix_jobs_cell", "jobs", ["method", "backend", "graph_mode"])
    op.create_index("ix_sweeps_created_at", "sweeps", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_sweeps_created_at", table_name="sweeps")
    op.drop_index("ix_jobs_cell", table_name="jobs")
    op.drop_index("ix_jobs_build", table_name="jobs")
