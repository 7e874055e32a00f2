"""Interpolated modified Kneser-Ney n-gram estimation, as KenLM's ``lmplz`` does it, written as ARPA.

The steps mirror lmplz's pipeline (kenlm/lm/builder):

1. n-gram counts of every order (``counter``), each sentence padded as ``<s> w1 ... wn </s>`` (one ``<s>``);
2. adjusted counts (adjust_counts.cc): the highest order keeps raw counts; a lower-order n-gram
   gets the number of distinct words seen to its left, except n-grams that begin with ``<s>``,
   which keep their raw count (nothing can stand left of ``<s>``);
3. three discounts per order from the counts of adjusted counts t1..t4:
   ``Y = t1 / (t1 + 2 t2)``, ``D_k = k - (k + 1) Y t_{k+1} / t_k`` for k = 1, 2, 3+;
4. initial probabilities (initial_probabilities.cc), per context c:
   ``u(w|c) = (a(cw) - D(a(cw))) / sum_x a(cx)`` and
   ``gamma(c) = (D1 N1(c) + D2 N2(c) + D3 N3+(c)) / sum_x a(cx)``;
5. interpolation (interpolate.cc): ``p(w|c) = u(w|c) + gamma(c) p(w|c')`` with c' the context
   less its first word, down to unigrams, which interpolate with the uniform distribution
   over the vocabulary (``<s>`` excluded, ``<unk>`` included);
6. ARPA: log10 p, and log10 gamma as the backoff of every n-gram that is a context.

N-grams are handled as integer arrays: an n-gram of order n is the pair (id of its first
n-1 words in the order n-1 table, last word), so each order is one sorted int64 array.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import IO

import numpy as np

from moses_recaser.errors import RecaserError

log = logging.getLogger(__name__)

UNK, BOS, EOS = "<unk>", "<s>", "</s>"


@dataclass
class NGramCounts:
    """Raw n-gram counts of every order, over integer word ids.

    ``keys[n-1]`` holds the sorted unique n-grams of order n as ``context_id * V + word``
    (context_id indexes ``keys[n-2]``; for unigrams the key is the word id), ``counts[n-1]``
    their raw counts, ``suffix[n-1]`` the id of each n-gram's last n-1 words in order n-1.
    """

    order: int
    vocab: list[str]
    keys: list[np.ndarray] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)
    suffix: list[np.ndarray] = field(default_factory=list)

    @property
    def V(self) -> int:
        return len(self.vocab)

    @classmethod
    def from_rows(cls, vocab: list[str], per_order: list[tuple[np.ndarray, np.ndarray]], order: int) -> NGramCounts:
        """The counts of n-grams given as rows of word ids (per order: (N, n) rows and their counts; every
        n-gram at most once), in this class's hierarchical keys."""
        V = len(vocab)
        out = cls(order=order, vocab=vocab)
        grams1, counts1 = per_order[0]
        out.keys.append(np.arange(V, dtype=np.int64))
        out.counts.append(np.bincount(grams1[:, 0], weights=counts1, minlength=V).astype(np.int64))
        out.suffix.append(np.zeros(V, dtype=np.int64))

        def ids_of(tuples: np.ndarray) -> np.ndarray:
            """Table index of each m-gram (rows of ``tuples``) in the order-m table."""
            idx = tuples[:, 0].copy()
            for m in range(2, tuples.shape[1] + 1):
                key = idx * V + tuples[:, m - 1]
                idx = np.searchsorted(out.keys[m - 1], key)
            return idx

        for n in range(2, order + 1):
            grams, counts = per_order[n - 1]
            keys = ids_of(grams[:, : n - 1]) * V + grams[:, n - 1]
            uniq, inverse = np.unique(keys, return_inverse=True)
            summed = np.bincount(inverse, weights=counts, minlength=len(uniq)).astype(np.int64)
            out.keys.append(uniq)
            out.counts.append(summed)
            suffix = np.empty(len(uniq), dtype=np.int64)
            suffix[inverse] = ids_of(grams[:, 1:])
            out.suffix.append(suffix)
        return out

    def words(self, n: int, idx: np.ndarray) -> np.ndarray:
        """The word ids (shape len(idx) x n) of order-n n-grams with the given table indices."""
        cols = []
        cur = np.asarray(idx, dtype=np.int64)
        for m in range(n, 0, -1):
            key = self.keys[m - 1][cur]
            cols.append(key % self.V)
            cur = key // self.V
        return np.stack(cols[::-1], axis=1)


BOS_ID = 1  # <unk>, <s>, </s> take ids 0, 1, 2 (as lmplz numbers them)


@dataclass
class KneserNeyModel:
    """Log10 probabilities and backoffs of every n-gram, ready to write as ARPA."""

    counts: NGramCounts
    logprob: list[np.ndarray]
    backoff: list[np.ndarray]
    discounts: list[tuple[float, float, float]]


# lmplz --discount_fallback's default discounts, for corpora too small to estimate them
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)


def _discounts(adjusted: np.ndarray, n: int, fallback: bool) -> tuple[float, float, float]:
    t = np.bincount(np.minimum(adjusted[adjusted > 0], 5), minlength=6)
    t1, t2, t3, t4 = (int(x) for x in t[1:5])
    problem = None
    if min(t1, t2, t3, t4) == 0:
        problem = f"counts of adjusted counts 1-4 are {t1}, {t2}, {t3}, {t4}"
    else:
        y = t1 / (t1 + 2.0 * t2)
        d = (1 - 2 * y * t2 / t1, 2 - 3 * y * t3 / t2, 3 - 4 * y * t4 / t3)
        bad = [f"D{k}={v:.4f}" for k, v in enumerate(d, 1) if not 0.0 < v <= k]
        if not bad:
            return d
        problem = f"discount {', '.join(bad)} out of range"
    if fallback:
        log.warning("order %d: %s; using lmplz's fallback discounts %s", n, problem, FALLBACK_DISCOUNTS)
        return FALLBACK_DISCOUNTS
    raise RecaserError(
        f"cannot estimate Kneser-Ney discounts for order {n}: {problem} (the corpus is too small for this "
        "order; lmplz's --discount_fallback, here --discount-fallback, uses 0.5 1 1.5)"
    )


def adjusted_counts(counts: NGramCounts) -> list[np.ndarray]:
    """lmplz's adjusted counts: raw at the top order and for n-grams starting with <s>, else left types."""
    N, V = counts.order, counts.V
    starts_bos = [counts.keys[0] == BOS_ID]
    for n in range(2, N + 1):
        starts_bos.append(starts_bos[n - 2][counts.keys[n - 1] // V])
    adjusted = []
    for n in range(1, N + 1):
        raw = counts.counts[n - 1]
        if n == N:
            adjusted.append(raw.copy())
            continue
        left_types = np.bincount(counts.suffix[n], minlength=len(raw)).astype(np.int64)
        adjusted.append(np.where(starts_bos[n - 1], raw, left_types))
    return adjusted


def estimate(counts: NGramCounts, discount_fallback: bool = False) -> KneserNeyModel:
    """Interpolated modified Kneser-Ney estimates from raw counts (see the module docstring)."""
    N, V = counts.order, counts.V
    adjusted = adjusted_counts(counts)
    discounts = [_discounts(adjusted[n - 1], n, discount_fallback) for n in range(1, N + 1)]
    logprob: list[np.ndarray] = []
    gammas: list[np.ndarray] = []
    p_lower = np.zeros(0)
    for n in range(1, N + 1):
        a = adjusted[n - 1].astype(np.float64)
        d1, d2, d3 = discounts[n - 1]
        disc = np.select([a == 0, a == 1, a == 2], [0.0, d1, d2], d3)
        ctx = np.zeros(len(a), dtype=np.int64) if n == 1 else counts.keys[n - 1] // V
        n_ctx = 1 if n == 1 else len(counts.keys[n - 2])
        total = np.bincount(ctx, weights=a, minlength=n_ctx)
        safe = np.where(total > 0, total, 1.0)
        gamma = np.bincount(ctx, weights=disc, minlength=n_ctx) / safe
        u = (a - disc) / safe[ctx]
        if n == 1:
            # interpolate with the uniform distribution over the vocabulary less <s>
            p = u + gamma[0] / (V - 1)
            p[BOS_ID] = 1.0  # never predicted; lmplz writes log10 p(<s>) as 0
        else:
            p = u + gamma[ctx] * p_lower[counts.suffix[n - 1]]
            gammas.append(np.where(total > 0, gamma, 1.0))  # backoffs of the order n-1 contexts
        logprob.append(np.log10(p))
        p_lower = p
    backoff = [np.log10(g) for g in gammas] + [np.zeros(len(counts.keys[N - 1]))]
    return KneserNeyModel(counts=counts, logprob=logprob, backoff=backoff, discounts=discounts)


def write_arpa(model: KneserNeyModel, out: IO[str], block: int = 100_000) -> None:
    """Write the model in ARPA format (unigrams in vocabulary order, like lmplz), ``block`` n-grams at a time."""
    c = model.counts
    vocab = c.vocab
    out.write("\\data\\\n")
    out.writelines(f"ngram {n}={len(c.keys[n - 1])}\n" for n in range(1, c.order + 1))
    for n in range(1, c.order + 1):
        out.write(f"\n\\{n}-grams:\n")
        total = len(c.keys[n - 1])
        for start in range(0, total, block):
            idx = np.arange(start, min(start + block, total))
            lps = model.logprob[n - 1][idx].tolist()
            texts = [" ".join([vocab[j] for j in row]) for row in c.words(n, idx).tolist()]
            if n == c.order:
                out.write("".join(f"{_fmt(lp)}\t{text}\n" for lp, text in zip(lps, texts)))
            else:
                bos = model.backoff[n - 1][idx].tolist()
                out.write("".join(f"{_fmt(lp)}\t{text}\t{_fmt(bo)}\n" for lp, text, bo in zip(lps, texts, bos)))
    out.write("\n\\end\\\n")


def _fmt(x: float) -> str:
    return "0" if x == 0 else f"{x:.7g}"
