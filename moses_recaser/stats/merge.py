"""Shard count files (``Counter.arrays``) and their merge into the counts of the whole corpus (``Counts``).

Shards are summed in the order of their lines, each shard's word ids mapped onto vocabularies numbered in
order of first appearance across the shards (``vocab.Vocab.add_all``), so that the forms, and the LM's word
ids, come out as a single pass over the whole text makes them, whatever the number of shards. Every count
stays in numpy arrays keyed by integers (``keycounts``).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from moses_recaser.errors import RecaserError
from moses_recaser.modeldir import words_of
from moses_recaser.stats.counter import FORMAT, N_TAGS
from moses_recaser.stats.keycounts import GramCounts, KeyCounts, add_padded
from moses_recaser.stats.kneser_ney import BOS, EOS, UNK, NGramCounts
from moses_recaser.vocab import Vocab


@dataclass
class Counts:
    """The merged counts: vocabularies (target forms in order of first appearance, as the LM's), and arrays
    keyed by their ids."""

    order: int
    forms: list[str]
    form_count: np.ndarray
    initial: np.ndarray
    punct: np.ndarray
    source: list[str]
    tgt_lower: list[str]
    src_lower: list[str]
    lower_pairs: tuple[np.ndarray, np.ndarray]  # keys (source lowercase id << 32 | target lowercase id), counts
    cased_pairs: tuple[np.ndarray, np.ndarray]  # keys (source id << 32 | form id), counts
    tags: np.ndarray
    ngrams: list[tuple[np.ndarray, np.ndarray]]  # per order: (N, k) LM word ids (<unk>, <s>, </s>, forms), counts
    sentences: int
    target_tokens: int

    def ngram_counts(self) -> NGramCounts:
        """The LM's n-gram counts (vocabulary: <unk>, <s>, </s>, then the forms)."""
        if not self.order:
            raise RecaserError("no n-grams were counted (order 0)")
        return NGramCounts.from_rows([UNK, BOS, EOS] + self.forms, self.ngrams, self.order)

    def punctuation(self, min_count: int = 1) -> list[str]:
        """Punctuation tokens followed by a word with a letter at least ``min_count`` times, sorted."""
        return sorted(w for w, c in zip(self.forms, self.punct.tolist()) if c and c >= min_count)


def load_shard(path: str) -> dict[str, np.ndarray]:
    """A shard count file's arrays (``Counter.arrays``)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            shard = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise RecaserError(f"not a shard count file ({exc})", path) from None
    if int(shard.get("format", -1)) != FORMAT:
        raise RecaserError("a shard count file of another format (count it again with this moses-recaser)", path)
    return shard


def merge(shards: Iterable[dict[str, np.ndarray]], order: int) -> Counts:
    """Sum shards' counts (``Counter.arrays``), taken in the order of their lines: the forms come out in order of
    first appearance in the whole text, as a single pass makes them."""
    forms, source, tgt_lower, src_lower = Vocab.of([]), Vocab.of([]), Vocab.of([]), Vocab.of([])
    form_count, initial, punct = (np.zeros(0, np.int64) for _ in range(3))
    tags = np.zeros((N_TAGS, N_TAGS), dtype=np.int64)
    lower, cased = KeyCounts(), KeyCounts()
    grams = [GramCounts(k) for k in range(1, order + 1)]
    sentences = tokens = 0
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
        for kc, name, a, b in ((lower, "lower_pairs", sl_map, tl_map), (cased, "cased_pairs", s_map, t_map)):
            keys = z[f"{name}.keys"]
            kc.add((a[keys >> 32] << 32) | b[keys & 0xFFFFFFFF], z[f"{name}.counts"])
        lm_map = np.concatenate([np.arange(3), t_map + 3])
        for k in range(1, order + 1):
            grams[k - 1].add(lm_map[z[f"ngrams{k}.rows"]], z[f"ngrams{k}.counts"])
        sentences += int(z["totals"][0])
        tokens += int(z["totals"][1])
    V = len(forms)
    ngrams = [g.rows() for g in grams]
    return Counts(
        order=order,
        forms=list(forms),
        form_count=add_padded(form_count, np.zeros(V, np.int64)),
        initial=add_padded(initial, np.zeros(V, np.int64)),
        punct=add_padded(punct, np.zeros(V, np.int64)),
        source=list(source),
        tgt_lower=list(tgt_lower),
        src_lower=list(src_lower),
        lower_pairs=lower.compact(),
        cased_pairs=cased.compact(),
        tags=tags,
        ngrams=ngrams,
        sentences=sentences,
        target_tokens=tokens,
    )
