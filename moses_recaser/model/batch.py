"""A batch of triples: the (target word, aligned source word) pairs of its sentences, and the collector
paused while a batch is worked on."""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import chain

import numpy as np

from moses_recaser.core.sentences import Layout
from moses_recaser.core.triples import Triple
from moses_recaser.moses.pharaoh import MAX_LINKS


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


def alignment_pairs(triples: Sequence[Triple], layout: Layout, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """Every (target word, aligned source word) pair of the batch as flat indices, ordered by target
    word, then source word: a target word is aligned to every word of its source phrase, or with
    ``mode="links"`` to the words it is linked to when it has links; phrases are used when there
    are no links, and links when there are no phrases. A sentence's phrases, or its links, that make more than
    ``MAX_LINKS`` pairs make none (its words are then unaligned): a line's pairs, and the features over them, stay
    bounded however dense its alignment (a 2,500-word line linked all to all took 2.7 GB)."""
    use_links = [0 < len(t.links or ()) <= MAX_LINKS and (mode != "phrase" or not t.phrases) for t in triples]
    parts_t, parts_s = [], []
    # phrase pairs: every target word of a phrase with every source word of it
    ph = [(s, p) for s, t in enumerate(triples) if _phrase_pairs(t) <= MAX_LINKS for p in t.phrases]
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
        flat = np.fromiter(
            chain.from_iterable(chain.from_iterable(triples[s].links) for s in with_links),  # type: ignore[arg-type]
            dtype=np.int64,
            count=2 * int(counts.sum()),
        ).reshape(-1, 2)
        sents = np.repeat(np.array(with_links, dtype=np.int64), counts)
        parts_t.append(layout.tgt_start[sents] + flat[:, 1])
        parts_s.append(layout.src_start[sents] + flat[:, 0])
    if not parts_t:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    t_all, s_all = np.concatenate(parts_t), np.concatenate(parts_s)
    order = np.lexsort((s_all, t_all))
    return t_all[order], s_all[order]


def _phrase_pairs(t: Triple) -> int:
    return sum((p[1] - p[0] + 1) * (p[3] - p[2] + 1) for p in t.phrases)
