"""docs/h200-report.md's tables are what benchmarks/h200_report.py prints from the stored H200 databases, so
a change to the statistics or to the databases cannot leave the report's figures behind."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = "tests/data/h200-proof-2026-11-30"
# The command docs/h200-report.md gives under "How to reproduce".
COMMAND = [
    f"{DATA}/proof.sqlite", "--capture", f"{DATA}/capture-bug.sqlite", "--before", "tests/data/h200-matrix",
    "--more", f"{DATA}/batch2.sqlite", "--more", f"{DATA}/batch3.sqlite", "--more", f"{DATA}/batch4.sqlite",
    "--more", f"{DATA}/alone.sqlite", "--more", "tests/data/h200-proof-2026-12-01/noise.sqlite",
    "--peer", f"batch2={DATA}/peer", "--peer", f"batch4={DATA}/peer-batch4", "--peer", f"alone={DATA}/peer-alone",
]


def test_the_reports_tables_are_what_h200_report_prints() -> None:
    report = (ROOT / "docs" / "h200-report.md").read_text()
    assert " ".join(COMMAND) in re.sub(r"\s*\\\n\s*", " ", report).replace("$D", DATA), "the report's command moved"
    printed = subprocess.run(
        [sys.executable, "-m", "benchmarks.h200_report", *COMMAND], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    tables = report.partition("\n## Tables\n")[2]
    assert tables, "the report lost its Tables section"
    # The report nests the printed tables one heading level down, under its own "Tables".
    assert tables.endswith(re.sub(r"^## ", "### ", printed, flags=re.MULTILINE))
