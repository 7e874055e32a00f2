#!/usr/bin/env python3
"""The raw route's aligner at recasing time: the model's table aligner against eflomal, on the same model (#63).

    python tools/align_compare.py configs/de-en.yaml ... [--quickstart] [--cache DIR] [--data-root DIR]

For each config, the model the experiment trains (``moses-recaser experiment``, cached) recases every WMT21 system
output of the pair, lowercased, by the raw route with its raw source: once with the links of
``Recaser.recase_lines(raw=True)`` (``stats.table_align``, the default), and once with the links eflomal gives the
same tokens with the experiment's eflomal priors (what the raw route ran before). ``--quickstart``: the README's
Quick start as well (TICO-19 fr-en, ``data/tico19``; eflomal's priors from an alignment of the training bitext), with
eflomal run three times, as its output varies. Prints mean sacrebleu cased BLEU per pair and aligner, the difference
(least, most), the agreement of the two aligners' links (AER of the table links against eflomal's), and the outputs
of the table route that are not their input with only the case of letters changed (none, or it exits 1).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from moses_recaser import Bitext, Recaser, RunOptions, TrainSettings, train
from moses_recaser.core import casing
from moses_recaser.core.triples import Link
from moses_recaser.harness.bleu import sacrebleu_scores, wmt21_runs
from moses_recaser.harness.datasets import cache_dir, data_root
from moses_recaser.harness.experiment_config import load_config
from moses_recaser.harness.stages import prepare_data, train_model
from moses_recaser.io.lines import read_lines
from moses_recaser.moses.formats import Line
from moses_recaser.moses.raw import line_reader
from moses_recaser.stats.eflomal import align

ROOT = Path(__file__).resolve().parents[1]


def aer(hyp: Sequence[Sequence[Link]], ref: Sequence[Sequence[Link]]) -> float:
    """1 - 2|A∩R| / (|A| + |R|): the alignment error rate with every reference link sure."""
    both = sum(len(set(a) & set(r)) for a, r in zip(hyp, ref))
    return 1 - 2 * both / max(1, sum(map(len, hyp)) + sum(map(len, ref)))


def compare(
    r: Recaser, pair: str, hyps: list[str], srcs: list[str], refs: list[str], priors: Path, runs: int = 1
) -> dict:
    """Cased BLEU of the raw route with the table links, and with eflomal's (``runs`` times), and their AER."""
    src_lang, tgt_lang = pair.split("-")
    low = [h.lower() for h in hyps]
    read = line_reader(tgt_lang, src_lang)
    triples = [read(k, Line(h, s, lineno=k)).triple for k, (h, s) in enumerate(zip(low, srcs))]
    source, target = [t.source for t in triples], [t.target for t in triples]
    kw = {"raw": True, "source_lang": src_lang, "target_lang": tgt_lang, "jobs": 2}
    recased = list(r.recase_lines(low, srcs, **kw))  # type: ignore[arg-type]
    table = sacrebleu_scores(recased, refs)["bleu"]
    case_only = casing.is_recasing_of("\n".join(recased), "\n".join(low))
    ours = r.aligner.align(source, target, str(r.settings["symmetrization"]))
    eflomal, aers = [], []
    for _ in range(runs):
        links = align(source, target, str(r.settings["symmetrization"]), priors=priors)
        pharaoh = [" ".join(f"{i}-{j}" for i, j in a) for a in links]
        out = list(r.recase_lines(low, srcs, pharaoh, **kw))  # type: ignore[arg-type]
        eflomal.append(sacrebleu_scores(out, refs)["bleu"])
        aers.append(aer(ours, links))
    return {
        "table": table,
        "eflomal": statistics.mean(eflomal),
        "eflomal_runs": eflomal,
        "aer": statistics.mean(aers),
        "case_only": case_only,
    }


def wmt21_rows(config: str, root: str | None, cache: str | None) -> list[dict]:
    cfg = load_config(config)
    base, cdir = data_root(root or cfg.data_root), cache_dir(cache)
    data = prepare_data(cfg, base, cdir)
    model = train_model(cfg, data.sets["train"], data.sets["dev"], cdir, "full", data.mono)
    r = Recaser.load(model)
    assert cfg.wmt21 is not None
    src, ref, hyp_paths = wmt21_runs(base, cfg.wmt21)
    srcs, refs = list(read_lines(src)), list(read_lines(ref))
    rows = []
    for path in hyp_paths:
        row = compare(r, cfg.wmt21, list(read_lines(path)), srcs, refs, data.priors)
        row["system"] = path.name.split(".hyp.")[1].rsplit(".", 1)[0]
        print(f"  {cfg.wmt21} {row['system']}: table {row['table']:.2f} eflomal {row['eflomal']:.2f}", flush=True)
        rows.append(row)
    return rows


def quickstart_rows(work: Path) -> list[dict]:
    """The README's Quick start: trained on the first 1950 TICO-19 lines (raw), its last 150 recased."""
    tico = ROOT / "data" / "tico19" / "tico19-test"
    fr, en = (list(read_lines(f"{tico}.{lang}")) for lang in ("fr", "en"))
    for name, lines in (("train.fr", fr[:1950]), ("train.en", en[:1950])):
        (work / name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    settings = TrainSettings(source_lang="fr", target_lang="en")
    train(
        Bitext(str(work / "train.fr"), str(work / "train.en")),
        str(work / "model"),
        settings,
        raw=True,
        dev_size=150,
        run=RunOptions(jobs=2),
    )
    read = line_reader("en", "fr")
    pairs = [read(k, Line(e, f, lineno=k)).triple for k, (e, f) in enumerate(zip(en[:1950], fr[:1950]))]
    align([t.source for t in pairs], [t.target for t in pairs], priors_out=work / "priors")
    row = compare(
        Recaser.load(work / "model"), "fr-en", en[1950:2100], fr[1950:2100], en[1950:2100], work / "priors", 3
    )
    row["system"] = "quickstart"
    return [row]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--quickstart", action="store_true", help="the README's Quick start (TICO-19 fr-en) too")
    ap.add_argument("--cache", help="stage cache (default runs/cache or MOSES_RECASER_CACHE)")
    ap.add_argument("--data-root")
    args = ap.parse_args()
    table = ["| pair | systems | eflomal: BLEU | table aligner: BLEU | table − eflomal: mean (least, most) | AER |"]
    table.append("|---|---|---|---|---|---|")
    groups: list[tuple[str, list[dict]]] = []
    if args.quickstart:
        with tempfile.TemporaryDirectory() as tmp:
            groups.append(("TICO-19 fr-en (Quick start)", quickstart_rows(Path(tmp))))
    for config in args.configs:
        groups.append((load_config(config).wmt21 or config, wmt21_rows(config, args.data_root, args.cache)))
    for name, rows in groups:
        diffs = [x["table"] - x["eflomal"] for x in rows]
        table.append(
            f"| {name} | {len(rows)} | {statistics.mean(x['eflomal'] for x in rows):.2f} | "
            f"{statistics.mean(x['table'] for x in rows):.2f} | {statistics.mean(diffs):+.2f} "
            f"({min(diffs):+.2f}, {max(diffs):+.2f}) | {statistics.mean(x['aer'] for x in rows):.3f} |"
        )
    print("\n".join(table))
    failed = [f"{name}: {x['system']}" for name, rows in groups for x in rows if not x["case_only"]]
    print(f"\ntable-aligned raw outputs not their input with only the case of letters changed: {len(failed)}")
    print(*failed, sep="\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
