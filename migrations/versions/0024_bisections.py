"""bisections: ``draftbench bisect``'s series of builds and the steps it ran, for the history page

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "bisections",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("series", sa.JSON(), nullable=False),
        sa.Column("good", sa.String(length=128), nullable=False),
        sa.Column("bad", sa.String(length=128), nullable=False),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bisections")),
    )
    op.create_table(
        "bisection_steps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("bisection_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("build", sa.String(length=128), nullable=False),
        sa.Column("sweep_id", sa.Integer(), nullable=False),
        sa.Column("against_sweep_id", sa.Integer(), nullable=False),
        sa.Column("call", sa.Enum("bad", "good", "undecided", name="stepcall", native_enum=False, create_constraint=False,
                                  length=32), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["bisection_id"], ["bisections.id"], name=op.f("fk_bisection_steps_bisection_id_bisections"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["sweep_id"], ["sweeps.id"], name=op.f("fk_bisection_steps_sweep_id_sweeps")),
        sa.ForeignKeyConstraint(["against_sweep_id"], ["sweeps.id"], name=op.f("fk_bisection_steps_against_sweep_id_sweeps")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bisection_steps")),
    )
    op.create_index(op.f("ix_bisection_steps_bisection_id"), "bisection_steps", ["bisection_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_bisection_steps_bisection_id"), table_name="bisection_steps")
    op.drop_table("bisection_steps")
    op.drop_table("bisections")
