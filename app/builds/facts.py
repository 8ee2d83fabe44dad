"""A made build's folder: its interpreter, its ``build.json``, and how a base named on the command line is found.

A build made by ``draftbench build create`` lives in ``ROOT/LABEL/``: ``python`` (a wrapper script the
worker runs as the build's interpreter) and ``build.json`` (the facts below) beside it. A worker given
``--build LABEL=ROOT/LABEL/python`` reads ``build.json`` and registers those facts with the label.
"""

import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from app.enums import BuildKind

DEFAULT_ROOT = Path.home() / ".cache" / "draftbench" / "builds"
FACTS_FILE = "build.json"
WRAPPER = "python"
# Asks an interpreter where its vLLM is, which Python really runs (a wrapper's exec target) and the version.
_PROBE = (
    "import json, os, sys, vllm; "
    "print(json.dumps({'package': os.path.dirname(vllm.__file__), 'executable': sys.executable, "
    "'version': vllm.__version__}))"
)


class BuildError(RuntimeError):
    """A build cannot be made or found; the message says what to do."""


class BuildFacts(BaseModel):
    """What ``build.json`` records: enough to say what a result ran and to make the build again."""

    label: str
    kind: BuildKind
    vllm_version: str
    base: str | None = Field(default=None, description="The base's label or interpreter, as given to --from")
    interpreter: str = Field(description="The Python the wrapper runs (the base's own, never a wrapper)")
    site: str | None = Field(default=None, description="The folder put first on PYTHONPATH (patch builds)")
    patch_sha256: str | None = None
    patch_files: list[str] = Field(default_factory=list)
    source: str | None = Field(default=None, description="The wheel's path or URL, or the pip requirement")
    commit: str | None = None
    committed_at: datetime | None = None
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))


class Installed(BaseModel):
    """What an interpreter says about its vLLM."""

    package: Path
    executable: Path
    version: str


def probe(python: Path, *, timeout_s: float = 300.0) -> Installed:
    """Import vLLM in ``python`` and say where it is; BuildError with vLLM's last line when it cannot."""
    try:
        out = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"{python} could not be run: {exc}") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise BuildError(f"{python} cannot import vLLM: {last}")
    return Installed.model_validate_json(out.stdout.strip().splitlines()[-1])


def resolve_base(base: str, *, root: Path) -> Path:
    """The interpreter of ``--from BASE``: a build made under ``root`` by that label, or an interpreter's path."""
    made = root / base / WRAPPER
    if made.is_file():
        return made
    path = Path(base).expanduser()
    if path.is_file() and os.access(path, os.X_OK):
        return path
    known = sorted(p.parent.name for p in root.glob(f"*/{FACTS_FILE}")) if root.is_dir() else []
    raise BuildError(
        f"--from {base!r}: no build of that label under {root} and no executable file at that path; "
        f"builds there: {', '.join(known) or 'none'}"
    )


def folder_for(label: str, *, root: Path) -> Path:
    """``root/label``, which must not exist yet (a build is never changed in place: results point at it)."""
    folder = root / label
    if folder.exists():
        raise BuildError(f"build {label!r} already exists at {folder}: pick another label or remove that folder")
    return folder


def write_wrapper(folder: Path, interpreter: Path, *, pythonpath: Path | None = None) -> Path:
    """``folder/python``: a shell script that runs ``interpreter``, with ``pythonpath`` first on PYTHONPATH.

    A script, not a symlink: a venv's interpreter finds its ``pyvenv.cfg`` through the path it was
    started by, and PYTHONPATH must reach vLLM's engine processes, which inherit the environment.
    """
    wrapper = folder / WRAPPER
    first = f'PYTHONPATH="{pythonpath}${{PYTHONPATH:+:$PYTHONPATH}}" ' if pythonpath else ""
    wrapper.write_text(f'#!/bin/sh\n{first}exec "{interpreter}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def write_facts(folder: Path, facts: BuildFacts) -> None:
    (folder / FACTS_FILE).write_text(json.dumps(facts.model_dump(mode="json"), indent=2) + "\n")


def read_facts(python: Path) -> BuildFacts | None:
    """The facts beside a build's interpreter, or None for an interpreter someone installed by hand."""
    path = python.parent / FACTS_FILE
    if not path.is_file():
        return None
    return BuildFacts.model_validate_json(path.read_text())
