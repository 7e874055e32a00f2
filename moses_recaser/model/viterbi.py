"""Exact second-order Viterbi over a flat batch, with the LM split by its backoff rule.

The LM feature of candidate c after candidates a, b is log10 p(c | a b), and by the ARPA backoff rule

    log10 p(c | a b) = bo(a b) + log10 p(c | b)    unless some trigram extends "a b" (about one context in nine).

So the best score of the state (b, c) is

    max( max_{a: "a b" not extended} [delta(a, b) + w bo(a b)] + w log10 p(c | b),
         max_{a: "a b" extended}     [delta(a, b) + w log10 p(c | a b)] ) + phi(c)

where the first maximum is over a alone (once per b, not once per (b, c)) and the second has one term
per extended context and c. The work is linear in the lattices' (b, c) cells, not in their (a, b, c)
triples, and the result is that of Viterbi over every triple (``crf.viterbi``; ties go to the first
candidate, as there). An LM without backoffs to hand (kenlm's Python module) has every context extended.

Layout: step t of a sentence of n words is word t (t = n: </s>); its states are the cells (x, y), x a
candidate at t - 1 and y at t (<s> has one candidate, and so has </s>). Sentences are ordered longest
first and decoded one step at a time all together; cells are stored step-major, each sentence's y
outer and x inner, so the maximum over a is a ``reduceat`` over runs of cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

NEG = -1e300
BOS, EOS = -1, -2  # word numbers of <s> and </s> (others: flat candidate numbers)


class ContextLM(Protocol):
    def pairs(
        self, b: np.ndarray, c: np.ndarray, context: np.ndarray
    ) -> tuple[
        np.ndarray, np.ndarray, np.ndarray
    ]: ...  # log10 p(c | b); where context: bo(b c) and whether a trigram extends "b c"

    def trigram_scores(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fallback: np.ndarray) -> np.ndarray: ...


@dataclass
class Cells:
    """The state cells of a batch, one row per cell (see the module docstring)."""

    sent: np.ndarray  # sentence
    step: np.ndarray  # t: the cell is (candidate at t - 1, candidate at t); t = -1 is (<s>, <s>)
    x: np.ndarray  # candidate index at t - 1
    y: np.ndarray  # candidate index at t
    wx: np.ndarray  # word number at t - 1
    wy: np.ndarray  # word number at t
    run: np.ndarray  # the run of each cell: the cells (., y) of one slot pair, over x
    run_start: np.ndarray  # (R,) first cell of each run
    prev_run: np.ndarray  # the run (., x) of the step before: this cell's predecessors (-1 at t = -1)
    region: np.ndarray  # (T + 3,) first cell of each step t = -1 .. T, and the end
    run_region: np.ndarray  # (T + 3,) first run of each step, and the end
    active: np.ndarray  # (T + 2,) sentences with a step t (n >= t), a prefix of ``order``
    order: np.ndarray  # (S,) sentences, longest first: the order of each step's slot pairs
    slot_start: np.ndarray  # first cell of each slot pair (step, sentence), step-major
    slot_kx: np.ndarray  # candidates at t - 1 of each slot pair
    slot_ky: np.ndarray  # candidates at t
    slot_of: np.ndarray  # (T + 2, S) slot pair of (t, sentence) at row t + 1 (-1: none)

    @classmethod
    def from_lengths(cls, per_pos: np.ndarray, n_pos: np.ndarray) -> Cells:
        S = len(n_pos)
        order = np.argsort(-n_pos, kind="stable")
        T = int(n_pos.max()) if S else -1
        steps = np.arange(-1, T + 1)
        active = np.searchsorted(-n_pos[order], -steps, side="right")
        sp_step = np.repeat(steps, active)
        sp_sent = order[np.arange(len(sp_step)) - np.repeat(np.cumsum(active) - active, active)]
        slot_of = np.full((T + 2, S), -1, dtype=np.int64)
        slot_of[sp_step + 1, sp_sent] = np.arange(len(sp_step))
        pos_start, cand_start = np.cumsum(n_pos) - n_pos, np.cumsum(per_pos) - per_pos

        def at(s: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """Candidates at slot t of sentence s, and the word number of the first."""
            real = (t >= 0) & (t < n_pos[s])
            if not len(per_pos):
                return np.ones(len(s), dtype=np.int64), np.where(t < 0, BOS, EOS)
            p = np.where(real, pos_start[s] + t, 0)
            return np.where(real, per_pos[p], 1), np.where(real, cand_start[p], np.where(t < 0, BOS, EOS))

        kx, fx = at(sp_sent, sp_step - 1)
        ky, fy = at(sp_sent, sp_step)
        n = kx * ky
        slot_start = np.cumsum(n) - n
        sp = np.repeat(np.arange(len(n)), n)
        local = np.arange(len(sp)) - slot_start[sp]
        y, x = local // kx[sp], local % kx[sp]
        wx = np.where(fx[sp] >= 0, fx[sp] + x, fx[sp])
        wy = np.where(fy[sp] >= 0, fy[sp] + y, fy[sp])
        run_start = np.flatnonzero(x == 0)
        run = np.cumsum(x == 0) - 1
        step = sp_step[sp]
        prev_sp = slot_of[np.maximum(step, 0), sp_sent[sp]]  # row t holds step t - 1
        prev_run = np.where(step >= 0, run[slot_start[prev_sp]] + x, -1) if len(sp) else run
        region = np.searchsorted(step, np.arange(-1, T + 2))
        return cls(
            sent=sp_sent[sp],
            step=step,
            x=x,
            y=y,
            wx=wx,
            wy=wy,
            run=run,
            run_start=run_start,
            prev_run=prev_run,
            region=region,
            run_region=np.searchsorted(run_start, region),
            active=active,
            order=order,
            slot_start=slot_start,
            slot_kx=kx,
            slot_ky=ky,
            slot_of=slot_of,
        )


@dataclass
class SplitLM:
    """The LM over the cells (unweighted): per cell (x, y), bo(x y) (0 when absent) and whether some
    trigram extends "x y", and log10 p(y | x); and the terms of extended contexts, step-major: from
    cell ``src`` (a, b) into cell ``dst`` (b, c), worth log10 p(c | a b)."""

    bo: np.ndarray
    extended: np.ndarray
    bigram: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    value: np.ndarray

    @classmethod
    def from_lm(cls, cells: Cells, lm: ContextLM, word_ids: np.ndarray, specials: tuple[int, int]) -> SplitLM:
        """``word_ids``: the LM's id of each flat candidate, ``specials`` its ids of <s> and </s>."""
        bos, eos = specials

        def ids(w: np.ndarray) -> np.ndarray:
            return np.where(w >= 0, word_ids[np.maximum(w, 0)] if len(word_ids) else 0, np.where(w == BOS, bos, eos))

        ix, iy = ids(cells.wx), ids(cells.wy)
        # (<s>, <s>) is no context: the first word's context is <s> alone
        lp, bo, extended = lm.pairs(ix, iy, cells.step >= 0)
        # each extended cell (a, b) of step t with every c of step t + 1 (none after </s>)
        src0 = np.flatnonzero(extended & (cells.wy != EOS))
        nxt = cells.slot_of[cells.step[src0] + 2, cells.sent[src0]]
        kc = cells.slot_ky[nxt]
        rep = np.repeat(np.arange(len(src0)), kc)
        c = np.arange(len(rep)) - np.repeat(np.cumsum(kc) - kc, kc)
        src = src0[rep]
        dst = cells.slot_start[nxt][rep] + c * cells.slot_kx[nxt][rep] + cells.y[src]
        value = lm.trigram_scores(ix[src], iy[src], iy[dst], bo[src] + lp[dst])
        return cls(bo=bo, extended=extended, bigram=lp, src=src, dst=dst, value=value)


def viterbi(cells: Cells, lm: SplitLM, weight: np.ndarray, phi: np.ndarray, n_pos: np.ndarray) -> list[np.ndarray]:
    """The best candidate index per position of each sentence, for the LM weight of each sentence
    ``weight`` and the unary score of each flat candidate ``phi``."""
    N, S = len(cells.sent), len(n_pos)
    if not N:
        return [np.zeros(0, dtype=np.int64) for _ in range(S)]
    w = weight[cells.sent]
    bo = np.where(lm.extended, NEG, w * lm.bo)  # the non-extended contexts' term
    bigram = w * lm.bigram
    src, dst, value = lm.src, lm.dst, w[lm.dst] * lm.value
    unary = np.where(cells.wy >= 0, phi[np.maximum(cells.wy, 0)] if len(phi) else 0.0, 0.0)
    delta = np.zeros(N)
    back = np.zeros(N, dtype=np.int64)  # each cell's best predecessor cell
    x = cells.x
    bounds = np.searchsorted(cells.step[dst], np.arange(-1, len(cells.region) - 1))  # by the step of dst
    big = np.iinfo(np.int64).max
    for k in range(1, len(cells.region) - 1):  # step t = k - 1 (step -1, (<s>, <s>), scores 0)
        p0, p1, c1 = cells.region[k - 1], cells.region[k], cells.region[k + 1]
        r0, r1 = cells.run_region[k - 1], cells.run_region[k]
        # over a, for each b: the best of the non-extended contexts, and the first a reaching it
        xv = delta[p0:p1] + bo[p0:p1]
        starts = cells.run_start[r0:r1] - p0
        best = np.maximum.reduceat(xv, starts)
        first_a = np.minimum.reduceat(np.where(xv == best[cells.run[p0:p1] - r0], x[p0:p1], big), starts)
        pr = cells.prev_run[p1:c1] - r0
        score = best[pr] + bigram[p1:c1]
        a = first_a[pr]
        e0, e1 = bounds[k], bounds[k + 1]
        if e1 > e0:  # the extended contexts' terms
            d = dst[e0:e1] - p1
            v = delta[src[e0:e1]] + value[e0:e1]
            top = score.copy()
            np.maximum.at(top, d, v)
            a = np.where(score == top, a, big)
            win = v == top[d]
            np.minimum.at(a, d[win], x[src[e0:e1][win]])
            score = top
        delta[p1:c1] = score + unary[p1:c1]
        back[p1:c1] = cells.run_start[cells.prev_run[p1:c1]] + a
    return _paths(cells, delta, back, n_pos)


def dense(cells: Cells, lm: SplitLM, per_pos: np.ndarray, n_pos: np.ndarray) -> list[np.ndarray]:
    """Per sentence, lm[t, a, b, c] = log10 p(c_t | a, b) (features.Lattice.lm), K the sentence's most
    candidates at a position."""
    S = len(n_pos)
    K = np.ones(S, dtype=np.int64)
    if len(per_pos):
        np.maximum.at(K, np.repeat(np.arange(S), n_pos), per_pos)
    size = (n_pos + 1) * K**3
    off = np.cumsum(size) - size
    buf = np.zeros(int(size.sum()))
    cell = np.flatnonzero(cells.step >= 0)
    run_len = np.diff(np.append(cells.run_start, len(cells.sent)))
    na = run_len[cells.prev_run[cell]]
    rep = np.repeat(cell, na)
    a = np.arange(len(rep)) - np.repeat(np.cumsum(na) - na, na)
    prev = cells.run_start[cells.prev_run[rep]] + a
    s = cells.sent[rep]

    def index(s: np.ndarray, t: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        k = K[s]
        return off[s] + ((t * k + a) * k + b) * k + c

    # the backoff rule everywhere, then the extended contexts' own terms
    buf[index(s, cells.step[rep], a, cells.x[rep], cells.y[rep])] = lm.bo[prev] + lm.bigram[rep]
    d = lm.dst
    buf[index(cells.sent[d], cells.step[d], cells.x[lm.src], cells.x[d], cells.y[d])] = lm.value
    return [buf[off[k] : off[k] + size[k]].reshape(int(n_pos[k]) + 1, *(int(K[k]),) * 3) for k in range(S)]


def _paths(cells: Cells, delta: np.ndarray, back: np.ndarray, n_pos: np.ndarray) -> list[np.ndarray]:
    """Follow the best predecessors back from each sentence's best final cell (x, </s>)."""
    S = len(n_pos)
    order = cells.order
    final = cells.slot_of[n_pos[order] + 1, order]  # the slot pair (n, sentence): (word n - 1, </s>)
    starts, kx = cells.slot_start[final], cells.slot_kx[final]
    # the first best x of each final slot pair (its cells are (x, </s>), x = 0 .. kx - 1)
    span = np.repeat(starts, kx) + np.arange(int(kx.sum())) - np.repeat(np.cumsum(kx) - kx, kx)
    seg = np.cumsum(kx) - kx
    vals = delta[span]
    best = np.maximum.reduceat(vals, seg)
    hit = np.where(vals == np.repeat(best, kx), np.arange(len(span)) - np.repeat(seg, kx), np.iinfo(np.int64).max)
    cur = starts + np.minimum.reduceat(hit, seg)
    T = len(cells.active) - 2
    chosen = np.zeros((T + 1, S), dtype=np.int64)  # x of the path's cell at step t = candidate at t - 1
    for t in range(T, 0, -1):  # at step t, the sentences with n >= t are order[:active]
        A = int(cells.active[t + 1])
        chosen[t, :A] = cells.x[cur[:A]]
        cur[:A] = back[cur[:A]]
    out: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * S
    for j, s in enumerate(order.tolist()):
        n = int(n_pos[s])
        out[s] = chosen[1 : n + 1, j]
    return out
