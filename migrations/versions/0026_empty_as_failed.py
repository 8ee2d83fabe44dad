"""empty as failed: the serving starts whose runner (before cell schema 5) counted an empty stream as failed

Such a start left the tokens of streams that decoded to no text out of its tokens/s: it measured another quantity than
today's runner, so pages pool it as a cell of its own (``app.cells.identity.counted``). Filled here from what each row
stored: a serving result of the cell runner without ``serving.empty``.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-05
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("empty_as_failed", sa.Boolean(), server_default=sa.false(), nullable=False))
    results = sa.table("results", sa.column("id", sa.Integer), sa.column("serving", sa.JSON),
                       sa.column("source", sa.String), sa.column("empty_as_failed", sa.Boolean))
    bind = op.get_bind()
    # Serving rows only (a few per sweep): read in Python, as SQLite and PostgreSQL read a JSON null apart.
    rows = bind.execute(sa.select(results.c.id, results.c.serving).where(results.c.serving.is_not(None),
                                                                          results.c.source == "cell"))
    older = [row.id for row in rows if isinstance(row.serving, dict) and row.serving.get("empty") is None]
    for start in range(0, len(older), 1000):
        bind.execute(results.update().where(results.c.id.in_(older[start:start + 1000])).values(empty_as_failed=True))


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.drop_column("empty_as_failed")
