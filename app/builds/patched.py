"""A build whose vLLM is another build's with a pull request's Python diff applied, made in seconds.

The base's vLLM package is copied as hard links (``cp -al``): unchanged files and the compiled
extensions are shared, only the files the diff changes get copies of their own. The new build's
interpreter is the base's, run with the copy first on PYTHONPATH.
"""

import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

from app.builds import diffs
from app.builds.facts import BuildError, BuildFacts, folder_for, probe, resolve_base, write_facts, write_wrapper
from app.enums import BuildKind

SITE = "site"


def create(
    *, label: str, base: str, patch: Path, root: Path, commit: str | None = None, committed_at: datetime | None = None
) -> BuildFacts:
    """Make ``root/label`` from the build ``base`` (a label under ``root`` or an interpreter) and ``patch``.

    The patch must be a unified diff with git's a/ and b/ prefixes; its files under ``vllm/`` are
    applied (tests, docs and CI files of the pull request are left out). It is checked against the
    base with ``patch --dry-run`` before anything is written. Returns the facts written to
    ``build.json``.

    Raises
    ------
    app.builds.diffs.DiffError
        The patch touches compiled sources (those need ``--wheel``), or nothing under ``vllm/``.
    BuildError
        The label exists, the base is not found or cannot import vLLM, or the patch does not apply
        (with ``patch``'s own words). Nothing is left behind.
    """
    folder = folder_for(label, root=root)
    try:
        text = patch.read_text()
    except OSError as exc:
        raise BuildError(f"--patch {patch}: {exc.strerror}") from None
    changes = diffs.for_package(diffs.split(text))
    base_python = resolve_base(base, root=root)
    installed = probe(base_python)
    body = "".join(change.text for change in changes)
    # The copy's parent stands for the repository root, so the diff's ``vllm/...`` paths land in it.
    _apply(body, installed.package.parent, dry_run=True)
    site = folder / SITE
    try:
        site.mkdir(parents=True)
        shutil.copytree(installed.package, site / diffs.PACKAGE, copy_function=_link_or_copy, symlinks=True)
        for change in changes:
            _own_copy(site / change.path)
        _apply(body, site, dry_run=False)
        write_wrapper(folder, installed.executable, pythonpath=site)
        facts = BuildFacts(
            label=label,
            kind=BuildKind.PATCH,
            vllm_version=installed.version,
            base=base,
            interpreter=str(installed.executable),
            site=str(site),
            patch_sha256=diffs.sha256(text),
            patch_files=[change.path for change in changes],
            commit=commit,
            committed_at=committed_at,
        )
        write_facts(folder, facts)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return facts


def _apply(body: str, where: Path, *, dry_run: bool) -> None:
    """``patch -p1`` in ``where``; BuildError with patch's output when a hunk does not apply."""
    argv = ["patch", "-p1", "--batch", "--forward", "--no-backup-if-mismatch", "-d", str(where)]
    try:
        out = subprocess.run([*argv, *(["--dry-run"] if dry_run else [])], input=body, capture_output=True, text=True)
    except FileNotFoundError:
        raise BuildError("the 'patch' program is not installed (apt-get install patch)") from None
    if out.returncode != 0:
        raise BuildError(f"the patch does not apply to the base's vLLM ({where}):\n{(out.stdout + out.stderr).strip()}")


def _link_or_copy(source: str, target: str) -> None:
    """A hard link, or a copy when the base lies on another file system (links cannot cross one)."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _own_copy(path: Path) -> None:
    """Give ``path`` its own inode before it changes, so the base's file (the same inode) stays as it was.

    ``patch`` may rewrite a file in place; a new file (not in the base) has nothing to break.
    """
    if not path.is_file():
        return
    data = path.read_bytes()
    mode = path.stat().st_mode
    path.unlink()
    path.write_bytes(data)
    path.chmod(mode)
