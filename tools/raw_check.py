#!/usr/bin/env python3
"""Raw mode (#49), measured: its speed against the tokenized mode, and the case-only check on real MT output.

    python tools/raw_check.py speed --model MODEL --source newstest2014.fr --input newstest2014.en [--runs 3]
    python tools/raw_check.py wmt --model MODEL [--root ../shared/corpora/wmt-system-outputs] [--pairs de-en ...]
        [--lines N]

``speed``: the input lowercased is the MT output to recase. The whole ``moses-recaser recase`` process, raw
(``--raw --source SRC --input HYP``: tokenizes both sides, aligns with the model's priors, recases, projects back)
against tokenized (``--source SRC.tok --input HYP.tok --align``: the same tokens, tokenized beforehand), alternated
over --runs rounds; the median of each and their ratio. Machines here are noisy: read the ratio.

``wmt``: every WMT21 system output, lowercased, recased by the one command
``moses-recaser recase --raw --model M --source SRC --input HYP --align -o OUT`` (run in this process, each side's
language from the file names; a pair's systems one after the other in one run, beside their source as often,
since eflomal's time grows little with the lines it aligns at once); each file's output must differ from its input
in the case of its letters alone, byte for byte (the same text under str.lower(), every changed code point a case
mapping of the input's). Prints each file's lines and the characters changed, and the files that fail.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from moses_recaser.core import casing
from moses_recaser.moses.tokenizer import tokenizer


def lowercased(src: Path, dst: Path) -> None:
    dst.write_bytes(src.read_bytes().decode("utf-8").lower().encode("utf-8"))


def case_only(out: str, given: str) -> bool:
    """``out`` is ``given`` with only the case of letters changed (``İ`` counted as its two-character lowercase)."""
    return out.lower() == given.lower() and casing.is_recasing_of(out, given)


def speed(args: argparse.Namespace) -> None:
    src_lang, tgt_lang = Path(args.source).suffix[1:], Path(args.input).suffix[1:]
    with tempfile.TemporaryDirectory(prefix="raw-speed-", dir=args.tmp) as tmp:
        d = Path(tmp)
        lowercased(Path(args.input), d / "hyp.raw")
        (d / "src.raw").write_bytes(Path(args.source).read_bytes())
        for name, lang in (("src", src_lang), ("hyp", tgt_lang)):
            tok = tokenizer(lang)
            lines = (d / f"{name}.raw").read_text(encoding="utf-8").splitlines()
            (d / f"{name}.tok").write_text("".join(" ".join(tok(x)) + "\n" for x in lines), encoding="utf-8")
        recase = [sys.executable, "-m", "moses_recaser", "recase", "--model", args.model]
        runs = {
            "tokenized": [*recase, "--source", d / "src.tok", "--input", d / "hyp.tok", "--align", "-o", d / "out.tok"],
            "raw": [
                *recase,
                "--raw",
                *("--source-lang", src_lang, "--target-lang", tgt_lang),
                *("--source", d / "src.raw", "--input", d / "hyp.raw", "-o", d / "out.raw"),
            ],
        }
        times: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(args.runs):
            for name, cmd in runs.items():
                t = time.perf_counter()
                subprocess.run([str(x) for x in cmd], check=True, stderr=subprocess.DEVNULL)
                times[name].append(time.perf_counter() - t)
                print(f"{name}: {times[name][-1]:.2f} s", flush=True)
        given, got = (d / "hyp.raw").read_text(encoding="utf-8"), (d / "out.raw").read_text(encoding="utf-8")
        n_lines = given.count("\n")
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, v in times.items():
        print(
            f"{name:9s} whole process, {n_lines} lines: median {med[name]:.2f} s (min {min(v):.2f}, max {max(v):.2f})"
        )
    print(f"raw / tokenized: {med['raw'] / med['tokenized']:.2f}x ({args.runs} alternated rounds)")
    print(f"raw output case-only against its input: {case_only(got, given)}")


def wmt(args: argparse.Namespace) -> int:
    from moses_recaser.cli.main import main

    root = Path(args.root) / "wmt21" / "txt"
    failed: list[str] = []
    files = letters = total_lines = 0
    hyps = sorted((root / "system-outputs").glob("newstest2021.*.hyp.*"))
    pairs = sorted({h.name.split(".")[1] for h in hyps} & set(args.pairs or [h.name.split(".")[1] for h in hyps]))
    with tempfile.TemporaryDirectory(prefix="raw-wmt-", dir=args.tmp) as tmp:
        d = Path(tmp)
        for pair in pairs:
            src_lang, tgt_lang = pair.split("-")
            source = (root / "sources" / f"newstest2021.{pair}.src.{src_lang}").read_text(encoding="utf-8")
            systems = [h for h in hyps if h.name.split(".")[1] == pair]
            given = ["".join(h.read_text(encoding="utf-8").lower().splitlines(True)[: args.lines]) for h in systems]
            given = [x.removesuffix("\n") + "\n" for x in given]
            source = "".join(source.splitlines(True)[: args.lines])
            (d / "in").write_text("".join(given), encoding="utf-8")
            (d / "src").write_text(source * len(systems), encoding="utf-8")
            t = time.perf_counter()
            code = main(
                [
                    *("recase", "--raw", "--model", args.model, "--source", str(d / "src"), "--input", str(d / "in")),
                    *("--align", "--source-lang", src_lang, "--target-lang", tgt_lang, "-o", str(d / "out")),
                ]
            )
            seconds = time.perf_counter() - t
            if code:  # (an interrupt: the command wrote nothing)
                print(f"{pair}: exit {code} after {seconds:.1f} s")
                return code
            out = (d / "out").read_text(encoding="utf-8").splitlines(keepends=True)
            print(f"{pair}: {len(systems)} systems, {len(out)} lines in one command, {seconds:.1f} s")
            for hyp, text in zip(systems, given):
                n = text.count("\n")
                got, out = "".join(out[:n]), out[n:]
                ok = case_only(got, text) and got.count("\n") == n
                changed = sum(a != b for a, b in zip(got, text)) if len(got) == len(text) else -1
                files, letters, total_lines = files + 1, letters + max(changed, 0), total_lines + n
                print(f"  {hyp.name}: {n} lines, {changed} characters recased, {'case-only' if ok else 'FAILED'}")
                if not ok:
                    failed.append(hyp.name)
    print(f"{files} files, {total_lines} lines, {letters} characters recased; case-only byte for byte: "
          f"{files - len(failed)} of {files}")  # fmt: skip
    for name in failed:
        print(f"FAILED: {name}")
    return 1 if failed else 0


def cli() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("speed", "wmt"))
    p.add_argument("--model", required=True)
    p.add_argument("--source", help="speed: raw source text (its language: the file's suffix)")
    p.add_argument("--input", help="speed: raw target text, cased (lowercased here; its language: the suffix)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--root", default=str(Path(__file__).resolve().parents[2] / "shared/corpora/wmt-system-outputs"))
    p.add_argument("--pairs", nargs="*", help="wmt: only these pairs (de-en ...)")
    p.add_argument("--lines", type=int, help="wmt: only the first N lines of each file (default: all)")
    p.add_argument("--tmp", help="where the scratch files go (default: the system's)")
    args = p.parse_args()
    if args.what == "speed":
        speed(args)
        return 0
    return wmt(args)


if __name__ == "__main__":
    sys.exit(cli())
