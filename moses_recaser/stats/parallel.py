"""A corpus counted across processes: ``count_corpus`` gives the ``Counts`` of a word-aligned bitext and of
target-language text, in ``jobs`` worker processes.

The files are cut into line blocks (``pieces``), each block is counted in a worker (``counter.count_piece``),
which spills sorted runs to the scratch directory past its share of the memory setting, and the shards are
merged in line order (``merge``), so that the counts do not depend on ``jobs`` and equal a single pass. The
memory is the whole process tree's: a forked worker starts as large as this process (its pages count in its
resident size too), so each of ``jobs`` workers gets what is left after ``jobs + 1`` copies of this process,
divided by ``jobs``. A tqdm bar follows the lines counted: the workers add to a shared counter that a thread of
this process polls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import chain

from moses_recaser.core.memory import Memory, rss
from moses_recaser.core.triples import Triple
from moses_recaser.core.workers import Workers, check_workers
from moses_recaser.io.corpus import pieces
from moses_recaser.io.diskarrays import Scratch
from moses_recaser.stats.counter import Shard, count_piece
from moses_recaser.stats.in_memory import counter_of_triples
from moses_recaser.stats.merge import Counts, merge

log = logging.getLogger(__name__)


def count_corpus(
    bitext: Sequence[str] | None = None,
    mono: Sequence[str] = (),
    order: int = 3,
    jobs: int = 1,
    lines: tuple[int, int] | None = None,
    triples: Iterable[Triple] | None = None,
    scratch: Scratch | None = None,
    quiet: bool = False,
    exclude: Collection[str] = frozenset(),
    memory: Memory | None = None,
    triples_target: str | None = None,
) -> Counts:
    """The counts of a word-aligned bitext (files: source, target, alignment; lines [start, end) of them) or of
    word-aligned ``triples`` in memory, and of target-language text (``mono`` files, empty lines left out),
    counted in ``jobs`` processes; the same counts whatever ``jobs`` and ``memory`` are. Target-language lines in
    ``exclude`` (tokens joined by spaces: the dev reference) are not counted. Runs and the merged tables go to
    ``scratch`` (None: everything in memory), the process tree held within ``memory`` (the whole run's).
    ``triples_target``: the file the triples' targets come from (``in_memory.counter_of_triples``)."""
    check_workers(jobs)
    scratch = scratch or Scratch(None)
    memory = memory or Memory.unbounded()
    parts = (pieces(bitext, jobs, lines) if bitext else []) + [p for m in mono for p in pieces([m], jobs)]
    total = sum(p.lines for p in parts)

    def counted_triples(share: Memory) -> list[Shard]:
        """The counts of the triples in memory, as a shard (none without triples)."""
        return [] if triples is None else [counter_of_triples(triples, order, share, scratch, triples_target).shard()]

    if jobs <= 1 or len(parts) <= 1:
        share = memory.left()
        first = counted_triples(share)
        with _progress(total, quiet) as tick:
            counted = (count_piece(p, order, tick, exclude, share, scratch) for p in parts)
            return merge(chain(first, counted), order, scratch, memory.working())
    import multiprocessing as mp

    first = counted_triples(memory.left())
    share = memory.split(jobs, (jobs + 1) * rss())
    # lines done, one slot per piece: each written by one worker only, so no lock a killed worker could hold
    done = mp.get_context("fork").Array("q", len(parts), lock=False)

    def count(k: int) -> Shard:
        """Count piece k in a worker, its key tables spilled to scratch (so that only the arrays travel back)."""

        def tick(n: int) -> None:
            done[k] += n

        shard = count_piece(parts[k], order, tick, exclude, share, Scratch(scratch.directory, f"w{k}"))
        shard.owned = True
        return shard

    with _progress(total, quiet, done), Workers(jobs, count) as workers:
        shards = list(workers.map(range(len(parts))))
    return merge(chain(first, shards), order, scratch, memory.working())


class _progress:
    """A tqdm bar over lines counted (``done``: a shared counter the workers add to, polled)."""

    def __init__(self, total: int, quiet: bool, done: Sequence[int] | None = None) -> None:
        self.total, self.quiet, self.done = total, quiet or not log.isEnabledFor(logging.INFO), done
        self._stop = threading.Event()

    def __enter__(self) -> Callable[[int], None]:
        from tqdm import tqdm

        self.bar = tqdm(
            total=self.total,
            unit=" lines",
            unit_scale=True,
            desc="counting",
            disable=True if self.quiet else None,
            leave=False,
        )
        if self.done is not None:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self.bar.update

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            self.bar.n = sum(self.done or ())
            self.bar.refresh()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.bar.close()
