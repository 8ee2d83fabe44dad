"""stored alarms: the graph-capture alarm's judgement of every build and GPU kind, and calibration misses by index

Pages showed the alarms of the builds of the 10 newest sweeps only: judging every build meant reading every
result (3 s at 100k results). The judgement is now stored, one row per graphed cell looked at
(``alarm_checks``: alarm, within its interval, cannot show a bug, no eager sibling) and one per alarm
(``alarms``), rewritten for a build and GPU kind whenever one of their jobs stores a result
(``app.alarms.service.refresh``). Here every stored build is judged once. ``results.calibration_miss`` gets
an index: pages count and list the misses over every result.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.orm import Session

from app import db

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _kind(name: str, *values: str) -> sa.Enum:
    return sa.Enum(*values, name=name, native_enum=False, length=32)


def upgrade() -> None:
    op.create_table(
        "alarm_checks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("build", sa.String(length=128), nullable=False),
        sa.Column("gpu_kind", sa.String(length=32), nullable=False),
        sa.Column("backend", sa.String(length=32), nullable=False),
        sa.Column("graph_mode", sa.String(length=32), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("variant", sa.String(length=32), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("outcome", _kind("checkoutcome", "alarm", "within", "cannot_show", "unpaired"), nullable=False),
        sa.Column("sweep_ids", sa.JSON(), nullable=False),
        sa.Column("sweep_names", sa.JSON(), nullable=False),
        sa.Column("vllm_versions", sa.JSON(), nullable=False),
        sa.Column("gpu_names", sa.JSON(), nullable=False),
        sa.Column("ran_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alarm_checks")),
    )
    op.create_index("ix_alarm_checks_build", "alarm_checks", ["build", "gpu_kind"])
    sides = [
        sa.Column(f"{prefix}{name}", kind, nullable=False)
        for prefix in ("", "eager_")
        for name, kind in (("resolved_graph_modes", sa.JSON()), ("successes", sa.BigInteger()), ("trials", sa.BigInteger()),
                           ("draft_tokens", sa.BigInteger()), ("job_ids", sa.JSON()), ("sweep_ids", sa.JSON()))
    ]
    op.create_table(
        "alarms",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", _kind("alarmkind", "acceptance", "lossless"), nullable=False),
        sa.Column("build", sa.String(length=128), nullable=False),
        sa.Column("gpu_kind", sa.String(length=32), nullable=False),
        sa.Column("method", sa.String(length=32), nullable=False),
        sa.Column("variant", sa.String(length=32), nullable=False),
        sa.Column("label", sa.Text(), nullable=False),
        sa.Column("backend", sa.String(length=32), nullable=False),
        sa.Column("graph_mode", sa.String(length=32), nullable=False),
        sa.Column("eager_backend", sa.String(length=32), nullable=False),
        *sides,
        sa.Column("difference", sa.Float(), nullable=False),
        sa.Column("difference_low", sa.Float(), nullable=False),
        sa.Column("difference_high", sa.Float(), nullable=False),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_alarms")),
    )
    op.create_index("ix_alarms_build", "alarms", ["build", "gpu_kind"])
    op.create_index("ix_results_calibration_miss", "results", ["calibration_miss"])
    # The judgement reads results with today's code (as 0015 reads configs), so it runs on today's schema, once the
    # newest revision has; an empty database has none to read.
    if op.get_bind().scalar(sa.text("SELECT count(*) FROM results")):
        db.when_current(context.config, _judge)


def _judge(conn) -> None:
    from app.alarms import service as alarms

    with Session(bind=conn) as session:
        alarms.refresh_all(session=session)
        session.flush()


def downgrade() -> None:
    op.drop_index("ix_results_calibration_miss", table_name="results")
    op.drop_index("ix_alarms_build", table_name="alarms")
    op.drop_table("alarms")
    op.drop_index("ix_alarm_checks_build", table_name="alarm_checks")
    op.drop_table("alarm_checks")
