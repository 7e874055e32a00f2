#!/usr/bin/env python3
"""Case errors of recased text against its reference, bucketed into classes, as a markdown table (#65).

    python tools/error_classes.py --hyp FILE [FILE ...] --ref FILE [--source FILE] [--links FILE] [--name LABEL]
    python tools/error_classes.py --column LABEL REF SOURCE|- HYP [HYP ...] [--column ...]

Each ``--column`` (and ``--hyp``/``--ref``, one more column) is one column of the table; its hypothesis files all
share its reference and source (the systems of one WMT21 pair), and their counts are summed.

Tokens: each line is HTML-unescaped (Moses' ``&apos;`` and the like), split at whitespace, and leading and trailing
punctuation is split off each piece, one character a token; punctuation inside a piece stays ("Infection.the",
"don't", "e-mail"), and so does the final period of an abbreviation of two letter-period pairs or more ("U.S.",
"e.g."; but "D", "."). No sacremoses.

Alignment: per line, difflib.SequenceMatcher over the lowercased tokens of hypothesis and reference; only its equal
blocks are aligned (a hypothesis that is its reference recased aligns 1:1). A case error is an aligned token whose
case differs from its reference token's.

Classes, the first that matches, in this order (the table lists them in the order of ``CLASSES``):
1. sentence start: a letter that differs follows, inside the token, one of . ? ! : after two letters or digits
   and not before two capitals ("Infection.the" for "infection.The", not "U.s." for "U.S.", "600606.sh" for
   "600606.SH"): *inside a token*, counted apart; or no letter precedes the first that differs, and the token, in
   the reference or in the hypothesis, is the line's first word or follows (quotes, brackets, dashes skipped) a
   token ending in . ? ! : that is not an abbreviation ("U.S.").
   Sentence-initial in only one of them: *word order* (another translation; the recaser was right), counted apart.
2. all-caps: the reference token is all uppercase with >= 2 letters.
3. mixed case: the reference token is neither lower, Title nor UPPER (iPhone, McDonald).
4. title/multi-word name: the reference token lies in a span of >= 2 capitalized (first letter upper) tokens,
   adjacent or with at most two lowercase words of <= 3 letters between them ("Bank of England"): a capitalized
   word of it the hypothesis lowercased, or a function word inside it the hypothesis capitalized.
5. common noun capitalized from the source: the hypothesis capitalized a lowercase reference token, and with
   ``--links`` (Pharaoh source-target pairs over these tokens, one hypothesis file) a source token aligned to it is
   capitalized; without, the source line has a capitalized token that is not sentence-initial (best effort: in
   German, any noun). Without a source, never.
6. other: the rest.

Printed: per class, its errors and their share of all; all errors, and all less *word order*; the aligned tokens;
then per column and class up to 3 examples from distinct lines ("…words [hyp→ref] words…", the hypothesis's
words) and its 5 most frequent hyp→ref pairs.
"""

from __future__ import annotations

import argparse
import difflib
import html
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

CLASSES = tuple(
    "sentence start|title/multi-word name|common noun capitalized from the source|all-caps|mixed case|other".split("|")
)
ENDS = ".?!:"
QUOTES = "\"'“”„‘’«»‹›()[]{}-–—"
ABBREV = re.compile(r"^(?:\w\.){2,}$")
EXAMPLES = 3
SUBS = ("inside a token", "word order")


def tokenize(line: str) -> list[str]:
    out: list[str] = []
    for piece in html.unescape(line).split():
        tail: list[str] = []
        while piece and not piece[0].isalnum():
            out.append(piece[0])
            piece = piece[1:]
        while piece and not piece[-1].isalnum() and not ABBREV.match(piece):
            tail.insert(0, piece[-1])
            piece = piece[:-1]
        out += [piece][: bool(piece)] + tail
    return out


def capitalized(w: str) -> bool:
    return w[:1].isupper()


def letters(w: str) -> str:
    return "".join(c for c in w if c.isalpha())


def sentence_initial(toks: Sequence[str], i: int) -> bool:
    j = i - 1
    while j >= 0 and all(c in QUOTES for c in toks[j]):
        j -= 1
    return j < 0 or toks[j][-1] in ENDS and not ABBREV.match(toks[j])


def in_span(ref: Sequence[str], i: int) -> bool:
    """Whether ``ref[i]`` lies in a span of >= 2 capitalized tokens (<= 2 short lowercase words between them)."""

    def reach(step: int) -> bool:
        j, gap = i + step, 0
        while 0 <= j < len(ref) and gap <= 2:
            if capitalized(ref[j]):
                return True
            if not (ref[j].isalpha() and ref[j].islower() and len(ref[j]) <= 3):
                return False
            j, gap = j + step, gap + 1
        return False

    left, right = reach(-1), reach(1)
    return (left or right) if capitalized(ref[i]) else (left and right)


def source_capital(src: Sequence[str] | None, aligned: Sequence[int] | None) -> bool:
    if not src:
        return False
    if aligned is not None:
        return any(capitalized(src[k]) for k in aligned)
    return any(capitalized(w) and letters(w) and not sentence_initial(src, k) for k, w in enumerate(src))


def classify(
    hyp: Sequence[str], j: int, ref: Sequence[str], i: int, src: list[str] | None, aligned: list[int] | None
) -> str:
    h, r = hyp[j], ref[i]
    diff = [n for n, (a, b) in enumerate(zip(h, r)) if a != b]
    after = [n for n in diff if not (len(r[n : n + 2]) == 2 and r[n : n + 2].isupper())]  # not "600606.SH"
    if any((p := r[:n].rstrip(QUOTES))[-1:] in tuple(ENDS) and len(p) > 2 and p[-3:-1].isalnum() for n in after):
        return "sentence start (inside a token)"
    k = diff[0]
    if not letters(r[:k]) and (sentence_initial(ref, i) or sentence_initial(hyp, j)):
        return "sentence start" + ("" if sentence_initial(ref, i) == sentence_initial(hyp, j) else " (word order)")
    if r.isupper() and len(letters(r)) >= 2:
        return "all-caps"
    if not (r.islower() or r.istitle() or r.isupper()):
        return "mixed case"
    if in_span(ref, i):
        return "title/multi-word name"
    if capitalized(h) and r.islower() and source_capital(src, aligned):
        return "common noun capitalized from the source"
    return "other"


class Column:
    def __init__(self, name: str) -> None:
        self.name, self.tokens = name, 0
        self.counts: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)
        self.seen: set[tuple[str, int]] = set()
        self.pairs: dict[str, Counter[str]] = defaultdict(Counter)

    def add(self, hyp: Path, ref: Path, source: Path | None, links: Path | None = None) -> None:
        hyps, refs = (p.read_text(encoding="utf-8").splitlines() for p in (hyp, ref))
        srcs = source.read_text(encoding="utf-8").splitlines() if source else [""] * len(refs)
        pairs = links.read_text(encoding="utf-8").splitlines() if links else [None] * len(refs)
        if not len(hyps) == len(refs) == len(srcs) == len(pairs):
            raise SystemExit(f"{hyp}: {len(hyps)} lines, {ref}: {len(refs)}, source/links: {len(srcs)}/{len(pairs)}")
        for n, (hl, rl, sl, al) in enumerate(zip(hyps, refs, srcs, pairs), 1):
            h, r, s = tokenize(hl), tokenize(rl), tokenize(sl)
            tgt2src: dict[int, list[int]] = defaultdict(list)
            for a in (al or "").split():
                si, ti = a.split("-")
                tgt2src[int(ti)].append(int(si))
            sm = difflib.SequenceMatcher(None, [w.lower() for w in h], [w.lower() for w in r], autojunk=False)
            for a, b, size in sm.get_matching_blocks():
                self.tokens += size
                for hi, ri in zip(range(a, a + size), range(b, b + size)):
                    if h[hi] == r[ri]:
                        continue
                    cls = classify(h, hi, r, ri, s if source else None, tgt2src[hi] if links else None)
                    self.counts[cls] += 1
                    self.pairs[cls][f"{h[hi]}→{r[ri]}"] += 1
                    if " (" in cls:
                        self.counts[cls.split(" (")[0]] += 1
                    if len(self.examples[cls]) < EXAMPLES and (cls, n) not in self.seen:  # one a line number
                        self.seen.add((cls, n))
                        left, right = " ".join(h[max(0, hi - 3) : hi]), " ".join(h[hi + 1 : hi + 3])
                        ctx = f"…{left} [{h[hi]}→{r[ri]}] {right}…"
                        self.examples[cls].append(f"{hyp.name}:{n}: {ctx}")


def table(cols: Sequence[Column]) -> str:
    total = {c.name: sum(c.counts[k] for k in CLASSES) for c in cols}
    rows = ["| class | " + " | ".join(f"{c.name}: errors (share)" for c in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    labels = [k for k in CLASSES for k in (k, *(f"{k} ({s})" for s in SUBS if k == "sentence start"))]
    for k in labels:
        cells = [f"{c.counts[k]} ({100 * c.counts[k] / max(1, total[c.name]):.1f}%)" for c in cols]
        rows.append(f"| {k.replace('sentence start (', '… of which (')} | " + " | ".join(cells) + " |")
    rows.append("| **all case errors** | " + " | ".join(f"**{total[c.name]}**" for c in cols) + " |")
    less = [f"{total[c.name] - c.counts['sentence start (word order)']}" for c in cols]
    rows.append("| all less word order | " + " | ".join(less) + " |")
    rows.append("| aligned tokens | " + " | ".join(f"{c.tokens}" for c in cols) + " |")
    for c in cols:
        rows += ["", f"Examples, {c.name}:", ""]
        for k in (k for k in labels if c.examples[k]):
            top = ", ".join(f"{p} ×{m}" for p, m in c.pairs[k].most_common(5))
            rows.append(f"- {k}: " + "; ".join(f"`{e}`" for e in c.examples[k]) + f" (most often: {top})")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hyp", nargs="+", type=Path, help="recased file(s), all against --ref")
    ap.add_argument("--ref", type=Path)
    ap.add_argument("--source", type=Path, help="the cased source, line by line")
    ap.add_argument("--links", type=Path, help="Pharaoh source-target links over these tokens (one --hyp)")
    ap.add_argument("--name", default="hyp", help="the column's label")
    ap.add_argument("--column", nargs="+", action="append", default=[], metavar="LABEL REF SOURCE|- HYP")
    args = ap.parse_args()
    if args.hyp and (not args.ref or args.links and len(args.hyp) > 1) or any(len(c) < 4 for c in args.column):
        ap.error("--hyp needs --ref, --links one --hyp, --column LABEL REF SOURCE|- HYP [HYP ...]")
    specs = [[args.name, args.ref, args.source or "-", *(args.hyp or [])]] * bool(args.hyp) + args.column
    if not specs:
        ap.error("give --hyp and --ref, or --column")
    cols = [Column(str(c[0])) for c in specs]
    for col, (_, ref, src, *hyps) in zip(cols, specs):
        for h in hyps:
            col.add(Path(h), Path(ref), None if str(src) == "-" else Path(src), args.links if args.hyp else None)
    print(table(cols))


if __name__ == "__main__":
    main()
