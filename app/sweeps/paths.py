"""Which model and dataset references a sweep may name: hub ids, or paths under the operator's roots.

The rule, for every model, tokenizer, draft model and dataset:

1. Only letters, digits and ``. _ - / + @ = ,`` (no spaces, quotes or shell metacharacters).
2. Never ``..``.
3. A model may be a Hugging Face id, ``name`` or ``org/name`` (``^[A-Za-z0-9][\\w.-]*(/[\\w.-]+)?$``):
   the worker's vLLM fetches it, no local path is involved.
4. Anything else is a filesystem path. When roots are configured it must be absolute and its
   ``os.path.realpath`` (symlinks followed) must lie inside one of them. No roots: any path.

A ``custom_class`` draft is a Python import path (``package.module.Class``), checked as such.

What the answers tell a caller about the service's host is kept to what the rule needs: a path outside the
roots gets one refusal whatever it resolves to, or whether it resolves at all (where ``/proc/self/cwd`` leads,
or that a link cannot be read, is the host's business); a dataset that is not a file the service can read
gets one refusal whatever the reason (missing, a folder, no permission, a name too long). Without roots a
caller still learns which paths are files the service can read: docs/security.md#paths says so, and that
the roots close it.

Functions of strings and the filesystem's metadata (``realpath``, ``stat``); they raise nothing.
"""

import os
import re
import stat
from collections.abc import Sequence

SAFE = re.compile(r"[\w./+@=,-]+")
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(?:/[\w.-]+)?")
IMPORT_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
SAFE_CHARS = "letters, digits and . _ - / + @ = ,"


def problem(value: str, *, roots: Sequence[str], kind: str, hub_ok: bool) -> str | None:
    """Why ``value`` may not be used as a ``kind`` ("model", "dataset") reference, or None if it may."""
    if not SAFE.fullmatch(value):
        return f"{kind} {value!r} may contain only {SAFE_CHARS}"
    if ".." in value:
        return f"{kind} {value!r} must not contain '..'"
    if hub_ok and HUB_ID.fullmatch(value):
        return None
    if not roots:
        return None
    where = f"the allowed {kind} roots ({', '.join(roots)})"
    if not value.startswith("/"):
        return f"{kind} {value!r} must be an absolute path inside {where}"
    if _resolves_inside(value, roots):
        return None
    return f"{kind} {value!r} is outside {where} or cannot be read"


def unreadable(value: str, *, kind: str) -> str | None:
    """Why ``value`` is not a regular file the service may read, or None; the same answer for every reason.

    ``stat`` and ``access`` only: the file is never opened (a FIFO would block), and errors pathlib's ``is_file``
    lets through (ENAMETOOLONG, EACCES under ``/proc/1/cwd``) are a refusal like any other, never a 500.
    """
    try:
        readable = stat.S_ISREG(os.stat(value).st_mode) and os.access(value, os.R_OK)
    except OSError:
        readable = False
    return None if readable else f"{kind} {value!r} cannot be read: the service finds no file there it may read"


def import_path_problem(value: str) -> str | None:
    """Why ``value`` is not a Python import path (``package.module.Class``), or None."""
    if IMPORT_PATH.fullmatch(value):
        return None
    return f"custom_class model {value!r} must be a Python import path such as 'package.module.Class'"


def _resolves_inside(value: str, roots: Sequence[str]) -> bool:
    """Whether ``value``, symlinks followed, lies inside a root; False when a link on the way cannot be read
    (``os.path.realpath`` raises for a link it may not read, /proc/1/cwd: EACCES)."""
    try:
        real = os.path.realpath(value)
        return any(_inside(real, os.path.realpath(root)) for root in roots)
    except OSError:
        return False


def _inside(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")
