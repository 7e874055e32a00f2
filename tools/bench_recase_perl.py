#!/usr/bin/env python3
"""Benchmark: the whole recasing process against Moses' recase.perl, alternated in one session.

Each round runs, one after the other, Moses' ``recase.perl`` (with a model ``train-recaser.perl`` made from the
same cased corpus, decoding with Moses' ``bin/moses``) and ``moses-recaser recase`` (with --jobs 1 and --jobs 2),
each as a user runs it: a fresh process that starts, loads its model, recases the lowercased test set and writes
it. Measured per run: wall time and CPU time (user + system, children included). The peak RSS of the whole
process tree comes from one more run of each, sampled every 20 ms from /proc: a sample reads every process's
status (about 7 ms of CPU), so sampling the timed runs would take a quarter of a core from them, more from a run
that keeps both cores busy than from one that does not. Prints the medians over --runs rounds, each one's ratio
to recase.perl's median in the same rounds, and the precision of each output (the same in every round).

    python tools/bench_recase_perl.py --moses MOSES --stock-model STOCK/moses.ini --model MODEL \\
        --test-src test.fr --test-ref test.en --test-align test.gdfa [--runs 7] [--json runs/recase_perl.json]

``recase.perl`` reads the lowercased test text alone (it has no use for the source); ``moses-recaser`` also reads
the cased source and the word alignment, as EMS gives it the decoder's. Machines are noisy: compare the ratios,
which come from alternated runs of the same session.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import run_measured  # noqa: E402  (a script beside this one)

BIN = Path(sys.executable).parent


def run(cmd: list[str], stdout: Path) -> dict[str, float]:
    """One process, not sampled: wall s, and CPU s of it and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(stdout, "wb") as out:
        code = subprocess.call(cmd, stdout=out, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if code != 0:
        sys.exit(f"failed ({code}): {' '.join(cmd)}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


def peak_mib(cmd: list[str], stdout: Path) -> float:
    """The peak RSS (MiB) of one more run's process tree, sampled every 20 ms."""
    with open(stdout, "wb") as out:
        return run_measured(cmd, interval=0.02, stdout=out, stderr=subprocess.DEVNULL)[1]


def precision(hyp: Path, ref: Path) -> float:
    from moses_recaser.harness.metrics import evaluate_files

    return 100 * evaluate_files(str(hyp), str(ref), bleu=False).case.precision


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moses", required=True, help="a Moses tree with bin/moses and scripts/recaser/recase.perl")
    ap.add_argument("--stock-model", required=True, help="train-recaser.perl's moses.ini")
    ap.add_argument("--model", required=True, help="a moses-recaser model")
    ap.add_argument("--test-src", required=True)
    ap.add_argument("--test-ref", required=True)
    ap.add_argument("--test-align", required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--work", default="runs/bench_recase_perl", help="where the outputs go")
    ap.add_argument("--json")
    args = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cache on, as installed
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    low = work / "test.lc"
    low.write_text(Path(args.test_ref).read_text(encoding="utf-8").lower(), encoding="utf-8")
    moses = Path(args.moses)
    systems = {
        "recase.perl": [
            "perl",
            str(moses / "scripts/recaser/recase.perl"),
            "--in",
            str(low),
            "--model",
            args.stock_model,
            "--moses",
            str(moses / "bin/moses"),
        ],
    }
    for jobs in (1, 2):
        systems[f"moses-recaser --jobs {jobs}"] = [
            str(BIN / "moses-recaser"),
            "-q",
            "recase",
            "--model",
            args.model,
            "--source",
            args.test_src,
            "--input",
            str(low),
            "--alignment",
            args.test_align,
            "--jobs",
            str(jobs),
        ]
    outputs = {name: work / f"out.{k}" for k, name in enumerate(systems)}
    for name, cmd in systems.items():  # untimed: caches warm, bytecode written
        run(cmd, outputs[name])
    peaks = {name: peak_mib(cmd, outputs[name]) for name, cmd in systems.items()}
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in systems}
    for _ in range(args.runs):
        for name, cmd in systems.items():
            rows[name].append(run(cmd, outputs[name]))
    base = {k: statistics.median(r[k] for r in rows["recase.perl"]) for k in ("wall_s", "cpu_s")}
    summary = {}
    print("| system | wall s (median) | x recase.perl | CPU s | x recase.perl | peak RSS MiB | precision % |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in rows.items():
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        peak = peaks[name]
        prec = precision(outputs[name], Path(args.test_ref))
        summary[name] = {
            "wall_s": wall,
            "cpu_s": cpu,
            "wall_ratio": wall / base["wall_s"],
            "cpu_ratio": cpu / base["cpu_s"],
            "peak_rss_mib": peak,
            "precision": prec,
            "runs": runs,
        }
        print(
            f"| {name} | {wall:.2f} | {wall / base['wall_s']:.2f} | {cpu:.2f} | {cpu / base['cpu_s']:.2f} | "
            f"{peak:.0f} | {prec:.2f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
