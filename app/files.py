"""Files that came from another host (a GPU host's folder of cells, a benchmark's result, a pull request's diff),
read so that none can show what it points to, block the reader or exhaust it.

A folder is resolved with ``realpath`` once; below it every step is opened with ``O_NOFOLLOW``, so a
symbolic link anywhere (``cells/c0000-r0`` as well as ``cell.log``) is refused, not followed out to
``/proc/self/environ`` or ``/etc/passwd``. Only regular files are read (``fstat`` on the open file: a
FIFO would block the read, a device never ends), none with a second hard link (it is the same file as
one elsewhere, which ``realpath`` cannot tell: a host's ``ln /etc/shadow cells/c0000-r0/cell.log``), and
none past the limits the service holds a worker's uploads to. Every refusal is a FileRefused naming the
file and why.
"""

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from app import strict_json
from app.config import get_settings

M = TypeVar("M", bound=BaseModel)
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not wait for a writer before fstat can refuse it.
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_LINK = "symbolic link"
_NEVER_FOLLOWED = " (links are never followed: copy the file itself)"


class FileRefused(ValueError):
    """A file that is not read, or whose content is refused; the message names it and says why."""


@dataclass(frozen=True)
class Limit:
    """The most bytes a file may hold, and the setting that says so."""

    bytes: int
    setting: str


def body_limit() -> Limit:
    """JSON files (sweep.json, exit.json, result.json, a sweep file): what the API takes in one body."""
    return Limit(get_settings().max_body_bytes, "DRAFTBENCH_MAX_BODY_BYTES")


def log_limit() -> Limit:
    """A cell's log, as the service takes a worker's upload of it; also files that grow like logs (a
    pull request's diff, ``vllm bench serve --save-detailed`` with every request's latencies)."""
    return Limit(get_settings().max_log_bytes, "DRAFTBENCH_MAX_LOG_BYTES")


@dataclass(frozen=True)
class Content:
    data: bytes
    mtime: float


def read_inside(folder: Path, relative: str, *, limit: Limit) -> Content | None:
    """``folder/relative`` (a POSIX path below the folder), or None when it or a folder on its way is absent.

    Raises FileRefused for a symbolic link at any step below ``folder``, anything but a folder on the
    way or a regular file at the end, a file over ``limit``, or one that cannot be read.
    """
    fd = _open_below(folder, relative, last="regular file")
    if fd is None:
        return None
    try:
        return _read_open(fd, folder / relative, limit)
    except OSError as exc:
        raise FileRefused(f"{folder / relative}: {exc.strerror}") from None
    finally:
        os.close(fd)


def names_inside(folder: Path, relative: str) -> list[str] | None:
    """The names in the folder ``folder/relative``, sorted, or None when it or a folder on its way is absent; FileRefused
    as ``read_inside`` for a link or anything but a folder on the way."""
    fd = _open_below(folder, relative, last="folder")
    if fd is None:
        return None
    try:
        return sorted(os.listdir(fd))
    except OSError as exc:
        raise FileRefused(f"{folder / relative}: {exc.strerror}") from None
    finally:
        os.close(fd)


def _open_below(folder: Path, relative: str, *, last: str) -> int | None:
    """An open descriptor of ``folder/relative``, each step below ``folder`` opened without following a link, the last
    one ``last`` (a regular file or a folder); None when a step is absent."""
    name = folder / relative
    parts = PurePosixPath(relative).parts
    if not parts or ".." in parts or PurePosixPath(relative).is_absolute():
        raise FileRefused(f"{name}: not a path inside {folder}")
    try:
        fd = os.open(os.path.realpath(folder), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileRefused(f"{folder}: {exc.strerror}") from None
    for step, part in enumerate(parts):
        at_end = step == len(parts) - 1
        where = folder.joinpath(*parts[: step + 1])
        try:
            # Classified before opening: a device or socket is never opened.
            kind = _kind(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
            wanted = last if at_end else "folder"
            if kind != wanted:
                raise FileRefused(f"{where}: {_a(kind)}, not {_a(wanted)}{_NEVER_FOLLOWED if kind == _LINK else ''}")
            inner = os.open(part, _FILE if wanted == "regular file" else _DIRECTORY, dir_fd=fd)
        except FileNotFoundError:
            os.close(fd)
            return None
        except OSError as exc:
            os.close(fd)
            raise FileRefused(f"{where}: {exc.strerror}") from None
        except FileRefused:
            os.close(fd)
            raise
        os.close(fd)
        fd = inner
    return fd


def read_given(path: Path, *, limit: Limit) -> Content:
    """A file named on the command line: the same rules, below the folder it lies in (a missing file is refused)."""
    found = read_inside(path.parent, path.name, limit=limit)
    if found is None:
        raise FileRefused(f"{path}: no such file")
    return found


def read_named(path: Path, *, limit: Limit) -> Content:
    """A file of the user's own named on the command line (a sweep, a series): a link to it is followed, but only a
    regular file is read (``/dev/zero`` never ends, a FIFO blocks), within ``limit``. FileRefused otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise FileRefused(f"{path}: {exc.strerror}") from None
    try:
        return _read_open(fd, path, limit, own=True)
    except OSError as exc:
        raise FileRefused(f"{path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def validated(model: type[M], content: bytes, *, name: Path | str) -> M:
    """``content`` (JSON) as ``model``; FileRefused naming the file and the fields that are wrong.

    A lone UTF-16 surrogate escape (``"\\udc80"``), which Pydantic's JSON parser refuses whole, is read as the API
    reads a worker's report: by Python's parser, then validated, so that a text field of a report keeps the rest of
    its text (the surrogate as U+FFFD, ``app.schemas.text.clean``) and another names its field. A key given twice in
    one object is refused, as the API refuses it in a body: both parsers would keep the last one silently.
    """
    try:
        found = model.model_validate_json(content)
    except ValidationError as exc:
        if not any(e["type"] == "json_invalid" and "surrogate" in e["msg"] for e in exc.errors(include_url=False)):
            raise FileRefused(f"{name}: {describe(exc)}") from None
        try:
            data = json.loads(content, parse_constant=_refused_constant)
        except ValueError as exc:
            raise FileRefused(f"{name}: not JSON: {exc}") from None
        try:
            found = model.model_validate(data)
        except ValidationError as exc:
            raise FileRefused(f"{name}: {describe(exc)}") from None
    refuse_twice_given_keys(content, name=name)
    return found


def refuse_twice_given_keys(content: bytes, *, name: Path | str) -> None:
    """FileRefused naming the file and the key when one JSON object of ``content`` gives a key twice."""
    problem = strict_json.problem(content)
    if problem is not None:
        raise FileRefused(f"{name}: {problem}")


def _refused_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def describe(exc: ValidationError, *, most: int = 3) -> str:
    """A validation error in one line: ``field: message`` for its first errors, without the input's value."""
    parts = []
    for error in exc.errors(include_url=False)[:most]:
        field = ".".join(str(step) for step in error["loc"]) or "the document"
        message = " ".join(error["msg"].removeprefix("Value error, ").split())
        parts.append(f"{field}: {message}"[:300])
    more = exc.error_count() - most
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _read_open(fd: int, name: Path, limit: Limit, *, own: bool = False) -> Content:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(f"{name}: {_a(_kind(info.st_mode))}, not a regular file")
    if info.st_nlink > 1 and not own:
        raise FileRefused(f"{name}: a file with {info.st_nlink} hard links, so the same file as one elsewhere{_NEVER_FOLLOWED}")
    if info.st_size > limit.bytes:
        raise FileRefused(f"{name}: {info.st_size} bytes, over the limit of {limit.bytes} ({limit.setting})")
    chunks, size = [], 0
    # Read to the end, not to st_size: a file that grows while it is read is held to the limit too.
    while chunk := os.read(fd, min(1 << 20, limit.bytes + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit.bytes:
            raise FileRefused(f"{name}: over the limit of {limit.bytes} bytes ({limit.setting})")
    return Content(b"".join(chunks), info.st_mtime)


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISLNK, _LINK), (stat.S_ISDIR, "folder"), (stat.S_ISREG, "regular file"), (stat.S_ISFIFO, "FIFO"),
             (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"))
    return next((name for test, name in kinds if test(mode)), "special file")


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"
