"""Counts kept as numpy arrays keyed by integers: the form of every count the statistics make.

``KeyCounts`` sums counts of int64 keys (or fixed-width byte-string keys) added a chunk at a time;
``pack``/``unpack`` turn rows of small ids into one int64 key and back; ``GramCounts`` counts n-grams (rows of k
word ids) on top of them. ``add_padded`` sums per-id count arrays of a vocabulary that grew between them (ids
keep their numbers, new ones come last).
"""

from __future__ import annotations

import numpy as np

_COMPACT_AT = 1 << 23  # pending keys that always trigger a compaction (with twice the compacted ones)


class KeyCounts:
    """Counts of int64 keys, added a chunk at a time; compacted (sorted, summed) when the pending chunks
    outgrow the compacted ones, so memory stays within a small multiple of the distinct keys."""

    def __init__(self) -> None:
        self.keys: np.ndarray | None = None
        self.counts = np.zeros(0, dtype=np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._size = 0

    def add(self, keys: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Keys (int64, or np.void byte strings of one width) and their counts (default: 1 each)."""
        if not len(keys):
            return
        if counts is None:
            keys, counts = np.unique(keys, return_counts=True)
        self._pending.append((keys, counts.astype(np.int64)))
        self._size += len(keys)
        if self._size > max(_COMPACT_AT, 2 * len(self.counts)):
            self.compact()

    def compact(self) -> tuple[np.ndarray, np.ndarray]:
        """The sorted distinct keys and their summed counts."""
        if self.keys is None:
            self.keys = self._pending[0][0][:0] if self._pending else np.zeros(0, dtype=np.int64)
        if self._pending:
            keys = np.concatenate([self.keys] + [k for k, _ in self._pending])
            counts = np.concatenate([self.counts] + [c for _, c in self._pending])
            self._pending, self._size = [], 0
            self.keys, inverse = np.unique(keys, return_inverse=True)
            self.counts = np.bincount(inverse, weights=counts, minlength=len(self.keys)).astype(np.int64)
        return self.keys, self.counts


def pack(cols: np.ndarray, bits: int) -> np.ndarray:
    """Rows of small non-negative integers (N, k), k * bits <= 63, as one int64 key each."""
    key = np.zeros(len(cols), dtype=np.int64)
    for j in range(cols.shape[1]):
        key = (key << bits) | cols[:, j]
    return key


def unpack(keys: np.ndarray, k: int, bits: int) -> np.ndarray:
    """The rows (N, k) that ``pack(rows, bits)`` made the keys of."""
    mask = (1 << bits) - 1
    return np.stack([(keys >> (bits * (k - 1 - j))) & mask for j in range(k)], axis=1)


class GramCounts:
    """Counts of n-grams (rows of k word ids). Up to trigrams of ids below 2**21 a row is one int64 key (fast
    to sort); beyond, the row's int32 ids as a byte string (np.void) key."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.bits = 63 // k if 63 // k >= 21 else 0  # 0: byte-string keys
        self.counts = KeyCounts()

    def add(self, rows: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Rows of ids and their counts (default: 1 each); an id too wide for packed keys re-keys every count."""
        if self.bits and len(rows) and int(rows.max()) >= 1 << self.bits:
            keys, old = self.counts.compact()
            self.counts = KeyCounts()
            self.bits = 0
            self.counts.add(self._key(unpack(keys, self.k, 63 // self.k)), old)
        self.counts.add(self._key(rows), counts)

    def _key(self, rows: np.ndarray) -> np.ndarray:
        if self.bits:
            return pack(rows, self.bits)
        return np.ascontiguousarray(rows, dtype=np.int32).view(np.dtype((np.void, 4 * self.k))).ravel()

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct rows (N, k) and their counts."""
        keys, counts = self.counts.compact()
        if self.bits:
            return unpack(keys, self.k, self.bits), counts
        return keys.view(np.int32).reshape(-1, self.k).astype(np.int64), counts


def add_padded(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b for arrays of different lengths (the shorter is padded with 0), as a new array."""
    if len(a) < len(b):
        a, b = b, a
    out = a.copy()
    out[: len(b)] += b
    return out
