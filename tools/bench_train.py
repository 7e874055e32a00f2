#!/usr/bin/env python3
"""Benchmark: training time and peak memory at 0.1M, 0.3M and 1M target words, with a linear fit.

Each size trains a full model (tables + LM = "statistics", then dev lattices and CRF weights) in a
fresh child process from the first lines of the concatenated word-aligned bitexts given with
--part (cased, tokenized source, target and Pharaoh alignment). The dev set, and so the CRF cost,
is the same for every size. Prints wall time per stage and peak RSS, fits time = a + b * words by
least squares (reading + statistics, and peak RSS; the CRF stage depends on the dev set and its L-BFGS
iterations, not on the corpus size), states the extrapolation to 70M words (the paper's training size)
and writes JSON. --keep-model keeps the largest model, for the recasing benchmark's memory figure.

The exact command behind README's Performance table (the files come from running the fr-en, de-en and
zh-en experiments, which tokenize and align them into the cache):

    D=runs/cache/sets A=runs/cache/align
    python tools/bench_train.py --keep-model runs/model-1M \\
        --part $D/de-en.train.de $D/de-en.train.en $A/de-en.train.* \\
        --part $D/de-en.test.de $D/de-en.test.en $A/de-en.test.* \\
        --part $D/fr-en.test.fr $D/fr-en.test.en $D/fr-en.test.gdfa \\
        --part $D/zh-en.train.zh $D/zh-en.train.en $A/zh-en.train.* \\
        --part $D/zh-en.dev.zh $D/zh-en.dev.en $A/zh-en.dev.* \\
        --part $D/zh-en.test.zh $D/zh-en.test.en $A/zh-en.test.* \\
        --part $D/multi30k-test.de $D/multi30k-test.en $D/multi30k-test.gdfa \\
        --dev $D/de-en.dev.de $D/de-en.dev.en $A/de-en.dev.*

where the last part, 2,000 Multi30K test captions, was made with

    R=../shared/corpora/multi30k/raw
    zcat $R/test_2016_flickr.de.gz $R/test_2017_flickr.de.gz | moses-recaser tokenize -l de -o $D/multi30k-test.de
    zcat $R/test_2016_flickr.en.gz $R/test_2017_flickr.en.gz | moses-recaser tokenize -l en -o $D/multi30k-test.en
    moses-recaser align --src $D/multi30k-test.de --tgt $D/multi30k-test.en -o $D/multi30k-test.gdfa

(English targets from newstest 2008-2020 of three pairs and the captions, without repeated lines and
without the dev set's lines, 1.0M words; sources in German, French and Chinese.)
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import tempfile
import time
from pathlib import Path

SIZES = [100_000, 300_000, 1_000_000]
PAPER_WORDS = 70_000_000


def subset(parts: list[list[str]], words: int, out: Path, dev_target: str) -> int:
    """The first lines of the concatenated parts holding >= ``words`` target words; returns the count.
    Lines whose target repeats an earlier line or a dev line are skipped: newstest sets of different
    pairs share English sides, and a dev sentence in the LM's corpus would make the CRF lean on the LM."""
    out.mkdir(parents=True, exist_ok=True)
    with open(dev_target, encoding="utf-8") as fh:
        seen = set(fh)
    total = 0
    with open(out / "src", "w", encoding="utf-8") as fs, open(out / "tgt", "w", encoding="utf-8") as ft, \
            open(out / "align", "w", encoding="utf-8") as fa:
        for src, tgt, align in parts:
            with open(src, encoding="utf-8") as s, open(tgt, encoding="utf-8") as t, open(align, encoding="utf-8") as a:
                for ls, lt, la in zip(s, t, a):
                    if total >= words:
                        return total
                    if lt in seen:
                        continue
                    seen.add(lt)
                    fs.write(ls)
                    ft.write(lt)
                    fa.write(la)
                    total += len(lt.split())
    if total < words:
        sys.exit(f"the parts hold only {total:,} distinct target words, fewer than {words:,}")
    return total


def _child(work: str, dev: list[str], q: mp.Queue) -> None:
    from moses_recaser.model.train import Bitext, TrainSettings, train

    w = Path(work)
    t0 = time.perf_counter()
    report = train(str(w / "model"), train=Bitext(str(w / "src"), str(w / "tgt"), str(w / "align")),
                   dev=Bitext(*dev), settings=TrainSettings(), work=w)
    q.put({"wall_s": time.perf_counter() - t0, "stages_s": report.seconds, "iterations": report.iterations,
           "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def measure(work: Path, dev: list[str]) -> dict:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(str(work), dev, q))
    p.start()
    p.join()
    if p.exitcode:
        sys.exit("training failed")
    return q.get()


def fit_line(x: list[float], y: list[float]) -> tuple[float, float]:
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    b = sum((a - mx) * (c - my) for a, c in zip(x, y)) / sum((a - mx) ** 2 for a in x)
    return my - b * mx, b


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", nargs=3, action="append", required=True, metavar=("SRC", "TGT", "ALIGN"))
    ap.add_argument("--dev", nargs=3, required=True, metavar=("SRC", "TGT", "ALIGN"))
    ap.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    ap.add_argument("--json", default="runs/bench_train.json")
    ap.add_argument("--keep-model", metavar="DIR", help="keep the model of the largest size here (for bench.py)")
    args = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-train.") as tmp:
        for size in args.sizes:
            work = Path(tmp) / str(size)
            words = subset(args.part, size, work, args.dev[1])
            r = measure(work, args.dev)
            r["words"] = words
            rows.append(r)
        if args.keep_model:
            import shutil

            shutil.rmtree(args.keep_model, ignore_errors=True)
            shutil.copytree(Path(tmp) / str(args.sizes[-1]) / "model", args.keep_model)
    print(f"{'target words':>12} {'read s':>7} {'statistics s':>12} {'lattices s':>10} {'CRF s':>7} {'iterations':>10} "
          f"{'total s':>8} {'peak RSS MiB':>12}")
    for r in rows:
        s = r["stages_s"]
        print(f"{r['words']:>12,} {s['align']:>7.1f} {s['statistics']:>12.1f} {s['lattices']:>10.1f} {s['crf']:>7.1f} "
              f"{r['iterations']:>10} {r['wall_s']:>8.1f} {r['peak_rss_mib']:>12.0f}")
    # the CRF stage works on the dev set only: its cost follows the L-BFGS iterations, not the corpus size
    x = [r["words"] / 1e6 for r in rows]
    fits = {}
    for key, ys in (("read+statistics_s", [r["stages_s"]["align"] + r["stages_s"]["statistics"] for r in rows]),
                    ("peak_rss_mib", [r["peak_rss_mib"] for r in rows])):
        a, b = fit_line(x, ys)
        fits[key] = {"intercept": a, "per_million_words": b, "at_70M": a + b * PAPER_WORDS / 1e6}
        print(f"fit {key}: {a:.2f} + {b:.2f} per 1M words -> {a + b * PAPER_WORDS / 1e6:,.0f} at 70M words")
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"runs": rows, "fits": fits}, indent=1))


if __name__ == "__main__":
    main()
