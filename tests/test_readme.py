"""The README's enum table is the enums of app/enums.py, spelled as the service spells them."""

import re
from enum import StrEnum
from pathlib import Path

from app.enums import (
    AttentionBackend,
    BuildKind,
    BuiltinDataset,
    CrashKind,
    GpuKind,
    GraphMode,
    JobState,
    SpecMethod,
    SweepState,
    TokenScope,
)

README = Path(__file__).resolve().parents[1] / "README.md"
# The developers' folder beside the checkout, which a user's clone does not have (spelt apart, so
# that this file does not name it).
SHARED = ".." + "/" + "shared"
TABLE: dict[str, type[StrEnum]] = {
    "backends": AttentionBackend,
    "graph modes": GraphMode,
    "methods": SpecMethod,
    "GPU kinds": GpuKind,
    "built-in datasets": BuiltinDataset,
    "job states": JobState,
    "sweep states": SweepState,
    "crash kinds": CrashKind,
    "token scopes": TokenScope,
    "build kinds": BuildKind,
}


def enum_table() -> str:
    rows = [f"| {name} | {', '.join(member.value for member in enum)} |" for name, enum in TABLE.items()]
    return "\n".join(["| enum | values |", "|---|---|", *rows])


def test_the_readme_enum_table_is_generated_from_app_enums() -> None:
    found = re.search(r"<!-- enums:begin -->\n(.*?)\n<!-- enums:end -->", README.read_text(), re.DOTALL)
    assert found, "the README lost its enum table markers"
    assert found.group(1) == enum_table(), f"paste this between the markers:\n{enum_table()}"


def test_nothing_in_the_code_or_its_configuration_reads_outside_the_checkout() -> None:
    # (docs/h200-report.md names the developers' GPU recipe, which is not part of the project.)
    root = README.parent
    offenders = [
        str(path.relative_to(root))
        for pattern in ("*.py", "Makefile", "*.yml", "*.yaml", "*.toml", "*.sh", "README.md")
        for path in root.rglob(pattern)
        if ".venv" not in path.parts and "var" not in path.parts and "data" not in path.parts
        and SHARED in path.read_text(errors="replace")
    ]
    assert offenders == []
