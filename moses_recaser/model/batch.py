"""A batch of triples as flat arrays: word types, alignment pairs and per-sentence facts.

Recasing meets each word type many times; ``WordTypes`` works out a type's facts once and keeps them
as numpy columns, so a batch's tokens become type numbers in one pass and the per-sentence facts the
features need (first word with a letter, positional capitals, headline flags, aligned source words)
are numpy over the whole batch. Each function here is the batch form of a per-sentence definition
kept as the reference (``casing.positional``, ``features.source_flags``; ``alignment_pairs``'
per-sentence definition is in its test); tests check they agree.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import chain, repeat

import numpy as np

from moses_recaser.model.candidates import Columns
from moses_recaser.modeldir import text_array, words_of
from moses_recaser.triples import Triple


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one batch: a batch allocates many small containers
    (lists, tuples) and makes no reference cycles, so the collector's passes only add time (about 15%
    of a recasing batch); memory is freed by reference counting as usual. Restored on exit. Also a
    decorator (``@gc_paused()``), as every ``contextmanager`` is."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class WordTypes:
    """Word type -> number, with per-type facts as numpy columns (``describe`` gives the rows of a list
    of types, once, when they are first met)."""

    def __init__(self, columns: Sequence[tuple[str, type]], describe: Callable[[list[str]], Iterable[tuple]]) -> None:
        self.columns = list(columns)
        self.describe = describe
        self.ids: dict[str, int] = {}
        self._cols = Columns(columns)

    def numbers(self, words: list[str]) -> np.ndarray:
        """The type number of every word (new types are described in order of first occurrence)."""
        ids = self.ids
        out = np.fromiter(map(ids.get, words, repeat(-1)), dtype=np.int64, count=len(words))
        missing = np.flatnonzero(out < 0)
        if len(missing):  # new types: described together, numbered in order of first occurrence
            new = list(dict.fromkeys(words[i] for i in missing.tolist()))
            ids.update(zip(new, range(len(ids), len(ids) + len(new))))
            self._cols.rows.extend(self.describe(new))
            out[missing] = np.fromiter((ids[words[i]] for i in missing.tolist()), dtype=np.int64, count=len(missing))
        return out

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """Every type and column, for ``restore``."""
        return {f"{prefix}.words": text_array(self.ids), **{f"{prefix}.{c}": self[c] for c, _ in self.columns}}

    def restore(self, z: Mapping[str, np.ndarray], prefix: str) -> None:
        """Take the types of ``arrays`` (into an empty registry), if stored with the same columns."""
        if any(f"{prefix}.{c}" not in z for c, _ in self.columns):
            return  # stored by a version with other columns: describe the types anew
        words = words_of(z[f"{prefix}.words"])
        self.ids = dict(zip(words, range(len(words))))
        self._cols.take({c: z[f"{prefix}.{c}"] for c, _ in self.columns})

    def __getitem__(self, name: str) -> np.ndarray:
        return self._cols[name]


@dataclass
class Layout:
    """Where each sentence's words lie in the batch's flat token arrays."""

    n_tgt: np.ndarray  # (S,) target words per sentence
    n_src: np.ndarray  # (S,) source words per sentence
    tgt_sent: np.ndarray  # (N,) sentence of each target word
    src_sent: np.ndarray  # (M,) sentence of each source word
    tgt_start: np.ndarray  # (S,) first target word of each sentence
    src_start: np.ndarray  # (S,) first source word of each sentence

    @classmethod
    def of(cls, triples: Sequence[Triple]) -> Layout:
        S = len(triples)
        n_tgt = np.fromiter((len(t.target) for t in triples), dtype=np.int64, count=S)
        n_src = np.fromiter((len(t.source) for t in triples), dtype=np.int64, count=S)
        return cls(n_tgt=n_tgt, n_src=n_src, tgt_sent=np.repeat(np.arange(S), n_tgt),
                   src_sent=np.repeat(np.arange(S), n_src), tgt_start=np.cumsum(n_tgt) - n_tgt,
                   src_start=np.cumsum(n_src) - n_src)


def first_in_sentence(mask: np.ndarray, sent: np.ndarray, start: np.ndarray) -> np.ndarray:
    """(S,) the position within its sentence of each sentence's first word with ``mask`` (-1: none)."""
    out = np.full(len(start), -1, dtype=np.int64)
    where = np.flatnonzero(mask)
    s, first = np.unique(sent[where], return_index=True)
    out[s] = where[first] - start[s]
    return out


def positional(letter: np.ndarray, end: np.ndarray, layout: Layout) -> np.ndarray:
    """(M,) bool: the source word's capital is due to its position (``casing.positional``): the first
    word with a letter of its sentence, or after ``.``, ``!``, ``?``."""
    segment_start = end.copy()
    segment_start[layout.src_start[layout.n_src > 0]] = True
    segment = np.cumsum(segment_start)  # a new segment at each sentence start and sentence-end token
    where = np.flatnonzero(letter)
    out = np.zeros(len(letter), dtype=bool)
    out[where[np.unique(segment[where], return_index=True)[1]]] = True
    return out


def source_flags(letter: np.ndarray, final: np.ndarray, capitalized: np.ndarray, long: np.ndarray,
                 layout: Layout, headline_max: int) -> tuple[np.ndarray, np.ndarray]:
    """(S,) (looks like a headline, is title-cased) of each source line (``features.source_flags``)."""
    S, sent = len(layout.n_src), layout.src_sent
    any_letter = np.bincount(sent, weights=letter, minlength=S) > 0
    last = layout.src_start + layout.n_src - 1
    has = layout.n_src > 0
    headline = any_letter & (layout.n_src <= headline_max)
    headline[has] &= ~final[last[has]]
    first = first_in_sentence(letter, sent, layout.src_start)
    after_first = np.arange(len(sent)) - layout.src_start[sent] > first[sent]
    longer = after_first & letter & long
    n_longer = np.bincount(sent, weights=longer, minlength=S)
    n_cap = np.bincount(sent, weights=longer & capitalized, minlength=S)
    title = any_letter & (n_longer >= 2) & (n_cap >= 0.6 * n_longer)
    return headline, title


def alignment_pairs(triples: Sequence[Triple], layout: Layout, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Every (target word, aligned source word) pair of the batch as flat indices, ordered by target
    word, then source word: a target word is aligned to every word of its source phrase, or with
    ``mode="links"`` to the words it is linked to when it has links; phrases are used when there
    are no links, and links when there are no phrases."""
    use_links = [bool(t.links) and (mode != "phrase" or not t.phrases) for t in triples]
    parts_t, parts_s = [], []
    # phrase pairs: every target word of a phrase with every source word of it
    ph = [(s, p) for s, t in enumerate(triples) for p in t.phrases]
    if ph:
        P = np.array([p for _, p in ph], dtype=np.int64).reshape(-1, 4)
        ps = np.array([s for s, _ in ph], dtype=np.int64)
        ns, nt = P[:, 1] - P[:, 0] + 1, P[:, 3] - P[:, 2] + 1
        n = ns * nt
        k = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
        rep = np.repeat(np.arange(len(P)), n)
        t_glob = layout.tgt_start[ps][rep] + P[rep, 2] + k // ns[rep]
        s_glob = layout.src_start[ps][rep] + P[rep, 0] + k % ns[rep]
        linked = np.zeros(len(layout.tgt_sent), dtype=bool)
        keep = np.ones(len(t_glob), dtype=bool)
        if any(use_links):
            for s, t in enumerate(triples):
                if use_links[s]:
                    linked[layout.tgt_start[s] + np.fromiter((tt for _, tt in t.links), dtype=np.int64)] = True  # type: ignore[union-attr]
            keep = ~linked[t_glob]  # a linked word takes its links instead of its phrase
        parts_t.append(t_glob[keep])
        parts_s.append(s_glob[keep])
    with_links = [s for s, u in enumerate(use_links) if u]
    if with_links:
        counts = np.fromiter((len(triples[s].links) for s in with_links), dtype=np.int64)  # type: ignore[arg-type]
        flat = np.fromiter(chain.from_iterable(chain.from_iterable(triples[s].links) for s in with_links),  # type: ignore[arg-type]
                           dtype=np.int64, count=2 * int(counts.sum())).reshape(-1, 2)
        sents = np.repeat(np.array(with_links, dtype=np.int64), counts)
        parts_t.append(layout.tgt_start[sents] + flat[:, 1])
        parts_s.append(layout.src_start[sents] + flat[:, 0])
    if not parts_t:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    t_all, s_all = np.concatenate(parts_t), np.concatenate(parts_s)
    order = np.lexsort((s_all, t_all))
    return t_all[order], s_all[order]
