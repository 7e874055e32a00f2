#!/usr/bin/env python3
"""Recasing real Moses output: phrase-based systems trained, decoded and recased here, for fr->en and de->en.

For each pair, from the shipped WMT newstest sets (../shared/corpora/wmt-newstest):

1. data: training bitext newstest 2008-2012 (about 13.5k sentence pairs), dev newstest2013, test newstest2014;
   Moses-tokenized (sacremoses, as tokenizer.perl), and lowercased for the decoder;
2. the Moses system, as EMS would build it but without EMS: eflomal word alignment of the lowercased bitext
   (grow-diag-final-and), train-model.perl steps 4-9 (phrase table, msd-bidirectional-fe reordering), a 5-gram
   lmplz LM on the lowercased English side; untuned (train-model.perl's default weights);
3. the decoder translates dev and test with ``-t`` and ``-alignment-output-file`` (``-threads``);
4. recasers, each trained on the same cased bitext and the same alignment (as EMS's RECASING step gets it) and
   run through the command line as a user runs them (``moses-recaser train``, ``moses-recaser recase --trace
   ... --alignment ...``): this checkout with its defaults, weights fitted on the dev reference; the same,
   weights fitted on the decoder's dev output (``--dev-trace``); the same with cased English news of 2015 and
   later (MONO: the other pairs' newstest English, no dev or test line) as ``--mono``; and any ``--version NAME=TREE``, an older
   checkout run with its own defaults (``PYTHONPATH=TREE``); the trigram baseline (the model's LM over GEN)
   and the output left lowercase;
5. scores on the test set: sacrebleu cased BLEU of the detokenized output against the raw reference, the
   case-insensitive BLEU (the bound a perfect recaser reaches), and capitalization precision on the output
   words the reference decides (``reference.carry_case``).

    python tools/decoded_results.py --work /tmp/decoded --moses-dir MOSES [--version before=OLD_CHECKOUT]

Every stage is cached in --work (delete a file to redo its stage). Prints a markdown table, writes
--work/results.json. Needs a built Moses (../shared/moses/README.md) and ``pip install -e '.[align]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
BIN = Path(sys.executable).parent
TRAIN = ["news-test2008", "newssyscomb2009", "newstest2009", "newstest2010", "newstest2011", "newstest2012"]
SETS = {"train": TRAIN, "dev": ["newstest2013"], "test": ["newstest2014"]}
# cased English news that is neither training, dev nor test data of either pair (all of 2015 and later): the
# monolingual text a Moses system's LM would also see
MONO = {
    "de-en": [
        "newstest2015",
        "newstest2016",
        "newstest2017",
        "newstest2018",
        "newstest2019",
        "newstest2020",
        "newstestB2020",
    ],
    "zh-en": ["newstest2017", "newstest2018", "newstest2019", "newstest2020", "newstest2021", "newstestB2020"],
    "fr-en": ["newsdiscusstest2015"],
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def write_lines(path: Path, lines: list[str]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    tmp.rename(path)


def read_lines(path: Path) -> list[str]:
    from moses_recaser.io import lines as textio

    return list(textio.read_lines(path))


def prepare(pair: str, corpora: Path, d: Path) -> None:
    """Raw, tokenized and lowercased sides of each set; the alignment of the whole bitext."""
    from moses_recaser.core import casing
    from moses_recaser.moses.pharaoh import format_links
    from moses_recaser.moses.tokenizer import tokenizer
    from moses_recaser.stats.eflomal import align

    src, tgt = pair.split("-")
    news = corpora / "wmt-newstest" / pair
    for name, parts in SETS.items():
        for lang in (src, tgt):
            tok = d / f"{name}.tok.{lang}"
            if tok.is_file():
                continue
            raw = [x for p in parts for x in read_lines(news / f"{p}.{lang}")]
            write_lines(d / f"{name}.raw.{lang}", raw)
            toks = [" ".join(tokenizer(lang)(x)) for x in raw]
            write_lines(d / f"{name}.lc.{lang}", [" ".join(casing.lower(w) for w in x.split()) for x in toks])
            write_lines(tok, toks)
    if not (d / "train.align").is_file():
        # train and dev aligned together (the dev alignment is what today's weights are fitted on)
        s = [x.split() for n in ("train", "dev") for x in read_lines(d / f"{n}.lc.{src}")]
        t = [x.split() for n in ("train", "dev") for x in read_lines(d / f"{n}.lc.{tgt}")]
        links = [format_links(a) for a in align(s, t)]
        n_train = len(read_lines(d / f"train.lc.{src}"))
        write_lines(d / "dev.align", links[n_train:])
        write_lines(d / "train.align", links[:n_train])


def mono_english(corpora: Path, work: Path) -> Path:
    """The English sides of MONO, tokenized, each line once, without any line of a dev or test reference."""
    from moses_recaser.moses.tokenizer import tokenizer

    out = work / "mono.tok.en"
    if out.is_file():
        return out
    news = corpora / "wmt-newstest"
    held = {
        x
        for pair in ("fr-en", "de-en")
        for name in ("dev", "test")
        for part in SETS[name]
        for x in read_lines(news / pair / f"{part}.en")
    }
    raw = [x for pair, parts in MONO.items() for p in parts for x in read_lines(news / pair / f"{p}.en")]
    kept = [x for x in dict.fromkeys(raw) if x.strip() and x not in held]
    log(f"monolingual English: {len(kept):,} lines of {len(raw):,}")
    write_lines(out, [" ".join(tokenizer("en")(x)) for x in kept])
    return out


def moses_system(pair: str, moses: Path, d: Path, cores: int) -> Path:
    """train-model.perl steps 4-9 on the given alignment, and a 5-gram LM: the untuned system's moses.ini."""
    src, tgt = pair.split("-")
    ini = d / "model" / "moses.ini"
    if ini.is_file():
        return ini
    lm = d / "lm.bin"
    if not lm.is_file():
        with open(d / f"train.lc.{tgt}", "rb") as inp, open(d / "lm.arpa", "wb") as out:
            subprocess.run(
                [str(moses / "bin/lmplz"), "-o", "5", "-S", "20%", "-T", str(d), "--discount_fallback"],
                stdin=inp,
                stdout=out,
                stderr=subprocess.DEVNULL,
                check=True,
            )
        subprocess.run(
            [str(moses / "bin/build_binary"), str(d / "lm.arpa"), str(lm)], check=True, stdout=subprocess.DEVNULL
        )
    (d / "model").mkdir(exist_ok=True)
    os.symlink(d / "train.align", d / "model" / "aligned.grow-diag-final-and") if not (
        d / "model" / "aligned.grow-diag-final-and"
    ).exists() else None
    for lang in (src, tgt):
        link = d / "model" / f"corpus.{lang}"
        if not link.exists():
            os.symlink(d / f"train.lc.{lang}", link)
    cmd = [
        str(moses / "scripts/training/train-model.perl"),
        "-root-dir",
        str(d),
        "-model-dir",
        str(d / "model"),
        "-corpus",
        str(d / "model" / "corpus"),
        "-f",
        src,
        "-e",
        tgt,
        "-alignment",
        "grow-diag-final-and",
        "-alignment-file",
        str(d / "model" / "aligned"),
        "-first-step",
        "4",
        "-last-step",
        "9",
        "-reordering",
        "msd-bidirectional-fe",
        "-lm",
        f"0:5:{lm}:8",
        "-external-bin-dir",
        str(moses / "bin"),
        "-cores",
        str(cores),
        "-sort-buffer-size",
        "1G",
        "-sort-parallel",
        str(cores),
    ]
    with open(d / "train-model.log", "w") as out:
        subprocess.run(cmd, check=True, stdout=out, stderr=subprocess.STDOUT)
    return ini


def decode(moses: Path, ini: Path, d: Path, name: str, src: str, threads: int) -> tuple[Path, Path]:
    out, wa = d / f"{name}.output", d / f"{name}.output.wa"
    if out.is_file() and wa.is_file():
        return out, wa
    log(f"decoding {d.name} {name}")
    with (
        open(d / f"{name}.lc.{src}", "rb") as inp,
        open(str(out) + ".tmp", "wb") as fh,
        open(d / f"{name}.decode.log", "wb") as err,
    ):
        subprocess.run(
            [
                str(moses / "bin/moses"),
                "-f",
                str(ini),
                "-t",
                "-alignment-output-file",
                str(wa),
                "-threads",
                str(threads),
            ],
            stdin=inp,
            stdout=fh,
            stderr=err,
            check=True,
        )
    os.rename(str(out) + ".tmp", out)
    return out, wa


def cli(tree: Path | None, *args: str) -> None:
    """``moses-recaser ARGS`` of a checkout (None: this one), in a process of its own."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    subprocess.run(
        [sys.executable, "-P", "-c", "from moses_recaser.cli.main import main; raise SystemExit(main())", "-q", *args],
        check=True,
        env=env,
    )


def recasers(
    pair: str,
    d: Path,
    versions: dict[str, Path | None],
    dev_out: tuple[Path, Path],
    test_out: tuple[Path, Path],
    mono: Path,
) -> dict[str, Path]:
    """Train each recaser and recase the test output with it; the recased files by system name."""
    src, tgt = pair.split("-")
    out: dict[str, Path] = {}
    variants = [(name, tree, False, False) for name, tree in versions.items()]
    variants += [("after, dev decoded", None, True, False), ("after, dev decoded, + news English", None, True, True)]
    for name, tree, decoded, with_mono in variants:
        key = name.replace(" ", "").replace(",", "-").replace("+", "")
        model, recased = d / f"model.{key}", d / f"test.recased.{key}"
        if not (model / "manifest.yaml").is_file():
            log(f"training recaser {name} for {pair}")
            extra = ["--dev-trace", str(dev_out[0]), "--dev-trace-alignment", str(dev_out[1])] if decoded else []
            extra += ["--monolingual", str(mono)] if with_mono else []
            cli(
                tree,
                "train",
                "--src",
                str(d / f"train.tok.{src}"),
                "--tgt",
                str(d / f"train.tok.{tgt}"),
                "--alignment",
                str(d / "train.align"),
                "--dev-src",
                str(d / f"dev.tok.{src}"),
                "--dev-tgt",
                str(d / f"dev.tok.{tgt}"),
                "--dev-alignment",
                str(d / "dev.align"),
                "--model",
                str(model),
                *extra,
            )
        if not recased.is_file():
            cli(
                tree,
                "recase",
                "--model",
                str(model),
                "--source",
                str(d / f"test.tok.{src}"),
                "--trace",
                str(test_out[0]),
                "--alignment",
                str(test_out[1]),
                "-o",
                str(recased),
            )
        out[name] = recased
    return out


def trigram(pair: str, d: Path, model: Path, test_out: tuple[Path, Path]) -> Path:
    from moses_recaser.harness.baselines import TrigramRecaser
    from moses_recaser.moses.trace import read_trace

    src, _ = pair.split("-")
    path = d / "test.recased.trigram"
    if not path.is_file():
        triples = list(read_trace(str(d / f"test.tok.{src}"), str(test_out[0]), str(test_out[1])))
        write_lines(path, [" ".join(t) for t in list(TrigramRecaser(model).recase_triples(triples))])
    return path


def score(pair: str, d: Path, hyp: Path) -> dict[str, float]:
    """Cased and case-insensitive sacrebleu of the detokenized output; precision on the decided words."""
    import sacrebleu
    from sacremoses import MosesDetokenizer

    from moses_recaser.model.reference import carry_case

    _, tgt = pair.split("-")
    detok = MosesDetokenizer(lang=tgt)
    hyps = [x.split() for x in read_lines(hyp)]
    refs_tok = [x.split() for x in read_lines(d / f"test.tok.{tgt}")]
    refs = read_lines(d / f"test.raw.{tgt}")
    text = [detok.detokenize(h) for h in hyps]
    cased = sacrebleu.corpus_bleu(text, [refs])
    ci = sacrebleu.corpus_bleu(text, [refs], lowercase=True)
    decided = correct = 0
    for h, r in zip(hyps, refs_tok):
        for w, c in zip(h, carry_case([x.lower() for x in h], r)):
            if c is not None:
                decided += 1
                correct += w == c
    return {
        "bleu": cased.score,
        "bleu_ci": ci.score,
        "precision": 100 * correct / max(decided, 1),
        "decided_words": decided,
        "words": sum(map(len, hyps)),
    }


def table(results: dict) -> str:
    rows = ["| pair | system | cased BLEU | gap to the bound | precision % (decided words) |", "|---|---|---|---|---|"]
    for pair, res in results.items():
        bound = res["bound"]
        rows.append(f"| {pair} | case-insensitive bound | {bound:.2f} | | |")
        for name, s in res["systems"].items():
            rows.append(
                f"| {pair} | {name} | {s['bleu']:.2f} | {bound - s['bleu']:.2f} | "
                f"{s['precision']:.2f} ({s['decided_words']:,}) |"
            )
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--moses-dir", type=Path, required=True, help="a built Moses (bin/moses, bin/lmplz, scripts/)")
    ap.add_argument("--pair", action="append", choices=["fr-en", "de-en"], help="default: both")
    ap.add_argument(
        "--version",
        action="append",
        default=[],
        metavar="NAME=TREE",
        help="also an older checkout, trained and run with its own defaults",
    )
    ap.add_argument("--data-root", type=Path, default=SHARED / "corpora")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    versions: dict[str, Path | None] = {n: Path(t).resolve() for n, t in (v.split("=", 1) for v in args.version)}
    versions["after"] = None
    moses = args.moses_dir.resolve()
    results: dict = {}
    for pair in args.pair or ["fr-en", "de-en"]:
        src = pair.split("-")[0]
        d = args.work.resolve() / pair
        d.mkdir(parents=True, exist_ok=True)
        log(f"{pair}: data and alignment")
        prepare(pair, args.data_root, d)
        log(f"{pair}: Moses system")
        ini = moses_system(pair, moses, d, args.threads)
        dev_out = decode(moses, ini, d, "dev", src, args.threads)
        test_out = decode(moses, ini, d, "test", src, args.threads)
        recased = recasers(pair, d, versions, dev_out, test_out, mono_english(args.data_root, args.work.resolve()))
        systems = {
            "lowercase (no recasing)": d / "test.output.words",
            "trigram": trigram(pair, d, d / "model.after", test_out),
            **recased,
        }
        if not systems["lowercase (no recasing)"].is_file():
            from moses_recaser.moses.trace import read_trace

            write_lines(
                systems["lowercase (no recasing)"],
                [" ".join(t.target) for t in read_trace(str(d / f"test.tok.{src}"), str(test_out[0]))],
            )
        scored = {name: score(pair, d, path) for name, path in systems.items()}
        results[pair] = {"bound": scored["after"]["bleu_ci"], "systems": scored}
    (args.work / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
