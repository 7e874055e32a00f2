"""Feature tables estimated from a cased, word-aligned bitext (paper section 4.3).

- ``cased``: the capitalized translation table p(E|F) over cased word pairs;
- ``lower``: the t-table p(e|f) over lowercased word pairs;
- ``tags``: the case-tag translation table p(tag(E)|tag(F));

``cased`` and ``tags`` count only links between words whose case is not due to their position (the
sentence's first word with a letter, and the first after ``. ! ?``): "Le -> The" at the start of a
sentence says nothing about how "le" is cased, and would teach that IU source words become AL.
- ``forms``: every cased target form with its count (all positions, and sentence-initial
  ones), the source of GEN heuristic (ii) and of the unigram baseline.

The counts come from ``merge.Counts``; ``table_arrays`` makes the stored arrays (``tables.npz``) from them a
block of word pairs at a time, the pair key sets packed in bounded memory (``keyset.pack_blocks``), and
``Tables.load`` maps them back.

Smoothing (every probability is > 0):

- translation tables, Witten-Bell interpolated with a smoothed unigram:
  ``p(E|F) = (c(F,E) + T(F) p0(E)) / (c(F) + T(F))``, where c counts alignment links, T(F)
  is the number of distinct E linked to F, and ``p0(E) = (c(E) + 1) / (N + |V| + 1)`` (N links,
  |V| linked target types; an unseen E gets ``1 / (N + |V| + 1)``); an unseen F gives p0(E);
- tag table, add-one: ``p(t|s) = (c(s,t) + 1) / (c(s) + 5)``.

Tables are numpy arrays plus vocabularies (``vocab.Vocab``; no pickle): a pair (F, E) is the int64 key
``id(F) * |V_E| + id(E)`` in a packed key set (``keyset.KeySet``), its count at the key's position.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.casing import Tag
from moses_recaser.core.keyset import KeySet, pack_blocks
from moses_recaser.core.memory import Memory
from moses_recaser.core.vocab import Vocab
from moses_recaser.io.diskarrays import Scratch, Sink, Stored, whole
from moses_recaser.io.modeldir import MappedArrays, save_npz, text_array, words_of

if TYPE_CHECKING:  # recasing loads tables without the counting code
    from moses_recaser.stats.merge import Counts
    from moses_recaser.stats.runs import Table

N_TAGS = len(Tag)


@dataclass
class TranslationTable:
    """Witten-Bell smoothed p(E|F) (see the module docstring)."""

    src_vocab: Vocab
    tgt_vocab: Vocab
    pairs: KeySet  # id(F) * |V_E| + id(E)
    counts: np.ndarray  # c(F, E), in the order of ``pairs``
    src_total: np.ndarray  # c(F)
    src_types: np.ndarray  # T(F)
    tgt_count: np.ndarray  # c(E), over links

    def __post_init__(self) -> None:
        n_links = float(self.tgt_count.sum())
        self._p0_denominator = n_links + len(self.tgt_vocab) + 1.0

    def restricted(self, keep: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> TranslationTable:
        """The same table for the pairs ``keep`` keeps (given source and target ids, it says which): those pairs
        only, in memory (see ``ArrayLM.restricted``); p(e|f) of a kept pair is the full table's."""
        V = len(self.tgt_vocab)
        if not len(self.pairs) or not V:
            return self
        pairs, where = self.pairs.subset(lambda keys: keep(keys // V, keys % V))
        return replace(self, pairs=pairs, counts=np.asarray(self.counts[where]))

    def p0(self, e: str) -> float:
        return float(self.probs(np.array([-1]), np.array([self.tgt_vocab.get(e)]))[0])

    def count(self, f: str, e: str) -> int:
        fi, ei = self.src_vocab.get(f), self.tgt_vocab.get(e)
        if fi < 0 or ei < 0:
            return 0
        pos, found = self.pairs.find(np.array([fi * len(self.tgt_vocab) + ei], dtype=np.int64))
        return int(self.counts[pos[0]]) if found[0] else 0

    def prob(self, f: str, e: str) -> float:
        """p(e|f), smoothed (one pair; recasing asks ``probs`` for arrays of pairs)."""
        return float(self.probs(np.array([self.src_vocab.get(f)]), np.array([self.tgt_vocab.get(e)]))[0])

    def probs(self, f: np.ndarray, e: np.ndarray) -> np.ndarray:
        """p(e|f) for arrays of ids (-1: not in the table), the same values as ``prob``."""
        known_e = e >= 0
        e0 = np.where(known_e, e, 0)
        p0 = (1.0 + np.where(known_e, self.tgt_count[e0] if len(self.tgt_count) else 0, 0)) / self._p0_denominator
        known_f = f >= 0
        f0 = np.where(known_f, f, 0)
        if not len(self.src_vocab):
            return p0
        count = np.zeros(len(f0), dtype=self.counts.dtype)
        both = np.flatnonzero(known_e & known_f)  # only pairs of known words can be listed
        if len(self.pairs) and len(both):
            pos, found = self.pairs.find(f0[both] * len(self.tgt_vocab) + e0[both])
            count[both] = np.where(found, self.counts[pos], 0)
        types = self.src_types[f0].astype(np.float64)
        p = (count + types * p0) / (self.src_total[f0] + types)
        return np.where(known_f, p, p0)


@dataclass
class TagTable:
    """Add-one smoothed p(tag(E) | tag(F)) over linked word pairs."""

    counts: np.ndarray  # [source tag, target tag]

    def probs(self) -> np.ndarray:
        c = self.counts.astype(np.float64) + 1.0
        return c / c.sum(axis=1, keepdims=True)

    def prob(self, target: Tag, source: Tag) -> float:
        return float(self.probs()[int(source), int(target)])


@dataclass
class Forms:
    """Cased target forms and their counts: everywhere, and as the sentence's first word with a letter."""

    vocab: Vocab
    count: np.ndarray
    initial: np.ndarray
    _groups: LowerGroups | None = field(default=None, init=False, repr=False, compare=False)

    def by_lower(self) -> dict[str, list[int]]:
        """Lowercase -> form ids, most frequent first (ties by form, for determinism): ``lower_groups`` as a dict."""
        g = self.lower_groups()
        bounds = g.offsets.tolist()
        return {low: g.ids[bounds[k] : bounds[k + 1]].tolist() for k, low in enumerate(g.lows)}

    def lower_groups(self) -> LowerGroups:
        """The forms grouped by their lowercase, as arrays (worked out once: a dict of lists over every form of a
        large corpus takes ten times the memory)."""
        if self._groups is None:
            self._groups = LowerGroups.from_forms(self)
        return self._groups


@dataclass(frozen=True)
class LowerGroups:
    """The forms of each lowercase word: ``lows`` sorted, the forms of ``lows[k]`` are ``ids[offsets[k] :
    offsets[k + 1]]``, most frequent first (ties by form); ``group[i]`` is the row in ``lows`` of form i."""

    lows: Vocab
    offsets: np.ndarray
    ids: np.ndarray
    group: np.ndarray

    @classmethod
    def from_forms(cls, forms: Forms) -> LowerGroups:
        words = np.array(list(forms.vocab), dtype=object)
        uniq, group = np.unique(np.array([casing.lower(w) for w in words], dtype=object), return_inverse=True)
        rank = np.argsort(np.argsort(words, kind="stable"), kind="stable")  # each form's place in string order
        ids = np.lexsort((rank, -np.asarray(forms.count, dtype=np.int64), group)).astype(np.int64)
        offsets = np.zeros(len(uniq) + 1, dtype=np.int64)
        np.cumsum(np.bincount(group, minlength=len(uniq)), out=offsets[1:])
        return cls(Vocab.from_words(uniq.tolist()), offsets, ids, group.astype(np.int64))

    def first_seen(self) -> np.ndarray:
        """The rows of ``lows`` in the order of their first form."""
        first = np.full(len(self.lows), len(self.group), dtype=np.int64)
        np.minimum.at(first, self.group, np.arange(len(self.group)))
        return np.argsort(first, kind="stable")


@dataclass
class Tables:
    cased: TranslationTable
    lower: TranslationTable
    tags: TagTable
    forms: Forms
    punct: dict[str, int] = field(default_factory=dict)  # punctuation followed by a word: the punct=P features

    def restricted(self, keep: Callable[[TranslationTable, np.ndarray, np.ndarray], np.ndarray]) -> Tables:
        """The tables with the pairs ``keep`` keeps (given a table, source and target ids, it says which;
        ``TranslationTable.restricted``); the rest as it is."""
        return replace(
            self,
            cased=self.cased.restricted(lambda f, e: keep(self.cased, f, e)),
            lower=self.lower.restricted(lambda f, e: keep(self.lower, f, e)),
        )

    @classmethod
    def from_counts(cls, counts: Counts) -> Tables:
        """The tables of counts, in memory (small corpora, tests)."""
        return cls.from_arrays(
            {k: whole(v) for k, v in table_arrays(counts, Scratch(None), Memory.unbounded()).items()}
        )

    def save(self, directory: Path) -> None:
        """The tables as a model directory's ``tables.npz``."""
        arrays: dict[str, np.ndarray] = {}
        for name in ("cased", "lower"):
            tt: TranslationTable = getattr(self, name)
            for attr in ("counts", "src_total", "src_types", "tgt_count"):
                arrays[f"{name}_{attr}"] = getattr(tt, attr)
            arrays.update(tt.pairs.arrays(f"{name}.pairs"))
            arrays.update(tt.src_vocab.arrays(f"{name}.src"))
            arrays.update(tt.tgt_vocab.arrays(f"{name}.tgt"))
        arrays["tag_counts"] = self.tags.counts
        arrays["forms_count"] = self.forms.count
        arrays["forms_initial"] = self.forms.initial
        arrays.update(self.forms.vocab.arrays("forms"))
        arrays["punct"] = text_array(self.punct)
        arrays["punct_count"] = np.array(list(self.punct.values()), dtype=np.int64)
        save_npz(directory / "tables.npz", arrays)

    @classmethod
    def load(cls, directory: Path) -> Tables:
        """The tables ``save`` (or ``write_tables``) wrote, mapped."""
        return cls.from_arrays(MappedArrays(directory / "tables.npz"))

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> Tables:
        """The tables of their stored arrays, checked."""
        tts = {}
        for name in ("cased", "lower"):
            tts[name] = TranslationTable(
                src_vocab=Vocab.load(arrays, f"{name}.src"),
                tgt_vocab=Vocab.load(arrays, f"{name}.tgt"),
                pairs=KeySet.load(arrays, f"{name}.pairs"),
                **{attr: arrays[f"{name}_{attr}"] for attr in ("counts", "src_total", "src_types", "tgt_count")},
            )
        return cls(
            cased=tts["cased"],
            lower=tts["lower"],
            tags=TagTable(arrays["tag_counts"]),
            forms=Forms(Vocab.load(arrays, "forms"), arrays["forms_count"], arrays["forms_initial"]),
            punct=dict(zip(words_of(arrays["punct"]), arrays["punct_count"].tolist())),
        )


def write_tables(counts: Counts, path: str | os.PathLike[str], scratch: Scratch, memory: Memory) -> None:
    """The tables of counts as ``tables.npz`` (what ``Tables.save`` writes), built in bounded memory."""
    save_npz(path, table_arrays(counts, scratch, memory))


def table_arrays(counts: Counts, scratch: Scratch, memory: Memory) -> dict[str, np.ndarray | Stored]:
    """Every array of ``tables.npz``: the translation tables' (large ones as files of ``scratch``), the tag
    table's and the forms'."""
    arrays: dict[str, np.ndarray | Stored] = {}
    arrays.update(_translation_arrays("cased", counts.source, counts.forms, counts.cased_pairs, scratch, memory))
    arrays.update(_translation_arrays("lower", counts.src_lower, counts.tgt_lower, counts.lower_pairs, scratch, memory))
    vocab, place = _ranks(counts.forms, np.arange(len(counts.forms)))
    order = np.empty(len(vocab), dtype=np.int64)
    order[place] = np.arange(len(vocab))  # the form of each place in the sorted vocabulary
    punct = {w: int(c) for w, c in zip(vocab, counts.punct[order].tolist()) if c}
    arrays["tag_counts"] = counts.tags.copy()
    arrays["forms_count"] = counts.form_count[order]
    arrays["forms_initial"] = counts.initial[order]
    arrays.update(Vocab.from_words(vocab).arrays("forms"))
    arrays["punct"] = text_array(punct)
    arrays["punct_count"] = np.array(list(punct.values()), dtype=np.int64)
    return arrays


def _translation_arrays(
    name: str, src_words: Sequence[str], tgt_words: Sequence[str], pairs: Table, scratch: Scratch, memory: Memory
) -> dict[str, np.ndarray | Stored]:
    """A translation table's arrays from its linked pair counts (keys source word << 32 | target word, ids into
    ``src_words``, ``tgt_words``), each word numbered in the table by its place in the sorted vocabulary of
    linked words; three passes over the pairs."""
    rows = memory.rows(256, least=1 << 16)  # a block's keys, counts, word ids and their places
    used_f, used_e = np.zeros(len(src_words), dtype=bool), np.zeros(len(tgt_words), dtype=bool)
    largest = 0
    for keys, counts in pairs.blocks(rows):
        used_f[keys >> 32] = used_e[keys & 0xFFFFFFFF] = True
        largest = max(largest, int(counts.max()))
    src_vocab, f_place = _ranks(src_words, np.flatnonzero(used_f))
    tgt_vocab, e_place = _ranks(tgt_words, np.flatnonzero(used_e))
    V = len(tgt_vocab)

    def keyed() -> Iterator[tuple[np.ndarray, list[np.ndarray]]]:
        for keys, counts in pairs.blocks(rows):
            yield f_place[keys >> 32] * V + e_place[keys & 0xFFFFFFFF], [counts]

    src_total, src_types = np.zeros(len(src_vocab), np.int64), np.zeros(len(src_vocab), np.int64)
    tgt_count, max_key = np.zeros(V, np.int64), 0
    for keys, (counts,) in keyed():
        src, tgt = keys // V, keys % V
        src_total += np.bincount(src, weights=counts, minlength=len(src_vocab)).astype(np.int64)
        src_types += np.bincount(src, minlength=len(src_vocab))
        tgt_count += np.bincount(tgt, weights=counts, minlength=V).astype(np.int64)
        max_key = max(max_key, int(keys.max()))
    # int32 counts halve the largest array a recasing run reads
    sink = Sink(scratch.stem(f"{name}.counts"), np.int32 if largest < 1 << 31 else np.int64)
    packed = pack_blocks(keyed, len(pairs), max_key, [sink], memory, scratch)
    return {
        f"{name}_counts": packed.payloads[0],
        f"{name}_src_total": src_total,
        f"{name}_src_types": src_types,
        f"{name}_tgt_count": tgt_count,
        **packed.arrays(f"{name}.pairs"),
        **Vocab.from_words(src_vocab).arrays(f"{name}.src"),
        **Vocab.from_words(tgt_vocab).arrays(f"{name}.tgt"),
    }


def _ranks(words: Sequence[str], used: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The sorted vocabulary of the words ``used`` (distinct ids) names, and the place of each id in it (an
    array over every id up to the largest used)."""
    by_word = sorted(used.tolist(), key=words.__getitem__)
    place = np.zeros(int(used.max()) + 1 if len(used) else 0, dtype=np.int64)
    place[by_word] = np.arange(len(by_word))
    return [words[i] for i in by_word], place
