"""Hostile input on the command line: each is one line naming what was wrong, a non-zero exit, nothing changed, and
nothing that blocks (a FIFO, ``/dev/zero``) or fills memory."""

import os
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app import db
from app.models import ApiToken
from tests.cli.test_errors import one_line, run

NOWHERE = "http://127.0.0.1:9"


@pytest.fixture
def sweep_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "cells.yaml"
    path.write_text("name: x\nbuild: a\nmodel: m\nworkload: {dataset: random, num_prompts: 2, max_tokens: 4}\n"
                    "speculative: [{method: ngram, num_speculative_tokens: 2}]\n"
                    "backends: [CPU_ATTN]\ngraph_modes: [NONE]\ngpu_kinds: [cpu]\n")
    return path


def _hostile(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A file of ``kind`` and what the refusal says of it."""
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return tmp_path / "fifo", "a FIFO, not a regular file"
    if kind == "utf-16":
        (tmp_path / "utf16.txt").write_bytes("b1\nb2\n".encode("utf-16"))
        return tmp_path / "utf16.txt", "not UTF-8 text (byte 0)"
    if kind == "binary":
        (tmp_path / "binary").write_bytes(b"b1\n\xd0\xff\x00\n")
        return tmp_path / "binary", "not UTF-8 text (byte 3)"
    if kind == "huge":
        (tmp_path / "huge").write_bytes(b"b1\n" * 400_000)
        return tmp_path / "huge", "over the limit of 1048576 (DRAFTBENCH_MAX_BODY_BYTES)"
    return Path("/dev/zero"), "a character device, not a regular file"


@pytest.mark.parametrize("kind", ["fifo", "utf-16", "binary", "huge", "/dev/zero"])
def test_a_series_file_that_cannot_be_read_as_labels_is_one_line(tmp_path: Path, sweep_yaml: Path, kind: str) -> None:
    path, said = _hostile(tmp_path, kind)
    line = one_line(run("bisect", "--cells", str(sweep_yaml), "--series", f"@{path}", "--good", "b1", "--bad", "b2",
                        "--server", NOWHERE))
    assert line.startswith(f"draftbench: --series @{path}: ") and said in line, line


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("command", ["bisect", "ci", "submit"])
def test_a_sweep_file_that_never_ends_is_refused_without_reading_it(tmp_path: Path, kind: str, command: str) -> None:
    path, said = _hostile(tmp_path, kind)
    argv = {"bisect": ["bisect", "--cells", str(path), "--series", "a,b", "--good", "a", "--bad", "b"],
            "ci": ["ci", "--repo", "o/n", "--pr", "1", "--head", "a", "--base", "b", "--build", "a", "--base-build", "b",
                   "--sweep", str(path)],
            "submit": ["submit", str(path), "--token", "dbk_" + "x" * 40]}[command]
    line = one_line(run(*argv, "--server", NOWHERE))
    assert line == f"draftbench: {path}: {said}"


def _tokens(url: str) -> int:
    db.upgrade(url)
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            return conn.scalar(select(func.count()).select_from(ApiToken))
    finally:
        engine.dispose()


@pytest.mark.parametrize(("args", "said"), [
    (["--name", "ci", "--scope", "submit", "--scope", "submit"], "scopes: must list each value once; submit given twice"),
    (["--name", "", "--scope", "submit"], "name: String should have at least 1 character"),
    (["--name", "n" * 5000, "--scope", "submit"], "name: String should have at most"),
])
def test_token_create_holds_to_the_apis_rules_for_a_token(sqlite_url: str, args: list[str], said: str) -> None:
    line = one_line(run("token", "create", *args, "--database-url", sqlite_url))
    assert line.startswith("draftbench: token create: ") and said in line, line
    assert _tokens(sqlite_url) == 0


def test_token_revoke_of_an_id_past_what_the_database_holds_is_no_traceback(sqlite_url: str) -> None:
    done = run("token", "revoke", "99999999999999999999", "--database-url", sqlite_url)
    assert done.returncode == 2 and "2147483647" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("url", ["hello", "://", "sqlite:/x:y@z:port"])
def test_a_database_url_that_is_none_is_one_line_naming_the_option(url: str) -> None:
    line = one_line(run("token", "list", "--database-url", url))
    assert line.startswith("draftbench: --database-url (DRAFTBENCH_DATABASE_URL): not a database URL"), line


def test_a_database_that_cannot_be_reached_is_one_line() -> None:
    line = one_line(run("migrate", "--database-url", "postgresql+psycopg://user:pw@127.0.0.1:1/db"))
    assert "could not migrate" in line and "pw" not in line
