"""A crash's log and its excerpt: pages read the excerpt kept with the crash, downloads stream the log."""

import tracemalloc
import zlib

from alembic import command
from sqlalchemy import select

from app import db
from app.crashes import service as crashes
from app.models import Crash
from tests.crashes.test_api import RANGE, crash  # noqa: F401 (the fixture)


def test_the_crash_pages_show_the_excerpt_kept_with_the_crash_and_read_no_log(client, crash, monkeypatch):  # noqa: F811
    job_id = crash(RANGE)
    signature = client.get("/api/v1/crashes").json()[0]["signature"]

    def no_log_read(**_: object) -> None:
        raise AssertionError("a page decompressed a whole log")

    monkeypatch.setattr(crashes, "read_log", no_log_read)
    for path in ("/crashes", f"/crashes/{signature}"):
        page = client.get(path)
        assert page.status_code == 200, page.text[:300]
        assert f"log excerpt (job {job_id}" in page.text and "out of range for a 2-layer target" in page.text


def test_each_crash_keeps_the_excerpt_of_its_own_log(client, crash, migrated_sessions):  # noqa: F811
    first, second = crash(RANGE), crash(RANGE)
    with migrated_sessions() as session:
        kept = dict(session.execute(select(Crash.job_id, Crash.excerpt)).all())
    assert set(kept) == {first, second}
    assert f"pid={first * 7}" in kept[first] and f"pid={second * 7}" in kept[second]
    assert kept[first].splitlines()[-1].endswith(RANGE)


def test_a_log_streams_in_bounded_pieces_whatever_its_size():
    line = "(EngineCore pid=1) INFO 12-01 ünïcödé ✓ step\n"
    text = line * (40 * 2**20 // len(line.encode()))  # 40 MiB, compressing to about 100 KiB
    compressed = zlib.compress(text.encode(), 6)
    tracemalloc.start()
    pieces = 0
    total = 0
    for piece in crashes.log_chunks(compressed):
        pieces += 1
        total += len(piece)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert total == len(text) and pieces > 100
    assert peak < 2 * 2**20, f"{peak / 2**20:.1f} MiB held while streaming a 40 MiB log"


def test_text_split_between_pieces_is_decoded_whole():
    text = "é" * (crashes.LOG_CHUNK + 1) + "\n✓ done\n"  # the 2-byte characters straddle every piece boundary
    assert "".join(crashes.log_chunks(zlib.compress(text.encode()))) == text


def test_a_downloaded_log_is_the_uploaded_one_and_a_missing_one_is_a_json_404(client, crash, migrated_sessions):  # noqa: F811
    job_id = crash(RANGE)
    response = client.get(f"/api/v1/jobs/{job_id}/log")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    assert response.text.endswith(RANGE + "\n") and f"pid={job_id * 7}" in response.text
    claimed = client.post(f"/api/v1/workers/{crash.worker.id}/claim", headers=crash.worker.headers).json()
    missing = client.get(f"/api/v1/jobs/{claimed['job_id']}/log")
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/json"
    assert missing.json() == {"detail": f"job {claimed['job_id']} has no log"}
    documented = client.get("/openapi.json").json()["paths"]["/api/v1/jobs/{job_id}/log"]["get"]["responses"]
    assert list(documented["404"]["content"]) == ["application/json"]
    assert list(documented["200"]["content"]) == ["text/plain"]


def test_the_migration_gives_crashes_stored_before_it_their_excerpts(client, crash, db_url, migrated_sessions):  # noqa: F811
    job_id = crash(RANGE)
    with migrated_sessions() as session:
        kept = session.scalar(select(Crash.excerpt).where(Crash.job_id == job_id))
    command.downgrade(db.alembic_config(db_url), "0013-1")
    db.upgrade(db_url)
    with migrated_sessions() as session:
        assert session.scalar(select(Crash.excerpt).where(Crash.job_id == job_id)) == kept
