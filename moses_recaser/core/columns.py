"""Named numpy columns that grow as new rows arrive, and word types numbered with their columns.

Recasing and counting meet each word type many times; its facts are worked out once, when the type is first met,
and kept as numpy columns, so that a batch's words become type numbers in one pass and their facts
are gathers. New rows arrive as named columns (a mapping from column name to one value per row), so
a fact is named where it is computed and where it is read, never matched up by position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import Field, field, fields
from itertools import chain
from typing import Any

import numpy as np

from moses_recaser.core.vocab import Vocab
from moses_recaser.io.diskarrays import Column, Scratch, Sink

Spec = Sequence[tuple[str, type]]
FLUSH_ROWS = 1 << 14  # rows that wait as Python objects before they go into the arrays
NewRows = Mapping[str, Iterable[Any]]
# full arrays grow by 1/GROWTH of their size: a registry of every training type ends up to that share too large
GROWTH = 4


def column(dtype: type) -> Any:
    """A dataclass field holding one numpy column of ``dtype`` (see ``spec``)."""
    return field(metadata={"dtype": dtype})


def spec(record: type) -> list[tuple[str, type]]:
    """(name, dtype) of every ``column`` field of a dataclass, in order."""
    out = []
    for f in fields(record):
        assert isinstance(f, Field) and "dtype" in f.metadata, f"{record.__name__}.{f.name} is not a column"
        out.append((f.name, f.metadata["dtype"]))
    return out


class Columns:
    """Named numpy columns grown by rows: new rows wait until read, and the arrays grow by a share of their
    capacity when full, so growing a registry chunk by chunk copies it O(log n) times, not once a chunk.
    Columns that only grow until they are stored can be kept in files instead (``spill``): they are then
    written, not read."""

    def __init__(self, columns: Spec) -> None:
        self.spec = list(columns)
        self.n = 0
        self._waiting = 0
        self._pending: list[dict[str, list[Any]]] = []
        self._data: dict[str, np.ndarray] = {name: np.zeros(0, dtype=dtype) for name, dtype in self.spec}
        self._sinks: dict[str, Sink] | None = None  # spilled: each column's file
        self._stored: dict[str, Column] | None = None  # spilled and done (``stored``)

    def add(self, rows: NewRows) -> None:
        """Append rows, given as one sequence of values per column (every column, equal lengths); past
        FLUSH_ROWS rows waiting, they are moved into the arrays (as Python objects they take ten times more)."""
        block = {name: list(rows[name]) for name, _ in self.spec}
        if len({len(v) for v in block.values()}) > 1:
            raise ValueError(f"columns of unequal lengths: { {k: len(v) for k, v in block.items()} }")
        self._pending.append(block)
        self._waiting += len(next(iter(block.values()), []))
        if self._waiting >= FLUSH_ROWS:
            self._flush()

    def __getitem__(self, name: str) -> np.ndarray:
        if self._sinks is not None:
            raise ValueError("columns spilled to files are stored, not read (Columns.stored)")
        if self._pending:
            self._flush()
        return self._data[name][: self.n]

    def spill(self, scratch: Scratch) -> None:
        """Keep the rows in files of ``scratch`` from now on (a ``Sink`` a column), the rows so far first: memory
        no longer grows with the rows, and the columns can only be added to and then ``stored``."""
        rows = {name: self[name] for name, _ in self.spec}
        self._sinks = {name: Sink(scratch.stem(name), dtype) for name, dtype in self.spec}
        for name, sink in self._sinks.items():
            sink.add(rows[name])
        self._data = {name: np.zeros(0, dtype=dtype) for name, dtype in self.spec}

    def stored(self) -> dict[str, Column]:
        """Every column, to store: the arrays, or once spilled the files (after which no row can be added)."""
        if self._sinks is None:
            return {name: self[name] for name, _ in self.spec}
        if self._pending or self._stored is None:
            self._flush()
        if self._stored is None:
            self._stored = {name: sink.done() for name, sink in self._sinks.items()}
        return self._stored

    def take(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Replace the contents with ``arrays`` (one per column, equal lengths)."""
        self._data = {name: np.asarray(arrays[name]) for name, _ in self.spec}
        self.n = len(next(iter(self._data.values()))) if self._data else 0
        self._pending = []

    def _flush(self) -> None:
        pending, self._pending, self._waiting = self._pending, [], 0
        end = self.n + sum(len(next(iter(b.values()), [])) for b in pending)
        if self._sinks is not None:
            if self._stored is not None and pending:
                raise ValueError("rows added to columns already stored")
            for name, dtype in self.spec:
                self._sinks[name].add(np.fromiter(chain.from_iterable(b[name] for b in pending), dtype, end - self.n))
            self.n = end
            return
        for name, dtype in self.spec:
            col = self._data[name]
            if end > len(col):
                grown: np.ndarray = np.zeros(max(end, len(col) + len(col) // GROWTH), dtype=dtype)
                grown[: self.n] = col[: self.n]
                self._data[name] = col = grown
            col[self.n : end] = np.fromiter(chain.from_iterable(b[name] for b in pending), dtype, end - self.n)
        self.n = end


class WordTypes:
    """Word type -> number (a ``Vocab``: the one numbering of words), with per-type facts as numpy columns
    (``describe`` gives the new rows of a list of types, once, when they are first met). Invariant: the columns
    have one row per numbered type."""

    def __init__(self, columns: Spec, describe: Callable[[list[str]], NewRows]) -> None:
        self.columns = list(columns)
        self.describe = describe
        self.ids = Vocab.from_words([])
        self._cols = Columns(columns)

    def __len__(self) -> int:
        return len(self.ids)

    def numbers(self, words: list[str]) -> np.ndarray:
        """The type number of every word (new types are numbered, and described together, in order of first
        occurrence)."""
        start = len(self.ids)
        out = self.ids.add_all(words)
        if len(self.ids) > start:
            self._cols.add(self.describe(self.ids.words_from(start)))
        return out

    def arrays(self, prefix: str) -> dict[str, Column]:
        """Every type and column (files, once spilled), for ``restore``."""
        return {**self.ids.arrays(f"{prefix}.words"), **{f"{prefix}.{c}": v for c, v in self._cols.stored().items()}}

    def spill(self, scratch: Scratch) -> None:
        """The columns kept in files of ``scratch`` from now on (``Columns.spill``): types can be added, then
        stored (``arrays``), not read."""
        self._cols.spill(scratch)

    def restore(self, z: Mapping[str, np.ndarray], prefix: str) -> None:
        """Take the types of ``arrays`` (into an empty registry)."""
        self.ids = Vocab.load(z, f"{prefix}.words")
        self._cols.take({c: z[f"{prefix}.{c}"] for c, _ in self.columns})

    def __getitem__(self, name: str) -> np.ndarray:
        return self._cols[name]
