"""Each crash keeps its log excerpt, so the crash pages never decompress a log (up to 32 MiB each).

Existing crashes get theirs from their stored logs, one log at a time, around the group's exception
as the page chose it before.

Revision ID: 0013
Revises: 0012
"""

import zlib

import sqlalchemy as sa
from alembic import op

from app.crashes.excerpt import excerpt

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("crashes", sa.Column("excerpt", sa.Text(), nullable=True))
    conn = op.get_bind()
    crashes = sa.table("crashes", sa.column("id"), sa.column("job_id"), sa.column("signature_id"), sa.column("excerpt"))
    groups = sa.table("crash_signatures", sa.column("id"), sa.column("exception_type"), sa.column("message"))
    logs = sa.table("job_logs", sa.column("job_id"), sa.column("compressed"))
    rows = conn.execute(
        sa.select(crashes.c.id, crashes.c.job_id, groups.c.exception_type, groups.c.message)
        .join(groups, groups.c.id == crashes.c.signature_id)
        .where(crashes.c.job_id.in_(sa.select(logs.c.job_id)))
    ).all()
    for crash_id, job_id, exception_type, message in rows:
        compressed = conn.scalar(sa.select(logs.c.compressed).where(logs.c.job_id == job_id))
        log = zlib.decompress(compressed).decode(errors="replace")
        shown = excerpt(log, exception_type or (message or "")[:40]) if log else None
        conn.execute(sa.update(crashes).where(crashes.c.id == crash_id).values(excerpt=shown or None))


def downgrade() -> None:
    with op.batch_alter_table("crashes") as batch:
        batch.drop_column("excerpt")
