"""Which model and dataset references a sweep may name: hub ids, or paths under the operator's roots.

The rule, for every model, tokenizer, draft model and dataset:

1. Only letters, digits and ``. _ - / + @ = ,`` (no spaces, quotes or shell metacharacters).
2. Never ``..``.
3. A model may be a Hugging Face id, ``name`` or ``org/name`` (``^[A-Za-z0-9][\\w.-]*(/[\\w.-]+)?$``):
   the worker's vLLM fetches it, no local path is involved.
4. Anything else is a filesystem path. When roots are configured it must be absolute and its
   ``os.path.realpath`` (symlinks followed) must lie inside one of them. No roots: any path.

A ``custom_class`` draft is a Python import path (``package.module.Class``), checked as such.
Pure functions of strings and the filesystem's symlinks; they raise nothing.
"""

import os
import re
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
    real = os.path.realpath(value)
    if any(_inside(real, os.path.realpath(root)) for root in roots):
        return None
    if real != os.path.normpath(value):
        return f"{kind} {value!r} resolves to {real!r}, outside {where}"
    return f"{kind} {value!r} is outside {where}"


def import_path_problem(value: str) -> str | None:
    """Why ``value`` is not a Python import path (``package.module.Class``), or None."""
    if IMPORT_PATH.fullmatch(value):
        return None
    return f"custom_class model {value!r} must be a Python import path such as 'package.module.Class'"


def _inside(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")
