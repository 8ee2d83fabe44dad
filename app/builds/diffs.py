"""What a unified diff to vLLM touches, and whether a patched build can take it: pure functions, no I/O."""

import hashlib
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

# Sources that only a compiler turns into what vLLM runs: a patch to them needs a new wheel.
COMPILED_SUFFIXES = frozenset({".cu", ".cuh", ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".hip"})
COMPILED_DIRS = frozenset({"csrc"})
# A patched build holds vLLM's package only: the other parts of a pull request (tests, docs, CI) are left out.
PACKAGE = "vllm"
# What a patched build may change: Python modules of the package, by names Python can import.
SOURCE_SUFFIX = ".py"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# Git's modes of a regular file; a symbolic link (120000) or a submodule (160000) is no Python source.
_FILE_MODES = frozenset({"100644", "100755"})
_MODE = re.compile(r"(?:new file|deleted file|old|new) mode (\S+)")


class DiffError(ValueError):
    """The diff cannot make a patched build; the message says which files and what to do instead."""


@dataclass(frozen=True)
class FileChange:
    """One file of a diff: its path in the repository (a/ and b/ stripped) and its lines, headers included."""

    path: str
    text: str

    @property
    def compiled(self) -> bool:
        parts = PurePosixPath(self.path).parts
        return bool(COMPILED_DIRS & set(parts)) or PurePosixPath(self.path).suffix in COMPILED_SUFFIXES

    @property
    def in_package(self) -> bool:
        return PurePosixPath(self.path).parts[:1] == (PACKAGE,)


def is_source(path: str) -> bool:
    """Whether a patched build may change ``path`` (a repository path): a ``.py`` file under ``vllm/``."""
    parts = PurePosixPath(path).parts
    return (
        len(parts) > 1 and parts[0] == PACKAGE and path.endswith(SOURCE_SUFFIX)
        and all(_NAME.fullmatch(part) for part in parts)
    )


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def split(text: str) -> list[FileChange]:
    """The diff cut into one part per file, in order.

    A file's part starts at its ``--- `` line (a line followed by ``+++ ``), or at the ``diff --git``
    and extended header lines just before it; its path is the ``+++ b/PATH`` one, or the ``--- a/PATH``
    one for a deleted file (``+++ /dev/null``). Raises DiffError when no file is found.
    """
    lines = text.splitlines(keepends=True)
    starts = []
    for i in range(len(lines) - 1):
        if lines[i].startswith("--- ") and lines[i + 1].startswith("+++ "):
            start = i
            while start > 0 and lines[start - 1].startswith(_HEADERS):
                start -= 1
            starts.append((start, i))
    if not starts:
        raise DiffError("the patch names no file (no '--- a/PATH' then '+++ b/PATH' lines): is it a unified diff?")
    changes = []
    for n, (start, header) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        changes.append(FileChange(_path(lines[header], lines[header + 1]), "".join(lines[start:end])))
    return changes


def for_package(changes: list[FileChange]) -> list[FileChange]:
    """The parts a patched build applies: those under ``vllm/``.

    Raises DiffError naming every compiled source (``csrc/``, or C, C++, CUDA or HIP files) the diff
    touches, when nothing is left under ``vllm/``, for a file there that is not a ``.py`` source, and for
    git's headers of renames, copies, links and binary patches. What ``patch`` really changed is checked
    again after it ran (app.builds.patched): a part may hold hunks of other formats for other files.
    """
    compiled = [c.path for c in changes if c.compiled]
    if compiled:
        raise DiffError(
            f"the patch changes compiled sources ({', '.join(compiled)}): a patched build shares the base's "
            "compiled extensions, so this change needs a wheel built from the branch (use --wheel PATH_OR_URL)"
        )
    kept = [c for c in changes if c.in_package]
    if not kept:
        paths = ", ".join(c.path for c in changes)
        raise DiffError(f"the patch changes nothing under {PACKAGE}/ (it changes {paths}): there is nothing to build")
    others = [c.path for c in kept if not is_source(c.path)]
    if others:
        raise DiffError(f"the patch changes files under {PACKAGE}/ that are not Python sources ({', '.join(others)}): {ONLY_SOURCES}")
    for change in kept:
        _refuse_headers(change)
    return kept


ONLY_SOURCES = (
    f"a patched build takes only changes to {PACKAGE}/'s {SOURCE_SUFFIX} files (no renames, links or other files); "
    "build a wheel from the branch for anything else (--wheel PATH_OR_URL)"
)


def _refuse_headers(change: FileChange) -> None:
    """Git's headers that make ``patch`` do more than change a file's lines: renames and copies (which would
    touch a file the diff does not name), links and submodules (no Python source), binary patches."""
    for line in change.text.splitlines():
        mode = _MODE.fullmatch(line.strip())
        if line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            what = "renames or copies a file"
        elif mode and mode.group(1) not in _FILE_MODES:
            what = f"gives a file mode {mode.group(1)} (a symbolic link or a submodule)"
        elif line.startswith("GIT binary patch"):
            what = "holds a binary patch"
        else:
            continue
        raise DiffError(f"the patch {what} ({change.path}: {line.strip()[:120]!r}): {ONLY_SOURCES}")


_HEADERS = (
    "diff --git ", "index ", "new file mode", "deleted file mode", "old mode", "new mode",
    "similarity index", "dissimilarity index", "rename from", "rename to", "copy from", "copy to",
)


def _path(old: str, new: str) -> str:
    """The repository path from a ``--- a/X`` / ``+++ b/X`` pair (a tab and timestamp may follow the path)."""
    target = new[4:].rstrip("\n").split("\t")[0]
    if target == "/dev/null":
        target = old[4:].rstrip("\n").split("\t")[0]
    if target[:2] not in ("a/", "b/"):
        raise DiffError(f"{target!r}: paths must start with a/ or b/, as git diff writes them (the patch applies with -p1)")
    return target[2:]
