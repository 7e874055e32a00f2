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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
        V = self.V
        has_a = a >= 0
        lp = self.uni_lp[c].copy()
        # bigram (b, c), else backoff(b) + unigram
        bpos, bfound = self._find(self.bi_keys, b * V + c)
        lp = np.where(bfound, self.bi_lp[bpos] if len(self.bi_lp) else 0.0, self.uni_bo[b] + lp)
        if self.order >= 3:
            tpos, tfound = self._find(self.tri_keys, (np.where(has_a, a, 0) * V + b) * V + c)
            tfound &= has_a
            abpos, abfound = self._find(self.bi_keys, np.where(has_a, a, 0) * V + b)
            ab_bo = np.where(abfound & has_a, self.bi_bo[abpos] if len(self.bi_bo) else 0.0, 0.0)
            lp = np.where(tfound, self.tri_lp[tpos] if len(self.tri_lp) else 0.0, ab_bo + lp)
        return lp

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


def batch_lattice_scores(lm: ArrayLM, sentences: Sequence[Sequence[Sequence[str]]]) -> list[np.ndarray]:
    """lm[i, a, b, c] = log10 p(c_i | c_{i-2}=a, c_{i-1}=b) of each sentence's lattice (see
    features.Lattice; i = n is </s>, K per sentence is its widest position), for many sentences with
    one vectorized query."""
    out: list[np.ndarray] = []
    if not sentences:
        return out
    # every sentence padded as <s> <s> w_1 .. w_n </s>, all positions of all sentences in one row
    sizes: list[int] = []
    words: list[str] = []
    targets: list[int] = []  # padded index of each query position (i + 2 for i = 0..n)
    start = 0
    for cands in sentences:
        sizes += [1, 1] + [len(c) for c in cands] + [1]
        words += ["<s>", "<s>"] + [w for c in cands for w in c] + ["</s>"]
        targets += range(start + 2, start + len(cands) + 3)
        start += len(cands) + 3
    k = np.array(sizes, dtype=np.int64)
    off = np.cumsum(k) - k
    wid = lm.word_ids(words)
    t = np.array(targets, dtype=np.int64)
    s2, s1, s0 = k[t - 2], k[t - 1], k[t]
    count = s2 * s1 * s0
    q = np.repeat(np.arange(len(t)), count)
    r = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    s1q, s0q = s1[q], s0[q]
    a_l, b_l, c_l = r // (s1q * s0q), (r // s0q) % s1q, r % s0q
    tq = t[q]
    first = np.zeros(len(t), dtype=bool)
    qi = 0
    for cands in sentences:
        first[qi] = True  # i = 0: the only context is <s>
        qi += len(cands) + 1
    a = np.where(first[q], -1, wid[off[tq - 2] + a_l])
    scores = lm.score(a, wid[off[tq - 1] + b_l], wid[off[tq] + c_l])
    # split back into sentences
    q_start = 0
    c_start = 0
    for cands in sentences:
        n = len(cands)
        K = max((len(c) for c in cands), default=1)
        nq = int(count[q_start:q_start + n + 1].sum())
        sl = slice(c_start, c_start + nq)
        arr = np.zeros((n + 1, K, K, K))
        arr[q[sl] - q_start, a_l[sl], b_l[sl], c_l[sl]] = scores[sl]
        out.append(arr)
        q_start += n + 1
        c_start += nq
    return out
