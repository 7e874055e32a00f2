#!/usr/bin/env python3
"""A word-aligned fr-en corpus of any size, for training benchmarks, from the text shipped in ../shared/corpora.

The base: every fr-en parallel text there (newstest 2008-2013 and newsdiscusstest2015, TICO-19, FLORES-101
devtest, Multi30K), Moses-tokenized and aligned once with eflomal (grow-diag-final-and), about 54k sentence
pairs and 0.85M English words; newstest2014, the benchmarks' test set, is left out. The English of every other
set (de-en and zh-en newstest 2014 on, Tatoeba) becomes target-language text without a source.

Beyond the base, the corpus is the base again and again, each repetition with its rare words renamed: a word
type the base has at most 3 times gets, with a probability that falls with the repetition, a new form (its
letters shuffled and a syllable added, its case pattern kept), the same wherever it occurs in that repetition,
on either side, so a name copied from the source stays copied. The probabilities are set so that the number
of word types grows as Heaps' law has it for English news, V ~ n^0.55.

Repeating the base would repeat its bigrams and trigrams too, while a real corpus keeps adding new ones (in
the shipped English, distinct bigrams grow as n^0.76 and trigrams as n^0.88), and the LM is the largest part
of a model. So each repetition also substitutes English words: a word seen 4 to 1000 times in the base is
replaced, with a probability that falls with the repetition, by another word of its case pattern and
frequency band. With the rates set here the English of 20M words has 3.05M bigrams and 7.8M trigrams, where
the real English's growth gives 3.1M and 8.5M (``--ngrams`` prints the counts).

How it differs from real text: new word types are renamed rare words, not new words of new topics; new
n-grams come from substituted words, so sentences grow less sensible with the size (the source side is not
substituted: the translation tables see noisier pairs than a real corpus'); sentence lengths, function words
and case patterns keep the base's distribution; the word alignment is eflomal's on the base, carried over.

    python tools/make_corpus.py --out DIR --words 50000000 [--data-root ../shared/corpora] [--ngrams]

writes DIR/corpus.{fr,en,align} (tokenized; the target has --words words, the source about as many) and
DIR/mono.en (the English-only text, made the same way to 20% of --words).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FR_EN = [
    "news-test2008",
    "newssyscomb2009",
    "newstest2009",
    "newstest2010",
    "newstest2011",
    "newstest2012",
    "newstest2013",
    "newsdiscusstest2015",
]
MULTI30K = ["train", "val", "test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr"]
HEAPS = 0.55
# the substitution rate (``substitution_rate``): its scale, and the exponent of its fall with the repetition,
# calibrated with --ngrams so that bigrams and trigrams grow as in the shipped English (n^0.76, n^0.88)
SUBSTITUTE = 0.65
RATE = 0.92
ELIGIBLE = 1000  # words seen at most this often in the base may be substituted
RARE = 3
SYLLABLES = ["ka", "ro", "mi", "te", "su", "la", "no", "vi", "de", "go", "pa", "zu"]


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return fh.read().splitlines()


def base_bitext(root: Path) -> tuple[list[str], list[str]]:
    """Every fr-en parallel text but newstest2014, raw."""
    fr, en = [], []
    news = root / "wmt-newstest" / "fr-en"
    for name in FR_EN:
        fr += _lines(news / f"{name}.fr")
        en += _lines(news / f"{name}.en")
    fr += _lines(root / "wmt-newstest" / "tico19" / "en-fr" / "tico19-test.fr")
    en += _lines(root / "wmt-newstest" / "tico19" / "en-fr" / "tico19-test.en")
    fr += _lines(root / "wmt-newstest" / "flores101-devtest" / "fra.devtest")
    en += _lines(root / "wmt-newstest" / "flores101-devtest" / "eng.devtest")
    for name in MULTI30K:
        fr += _lines(root / "multi30k" / "raw" / f"{name}.fr.gz")
        en += _lines(root / "multi30k" / "raw" / f"{name}.en.gz")
    assert len(fr) == len(en)
    return fr, en


def base_english(root: Path) -> list[str]:
    """The English of every other set: de-en (2014 on; 2008-2013 are fr-en's English), zh-en, Tatoeba."""
    out = []
    for pair, years in (("de-en", range(2014, 2021)), ("zh-en", range(2017, 2021))):
        for y in years:
            path = root / "wmt-newstest" / pair / f"newstest{y}.en"
            if path.is_file():
                out += _lines(path)
        b = root / "wmt-newstest" / pair / "newstestB2020.en"
        out += _lines(b) if b.is_file() else []
    out += [line.split("\t")[0] for line in _lines(root / "tatoeba-cmn-eng" / "cmn.txt") if "\t" in line]
    return out


def tokenized(lines: list[str], lang: str) -> list[str]:
    from moses_recaser.moses.tokenizer import tokenizer

    tok = tokenizer(lang)
    return [" ".join(tok(x)) for x in lines]


def renamed(word: str, rep: int) -> str:
    """A new form of ``word`` for repetition ``rep``: its letters shuffled and a syllable added, its case
    pattern (per position) kept."""
    seed = int.from_bytes(hashlib.blake2b(f"{rep}\0{word}".encode(), digest_size=8).digest(), "little")
    rng = random.Random(seed)
    low = list(word.lower())
    letters = [c for c in low if c.isalpha()]
    rng.shuffle(letters)
    it = iter(letters)
    body = [next(it) if c.isalpha() else c for c in low] + list(rng.choice(SYLLABLES))
    upper = [c.isupper() for c in word]
    upper += [len(word) > 1 and all(c.isupper() for c in word if c.isalpha())] * 2
    return "".join(c.upper() if u else c for c, u in zip(body, upper))


def renaming(rare: list[str], rep: int, ratio: float) -> dict[str, str]:
    """The rare words renamed in repetition ``rep``: each with probability p(rep), so that the types grow as
    n^HEAPS (``ratio``: base types per rare type)."""
    if rep == 0:
        return {}
    p = min(1.0, ratio * ((rep + 1) ** HEAPS - rep**HEAPS))
    rng = random.Random(rep)
    return {w: renamed(w, rep) for w in rare if rng.random() < p}


def substitution_rate(rep: int) -> float:
    """The share of eligible English words substituted in repetition ``rep`` (each substitution makes up to
    two new bigrams and three new trigrams, fewer as repetitions repeat each other's)."""
    return 0.0 if rep == 0 else min(1.0, SUBSTITUTE * ((rep + 1) ** RATE - rep**RATE))


def classes(counts: Counter) -> dict[str, list[str]]:
    """Eligible words (letters only, seen more than RARE and at most ELIGIBLE times: the rare ones are renamed
    instead) by class: case pattern and frequency band."""
    out: dict[str, list[str]] = {}
    for w, c in sorted(counts.items()):
        if RARE < c <= ELIGIBLE and w.isalpha():
            shape = "U" if w.isupper() else "C" if w[0].isupper() else "l"
            out.setdefault(f"{shape}{c.bit_length()}", []).append(w)
    return out


def substituted(
    line: str, rng: random.Random, p: float, of_class: dict[str, str], members: dict[str, list[str]]
) -> str:
    """The line with each eligible word replaced, with probability ``p``, by another of its class."""
    words = line.split()
    for k, w in enumerate(words):
        c = of_class.get(w)
        if c is not None and rng.random() < p:
            words[k] = rng.choice(members[c])
    return " ".join(words)


def write(out: Path, sides: dict[str, list[str]], words: int, count_side: str) -> int:
    """Repetitions of ``sides`` (parallel tokenized lines; "align" is not renamed) until ``count_side`` has
    ``words`` words, each with rare words renamed (``renaming``) and English words substituted
    (``substitution_rate``); returns the number of words written."""
    counts = Counter(w for line in sides[count_side] for w in line.split())
    for side, lines in sides.items():
        if not side.endswith("align") and side != count_side:
            counts.update(w for line in lines for w in line.split())
    rare = sorted(w for w, c in counts.items() if c <= RARE and any(ch.isalpha() for ch in w))
    ratio = len(counts) / max(len(rare), 1)
    members = classes(Counter(w for line in sides[count_side] for w in line.split()))
    of_class = {w: c for c, ws in members.items() for w in ws if len(ws) > 1}
    handles = {side: open(out / side, "w", encoding="utf-8") for side in sides}
    total, rep = 0, 0
    try:
        while total < words:
            names = renaming(rare, rep, ratio)
            get = names.get
            rng, p = random.Random(1_000_003 * rep), substitution_rate(rep)
            for k in range(len(sides[count_side])):
                if total >= words:
                    break
                for side, lines in sides.items():
                    line = lines[k]
                    if side == count_side and p:
                        line = substituted(line, rng, p, of_class, members)
                    if not side.endswith("align") and names:
                        line = " ".join([get(w, w) for w in line.split()])
                    handles[side].write(line + "\n")
                total += len(sides[count_side][k].split())
            rep += 1
    finally:
        for fh in handles.values():
            fh.close()
    print(f"{out}: {total:,} words of {count_side} in {rep} repetitions", file=sys.stderr)
    return total


def ngram_growth(path: Path) -> list[tuple[int, int, int, int]]:
    """(words, distinct words, bigrams, trigrams) of a tokenized file's first 2^k * 125,000 words (and all)."""
    uni: set[str] = set()
    bi: set[int] = set()
    tri: set[int] = set()
    rows, words, mark = [], 0, 125_000
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            t = ["<s>"] + line.split() + ["</s>"]
            words += len(t) - 2
            uni.update(t)
            bi.update(map(hash, zip(t, t[1:])))
            tri.update(map(hash, zip(t, t[1:], t[2:])))
            if words >= mark:
                rows.append((words, len(uni), len(bi), len(tri)))
                mark *= 2
    return rows + [(words, len(uni), len(bi), len(tri))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--words", type=int, required=True, help="target words of the bitext")
    ap.add_argument(
        "--ngrams",
        action="store_true",
        help="then print how words, bigrams and trigrams grow in the corpus' English and in the real "
        "English it is made from",
    )
    ap.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "corpora")
    ap.add_argument("--base", type=Path, help="a directory holding (or to hold) the tokenized, aligned base")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    base = args.base or args.out / "base"
    base.mkdir(parents=True, exist_ok=True)
    if not (base / "base.align").is_file():
        from moses_recaser.moses.pharaoh import format_links
        from moses_recaser.stats.eflomal import align

        fr, en = base_bitext(args.data_root)
        keep = [k for k, (f, e) in enumerate(zip(fr, en)) if f.strip() and e.strip()]
        fr_tok, en_tok = tokenized([fr[k] for k in keep], "fr"), tokenized([en[k] for k in keep], "en")
        links = align([x.split() for x in fr_tok], [x.split() for x in en_tok])
        (base / "base.fr").write_text("".join(x + "\n" for x in fr_tok), encoding="utf-8")
        (base / "base.en").write_text("".join(x + "\n" for x in en_tok), encoding="utf-8")
        mono = tokenized([x for x in base_english(args.data_root) if x.strip()], "en")
        (base / "mono.en").write_text("".join(x + "\n" for x in mono), encoding="utf-8")
        (base / "base.align").write_text("".join(format_links(a) + "\n" for a in links), encoding="utf-8")
    read = {side: (base / f"base.{side}").read_text(encoding="utf-8").splitlines() for side in ("fr", "en", "align")}
    write(
        args.out,
        {"corpus.fr": read["fr"], "corpus.en": read["en"], "corpus.align": read["align"]},
        args.words,
        "corpus.en",
    )
    mono = (base / "mono.en").read_text(encoding="utf-8").splitlines()
    write(args.out, {"mono.en": mono}, args.words // 5, "mono.en")
    if args.ngrams:
        real = args.out / "real.en"  # the base's English, bitext and monolingual, in one file
        real.write_text("".join(x + "\n" for x in read["en"] + mono), encoding="utf-8")
        for name in (real, args.out / "corpus.en"):
            print(name.name)
            for row in ngram_growth(name):
                print("  {:>12,} words {:>10,} types {:>12,} bigrams {:>12,} trigrams".format(*row))
        real.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
