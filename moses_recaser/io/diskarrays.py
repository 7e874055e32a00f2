"""Arrays in files, read and written a block at a time: the columns of the statistics' sorted runs, the parts of
key sets built in bounded memory, the members of model archives written without holding them in memory.

- A ``Stored`` array is ``count`` items of a dtype in a file from a byte offset (a raw file, or a member of a
  ``save_npz`` archive, which stores its members uncompressed). It is read with plain reads, never mapped: a
  mapped page that was read counts in the process's resident size until the map goes.
- A ``Column`` is such an array or one in memory; ``read``, ``whole`` and ``blocks_of`` read either.
- A ``Sink`` collects blocks into a column: appended to a file, or kept in memory when it has no path.
- A ``Scratch`` names files in a work directory (None: nothing goes to disk).
"""

from __future__ import annotations

import errno
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Stored:
    """``count`` items of ``dtype`` stored in a file from byte ``offset``."""

    path: str
    dtype: np.dtype
    count: int
    offset: int = 0

    def __len__(self) -> int:
        return self.count

    def read(self, start: int, stop: int) -> np.ndarray:
        """Items [start, stop), read (not mapped) into a new array."""
        stop = min(stop, self.count)
        if stop <= start:
            return np.zeros(0, dtype=self.dtype)
        with open(self.path, "rb") as fh:
            fh.seek(self.offset + start * self.dtype.itemsize)
            out = np.fromfile(fh, dtype=self.dtype, count=stop - start)
        if len(out) != stop - start:
            raise OSError(f"{self.path}: {len(out)} of {stop - start} items read")
        return out


Column = np.ndarray | Stored


def read(column: Column, start: int, stop: int) -> np.ndarray:
    """Items [start, stop) of a column, as an array in memory."""
    if isinstance(column, Stored):
        return column.read(start, stop)
    return column[start:stop]


def whole(column: Column) -> np.ndarray:
    """A column as an array in memory (one in memory as it is)."""
    return column.read(0, len(column)) if isinstance(column, Stored) else column


def blocks_of(column: Column, rows: int) -> Iterator[np.ndarray]:
    """A column ``rows`` items at a time."""
    for start in range(0, len(column), max(rows, 1)):
        yield read(column, start, start + rows)


class Sink:
    """A column collected a block at a time: appended to ``path``, or kept in memory when it is None."""

    def __init__(self, path: str | os.PathLike[str] | None, dtype: np.dtype | type) -> None:
        self.path = None if path is None else os.fspath(path)
        self.dtype = np.dtype(dtype)
        self.count = 0
        self._parts: list[np.ndarray] = []
        self._fh = open(self.path, "wb") if self.path is not None else None  # noqa: SIM115 (closed by done)

    def add(self, block: np.ndarray) -> None:
        block = np.ascontiguousarray(block, dtype=self.dtype)
        self.count += len(block)
        if self._fh is not None:
            try:
                block.tofile(self._fh)
            except OSError as exc:  # numpy's "N requested and M written" (no errno): a full scratch disk, which
                if exc.errno is None:  # the scratch directory's ``work_dir`` says of the directory the user gave
                    raise OSError(errno.ENOSPC, "No space left on device", self.path) from None
                raise
        else:
            self._parts.append(block)

    def done(self) -> Column:
        """The column collected."""
        if self._fh is not None:
            self._fh.close()
            assert self.path is not None
            return Stored(self.path, self.dtype, self.count)
        out = np.concatenate(self._parts) if self._parts else np.zeros(0, dtype=self.dtype)
        self._parts = []
        return out


class Scratch:
    """Numbered file stems in a work directory (None: everything in memory), and the files made there, removed
    with ``remove`` (tables already merged are removed as the merge goes)."""

    def __init__(self, directory: str | os.PathLike[str] | None, prefix: str = "run") -> None:
        self.directory = None if directory is None else Path(directory)
        self.prefix = prefix
        self._count = itertools.count()

    def stem(self, name: str) -> str | None:
        """A new file name ending in ``name`` (None without a directory)."""
        if self.directory is None:
            return None
        return str(self.directory / f"{self.prefix}.{next(self._count)}.{name}")

    def stems(self, name: str) -> Iterator[str | None]:
        while True:
            yield self.stem(name)
