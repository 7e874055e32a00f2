#!/usr/bin/env python3
"""The raw route against the tokenize/recase/detokenize route on WMT21 system outputs (#49), per pair.

    python tools/raw_route.py configs/de-en.yaml configs/zh-en.yaml ... [--out runs/raw-route] [--cache DIR]

Each config runs as ``moses-recaser experiment`` runs it, with its CRF alone and no learning curve (the same
cached model the full config trains): every WMT21 system output of the pair, lowercased, is recased by the CRF
both ways (``harness.bleu.run_bleu``: ``crf``, tokenized, aligned, recased, detokenized; ``crf-raw``, the raw line
and raw source through ``Recaser.recase_file(raw=True, align=True)``, as ``moses-recaser recase --raw --source``).
Prints the mean sacrebleu cased BLEU of each route and of the systems' own casing, each with its mean
case-insensitive bound, and the files whose raw output is not its input with only the case of letters changed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from moses_recaser.harness.experiment import run_experiment
from moses_recaser.harness.experiment_config import load_config

ROUTES = (("native", "systems' own case"), ("crf", "tokenize/recase/detokenize"), ("crf-raw", "raw route"))


def row(bleu: dict) -> str:
    systems = bleu["systems"].values()
    mean = {n: (bleu["mean_bleu"][n], statistics.mean(s[n]["bleu_ci"] for s in systems)) for n, _ in ROUTES}
    diffs = [s["crf-raw"]["bleu"] - s["crf"]["bleu"] for s in systems]
    return (
        f"| {bleu['pair']} | {len(diffs)} | "
        + " | ".join(f"{b:.2f} / {ci:.2f}" for b, ci in mean.values())
        + f" | {statistics.mean(diffs):+.2f} ({min(diffs):+.2f}, {max(diffs):+.2f}) |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--out", default="runs/raw-route", help="the runs' parent directory")
    ap.add_argument("--cache", help="stage cache (default runs/cache or MOSES_RECASER_CACHE)")
    ap.add_argument("--data-root")
    args = ap.parse_args()
    rows, failed = [], []
    for path in args.configs:
        cfg = replace(load_config(path), systems=["crf"], learning_curve=[])
        doc = run_experiment(cfg, Path(args.out) / cfg.name, args.data_root, args.cache)
        rows.append(row(doc["bleu"]))
        failed += [f"{cfg.name}: {k}" for k, s in doc["bleu"]["systems"].items() if not s["crf-raw"]["case_only"]]
        print(rows[-1], flush=True)
    print(
        "\n| pair | systems | "
        + " | ".join(f"{t}: BLEU / bound" for _, t in ROUTES)
        + " | raw − tokenized (least, most) |"
    )
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nraw outputs not case-only: {len(failed)}", *failed, sep="\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
