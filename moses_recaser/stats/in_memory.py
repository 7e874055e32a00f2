"""Counts of sentences held in memory (word-aligned triples, or target-language sentences): the counter and the
merge that files go through (``counter.Counter``, ``merge.merge``), so that the counts equal those of the same
sentences read from files.
"""

from __future__ import annotations

from collections.abc import Iterable

from moses_recaser.core.memory import Memory, rss
from moses_recaser.core.sentences import chunks
from moses_recaser.core.triples import Triple
from moses_recaser.io.diskarrays import Scratch
from moses_recaser.io.errors import RecaserError
from moses_recaser.stats.counter import CHUNK_LINES, Counter, Links, ReservedToken, must_spill, reserved_at
from moses_recaser.stats.merge import Counts, merge


def counter_of_triples(
    triples: Iterable[Triple],
    order: int,
    memory: Memory | None = None,
    scratch: Scratch | None = None,
    target: str | None = None,
) -> Counter:
    """The counter of word-aligned triples, fed a chunk at a time (a triple without links is an error); its key
    tables spilled to ``scratch`` past ``memory``, as ``counter.count_piece`` spills them. ``target``: the file
    the triples' targets were read from, a triple's id its line there less one (errors name it)."""
    counter = Counter(order)
    base = rss()
    for chunk in chunks(triples, CHUNK_LINES):
        for t in chunk:
            if t.links is None:
                raise RecaserError(f"sentence {t.id} has no word alignment; the tables need word links")
        try:
            counter.add(
                [t.target for t in chunk], [t.source for t in chunk], Links.from_pairs([t.links or [] for t in chunk])
            )
        except ReservedToken as exc:
            raise reserved_at(exc, [t.target for t in chunk], target, lambda i: chunk[i].id + 1) from None
        if memory is not None and scratch is not None and scratch.directory is not None:
            if must_spill(counter, memory, base):
                counter.spill(scratch)
    if memory is not None and scratch is not None and scratch.directory is not None:
        counter.spill(scratch)
    return counter


def count_triples(triples: Iterable[Triple], order: int = 3) -> Counts:
    """The counts of word-aligned triples in memory: the same counter as for files."""
    return merge([counter_of_triples(triples, order).shard()], order)


def count_text(sentences: Iterable[list[str]], order: int = 3, skip_empty: bool = False) -> Counts:
    """The target-side counts of target-language sentences in memory (an empty one counts as ``<s> </s>``,
    as lmplz counts it, unless ``skip_empty``)."""
    counter = Counter(order)
    for chunk in chunks((s for s in sentences if s or not skip_empty), CHUNK_LINES):
        counter.add(chunk)
    return merge([counter.shard()], order)
