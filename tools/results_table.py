#!/usr/bin/env python3
"""Collect runs/<name>/results.json into the README's Results tables (paper Table 4 and Table 3 layout).

python tools/results_table.py [runs/fr-en runs/en-fr ...] > results.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from moses_recaser.harness.report import size_label

ORDER = ["unigram", "trigram", "sacremoses", "sacremoses+copy", "crf-monolingual", "crf"]


def main(dirs: list[str]) -> None:
    runs = [json.loads((Path(d) / "results.json").read_text()) for d in dirs if (Path(d) / "results.json").is_file()]
    print("| pair | test words | " + " | ".join(ORDER) + " | CRF vs trigram: error reduction, p |")
    print("|---|---|" + "---|" * len(ORDER) + "---|")
    for r in runs:
        s = r["full"]["systems"]
        c = r["full"].get("crf_vs_trigram") or {}
        cells = [f"{100 * s[n]['precision']:.2f}" if n in s else "–" for n in ORDER]
        print(
            f"| {r['name']} | {r['full']['test_words']:,} | "
            + " | ".join(cells)
            + f" | {100 * c.get('relative_error_reduction', 0):.1f}%, {c.get('paired_bootstrap_p', 1):.3f} |"
        )
    curves = [r for r in runs if r.get("learning_curve")]
    for r in curves:
        print(f"\nLearning curve, {r['name']} (precision %, test set as above):\n")
        print("| training words (bitext + monolingual) | trigram | CRF | CRF error reduction |")
        print("|---|---|---|---|")
        for p in r["learning_curve"]:
            rer = (p["crf"] - p["trigram"]) / (1 - p["trigram"])
            print(f"| {size_label(p)} | {100 * p['trigram']:.2f} | {100 * p['crf']:.2f} | {100 * rer:.1f}% |")
    bleus = [r for r in runs if r.get("bleu")]
    if bleus:
        names = list(bleus[0]["bleu"]["mean_gap"])
        print(
            "\nEnd-to-end, WMT21 system outputs recased from lowercase: mean cased BLEU over systems, and the mean "
            "gap to the case-insensitive upper bound (lower is better):\n"
        )
        print("| pair | systems | " + " | ".join(f"{n}: BLEU / gap" for n in names) + " |")
        print("|---|---|" + "---|" * len(names))
        for r in bleus:
            b = r["bleu"]
            print(
                f"| {b['pair']} | {len(b['systems'])} | "
                + " | ".join(f"{b['mean_bleu'][n]:.2f} / {b['mean_gap'][n]:.2f}" for n in names)
                + " |"
            )
    for r in runs:
        if r.get("wmt21_curve"):
            print(
                f"\nWMT21 {r['bleu']['pair']}: mean gap to the case-insensitive upper bound by training size "
                f"({r['name']} learning curve, the same aligned outputs):\n"
            )
            print("| training words (bitext + monolingual) | trigram gap | CRF gap |")
            print("|---|---|---|")
            for p in r["wmt21_curve"]:
                print(f"| {size_label(p)} | {p['trigram']:.2f} | {p['crf']:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(str(p.parent) for p in Path("runs").glob("*/results.json")))
