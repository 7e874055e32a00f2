#!/usr/bin/env python3
"""fr->en capitalization precision on newstest (issue #4's split): tables from 2008-2012, weights from
2013, test 2014 (lowercased reference with source, phrase-aligned by the NPA).

    python tools/fr_en_precision.py [--data-root DIR] [--out runs/fr-en] [--features full] [--heldout 4000]

Word alignment: eflomal + grow-diag-final-and over train+dev+test in one run (cached).
Prints precision for the whole test set and for its title-cased headline lines, for every system.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

from moses_recaser import casing
from moses_recaser.aligner import align
from moses_recaser.alignment import format_links
from moses_recaser.baselines import MosesTruecaserBaseline, TrigramRecaser, UnigramRecaser
from moses_recaser.datasets import cache_dir, data_root, newstest_pair
from moses_recaser.features import source_flags
from moses_recaser.metrics import case_scores, paired_bootstrap_precision
from moses_recaser.moses import read_aligned_bitext
from moses_recaser.npa import phrase_align_triple
from moses_recaser.recaser import Recaser
from moses_recaser.train import TrainSettings, train
from moses_recaser.triples import Triple

TRAIN = ["news-test2008", "newssyscomb2009", "newstest2009", "newstest2010", "newstest2011", "newstest2012"]


def split_alignment(src_files, tgt_files, out_files, cache: Path) -> None:
    if all(Path(f).is_file() for f in out_files):
        return
    sets = [list(read_aligned_bitext(str(s), str(t))) for s, t in zip(src_files, tgt_files)]
    everything = [t for s in sets for t in s]
    links = align([t.source for t in everything], [t.target for t in everything], priors_out=cache / "fr-en.priors")
    pos = 0
    for s, out in zip(sets, out_files):
        with open(out, "w", encoding="utf-8") as fh:
            for a in links[pos : pos + len(s)]:
                fh.write(format_links(a) + "\n")
        pos += len(s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root")
    ap.add_argument("--out", default="runs/fr-en")
    ap.add_argument("--features", default="full")
    ap.add_argument("--phrase-features", default="phrase")
    ap.add_argument("--sigma", type=float, default=0.5)
    ap.add_argument("--heldout", type=int, default=0)
    ap.add_argument("--retrain", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = cache_dir()
    root = data_root(args.data_root)
    tr = newstest_pair(root, "fr-en", TRAIN, "fr", "en", cache, "fr-en.train")
    dv = newstest_pair(root, "fr-en", ["newstest2013"], "fr", "en", cache, "fr-en.dev")
    te = newstest_pair(root, "fr-en", ["newstest2014"], "fr", "en", cache, "fr-en.test")
    aligns = [cache / "sets" / f"fr-en.{n}.gdfa" for n in ("train", "dev", "test")]
    t0 = time.perf_counter()
    split_alignment([tr[0], dv[0], te[0]], [tr[1], dv[1], te[1]], aligns, cache)
    print(f"alignment ready ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)

    tag = f"{args.features}-{args.phrase_features}-s{args.sigma:g}-h{args.heldout}"
    model = out / f"model.{tag}"
    if args.retrain or not model.is_dir():
        settings = TrainSettings(feature_set=args.features, alignment_mode=args.phrase_features, sigma=args.sigma,
                                 heldout_sentences=args.heldout)
        import tempfile

        with tempfile.TemporaryDirectory() as work:
            report = train(str(tr[0]), str(tr[1]), str(aligns[0]), str(dv[0]), str(dv[1]), str(aligns[1]),
                           str(model), settings, Path(work))
        print(f"trained: dev GEN oracle {report.gen_oracle:.4f}, {report.seconds}", file=sys.stderr)

    test = [phrase_align_triple(t) for t in read_aligned_bitext(str(te[0]), str(te[1]), str(aligns[2]))]
    refs = [t.target for t in test]
    lowered = [Triple(t.id, t.source, [casing.lower_all(w) for w in t.target], t.phrases, t.links) for t in test]
    mono = [Triple(t.id, [], t.target) for t in lowered]
    headline = [k for k, r in enumerate(refs) if source_flags(r)[1] and source_flags(r)[0]]
    systems = {}
    t0 = time.perf_counter()
    systems["unigram"] = UnigramRecaser(model).recase_batch(lowered)
    systems["trigram"] = TrigramRecaser(model).recase_batch(lowered)
    systems["sacremoses"] = MosesTruecaserBaseline(t.target for t in read_aligned_bitext(str(tr[0]), str(tr[1]))
                                                   ).recase_batch(lowered)
    rec = Recaser(model)
    systems["crf-monolingual"] = rec.recase_batch(mono)
    t1 = time.perf_counter()
    systems["crf"] = rec.recase_batch(lowered)
    crf_s = time.perf_counter() - t1
    rows = {}
    for name, hyp in systems.items():
        sc = case_scores(hyp, refs)
        hl = case_scores([hyp[k] for k in headline], [refs[k] for k in headline])
        rows[name] = {"precision": sc.precision, "f1": sc.f1, "headline_precision": hl.precision,
                      "errors": sc.words - sc.correct, "words": sc.words}
        (out / f"test.{tag}.{name}.en").write_text("".join(" ".join(x) + "\n" for x in hyp), encoding="utf-8")
    tri = case_scores(systems["trigram"], refs)
    crf = case_scores(systems["crf"], refs)
    p = paired_bootstrap_precision(crf, tri)
    print(f"test newstest2014: {len(refs)} lines, {crf.words} words, {len(headline)} headline lines; CRF decode {crf_s:.1f} s")
    print(f"{'system':<16} {'precision':>9} {'F1':>7} {'headlines':>9} {'errors':>7}")
    for name, r in rows.items():
        print(f"{name:<16} {100 * r['precision']:>9.2f} {100 * r['f1']:>7.2f} {100 * r['headline_precision']:>9.2f} "
              f"{r['errors']:>7}")
    rer = (crf.precision - tri.precision) / (1 - tri.precision)
    print(f"relative error reduction CRF vs trigram: {100 * rer:.1f}% (paired bootstrap p = {p:.4f})")
    print(f"signature: {rec.signature}")
    print(crf.confusion_table())
    (out / f"results.{tag}.json").write_text(json.dumps({"rows": rows, "rer": rer, "p": p,
                                                         "signature": rec.signature}, indent=1))


if __name__ == "__main__":
    main()
