"""``folder.json``: the identity ``draftbench expand`` gives a folder of cells, written again by ``export`` and read back
with the folder, from a host that may not be trusted."""

import json
import shutil
from pathlib import Path

import pytest

from app.files import FileRefused
from app.sweeps.imports import FOLDER_FILE
from runners.folders import read_folder, write_cells, write_runs

H200 = Path(__file__).resolve().parents[1] / "data" / "h200-matrix"
HEX = "0123456789abcdef" * 2


def _identity(folder: Path) -> str:
    return json.loads((folder / FOLDER_FILE).read_text())["folder_id"]


def test_each_expand_gives_its_folder_an_identity_of_its_own(tmp_path: Path) -> None:
    spec = read_folder(H200).spec
    write_cells(spec, tmp_path / "a")
    write_cells(spec, tmp_path / "b")
    first, second = _identity(tmp_path / "a"), _identity(tmp_path / "b")
    assert len(first) == 32 and set(first) <= set("0123456789abcdef") and first != second
    assert json.loads((tmp_path / "a" / FOLDER_FILE).read_text()) == {"folder_id": first}
    # The spec is the same; the identity, read back, is what tells the two folders apart.
    a, b = read_folder(tmp_path / "a"), read_folder(tmp_path / "b")
    assert (a.folder_id, b.folder_id) == (first, second) and a.spec == b.spec and a.digest != b.digest
    # Expanded again, a folder is another folder.
    write_cells(spec, tmp_path / "a")
    assert _identity(tmp_path / "a") != first


def test_written_runs_carry_the_identity_they_are_given(tmp_path: Path) -> None:
    found = read_folder(H200)
    assert found.folder_id is None  # written before folders had one
    write_runs(found.spec, tmp_path / "kept", found.ran, {}, folder_id=HEX)
    again = read_folder(tmp_path / "kept")
    assert (again.folder_id, again.ran) == (HEX, found.ran)
    write_runs(found.spec, tmp_path / "new", found.ran, {})
    assert read_folder(tmp_path / "new").folder_id not in (None, HEX)


def test_the_identity_is_part_of_the_digest_and_its_absence_changes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    shutil.copytree(H200, folder)
    (folder / FOLDER_FILE).write_text(json.dumps({"folder_id": HEX}))
    spaced = read_folder(folder).digest
    (folder / FOLDER_FILE).write_text(json.dumps({"folder_id": HEX}, indent=4))
    assert read_folder(folder).digest == spaced != read_folder(H200).digest
    (folder / FOLDER_FILE).unlink()
    assert read_folder(folder).digest == read_folder(H200).digest


def _write(data: bytes):
    return lambda folder: (folder / FOLDER_FILE).write_bytes(data)


def _link_out(folder: Path) -> None:
    outside = folder.parent / "outside.json"
    outside.write_text(json.dumps({"folder_id": HEX}))
    (folder / FOLDER_FILE).symlink_to(outside)


HOSTILE = {
    "a number": (_write(b'{"folder_id": 12345678901234567890123456789012}'), "folder_id: Input should be a valid string"),
    "null": (_write(b'{"folder_id": null}'), "folder_id: Input should be a valid string"),
    "a list": (_write(b'{"folder_id": ["' + HEX.encode() + b'"]}'), "folder_id: Input should be a valid string"),
    "33 hex digits": (_write(b'{"folder_id": "' + HEX.encode() + b'0"}'), "folder_id: String should have at most 32"),
    "a megabyte": (_write(b'{"folder_id": "' + b"a" * 2_000_000 + b'"}'), "over the limit"),
    "31 hex digits": (_write(b'{"folder_id": "' + HEX[:31].encode() + b'"}'), "folder_id: String should match pattern"),
    "upper-case hex": (_write(b'{"folder_id": "' + HEX.upper().encode() + b'"}'), "folder_id: String should match pattern"),
    "not hex": (_write(b'{"folder_id": "../../../../../../../etc/passwd/"}'), "folder_id: String should match pattern"),
    "no folder_id": (_write(b"{}"), "folder_id: Field required"),
    "another key": (_write(b'{"folder_id": "' + HEX.encode() + b'", "sweep_id": 3}'), "sweep_id: Extra inputs are not permitted"),
    "given twice": (_write(b'{"folder_id": "' + HEX.encode() + b'", "folder_id": "' + HEX.encode() + b'"}'),
                    "key 'folder_id' is given twice"),
    "a string": (_write(b'"' + HEX.encode() + b'"'), "Input should be an object"),
    "not JSON": (_write(b"\x00\xff folder"), "Invalid JSON"),
    "a folder": (lambda folder: (folder / FOLDER_FILE).mkdir(), "a folder, not a regular file"),
    "a link out of the folder": (_link_out, "symbolic link"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_folder_json_is_refused_naming_it_and_its_field(tmp_path: Path, case: str) -> None:
    folder = tmp_path / "run"
    shutil.copytree(H200, folder)
    spoil, reason = HOSTILE[case]
    spoil(folder)
    with pytest.raises(FileRefused) as refused:
        read_folder(folder)
    message = str(refused.value)
    assert message.startswith(f"{folder / FOLDER_FILE}: ") and reason in message, message
    assert len(message) < 400 and "\n" not in message

