#!/usr/bin/env python3
"""Benchmark: recasing throughput against peers, model load and peak RSS, training time and memory.

    python tools/bench.py --model MODEL --test-src SRC.tok --test-ref REF.tok --test-align A.gdfa \
        --train-tgt TRAIN.tok [--runs 5] [--json runs/bench.json]

Recasing (3,000 newstest sentences): the CRF (source and word alignment given, as from a trace),
the trigram baseline and sacremoses' MosesTruecaser (truecase + detruecase) on the same tokens, each
in its own process, alternated over --runs rounds; median, min and max wall time, sentences/s and
words/s, and each one's ratio to sacremoses. Also the whole `moses-recaser recase` process (start,
imports, model load, reading, recasing, writing; bytecode cache on, as installed) with 1 and 2 worker
processes, and the model's load time and peak RSS. With --before REV, the CRF in-process and the whole
process are also timed with the code of that revision (a git worktree), in the same rounds. Machines here
are noisy: compare ratios measured in the same run, not absolute figures across runs.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _child(kind: str, model: str, src: str, ref: str, align: str | None, train_tgt: str, q: mp.Queue) -> None:
    from moses_recaser.core.triples import Triple, lowered
    from moses_recaser.moses.bitext import read_aligned_bitext

    t_load = time.perf_counter()
    if kind == "crf":
        from moses_recaser.model.recaser import Recaser

        system = Recaser(model)
    elif kind == "trigram":
        from moses_recaser.harness.baselines import TrigramRecaser

        system = TrigramRecaser(model)
    else:
        from moses_recaser.harness.baselines import MosesTruecaserBaseline

        with open(train_tgt, encoding="utf-8") as fh:
            system = MosesTruecaserBaseline(line.split() for line in fh)
    load = time.perf_counter() - t_load
    triples = list(read_aligned_bitext(src, ref, align))
    if kind == "crf":
        triples = [lowered(t) for t in triples]
        if align is None:
            triples = _with_links(triples)
    else:
        triples = [Triple(t.id, [], lowered(t).target) for t in triples]
    from moses_recaser.core.sentences import chunks
    from moses_recaser.model.streaming import CHUNK

    t0 = time.perf_counter()
    out = [x for part in chunks(triples, CHUNK) for x in list(system.recase_triples(part))]  # streamed as the CLI does
    wall = time.perf_counter() - t0
    q.put(
        {
            "kind": kind,
            "load_s": load,
            "recase_s": wall,
            "sentences": len(out),
            "words": sum(len(x) for x in out),
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    )


def _with_links(triples):
    """Diagonal word links, so the CRF's bilingual features fire as they would on a trace."""
    for t in triples:
        if t.source and t.target:
            t.links = [
                (min(round(i * len(t.source) / len(t.target)), len(t.source) - 1), i) for i in range(len(t.target))
            ]
    return triples


def measure_at(code: str, kind: str, model: str, src: str, ref: str, align: str | None, train_tgt: str) -> dict:
    """``measure`` with the package and this script of an older revision (checked out in ``code``)."""
    prog = (
        "import json, queue, sys; sys.path.insert(0, 'tools'); import bench; q = queue.Queue(); "
        f"bench._child(*{[kind, model, src, ref, align, train_tgt]!r}, q); print(json.dumps(q.get()))"
    )
    out = subprocess.run(
        [sys.executable, "-c", prog],
        cwd=code,
        env=dict(os.environ, PYTHONPATH=code),
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def measure(kind: str, model: str, src: str, ref: str, align: str | None, train_tgt: str) -> dict:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(kind, model, src, ref, align, train_tgt, q))
    p.start()
    p.join()
    if p.exitcode:
        sys.exit(f"{kind} failed")
    return q.get()


def whole_process(
    model: str, src: str, ref: str, align: str | None, tmp: Path, threads: int, code: str | None = None
) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB, largest process) of one `moses-recaser recase` run (with the
    package from directory ``code`` when given: an older revision, for before/after figures)."""
    low = tmp / "bench.lc"
    low.write_text(Path(ref).read_text(encoding="utf-8").lower(), encoding="utf-8")
    cmd = [
        sys.executable,
        "-m",
        "moses_recaser.cli.main",
        "-q",
        "recase",
        "--model",
        model,
        "--source",
        src,
        "--input",
        str(low),
        "--jobs",
        str(threads),
        "-o",
        str(tmp / "bench.out"),
    ]
    if align:
        cmd += ["--alignment", align]
    env = dict(os.environ, PYTHONPATH=code) if code else None
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=code)
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own peak RSS (its workers are reaped by it)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        sys.exit(f"recasing failed: {cmd}")
    return wall, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--test-src", required=True)
    ap.add_argument("--test-ref", required=True)
    ap.add_argument("--test-align", help="Pharaoh links test source -> reference (else diagonal links)")
    ap.add_argument("--train-tgt", required=True, help="the model's training target (sacremoses trains on it)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--before",
        metavar="REV",
        help="also time the CRF in-process and the whole process at this git revision (before/after)",
    )
    ap.add_argument(
        "--before-model", help="the model for --before, when that revision cannot read --model (a newer model format)"
    )
    ap.add_argument("--json", default="runs/bench.json")
    args = ap.parse_args()
    # as the recasing commands do (workers.single_threaded_blas), before any child imports numpy
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    # Python's bytecode cache on, as in an installed package (some shells set PYTHONDONTWRITEBYTECODE,
    # and every process then compiles the package anew); the untimed first runs below write it
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    kinds = ["crf", "trigram", "sacremoses"] + ([f"crf@{args.before}"] if args.before else [])
    rows: dict[str, list[dict]] = {k: [] for k in kinds}
    tmp = Path(args.json).parent
    tmp.mkdir(parents=True, exist_ok=True)
    procs: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    old: list[tuple[float, float]] = []
    before_model = str(Path(args.before_model or args.model).resolve())
    files = [
        str(Path(f).resolve()) if f else None for f in (args.test_src, args.test_ref, args.test_align, args.train_tgt)
    ]
    with tempfile.TemporaryDirectory(prefix="bench-before.") as wt:
        if args.before:
            subprocess.run(["git", "worktree", "add", "--detach", wt, args.before], check=True, capture_output=True)
        try:
            for _ in range(args.runs):
                for k in kinds:
                    if "@" in k:  # the CRF in-process at the older revision, in the same rounds
                        rows[k].append(measure_at(wt, "crf", before_model, *files))  # type: ignore[arg-type]
                    else:
                        rows[k].append(
                            measure(k, args.model, args.test_src, args.test_ref, args.test_align, args.train_tgt)
                        )
            src, ref, align, _ = files
            whole_process(args.model, args.test_src, args.test_ref, args.test_align, tmp, 1)  # untimed
            if args.before:
                whole_process(before_model, src, ref, align, tmp.resolve(), 1, code=wt)  # type: ignore[arg-type]
            for _ in range(args.runs):
                for th, runs in procs.items():
                    runs.append(whole_process(args.model, args.test_src, args.test_ref, args.test_align, tmp, th))
                if args.before:
                    old.append(
                        whole_process(
                            before_model,
                            src,
                            ref,
                            align,
                            tmp.resolve(),
                            1,  # type: ignore[arg-type]
                            code=wt,
                        )
                    )
        finally:
            if args.before:
                subprocess.run(["git", "worktree", "remove", "--force", wt], check=False, capture_output=True)
    sac = statistics.median(r["recase_s"] for r in rows["sacremoses"])
    print(
        f"{'system':<13} {'median s':>9} {'min':>7} {'max':>7} {'sent/s':>8} {'words/s':>9} {'x sacremoses':>12} "
        f"{'load s':>7} {'RSS MiB':>8}"
    )
    summary = {}
    for k in kinds:
        t = [r["recase_s"] for r in rows[k]]
        med = statistics.median(t)
        n, w = rows[k][0]["sentences"], rows[k][0]["words"]
        summary[k] = {
            "median_s": med,
            "min_s": min(t),
            "max_s": max(t),
            "sentences_per_s": n / med,
            "words_per_s": w / med,
            "ratio_to_sacremoses": med / sac,
            "load_s": statistics.median(r["load_s"] for r in rows[k]),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in rows[k]),
        }
        s = summary[k]
        print(
            f"{k:<13} {med:>9.2f} {min(t):>7.2f} {max(t):>7.2f} {n / med:>8.0f} {w / med:>9.0f} "
            f"{s['ratio_to_sacremoses']:>12.2f} {s['load_s']:>7.2f} {s['peak_rss_mib']:>8.0f}"
        )
    whole = {}
    for th, runs in procs.items():
        t = [w for w, _ in runs]
        whole[th] = {
            "median_s": statistics.median(t),
            "min_s": min(t),
            "max_s": max(t),
            "peak_rss_mib": max(r for _, r in runs),
        }
        print(
            f"whole process, --threads {th} (start + load + recase {rows['crf'][0]['sentences']} sentences "
            f"with source and alignment + write): median {statistics.median(t):.2f} s "
            f"(min {min(t):.2f}, max {max(t):.2f}), peak RSS {whole[th]['peak_rss_mib']:.0f} MiB"
        )
    if old:
        t = [w for w, _ in old]
        whole["before"] = {"revision": args.before, "median_s": statistics.median(t), "min_s": min(t), "max_s": max(t)}
        print(
            f"whole process at {args.before} (before), --threads 1: median {statistics.median(t):.2f} s "
            f"(min {min(t):.2f}, max {max(t):.2f})"
        )
    Path(args.json).write_text(json.dumps({"summary": summary, "runs": rows, "whole_process": whole}, indent=1))


if __name__ == "__main__":
    main()
