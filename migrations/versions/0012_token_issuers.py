"""token issuers: every token names the token that issued it, and dies with it

A worker's credential kept its registrar on the worker row (workers.token_id), one level deep: a
credential registered with another credential outlived the host's token. The issuer now sits on
the token itself (api_tokens.issued_by_id) and authentication checks the whole chain.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("issued_by_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            batch.f("fk_api_tokens_issued_by_id_api_tokens"), "api_tokens", ["issued_by_id"], ["id"], ondelete="CASCADE"
        )
    # A credential was issued by the token that registered its worker: credentials that registered
    # workers before this revision become those workers' credentials' issuers, so they die together.
    op.execute(
        "UPDATE api_tokens SET issued_by_id = "
        "(SELECT workers.token_id FROM workers WHERE workers.id = api_tokens.worker_id) "
        "WHERE worker_id IS NOT NULL"
    )
    with op.batch_alter_table("workers") as batch:
        batch.drop_constraint("fk_workers_token_id_api_tokens", type_="foreignkey")
        batch.drop_column("token_id")


def downgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("token_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            batch.f("fk_workers_token_id_api_tokens"), "api_tokens", ["token_id"], ["id"], ondelete="SET NULL"
        )
    op.execute(
        "UPDATE workers SET token_id = "
        "(SELECT api_tokens.issued_by_id FROM api_tokens WHERE api_tokens.worker_id = workers.id)"
    )
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_constraint(batch.f("fk_api_tokens_issued_by_id_api_tokens"), type_="foreignkey")
        batch.drop_column("issued_by_id")
