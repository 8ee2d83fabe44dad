"""Crash signing on hostile logs: seconds for ``normalise`` and ``signature_for`` per input, against a bound.

    .venv/bin/python -m benchmarks.signature_worst_cases [--bound-s 0.5] [--repeat 3] [--module PATH] [--only NAME]

A crashed cell's log comes from the cell's process, so its text is whatever the code under test
printed: a regex that backtracks over the same characters from many start positions turns one
32 KB exception message into seconds of CPU held under the GIL, in the request that reports the
crash. Each input below is one such shape. Message-shaped inputs go to ``normalise`` as they are
and to ``signature_for`` as the exception line of a short traceback; log-shaped inputs go to both
as they are. Each function is timed on each input (the fastest of ``--repeat`` runs), and the input
is marked FAIL when either time is over ``--bound-s``; any FAIL makes the script exit 1.

``--module`` signs with another copy of the module, e.g. the last committed one, to compare:

    git show HEAD:app/crashes/signatures.py > /tmp/orig_signatures.py
    .venv/bin/python -m benchmarks.signature_worst_cases --module /tmp/orig_signatures.py --repeat 1
"""

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType

VENV = "/opt/draftbench/venvs/vllm-0.26.0/lib/python3.12/site-packages"
FRAME = f'  File "{VENV}/vllm/v1/engine/core.py", line 834, in run_engine_core\n    engine_core.run_busy_loop()\n'


def in_traceback(message: str) -> str:
    """``message`` as the exception line of a one-frame traceback."""
    return f"Traceback (most recent call last):\n{FRAME}RuntimeError: {message}\n"


def repeat_to(unit: str, size: int) -> str:
    return unit * (size // len(unit))


def inputs() -> list[tuple[str, str, str]]:
    """``(name, text for normalise, log for signature_for)``."""
    messages = {
        '"a." * 16000': "a." * 16000,
        '"a/" * 16000': "a/" * 16000,
        '"/" * 32000': "/" * 32000,
        '"1" * 32000': "1" * 32000,
        '"1." * 16000': "1." * 16000,
        '"0x" + "f" * 32000': "0x" + "f" * 32000,
        '"http://" + "a" * 32000': "http://" + "a" * 32000,
        '"2026-11-30 " * 3000': "2026-11-30 " * 3000,
        '"a/" * 16000 + "a.py"': "a/" * 16000 + "a.py",
        '"a.b/" * 8000': "a.b/" * 8000,
        '"-a/" * 10000': "-a/" * 10000,
        '"x//" * 10000': "x//" * 10000,
        '"1.1e" * 8000': "1.1e" * 8000,
        '"11-30 00:01:02." + "1" * 32000': "11-30 00:01:02." + "1" * 32000,
        '"0x" + "f" * 32000 + "g"': "0x" + "f" * 32000 + "g",
        "32 KB of real words": repeat_to("cannot open /tmp/a8x/model/config.json at 0x7f3a2c001e40, 1.23 GiB free; ", 32768),
    }
    cases = [(name, text, in_traceback(text)) for name, text in messages.items()]

    cuda = "CUDA error: " + "a." * 16000
    cases.append(('"CUDA error: " + "a." * 16000, no traceback', cuda, f"terminate called\n  what():  {cuda}\n"))
    paren = "(" * 100_000
    cases.append(('"(" * 100000, one line', paren, paren + "\n"))
    pids = repeat_to("(x pid=1)", 100_000)
    cases.append(('"(x pid=1)" * 11111, one line', pids, pids + "\n"))
    ansi = "\x1b[" + ";" * 100_000
    cases.append(('"\\x1b[" + ";" * 100000, one line', ansi, ansi + "\n"))
    logger = "ERROR 11-30 00:01:02 [" + "x" * 100_000
    cases.append(('"ERROR 11-30 00:01:02 [" + "x" * 100000', logger, logger + "\n"))

    many = repeat_to(f"Traceback (most recent call last):\n{FRAME}", 16 * 2**20)
    cases.append(("16 MB of traceback starts and frames", many, many))
    full = repeat_to(in_traceback("a." * 20), 16 * 2**20)
    cases.append(("16 MB of whole tracebacks", full, full))
    deep = "Traceback (most recent call last):\n" + repeat_to(FRAME, 16 * 2**20) + "ValueError: deep\n"
    cases.append(("16 MB traceback of frames", deep, deep))
    indented = in_traceback("head") + repeat_to("    see a.b/c.d at 0x1f, 1.5 GiB\n", 16 * 2**20)
    cases.append(("16 MB message of indented lines", indented, indented))
    dead = repeat_to("Traceback (most recent call last):\nvllm.EngineDeadError: see root cause above\n", 16 * 2**20)
    cases.append(("16 MB of wrapper tracebacks, all read", dead, dead))
    prefixed = repeat_to("(EngineCore_DP0 pid=4321) ERROR 11-30 00:01:02 [core.py:1510] " + "a." * 40 + "\n", 16 * 2**20)
    cases.append(("16 MB of prefixed vLLM lines", prefixed, prefixed))
    # Tracebacks cut before their exception line are read for their frames' source lines and a
    # raise's string literals: each of 8 frames with a statement of 8 lines of quotes.
    statement = "    raise ValueError(" + "'a' \"b" * 1000 + "\n" + ("    '" + "\"'" * 2000 + "\n") * 7
    cut = repeat_to("Traceback (most recent call last):\n" + (FRAME.splitlines(True)[0] + statement) * 8, 16 * 2**20)
    cases.append(("16 MB of cut tracebacks, raise lines of quotes", cut, cut))
    glued = repeat_to("Exception in worker " + "w" * 150 + " while processing method " + "m: " * 2000
                      + ", Traceback (most recent call last):\n" + FRAME, 16 * 2**20)
    cases.append(("16 MB of glued V0 lead-ins, cut", glued, glued))
    # Line count, not line length: each line costs a few steps of Python, so 16 MB of empty lines
    # (16 million of them) is the most a log's size buys.
    empty = "\n" * (16 * 2**20)
    cases.append(("16 MB of empty lines", empty, empty))
    return cases


def load(path: Path | None) -> ModuleType:
    if path is None:
        from app.crashes import signatures

        return signatures
    spec = importlib.util.spec_from_file_location("signatures_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seconds(call: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 2**10:.1f} KB" if n >= 2**10 else f"{n} B"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bound-s", type=float, default=0.5, help="most seconds each function may take per input")
    parser.add_argument("--module", type=Path, help="a signatures.py to load instead of app.crashes.signatures")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the fastest counts")
    parser.add_argument("--only", action="append", help="run only inputs whose name contains this (repeatable)")
    args = parser.parse_args()

    signatures = load(args.module)
    cases = [case for case in inputs() if not args.only or any(part in case[0] for part in args.only)]
    rows = []
    for name, text, log in cases:
        normalise_s = seconds(partial(signatures.normalise, text), args.repeat)
        sign_s = seconds(partial(signatures.signature_for, log, exit_code=1, signal=None, timed_out=False), args.repeat)
        verdict = "PASS" if max(normalise_s, sign_s) <= args.bound_s else "FAIL"
        rows.append((name, len(text), len(log), normalise_s, sign_s, verdict))
        print(f"  {verdict} {name}: normalise {normalise_s:.4f} s, signature_for {sign_s:.4f} s", file=sys.stderr)

    print(f"module: {signatures.__file__}; bound {args.bound_s} s per call")
    width = max(len(row[0]) for row in rows)
    print(f"{'input':<{width}} {'normalise in':>12} {'sign in':>9} {'normalise s':>12} {'signature_for s':>16} {'':>4}")
    for name, text_len, log_len, normalise_s, sign_s, verdict in rows:
        print(f"{name:<{width}} {size(text_len):>12} {size(log_len):>9} {normalise_s:>12.4f} {sign_s:>16.4f} {verdict:>4}")
    failed = sum(row[-1] == "FAIL" for row in rows)
    print(f"{len(rows) - failed} of {len(rows)} inputs within {args.bound_s} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
