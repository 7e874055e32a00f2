"""Slow, plain reference versions of what the package computes a batch at a time: the tests check the
package against them.

- ``positional``, ``source_flags``, ``first_letter_position``: one sentence's capitals due to position,
  headline flags and first word with a letter (``sentences``);
- ``takes_source_word``: GEN's test for one aligned source word (``extractor.FeatureExtractor._takes``);
- ``Lattice`` and ``lattices``: one sentence's lattice as dense arrays, and the lattices of a batch;
- ``batch_of`` and ``dense_viterbi``: padded training tensors of dense lattices, and Viterbi over every
  trigram of them (``viterbi.viterbi`` splits the LM by its backoff rule instead).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.sentences import FINAL, HEADLINE_MAX, SENTENCE_END
from moses_recaser.model.crf import Batch, make_batches

NEG = -np.inf


def potentials(batch: Batch, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Log potentials: the unary score of each candidate (-inf for padding) and the weighted LM factor."""
    phi = batch.unary @ w[1:]
    phi = np.where(batch.valid, phi, NEG)
    return phi, w[0] * batch.lm


def positional(tokens: Sequence[str]) -> set[int]:
    """Positions whose capitalization is due to position: the first word with a letter, and the first
    word with a letter after ``.``, ``!`` or ``?``."""
    out: set[int] = set()
    expect = True
    for i, tok in enumerate(tokens):
        if tok in SENTENCE_END:
            expect = True
        elif expect and casing.has_letter(tok):
            out.add(i)
            expect = False
    return out


def first_letter_position(tokens: Sequence[str]) -> int:
    for i, tok in enumerate(tokens):
        if casing.has_letter(tok):
            return i
    return -1


def source_flags(source: Sequence[str]) -> tuple[bool, bool]:
    """(looks like a headline, is title-cased) for a source line."""
    if not source or not any(casing.has_letter(t) for t in source):
        return False, False
    headline = len(source) <= HEADLINE_MAX and source[-1] not in FINAL
    first = first_letter_position(source)
    longer = [t for i, t in enumerate(source) if i > first and casing.has_letter(t) and len(t) > 3]
    title = len(longer) >= 2 and sum(casing.is_capitalized(t) for t in longer) >= 0.6 * len(longer)
    return headline, title


def takes_source_word(form: str, token: str) -> bool:
    """Whether GEN(token) takes the aligned source word ``form``: same length, and equal up to case, or up to
    case and diacritics; a lowercase form equal to a lowercase token is GEN's first candidate already."""
    if len(form) != len(token) or (form == token and form == casing.lower(form)):
        return False
    low, key = casing.lower(form), casing.lower(token)
    if low == key:
        return True
    if form.isascii() and token.isascii():
        return False
    return casing.strip_diacritics(low) == casing.strip_diacritics(key)


@dataclass
class Lattice:
    """One sentence's lattice, dense: n words, at most K candidates a position."""

    cands: list[list[str]]
    unary: np.ndarray  # (n, K, D); padding rows are 0
    lm: np.ndarray  # (n + 1, K, K, K): lm[i, a, b, c] = log10 p(c_i | c_{i-2}=a, c_{i-1}=b); i = n is </s>
    valid: np.ndarray  # (n, K) bool
    gold: np.ndarray | None = None
    gen_misses: int = 0

    @property
    def n(self) -> int:
        return len(self.cands)


def lattices(extractor, triples, references=None) -> list[Lattice]:  # type: ignore[no-untyped-def]
    """The dense lattice of each triple, from the extractor's flat lattice of them all."""
    flat = extractor.flat(triples, references)
    cands = flat.candidates(extractor.candidates.strings)
    D = flat.unary.shape[1]
    out = [
        Lattice(
            cands=[],
            unary=np.zeros((0, 1, D)),
            lm=np.zeros((1, 1, 1, 1)),
            valid=np.zeros((0, 1), bool),
            gold=flat.gold[s],
            gen_misses=flat.gen_misses[s],
        )
        for s in range(len(triples))
    ]
    for b in make_batches([flat]):
        for row, s in enumerate(b.members):
            K = max(map(len, cands[s]))
            out[s] = Lattice(
                cands=cands[s],
                unary=b.unary[row, :, :K],
                lm=b.lm[row, :, :K, :K, :K],
                valid=b.valid[row, :, :K],
                gold=flat.gold[s],
                gen_misses=flat.gen_misses[s],
            )
    return out


def batch_of(lats: Sequence[Lattice], max_batch: int = 512) -> list[Batch]:
    """Dense lattices as training tensors: grouped by length, padded (``crf.make_batches`` of flats)."""
    by_len: dict[int, list[int]] = defaultdict(list)
    for k, lat in enumerate(lats):
        if lat.n:
            by_len[lat.n].append(k)
    out = []
    for n in sorted(by_len):
        for start in range(0, len(by_len[n]), max_batch):
            members = by_len[n][start : start + max_batch]
            group = [lats[k] for k in members]
            K = max(lat.unary.shape[1] for lat in group)
            S, D = len(group), group[0].unary.shape[2]
            unary, lm = np.zeros((S, n, K, D)), np.zeros((S, n + 1, K, K, K))
            valid = np.zeros((S, n, K), dtype=bool)
            for s, lat in enumerate(group):
                k = lat.unary.shape[1]
                unary[s, :, :k], lm[s, :, :k, :k, :k], valid[s, :, :k] = lat.unary, lat.lm, lat.valid
            gold = np.stack([lat.gold for lat in group]) if all(lat.gold is not None for lat in group) else None
            out.append(Batch(unary=unary, lm=lm, valid=valid, gold=gold, members=members))  # type: ignore[arg-type]
    return out


def dense_viterbi(batch: Batch, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Second-order Viterbi over every trigram, from the state (<s>, <s>) = (0, 0): the best candidate index
    per position (S, n), and the best path scores (S,)."""
    phi, L = potentials(batch, w)
    S, n, K = phi.shape
    end = L[:, -1, :, :, 0]
    d = np.full((S, K, K), NEG)
    d[:, 0, 0] = 0.0
    back = []
    for i in range(n):
        cand = d[:, :, :, None] + L[:, i]  # (S, a, b, c)
        back.append(np.argmax(cand, axis=1))  # (S, b, c)
        d = np.max(cand, axis=1) + phi[:, i, None, :]
    final = (d + end).reshape(S, -1)
    best = np.argmax(final, axis=1)
    score = final[np.arange(S), best]
    path = np.zeros((S, n), dtype=np.int64)
    rows = np.arange(S)
    prev, cur = best // K, best % K
    path[:, n - 1] = cur
    for i in range(n - 1, 0, -1):
        path[:, i - 1] = prev
        prev, cur = back[i][rows, prev, cur], prev
    return path, score
