"""A build whose vLLM comes from a wheel (a pull request that changes compiled code) or a pip requirement.

A new virtual environment with the wheel's vLLM alone installed in it (``pip install --no-deps``), that
sees the base's site-packages after its own through a ``.pth`` file: torch and the other dependencies
are the base's, shared, not downloaded again.
"""

import shutil
import subprocess
from datetime import datetime
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from app.builds.facts import BuildError, BuildFacts, folder_for, probe, resolve_base, write_facts, write_wrapper
from app.enums import BuildKind

VENV = "venv"
_SITE_PACKAGES = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
_BASE_PYTHON = "import sys; print(getattr(sys, '_base_executable', sys.executable))"


def create(
    *, label: str, base: str, requirement: str, kind: BuildKind, root: Path, commit: str | None = None,
    committed_at: datetime | None = None,
) -> BuildFacts:
    """Make ``root/label`` with ``requirement`` (a wheel's path or URL, or a pip requirement) over ``base``.

    Raises
    ------
    BuildError
        The label exists, the base is not found or cannot import vLLM, pip fails (its last lines are
        in the message), or the new environment cannot import vLLM. Nothing is left behind.
    """
    if kind not in (BuildKind.WHEEL, BuildKind.PIP):
        raise BuildError(f"a wheel build is of kind wheel or pip, not {kind}")
    _check_requirement(requirement, kind)
    folder = folder_for(label, root=root)
    base_python = resolve_base(base, root=root)
    installed = probe(base_python)
    base_site = _ask(installed.executable, _SITE_PACKAGES)
    try:
        folder.mkdir(parents=True)
        venv = folder / VENV
        _run([_ask(installed.executable, _BASE_PYTHON), "-m", "venv", "--without-pip", str(venv)], "python -m venv")
        python = venv / "bin" / "python"
        # addsitedir, not a bare path: the base's own .pth files (editable installs, namespace packages) count too.
        pth = f"import site; site.addsitedir({base_site!r})\n"
        (Path(_ask(python, _SITE_PACKAGES)) / "_draftbench_base.pth").write_text(pth)
        # The base's pip, run as the new environment's interpreter: it installs into the new one.
        # After "--" pip reads nothing as an option, whatever the requirement looks like.
        _run([str(python), "-m", "pip", "install", "--no-deps", "--no-input", "--", requirement], "pip install")
        wrapper = write_wrapper(folder, python)
        built = probe(wrapper)
        if built.package.parent == installed.package.parent:
            raise BuildError(f"{requirement} installed no vllm package: the new environment still imports the base's")
        facts = BuildFacts(
            label=label, kind=kind, vllm_version=built.version, base=base, interpreter=str(python),
            source=requirement, commit=commit, committed_at=committed_at,
        )
        write_facts(folder, facts)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return facts


def _check_requirement(requirement: str, kind: BuildKind) -> None:
    """A wheel is a path or URL, a pip build one PEP 508 requirement; neither may be read by pip as an option
    (``-r FILE`` would install what that file names, from the index it names)."""
    flag = "--wheel" if kind == BuildKind.WHEEL else "--pip"
    allowed = (
        "a wheel's path or URL" if kind == BuildKind.WHEEL
        else "one requirement specifier (PEP 508), e.g. 'vllm==0.33.0' or 'vllm @ https://.../vllm-0.33.0-cp38-abi3-linux_x86_64.whl'"
    )
    if requirement.startswith("-") or not requirement.strip():
        raise BuildError(f"{flag} {requirement!r}: pip options are not accepted; give {allowed}")
    if kind == BuildKind.PIP:
        try:
            Requirement(requirement)
        except InvalidRequirement as exc:
            raise BuildError(f"{flag} {requirement!r}: not a requirement ({str(exc).splitlines()[0]}); give {allowed}") from None


def _ask(python: Path | str, code: str) -> str:
    return _run([str(python), "-c", code], f"{python}").strip().splitlines()[-1]


def _run(argv: list[str], what: str) -> str:
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        tail = "\n".join((out.stdout + out.stderr).strip().splitlines()[-5:])
        raise BuildError(f"{what} failed:\n{tail}")
    return out.stdout
