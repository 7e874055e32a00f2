#!/usr/bin/env python3
"""Benchmark: the raw route with its source against the raw route without it, whole process (#63).

    python tools/bench_raw_source.py --model MODEL --source SRC --input HYP [--runs 5] [--jobs 1] [--before REV]

Each round runs, one after the other, ``moses-recaser recase --raw --model MODEL --input HYP -o OUT`` (no source:
monolingual) and the same command with ``--source SRC`` (aligned in process), each in a process of its own (start,
imports, model load, tokenizing, aligning, recasing, writing); ``--before REV`` adds the command with the source at
that revision (a git worktree of it, on ``PYTHONPATH``: what the route cost there). Prints each command's median,
least and most wall time and peak RSS over ``--runs`` rounds, and the ratios of the medians to the route without a
source, measured in the same rounds. Peak RSS is that of the whole process tree (the sum over the process and its
children, eflomal's included, sampled every 10 ms), or the process' own peak where that is larger.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import tree_rss_kib  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def run(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall time (s) and peak RSS (MiB) of the process tree of ``cmd``, run in ``cwd`` (``python -m`` imports from
    its working directory first: from a clone's root, the clone's code would shadow ``PYTHONPATH``'s)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, stop = 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, tree_rss_kib(proc.pid))
            stop.wait(0.01)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    stop.set()
    thread.join()
    err = proc.stderr.read().decode() if proc.stderr else ""
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(cmd)}\n{err}")
    return wall, max(peak, usage.ru_maxrss) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--source", required=True, help="the raw source of --input")
    ap.add_argument("--input", required=True, help="raw MT output, lowercased or not")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--before", metavar="REV", help="also time the route with the source at this git revision")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "out")
        model, inp, src = (os.path.abspath(p) for p in (args.model, args.input, args.source))
        base = [sys.executable, "-m", "moses_recaser", "-q", "recase", "--raw", "--model", model]
        base += ["--input", inp, "--jobs", str(args.jobs), "-o", out]
        here = {**os.environ, "PYTHONPATH": str(ROOT)}
        commands = {"without --source": (base, here), "with --source": ([*base, "--source", src], here)}
        if args.before:
            tree = Path(tmp) / "before"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), args.before], check=True
            )
            commands[f"with --source at {args.before}"] = (
                [*base, "--source", src],
                {**os.environ, "PYTHONPATH": str(tree)},
            )
        try:
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
            for k in range(args.runs):
                for name, (cmd, env) in commands.items():
                    times[name].append(run(cmd, env, tmp))
                print(f"round {k + 1}: " + ", ".join(f"{n} {t[-1][0]:.2f} s" for n, t in times.items()), flush=True)
        finally:
            if args.before:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    lines = sum(1 for _ in open(args.input, encoding="utf-8"))
    ref_wall = statistics.median(t for t, _ in times["without --source"])
    ref_rss = statistics.median(m for _, m in times["without --source"])
    print(f"\n{lines:,} lines, --jobs {args.jobs}, {args.runs} alternated rounds\n")
    print("| command | wall: median (least, most) | x without | peak RSS, MiB: median (most) | x without |")
    print("|---|---|---|---|---|")
    for name, t in times.items():
        wall, rss = [x for x, _ in t], [m for _, m in t]
        print(
            f"| {name} | {statistics.median(wall):.2f} s ({min(wall):.2f}, {max(wall):.2f}) | "
            f"{statistics.median(wall) / ref_wall:.2f} | {statistics.median(rss):.0f} ({max(rss):.0f}) | "
            f"{statistics.median(rss) / ref_rss:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
