"""Recasing a stream: fixed chunks of sentences, optionally spread over worker processes.

The chunks are the same whatever the number of workers, so the output is too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from moses_recaser.core.sentences import chunks
from moses_recaser.core.triples import Triple
from moses_recaser.core.workers import in_order

CHUNK = 512  # sentences per batch; fixed, so output does not depend on how work is spread over processes
T = TypeVar("T")


# a batch of triples -> their recased target tokens (``Recaser``'s, run in this process or in workers)
Batch = Callable[[Sequence[Triple]], list[list[str]]]


def zip_recased(
    items: Iterable[T], recase_batch: Batch, jobs: int = 1, triple_of: Callable[[T], Triple] | None = None
) -> Iterator[tuple[T, list[str]]]:
    """Pairs (item, recased tokens), streaming in fixed chunks; ``triple_of`` picks the triple out of an
    item. ``jobs`` > 1 uses worker processes forked after the model is loaded (they share its pages
    copy-on-write instead of loading it again), with one chunk per worker in flight (bounded memory)."""
    pick: Callable[[T], Triple] = triple_of or (lambda x: x)  # type: ignore[assignment,return-value]
    sent: deque[list[T]] = deque()

    def tasks() -> Iterator[list[Triple]]:
        for chunk in chunks(items, CHUNK):
            sent.append(chunk)
            yield [pick(x) for x in chunk]

    for recased in in_order(jobs, recase_batch, tasks()):
        yield from zip(sent.popleft(), recased)
