"""Evaluation: capitalization precision (eq. 9), cased-word F1, per-tag confusion, paired bootstrap.

Precision compares token by token (the recased output and the reference differ in case only).
F1 is over reference words with an upper-case letter: a hit is such a word recased exactly;
precision of F1 divides by output words with an upper-case letter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from moses_recaser import casing
from moses_recaser.casing import TAG_NAMES, Tag
from moses_recaser.errors import RecaserError
from moses_recaser.textio import read_lines, split_tokens


def _has_upper(token: str) -> bool:
    return any(c.isupper() for c in token)


@dataclass
class CaseScores:
    words: int = 0
    correct: int = 0
    ref_upper: int = 0
    hyp_upper: int = 0
    upper_hits: int = 0
    confusion: np.ndarray = field(default_factory=lambda: np.zeros((len(Tag), len(Tag)), dtype=np.int64))
    per_sentence: list[tuple[int, int]] = field(default_factory=list)  # (correct, words)

    @property
    def precision(self) -> float:
        return self.correct / self.words if self.words else 0.0

    @property
    def f1(self) -> float:
        p = self.upper_hits / self.hyp_upper if self.hyp_upper else 0.0
        r = self.upper_hits / self.ref_upper if self.ref_upper else 0.0
        return 2 * p * r / (p + r) if p + r else 0.0

    def confusion_table(self) -> str:
        """Rows: reference tag; columns: output tag."""
        head = "ref\\out " + " ".join(f"{n:>7}" for n in TAG_NAMES)
        rows = [head] + [
            f"{TAG_NAMES[i]:<7} " + " ".join(f"{int(x):>7}" for x in self.confusion[i]) for i in range(len(Tag))
        ]
        return "\n".join(rows)


def case_scores(hyps: Iterable[Sequence[str]], refs: Iterable[Sequence[str]]) -> CaseScores:
    s = CaseScores()
    for k, (h, r) in enumerate(zip(hyps, refs, strict=True), 1):
        if len(h) != len(r) or any(casing.lower(a) != casing.lower(b) for a, b in zip(h, r)):
            raise RecaserError(f"sentence {k}: output and reference differ in more than case")
        c = 0
        for a, b in zip(h, r):
            c += a == b
            s.confusion[casing.tag(b), casing.tag(a)] += 1
            if _has_upper(b):
                s.ref_upper += 1
                s.upper_hits += a == b
            if _has_upper(a):
                s.hyp_upper += 1
        s.correct += c
        s.words += len(r)
        s.per_sentence.append((c, len(r)))
    return s


def paired_bootstrap_precision(a: CaseScores, b: CaseScores, samples: int = 1000, seed: int = 12345) -> float:
    """p-value that system a's precision is not better than b's (paired bootstrap over sentences)."""
    ca = np.array([c for c, _ in a.per_sentence], dtype=np.float64)
    cb = np.array([c for c, _ in b.per_sentence], dtype=np.float64)
    n = np.array([w for _, w in a.per_sentence], dtype=np.float64)
    rng = np.random.default_rng(seed)
    worse = 0
    for _ in range(samples):
        idx = rng.integers(0, len(n), len(n))
        if ca[idx].sum() <= cb[idx].sum():
            worse += 1
    return (worse + 1) / (samples + 1)


def case_scores_of_files(hyp: str, ref: str) -> CaseScores:
    """``case_scores`` of a recased file against its cased reference, both tokenized the same way."""
    hyps = [split_tokens(x) for x in read_lines(hyp)]
    refs = [split_tokens(x) for x in read_lines(ref)]
    if len(hyps) != len(refs):
        raise RecaserError(f"line-count mismatch: {len(hyps)} output lines, {len(refs)} reference lines", hyp)
    return case_scores(hyps, refs)
