"""Shards' counts (``counter.Shard``) merged into the counts of the whole corpus (``Counts``).

Shards are summed in the order of their lines, each shard's word ids mapped onto vocabularies numbered in
order of first appearance across the shards (``vocab.Vocab.add_all``), so that the forms, and the LM's word
ids, come out as a single pass over the whole text makes them, whatever the number of shards. Each key table
(word pairs, n-grams of each order) is merged from every shard's sorted runs k ways (``runs.merge_blocks``),
a block of each at a time: a run whose renumbering keeps the order of ids is read as it is, any other is first
cut into sorted runs of the new ids (``runs.renumbered``). The merged tables go to files of the scratch
directory (memory without one); the counts stay exact.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from moses_recaser.core.memory import Memory
from moses_recaser.core.vocab import Vocab
from moses_recaser.io.diskarrays import Scratch
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.modeldir import words_of
from moses_recaser.stats.counter import BOS, EOS, N_TAGS, UNK, Shard, table_names
from moses_recaser.stats.keycounts import add_padded
from moses_recaser.stats.runs import PAIRS, KeyKind, Table, View, collect, merge_blocks, merge_rows, remove, renumbered


@dataclass
class Counts:
    """The merged counts: vocabularies (target forms in order of first appearance, as the LM's), and arrays
    and sorted tables keyed by their ids."""

    order: int
    forms: list[str]
    form_count: np.ndarray
    initial: np.ndarray
    punct: np.ndarray
    source: list[str]
    tgt_lower: list[str]
    src_lower: list[str]
    lower_pairs: Table  # keys (source lowercase id << 32 | target lowercase id), counts
    cased_pairs: Table  # keys (source id << 32 | form id), counts
    tags: np.ndarray
    ngrams: list[Table]  # per order k: keys of k LM word ids (<unk>, <s>, </s>, then the forms), counts
    sentences: int
    target_tokens: int

    def lm_vocab(self) -> list[str]:
        """The LM's words: <unk>, <s>, </s>, then the forms."""
        if not self.order:
            raise RecaserError("no n-grams were counted (order 0)")
        return [UNK, BOS, EOS] + self.forms

    def punctuation(self, min_count: int = 1) -> list[str]:
        """Punctuation tokens followed by a word with a letter at least ``min_count`` times, sorted."""
        return sorted(w for w, c in zip(self.forms, self.punct.tolist()) if c and c >= min_count)


def merge(shards: Iterable[Shard], order: int, scratch: Scratch | None = None, memory: Memory | None = None) -> Counts:
    """Sum shards' counts (``Counter.shard``), taken in the order of their lines: the forms come out in order of
    first appearance in the whole text, as a single pass makes them. Key tables merge through ``scratch`` in
    ``memory`` (default: in memory, unbounded)."""
    scratch = scratch or Scratch(None)
    memory = memory or Memory.unbounded()
    forms, source, tgt_lower, src_lower = (
        Vocab.from_words([]),
        Vocab.from_words([]),
        Vocab.from_words([]),
        Vocab.from_words([]),
    )
    form_count, initial, punct = (np.zeros(0, np.int64) for _ in range(3))
    tags = np.zeros((N_TAGS, N_TAGS), dtype=np.int64)
    sentences = tokens = 0
    pending: list[tuple[Shard, dict[str, list[np.ndarray]]]] = []
    for z in shards:
        if int(z["order"]) != order:
            raise RecaserError(f"shards counted with LM order {int(z['order'])} and {order} cannot be merged")
        t_map = forms.add_all(words_of(z["target.words"]))
        s_map = source.add_all(words_of(z["source.words"]))
        tl_map = tgt_lower.add_all(words_of(z["tgt_lower.words"]))
        sl_map = src_lower.add_all(words_of(z["src_lower.words"]))
        V = len(forms)
        form_count = add_padded(form_count, np.bincount(t_map, weights=z["forms"], minlength=V).astype(np.int64))
        initial = add_padded(initial, np.bincount(t_map, weights=z["initial"], minlength=V).astype(np.int64))
        punct = add_padded(punct, np.bincount(t_map, weights=z["punct"], minlength=V).astype(np.int64))
        tags += z["tags"]
        lm_map = np.concatenate([np.arange(3), t_map + 3])
        maps = {"lower_pairs": [sl_map, tl_map], "cased_pairs": [s_map, t_map]}
        maps.update({f"ngrams{k}": [lm_map] * k for k in range(1, order + 1)})
        pending.append((z, maps))
        sentences += int(z["totals"][0])
        tokens += int(z["totals"][1])
    V = len(forms)
    tables = {name: _merged(name, pending, V + 3, scratch, memory) for name in table_names(order)}
    return Counts(
        order=order,
        forms=list(forms),
        form_count=add_padded(form_count, np.zeros(V, np.int64)),
        initial=add_padded(initial, np.zeros(V, np.int64)),
        punct=add_padded(punct, np.zeros(V, np.int64)),
        source=list(source),
        tgt_lower=list(tgt_lower),
        src_lower=list(src_lower),
        lower_pairs=tables["lower_pairs"],
        cased_pairs=tables["cased_pairs"],
        tags=tags,
        ngrams=[tables[f"ngrams{k}"] for k in range(1, order + 1)],
        sentences=sentences,
        target_tokens=tokens,
    )


def _merged(
    name: str, shards: list[tuple[Shard, dict[str, list[np.ndarray]]]], lm_words: int, scratch: Scratch, memory: Memory
) -> Table:
    """One key table of every shard, renumbered and merged (files of runs made here, and of owned shards' runs,
    removed once merged)."""
    kind = KeyKind.ngrams(int(name[len("ngrams") :]), lm_words) if name.startswith("ngrams") else PAIRS
    views: list[View] = []
    for shard, maps in shards:
        for table in shard.tables[name]:
            views += renumbered(table, kind, maps[name], memory, scratch.stems(name))
    rows = merge_rows(memory, len(views), kind.dtype.itemsize + 8)
    merged = collect(merge_blocks([v.blocks(rows) for v in views]), kind, scratch.stem(name))
    originals = {id(t) for shard, _ in shards for t in shard.tables[name]}
    remove(v.table for v in views if id(v.table) not in originals)
    remove(t for shard, _ in shards if shard.owned for t in shard.tables[name])
    return merged
