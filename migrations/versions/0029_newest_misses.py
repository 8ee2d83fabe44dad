"""newest misses: calibration misses read newest first from their index

Pages list calibration misses newest first by when each cell ended (``app.newest.RESULTS``: ``created_at``, then
``id``), not by id. The index on ``calibration_miss`` alone found the misses but left every one of them to be sorted
(about 25 ms over 11,000 misses); with the ordering's columns behind it, the newest are read off its end.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-05
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_results_calibration_miss", table_name="results")
    op.create_index("ix_results_calibration_miss", "results", ["calibration_miss", "created_at", "id"])


def downgrade() -> None:
    op.drop_index("ix_results_calibration_miss", table_name="results")
    op.create_index("ix_results_calibration_miss", "results", ["calibration_miss"])
