"""Sets of distinct int64 keys packed for lookups a numpy round at a time: the n-gram keys of the LM
(``stats.arpa_arrays``), the word-pair keys of the translation tables (``stats.tables``) and the string hashes of
vocabularies (``vocab``).

A key k (0 <= k < 2^K, K the bit length of the largest key) is first mixed by a bijection of [0, 2^K),
m = k * ODD mod 2^K, so that keys which share their leading words spread evenly. The set is kept in the order of
m: the top B bits of m choose a bucket (``starts``: where each bucket begins), and only the low L = K - B bits
are stored (``low``, in the narrowest unsigned type that holds them). B is chosen for the smallest arrays with at
most 4 keys a bucket on average, so a lookup reads one bucket start and a few low parts.

Why packed, not a hash table over int64 keys: recasing a test set reads nearly every page of a large model's
key arrays, so their size is its memory. 18M trigram keys took 265 MiB as int64 keys with int32 hash slots;
packed they take 133 MiB.

A key's position is its place in the set's own order, so an owner keeps its per-key arrays in that order
(``pack`` returns the permutation). The mixing is invertible, so ``keys`` gives the keys back.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

_ODD = 0x9E3779B97F4A7C15  # odd: multiplying by it permutes [0, 2^K) for every K
_INVERSE = pow(_ODD, -1, 1 << 64)
MAX_MEAN_BUCKET = 4


def _low_dtype(bits: int) -> np.dtype:
    for dt in (np.uint8, np.uint16, np.uint32):
        if bits <= np.iinfo(dt).bits:
            return np.dtype(dt)
    return np.dtype(np.uint64)


def _bucket_bits(n: int, key_bits: int) -> int:
    """The B giving the smallest ``starts`` + ``low`` with at most MAX_MEAN_BUCKET keys a bucket on average."""
    start_bytes = 4 if n < 1 << 32 else 8
    least = max((n - 1) // MAX_MEAN_BUCKET, 0).bit_length()
    options = range(min(least, key_bits), key_bits + 1)
    return min(options, key=lambda b: (start_bytes * ((1 << b) + 1) + n * _low_dtype(key_bits - b).itemsize, b))


class KeySet:
    """Distinct int64 keys (>= 0), each at a fixed position; ``find`` answers for arrays of queries."""

    def __init__(self, starts: np.ndarray, low: np.ndarray, key_bits: int) -> None:
        self.starts = starts
        self.low = low
        self.key_bits = key_bits
        self.bucket_bits = max(len(starts) - 1, 1).bit_length() - 1
        self.low_bits = key_bits - self.bucket_bits
        self._mask = (1 << key_bits) - 1
        self._low_mask = (1 << self.low_bits) - 1

    @classmethod
    def pack(cls, keys: np.ndarray) -> tuple[KeySet, np.ndarray]:
        """The set of ``keys`` (distinct, >= 0) and the permutation ``order``: position i holds keys[order[i]]."""
        keys = np.asarray(keys, dtype=np.int64)
        n = len(keys)
        key_bits = max(int(keys.max()).bit_length(), 1) if n else 1
        b = _bucket_bits(n, key_bits)
        mixed = (keys.astype(np.uint64) * np.uint64(_ODD)) & np.uint64((1 << key_bits) - 1)
        order = np.argsort(mixed, kind="stable")
        mixed = mixed[order]
        if n > 1 and (mixed[1:] == mixed[:-1]).any():
            raise ValueError("KeySet.pack: keys are not distinct")
        low_bits = key_bits - b
        buckets = (mixed >> np.uint64(low_bits)).astype(np.int64)
        starts = np.zeros((1 << b) + 1, dtype=np.uint32 if n < 1 << 32 else np.int64)
        np.cumsum(np.bincount(buckets, minlength=1 << b), out=starts[1:])
        low = (mixed & np.uint64((1 << low_bits) - 1)).astype(_low_dtype(low_bits))
        return cls(starts, low, key_bits), order

    def __len__(self) -> int:
        return len(self.low)

    def keys(self) -> np.ndarray:
        """Every key, in position order."""
        starts = self.starts.astype(np.int64)
        sizes = starts[1:] - starts[:-1]
        buckets = np.repeat(np.arange(len(sizes), dtype=np.uint64), sizes)
        mixed = (buckets << np.uint64(self.low_bits)) | self.low.astype(np.uint64)
        return ((mixed * np.uint64(_INVERSE)) & np.uint64(self._mask)).astype(np.int64)

    def _split(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each query: within range (< 2^K, >= 0), its bucket and its low part."""
        q = np.asarray(query, dtype=np.int64)
        ok = (q >= 0) & ((q >> self.key_bits) == 0)
        mixed = (q.astype(np.uint64) * np.uint64(_ODD)) & np.uint64(self._mask)
        return ok, (mixed >> np.uint64(self.low_bits)).astype(np.int64), mixed & np.uint64(self._low_mask)

    def find(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position, found) of each query key; position 0 where not found."""
        pos = np.zeros(len(query), dtype=np.int64)
        found = np.zeros(len(query), dtype=bool)
        if not len(self.low) or not len(query):
            return pos, found
        ok, bucket, low = self._split(query)
        at = np.where(ok, self.starts[bucket], 0).astype(np.int64)
        end = np.where(ok, self.starts[bucket + 1], 0).astype(np.int64)
        todo = np.flatnonzero(at < end)
        at, end, low = at[todo], end[todo], low[todo]
        while len(todo):  # a bucket's low parts are sorted: stop at the first that is not smaller
            stored = self.low[at].astype(np.uint64)
            hit = stored == low
            pos[todo[hit]] = at[hit]
            found[todo[hit]] = True
            more = (stored < low) & (at + 1 < end)
            todo, at, end, low = todo[more], at[more] + 1, end[more], low[more]
        return pos, found

    def find_one(self, key: int) -> int:
        """The position of one key (-1: absent): ``find`` in Python, without numpy's per-call cost."""
        if not len(self.low) or key < 0 or key >> self.key_bits:
            return -1
        mixed = (key * _ODD) & self._mask
        low, bucket = mixed & self._low_mask, mixed >> self.low_bits
        for at in range(int(self.starts[bucket]), int(self.starts[bucket + 1])):
            stored = int(self.low[at])
            if stored >= low:
                return at if stored == low else -1
        return -1

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The stored form, for ``load``."""
        return {f"{prefix}.starts": self.starts, f"{prefix}.low": self.low, f"{prefix}.bits": np.array(self.key_bits)}

    @classmethod
    def load(cls, z: Mapping[str, np.ndarray], prefix: str) -> KeySet:
        """A stored key set, checked to fit itself (a damaged model is a ValueError)."""
        starts, low, bits = z[f"{prefix}.starts"], z[f"{prefix}.low"], int(z[f"{prefix}.bits"])
        if (
            starts.ndim != 1
            or low.ndim != 1
            or starts.dtype.kind not in "iu"
            or low.dtype.kind not in "iu"
            or len(starts) < 2
            or int(starts[-1]) != len(low)
            or not 1 <= bits <= 63
        ):
            raise ValueError(f"{prefix}: the key set's arrays do not fit each other")
        return cls(starts, low, bits)
