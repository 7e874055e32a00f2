"""Reliability figures: the fuzzers, the fault-injection table and the hostile-model tests, run and counted.

    python tools/reliability.py            # prints a markdown table (docs/performance.md, "Reliability")

It runs pytest on tests/test_fuzz.py, tests/test_fuzz_cli.py, tests/test_faults.py and tests/test_model_safety.py
with hypothesis' statistics, and counts: inputs tried (fuzz examples, fault rows, hostile model cases), faults
injected, tracebacks and internal errors (each test fails on one, so: failed tests), and user files lost or replaced
(the fault rows compare every file of the output directory before and after).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ["tests/test_fuzz.py", "tests/test_fuzz_cli.py", "tests/test_faults.py", "tests/test_model_safety.py"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    t0 = time.monotonic()
    proc = subprocess.run(
        [args.python, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "--hypothesis-show-statistics", *FILES],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - t0
    out = proc.stdout
    examples = sum(int(n) for n in re.findall(r"- (\d+) passing, \d+ failing", out))
    faults = re.findall(
        r"^PASSED tests/test_faults\.py::test_fault\[(.+)-(none|enospc|eacces|erofs|closed-stdout"
        r"|sigterm)\]$",
        out,
        re.M,
    )
    injected = [f for f in faults if f[1] != "none"]
    hostile = len(re.findall(r"^PASSED tests/test_model_safety\.py::", out, re.M))
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", out, re.M)  # an error in a fixture fails its test too
    commands = sorted({c for c, _ in faults})
    print("| figure | value |\n|---|---|")
    print(f"| fuzzed inputs tried (hypothesis examples, every subcommand and parser) | {examples:,} |")
    print(f"| subcommands under faults | {len(commands)} |")
    print(f"| faults injected (ENOSPC, EACCES, EROFS, closed stdout, SIGTERM; rows) | {len(injected)} |")
    print(f"| hostile or damaged model cases (tests; 192 array edits in one, 15 partial edits) | {hostile} |")
    print(f"| tracebacks or internal errors (failed tests) | {len(failed)} |")
    print(f"| user files lost or replaced (failed fault rows) | {sum('test_faults' in f for f in failed)} |")
    print(f"| time | {seconds:.0f} s |")
    for f in failed:
        print(f"failed: {f}", file=sys.stderr)
    return 1 if proc.returncode not in (0,) else 0


if __name__ == "__main__":
    sys.exit(main())
