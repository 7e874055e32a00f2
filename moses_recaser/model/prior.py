"""The case prior: log p(form | lowercase) from the training target, smoothed with the case tags of rare
training words of the same shape (length and ending), which is all that a word training never saw gets."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cached_property

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.casing import Tag
from moses_recaser.core.vocab import Vocab
from moses_recaser.io.modeldir import text_array, words_of
from moses_recaser.stats.tables import Tables


class CasePrior:
    """log p(E | lower(E)) from non-initial training counts, smoothed with p(tag | shape) of rare words
    (``shape_probs``), which is all that an unseen word gets.
    Built on first use: with a stored registry, recasing needs it only for unseen types, and the
    registry stores its lowercase counts and shape counts (``arrays``, ``use``)."""

    BETA = 1.0
    RARE = 3  # words whose lowercase occurs at most this often stand for the unseen ones
    SHAPE_BETA = 4.0
    MAX_SUFFIX = 4
    MAX_LENGTH = 8  # a shape's length: longer words count as this long

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    @cached_property
    def _form_counts(self) -> np.ndarray:
        """Each training form's count where it is not the sentence's first word with a letter."""
        f = self.tables.forms
        return f.count - f.initial

    @cached_property
    def _lower(self) -> tuple[Vocab, np.ndarray]:
        """Each lowercase word (in the order of its first form) and its forms' count (``_form_counts``)."""
        g = self.tables.forms.lower_groups()
        order = g.first_seen()
        return Vocab.from_words(g.lows.strings(order)), self._lower_counts[order]

    @cached_property
    def _lower_counts(self) -> np.ndarray:
        """The count of each lowercase word of ``Forms.lower_groups``, by its row there."""
        g = self.tables.forms.lower_groups()
        counts = np.zeros(len(g.lows), dtype=np.int64)
        np.add.at(counts, g.group, self._form_counts)
        return counts

    @staticmethod
    def shape_keys(low: str) -> list[str]:
        """A lowercase word's shape, least specific first: its length (MAX_LENGTH or more: MAX_LENGTH), then its
        last 1 to MAX_SUFFIX letters, apart for words shorter than 5 (acronyms are short) and the rest."""
        n = len(low)
        band = "s" if n < 5 else "l"
        return [f"#{min(n, CasePrior.MAX_LENGTH)}"] + [
            f"{band}{k}:{low[-k:]}" for k in range(1, min(n, CasePrior.MAX_SUFFIX) + 1)
        ]

    @cached_property
    def _shape(self) -> dict[str, list[float]]:
        """Tag counts per shape key over the types of rare words, not over tokens: unseen words are like
        rare ones, and a suffix's frequent words (``long``, ``strong``) tell little of its unseen ones
        (``yunlong``). Five floats a key: cheaper in Python than an array."""
        rare = (self._lower_counts <= self.RARE)[self.tables.forms.lower_groups().group].tolist()
        counts: dict[str, list[float]] = {}
        for w, c, r in zip(self.tables.forms.vocab, self._form_counts.tolist(), rare):
            low = casing.lower(w)
            if c and r and casing.has_letter(w):
                t = int(casing.tag(w))
                for key in self.shape_keys(low):
                    counts.setdefault(key, [0.0] * len(Tag))[t] += 1.0
        return counts

    @cached_property
    def _base(self) -> list[float]:
        total = np.array([v for k, v in self._shape.items() if k.startswith("#")]).reshape(-1, len(Tag)).sum(axis=0)
        return ((total + 1.0) / (total.sum() + len(Tag))).tolist()

    @cached_property
    def _shape_memo(self) -> dict[tuple[int, str], list[float]]:
        return {}

    def forget(self) -> None:
        """Drop the memo of shapes and the lookups cached in the vocabularies read (``Vocab.compact``)."""
        self.__dict__.pop("_shape_memo", None)
        self._lower[0].compact()
        self.tables.forms.vocab.compact()

    def shape_probs(self, low: str) -> list[float]:
        """p(tag | shape of ``low``): each shape key's counts smoothed towards the estimate of the key
        before it, down to the longest suffix that rare training words have (kept per shape, which the
        length and the last MAX_SUFFIX letters decide: many unseen words share one, and the case prior and
        ``looks_like_a_name`` ask for the same words; five floats are cheaper in Python)."""
        shape_of = (min(len(low), self.MAX_LENGTH), low[-self.MAX_SUFFIX :])
        p = self._shape_memo.get(shape_of)
        if p is not None:
            return p
        shape, beta = self._shape, self.SHAPE_BETA
        q = self._base
        for k, key in enumerate(self.shape_keys(low)):
            v = shape.get(key)
            if v is None:
                if k:
                    break
                continue  # a length no rare word has: its suffixes still count
            total = sum(v) + beta
            q = [(c + beta * b) / total for c, b in zip(v, q)]
        self._shape_memo[shape_of] = q
        return q

    def looks_like_a_name(self, low: str) -> bool:
        """The shape of ``low`` is more often capitalized than not among rare training words."""
        p = self.shape_probs(low)
        return bool(p[Tag.IU] + p[Tag.AU] > p[Tag.AL])

    def arrays(self) -> dict[str, np.ndarray]:
        """The lowercase counts and the shape counts, for ``use``."""
        (lower, lower_counts), shape = self._lower, self._shape
        return {
            **lower.arrays("prior.lower"),
            "prior.lower_counts": lower_counts,
            "prior.shapes": text_array(shape),
            "prior.shape_counts": np.array(list(shape.values())).reshape(-1, len(Tag)),
        }

    def use(self, z: Mapping[str, np.ndarray]) -> None:
        """Take ``arrays``' tables instead of working them out."""
        lower = Vocab.load(z, "prior.lower")
        self.__dict__["_lower"] = (lower, z["prior.lower_counts"])
        self.__dict__["_shape"] = dict(zip(words_of(z["prior.shapes"]), z["prior.shape_counts"].tolist()))

    def log_probs(self, forms: Sequence[str], oov: Sequence[bool] | None = None) -> list[float]:
        """log p(form | lowercase); an unseen hyphenated word's is the sum of its parts' (``Coronavirus-Krise``
        takes the case of ``Krise``; its own shape would read the mixed case as unlikely). ``oov``: whether
        training lacks each form's lowercase, where the caller has looked it up (Candidates, once per form)."""
        beta, shape_probs = self.BETA, self.shape_probs
        lower, tag, log, has_letter = casing.lower, casing.tag, math.log, casing.has_letter
        lows, low_counts = self._lower
        form_vocab, form_counts = self.tables.forms.vocab, self._form_counts
        forms = list(forms)
        low_of = [lower(f) for f in forms]
        low_ids = lows.numbers(low_of, None if oov is None else [k for k, o in enumerate(oov) if not o])
        hyphenated = [k for k, (f, i) in enumerate(zip(forms, low_ids.tolist())) if "-" in f and i < 0]
        parts = {k: ps for k in hyphenated if len(ps := [p for p in forms[k].split("-") if has_letter(p)]) > 1}
        words = forms + [p for ps in parts.values() for p in ps]
        lowered = low_of + [lower(p) for ps in parts.values() for p in ps]
        ids = np.concatenate([low_ids, lows.numbers(lowered[len(forms) :])])
        n_low = _counts(low_counts, ids)
        # only a word whose lowercase training had can be a training form (most described here are unseen)
        n_form = _counts(form_counts, form_vocab.numbers(words, np.flatnonzero(ids >= 0).tolist()))

        def form_log_prob(k: int, q: Sequence[float]) -> float:
            return log((n_form[k] + beta * q[int(tag(words[k]))]) / (n_low[k] + beta))

        out = []
        low_q, q_low = "", self._base
        at = len(forms)  # where each hyphenated form's parts are, in words
        for k, low in enumerate(low_of):
            if k in parts:
                out.append(sum(form_log_prob(at + j, shape_probs(lowered[at + j])) for j in range(len(parts[k]))))
                at += len(parts[k])
                continue
            if low != low_q:  # a type's forms come together
                low_q, q_low = low, shape_probs(low)
            out.append(form_log_prob(k, q_low))
        return out


def _counts(counts: np.ndarray, ids: np.ndarray) -> list[int]:
    """The count of each word by its number in the vocabulary (0 where it has none: -1)."""
    return np.where(ids >= 0, counts[np.maximum(ids, 0)], 0).tolist() if len(ids) else []
