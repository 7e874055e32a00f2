"""Batched trigram-context LM queries over numpy arrays, the same numbers kenlm gives.

The CRF's LM feature needs log10 p(c | a, b) for every candidate triple of a lattice: hundreds of
queries per sentence. Through kenlm's Python module each is a call; here all of a sentence's
queries are a few ``searchsorted`` over sorted int64 keys of the ARPA's unigrams, bigrams and
trigrams, with ARPA backoff:

    p(c | a b) = p(a b c)                         if "a b c" is listed
               = bo(a b) + p(b c)                 elif "b c" is listed
               = bo(a b) + bo(b) + p(c)           otherwise (p(<unk>) for unknown words)

with absent backoffs 0, as in kenlm. ``<s>`` is a context word like any other. Models with more than
three orders give the same result for a two-word context (their trigram rows). The arrays are
built from the ARPA once, at training time, and stored in the model (``lm.npz``), so recasing
neither parses the ARPA nor calls kenlm per query; tests check agreement with kenlm.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .errors import RecaserError
from .textio import LineReader

_HEADER = re.compile(r"\\([0-9]+)-grams:")
MAX_VOCAB = 2_000_000  # keys are a * V^2 + b * V + c in int64


@dataclass
class ArrayLM:
    vocab: list[str]
    uni_lp: np.ndarray  # (V,) log10 p(w); <unk> included
    uni_bo: np.ndarray  # (V,)
    bi_keys: np.ndarray  # sorted a * V + b
    bi_lp: np.ndarray
    bi_bo: np.ndarray
    tri_keys: np.ndarray  # sorted (a * V + b) * V + c
    tri_lp: np.ndarray
    order: int

    def __post_init__(self) -> None:
        self.ids = {w: i for i, w in enumerate(self.vocab)}
        self.unk = self.ids.get("<unk>", 0)

    @cached_property
    def bi_extended(self) -> np.ndarray:
        """(bigrams,) bool: some trigram extends the bigram. Only these contexts need a trigram lookup:
        about one query in nine on a recasing lattice."""
        ctx = self.tri_keys // self.V  # sorted, as tri_keys are
        return np.isin(self.bi_keys, ctx[np.r_[True, ctx[1:] != ctx[:-1]]] if len(ctx) else ctx)

    @property
    def V(self) -> int:
        return len(self.vocab)

    def word_ids(self, words: Iterable[str]) -> np.ndarray:
        get, unk = self.ids.get, self.unk
        return np.fromiter((get(w, unk) for w in words), dtype=np.int64)

    @staticmethod
    def _find(keys: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.searchsorted(keys, query)
        pos = np.minimum(pos, len(keys) - 1) if len(keys) else pos
        found = keys[pos] == query if len(keys) else np.zeros(len(query), dtype=bool)
        return pos, found

    def score(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """log10 p(c | a b) for arrays of word ids (a may be -1: no second context word)."""
        lp = self.bigram_scores(b, c)
        if self.order < 3:
            return lp
        return self.trigram_scores(a, b, c, self.contexts(a, b)[0] + lp)

    def bigram_scores(self, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """log10 p(c | b): the bigram (b, c), else backoff(b) + unigram."""
        bpos, bfound = self._find(self.bi_keys, b * self.V + c)
        return np.where(bfound, self.bi_lp[bpos] if len(self.bi_lp) else 0.0, self.uni_bo[b] + self.uni_lp[c])

    def contexts(self, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(backoff(a b), 0 when absent or when a is -1; whether a trigram extends "a b")."""
        has_a = a >= 0
        abpos, abfound = self._find(self.bi_keys, np.where(has_a, a, 0) * self.V + b)
        known = abfound & has_a
        if not len(self.bi_keys):
            return np.zeros(len(a)), known
        return np.where(known, self.bi_bo[abpos], 0.0), known & self.bi_extended[abpos]

    def trigram_scores(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        """log10 p(a b c) where the trigram is listed, else ``fallback`` (backoff(a b) + log10 p(c | b))."""
        has_a = a >= 0
        tpos, tfound = self._find(self.tri_keys, (np.where(has_a, a, 0) * self.V + b) * self.V + c)
        return np.where(tfound & has_a, self.tri_lp[tpos] if len(self.tri_lp) else 0.0, fallback)

    def save(self, path: str | os.PathLike[str]) -> None:
        from .store import save_npz

        save_npz(path, {"uni_lp": self.uni_lp, "uni_bo": self.uni_bo, "bi_keys": self.bi_keys, "bi_lp": self.bi_lp,
                        "bi_bo": self.bi_bo, "tri_keys": self.tri_keys, "tri_lp": self.tri_lp,
                        "order": np.array(self.order), "vocab": np.array("\n".join(self.vocab))})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ArrayLM:
        with np.load(path, allow_pickle=False) as z:
            return cls(vocab=str(z["vocab"]).split("\n"), uni_lp=z["uni_lp"], uni_bo=z["uni_bo"],
                       bi_keys=z["bi_keys"], bi_lp=z["bi_lp"], bi_bo=z["bi_bo"], tri_keys=z["tri_keys"],
                       tri_lp=z["tri_lp"], order=int(z["order"]))

    @classmethod
    def from_arpa(cls, path: str | os.PathLike[str]) -> ArrayLM:
        """Read an ARPA file's first three orders (errors name the file and line)."""
        reader = LineReader(path)
        order = 0
        rows: dict[int, list[tuple[float, list[str], float]]] = {1: [], 2: [], 3: []}
        max_order = 0
        for line in reader:
            if not line or line.startswith("ngram ") or line in ("\\data\\", "\\end\\"):
                continue
            m = _HEADER.fullmatch(line)
            if m:
                order = int(m.group(1))
                max_order = max(max_order, order)
                continue
            if order == 0 or order > 3:
                continue
            parts = line.split("\t")
            if len(parts) < 2:
                raise reader.error("not an ARPA n-gram line (expected log10-prob TAB words [TAB backoff])")
            try:
                lp = float(parts[0])
                bo = float(parts[2]) if len(parts) > 2 and parts[2] else 0.0
            except ValueError:
                raise reader.error("not an ARPA n-gram line: the probability or backoff is not a number") from None
            words = parts[1].split(" ")
            if len(words) != order:
                raise reader.error(f"a {len(words)}-gram in the {order}-gram section")
            rows[order].append((lp, words, bo))
        if not rows[1]:
            raise RecaserError("the ARPA file has no unigrams", str(path))
        vocab = [w[0] for _, w, _ in rows[1]]
        if "<unk>" not in vocab:
            vocab.append("<unk>")
            rows[1].append((-100.0, ["<unk>"], 0.0))
        if len(vocab) > MAX_VOCAB:
            raise RecaserError(f"vocabulary of {len(vocab)} words is too large for array queries", str(path))
        ids = {w: i for i, w in enumerate(vocab)}
        V = len(vocab)
        uni_lp = np.array([lp for lp, _, _ in rows[1]])
        uni_bo = np.array([bo for _, _, bo in rows[1]])

        def keyed(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            if not rows[n]:
                return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
            keys = np.zeros(len(rows[n]), dtype=np.int64)
            for k in range(n):
                keys = keys * V + np.fromiter((ids.get(w[k], -1) for _, w, _ in rows[n]), dtype=np.int64)
            order_ = np.argsort(keys)
            return (keys[order_], np.array([lp for lp, _, _ in rows[n]])[order_],
                    np.array([bo for _, _, bo in rows[n]])[order_])

        bi_keys, bi_lp, bi_bo = keyed(2)
        tri_keys, tri_lp, _ = keyed(3)
        return cls(vocab=vocab, uni_lp=uni_lp, uni_bo=uni_bo, bi_keys=bi_keys, bi_lp=bi_lp, bi_bo=bi_bo,
                   tri_keys=tri_keys, tri_lp=tri_lp, order=min(max_order, 3))


@dataclass
class LatticeQueries:
    """Every LM query of a batch of lattices (see features.Lattice): query ``q`` is position i of
    sentence s (sentence-major, n + 1 per sentence, the last one </s>); ``a``, ``b``, ``c`` are the
    candidate indices at positions i-2, i-1 and i (0 for <s> and </s>), and ``wa``, ``wb``, ``wc`` the
    flat candidate numbers of those words (BOS, EOS for <s>, </s>; ``wa`` is NONE at i = 0, whose
    only context is <s>)."""

    BOS, EOS, NONE = -1, -2, -3
    q: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    wa: np.ndarray
    wb: np.ndarray
    wc: np.ndarray
    n_queries: np.ndarray  # (S,) queries per sentence
    ab: np.ndarray  # the (position, a, b) cell of each query: backoff(a b) is looked up once per cell ...
    ab_rep: np.ndarray  # ... on this query of the cell
    bc: np.ndarray  # the (position, b, c) cell of each query: p(c | b) once per cell ...
    bc_rep: np.ndarray  # ... on this query of the cell

    @classmethod
    def of(cls, per_pos: np.ndarray, n_pos: np.ndarray) -> LatticeQueries:
        """The queries of sentences with ``n_pos`` positions of ``per_pos`` candidates each."""
        S = len(n_pos)
        # every sentence padded as <s> <s> w_1 .. w_n </s>
        sent_of_pos = np.repeat(np.arange(S), n_pos)
        pos_start = np.cumsum(n_pos) - n_pos
        n_pad = len(per_pos) + 3 * S
        real = np.arange(len(per_pos)) + 3 * sent_of_pos + 2  # padded index of each real position
        k = np.ones(n_pad, dtype=np.int64)
        k[real] = per_pos
        eos = pos_start + 3 * np.arange(S) + 2 + n_pos  # padded index of each </s>
        off = np.cumsum(k) - k
        word = np.full(int(k.sum()), cls.BOS, dtype=np.int64)  # flat candidate number per padded slot
        cand_start = np.cumsum(per_pos) - per_pos
        slot = np.repeat(off[real] - cand_start, per_pos) + np.arange(int(per_pos.sum()))
        word[slot] = np.arange(int(per_pos.sum()))
        word[off[eos]] = cls.EOS
        t = (np.repeat(pos_start + 3 * np.arange(S) + 2, n_pos + 1)
             + np.arange(int((n_pos + 1).sum())) - np.repeat(np.cumsum(n_pos + 1) - n_pos - 1, n_pos + 1))
        s2, s1, s0 = k[t - 2], k[t - 1], k[t]
        count = s2 * s1 * s0
        q = np.repeat(np.arange(len(t)), count)
        r = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        s1q, s0q = s1[q], s0[q]
        a, b, c = r // (s1q * s0q), (r // s0q) % s1q, r % s0q
        tq = t[q]
        first = np.zeros(len(t), dtype=bool)
        first[np.cumsum(n_pos + 1) - n_pos - 1] = True  # i = 0 of each sentence
        wa = np.where(first[q], cls.NONE, word[off[tq - 2] + a])
        per_sentence = np.add.reduceat(count, np.cumsum(n_pos + 1) - n_pos - 1) if S else np.zeros(0, dtype=np.int64)
        q_start = np.cumsum(count) - count
        n_ab, n_bc = s2 * s1, s1 * s0
        ab_start, bc_start = np.cumsum(n_ab) - n_ab, np.cumsum(n_bc) - n_bc
        # query r of position q is ((a * s1) + b) * s0 + c
        ab_cell = np.arange(int(n_ab.sum())) - np.repeat(ab_start, n_ab)
        bc_cell = np.arange(int(n_bc.sum())) - np.repeat(bc_start, n_bc)
        return cls(q=q, a=a, b=b, c=c, wa=wa, wb=word[off[tq - 1] + b], wc=word[off[tq] + c],
                   n_queries=per_sentence, ab=ab_start[q] + r // s0q, ab_rep=np.repeat(q_start, n_ab) + ab_cell * np.repeat(s0, n_ab),
                   bc=bc_start[q] + r % (s1q * s0q), bc_rep=np.repeat(q_start, n_bc) + bc_cell)

    def scores(self, lm: ArrayLM, word_ids: np.ndarray) -> np.ndarray:
        """log10 p(c | a b) of every query, ``word_ids`` giving the LM id of each flat candidate."""
        bos, eos = lm.ids.get("<s>", lm.unk), lm.ids.get("</s>", lm.unk)

        def ids(w: np.ndarray) -> np.ndarray:
            return np.where(w >= 0, word_ids[np.maximum(w, 0)] if len(word_ids) else 0,
                            np.where(w == self.BOS, bos, np.where(w == self.EOS, eos, -1)))

        # p(c | b) once per (b, c) cell, backoff(a b) once per (a, b) cell; the trigram lookup only
        # for queries whose context some trigram extends
        lp = lm.bigram_scores(ids(self.wb[self.bc_rep]), ids(self.wc[self.bc_rep]))[self.bc]
        if lm.order < 3:
            return lp
        bo, extended = lm.contexts(ids(self.wa[self.ab_rep]), ids(self.wb[self.ab_rep]))
        out = bo[self.ab] + lp
        sel = np.flatnonzero(extended[self.ab])
        out[sel] = lm.trigram_scores(ids(self.wa[sel]), ids(self.wb[sel]), ids(self.wc[sel]), out[sel])
        return out

    def dense(self, scores: np.ndarray, per_pos: np.ndarray, n_pos: np.ndarray) -> list[np.ndarray]:
        """Per sentence, lm[i, a, b, c] (features.Lattice.lm) from the flat scores."""
        out = []
        q0 = c0 = p0 = 0
        for n, nq in zip(n_pos.tolist(), self.n_queries.tolist()):
            K = int(per_pos[p0:p0 + n].max()) if n else 1
            arr = np.zeros((n + 1, K, K, K))
            sl = slice(c0, c0 + nq)
            arr[self.q[sl] - q0, self.a[sl], self.b[sl], self.c[sl]] = scores[sl]
            out.append(arr)
            q0, c0, p0 = q0 + n + 1, c0 + nq, p0 + n
        return out
