#!/usr/bin/env python3
"""Benchmark: training statistics (tables + LM) from fr-en newstest 2008-2012, alignment timed apart.

Prints wall time and peak RSS of each stage, each measured in a fresh child process, and writes JSON:
``align`` (eflomal, skipped with --no-align when its file is cached), ``tables`` (the bitext counted from its
files, as training counts it, and the tables made), ``lm`` (the target side counted and the LM estimated),
``count-jobs2`` (the bitext counted with its n-grams in 2 worker processes, as ``train --jobs 2``). ``count s``
is the counting's part of a stage's wall time; peak RSS is the larger of the stage's process and its workers.
Reads the corpora from the data root (MOSES_RECASER_DATA, default ../shared/corpora) and keeps the tokenized
corpus and the alignment in the cache (MOSES_RECASER_CACHE, default runs/cache of the code's checkout).

    python tools/bench_stats.py [--data-root DIR] [--json runs/bench_stats.json] [--no-align]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import time
from pathlib import Path

TRAIN = ["news-test2008", "newssyscomb2009", "newstest2009", "newstest2010", "newstest2011", "newstest2012"]


def _stage(name: str, src: str, tgt: str, align: str, out: str, q: mp.Queue) -> None:
    from moses_recaser.moses.bitext import read_aligned_bitext
    from moses_recaser.moses.pharaoh import format_links
    from moses_recaser.stats.eflomal import align as eflomal_align
    from moses_recaser.stats.kneser_ney import estimate, write_arpa
    from moses_recaser.stats.parallel import count_corpus
    from moses_recaser.stats.tables import Tables

    t0 = time.perf_counter()
    count_s = 0.0
    if name == "align":
        triples = list(read_aligned_bitext(src, tgt))
        links = eflomal_align([t.source for t in triples], [t.target for t in triples])
        with open(align, "w", encoding="utf-8") as fh:
            fh.writelines(format_links(a) + "\n" for a in links)
    elif name == "tables":
        counts = count_corpus([src, tgt, align], order=0, quiet=True)
        count_s = time.perf_counter() - t0
        Tables.from_counts(counts)
    elif name == "lm":
        counts = count_corpus(mono=[tgt], order=3, quiet=True)
        count_s = time.perf_counter() - t0
        with open(out, "w", encoding="utf-8") as fh:
            write_arpa(estimate(counts.ngram_counts()), fh)
    elif name == "count-jobs2":
        count_corpus([src, tgt, align], order=3, jobs=2, quiet=True)
        count_s = time.perf_counter() - t0
    wall = time.perf_counter() - t0
    rss = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    q.put({"stage": name, "wall_s": wall, "count_s": count_s, "peak_rss_mib": rss / 1024})


def run(name: str, *args: str) -> dict:
    q: mp.Queue = mp.get_context("fork").Queue()
    p = mp.get_context("fork").Process(target=_stage, args=(name, *args, q))
    p.start()
    p.join()
    if p.exitcode != 0:
        sys.exit(f"stage {name} failed")
    return q.get()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root")
    ap.add_argument("--json", default="runs/bench_stats.json")
    ap.add_argument("--no-align", action="store_true", help="use the alignment an earlier run left in the cache")
    args = ap.parse_args()
    from moses_recaser.harness.datasets import cache_dir, data_root, newstest_pair

    cache = cache_dir()
    src, tgt = newstest_pair(data_root(args.data_root), "fr-en", TRAIN, "fr", "en", cache, "fr-en.train")
    with open(tgt, encoding="utf-8") as fh:
        words = sum(len(line.split()) for line in fh)
    with open(src, encoding="utf-8") as fh:
        swords = sum(len(line.split()) for line in fh)
    align = str(cache / "sets" / "fr-en.train.gdfa")
    if args.no_align and not Path(align).is_file():
        sys.exit(f"--no-align: no alignment in the cache ({align}); run once without it")
    rows = [] if args.no_align else [run("align", str(src), str(tgt), align, "")]
    rows.append(run("tables", str(src), str(tgt), align, ""))
    rows.append(run("lm", str(src), str(tgt), align, str(cache / "sets" / "fr-en.train.en.arpa")))
    rows.append(run("count-jobs2", str(src), str(tgt), align, ""))
    stats_wall = sum(r["wall_s"] for r in rows if r["stage"] in ("tables", "lm"))
    print(f"corpus: fr-en newstest 2008-2012, {swords:,} French + {words:,} English tokens")
    print(f"{'stage':<12} {'wall s':>8} {'count s':>8} {'peak RSS MiB':>13}")
    for r in rows:
        print(f"{r['stage']:<12} {r['wall_s']:>8.1f} {r['count_s']:>8.1f} {r['peak_rss_mib']:>13.0f}")
    print(
        f"tables + LM: {stats_wall:.1f} s (goal <= 60 s), per 1M words: {stats_wall / ((words + swords) / 1e6):.1f} s"
    )
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"source_tokens": swords, "target_tokens": words, "stages": rows}, indent=1))


if __name__ == "__main__":
    main()
