#!/usr/bin/env python3
"""Make the word links the test suite ships (tests/data/links/): the tests whose subject is not the aligner take
these, so the suite does not run eflomal for them (eflomal gives a small corpus many iterations: aligning them
was a sixth of the suite's time), and their models are the same from run to run.

- ``tico19.fr-en.wa``, ``tico19.zh-en.wa``: data/tico19, every line, tokenized (``moses_recaser.moses.tokenizer``)
  and aligned in one eflomal run per pair (grow-diag-final-and); a test takes the lines of its slices.
- ``newstest2021.zh-en.hyps.wa``: tests/data/wmt21-zh-en, each system's output (in the order of their names)
  tokenized and lowercased, aligned to the tokenized source in one run.

    python tools/make_test_links.py        # needs the align and zh extras (eflomal, jieba)
"""

from __future__ import annotations

from pathlib import Path

from moses_recaser.core import casing
from moses_recaser.moses.pharaoh import format_links
from moses_recaser.moses.tokenizer import tokenizer
from moses_recaser.stats.eflomal import align

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "links"
WMT = ROOT / "tests" / "data" / "wmt21-zh-en"


def tokenized(path: Path, lang: str) -> list[list[str]]:
    tok = tokenizer(lang)
    return [tok(x) for x in path.read_text(encoding="utf-8").splitlines()]


def write(name: str, source: list[list[str]], target: list[list[str]]) -> None:
    links = align(source, target)
    (OUT / name).write_text("".join(format_links(a) + "\n" for a in links), encoding="utf-8")
    print(f"{OUT / name}: {len(links)} lines")


def main() -> None:
    OUT.mkdir(exist_ok=True)
    tico = {lang: tokenized(ROOT / "data" / "tico19" / f"tico19-test.{lang}", lang) for lang in ("fr", "zh", "en")}
    for f in ("fr", "zh"):
        write(f"tico19.{f}-en.wa", tico[f], tico["en"])
    systems = sorted(WMT.glob("newstest2021.zh-en.hyp.*.en"))
    source = tokenized(WMT / "newstest2021.zh-en.src.zh", "zh")
    hyps = [[casing.lower(w) for w in t] for p in systems for t in tokenized(p, "en")]
    write("newstest2021.zh-en.hyps.wa", source * len(systems), hyps)


if __name__ == "__main__":
    main()
