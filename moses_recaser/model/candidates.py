"""Candidates as integer ids: GEN's result per token and each candidate's facts, computed once per type.

Recasing a test set meets each word type many times; the Python work on strings (GEN, tags, the case
prior, table ids) is done the first time a type is met and kept as numpy columns, so that a batch's
features are gathers over candidate ids (see ``extractor.FeatureExtractor.flat``).

GEN results are segments of one pool of candidate ids, so that a batch's candidates are one gather.
Training stores the registry for every lowercase type of the training target in the model
(``candidates.npz``, with the training forms by lowercase and the case prior's tables), so recasing
starts warm: only types unseen in training, and tokens whose
aligned source words join GEN, are worked out at recasing time. The stored registry is used only
by an extractor with the same settings (case prior on or off, GEN size, LM vocabulary).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.casing import Tag
from moses_recaser.core.columns import Columns, column, spec
from moses_recaser.core.vocab import Vocab
from moses_recaser.io.diskarrays import Column, Scratch
from moses_recaser.io.modeldir import save_npz
from moses_recaser.model.gen import gen
from moses_recaser.model.prior import CasePrior
from moses_recaser.stats.tables import Tables


@dataclass
class Facts:
    """Per-candidate columns, indexed by candidate id (a new fact: a column here and its value in
    ``Candidates._describe``)."""

    cap: np.ndarray = column(bool)  # capitalized
    tag: np.ndarray = column(np.int64)  # casing.Tag
    prior: np.ndarray = column(np.float64)  # log case prior (0 without a prior)
    unseen: np.ndarray = column(bool)  # never in the training target
    short: np.ndarray = column(bool)  # <= 3 characters or <= 3 letters
    strip: np.ndarray = column(np.int64)  # id of the form without diacritics (``Candidates.strip_id``)
    cased: np.ndarray = column(np.int64)  # id among the cased table's targets (-1: none)
    upper: np.ndarray = column(bool)  # all upper
    lm: np.ndarray = column(np.int64)  # LM word id (-1 without array LM)
    oov: np.ndarray = column(bool)  # its lowercase never in the training target (the case prior is the shape's)
    head: np.ndarray = column(np.int64)  # strip id of its first hyphen part when that is capitalized (-1: not)


@dataclass
class SourceFacts:
    """Per-source-key columns (``Candidates.source_ids``)."""

    cased: np.ndarray = column(np.int64)  # id among the cased table's sources (-1: none)
    lower: np.ndarray = column(np.int64)  # id of its lowercase among the lowercase table's sources (-1: none)
    tag: np.ndarray = column(np.int64)  # casing.Tag
    has_case: np.ndarray = column(bool)  # has a cased character (not AN)
    upper: np.ndarray = column(bool)  # all upper


_FACTS = spec(Facts)
_SOURCE_FACTS = spec(SourceFacts)


class Candidates:
    """Registry of candidate strings and of GEN's result per token (both grow as types are met)."""

    def __init__(
        self,
        tables: Tables,
        prior: CasePrior | None,
        lm_ids: Callable[[list[str]], np.ndarray] | None,
        max_candidates: int,
        lm_vocab: int = -1,
    ) -> None:
        self.tables = tables
        self.prior = prior
        self.lm_ids = lm_ids
        self.lm_vocab = lm_vocab  # the LM's vocabulary size (-1: no LM ids), to tell stored registries apart
        self.max_candidates = max_candidates
        self.strings = Vocab.from_words([])  # candidate id -> form
        self._strip = Vocab.from_words([])  # form without diacritics -> id
        self._strip_of: dict[str, int] = {}  # word -> id of its form without diacritics
        self._facts = Columns(_FACTS)
        # GEN results are segments (start, count) of one pool of candidate ids; a stored registry's
        # results (load) are the pool's first part
        self._pool = np.zeros(0, dtype=np.int64)
        self._pending: list[int] = []
        self._size = 0
        self._plain = Vocab.from_words([])  # tokens whose GEN without source words is known: their segments
        self._plain_start = np.zeros(0, dtype=np.int64)
        self._plain_count = np.zeros(0, dtype=np.int64)
        self._sourced: dict[tuple[str, tuple[str, ...]], tuple[int, int]] = {}
        # stored training forms by lowercase (load): lowercase -> row, offsets, form ids
        self._seen: tuple[Vocab, np.ndarray, np.ndarray] | None = None
        self.sources = Vocab.from_words([])  # source key -> id (source_ids)
        self._src_facts = Columns(_SOURCE_FACTS)

    def _seen_arrays(self) -> tuple[Vocab, np.ndarray, np.ndarray]:
        """The training forms by lowercase (lowercase -> row, offsets, form ids): the stored registry's when
        loaded, else the tables' (``Forms.lower_groups``)."""
        if self._seen is None:
            g = self.tables.forms.lower_groups()
            self._seen = (g.lows, g.offsets, g.ids)
        return self._seen

    def training_types(self) -> Vocab:
        """Every lowercase training type, sorted."""
        return self._seen_arrays()[0]

    def seen(self, tok: str) -> Sequence[str]:
        """The training forms of lower(tok), most frequent first."""
        lows, offsets, ids = self._seen_arrays()
        row = lows.get(casing.lower(tok))
        if row < 0:
            return ()
        vocab = self.tables.forms.vocab
        return [vocab[i] for i in ids[offsets[row] : offsets[row + 1]].tolist()]

    def gen_forms(self, tok: str) -> Sequence[str]:
        """The training forms GEN takes: ``seen``, or for an unseen hyphenated word its parts' most frequent
        forms joined (``YouTube-Plattform``, ``SPD-Bundestagsfraktion``); an unseen part takes the case its
        shape makes likelier (``CasePrior.shape_probs``), lowercase or capitalized."""
        forms = self.seen(tok)
        if forms or "-" not in tok.strip("-"):
            return forms
        return ["-".join(self.likeliest(p) for p in tok.split("-"))]

    def likeliest(self, part: str) -> str:
        """The most frequent training form of ``part``, or for an unseen one the case its shape makes likelier."""
        seen = self.seen(part)
        if seen:
            return seen[0]
        low = casing.lower(part)
        if self.prior is None or not casing.has_letter(low):
            return low
        p = self.prior.shape_probs(low)
        return casing.upper_first(low) if p[Tag.IU] > p[Tag.AL] else low

    def starts(self, form: str) -> bool:
        """``form`` was a sentence's first word with a letter in the training target."""
        forms = self.tables.forms
        i = forms.vocab.get(form)
        return i >= 0 and bool(forms.initial[i])

    def unseen_types(self, lows: list[str]) -> list[bool]:
        """Of each lowercase word, whether the training target lacks forms of it."""
        return (self._seen_arrays()[0].numbers(lows) < 0).tolist()

    def id(self, form: str) -> int:
        i = self.strings.get(form)
        if i < 0:
            self.add([form])
            i = self.strings.get(form)
        return i

    def add(self, forms: Iterable[str]) -> None:
        """Register the forms not registered yet (described together: recasing meets a test set's
        unseen types in a few batches)."""
        uniq = list(dict.fromkeys(forms))
        new = [f for f, i in zip(uniq, self.strings.numbers(uniq).tolist()) if i < 0]
        if new:
            for f in new:
                self.strings.add(f)
            self._facts.add(self._describe(new))

    def compact(self) -> None:
        """Hold the registry's strings and GEN's segments in arrays and forget what was cached (``Vocab.compact``):
        the same registry, for one that grows over every training type."""
        for vocab in (self.strings, self._strip, self._plain, self.sources):
            vocab.compact()
        self.pool()  # the segments added since, as an array
        self._strip_of.clear()
        if self._seen is not None:
            self._seen[0].compact()
        if self.prior is not None:
            self.prior.forget()

    def strip_id(self, word: str) -> int:
        """An id for ``word`` without diacritics (equal ids: equal up to diacritics)."""
        i = self._strip_of.get(word)
        if i is None:
            i = self._strip_of[word] = self._strip.add(casing.strip_diacritics(word))
        return i

    def strip_ids(self, words: list[str]) -> list[int]:
        """``strip_id`` of each word, the new ones numbered together."""
        new = [w for w in dict.fromkeys(words) if w not in self._strip_of]
        if new:
            self._strip_of.update(zip(new, self._strip.add_all([casing.strip_diacritics(w) for w in new]).tolist()))
        return [self._strip_of[w] for w in words]

    def _describe(self, forms: list[str]) -> dict[str, list]:
        """The facts (``Facts``) of each form, a column at a time."""
        is_cap = casing.is_capitalized
        heads = [c.split("-", 1)[0] if "-" in c else c for c in forms]
        cap_heads = [is_cap(h) for h in heads]
        head_ids = self.strip_ids([h for h, c in zip(heads, cap_heads) if c])[::-1]
        n = len(forms)
        oov = self.unseen_types([casing.lower(c) for c in forms])
        # a vocabulary of training forms lacks a form whose lowercase training lacks (most forms described here:
        # GEN of the types a test set brings): only the others are looked up
        seen = [k for k, o in enumerate(oov) if not o]
        return {
            "cap": list(map(is_cap, forms)),
            "tag": [int(casing.tag(c)) for c in forms],
            "prior": self.prior.log_probs(forms, oov) if self.prior is not None else [0.0] * n,
            "unseen": (self.tables.forms.vocab.numbers(forms, seen) < 0).tolist(),
            "short": [len(c) <= 3 or sum(map(str.isalpha, c)) <= 3 for c in forms],
            "strip": self.strip_ids(forms),
            "cased": self.tables.cased.tgt_vocab.numbers(forms, seen).tolist(),
            "upper": list(map(casing.is_upper_word, forms)),
            "lm": self.lm_ids(forms).tolist() if self.lm_ids is not None else [-1] * n,
            "oov": oov,
            "head": [head_ids.pop() if c else -1 for c in cap_heads],
        }

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

    def plain_all(self, toks: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """GEN of each token without source words, as segments of the pool (start and count arrays; the new
        candidates described together)."""
        ids = self._plain.numbers(toks)
        missing = np.flatnonzero(ids < 0)
        if len(missing):
            todo = list(dict.fromkeys(toks[i] for i in missing.tolist()))
            self.unseen_types([casing.lower(t) for t in todo])  # looked up together: ``seen`` then knows them
            segs = self._segments([gen(t, self.gen_forms(t), (), self.max_candidates) for t in todo])
            for tok in todo:
                self._plain.add(tok)
            self._plain_start = np.concatenate([self._plain_start, np.array([s for s, _ in segs], dtype=np.int64)])
            self._plain_count = np.concatenate([self._plain_count, np.array([c for _, c in segs], dtype=np.int64)])
            ids[missing] = self._plain.numbers([toks[i] for i in missing.tolist()])
        return self._plain_start[ids], self._plain_count[ids]

    def sourced(self, keys: list[tuple[str, tuple[str, ...]]]) -> list[tuple[int, int]]:
        """GEN(tok) with source words of each (tok, source words), as segments of the pool; only words of the
        token's length can join GEN (see gen)."""
        todo = [k for k in dict.fromkeys(keys) if k not in self._sourced]
        gens = [gen(tok, self.gen_forms(tok), src_forms, self.max_candidates) for tok, src_forms in todo]
        self._sourced.update(zip(todo, self._segments(gens)))
        return [self._sourced[k] for k in keys]

    def ids(self, forms: list[str]) -> list[int]:
        """The id of each form (``id``), the new ones registered together."""
        self.add(forms)
        return self.strings.numbers(forms).tolist()

    def _segments(self, gens: list[list[str]]) -> list[tuple[int, int]]:
        """Each GEN result added to the pool, its forms registered together: its (start, count)."""
        ids = iter(self.ids(list(chain.from_iterable(gens))))
        return [self.segment(list(islice(ids, len(g)))) for g in gens]

    def facts(self) -> Facts:
        return Facts(**{name: self._facts[name] for name, _ in _FACTS})

    def spill(self, scratch: Scratch) -> None:
        """The candidates' and source keys' facts kept in files of ``scratch`` from now on (``Columns.spill``): a
        registry that grows over every training type until ``save`` holds its strings, not its facts; the facts
        can no longer be read (no lattice can be built after)."""
        self._facts.spill(scratch)
        self._src_facts.spill(scratch)

    def save(self, path: str | os.PathLike[str], extra: Mapping[str, Column] | None = None) -> None:
        """Write the registry with GEN of every lowercase training type (``plain_all``), the training
        forms by lowercase, the source keys met so far and the case prior's tables (and ``extra``)."""
        lows, offsets, ids = self._seen_arrays()
        self.plain_all(list(lows))
        facts, source_facts = self._facts.stored(), self._src_facts.stored()
        save_npz(
            path,
            {
                **self.strings.arrays("strings"),
                **self._strip.arrays("strip"),
                **self._plain.arrays("tokens"),
                "seg.start": self._plain_start,
                "seg.count": self._plain_count,
                "gen": self.pool(),
                "settings": np.array(self._settings()),
                **{f"facts.{name}": column for name, column in facts.items()},
                **lows.arrays("seen.tokens"),
                "seen.offsets": offsets,
                "seen.ids": ids,
                **(self.prior.arrays() if self.prior is not None else {}),
                **self.sources.arrays("src.keys"),
                **{f"src.{name}": column for name, column in source_facts.items()},
                **(extra or {}),
            },
        )

    def load(self, z: Mapping[str, np.ndarray]) -> bool:
        """Fill an empty registry from ``save``'s file, opened; False (and nothing taken) when it was made
        with other settings."""
        if z["settings"].tolist() != self._settings():
            return False
        self.strings = Vocab.load(z, "strings")
        self._strip = Vocab.load(z, "strip")
        self._plain = Vocab.load(z, "tokens")
        self._plain_start, self._plain_count = z["seg.start"], z["seg.count"]
        self._pool = z["gen"]
        self._size = len(self._pool)
        self._facts.take({name: z[f"facts.{name}"] for name, _ in _FACTS})
        self._seen = (Vocab.load(z, "seen.tokens"), z["seen.offsets"], z["seen.ids"])
        if self.prior is not None:
            self.prior.use(z)
        self.sources = Vocab.load(z, "src.keys")
        self._src_facts.take({name: z[f"src.{name}"] for name, _ in _SOURCE_FACTS})
        return True

    def _settings(self) -> list[int]:
        return [int(self.prior is not None), self.max_candidates, self.lm_vocab]

    def source_ids(self, keys: list[str]) -> list[int]:
        """The id of each source key (a source word as the tables know it), the new ones described together."""
        start = len(self.sources)
        ids = self.sources.add_all(keys)
        new = self.sources.words_from(start)
        if new:
            tags = [casing.tag(k) for k in new]
            lower = self.tables.lower.src_vocab.numbers([casing.lower(k) for k in new]).tolist()
            # the cased table's source words are linked words, whose lowercase the lowercase table has
            cased = self.tables.cased.src_vocab.numbers(new, [k for k, i in enumerate(lower) if i >= 0])
            self._src_facts.add(
                {
                    "cased": cased.tolist(),
                    "lower": lower,
                    "tag": [int(t) for t in tags],
                    "has_case": [t is not Tag.AN for t in tags],
                    "upper": [casing.is_upper_word(k) for k in new],
                }
            )
        return ids.tolist()

    def source_facts(self) -> SourceFacts:
        return SourceFacts(**{name: self._src_facts[name] for name, _ in _SOURCE_FACTS})
