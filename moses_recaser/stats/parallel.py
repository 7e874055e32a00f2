"""A corpus counted across processes: ``count_corpus`` gives the ``Counts`` of a word-aligned bitext and of
target-language text, in ``jobs`` worker processes.

The files are cut into line blocks (``pieces``), each block is counted in a worker (``counter.count_piece``)
into a shard file in a scratch directory, and the shard files are merged in line order (``merge``), so that
the counts do not depend on ``jobs`` and equal a single pass. A tqdm bar follows the lines counted: the
workers add to a shared counter that a thread of this process polls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import chain
from pathlib import Path

from moses_recaser.modeldir import save_npz
from moses_recaser.stats.counter import count_piece
from moses_recaser.stats.in_memory import counter_of_triples
from moses_recaser.stats.merge import Counts, load_shard, merge
from moses_recaser.stats.pieces import Piece, pieces
from moses_recaser.triples import Triple
from moses_recaser.workers import check_workers, worker_signals

log = logging.getLogger(__name__)


def count_corpus(
    bitext: Sequence[str] | None = None,
    mono: Sequence[str] = (),
    order: int = 3,
    jobs: int = 1,
    lines: tuple[int, int] | None = None,
    triples: Iterable[Triple] | None = None,
    work: Path | None = None,
    quiet: bool = False,
    exclude: Collection[str] = frozenset(),
) -> Counts:
    """The counts of a word-aligned bitext (files: source, target, alignment; lines [start, end) of them) or of
    word-aligned ``triples`` in memory, and of target-language text (``mono`` files, empty lines left out),
    counted in ``jobs`` processes; the same counts whatever ``jobs`` is. Target-language lines in ``exclude``
    (tokens joined by spaces: the dev reference) are not counted."""
    check_workers(jobs, "--jobs")
    parts = (pieces(bitext, jobs, lines) if bitext else []) + [p for m in mono for p in pieces([m], jobs)]
    first = [counter_of_triples(triples, order).arrays()] if triples is not None else []
    total = sum(p.lines for p in parts)
    if jobs <= 1 or len(parts) <= 1:
        with _progress(total, quiet) as tick:
            return merge(chain(first, (count_piece(p, order, tick, exclude).arrays() for p in parts)), order)
    import multiprocessing as mp

    from moses_recaser.outputs import work_dir

    ctx = mp.get_context("fork")
    with work_dir("moses-recaser-counts", work) as tmp:
        done = ctx.Value("q", 0)
        with _progress(total, quiet, done), ctx.Pool(jobs, initializer=_init_worker, initargs=(done,)) as pool:
            paths = pool.starmap(
                _count_to_file, [(p, order, f"{tmp}/shard.{i}.npz", exclude) for i, p in enumerate(parts)]
            )
        return merge(chain(first, map(load_shard, paths)), order)


_DONE: dict[str, object] = {}  # in a worker: "value", the shared count of lines done


def _init_worker(done: object) -> None:
    """A worker's start: the pool's signal handling, and the shared count of lines done."""
    worker_signals()
    _DONE["value"] = done


def _count_to_file(piece: Piece, order: int, path: str, exclude: Collection[str]) -> str:
    """Count a piece into a shard file (returned), adding its lines to the shared count as they are done."""
    done = _DONE["value"]

    def tick(n: int) -> None:
        with done.get_lock():  # type: ignore[attr-defined]
            done.value += n  # type: ignore[attr-defined]

    save_npz(path, count_piece(piece, order, tick, exclude).arrays())
    return path


class _progress:
    """A tqdm bar over lines counted (``done``: a shared counter the workers add to, polled)."""

    def __init__(self, total: int, quiet: bool, done: object | None = None) -> None:
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
            self.bar.n = self.done.value  # type: ignore[union-attr]
            self.bar.refresh()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.bar.close()
