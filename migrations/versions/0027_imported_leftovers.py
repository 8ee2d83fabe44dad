"""imported leftovers: the jobs an imported sweep never ran get no attempt on this service

An imported sweep ran elsewhere; the cells it never ran import as queued, to be seen, and read "finished" on its
page, but a worker of this service claimed them (only ``attempts < max_attempts`` stood in its way). They now import
with ``max_attempts`` 0, and those already imported are set so here.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


_JOBS = sa.table("jobs", sa.column("sweep_id", sa.Integer), sa.column("state", sa.String),
                 sa.column("max_attempts", sa.Integer))
_SWEEPS = sa.table("sweeps", sa.column("id", sa.Integer), sa.column("idempotency_scope", sa.String))
_LEFT = (_JOBS.c.state == "queued",
         _JOBS.c.sweep_id.in_(sa.select(_SWEEPS.c.id).where(_SWEEPS.c.idempotency_scope == "import")))


def upgrade() -> None:
    op.execute(_JOBS.update().where(*_LEFT).values(max_attempts=0))


def downgrade() -> None:
    op.execute(_JOBS.update().where(*_LEFT, _JOBS.c.max_attempts == 0).values(max_attempts=1))
