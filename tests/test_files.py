"""app/files.py: a file from another host is read only as a regular file inside its folder, never through a link."""

import os
from pathlib import Path

import pytest

from app import files

LIMIT = files.Limit(100, "DRAFTBENCH_MAX_BODY_BYTES")


def test_the_folder_itself_may_be_named_through_a_link_but_nothing_below_it(tmp_path: Path) -> None:
    (tmp_path / "run" / "cells").mkdir(parents=True)
    (tmp_path / "run" / "cells" / "exit.json").write_text("{}")
    (tmp_path / "latest").symlink_to(tmp_path / "run")
    assert files.read_inside(tmp_path / "latest", "cells/exit.json", limit=LIMIT).data == b"{}"
    (tmp_path / "run" / "linked").symlink_to(tmp_path / "run" / "cells")
    with pytest.raises(files.FileRefused, match=r"linked: a symbolic link, not a folder"):
        files.read_inside(tmp_path / "latest", "linked/exit.json", limit=LIMIT)


def test_absent_is_none_and_anything_but_a_regular_file_is_refused(tmp_path: Path) -> None:
    assert files.read_inside(tmp_path, "cells/c0000-r0/exit.json", limit=LIMIT) is None
    assert files.read_inside(tmp_path / "missing", "sweep.json", limit=LIMIT) is None
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(files.FileRefused, match="fifo: a FIFO, not a regular file"):
        files.read_inside(tmp_path, "fifo", limit=LIMIT)
    with pytest.raises(files.FileRefused, match="folder: a folder, not a regular file"):
        files.read_inside(tmp_path, "folder", limit=LIMIT)
    with pytest.raises(files.FileRefused, match="file: a regular file, not a folder"):
        files.read_inside(tmp_path, "file/exit.json", limit=LIMIT)
    with pytest.raises(files.FileRefused, match="not a path inside"):
        files.read_inside(tmp_path, "../etc/passwd", limit=LIMIT)


def test_a_hard_link_is_refused_since_it_is_the_same_file_as_one_outside(tmp_path: Path) -> None:
    (tmp_path / "outside").write_text("secret")
    (tmp_path / "run").mkdir()
    os.link(tmp_path / "outside", tmp_path / "run" / "cell.log")
    with pytest.raises(files.FileRefused, match=r"cell.log: a file with 2 hard links, so the same file as one elsewhere"):
        files.read_inside(tmp_path / "run", "cell.log", limit=LIMIT)
    (tmp_path / "outside").unlink()  # the last name left: an ordinary file again
    assert files.read_inside(tmp_path / "run", "cell.log", limit=LIMIT).data == b"secret"


def test_a_file_is_read_up_to_its_limit_and_refused_past_it(tmp_path: Path) -> None:
    (tmp_path / "exit.json").write_bytes(b"x" * 100)
    assert len(files.read_inside(tmp_path, "exit.json", limit=LIMIT).data) == 100
    (tmp_path / "exit.json").write_bytes(b"x" * 101)
    with pytest.raises(files.FileRefused, match=r"101 bytes, over the limit of 100 \(DRAFTBENCH_MAX_BODY_BYTES\)"):
        files.read_inside(tmp_path, "exit.json", limit=LIMIT)
