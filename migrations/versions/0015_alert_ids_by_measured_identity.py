"""alert ids by measured identity: acknowledgements follow their alerts to the new ids

An alert's id hashes its metric, its cell and its first bad build. The cell was named by a digest of
its whole config but the matrix axes, rounds and window included; it is now named by its measured
identity (``app.cells.identity``), which leaves out how long a cell was measured. Each stored
acknowledgement is given the id its alert now has, so none is lost. Where two old cells became one
and both were acknowledged, the first keeps the new id and the other stays as it was.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-02
"""

import hashlib
import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.cells import identity

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

METRICS = ("tokens_per_s", "acceptance")
# The variant as 0014's code computed it: the config without these keys, digested.
_OLD_AXES = ("build", "gpu_kind", "backend", "graph_mode", "timeout_s")


def _old_variant(config: dict) -> str:
    rest = {k: v for k, v in config.items() if k not in _OLD_AXES}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _alert_id(metric: str, key: tuple[str, ...], build: str) -> str:
    return hashlib.sha256(repr((metric, *key, build)).encode()).hexdigest()[:16]


def upgrade() -> None:
    conn = op.get_bind()
    acks = sa.table("alert_acks", sa.column("id"), sa.column("alert_id"))
    stored = dict(conn.execute(sa.select(acks.c.alert_id, acks.c.id)).all())
    if not stored:
        return
    jobs = sa.table("jobs", sa.column("id"), sa.column("config_hash"), sa.column("config", sa.JSON))
    first = sa.select(sa.func.min(jobs.c.id)).group_by(jobs.c.config_hash)
    renamed: dict[str, str] = {}
    for (config,) in conn.execute(sa.select(jobs.c.config).where(jobs.c.id.in_(first))):
        axes = (config.get("gpu_kind"), config.get("backend"), config.get("graph_mode"))
        old, new = (*axes, _old_variant(config)), (*axes, identity.variant(config).measured)
        for metric in METRICS:
            was = _alert_id(metric, old, config.get("build"))
            if was in stored:
                renamed.setdefault(was, _alert_id(metric, new, config.get("build")))
    taken = set(stored)
    for was, now in renamed.items():
        if now != was and now not in taken:
            conn.execute(sa.update(acks).where(acks.c.id == stored[was]).values(alert_id=now))
            taken.add(now)


def downgrade() -> None:
    # The old ids cannot be told from the new ones once histories merged; acknowledgements keep theirs.
    pass
