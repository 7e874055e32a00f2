#!/usr/bin/env python3
"""Benchmark: training at the size of a real Moses corpus, and what the model costs to load and recase with.

For each corpus (a directory of ``tools/make_corpus.py``: corpus.{fr,en,align}, optionally mono.en), as EMS
runs it: ``moses-recaser-ems train -corpus corpus.en -source-corpus corpus.fr -alignment corpus.align -cores N
-dev-size 2000 [-memory SIZE] [-lm-prune N] [-lmplz BIN] [-mono mono.en]``, in a process of its own.
Measured: wall time; peak RSS of the whole process tree (the sum over the process and its children, sampled
every 0.1 s; a trace of it per run with ``--trace``); the model's size on disk; the time to load it
(``Recaser(model)`` in a fresh process, imports excluded, median of 3); and the whole ``moses-recaser recase``
process on newstest2014 fr->en (3,003 sentences: its source, the lowercased reference, and a word alignment of
the two) with its wall time, peak RSS and precision (``--no-recase``: training only).

``--moses MOSES`` also runs Moses' own ``scripts/recaser/train-recaser.perl`` (truecasing, lmplz ``--prune 0 0
1``, extract/score with ``--train-script scripts/training/train-model.perl``) in the same run, on the English of
the corpus named by ``--moses-corpus`` (default: the one of about 50M words), and prints its wall time and
peak RSS beside ours and their ratios. Prints a markdown table, least-squares fits of time and memory against
words with their projection at 1B words, the ratio of the largest corpus' peak to the smallest's, and writes
JSON.

    python tools/bench_train.py --corpus /work/corpora/w20M --corpus /work/corpora/w50M \\
        --corpus /work/corpora/w200M --cores 2 --work /tmp/bench --moses /work/moses-build/mosesdecoder \\
        --json runs/bench_train.json

The test set is tokenized and aligned once (eflomal, with the base corpus of make_corpus for the aligner's
sake) into --work.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def tree_rss_kib(pid: int) -> int:
    """RSS of a process and its descendants, in KiB (from /proc)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/status") as fh:
                kib = next((int(x.split()[1]) for x in fh if x.startswith("VmRSS:")), 0)
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
        rss[int(entry)] = kib
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        todo += children.get(p, [])
    return total


def run_measured(  # type: ignore[no-untyped-def]
    cmd: list[str], trace: Path | None = None, interval: float = 0.1, **kw
) -> tuple[float, float]:
    """Run a command; its wall time (s) and the peak RSS of its process tree (MiB), sampled every ``interval`` s
    (the first sample at once); ``trace``: a file of (seconds, MiB) samples."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, **kw)
    peak = 0
    stop = threading.Event()
    samples: list[tuple[float, int]] = []

    def sample() -> None:
        nonlocal peak
        while True:
            kib = tree_rss_kib(proc.pid)
            peak = max(peak, kib)
            samples.append((time.perf_counter() - t0, kib // 1024))
            if stop.wait(interval):
                return

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    code = proc.wait()
    wall = time.perf_counter() - t0
    stop.set()
    thread.join()
    if trace is not None:
        trace.write_text("".join(f"{t:.1f} {m}\n" for t, m in samples), encoding="utf-8")
    if code != 0:
        sys.exit(f"failed ({code}): {' '.join(cmd)}")
    return wall, peak / 1024


def test_set(work: Path, data_root: Path, base: Path) -> dict[str, Path]:
    """newstest2014 fr->en tokenized, the lowercased reference, and an eflomal alignment (made once)."""
    out = {k: work / f"test.{k}" for k in ("fr", "en", "lc.en", "align")}
    if all(p.is_file() for p in out.values()):
        return out
    from moses_recaser.io.lines import read_lines
    from moses_recaser.moses.pharaoh import format_links
    from moses_recaser.moses.tokenizer import tokenizer
    from moses_recaser.stats.eflomal import align

    raw = data_root / "wmt-newstest" / "fr-en"
    fr = [" ".join(tokenizer("fr")(x)) for x in read_lines(raw / "newstest2014.fr")]
    en = [" ".join(tokenizer("en")(x)) for x in read_lines(raw / "newstest2014.en")]
    bfr, ben = list(read_lines(base / "base.fr")), list(read_lines(base / "base.en"))
    links = align([x.split() for x in bfr + fr], [x.split() for x in ben + en])[len(bfr) :]
    out["fr"].write_text("".join(x + "\n" for x in fr), encoding="utf-8")
    out["en"].write_text("".join(x + "\n" for x in en), encoding="utf-8")
    out["lc.en"].write_text("".join(x.lower() + "\n" for x in en), encoding="utf-8")
    out["align"].write_text("".join(format_links(a) + "\n" for a in links), encoding="utf-8")
    return out


def words(path: Path) -> int:
    n = 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            n += len(line.split())
    return n


def load_seconds(model: Path) -> float:
    code = (
        "import time\nfrom moses_recaser.model.recaser import Recaser\nt = time.perf_counter()\n"
        f"Recaser({str(model)!r})\nprint(time.perf_counter() - t)"
    )
    times = [
        float(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout)
        for _ in range(3)
    ]
    return statistics.median(times)


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares y = a + b x."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / max(sum((x - mx) ** 2 for x in xs), 1e-12)
    return my - b * mx, b


def train_recaser_perl(moses: Path, corpus: Path, work: Path, trace: Path | None) -> dict[str, object]:
    """Moses' train-recaser.perl on a corpus' English (as EMS's [RECASING] train step runs it): wall time, peak
    RSS of its process tree (lmplz, sort, extract, score and the rest), and the command."""
    out = work / f"train-recaser.{corpus.name}"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    cmd = [
        "perl",
        str(moses / "scripts" / "recaser" / "train-recaser.perl"),
        "--dir",
        str(out),
        "--corpus",
        str(corpus / "corpus.en"),
        "--train-script",
        str(moses / "scripts" / "training" / "train-model.perl"),
    ]
    with open(work / f"train-recaser.{corpus.name}.log", "w") as log:
        wall, peak = run_measured(cmd, trace, stdout=log, stderr=subprocess.STDOUT)
    return {
        "corpus": corpus.name,
        "words": words(corpus / "corpus.en"),
        "train_s": wall,
        "train_peak_mib": peak,
        "command": " ".join(cmd),
    }


def ems_train(args: argparse.Namespace, corpus: Path, out: Path) -> list[str]:
    """The training command, as EMS's patched [RECASING] train step runs it."""
    cmd = [
        str(BIN / "moses-recaser-ems"),
        "-q",
        "train",
        "-dir",
        str(out),
        "-corpus",
        str(corpus / "corpus.en"),
        "-source-corpus",
        str(corpus / "corpus.fr"),
        "-alignment",
        str(corpus / "corpus.align"),
        "-config",
        str(out / "pointer"),
        "-cores",
        str(args.cores),
        "-dev-size",
        "2000",
    ]
    if args.memory:
        cmd += ["-memory", args.memory]
    if args.lm_prune:
        cmd += ["-lm-prune", str(args.lm_prune)]
    if args.lmplz:
        cmd += ["-lmplz", args.lmplz]
    if args.mono:
        cmd += ["-mono", str(corpus / "mono.en")]
    return cmd


def recase_row(args: argparse.Namespace, corpus: Path, model: Path, test: dict[str, Path]) -> dict[str, object]:
    """The model loaded, and the whole recasing process on the test set."""
    from moses_recaser.harness.metrics import case_scores_of_files

    recased = args.work / f"recased.{corpus.name}.en"
    cmd = [
        str(BIN / "moses-recaser"),
        "-q",
        "recase",
        "--model",
        str(model),
        "--source",
        str(test["fr"]),
        "--input",
        str(test["lc.en"]),
        "--alignment",
        str(test["align"]),
        "-o",
        str(recased),
    ]
    recase_s, recase_mib = run_measured(cmd)
    return {
        "load_s": load_seconds(model),
        "recase_s": recase_s,
        "recase_peak_mib": recase_mib,
        "precision": case_scores_of_files(str(recased), str(test["en"])).precision,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, action="append", required=True, help="a make_corpus.py directory")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--memory", help="-memory for training (default: moses-recaser's default)")
    ap.add_argument("--lm-prune", type=int, default=0, help="-lm-prune for training")
    ap.add_argument("--lmplz", help="KenLM's lmplz (as EMS has it); without: this package's estimator")
    ap.add_argument("--mono", action="store_true", help="also train on the corpus' mono.en (-mono)")
    ap.add_argument("--no-recase", action="store_true", help="training rows only")
    ap.add_argument("--moses", type=Path, help="a Moses tree: also run its train-recaser.perl")
    ap.add_argument("--moses-corpus", help="the corpus (directory name) train-recaser.perl runs on")
    ap.add_argument("--trace", action="store_true", help="write each run's RSS samples to WORK/NAME.rss")
    ap.add_argument("--base", type=Path, default=Path("/work/corpora/base"), help="make_corpus.py's base")
    ap.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "corpora")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    test = test_set(args.work, args.data_root, args.base) if not args.no_recase else {}
    rows: list[dict] = []
    stock: dict | None = None
    moses_corpus = args.moses_corpus or min(args.corpus, key=lambda c: abs(words(c / "corpus.en") - 50_000_000)).name
    for corpus in args.corpus:
        out = args.work / corpus.name
        out.mkdir(parents=True, exist_ok=True)
        cmd = ems_train(args, corpus, out)
        trace = args.work / f"{corpus.name}.rss" if args.trace else None
        train_s, train_mib = run_measured(cmd, trace)
        model = out / "model"
        row = {
            "corpus": corpus.name,
            "words": words(corpus / "corpus.en"),
            "source_words": words(corpus / "corpus.fr"),
            "mono_words": words(corpus / "mono.en") if args.mono else 0,
            "train_s": train_s,
            "train_peak_mib": train_mib,
            "model_mib": sum(p.stat().st_size for p in model.iterdir()) / 2**20,
            "command": " ".join(cmd),
        }
        if not args.no_recase:
            row.update(recase_row(args, corpus, model, test))
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.moses is not None and corpus.name == moses_corpus:
            trace = args.work / f"train-recaser.{corpus.name}.rss" if args.trace else None
            stock = train_recaser_perl(args.moses, corpus, args.work, trace)
            print(json.dumps(stock), flush=True)
    print_tables(rows, stock, args.no_recase)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "train_recaser": stock}, indent=1), encoding="utf-8")
    return 0


def print_tables(rows: list[dict], stock: dict | None, no_recase: bool) -> None:
    """The markdown tables, the fits and the 1B projection, and the peaks' ratio."""
    if no_recase:
        print("\n| corpus | target words | source words | train wall s | train peak RSS MiB | model MiB |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            print(
                f"| {r['corpus']} | {r['words']:,} | {r['source_words']:,} | {r['train_s']:.0f} | "
                f"{r['train_peak_mib']:,.0f} | {r['model_mib']:,.0f} |"
            )
    else:
        print(
            "\n| corpus | target words | source words | train wall s | train peak RSS MiB | model MiB | model load s | "
            "recase wall s | recase peak RSS MiB | precision % |\n|---|---|---|---|---|---|---|---|---|---|"
        )
        for r in rows:
            print(
                f"| {r['corpus']} | {r['words']:,} | {r['source_words']:,} | {r['train_s']:.0f} | "
                f"{r['train_peak_mib']:,.0f} | {r['model_mib']:,.0f} | {r['load_s']:.2f} | {r['recase_s']:.1f} | "
                f"{r['recase_peak_mib']:,.0f} | {100 * r['precision']:.2f} |"
            )
    if stock is not None:
        ours = next(r for r in rows if r["corpus"] == stock["corpus"])
        print(
            f"\ntrain-recaser.perl on {stock['corpus']} ({stock['words']:,} words): {stock['train_s']:.0f} s, peak "
            f"{stock['train_peak_mib']:,.0f} MiB; moses-recaser {ours['train_s']:.0f} s, {ours['train_peak_mib']:,.0f}"
            f" MiB: {ours['train_s'] / stock['train_s']:.2f} times its wall time, "
            f"{ours['train_peak_mib'] / stock['train_peak_mib']:.2f} times its peak"
        )
    if len(rows) > 1:
        xs = [r["words"] / 1e6 for r in rows]
        keys = [("train_s", "s"), ("train_peak_mib", "MiB"), ("model_mib", "MiB")]
        if not no_recase:
            keys += [("load_s", "s"), ("recase_peak_mib", "MiB")]
        for key, unit in keys:
            a, b = fit(xs, [r[key] for r in rows])
            print(f"fit {key}: {a:.1f} {unit} + {b:.3f} {unit} per 1M words; at 1B words: {a + 1000 * b:,.0f} {unit}")
        small, large = min(rows, key=lambda r: r["words"]), max(rows, key=lambda r: r["words"])
        print(
            f"peak at {large['corpus']} / peak at {small['corpus']}: "
            f"{large['train_peak_mib'] / small['train_peak_mib']:.2f}"
        )


if __name__ == "__main__":
    sys.exit(main())
