"""A build whose vLLM is another build's with a pull request's Python diff applied, made in seconds.

The base's vLLM package is copied as hard links (``cp -al``): unchanged files and the compiled
extensions are shared, only the files the diff changes get files of their own. The new build's
interpreter is the base's, run with the copy first on PYTHONPATH.

What a diff changes is decided by what ``patch`` did, not by reading the diff: ``patch`` applies hunks
of any format it finds (a context hunk inside a git part, a git rename), so it runs in a staging tree of
copies of the base's Python sources, and the trees before and after are compared. Only changed ``.py``
files under ``vllm/`` are taken; anything else it made, removed or changed (a file outside the package,
a link, a file of another kind) refuses the patch.
"""

import hashlib
import os
import shutil
import stat
import subprocess
from datetime import datetime
from pathlib import Path, PurePosixPath

from app import files
from app.builds import diffs
from app.builds.facts import BuildError, BuildFacts, folder_for, probe, resolve_base, write_facts, write_wrapper
from app.enums import BuildKind

SITE = "site"
STAGING = "staging"


def create(
    *, label: str, base: str, patch: Path, root: Path, commit: str | None = None, committed_at: datetime | None = None
) -> BuildFacts:
    """Make ``root/label`` from the build ``base`` (a label under ``root`` or an interpreter) and ``patch``.

    The patch (read by app.files' rules: a regular file, never through a link, at most
    ``DRAFTBENCH_MAX_LOG_BYTES``) must be a unified diff with git's a/ and b/ prefixes; its files under
    ``vllm/`` are applied (tests, docs and CI files of the pull request are left out), first in a staging
    tree. Returns the facts written to ``build.json``, whose ``patch_files`` are the files that changed.

    Raises
    ------
    app.builds.diffs.DiffError
        The patch touches compiled sources (those need ``--wheel``), nothing under ``vllm/``, or
        (as applied) anything but ``.py`` files there: a file elsewhere, a rename, a link.
    BuildError
        The patch file is refused, the label exists, the base is not found or cannot import vLLM, or the
        patch does not apply (with ``patch``'s own words). Nothing is left behind.
    """
    folder = folder_for(label, root=root)
    try:
        text = files.read_given(patch, limit=files.log_limit()).data.decode()
    except files.FileRefused as exc:
        raise BuildError(f"--patch {exc}") from None
    except UnicodeDecodeError as exc:
        raise BuildError(f"--patch {patch}: not UTF-8 text (byte {exc.start})") from None
    changes = diffs.for_package(diffs.split(text))
    base_python = resolve_base(base, root=root)
    installed = probe(base_python)
    body = "".join(change.text for change in changes)
    try:
        folder.mkdir(parents=True)
        staging = folder / STAGING
        before = _stage_sources(installed.package, staging / diffs.PACKAGE)
        # The staging tree stands for the repository root, so the diff's ``vllm/...`` paths land in it.
        _apply(body, staging)
        changed = _changed(before, _snapshot(staging))
        site = folder / SITE
        site.mkdir()
        shutil.copytree(installed.package, site / diffs.PACKAGE, copy_function=_link_or_copy, symlinks=True)
        for path in changed:
            _take(staging / path, site, path)
        shutil.rmtree(staging)
        write_wrapper(folder, installed.executable, pythonpath=site)
        facts = BuildFacts(
            label=label,
            kind=BuildKind.PATCH,
            vllm_version=installed.version,
            base=base,
            interpreter=str(installed.executable),
            site=str(site),
            patch_sha256=diffs.sha256(text),
            patch_files=changed,
            commit=commit,
            committed_at=committed_at,
        )
        write_facts(folder, facts)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return facts


# A file's content and permission bits, as the comparison of the staging tree sees it.
_State = tuple[str, int]


def _stage_sources(package: Path, into: Path) -> dict[str, _State]:
    """Copies (never links: ``patch`` may write in place) of the package's regular ``.py`` files under
    ``into``; returns their states by repository path."""
    states = {}
    for folder, dirs, names in os.walk(package):
        dirs[:] = [d for d in dirs if not (Path(folder) / d).is_symlink() and d != "__pycache__"]
        for name in names:
            source = Path(folder) / name
            if not name.endswith(diffs.SOURCE_SUFFIX) or not stat.S_ISREG(source.lstat().st_mode):
                continue
            target = into / source.relative_to(package)
            target.parent.mkdir(parents=True, exist_ok=True)
            data, mode = source.read_bytes(), stat.S_IMODE(source.stat().st_mode)
            target.write_bytes(data)
            target.chmod(mode)
            states[f"{diffs.PACKAGE}/{source.relative_to(package).as_posix()}"] = (hashlib.sha256(data).hexdigest(), mode)
    return states


def _snapshot(root: Path) -> dict[str, _State]:
    """Every file under ``root`` by its path there; DiffError for a link or a file that is not regular."""
    states = {}
    for folder, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            path = Path(folder) / name
            mode = path.lstat().st_mode
            relative = path.relative_to(root).as_posix()
            if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "a file that is not regular"
                raise diffs.DiffError(f"applying the patch made {kind} at {relative}: {diffs.ONLY_SOURCES}")
            if stat.S_ISREG(mode):
                states[relative] = _state(path)
    return states


def _changed(before: dict[str, _State], after: dict[str, _State]) -> list[str]:
    """The repository paths ``patch`` added, removed or changed; DiffError for any that is no Python source."""
    changed = sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))
    refused = [f"{path} ({_how(path, before, after)})" for path in changed if not diffs.is_source(path)]
    if refused:
        raise diffs.DiffError(f"applying the patch changes more than {diffs.PACKAGE}/'s Python: {', '.join(refused)}: {diffs.ONLY_SOURCES}")
    if not changed:
        raise diffs.DiffError(f"the patch changes no file under {diffs.PACKAGE}/: there is nothing to build")
    return changed


def _how(path: str, before: dict[str, _State], after: dict[str, _State]) -> str:
    return "made" if path not in before else "removed" if path not in after else "changed"


def _state(path: Path) -> _State:
    return hashlib.sha256(path.read_bytes()).hexdigest(), stat.S_IMODE(path.stat().st_mode)


def _take(staged: Path, site: Path, path: str) -> None:
    """Put the staging tree's ``path`` (or its absence) into the build's copy, as an entry of its own.

    The copy's entry is replaced, never written to: it is a hard link to the base's file. No folder on the
    way may be a link (the base's package could hold one), or the change would land outside the copy.
    """
    target = site / path
    for parent in reversed(PurePosixPath(path).parents[:-1]):
        if (site / parent).is_symlink():
            raise BuildError(f"{path}: the base's {parent} is a symbolic link; a patched build cannot change a file under it")
    try:
        if target.is_symlink() or target.exists():
            target.unlink()
        if staged.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, target)
    except OSError as exc:
        raise BuildError(f"{path}: cannot be put into the build's copy of the base ({exc.strerror})") from None


def _apply(body: str, where: Path) -> None:
    """``patch -p1`` in ``where``; BuildError with patch's output when a hunk does not apply."""
    argv = ["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "--reject-file=-", "-d", str(where)]
    try:
        out = subprocess.run(argv, input=body, capture_output=True, text=True)
    except FileNotFoundError:
        raise BuildError("the 'patch' program is not installed (apt-get install patch)") from None
    if out.returncode != 0:
        raise BuildError(f"the patch does not apply to the base's vLLM:\n{(out.stdout + out.stderr).strip()}")


def _link_or_copy(source: str, target: str) -> None:
    """A hard link, or a copy when the base lies on another file system (links cannot cross one)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
