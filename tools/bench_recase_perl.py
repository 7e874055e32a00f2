#!/usr/bin/env python3
"""Benchmark: the whole recasing process against Moses' recase.perl, alternated in one session.

Each round runs, one after the other, Moses' ``recase.perl`` (with a model ``train-recaser.perl`` made from the
same cased corpus, decoding with Moses' ``bin/moses``) and ``moses-recaser recase`` (with --jobs 1 and --jobs 2),
each as a user runs it: a fresh process that starts, loads its model, recases the lowercased test set and writes
it. Measured per run: wall time and CPU time (user + system, children included). The peak RSS of the whole
process tree comes from one more run of each, sampled every 20 ms from /proc: a sample reads every process's
status (about 7 ms of CPU), so sampling the timed runs would take a quarter of a core from them, more from a run
that keeps both cores busy than from one that does not. Prints the medians over --runs rounds, each one's ratio
to recase.perl's median in the same rounds (without --moses: to the first row's), and the precision of each output
(the same in every round).
``--before TREE`` also runs the ``moses-recaser`` of another source tree (a checkout of an earlier commit, put on
PYTHONPATH) in the same rounds. The load average is printed as the rounds start and end.

Then the stages of one ``--jobs 1`` run, median over ``--runs`` more runs of each tree (``STAGES``: the command's
steps through the library's public calls, timed; the same output): interpreter start, imports, model load (its
checksums timed again apart after the run), the first chunk of 512 sentences (read, recased, written), the rest,
and the process's exit.

    python tools/bench_recase_perl.py --moses MOSES --stock-model STOCK/moses.ini --model MODEL \\
        --test-src test.fr --test-ref test.en --test-align test.gdfa [--runs 9] [--before TREE] [--json OUT.json]

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

# one --jobs 1 recasing with the wall and CPU clocks read after each stage (argv: model, input, source, alignment,
# output)
STAGES = """
import json, sys, time
marks = [("interpreter start", time.perf_counter(), time.process_time())]
mark = lambda name: marks.append((name, time.perf_counter(), time.process_time()))
model, hyp, src, links, out = sys.argv[1:6]
import moses_recaser.cli.main  # what the command imports before it reads its flags
from moses_recaser.core.workers import single_threaded_blas
single_threaded_blas()
from moses_recaser import Recaser, read_lines
mark("imports")
recaser = Recaser.load(model)
mark("model load")
with open(out, "w", encoding="utf-8") as fh:
    for k, line in enumerate(recaser.recase_lines(read_lines(hyp), read_lines(src), read_lines(links))):
        fh.write(line + "\\n")
        if k == 0:
            mark("first 512 sentences")
mark("the rest")
from pathlib import Path
from moses_recaser.io.modeldir import read_manifest, verify_files
manifest = read_manifest(model, verify=False)
checked = [time.perf_counter(), time.process_time()]
verify_files(Path(model), manifest.files, {"lm.arpa"} if "lm.npz" in manifest.files else (), manifest.sizes)
print(json.dumps({"marks": marks, "checked": checked + [time.perf_counter(), time.process_time()]}), flush=True)
import os
os._exit(0)  # as the command leaves (cli.common.exit_now): the loaded model is not torn down object by object
"""


def run(cmd: list[str], stdout: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    """One process, not sampled: wall s, and CPU s of it and its children."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(stdout, "wb") as out:
        code = subprocess.call(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    if code != 0:
        sys.exit(f"failed ({code}): {' '.join(cmd)}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


def peak_mib(cmd: list[str], stdout: Path, env: dict[str, str] | None = None) -> float:
    """The peak RSS (MiB) of one more run's process tree, sampled every 20 ms."""
    with open(stdout, "wb") as out:
        return run_measured(cmd, interval=0.02, stdout=out, stderr=subprocess.DEVNULL, env=env)[1]


def stages(args: list[str], env: dict[str, str] | None, cwd: Path) -> dict[str, tuple[float, float]]:
    """Wall and CPU seconds of each stage of one run of STAGES (the interpreter's start counted from the spawn, the
    exit until the parent sees it; the wall clock is the system's monotonic one, shared by both processes). The
    checksums are timed again after the run, and not counted in the whole. ``python -c`` puts its working directory
    first on the import path, so it runs in ``cwd``, which holds no package: the tree on PYTHONPATH is the one timed
    (from the clone's root, both trees' stages would time the clone's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", STAGES, *args], env=env, capture_output=True, text=True, check=True, cwd=cwd
    )
    end = time.perf_counter()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    got = json.loads(done.stdout)
    out, last = {}, (t0, 0.0)
    for name, wall, used in got["marks"]:
        out[name], last = (wall - last[0], used - last[1]), (wall, used)
    start, start_cpu, checked, checked_cpu = got["checked"]
    out["exit"] = (end - checked, cpu - checked_cpu)
    whole = (last[0] - t0 + out["exit"][0], last[1] + out["exit"][1])
    return {**out, "whole": whole, "(checksums, timed apart)": (checked - start, checked_cpu - start_cpu)}


def precision(hyp: Path, ref: Path) -> float:
    from moses_recaser.harness.metrics import evaluate_files

    return 100 * evaluate_files(str(hyp), str(ref), bleu=False).case.precision


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moses", help="a Moses tree with bin/moses and scripts/recaser/recase.perl (none: ours alone)")
    ap.add_argument("--stock-model", help="train-recaser.perl's moses.ini")
    ap.add_argument("--model", required=True, help="a moses-recaser model")
    ap.add_argument("--test-src", required=True)
    ap.add_argument("--test-ref", required=True)
    ap.add_argument("--test-align", required=True)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--before", help="a source tree whose moses-recaser also runs (PYTHONPATH=TREE), same rounds")
    ap.add_argument("--work", default="runs/bench_recase_perl", help="where the outputs go")
    ap.add_argument("--json")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    low = work / "test.lc"
    low.write_text(Path(args.test_ref).read_text(encoding="utf-8").lower(), encoding="utf-8")
    systems = {}
    if args.moses:
        moses = Path(args.moses)
        systems["recase.perl"] = [
            "perl",
            str(moses / "scripts/recaser/recase.perl"),
            "--in",
            str(low),
            "--model",
            args.stock_model,
            "--moses",
            str(moses / "bin/moses"),
        ]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # bytecode cache on, as installed
    trees = {"": env, **({" (before)": {**env, "PYTHONPATH": args.before}} if args.before else {})}
    envs: dict[str, dict[str, str]] = {"recase.perl": env}
    for jobs in (1, 2):
        for tag, tree_env in trees.items():
            envs[f"moses-recaser --jobs {jobs}{tag}"] = tree_env
            systems[f"moses-recaser --jobs {jobs}{tag}"] = [
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
        run(cmd, outputs[name], envs[name])
    peaks = {name: peak_mib(cmd, outputs[name], envs[name]) for name, cmd in systems.items()}
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in systems}
    load = [os.getloadavg()]
    for _ in range(args.runs):
        for name, cmd in systems.items():
            rows[name].append(run(cmd, outputs[name], envs[name]))
    load.append(os.getloadavg())
    print(
        "load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f} as the rounds began, {:.2f} {:.2f} {:.2f} as they ended".format(
            *load[0], *load[1]
        )
    )
    first = next(iter(systems))  # the ratios' base: recase.perl, else the first of ours
    base = {k: statistics.median(r[k] for r in rows[first]) for k in ("wall_s", "cpu_s")}
    summary: dict[str, object] = {}
    print(f"| system | wall s (median) | x {first} | CPU s | x {first} | peak RSS MiB | precision % |")
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
    staged: dict[str, list[dict[str, tuple[float, float]]]] = {tag: [] for tag in trees}
    for k in range(args.runs):
        for tag, tree_env in trees.items():
            paths = [args.model, str(low), args.test_src, args.test_align, str(work / f"stages.{k % 2}")]
            staged[tag].append(stages([str(Path(p).resolve()) for p in paths], tree_env, work.resolve()))
    print()
    print("| stage (--jobs 1) | " + " | ".join(f"wall ms{tag} | CPU ms{tag}" for tag in trees) + " |")
    print("|---|" + "---|---|" * len(trees))
    for stage in staged[""][0]:
        ms = [1000 * statistics.median(r[stage][i] for r in staged[tag]) for tag in trees for i in (0, 1)]
        print(f"| {stage} | " + " | ".join(f"{m:.0f}" for m in ms) + " |")
    if args.json:
        summary["load_average"] = {"start": load[0], "end": load[1]}
        summary["stages"] = staged
        Path(args.json).write_text(json.dumps(summary, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
