"""How well crash signatures group the corpus of real vLLM crash logs (tests/data/crashlogs) by root cause.

    .venv/bin/python -m benchmarks.crash_grouping [--module PATH] [--groups [--part tuning|held-out|all]]

Each log is signed as the service signs a crashed cell (with the cell's configuration where the report
gives it), and the grouping is scored against the labelled causes, on the whole corpus and on each of
its parts (index.json's split: the tuning part, older issues and our own runs, and the held-out part,
newer issues): purity, pairwise precision and recall, the number of groups, the most causes one group
holds, and the logs signed only by their exit code. ``--module`` signs with another copy of
``app/crashes/signatures.py``, e.g. the last committed one:

    git show HEAD:app/crashes/signatures.py > /tmp/orig_signatures.py
    .venv/bin/python -m benchmarks.crash_grouping --module /tmp/orig_signatures.py

A module whose ``signature_for`` takes no ``context`` is called without one. ``--groups`` prints each
group of one part (the tuning part unless ``--part`` says otherwise: rules are changed by looking at
the tuning part's failures only) with its members' causes.
"""

import argparse
import inspect
from collections import defaultdict
from pathlib import Path

from benchmarks.signature_worst_cases import load
from tests.crashes.corpus import HELD_OUT, TUNING, parts, score
from tests.crashes.corpus import load as load_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--module", type=Path, help="a signatures.py to load instead of app.crashes.signatures")
    parser.add_argument("--groups", action="store_true", help="print every group of one part and its members")
    parser.add_argument("--part", choices=(TUNING, HELD_OUT, "all"), default=TUNING, help="the part --groups prints")
    args = parser.parse_args()

    signatures = load(args.module)
    takes_context = "context" in inspect.signature(signatures.signature_for).parameters
    entries = load_corpus()
    infos = []
    for entry in entries:
        extra = {"context": entry.context()} if takes_context else {}
        infos.append(signatures.signature_for(entry.log, exit_code=entry.exit_code, signal=entry.signal, timed_out=False, **extra))
    split = {"all": list(range(len(entries))), **parts(entries)}

    if args.groups:
        members = defaultdict(list)
        for i in split[args.part]:
            members[infos[i].signature].append((entries[i], infos[i]))
        for group in sorted(members.values(), key=lambda g: g[0][0].cause):
            info = group[0][1]
            print(f"[{info.kind.value}] {getattr(info, 'title', None) or info.message}")
            for entry, _ in group:
                print(f"    {entry.cause:45} {entry.file}")
    print(f"module: {signatures.__file__}")
    print(f"{'part':9} {'logs':>4} {'causes':>6} {'groups':>6} {'purity':>6} {'precision':>9} {'recall':>6} "
          f"{'most causes':>11} {'by exit code':>12}")
    for name, indices in split.items():
        scores = score([entries[i].cause for i in indices], [infos[i].signature for i in indices])
        by_exit = sum(infos[i].kind.value == "exit" for i in indices)
        causes = len({entries[i].cause for i in indices})
        print(
            f"{name:9} {len(indices):>4} {causes:>6} {scores.groups:>6} {scores.purity:>6.3f} {scores.precision:>9.3f}"
            f" {scores.recall:>6.3f} {scores.most_causes:>11} {by_exit:>12}"
        )


if __name__ == "__main__":
    main()
