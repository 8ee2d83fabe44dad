"""check differences: a stored alarm check keeps what decided it

A graphed cell not flagged was stored as ``within`` alone: within the interval of its eager sibling (the
difference's 95 % interval holds 0) or below the minimum effect (it excludes 0, by less than 2 points), which pages
could not tell apart. A check now keeps the difference of the measure nearest to raising the alarm (``kind``), its
interval and the minimum effect it was held to; its reason is read from them (``app.alarms.service.Check.reason``).

Filled here where the rows hold it: an alarmed check from its alarm (acceptance first, as the judgement picks). The
others kept no difference: they stay null, their reason unknown, until their build's next result or ``draftbench
rederive`` judges them again (the pages say so).

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The minimum effect every stored check was judged at (app.analysis.alarms.MIN_EFFECT when this was written).
_STORED_MIN_EFFECT = 0.02
# What names a cell in both tables.
_CELL = ("build", "gpu_kind", "backend", "graph_mode", "variant")
_DECIDED = ("difference", "difference_low", "difference_high")

_CHECKS = sa.table("alarm_checks", sa.column("outcome", sa.String), sa.column("kind", sa.String),
                   sa.column("min_effect", sa.Float), *(sa.column(name, sa.String) for name in _CELL),
                   *(sa.column(name, sa.Float) for name in _DECIDED))
_ALARMS = sa.table("alarms", sa.column("id", sa.Integer), sa.column("kind", sa.String),
                   *(sa.column(name, sa.String) for name in _CELL), *(sa.column(name, sa.Float) for name in _DECIDED))


def upgrade() -> None:
    with op.batch_alter_table("alarm_checks") as batch:
        batch.add_column(sa.Column("kind", sa.Enum("acceptance", "lossless", name="alarmkind", native_enum=False, length=32),
                                   nullable=True))
        for name in (*_DECIDED, "min_effect"):
            batch.add_column(sa.Column(name, sa.Float(), nullable=True))
    bind = op.get_bind()
    # A cell with both kinds of alarm keeps its acceptance's: sorted last, it is the one the dict keeps.
    rows = sorted(bind.execute(sa.select(_ALARMS)).all(), key=lambda row: row.kind == "acceptance")
    decided = {tuple(getattr(row, name) for name in _CELL): row for row in rows}
    for cell, row in decided.items():
        bind.execute(_CHECKS.update()
                     .where(_CHECKS.c.outcome == "alarm", *(_CHECKS.c[name] == value for name, value in zip(_CELL, cell, strict=True)))
                     .values(kind=row.kind, min_effect=_STORED_MIN_EFFECT, **{name: getattr(row, name) for name in _DECIDED}))


def downgrade() -> None:
    with op.batch_alter_table("alarm_checks") as batch:
        for name in ("kind", *_DECIDED, "min_effect"):
            batch.drop_column(name)
