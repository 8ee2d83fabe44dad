"""jobs by state, build and when they finished: a build's newest succeeded job found in the index

A comparison weighs each head cell against the last builds that ran on its GPU kinds, ordered by their newest
succeeded job: that read grouped every succeeded job (a scan at 100k results). With this index each build's newest
job, of the GPU kinds asked (read from the index too), is one lookup.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_jobs_build_finished", "jobs", ["state", "build", "finished_at", "gpu_kind"])


def downgrade() -> None:
    op.drop_index("ix_jobs_build_finished", table_name="jobs")
