"""How well crash signatures group the corpus of real vLLM crash logs (tests/data/crashlogs) by root cause.

    .venv/bin/python benchmarks/crash_grouping.py [--module PATH] [--groups]

Each log is signed as the service signs a crashed cell (with the cell's configuration where the report
gives it), and the grouping is scored against the labelled causes: purity, pairwise precision and
recall, the number of groups, the most causes one group holds, and the logs titled by their exit code.
``--module`` signs with another copy of ``app/crashes/signatures.py``, e.g. the last committed one:

    git show HEAD:app/crashes/signatures.py > /tmp/orig_signatures.py
    .venv/bin/python benchmarks/crash_grouping.py --module /tmp/orig_signatures.py

A module whose ``signature_for`` takes no ``context`` is called without one. ``--groups`` prints each
group with its members' causes.
"""

import argparse
import inspect
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.signature_worst_cases import load  # noqa: E402
from tests.crashes.corpus import load as load_corpus  # noqa: E402
from tests.crashes.corpus import score  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--module", type=Path, help="a signatures.py to load instead of app.crashes.signatures")
    parser.add_argument("--groups", action="store_true", help="print every group and its members")
    args = parser.parse_args()

    signatures = load(args.module)
    takes_context = "context" in inspect.signature(signatures.signature_for).parameters
    entries = load_corpus()
    infos = []
    for entry in entries:
        extra = {"context": entry.context()} if takes_context else {}
        infos.append(signatures.signature_for(entry.log, exit_code=entry.exit_code, signal=entry.signal, timed_out=False, **extra))
    scores = score([e.cause for e in entries], [i.signature for i in infos])
    by_exit = sum(info.kind.value == "exit" for info in infos)

    if args.groups:
        members = defaultdict(list)
        for entry, info in zip(entries, infos, strict=True):
            members[info.signature].append((entry, info))
        for group in sorted(members.values(), key=lambda g: g[0][0].cause):
            info = group[0][1]
            print(f"[{info.kind.value}] {getattr(info, 'title', None) or info.message}")
            for entry, _ in group:
                print(f"    {entry.cause:45} {entry.file}")
    print(f"module: {signatures.__file__}")
    print(f"logs {len(entries)}, causes {len({e.cause for e in entries})}, groups {scores.groups}")
    print(f"purity {scores.purity:.3f}, pairwise precision {scores.precision:.3f}, recall {scores.recall:.3f}")
    print(f"most causes in one group {scores.most_causes}, logs signed by their exit code {by_exit}")


if __name__ == "__main__":
    main()
