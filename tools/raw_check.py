#!/usr/bin/env python3
"""Raw mode (#49), measured: its speed against the tokenized mode with the same model.

    python tools/raw_check.py --model MODEL --source newstest2014.fr --input newstest2014.en [--runs 3]

The input lowercased is the MT output to recase. The whole ``moses-recaser recase`` process, raw (``--raw --source
SRC --input HYP``: tokenizes both sides, aligns with the model's priors, recases, projects back) against tokenized
(``--source SRC.tok --input HYP.tok --align``: the same tokens, tokenized beforehand), alternated over --runs
rounds; the median of each and their ratio. Machines here are noisy: read the ratio. (Case-only over every WMT21
system output: tools/raw_route.py.)
"""

from __future__ import annotations

import argparse
import resource
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


def children_cpu() -> float:
    """User and system time of the finished child processes and theirs (eflomal's threads too)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


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
        cpu: dict[str, list[float]] = {k: [] for k in runs}
        for _ in range(args.runs):
            for name, cmd in runs.items():
                t, c = time.perf_counter(), children_cpu()
                subprocess.run([str(x) for x in cmd], check=True, stderr=subprocess.DEVNULL)
                times[name].append(time.perf_counter() - t)
                cpu[name].append(children_cpu() - c)
                print(f"{name}: {times[name][-1]:.2f} s, CPU {cpu[name][-1]:.2f} s", flush=True)
        given, got = (d / "hyp.raw").read_text(encoding="utf-8"), (d / "out.raw").read_text(encoding="utf-8")
        n_lines = given.count("\n")
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, v in times.items():
        print(
            f"{name:9s} whole process, {n_lines} lines: median {med[name]:.2f} s (min {min(v):.2f}, max {max(v):.2f})"
        )
    print(f"raw / tokenized: {med['raw'] / med['tokenized']:.2f}x ({args.runs} alternated rounds)")
    c = {k: statistics.median(v) for k, v in cpu.items()}
    print(
        f"CPU time of the process tree (eflomal's too), median: tokenized {c['tokenized']:.2f} s, raw {c['raw']:.2f} s"
    )
    print(f"raw / tokenized, CPU: {c['raw'] / c['tokenized']:.2f}x")
    print(f"raw output case-only against its input: {case_only(got, given)}")


def cli() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--source", required=True, help="raw source text (its language: the file's suffix)")
    p.add_argument("--input", required=True, help="raw target text, cased (lowercased here; its language: the suffix)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tmp", help="where the scratch files go (default: the system's)")
    speed(p.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(cli())
