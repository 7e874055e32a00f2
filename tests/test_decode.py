"""Viterbi with the LM split by its backoff rule (decode) against Viterbi over every trigram (the oracle)
and against brute force, on random lattices and a random LM with backoff structure."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from oracles import Lattice, batch_of, dense_viterbi

from moses_recaser.model import viterbi as decode


def _noise(*keys: np.ndarray, salt: int) -> np.ndarray:
    """A fixed pseudo-random number in [0, 1) per key tuple."""
    h = np.full(len(keys[0]), salt, dtype=np.uint64)
    for k in keys:
        h = (h * np.uint64(1_000_003)) ^ (k.astype(np.int64) + 7).astype(np.uint64)
    h = (h * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(11)
    return h.astype(np.float64) / float(1 << 53)


class RandomLM:
    """A ContextLM over word ids with made-up scores: some contexts extended, and some of their trigrams listed."""

    def __init__(self, extended: float) -> None:
        self.share = extended

    def pairs(self, b, c, context):
        ext = context & (_noise(b, c, salt=1) < self.share)
        return -3 * _noise(b, c, salt=2), np.where(context, -_noise(b, c, salt=3), 0.0), ext

    def trigram_scores(self, a, b, c, fallback):
        return np.where(_noise(a, b, c, salt=4) < 0.5, -4 * _noise(a, b, c, salt=5), fallback)

    def score(self, a: int, b: int, c: int) -> float:
        """log10 p(c | a b) by the backoff rule; a = None: the context is b alone (b = <s>)."""
        one = lambda *x: np.array(x)
        lp, _, _ = self.pairs(one(b), one(c), one(False))
        if a is None:
            return float(lp[0])
        _, bo, ext = self.pairs(one(a), one(b), one(True))
        if ext[0]:
            return float(self.trigram_scores(one(a), one(b), one(c), bo + lp)[0])
        return float(bo[0] + lp[0])


def _batch(rng: np.random.Generator, lengths: list[int]):
    per_pos = rng.integers(1, 5, size=sum(lengths))
    n_pos = np.array(lengths, dtype=np.int64)
    return per_pos, n_pos, rng.normal(size=int(per_pos.sum()))


def _total(path: tuple[int, ...], w: float, lm: np.ndarray, phi: np.ndarray, first: list[int]) -> float:
    p = [0, 0, *path, 0]
    return sum(w * lm[i, p[i], p[i + 1], p[i + 2]] for i in range(len(path) + 1)) + sum(
        phi[f + j] for f, j in zip(first, path)
    )


@pytest.mark.parametrize("share", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("seed", range(6))
def test_split_viterbi_and_dense_lattices_equal_full_trigram_viterbi(seed, share):
    rng = np.random.default_rng(300 + seed)
    lengths = [int(n) for n in rng.integers(0, 7, size=11)] + [0]
    per_pos, n_pos, phi = _batch(rng, lengths)
    lm = RandomLM(share)
    BOS, EOS = 10_000, 10_001  # the LM's ids of <s> and </s>; candidate c has id c
    cells = decode.Cells.from_lengths(per_pos, n_pos)
    split = decode.SplitLM.from_lm(cells, lm, np.arange(len(phi)), (BOS, EOS))
    weight = rng.normal(size=len(lengths))  # per sentence, negative ones included
    got = decode.viterbi(cells, split, weight, phi, n_pos)
    dense = decode.dense(cells, split, per_pos, n_pos)
    p0 = c0 = 0
    for s, n in enumerate(lengths):
        sizes = per_pos[p0 : p0 + n].tolist()
        first = [c0 + sum(sizes[:i]) for i in range(n)]
        words = [[BOS]] * 2 + [list(range(f, f + k)) for f, k in zip(first, sizes)] + [[EOS]]
        K = max(sizes, default=1)
        assert dense[s].shape == (n + 1, K, K, K)
        for i in range(n + 1):  # every trigram of the lattice, by the backoff rule
            for (a, wa), (b, wb), (c, wc) in itertools.product(*(enumerate(words[i + j]) for j in range(3))):
                want = lm.score(None if i == 0 else wa, wb, wc)
                assert dense[s][i, a, b, c] == pytest.approx(want, abs=1e-12)
        unary = np.zeros((n, K, 1))
        valid = np.zeros((n, K), dtype=bool)
        for i, (f, k) in enumerate(zip(first, sizes)):
            unary[i, :k, 0] = phi[f : f + k]
            valid[i, :k] = True
        if n:
            lat = Lattice(cands=[["x"] * k for k in sizes], unary=unary, lm=dense[s], valid=valid)
            (batch,) = batch_of([lat])
            want, _ = dense_viterbi(batch, np.array([weight[s], 1.0]))
            assert got[s].tolist() == want[0].tolist()
            # and brute force
            best = max(
                itertools.product(*[range(k) for k in sizes]),
                key=lambda path, s=s, first=first: _total(path, weight[s], dense[s], phi, first),
            )
            assert tuple(got[s].tolist()) == best
        else:
            assert len(got[s]) == 0
        p0, c0 = p0 + n, c0 + sum(sizes)


def test_an_empty_batch_and_sentences_without_words():
    per_pos, n_pos = np.zeros(0, dtype=np.int64), np.array([0, 0], dtype=np.int64)
    cells = decode.Cells.from_lengths(per_pos, n_pos)
    split = decode.SplitLM.from_lm(cells, RandomLM(0.5), np.zeros(0, dtype=np.int64), (1, 2))
    assert [p.tolist() for p in decode.viterbi(cells, split, np.ones(2), np.zeros(0), n_pos)] == [[], []]
    assert [d.shape for d in decode.dense(cells, split, per_pos, n_pos)] == [(1, 1, 1, 1)] * 2
    empty = decode.Cells.from_lengths(per_pos, np.zeros(0, dtype=np.int64))
    split = decode.SplitLM.from_lm(empty, RandomLM(0.5), np.zeros(0, dtype=np.int64), (1, 2))
    assert decode.viterbi(empty, split, np.ones(0), np.zeros(0), np.zeros(0, dtype=np.int64)) == []
