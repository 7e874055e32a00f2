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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from moses_recaser.core.keyset import KeySet, Packed, pack_blocks
from moses_recaser.core.memory import Memory
from moses_recaser.core.vocab import Vocab
from moses_recaser.io.diskarrays import Column, Scratch, Sink, Stored, read, whole
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import LineReader
from moses_recaser.io.modeldir import MappedArrays, save_npz

_HEADER = re.compile(r"\\([0-9]+)-grams:")
_COUNT = re.compile(r"ngram *([0-9]+) *= *([0-9]+)")
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

    def restricted(self, keep: Callable[[list[np.ndarray]], np.ndarray]) -> ArrayLM:
        """The same model for the queries whose n-grams ``keep`` keeps (given an n-gram's word ids, one array per
        position, it says which to keep): those bigrams and trigrams only, in memory (with the full model's
        numbers, and its flags of extended bigrams), the vocabulary and unigrams as they are. Every answer to such
        a query is the full model's, and a training run's dev lattices read a few megabytes instead of every page
        of a large model's key sets."""
        V = self.V

        def of_words(n: int) -> Callable[[np.ndarray], np.ndarray]:
            def kept(keys: np.ndarray) -> np.ndarray:
                words = []
                for _ in range(n):
                    words.append(keys % V)
                    keys = keys // V
                return keep(words[::-1])

            return kept

        bigrams, bi = self.bigrams.subset(of_words(2))
        trigrams, tri = self.trigrams.subset(of_words(3))
        return replace(
            self,
            bigrams=bigrams,
            bi_lp=np.asarray(self.bi_lp[bi]),
            bi_bo=np.asarray(self.bi_bo[bi]),
            bi_extended=np.asarray(self.bi_extended[bi]),
            trigrams=trigrams,
            tri_lp=np.asarray(self.tri_lp[tri]),
        )

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
        return cls.from_arrays(MappedArrays(path))

    @classmethod
    def from_arrays(cls, z: Mapping[str, np.ndarray]) -> ArrayLM:
        """The model of its stored arrays (``save``, ``ArrayLMWriter.arrays``)."""
        vocab, bigrams, trigrams = Vocab.load(z, "vocab"), KeySet.load(z, "bigrams"), KeySet.load(z, "trigrams")
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
    def from_arpa(cls, path: str | os.PathLike[str]) -> ArrayLM:
        """The model of an ARPA file, in memory."""
        writer = ArrayLMWriter(Scratch(None), Memory.unbounded())
        read_arpa(path, writer)
        return cls.from_arrays({k: whole(v) if isinstance(v, Stored) else v for k, v in writer.arrays().items()})


def write_arrays(arpa: str | os.PathLike[str], out: str | os.PathLike[str], scratch: Scratch, memory: Memory) -> None:
    """The query arrays of an ARPA file (an LM given or made by lmplz) as ``lm.npz``, in bounded memory."""
    writer = ArrayLMWriter(scratch, memory)
    read_arpa(arpa, writer)
    save_npz(out, writer.arrays())


def read_arpa(path: str | os.PathLike[str], writer: ArrayLMWriter, block: int = 200_000) -> None:
    """Feed an ARPA file's first three orders to ``writer``, ``block`` lines at a time (errors name the file
    and line); an ARPA file without <unk> gets one (log10 p -100), as kenlm reads it."""
    reader = LineReader(path)
    vocab: list[str] = []
    ids: dict[str, int] = {}
    order = max_order = 0
    pending: list[str] = []

    def flush() -> None:
        if pending and 1 <= order <= 3:
            lp, words, bo = _parse_block(pending, order, vocab, ids, reader)
            writer.add(order, words, lp, bo, None)
        pending.clear()

    for section, line in arpa_lines(reader):
        if line is None:
            flush()
            order = section
            max_order = max(max_order, order)
            if order == 2 and "<unk>" not in ids:  # lmplz writes <unk>; other tools may not
                _add_unk(vocab, ids, writer)
        elif 1 <= order <= 3:
            pending.append(line)
            if len(pending) >= block:
                flush()
    flush()
    if "<unk>" not in ids:
        _add_unk(vocab, ids, writer)
    if max_order > 3:
        warn_order(max_order, str(path))
    if len(vocab) > MAX_VOCAB:
        raise RecaserError(f"vocabulary of {len(vocab)} words is too large for array queries", str(path))
    writer.vocab = vocab


def arpa_lines(reader: LineReader) -> Iterator[tuple[int, str | None]]:
    """An ARPA file's sections: (N, None) at each \\N-grams: header, then (N, line) for each of its n-grams. At
    the end, the file is checked to hold the n-grams its \\data\\ header counts and to end with \\end\\, as
    KenLM requires: a file cut short (a full disk, a copy stopped midway) would otherwise give an LM with orders
    missing."""
    declared: dict[int, tuple[int, int]] = {}  # \data\'s "ngram N=count" lines: N -> (count, line number)
    found: dict[int, int] = {}
    order = 0
    for line in reader:
        bare = line.strip()  # (KenLM takes white space around the structure's lines)
        if bare == "\\end\\":
            break
        count = _COUNT.fullmatch(bare)
        if count and not order:
            declared[int(count.group(1))] = (int(count.group(2)), reader.lineno)
        elif (m := _HEADER.fullmatch(bare)) is not None:
            order = int(m.group(1))
            yield order, None
        elif bare and bare != "\\data\\":
            found[order] = found.get(order, 0) + 1
            yield order, line
    else:
        raise RecaserError(
            "the ARPA file ends before its \\end\\ line: it was cut short", reader.name, reader.lineno + 1
        )
    for k in sorted(set(declared) | set(found)):
        said, at = declared.get(k, (0, 0))
        if said != found.get(k, 0):
            raise RecaserError(
                f"the ARPA file's \\data\\ header counts {said} {k}-grams, but it holds {found.get(k, 0)}: it was "
                "cut short or edited",
                reader.name,
                at,
            )
    if not found.get(1):
        raise RecaserError("the ARPA file has no unigrams", reader.name)


def check_arpa(path: str) -> None:
    """An ARPA file whole, as ``arpa_lines`` checks it (a RecaserError naming the file if not)."""
    with LineReader(path) as reader:
        if next((bare for line in reader if (bare := line.strip())), None) != "\\data\\":
            raise RecaserError("not an ARPA file (its first line is not \\data\\)", reader.name, reader.lineno)
    with LineReader(path) as reader:
        for _ in arpa_lines(reader):
            pass


def _add_unk(vocab: list[str], ids: dict[str, int], writer: ArrayLMWriter) -> None:
    ids["<unk>"] = len(vocab)
    vocab.append("<unk>")
    writer.add(1, np.array([[ids["<unk>"]]]), np.array([-100.0]), np.zeros(1), None)


class ArrayLMWriter:
    """The query arrays of n-grams given a block at a time, orders 1-3, in any order within an order (the
    estimator's ``NGramSink``, or an ARPA file read by ``read_arpa``): log10 probabilities and backoffs as the
    ARPA file prints them, read back as kenlm reads them (single precision). Unigrams are held; bigrams and
    trigrams go to ``scratch`` files, and ``arrays`` packs their key sets in ``memory`` (``keyset.pack_blocks``).
    A bigram is extended when a trigram starts with it: given by the estimator, else found from the trigrams."""

    def __init__(self, scratch: Scratch, memory: Memory, vocab: Sequence[str] = ()) -> None:
        self.scratch, self.memory = scratch, memory
        self.vocab = list(vocab)
        self.order = 0
        self._uni: list[tuple[np.ndarray, np.ndarray]] = []
        self._bi = [Sink(scratch.stem(f"bigrams.{c}"), dt) for c, dt in _BIGRAM_COLUMNS]
        self._tri = [Sink(scratch.stem(f"trigrams.{c}"), dt) for c, dt in _TRIGRAM_COLUMNS]
        self._extended_given = False

    def add(
        self,
        order: int,
        rows: np.ndarray,
        lp: Sequence[str] | np.ndarray,
        bo: Sequence[str] | np.ndarray | None,
        extended: np.ndarray | None,
    ) -> None:
        """A block of n-grams of ``order``: their words' ids, log10 probabilities and backoffs as printed or as
        read (None: no backoffs), and for bigrams, whether a trigram extends each (None: found later)."""
        self.order = max(self.order, order)
        if order > 3:
            return
        lp32 = _single(lp)
        bo32 = _single(bo) if bo is not None else np.zeros(len(lp32), np.float32)
        if order == 1:
            self._uni.append((lp32, bo32))
        elif order == 2:
            self._extended_given = extended is not None
            ext = extended if extended is not None else np.zeros(len(lp), dtype=bool)
            for sink, col in zip(self._bi, (rows[:, 0], rows[:, 1], lp32, bo32, ext)):
                sink.add(col)
        else:
            for sink, col in zip(self._tri, (rows[:, 0], rows[:, 1], rows[:, 2], lp32)):
                sink.add(col)

    def arrays(self) -> dict[str, np.ndarray | Stored]:
        """Everything ``ArrayLM.save`` stores, the key sets packed (large columns as files of ``scratch``)."""
        V = len(self.vocab)
        if self.order > 3:
            warn_order(self.order, "the LM")
        bi = [c.done() for c in self._bi]
        tri = [c.done() for c in self._tri]
        rows = self.memory.rows(256)
        bi_keys = _keyed(bi[:2], V, rows)
        bigrams = pack_blocks(
            lambda: ((k, [read(c, s, s + len(k)) for c in bi[2:]]) for s, k in bi_keys()),
            len(bi[0]),
            _max_key(bi_keys()),
            [Sink(self.scratch.stem(f"bigrams.{c}.packed"), dt) for c, dt in _BIGRAM_COLUMNS[2:]],
            self.memory,
            self.scratch,
        )
        tri_keys = _keyed(tri[:3], V, rows)
        trigrams = pack_blocks(
            lambda: ((k, [read(tri[3], s, s + len(k))]) for s, k in tri_keys()),
            len(tri[0]),
            _max_key(tri_keys()),
            [Sink(self.scratch.stem("trigrams.lp.packed"), np.float32)],
            self.memory,
            self.scratch,
        )
        extended = bigrams.payloads[2]
        if not self._extended_given:
            extended = _extended(bigrams, tri_keys(), V)
        uni_lp = np.concatenate([u[0] for u in self._uni]) if self._uni else np.zeros(0, np.float32)
        uni_bo = np.concatenate([u[1] for u in self._uni]) if self._uni else np.zeros(0, np.float32)
        return {
            "uni_lp": uni_lp,
            "uni_bo": uni_bo,
            "bi_lp": bigrams.payloads[0],
            "bi_bo": bigrams.payloads[1],
            "bi_extended": extended,
            "tri_lp": trigrams.payloads[0],
            "order": np.array(min(self.order, 3)),
            **Vocab.from_words(self.vocab).arrays("vocab"),
            **bigrams.arrays("bigrams"),
            **trigrams.arrays("trigrams"),
        }


def _single(values: Sequence[str] | np.ndarray) -> np.ndarray:
    """Numbers as kenlm keeps them (single precision): printed ones read back as the ARPA reader reads them."""
    if isinstance(values, np.ndarray):
        return values.astype(np.float32)
    return np.array(list(map(float, values)), dtype=np.float64).astype(np.float32)


_BIGRAM_COLUMNS = [("a", np.int32), ("b", np.int32), ("lp", np.float32), ("bo", np.float32), ("extended", np.bool_)]
_TRIGRAM_COLUMNS = [("a", np.int32), ("b", np.int32), ("c", np.int32), ("lp", np.float32)]


def _keyed(cols: Sequence[Column], V: int, rows: int) -> Callable[[], Iterator[tuple[int, np.ndarray]]]:
    """A reader of the keys (a * V + b, or (a * V + b) * V + c) of word-id columns, ``rows`` at a time, with the
    position of each block's first."""

    def blocks() -> Iterator[tuple[int, np.ndarray]]:
        for start in range(0, len(cols[0]), rows):
            key = np.zeros(len(read(cols[0], start, start + rows)), dtype=np.int64)
            for c in cols:
                key = key * V + read(c, start, start + rows).astype(np.int64)
            yield start, key

    return blocks


def _max_key(blocks: Iterator[tuple[int, np.ndarray]]) -> int:
    return max((int(k.max()) for _, k in blocks if len(k)), default=0)


def _extended(bigrams: Packed, trigram_keys: Iterator[tuple[int, np.ndarray]], V: int) -> np.ndarray:
    """For each bigram (in its key set's order), whether a trigram starts with it."""
    index = KeySet(bigrams.starts, whole(bigrams.low), bigrams.key_bits)
    out = np.zeros(len(index), dtype=bool)
    for _, keys in trigram_keys:
        pos, found = index.find(np.unique(keys // V))
        out[pos[found]] = True
    return out


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
