"""Sorted tables of counts, in memory or on disk, read in blocks and merged k ways: the external sort of the
statistics, as lmplz sorts its n-grams.

- A ``KeyKind`` turns rows of k word ids into one sortable key: an int64 of k packed fields while they fit
  (n-grams of up to three words of a vocabulary below 2**21; word pairs, 32 bits each), else the ids as big-endian
  int32 bytes (``np.void``), which numpy compares byte by byte. Either way keys sort as their rows do, word by
  word.
- A ``Table`` is distinct keys in ascending order with a count each. Its columns are arrays in memory or
  ``diskarrays.Stored`` arrays in files, read a block at a time.
- ``merge_blocks`` merges sorted block streams into one, summing the counts of equal keys, holding one block
  of each stream; ``sorted_runs`` cuts an unsorted stream (keys renumbered) into sorted tables.

Invariant: every block a ``Table``, ``merge_blocks`` or ``sorted_runs`` yields has strictly increasing keys,
and every key of a later block is larger than every key of an earlier one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from moses_recaser.core.memory import Memory
from moses_recaser.io.diskarrays import Column, Sink, Stored, read
from moses_recaser.io.outputs import remove_files

Block = tuple[np.ndarray, np.ndarray]  # keys, counts


@dataclass(frozen=True)
class KeyKind:
    """How rows of ``width`` word ids become one key: ``bits`` per id in an int64, or (0) big-endian bytes."""

    width: int
    bits: int

    @classmethod
    def ngrams(cls, k: int, vocab_size: int) -> KeyKind:
        """The keys of k-grams over a vocabulary of ``vocab_size`` ids: packed when they fit in 63 bits with at
        least 21 bits an id."""
        bits = 63 // k
        return cls(k, bits if bits >= 21 and vocab_size <= 1 << bits else 0)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int64) if self.bits else np.dtype((np.void, 4 * self.width))

    def pack(self, rows: np.ndarray) -> np.ndarray:
        """Rows (N, width) of ids as keys that sort as the rows do."""
        if self.bits:
            key = np.zeros(len(rows), dtype=np.int64)
            for j in range(self.width):
                key = (key << self.bits) | rows[:, j]
            return key
        return np.ascontiguousarray(rows, dtype=">i4").view(self.dtype).ravel()

    def unpack(self, keys: np.ndarray) -> np.ndarray:
        """The rows (N, width) of keys, as int64."""
        if self.bits:
            mask = (1 << self.bits) - 1
            return np.stack([(keys >> (self.bits * (self.width - 1 - j))) & mask for j in range(self.width)], axis=1)
        return np.ascontiguousarray(keys).view(">i4").reshape(-1, self.width).astype(np.int64)


PAIRS = KeyKind(2, 32)  # a linked word pair: source id << 32 | target id


@dataclass
class Table:
    """Distinct keys of ``kind``, ascending, with their counts."""

    kind: KeyKind
    keys: Column
    counts: Column

    def __len__(self) -> int:
        return len(self.keys)

    def blocks(self, rows: int) -> Iterator[Block]:
        """(keys, counts) ``rows`` at a time; counts as int64."""
        for start in range(0, len(self), max(rows, 1)):
            yield read(self.keys, start, start + rows), read(self.counts, start, start + rows).astype(np.int64)

    def files(self) -> list[str]:
        return [c.path for c in (self.keys, self.counts) if isinstance(c, Stored)]


class TableSink:
    """A table collected a block at a time (blocks in order): files ``stem``.keys and ``stem``.counts, or memory."""

    def __init__(self, kind: KeyKind, stem: str | None, count_dtype: type = np.int64) -> None:
        self.kind = kind
        self.keys = Sink(None if stem is None else stem + ".keys", kind.dtype)
        self.counts = Sink(None if stem is None else stem + ".counts", count_dtype)

    def add(self, keys: np.ndarray, counts: np.ndarray) -> None:
        self.keys.add(keys)
        self.counts.add(counts)

    def done(self) -> Table:
        return Table(self.kind, self.keys.done(), self.counts.done())


def reduce_sorted(keys: np.ndarray, counts: np.ndarray) -> Block:
    """Sorted keys with their counts, equal keys made one (counts summed)."""
    if len(keys) < 2:
        return keys, counts.astype(np.int64)
    first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    if len(first) == len(keys):
        return keys, counts.astype(np.int64)
    return keys[first], np.add.reduceat(counts.astype(np.int64), first)


def sort_block(keys: np.ndarray, counts: np.ndarray) -> Block:
    """Keys in any order (repeats allowed) with their counts: sorted, equal keys made one."""
    order = np.argsort(keys, kind="stable")
    return reduce_sorted(keys[order], counts[order])


def merge_blocks(streams: Sequence[Iterable[Block]]) -> Iterator[Block]:
    """Merge sorted block streams (the invariant of the module docstring) into one, equal keys' counts summed,
    holding one block of each stream at a time."""
    its = [iter(s) for s in streams]
    heads: list[Block | None] = [next(it, None) for it in its]
    while True:
        for k in range(len(heads)):  # empty blocks are skipped
            while heads[k] is not None and not len(heads[k][0]):  # type: ignore[index]
                heads[k] = next(its[k], None)
        live = [k for k, h in enumerate(heads) if h is not None]
        if not live:
            return
        if len(live) == 1:  # the rest of one stream is already merged
            k = live[0]
            h = heads[k]
            assert h is not None
            yield h
            yield from its[k]
            return
        lasts = np.concatenate([heads[k][0][-1:] for k in live])  # type: ignore[index]
        bound = np.sort(lasts)[:1]  # (an array: numpy compares byte-string keys only as arrays)
        parts: list[Block] = []
        for k in live:
            keys, counts = heads[k]  # type: ignore[misc]
            cut = int(np.searchsorted(keys, bound, side="right")[0])
            parts.append((keys[:cut], counts[:cut]))
            heads[k] = (keys[cut:], counts[cut:]) if cut < len(keys) else next(its[k], None)
        keys = np.concatenate([p[0] for p in parts])
        counts = np.concatenate([p[1] for p in parts])
        yield sort_block(keys, counts)


def sorted_runs(blocks: Iterable[Block], kind: KeyKind, stems: Iterator[str | None]) -> list[Table]:
    """Blocks of keys in any order, each sorted into a table of its own (files named by ``stems``)."""
    out = []
    for keys, counts in blocks:
        keys, counts = sort_block(keys, counts)
        sink = TableSink(kind, next(stems), np.int64)
        sink.add(keys, counts)
        out.append(sink.done())
    return out


def collect(blocks: Iterable[Block], kind: KeyKind, stem: str | None) -> Table:
    """Sorted blocks as one table (files at ``stem``, or memory)."""
    sink = TableSink(kind, stem)
    for keys, counts in blocks:
        sink.add(keys, counts)
    return sink.done()


def merge_rows(memory: Memory, streams: int, entry_bytes: int) -> int:
    """Rows a block of each of ``streams`` merged streams may hold: a merge round holds a block of each (and what
    converting it took), and their concatenation, sort order and result, about six times over."""
    return memory.rows(6 * max(streams, 1) * entry_bytes, least=1 << 10)


def remove(tables: Iterable[Table]) -> None:
    """Delete the files of tables no longer needed."""
    remove_files(path for t in tables for path in t.files())


def renumbered_blocks(
    table: Table, kind: KeyKind, rows: int, maps: Sequence[np.ndarray] | None = None
) -> Iterator[Block]:
    """The table's blocks with keys of ``kind``, column j's ids renumbered by ``maps[j]`` (maps that keep the
    order of ids, so that the blocks stay sorted)."""
    for keys, counts in table.blocks(rows):
        if maps is None and table.kind == kind:
            yield keys, counts
            continue
        cols = table.kind.unpack(keys)
        if maps is not None:
            cols = np.stack([m[cols[:, j]] for j, m in enumerate(maps)], axis=1)
        yield kind.pack(cols), counts


def keeps_order(maps: Sequence[np.ndarray]) -> bool:
    """Whether renumbering by ``maps`` keeps the order of every column's ids (each map increasing)."""
    return all(len(m) < 2 or bool((m[1:] > m[:-1]).all()) for m in maps)


@dataclass
class View:
    """A sorted table read as keys of ``kind``, column j's ids renumbered by ``maps[j]`` (order-keeping maps; None:
    as they are)."""

    table: Table
    kind: KeyKind
    maps: Sequence[np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.table)

    def blocks(self, rows: int) -> Iterator[Block]:
        return renumbered_blocks(self.table, self.kind, rows, self.maps)


def renumbered(
    table: Table, kind: KeyKind, maps: Sequence[np.ndarray], memory: Memory, stems: Iterator[str | None]
) -> list[View]:
    """The table with its ids renumbered by ``maps``, as sorted views: itself, converted as it is read, when the
    maps keep the order of ids; else new sorted runs of as many rows as ``memory`` sorts at once."""
    if keeps_order(maps):
        same = all(bool((m == np.arange(len(m))).all()) for m in maps)
        return [View(table, kind, None if same else maps)]
    rows = memory.rows(10 * (kind.dtype.itemsize + 8) + 48 * kind.width)  # the block, its rows, their sort
    blocks = (
        (kind.pack(np.stack([m[cols[:, j]] for j, m in enumerate(maps)], axis=1)), counts)
        for cols, counts in ((table.kind.unpack(k), c) for k, c in table.blocks(rows))
    )
    return [View(t, kind) for t in sorted_runs(blocks, kind, stems)]
