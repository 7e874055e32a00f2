#!/usr/bin/env python3
"""End to end with Moses EMS and a real decoder: the recaser against Moses' own, in one EMS run.

1. builds Moses from ../shared/moses (about 20 minutes on 2 cores; skipped when --moses-dir has bin/moses);
2. takes Moses' example config (scripts/ems/example/config.toy) and points it at shipped data: a fr->en
   system trained on newstest 2008-2012 (13,573 sentence pairs), aligned by EMS's own eflomal step, its LM
   on the English side, untuned (config.toy's weights), tested on the first --test-lines of newstest2014;
   scored with tokenized BLEU (multi-bleu.perl, cased and -lc) and sacrebleu (cased and -lc);
3. follows docs/ems.md's lowercase layout: ``moses-recaser-ems meta``, ``moses-recaser-ems config --merge
   --lowercase --stock-set`` (a second evaluation set recases the same test set with train-recaser.perl +
   recase.perl, trained by EMS in the run);
4. runs ``experiment.perl -exec`` and prints the table of EMS's own report (evaluation/report.1).

    python tools/ems_e2e.py --work /tmp/ems-e2e [--moses-dir DIR] [--data-root ../shared/corpora] [--test-lines 500]

Needs perl, the build's packages (see ../shared/moses/README.md), and eflomal-align and sacrebleu on PATH
(``pip install -e '.[align]'``). Takes 20-40 minutes beyond the build.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TRAIN = ["news-test2008", "newssyscomb2009", "newstest2009", "newstest2010", "newstest2011", "newstest2012"]
BIN = Path(sys.executable).parent


def build_moses(target: Path) -> Path:
    tree = target / "mosesdecoder"
    if (tree / "bin" / "moses").is_file():
        return tree
    tarball = next((SHARED / "moses").glob("mosesdecoder-*.tar.xz"))
    print(f"building Moses in {tree} (15-25 minutes)", flush=True)
    subprocess.run(["tar", "-xJf", str(tarball), "-C", str(target)], check=True)
    subprocess.run(
        ["./bjam", f"-j{os.cpu_count() or 2}", "-q", "--with-boost=/usr"],
        cwd=tree,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return tree


def prepare_data(corpora: Path, data: Path, test_lines: int) -> None:
    """Raw text: the training bitext (one stem, .fr/.en) and the test set's first lines."""
    data.mkdir(parents=True, exist_ok=True)
    src = corpora / "wmt-newstest" / "fr-en"
    for lang in ("fr", "en"):
        with open(data / f"train.{lang}", "w", encoding="utf-8") as out:
            for name in TRAIN:
                out.write((src / f"{name}.{lang}").read_text(encoding="utf-8"))
        lines = (src / f"newstest2014.{lang}").read_text(encoding="utf-8").splitlines()[:test_lines]
        (data / f"test.{lang}").write_text("".join(x + "\n" for x in lines), encoding="utf-8")


def system_config(moses: Path, work: Path, data: Path) -> str:
    """config.toy, pointed at this Moses, this data and this machine: the working EMS setup the doc starts
    from (still truecasing, as config.toy does)."""
    text = (moses / "scripts/ems/example/config.toy").read_text(encoding="utf-8")
    subs = {
        "working-dir": str(work),
        "moses-src-dir": str(moses),
        "external-bin-dir": str(moses / "bin"),
        "cores": str(os.cpu_count() or 2),
    }
    for key, value in subs.items():
        text = re.sub(rf"(?m)^{re.escape(key)} = .*$", f"{key} = {value}", text)
    text = re.sub(r"(?m)^(srilm-dir|irstlm-dir|randlm-dir) = .*$", r"#\g<0>", text)
    text = text.replace("raw-stem = $toy-data/nc-5k", f"raw-stem = {data}/train")
    text = text.replace("raw-corpus = $toy-data/nc-5k.$output-extension", f"raw-corpus = {data}/train.en")
    # EMS's own eflomal step aligns (GIZA++ is not in the Moses source); its settings must not be empty
    text = text.replace("[TRAINING]\n", '[TRAINING]\neflomal-settings = "-m 3"\n', 1)
    # the test set as raw text, scored tokenized and with sacrebleu, cased and case-insensitive
    evaluation = (
        f"raw-input = {data}/test.fr\nraw-reference = {data}/test.en\n"
        'multi-bleu = "$moses-script-dir/generic/multi-bleu.perl -lc"\n'
        "multi-bleu-c = $moses-script-dir/generic/multi-bleu.perl\n"
        f'sacre-bleu = "{BIN}/sacrebleu -lc -f text"\nsacre-bleu-c = "{BIN}/sacrebleu -f text"\n'
    )
    text = re.sub(r"(?m)^\[EVALUATION:test\]\n(?:(?!\[).*\n)*", "[EVALUATION:test]\n" + evaluation + "\n", text)
    text = re.sub(r"(?m)^(nist-bleu|nist-bleu-c|wrapping-script) = .*$", r"#\g<0>", text)
    return text


def scores(work: Path, sets: list[str]) -> dict[str, dict[str, float]]:
    """Per evaluation set, the scores EMS's report reads (evaluation/SET.TYPE.1, read as
    report-experiment-scores.perl reads them)."""
    out: dict[str, dict[str, float]] = {}
    for name in sets:
        row = {}
        for kind in ("multi-bleu", "multi-bleu-c", "sacre-bleu", "sacre-bleu-c"):
            text = (work / "evaluation" / f"{name}.{kind}.1").read_text(encoding="utf-8")
            m = re.search(r"BLEU = (\S+), ", text) if kind.startswith("multi") else None
            row[kind] = float(m.group(1) if m else text.split()[2])
        out[name] = row
    return out


def run(args: argparse.Namespace, exp: Path) -> None:
    """Build Moses if needed, prepare the data and the configs, and run EMS."""
    moses = args.moses_dir.resolve() if args.moses_dir else build_moses(args.work.resolve())
    data = args.work.resolve() / "data"
    prepare_data(args.data_root, data, args.test_lines)
    if exp.exists():
        shutil.rmtree(exp)
    exp.mkdir()  # experiment.perl's chdir into a missing working-dir fails silently
    toy = args.work / "config.toy"
    toy.write_text(system_config(moses, exp, data), encoding="utf-8")
    ems = str(BIN / "moses-recaser-ems")
    meta, config = args.work / "recaser.meta", args.work / "config.recaser"
    # docs/ems.md, steps 1-3
    subprocess.run(
        [ems, "meta", "--moses-meta", str(moses / "scripts/ems/experiment.meta"), "-o", str(meta)], check=True
    )
    merge = [ems, "config", "--merge", str(toy), "--lowercase", "--stock-set", "-o", str(config)]
    subprocess.run(merge, check=True)
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    with open(args.work / "experiment.log", "w") as log:
        subprocess.run(
            [
                "perl",
                str(moses / "scripts/ems/experiment.perl"),
                "-config",
                str(config.resolve()),
                "-meta",
                str(meta.resolve()),
                "-exec",
                "-no-graph",
            ],
            cwd=exp,
            env=env,
            check=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True, help="a new directory for the build, data and EMS run")
    ap.add_argument("--moses-dir", type=Path, help="a built Moses (its bin/moses); default: built in --work")
    ap.add_argument("--data-root", type=Path, default=SHARED / "corpora")
    ap.add_argument("--test-lines", type=int, default=500)
    ap.add_argument("--report-only", action="store_true", help="the table of the run already in --work")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    exp = args.work.resolve() / "experiment"
    if not args.report_only:
        run(args, exp)
    steps = exp / "steps" / "1"
    crashed = sorted(p.name for p in steps.glob("*.STDERR.digest") if p.stat().st_size)
    if crashed:
        sys.exit(f"crashed steps: {', '.join(crashed)} (see {steps})")
    seconds = (steps / "REPORTING_report.1.DONE").stat().st_mtime - (steps / "config.1").stat().st_mtime
    got = scores(exp, ["test", "test-stock"])
    ours, stock = got["test"], got["test-stock"]
    result = {
        "seconds": seconds,
        "steps": len(list((exp / "steps" / "1").glob("*.DONE"))),
        "scores": got,
        "report": (exp / "evaluation" / "report.1").read_text(encoding="utf-8"),
    }
    (args.work / "result.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"EMS run: {result['steps']} steps in {seconds:.0f} s; newstest2014 fr->en, first {args.test_lines} lines")
    print(f"\nEMS's report (evaluation/report.1):\n{result['report']}")
    print("| recaser | tokenized BLEU, cased | sacrebleu, cased |\n|---|---|---|")
    print(f"| moses-recaser (bilingual) | {ours['multi-bleu-c']:.2f} | {ours['sacre-bleu-c']:.2f} |")
    print(f"| Moses recase.perl (train-recaser.perl) | {stock['multi-bleu-c']:.2f} | {stock['sacre-bleu-c']:.2f} |")
    print(f"| case-insensitive (the bound) | {ours['multi-bleu']:.2f} | {ours['sacre-bleu']:.2f} |")
    print(
        f"\ngap to the bound: {ours['multi-bleu'] - ours['multi-bleu-c']:.2f} (tokenized), "
        f"{ours['sacre-bleu'] - ours['sacre-bleu-c']:.2f} (sacrebleu); over the stock recaser: "
        f"{ours['multi-bleu-c'] - stock['multi-bleu-c']:.2f}, {ours['sacre-bleu-c'] - stock['sacre-bleu-c']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
