"""Counts kept as sorted arrays keyed by integers, added a chunk at a time and spilled to disk past a share of
memory: the form of every count the statistics make.

``KeyCounts`` counts keys of one ``runs.KeyKind`` (rows of word ids as one sortable key): each chunk's distinct
keys, sorted, with their counts, are a piece held in memory; many pieces are merged into one (``compact``),
and ``spill`` writes what is held as one sorted run (a ``runs.Table`` in files), as lmplz writes its sorted
blocks. ``tables`` gives the runs and what is still held: merged (``runs.merge_blocks``) they are the exact
counts. A key too wide for the packed kind switches the counts to byte-string keys (runs already written keep
their kind; readers convert, the order being the same). ``add_padded`` sums per-id count arrays of a
vocabulary that grew between them (ids keep their numbers, new ones come last).

Invariant: ``held`` is the bytes of the pieces in memory; the runs and the pieces together count every key
added once.
"""

from __future__ import annotations

import numpy as np

from moses_recaser.io.diskarrays import Scratch
from moses_recaser.stats.runs import Block, KeyKind, Table, TableSink, collect, merge_blocks, sort_block

COMPACT_PIECES = 8  # pieces held before they are merged into one
MERGE_ROWS = 1 << 18  # rows of each piece a merge round takes


class KeyCounts:
    """Counts of keys of one kind, a chunk at a time (see the module docstring)."""

    def __init__(self, kind: KeyKind) -> None:
        self.kind = kind
        self.pieces: list[Block] = []
        self.runs: list[Table] = []
        self.held = 0

    def add_rows(self, rows: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Rows (N, width) of ids and their counts (default: 1 each)."""
        if not len(rows):
            return
        if self.kind.bits and int(rows.max()) >> self.kind.bits:
            self._widen()
        self.add(self.kind.pack(rows), counts)

    def add(self, keys: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Keys of this kind, in any order, and their counts (default: 1 each)."""
        if not len(keys):
            return
        if counts is None:
            keys, counts = np.unique(keys, return_counts=True)
        else:
            keys, counts = sort_block(keys, counts)
        self.pieces.append((keys, counts.astype(np.int64)))
        self.held += keys.nbytes + 8 * len(keys)
        if len(self.pieces) >= COMPACT_PIECES:
            self.compact()

    def _widen(self) -> None:
        """Switch to byte-string keys (ids past the packed width)."""
        wide = KeyKind(self.kind.width, 0)
        self.pieces = [(wide.pack(self.kind.unpack(k)), c) for k, c in self.pieces]
        self.held = sum(k.nbytes + 8 * len(k) for k, _ in self.pieces)
        self.kind = wide

    def _merged(self) -> Block:
        table = collect(
            merge_blocks([Table(self.kind, k, c).blocks(MERGE_ROWS) for k, c in self.pieces]), self.kind, None
        )
        return table.keys, table.counts  # type: ignore[return-value]

    def compact(self) -> None:
        """Merge the pieces held into one."""
        if len(self.pieces) > 1:
            merged = self._merged()
            self.pieces = [merged]
            self.held = merged[0].nbytes + 8 * len(merged[0])

    def spill(self, scratch: Scratch, name: str) -> None:
        """Write what is held as one sorted run (files named by ``scratch``), and hold nothing."""
        if not self.pieces:
            return
        sink = TableSink(self.kind, scratch.stem(name), _count_dtype(self.pieces))
        for keys, counts in merge_blocks([Table(self.kind, k, c).blocks(MERGE_ROWS) for k, c in self.pieces]):
            sink.add(keys, counts)
        self.pieces, self.held = [], 0
        self.runs.append(sink.done())

    def tables(self) -> list[Table]:
        """The runs, then what is held (merged, in memory): sorted tables whose merge is the counts."""
        out = list(self.runs)
        if self.pieces:
            keys, counts = self._merged()
            out.append(Table(self.kind, keys, counts))
        return out


def _count_dtype(pieces: list[Block]) -> type:
    """int32 when the counts held (summed) cannot pass it, else int64: runs take less disk."""
    total = sum(int(c.sum()) for _, c in pieces)
    return np.int32 if total < 1 << 31 else np.int64


def add_padded(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b for arrays of different lengths (the shorter is padded with 0), as a new array."""
    if len(a) < len(b):
        a, b = b, a
    out = a.copy()
    out[: len(b)] += b
    return out
