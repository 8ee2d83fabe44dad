"""The README is the manual: short, its enum table the enums of app/enums.py as the service spells them, and
every link in it and in the pages of docs/ leads somewhere."""

import re
from collections import Counter
from enum import StrEnum
from pathlib import Path

from app.enums import (
    AttentionBackend,
    BisectionState,
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
DOCS = README.parent / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
# The manual reads in ten minutes; details live in docs/.
MAX_README_LINES = 320
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
    "bisection states": BisectionState,
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


def test_the_readme_stays_a_short_manual() -> None:
    lines = len(README.read_text().splitlines())
    assert lines < MAX_README_LINES, f"README.md has {lines} lines: move details to a page of docs/"


FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.MULTILINE)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, code marks and punctuation but ``-`` and ``_`` dropped,
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings; a repeated heading gets ``-1``, ``-2``... as GitHub numbers them.
    Lines in code blocks (a shell comment, a Markdown example) are no headings."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        name = slug(heading)
        found.add(f"{name}-{seen[name]}" if seen[name] else name)
        seen[name] += 1
    return found


def links(page: Path) -> list[str]:
    """The targets of a page's Markdown links, outside code."""
    return LINK.findall(INLINE_CODE.sub("", FENCE.sub("", page.read_text())))


def test_slug_spells_anchors_as_github_does() -> None:
    assert slug("API (`/api/v1`, OpenAPI at `/docs` and `/redoc`)") == "api-apiv1-openapi-at-docs-and-redoc"
    assert slug("Efficiency: where a cell's time goes") == "efficiency-where-a-cells-time-goes"
    assert slug("`make demo`, step by step") == "make-demo-step-by-step"
    assert slug("FULL_AND_PIECEWISE -> PIECEWISE") == "full_and_piecewise---piecewise"


def test_every_relative_link_in_the_readme_and_docs_leads_to_a_file_and_its_heading() -> None:
    broken = []
    for page in PAGES:
        for target in links(page):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{page.name}: {target} (no such heading in {file.name})")
    assert broken == []


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {(README.parent / target.partition("#")[0]).resolve() for target in links(README)}
    assert [page.name for page in PAGES[1:] if page.resolve() not in linked] == []


def test_every_page_of_docs_has_a_title_and_says_what_it_is() -> None:
    for page in PAGES[1:]:
        title, blank, intro = page.read_text().split("\n", 3)[:3]
        assert title.startswith("# ") and blank == "" and intro and not intro.startswith("#"), page.name
