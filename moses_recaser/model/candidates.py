"""Candidates as integer ids: GEN's result per token and each candidate's facts, computed once per type.

Recasing a test set meets each word type many times; the Python work on strings (GEN, tags, the case
prior, table ids) is done the first time a type is met and kept as numpy columns, so that a batch's
features are gathers over candidate ids (see ``features.FeatureExtractor.flat``).

GEN results are segments of one pool of candidate ids, so that a batch's candidates are one gather.
Training stores the registry for every lowercase type of the training target in the model
(``candidates.npz``, with the training forms by lowercase and the case prior's tables), so recasing
starts warm: only types unseen in training, and tokens whose
aligned source words join GEN, are worked out at recasing time. The stored registry is used only
by an extractor with the same settings (case prior on or off, GEN size, LM vocabulary).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain

import numpy as np

from moses_recaser import casing
from moses_recaser.casing import Tag
from moses_recaser.model.gen import gen
from moses_recaser.modeldir import save_npz, text_array, words_of
from moses_recaser.stats.tables import Tables


def is_upper_word(token: str) -> bool:
    """Every cased character upper, and at least one."""
    if token.isascii():
        return token.isupper()  # the same test for ASCII
    cased = [c for c in token if c.isupper() or c.islower()]
    return bool(cased) and all(c.isupper() for c in cased)


class CasePrior:
    """log p(E | lower(E)) from non-initial training counts, smoothed with p(tag | shape) of rare words
    (``shape_probs``), which is all that an unseen word gets.
    Built on first use: with a stored registry, recasing needs it only for unseen types, and the
    registry stores its lowercase counts and shape counts (``arrays``, ``use``)."""

    BETA = 1.0
    RARE = 3  # words whose lowercase occurs at most this often stand for the unseen ones
    SHAPE_BETA = 4.0
    MAX_SUFFIX = 4
    # of the definition, kept with a stored registry (1: every token's 3-letter suffix; 2: rare words' shape;
    # 3: unseen hyphenated words by their parts)
    REVISION = 3

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    @cached_property
    def _forms(self) -> dict[str, int]:
        f = self.tables.forms
        return dict(zip(f.vocab, (f.count - f.initial).tolist()))

    @cached_property
    def _lower(self) -> dict[str, int]:
        lower: dict[str, int] = {}
        for w, c in self._forms.items():
            low = casing.lower(w)
            lower[low] = lower.get(low, 0) + c
        return lower

    @staticmethod
    def shape_keys(low: str) -> list[str]:
        """A lowercase word's shape, least specific first: its length (8 or more: 8), then its last 1 to
        MAX_SUFFIX letters, apart for words shorter than 5 (acronyms are short) and the rest."""
        n = len(low)
        band = "s" if n < 5 else "l"
        return [f"#{min(n, 8)}"] + [f"{band}{k}:{low[-k:]}" for k in range(1, min(n, CasePrior.MAX_SUFFIX) + 1)]

    @cached_property
    def _shape(self) -> dict[str, np.ndarray]:
        """Tag counts per shape key over the types of rare words, not over tokens: unseen words are like
        rare ones, and a suffix's frequent words (``long``, ``strong``) tell little of its unseen ones
        (``yunlong``)."""
        lower = self._lower
        counts: dict[str, np.ndarray] = {}
        for w, c in self._forms.items():
            low = casing.lower(w)
            if c and lower[low] <= self.RARE and casing.has_letter(w):
                t = int(casing.tag(w))
                for key in self.shape_keys(low):
                    counts.setdefault(key, np.zeros(len(Tag)))[t] += 1.0
        return counts

    @cached_property
    def _base(self) -> np.ndarray:
        total = sum((v for k, v in self._shape.items() if k.startswith("#")), np.zeros(len(Tag)))
        return (total + 1.0) / (total.sum() + len(Tag))

    @cached_property
    def _shape_rows(self) -> dict[str, list[float]]:
        return {k: v.tolist() for k, v in self._shape.items()}

    @cached_property
    def _shape_memo(self) -> dict[str, np.ndarray]:
        return {}

    def shape_probs(self, low: str) -> np.ndarray:
        """p(tag | shape of ``low``): each shape key's counts smoothed towards the estimate of the key
        before it, down to the longest suffix that rare training words have (kept per word: the case
        prior and ``looks_like_a_name`` ask for the same unseen words; five floats are cheaper in Python)."""
        p = self._shape_memo.get(low)
        if p is not None:
            return p
        shape, beta = self._shape_rows, self.SHAPE_BETA
        q = self._base.tolist()
        for k, key in enumerate(self.shape_keys(low)):
            v = shape.get(key)
            if v is None:
                if k:
                    break
                continue  # a length no rare word has: its suffixes still count
            total = sum(v) + beta
            q = [(c + beta * b) / total for c, b in zip(v, q)]
        p = self._shape_memo[low] = np.array(q)
        return p

    def looks_like_a_name(self, low: str) -> bool:
        """The shape of ``low`` is more often capitalized than not among rare training words."""
        p = self.shape_probs(low)
        return bool(p[Tag.IU] + p[Tag.AU] > p[Tag.AL])

    def arrays(self) -> dict[str, np.ndarray]:
        """The lowercase counts and the shape counts, for ``use``."""
        lower, shape = self._lower, self._shape
        return {"prior.lower": text_array(lower), "prior.lower_counts": np.array(list(lower.values()), dtype=np.int64),
                "prior.shapes": text_array(shape),
                "prior.shape_counts": np.array(list(shape.values())).reshape(-1, len(Tag))}

    def use(self, z: Mapping[str, np.ndarray]) -> None:
        """Take ``arrays``' tables instead of working them out."""
        lower, shapes = words_of(z["prior.lower"]), words_of(z["prior.shapes"])
        self.__dict__["_lower"] = dict(zip(lower, z["prior.lower_counts"].tolist()))
        self.__dict__["_shape"] = dict(zip(shapes, z["prior.shape_counts"]))

    def log_probs(self, forms: Sequence[str]) -> list[float]:  # once per candidate type: Candidates keeps them
        """log p(form | lowercase); an unseen hyphenated word's is the sum of its parts' (``Coronavirus-Krise``
        takes the case of ``Krise``; its own shape would read the mixed case as unlikely)."""
        forms_n, lower_n, beta, shape_probs = self._forms, self._lower, self.BETA, self.shape_probs
        lower, tag, log, has_letter = casing.lower, casing.tag, math.log, casing.has_letter

        def one(form: str, low: str, q: np.ndarray) -> float:
            return log((forms_n.get(form, 0) + beta * float(q[int(tag(form))])) / (lower_n.get(low, 0) + beta))

        out = []
        low_q, q_low = "", self._base
        for form in forms:
            low = lower(form)
            if "-" in form and low not in lower_n:
                parts = [p for p in form.split("-") if has_letter(p)]
                if len(parts) > 1:
                    out.append(sum(one(p, lower(p), shape_probs(lower(p))) for p in parts))
                    continue
            if low != low_q:  # a type's forms come together
                low_q, q_low = low, shape_probs(low)
            out.append(one(form, low, q_low))
        return out


@dataclass
class Facts:
    """Per-candidate columns, indexed by candidate id."""

    cap: np.ndarray  # bool: capitalized
    tag: np.ndarray  # int64: casing.Tag
    prior: np.ndarray  # float64: log case prior (0 without a prior)
    unseen: np.ndarray  # bool: never in the training target
    short: np.ndarray  # bool: <= 3 characters or <= 3 letters
    strip: np.ndarray  # int64: id of the form without diacritics (``Candidates.strip_id``)
    cased: np.ndarray  # int64: id among the cased table's targets (-1: none)
    upper: np.ndarray  # bool: all upper
    lm: np.ndarray  # int64: LM word id (-1 without array LM)
    oov: np.ndarray  # bool: its lowercase never in the training target (the case prior is the shape's)
    head: np.ndarray  # int64: strip id of its first hyphen part when that is capitalized (-1: not)


_COLUMNS = [(name, dtype) for name, dtype in
            (("cap", bool), ("tag", np.int64), ("prior", np.float64), ("unseen", bool), ("short", bool),
             ("strip", np.int64), ("cased", np.int64), ("upper", bool), ("lm", np.int64), ("oov", bool),
             ("head", np.int64))]


@dataclass
class SourceFacts:
    """Per-source-key columns: cased-table id, lowercase-table id (-1: none), tag, has case, all upper."""

    cased: np.ndarray
    lower: np.ndarray
    tag: np.ndarray
    has_case: np.ndarray
    upper: np.ndarray


_SOURCE_COLUMNS = [("cased", np.int64), ("lower", np.int64), ("tag", np.int64), ("has_case", bool), ("upper", bool)]


class Candidates:
    """Registry of candidate strings and of GEN's result per token (both grow as types are met)."""

    def __init__(self, tables: Tables, prior: CasePrior | None, lm_id: Callable[[str], int] | None,
                 max_candidates: int, lm_vocab: int = -1) -> None:
        self.tables = tables
        self.prior = prior
        self.lm_id = lm_id
        self.lm_vocab = lm_vocab  # the LM's vocabulary size (-1: no LM ids), to tell stored registries apart
        self.max_candidates = max_candidates
        self.strings: list[str] = []
        self.ids: dict[str, int] = {}
        self._strip: dict[str, int] = {}  # form without diacritics -> id
        self._strip_of: dict[str, int] = {}  # word -> id of its form without diacritics
        self._facts = Columns(_COLUMNS)
        # GEN results are segments (start, count) of one pool of candidate ids; a stored registry's
        # results (load) are the pool's first part
        self._pool = np.zeros(0, dtype=np.int64)
        self._pending: list[int] = []
        self._size = 0
        self._plain: dict[str, tuple[int, int]] = {}
        self._sourced: dict[tuple[str, tuple[str, ...]], tuple[int, int]] = {}
        # stored training forms by lowercase (load): lowercase -> row, offsets, form ids
        self._seen: tuple[dict[str, int], list[int], np.ndarray] | None = None
        self.src_ids: dict[str, int] = {}
        self._src_facts = Columns(_SOURCE_COLUMNS)

    @cached_property
    def _by_lower(self) -> dict[str, list[int]]:
        return self.tables.forms.by_lower()

    @cached_property
    def forms(self) -> dict[str, list[str]]:
        """Training forms by lowercase, most frequent first (built on first use, as for CasePrior)."""
        vocab = self.tables.forms.vocab
        return {k: [vocab[i] for i in ids] for k, ids in self._by_lower.items()}

    def seen(self, tok: str) -> Sequence[str]:
        """The training forms of lower(tok), most frequent first: from the stored registry when loaded
        (``forms`` is then never built)."""
        low = casing.lower(tok)
        if self._seen is None:
            return self.forms.get(low, ())
        row = self._seen[0].get(low)
        if row is None:
            return ()
        vocab, offsets = self.tables.forms.vocab, self._seen[1]
        return [vocab[i] for i in self._seen[2][offsets[row]:offsets[row + 1]].tolist()]

    def gen_forms(self, tok: str) -> Sequence[str]:
        """The training forms GEN takes: ``seen``, or for an unseen hyphenated word its parts' most frequent
        forms joined (``YouTube-Plattform``, ``SPD-Bundestagsfraktion``); an unseen part takes the case its
        shape makes likelier (``CasePrior.shape_probs``), lowercase or capitalized."""
        forms = self.seen(tok)
        if forms or "-" not in tok.strip("-"):
            return forms
        return ["-".join(self._likeliest(p) for p in tok.split("-"))]

    def _likeliest(self, part: str) -> str:
        seen = self.seen(part)
        if seen:
            return seen[0]
        low = casing.lower(part)
        if self.prior is None or not casing.has_letter(low):
            return low
        p = self.prior.shape_probs(low)
        return casing.upper_first(low) if p[Tag.IU] > p[Tag.AL] else low

    @cached_property
    def form_set(self) -> set[str]:
        return set(self.tables.forms.vocab)

    def is_training_type(self, low: str) -> bool:
        """Whether the training target has forms of this lowercase word."""
        return low in self._seen[0] if self._seen is not None else low in self.forms

    def id(self, form: str) -> int:
        i = self.ids.get(form)
        if i is None:
            self.add([form])
            i = self.ids[form]
        return i

    def add(self, forms: Iterable[str]) -> None:
        """Register the forms not registered yet (described together: recasing meets a test set's
        unseen types in a few batches)."""
        ids = self.ids
        new = [f for f in dict.fromkeys(forms) if f not in ids]
        if new:
            ids.update(zip(new, range(len(self.strings), len(self.strings) + len(new))))
            self.strings.extend(new)
            self._facts.rows.extend(self._describe(new))

    def strip_id(self, word: str) -> int:
        """An id for ``word`` without diacritics (equal ids: equal up to diacritics)."""
        i = self._strip_of.get(word)
        if i is None:
            s = casing.strip_diacritics(word)
            i = self._strip_of[word] = self._strip.setdefault(s, len(self._strip))
        return i

    def _describe(self, forms: list[str]) -> Iterable[tuple]:
        """The facts of each form (``Facts``' columns), a column at a time."""
        is_cap, strip_id, training = casing.is_capitalized, self.strip_id, self.is_training_type
        heads = [c.split("-", 1)[0] if "-" in c else c for c in forms]
        n = len(forms)
        return zip(
            map(is_cap, forms), [int(casing.tag(c)) for c in forms],
            self.prior.log_probs(forms) if self.prior is not None else [0.0] * n,
            [c not in self.form_set for c in forms],
            [len(c) <= 3 or sum(map(str.isalpha, c)) <= 3 for c in forms], map(strip_id, forms),
            map(self.tables.cased.tgt_ids.get, forms, [-1] * n), map(is_upper_word, forms),
            map(self.lm_id, forms) if self.lm_id is not None else [-1] * n,
            [not training(casing.lower(c)) for c in forms],
            [strip_id(h) if is_cap(h) else -1 for h in heads])

    def segment(self, ids: Sequence[int]) -> tuple[int, int]:
        """Add a GEN result to the pool: its (start, count)."""
        start = self._size
        self._pending.extend(ids)
        self._size += len(ids)
        return start, len(ids)

    def pool(self) -> np.ndarray:
        """Every segment's candidate ids (``pool()[start:start + count]``)."""
        if self._pending:
            self._pool = np.concatenate([self._pool, np.array(self._pending, dtype=np.int64)])
            self._pending = []
        return self._pool

    def plain_all(self, toks: Sequence[str]) -> list[tuple[int, int]]:
        """GEN of each token without source words, as segments of the pool (the new candidates
        described together)."""
        known = self._plain
        todo = [t for t in dict.fromkeys(toks) if t not in known]
        if todo:
            gens = [gen(t, self.gen_forms(t), (), self.max_candidates) for t in todo]
            self.add(chain.from_iterable(gens))
            ids = self.ids
            for t, forms in zip(todo, gens):
                known[t] = self.segment([ids[f] for f in forms])
        return [known[t] for t in toks]

    def sourced(self, tok: str, src_forms: tuple[str, ...]) -> tuple[int, int]:
        """GEN(tok) with source words, as a segment of the pool; only words of the token's length can
        join GEN (see gen)."""
        key = (tok, src_forms)
        seg = self._sourced.get(key)
        if seg is None:
            forms = gen(tok, self.gen_forms(tok), src_forms, self.max_candidates)
            seg = self._sourced[key] = self.segment([self.id(f) for f in forms])
        return seg

    def facts(self) -> Facts:
        return Facts(*(self._facts[name] for name, _ in _COLUMNS))

    def save(self, path: str | os.PathLike[str], extra: Mapping[str, np.ndarray] | None = None) -> None:
        """Write the registry with GEN of every lowercase training type (``plain_all``), the training
        forms by lowercase, the source keys met so far and the case prior's tables (and ``extra``)."""
        lows = sorted(self.forms)
        self.plain_all(lows)
        by_lower = self._by_lower
        seen_lens = np.array([len(by_lower[low]) for low in lows], dtype=np.int64)
        F, SF = self.facts(), self.source_facts()
        segs = np.array(list(self._plain.values()), dtype=np.int64).reshape(-1, 2)
        save_npz(path, {
            "strings": text_array(self.strings), "strip": text_array(self._strip),
            "tokens": text_array(self._plain), "seg.start": segs[:, 0], "seg.count": segs[:, 1],
            "gen": self.pool(), "settings": np.array(self._settings()),
            **{f"facts.{name}": getattr(F, name) for name, _ in _COLUMNS},
            "seen.tokens": text_array(lows), "seen.offsets": np.concatenate([[0], np.cumsum(seen_lens)]),
            "seen.ids": np.fromiter((i for low in lows for i in by_lower[low]), dtype=np.int64, count=int(seen_lens.sum())),
            **(self.prior.arrays() if self.prior is not None else {}),
            "src.keys": text_array(self.src_ids),
            **{f"src.{name}": getattr(SF, name) for name, _ in _SOURCE_COLUMNS},
            **(extra or {}),
        })

    def load(self, z: Mapping[str, np.ndarray]) -> bool:
        """Fill an empty registry from ``save``'s file, opened; False (and nothing taken) when it was made
        with other settings."""
        if z["settings"].tolist() != self._settings() or any(f"facts.{n}" not in z for n, _ in _COLUMNS):
            return False  # other settings, or facts of an earlier version
        self.strings = words_of(z["strings"])
        self.ids = dict(zip(self.strings, range(len(self.strings))))
        strip = words_of(z["strip"])
        self._strip = dict(zip(strip, range(len(strip))))
        tokens = words_of(z["tokens"])
        if "offsets" in z:  # registries of earlier versions: segments one after the other
            starts, counts = z["offsets"][:-1], np.diff(z["offsets"])
        else:
            starts, counts = z["seg.start"], z["seg.count"]
        self._plain = dict(zip(tokens, zip(starts.tolist(), counts.tolist())))
        self._pool = z["gen"]
        self._size = len(self._pool)
        self._facts.take({name: z[f"facts.{name}"] for name, _ in _COLUMNS})
        if "seen.tokens" in z:  # registries of earlier versions have neither
            seen = words_of(z["seen.tokens"])
            self._seen = (dict(zip(seen, range(len(seen)))), z["seen.offsets"].tolist(), z["seen.ids"])
        if self.prior is not None and "prior.lower" in z:
            self.prior.use(z)
        if "src.keys" in z:
            keys = words_of(z["src.keys"])
            self.src_ids = dict(zip(keys, range(len(keys))))
            self._src_facts.take({name: z[f"src.{name}"] for name, _ in _SOURCE_COLUMNS})
        return True

    def _settings(self) -> list[int]:
        return [CasePrior.REVISION if self.prior is not None else 0, self.max_candidates, self.lm_vocab]

    def source_id(self, key: str) -> int:
        i = self.src_ids.get(key)
        if i is None:
            i = self.src_ids[key] = len(self.src_ids)
            t = casing.tag(key)
            self._src_facts.rows.append((self.tables.cased.src_ids.get(key, -1),
                                   self.tables.lower.src_ids.get(casing.lower(key), -1), int(t),
                                   t is not Tag.AN, is_upper_word(key)))
        return i

    def source_facts(self) -> SourceFacts:
        return SourceFacts(*(self._src_facts[name] for name, _ in _SOURCE_COLUMNS))


class Columns:
    """Named numpy columns grown by rows: rows wait in a list until read, and the arrays double their
    capacity when full, so growing a registry chunk by chunk copies it O(log n) times, not once a chunk."""

    def __init__(self, spec: Sequence[tuple[str, type]]) -> None:
        self.spec = list(spec)
        self.rows: list[tuple] = []
        self.n = 0
        self._data = {name: np.zeros(0, dtype=dtype) for name, dtype in self.spec}

    def __getitem__(self, name: str) -> np.ndarray:
        if self.rows:
            self._flush()
        return self._data[name][:self.n]

    def take(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Replace the contents with ``arrays`` (one per column, equal lengths)."""
        self._data = {name: np.asarray(arrays[name]) for name, _ in self.spec}
        self.n = len(next(iter(self._data.values()))) if self._data else 0
        self.rows = []

    def _flush(self) -> None:
        rows, self.rows = self.rows, []
        end = self.n + len(rows)
        for k, (name, dtype) in enumerate(self.spec):
            col = self._data[name]
            if end > len(col):
                grown = np.zeros(max(end, 2 * len(col)), dtype=dtype)
                grown[:self.n] = col[:self.n]
                self._data[name] = col = grown
            col[self.n:end] = np.array([r[k] for r in rows], dtype=dtype)
        self.n = end
