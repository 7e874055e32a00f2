"""Batched trigram-context LM queries over numpy arrays, the same numbers kenlm gives.

The CRF's LM feature needs log10 p(c | a, b) for every candidate triple of a lattice: hundreds of
queries per sentence. Through kenlm's Python module each is a call; here all of a sentence's
queries are a few lookups in the packed keys (``keyset.KeySet``) of the ARPA's bigrams and trigrams, and
unigrams by word id, with ARPA backoff:

    p(c | a b) = p(a b c)                         if "a b c" is listed
               = bo(a b) + p(b c)                 elif "b c" is listed
               = bo(a b) + bo(b) + p(c)           otherwise (p(<unk>) for unknown words)

with absent backoffs 0, as in kenlm, and in single precision, as kenlm keeps them. ``<s>`` is a context
word like any other. Models with more than three orders give the same result for a two-word context (their
trigram rows). The arrays are built from the ARPA once, at training time, and stored in the model
(``lm.npz``), so recasing neither parses the ARPA nor calls kenlm per query; tests check agreement with kenlm.

``ArrayLM.pairs`` also tells, for a context "b c", whether any trigram extends it: Viterbi
(``decode``) needs trigram lookups only for those. ``KenlmContexts`` puts a kenlm model (a binary LM
given with ``--lm``) behind the same interface.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from moses_recaser.errors import RecaserError
from moses_recaser.keyset import KeySet
from moses_recaser.modeldir import MappedArrays, check_shapes, save_npz
from moses_recaser.textio import LineReader
from moses_recaser.vocab import Vocab

_HEADER = re.compile(r"\\([0-9]+)-grams:")
log = logging.getLogger(__name__)
MAX_VOCAB = 2_000_000  # keys are a * V^2 + b * V + c in int64


@dataclass
class ArrayLM:
    vocab: Vocab
    uni_lp: np.ndarray  # (V,) log10 p(w); <unk> included
    uni_bo: np.ndarray  # (V,)
    bigrams: KeySet  # keys a * V + b; the bi_* arrays are in its order
    bi_lp: np.ndarray
    bi_bo: np.ndarray
    bi_extended: np.ndarray  # some trigram extends the bigram: only these contexts need a trigram lookup
    trigrams: KeySet  # keys (a * V + b) * V + c; tri_lp is in its order
    tri_lp: np.ndarray
    order: int

    def __post_init__(self) -> None:
        self.unk = max(self.vocab.get("<unk>"), 0)

    @classmethod
    def of_ngrams(
        cls,
        vocab: Vocab,
        *,
        uni_lp: np.ndarray,
        uni_bo: np.ndarray,
        bi_keys: np.ndarray,
        bi_lp: np.ndarray,
        bi_bo: np.ndarray,
        tri_keys: np.ndarray,
        tri_lp: np.ndarray,
        order: int,
    ) -> ArrayLM:
        """The model of its n-grams' arrays, keys in any order: packs the keys and puts each array in their
        order."""
        bigrams, bi_order = KeySet.pack(bi_keys)
        trigrams, tri_order = KeySet.pack(tri_keys)
        extended = np.zeros(len(bigrams), dtype=bool)  # about one bigram context in nine on a recasing lattice
        if len(trigrams) and len(bigrams):
            pos, found = bigrams.find(np.unique(tri_keys // len(vocab)))
            extended[pos[found]] = True
        return cls(
            vocab=vocab,
            uni_lp=uni_lp,
            uni_bo=uni_bo,
            bigrams=bigrams,
            bi_lp=bi_lp[bi_order],
            bi_bo=bi_bo[bi_order],
            bi_extended=extended,
            trigrams=trigrams,
            tri_lp=tri_lp[tri_order],
            order=order,
        )

    @property
    def V(self) -> int:
        return len(self.vocab)

    def word_ids(self, words: Iterable[str]) -> np.ndarray:
        ids = self.vocab.numbers(list(words))
        return np.where(ids >= 0, ids, self.unk)

    def score(self, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        """log10 p(c | a b) for arrays of word ids (a may be -1: no second context word)."""
        lp = self.pairs(b, c, np.zeros(len(b), dtype=bool))[0]
        has_a = a >= 0
        bo = self.pairs(np.where(has_a, a, 0), b, has_a)[1]
        return self.trigram_scores(a, b, c, bo + lp)

    def pairs(self, b: np.ndarray, c: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For word pairs (b, c): log10 p(c | b), and as a context "b c" where ``context`` (else 0 and
        False) its backoff and whether a trigram extends it; one lookup for the three."""
        pos, found = self.bigrams.find(b * self.V + c)
        if not len(self.bigrams):
            return self.uni_bo[b] + self.uni_lp[c], np.zeros(len(b)), found
        known = found & context
        return (
            np.where(found, self.bi_lp[pos], self.uni_bo[b] + self.uni_lp[c]),
            np.where(known, self.bi_bo[pos], 0.0),
            known & self.bi_extended[pos],
        )

    def trigram_scores(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        """log10 p(a b c) where the trigram is listed, else ``fallback`` (backoff(a b) + log10 p(c | b))."""
        has_a = a >= 0
        tpos, tfound = self.trigrams.find((np.where(has_a, a, 0) * self.V + b) * self.V + c)
        return np.where(tfound & has_a, self.tri_lp[tpos] if len(self.tri_lp) else 0.0, fallback)

    def save(self, path: str | os.PathLike[str]) -> None:
        save_npz(
            path,
            {
                "uni_lp": self.uni_lp,
                "uni_bo": self.uni_bo,
                "bi_lp": self.bi_lp,
                "bi_bo": self.bi_bo,
                "bi_extended": self.bi_extended,
                "tri_lp": self.tri_lp,
                "order": np.array(self.order),
                **self.vocab.arrays("vocab"),
                **self.bigrams.arrays("bigrams"),
                **self.trigrams.arrays("trigrams"),
            },
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ArrayLM:
        z = MappedArrays(path)
        vocab, bigrams, trigrams = Vocab.load(z, "vocab"), KeySet.load(z, "bigrams"), KeySet.load(z, "trigrams")
        check_shapes("unigrams", {"uni_lp": z["uni_lp"], "uni_bo": z["uni_bo"]}, "f", len(vocab))
        check_shapes("bigrams", {"bi_lp": z["bi_lp"], "bi_bo": z["bi_bo"]}, "f", len(bigrams))
        check_shapes("bigrams", {"bi_extended": z["bi_extended"]}, "b", len(bigrams))
        check_shapes("trigrams", {"tri_lp": z["tri_lp"]}, "f", len(trigrams))
        return cls(
            vocab=vocab,
            uni_lp=z["uni_lp"],
            uni_bo=z["uni_bo"],
            bigrams=bigrams,
            bi_lp=z["bi_lp"],
            bi_bo=z["bi_bo"],
            bi_extended=z["bi_extended"],
            trigrams=trigrams,
            tri_lp=z["tri_lp"],
            order=int(z["order"]),
        )

    @classmethod
    def from_arpa(cls, path: str | os.PathLike[str], block: int = 200_000) -> ArrayLM:
        """Read an ARPA file's first three orders, ``block`` lines at a time into arrays (errors name the file
        and line)."""
        reader = LineReader(path)
        sections: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {1: [], 2: [], 3: []}
        vocab: list[str] = []
        ids: dict[str, int] = {}
        order = max_order = 0
        pending: list[str] = []

        def flush() -> None:
            if pending and 1 <= order <= 3:
                sections[order].append(_parse_block(pending, order, vocab, ids, reader))
            pending.clear()

        for line in reader:
            if not line or line.startswith("ngram ") or line in ("\\data\\", "\\end\\"):
                continue
            m = _HEADER.fullmatch(line)
            if m:
                flush()
                order = int(m.group(1))
                max_order = max(max_order, order)
                if order == 2 and "<unk>" not in ids:  # lmplz writes <unk>; other tools may not
                    ids["<unk>"] = len(vocab)
                    vocab.append("<unk>")
                    sections[1].append(
                        (
                            np.array([-100.0], dtype=np.float32),
                            np.zeros(1, dtype=np.int64),
                            np.zeros(1, dtype=np.float32),
                        )
                    )
                continue
            if 1 <= order <= 3:
                pending.append(line)
                if len(pending) >= block:
                    flush()
        flush()
        if not vocab:
            raise RecaserError("the ARPA file has no unigrams", str(path))
        if "<unk>" not in ids:
            ids["<unk>"] = len(vocab)
            vocab.append("<unk>")
            sections[1].append(
                (np.array([-100.0], dtype=np.float32), np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.float32))
            )
        if max_order > 3:
            warn_order(max_order, str(path))
        if len(vocab) > MAX_VOCAB:
            raise RecaserError(f"vocabulary of {len(vocab)} words is too large for array queries", str(path))
        V = len(vocab)

        def keyed(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            if not sections[n]:
                return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), np.zeros(0, dtype=np.float32)
            lp, words, bo = (np.concatenate([s[k] for s in sections[n]]) for k in range(3))
            keys = np.zeros(len(lp), dtype=np.int64)
            for k in range(n):
                keys = keys * V + words[:, k]
            return keys, lp, bo

        bi_keys, bi_lp, bi_bo = keyed(2)
        tri_keys, tri_lp, _ = keyed(3)
        return cls.of_ngrams(
            Vocab.of(vocab),
            uni_lp=np.concatenate([s[0] for s in sections[1]]),
            uni_bo=np.concatenate([s[2] for s in sections[1]]),
            bi_keys=bi_keys,
            bi_lp=bi_lp,
            bi_bo=bi_bo,
            tri_keys=tri_keys,
            tri_lp=tri_lp,
            order=min(max_order, 3),
        )


def _parse_block(
    lines: list[str], order: int, vocab: list[str], ids: dict[str, int], reader: LineReader
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Log10 probabilities, word ids (N, order) and backoffs of a block of n-gram lines; unigrams add their
    words to the vocabulary."""
    lp, bo, words = [], [], []
    first = reader.lineno - len(lines) + 1
    for k, line in enumerate(lines):
        parts = line.split("\t")
        try:
            if len(parts) < 2:
                raise ValueError
            lp.append(float(parts[0]))
            bo.append(float(parts[2]) if len(parts) > 2 and parts[2] else 0.0)
        except ValueError:
            raise RecaserError(
                "not an ARPA n-gram line (expected log10-prob TAB words [TAB backoff])", reader.name, first + k
            ) from None
        gram = parts[1].split(" ")
        if len(gram) != order:
            raise RecaserError(f"a {len(gram)}-gram in the {order}-gram section", reader.name, first + k)
        if order == 1:
            ids[gram[0]] = len(vocab)
            vocab.append(gram[0])
        words.append(gram)
    if order == 1:
        ids_arr = np.arange(len(vocab) - len(lines), len(vocab), dtype=np.int64).reshape(-1, 1)
    else:
        get = ids.get
        ids_arr = np.array([[get(w, -1) for w in g] for g in words], dtype=np.int64).reshape(-1, order)
    return np.array(lp, dtype=np.float32), ids_arr, np.array(bo, dtype=np.float32)


def warn_order(order: int, where: str) -> None:
    """Say plainly what is used of an LM of more than three orders."""
    log.warning(
        "%s: a %d-gram LM; the CRF's LM feature conditions on the two previous words (its lattice is "
        "second order, as the paper's), so recasing uses the LM's orders 1-3 (its trigram probabilities "
        "and backoffs); higher orders change nothing",
        where,
        order,
    )


class KenlmContexts:
    """A kenlm model (a binary LM given with ``--lm``; kenlm's Python module gives no backoffs) for
    ``decode``: every context counts as extended, so every (a, b, c) is scored through kenlm states,
    once per distinct triple. Word ids index ``strings`` (-1: <s>, -2: </s>)."""

    SPECIALS = (-1, -2)

    def __init__(self, model: object, strings: Vocab) -> None:
        if getattr(model, "order", 3) > 3:
            warn_order(model.order, getattr(model, "path", "the LM"))  # type: ignore[attr-defined]
        self.model = model
        self.strings = strings  # grows with the candidate registry; ids stay valid
        self._cache: dict[tuple[int, int, int], float] = {}
        self._states: dict[tuple[int, int], object] = {}

    def _word(self, i: int) -> str:
        return "<s>" if i == -1 else "</s>" if i == -2 else self.strings[i]

    def _state(self, a: int, b: int) -> object:
        """The kenlm state after "a b" (after "<s> b" when a is <s>; the sentence start when b is <s>)."""
        import kenlm

        st = self._states.get((a, b))
        if st is None:
            model = self.model
            st = kenlm.State()
            if b == -1:
                model.BeginSentenceWrite(st)  # type: ignore[attr-defined]
            elif a == -1:
                bos = kenlm.State()
                model.BeginSentenceWrite(bos)  # type: ignore[attr-defined]
                model.BaseScore(bos, self._word(b), st)  # type: ignore[attr-defined]
            else:
                null, mid = kenlm.State(), kenlm.State()
                model.NullContextWrite(null)  # type: ignore[attr-defined]
                model.BaseScore(null, self._word(a), mid)  # type: ignore[attr-defined]
                model.BaseScore(mid, self._word(b), st)  # type: ignore[attr-defined]
            self._states[(a, b)] = st
        return st

    def _score(self, a: int, b: int, c: int) -> float:
        import kenlm

        v = self._cache.get((a, b, c))
        if v is None:
            if len(self._cache) > 2_000_000:
                self._cache.clear()
                self._states.clear()
            v = self._cache[(a, b, c)] = self.model.BaseScore(  # type: ignore[attr-defined]
                self._state(a, b), self._word(c), kenlm.State()
            )
        return v

    def pairs(self, b: np.ndarray, c: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """log10 p(c | b) where b is <s> (the first word's score), else unused (0): every context is extended."""
        lp = np.zeros(len(b))
        for k in np.flatnonzero(b == -1).tolist():
            lp[k] = self._score(-1, int(b[k]), int(c[k]))
        return lp, np.zeros(len(b)), context.copy()

    def trigram_scores(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, fallback: np.ndarray) -> np.ndarray:
        score = self._score
        return np.fromiter(
            (score(x, y, z) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist())), dtype=np.float64, count=len(a)
        )
