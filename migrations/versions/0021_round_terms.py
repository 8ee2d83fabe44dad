"""round terms: each result's share of the spread within starts, kept with it

``/noise`` (``app.noise.service``) pools the spread of ln tokens/s between the rounds of every start. It read
every result's rounds from ``raw`` to get it: seconds at 100k results for a fresh process's first view.
``round_speeds`` keeps how many rounds measured a speed and ``round_squares`` their squared deviations from their
mean (``app.noise.service.round_terms``), so the page sums two columns. Rows stored before get them from their
stored rounds, as a result stored now, or imported again from its folder, does (in batches: ``raw`` is
a result's whole JSON).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.noise.service import round_terms

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 2000


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.add_column(sa.Column("round_speeds", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("round_squares", sa.Float(), nullable=True))
    conn = op.get_bind()
    results = sa.table("results", sa.column("id", sa.Integer), sa.column("raw", sa.JSON),
                       sa.column("round_speeds", sa.Integer), sa.column("round_squares", sa.Float))
    update = (results.update().where(results.c.id == sa.bindparam("row_id"))
              .values(round_speeds=sa.bindparam("speeds"), round_squares=sa.bindparam("squares")))
    last = 0
    while True:
        rows = conn.execute(sa.select(results.c.id, results.c.raw).where(results.c.id > last)
                            .order_by(results.c.id).limit(BATCH)).all()
        if not rows:
            break
        terms = [(row.id, round_terms((row.raw or {}).get("rounds"))) for row in rows]
        conn.execute(update, [{"row_id": i, "speeds": n, "squares": squares} for i, (n, squares) in terms])
        last = rows[-1].id


def downgrade() -> None:
    with op.batch_alter_table("results") as batch:
        batch.drop_column("round_squares")
        batch.drop_column("round_speeds")
