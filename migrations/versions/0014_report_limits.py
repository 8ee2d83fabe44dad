"""report limits: 64-bit counts and fingerprints as long as the cell schema allows

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNTS = ("num_requests", "output_tokens", "num_drafts", "num_draft_tokens", "num_accepted_tokens")


def upgrade() -> None:
    with op.batch_alter_table("results") as batch:
        for name in COUNTS:
            batch.alter_column(name, existing_type=sa.Integer(), type_=sa.BigInteger(), existing_nullable=False)
        batch.alter_column("output_fingerprint", existing_type=sa.String(64), type_=sa.String(128), existing_nullable=False)


def downgrade() -> None:
    # Fingerprints of 65-128 characters lose their end, as the old column would have refused them.
    op.execute("UPDATE results SET output_fingerprint = substr(output_fingerprint, 1, 64)")
    with op.batch_alter_table("results") as batch:
        batch.alter_column("output_fingerprint", existing_type=sa.String(128), type_=sa.String(64), existing_nullable=False)
        for name in COUNTS:
            batch.alter_column(name, existing_type=sa.BigInteger(), type_=sa.Integer(), existing_nullable=False)
