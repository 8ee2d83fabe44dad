"""Migrations on both databases: up from empty, down to base, and in step with the models."""

import json
import multiprocessing
import shutil
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.orm import Session

from app import db
from app.analysis.noise import log_values, pooled_spread
from app.models import Base
from app.noise import service as noise
from tests.dashboards.h200 import SWEEPS, imported_folder


def _engine(url: str):
    return create_engine(url)


def test_upgrade_from_empty_then_downgrade_to_base(db_url: str) -> None:
    db.upgrade(db_url)
    engine = _engine(db_url)
    assert set(Base.metadata.tables) <= set(inspect(engine).get_table_names())
    command.downgrade(db.alembic_config(db_url), "base")
    assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
    engine.dispose()


def test_models_match_the_migrations(db_url: str) -> None:
    db.upgrade(db_url)
    engine = _engine(db_url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    engine.dispose()
    assert diff == []


def test_service_refuses_a_database_behind_the_code(db_url: str) -> None:
    db.upgrade(db_url)
    command.downgrade(db.alembic_config(db_url), "base")
    engine = db.make_engine(db_url)
    with pytest.raises(db.SchemaError, match="draftbench migrate"):
        db.check_current(engine)
    engine.dispose()


def test_processes_starting_together_migrate_once(db_url: str) -> None:
    # `uvicorn --workers N` starts N apps at once, each migrating on start: none may fail.
    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        outcomes = pool.map(_upgrade_or_error, [db_url] * 4)
    assert outcomes == [None] * 4
    engine = db.make_engine(db_url)
    db.check_current(engine)
    engine.dispose()


def _upgrade_or_error(url: str) -> str | None:
    try:
        db.upgrade(url)
    except db.SchemaError as exc:
        return str(exc)
    return None


def test_migration_files_sort_in_the_order_they_apply() -> None:
    scripts = ScriptDirectory.from_config(db.alembic_config("sqlite://"))
    applied = list(reversed(list(scripts.walk_revisions("base", "heads"))))
    names = [Path(rev.path).name for rev in applied]
    assert names == sorted(names)
    assert all(name.startswith(f"{rev.revision}_") for name, rev in zip(names, applied, strict=True))


def test_a_database_of_results_from_an_old_revision_finds_its_alarms_and_alerts_on_todays_schema(tmp_path: Path) -> None:
    """0016 judges the alarms and 0018 finds the alerts with today's code, which reads columns later revisions add
    (0020's tokens_per_s_level): run at their own revisions, they failed on a database of results."""
    url = f"sqlite:///{tmp_path / 'noise.sqlite'}"
    shutil.copy(Path(__file__).parent / "data" / "h200-proof-2026-12-01" / "noise.sqlite", tmp_path / "noise.sqlite")
    engine = _engine(url)
    with engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == "0014"
    db.upgrade(url)
    with engine.connect() as conn:
        assert conn.scalar(text("SELECT count(*) FROM alarm_checks")) > 0
        assert conn.scalar(text("SELECT count(*) FROM alert_snapshots")) == 1
        assert "tokens_per_s_level" in {column["name"] for column in inspect(conn).get_columns("results")}
    engine.dispose()


def test_results_stored_before_0021_get_the_round_terms_their_rounds_give(tmp_path: Path) -> None:
    """0021 keeps each start's share of the spread within starts with its result, from its stored rounds, so the
    noise model reads the same within-start spread from the columns as from every result's rounds."""
    url = f"sqlite:///{tmp_path / 'noise.sqlite'}"
    shutil.copy(Path(__file__).parent / "data" / "h200-proof-2026-12-01" / "noise.sqlite", tmp_path / "noise.sqlite")
    db.upgrade(url)
    engine = _engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT raw, round_speeds, round_squares FROM results ORDER BY job_id")).all()
    assert rows and all(speeds == 5 for _, speeds, _ in rows)
    assert [noise.round_terms(json.loads(raw).get("rounds")) for raw, _, _ in rows] == [(n, s) for _, n, s in rows]
    with Session(engine) as session:
        found = noise.read(session=session)
    assert found and all(c.within is not None for c in found)
    # The spread within starts as the model read it before 0021: from each start's rounds.
    every = [log_values(noise.round_speeds(json.loads(raw).get("rounds"))) for raw, _, _ in rows]
    assert sum(c.within.values for c in found) == sum(len(r) for r in every)
    assert pooled_spread(every).df == sum(c.within.df for c in found)
    engine.dispose()


def test_serving_results_of_the_runner_before_cell_schema_5_are_marked_as_counting_empty_streams_failed(tmp_path: Path) -> None:
    """0026 marks the serving starts whose runner left empty streams' tokens out (``batch3``: the 8B shape served on
    the H200 by the schema-4 runner), from what each row stored; offline rows stay unmarked."""
    url = f"sqlite:///{tmp_path / 'batch3.sqlite'}"
    shutil.copy(Path(__file__).parent / "data" / "h200-proof-2026-11-30" / "batch3.sqlite", tmp_path / "batch3.sqlite")
    db.upgrade(url)
    engine = _engine(url)
    with engine.connect() as conn:
        marked = conn.execute(text("SELECT j.mode, r.empty_as_failed, count(*) FROM results r JOIN jobs j ON j.id = r.job_id "
                                   "GROUP BY j.mode, r.empty_as_failed")).all()
    engine.dispose()
    assert {(mode, bool(flag)): n for mode, flag, n in marked} == {("serve", True): 6, ("offline", False): 16}


def test_queued_jobs_of_sweeps_imported_before_0027_get_no_attempt_here(tmp_path: Path) -> None:
    """The proof's matrix (3 of its 24 cells never ran) imported: down at 0026 its queued jobs could be claimed again,
    and 0027 gives them none; the jobs of a sweep submitted here keep theirs."""
    url = f"sqlite:///{tmp_path / 'imported.sqlite'}"
    db.upgrade(url)
    imported_folder(url, SWEEPS / "proof" / "h200-matrix")
    engine = _engine(url)
    left = "SELECT max_attempts, count(*) FROM jobs WHERE state = 'queued' GROUP BY max_attempts"
    with engine.begin() as conn:
        assert conn.execute(text(left)).all() == [(0, 3)]
        cfg = db.alembic_config(url)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0026")
        assert conn.execute(text(left)).all() == [(1, 3)]
    db.upgrade(url)
    with engine.connect() as conn:
        assert conn.execute(text(left)).all() == [(0, 3)]
    engine.dispose()
