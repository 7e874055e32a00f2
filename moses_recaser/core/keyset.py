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

``pack_blocks`` builds a set of keys that arrive a block at a time, with arrays of their own (payloads) put in
the set's order, in bounded memory: the mixed keys and payloads are cut by their top bits into parts that fit
in memory (written to scratch files), and the parts, each a range of whole buckets, are sorted one at a time.
The set equals ``pack``'s of the same keys, whatever the memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from moses_recaser.io.outputs import remove_files

if TYPE_CHECKING:
    from moses_recaser.core.memory import Memory
    from moses_recaser.io.diskarrays import Column, Scratch, Sink

_ODD = 0x9E3779B97F4A7C15  # odd: multiplying by it permutes [0, 2^K) for every K
_INVERSE = pow(_ODD, -1, 1 << 64)
MAX_MEAN_BUCKET = 4
# queries left in a lookup that are probed one by one in Python: a numpy round costs what 20-30 such probes do
FEW = 32


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
        from moses_recaser.core.memory import Memory
        from moses_recaser.io.diskarrays import Scratch, Sink, whole

        keys = np.asarray(keys, dtype=np.int64)
        n = len(keys)
        packed = pack_blocks(
            lambda: [(keys, [np.arange(n)])],
            n,
            int(keys.max()) if n else 0,
            [Sink(None, np.int64)],
            Memory.unbounded(),
            Scratch(None),
        )
        return cls(packed.starts, whole(packed.low), packed.key_bits), whole(packed.payloads[0])

    def __len__(self) -> int:
        return len(self.low)

    def keys(self) -> np.ndarray:
        """Every key, in position order."""
        starts = self.starts.astype(np.int64)
        sizes = starts[1:] - starts[:-1]
        buckets = np.repeat(np.arange(len(sizes), dtype=np.uint64), sizes)
        mixed = (buckets << np.uint64(self.low_bits)) | self.low.astype(np.uint64)
        return ((mixed * np.uint64(_INVERSE)) & np.uint64(self._mask)).astype(np.int64)

    def keys_at(self, start: int, stop: int) -> np.ndarray:
        """The keys at positions [start, stop) (``keys`` a block at a time)."""
        pos = np.arange(start, min(stop, len(self.low)))
        buckets = (np.searchsorted(self.starts, pos, side="right") - 1).astype(np.uint64)
        mixed = (buckets << np.uint64(self.low_bits)) | self.low[start : start + len(pos)].astype(np.uint64)
        return ((mixed * np.uint64(_INVERSE)) & np.uint64(self._mask)).astype(np.int64)

    def subset(self, keep: Callable[[np.ndarray], np.ndarray], block: int = 1 << 20) -> tuple[KeySet, np.ndarray]:
        """The set of the keys ``keep`` (keys -> mask) keeps, read a block at a time (the pages of a mapped set
        read dropped after each, ``modeldir.release_mapped``), and the position here of each of its keys."""
        from moses_recaser.io.modeldir import release_mapped

        keys, where = [], []
        for start in range(0, len(self), block):
            got = self.keys_at(start, start + block)
            mask = keep(got)
            keys.append(got[mask])
            where.append(np.flatnonzero(mask) + start)
            release_mapped()
        kept = np.concatenate(keys) if keys else np.zeros(0, dtype=np.int64)
        subset, order = KeySet.pack(kept)
        return subset, (np.concatenate(where) if where else np.zeros(0, dtype=np.int64))[order]

    def find(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position, found) of each query key; position 0 where not found."""
        pos = np.full(len(query), -1, dtype=np.int64)
        if len(self.low) and len(query):
            q = np.asarray(query, dtype=np.int64)
            ok = (q >= 0) & ((q >> self.key_bits) == 0)
            mixed = (q.astype(np.uint64) * np.uint64(_ODD)) & np.uint64(self._mask)
            bucket = (mixed >> np.uint64(self.low_bits)).astype(np.int64)
            at = np.where(ok, self.starts[bucket], 0).astype(np.int64)
            last = np.where(ok, self.starts[bucket + 1], 0).astype(np.int64) - 1
            todo = (at <= last).nonzero()[0]  # (not np.flatnonzero: its wrappers cost more than a small round)
            # the low parts in the stored type: no conversion of what is read, round after round
            at, last, low = at[todo], last[todo], (mixed[todo] & np.uint64(self._low_mask)).astype(self.low.dtype)
            while len(todo):  # a bucket's low parts are sorted: stop at the first that is not smaller
                if len(todo) <= FEW:  # the last few (or a small query's all) probed in Python, not by rounds
                    for k, a, z, x in zip(todo.tolist(), at.tolist(), last.tolist(), low.tolist()):
                        for j, v in enumerate(self.low[a : z + 1].tolist()):
                            if v >= x:
                                if v == x:
                                    pos[k] = a + j
                                break
                    break
                stored = self.low[at]
                hit = (stored == low).nonzero()[0]
                pos[todo[hit]] = at[hit]
                more = ((stored < low) & (at < last)).nonzero()[0]
                todo, at, last, low = todo[more], at[more] + 1, last[more], low[more]
            if not self.low.flags.owndata:  # a mapped set: a round of lookups maps nearly all of it (the kernel
                # maps a page cache folio of up to 2 MiB per fault), so its pages are dropped until the next round
                from moses_recaser.io.modeldir import trim_mapped

                trim_mapped()
        found = pos >= 0
        pos[~found] = 0
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
        """A stored key set (``arrays``)."""
        starts, low, bits = z[f"{prefix}.starts"], z[f"{prefix}.low"], int(z[f"{prefix}.bits"])
        return cls(starts, low, bits)


@dataclass
class Packed:
    """A key set built by ``pack_blocks``: bucket starts, low parts (in memory or a file) and the payloads in the
    set's order."""

    starts: np.ndarray
    low: Column
    key_bits: int
    payloads: list[Column]

    def arrays(self, prefix: str) -> dict[str, np.ndarray | Column]:
        """The stored form (as ``KeySet.arrays``), for ``save_npz``."""
        return {f"{prefix}.starts": self.starts, f"{prefix}.low": self.low, f"{prefix}.bits": np.array(self.key_bits)}


Blocks = Callable[[], Iterable[tuple[np.ndarray, Sequence[np.ndarray]]]]


def pack_blocks(
    blocks: Blocks, n: int, max_key: int, sinks: Sequence[Sink], memory: Memory, scratch: Scratch
) -> Packed:
    """The key set of ``n`` distinct keys (>= 0, at most ``max_key``) that ``blocks()`` gives a block at a time,
    each block with its payload arrays; the payloads are written, in the set's order, to ``sinks`` (a
    ``runs.Sink`` each). Parts of whole buckets that fit in ``memory`` are sorted one at a time (spilled to
    ``scratch`` first when there is more than one); ``blocks`` is called once."""
    from moses_recaser.io.diskarrays import Sink

    key_bits = max(max_key.bit_length(), 1) if n else 1
    b = _bucket_bits(n, key_bits)
    low_bits = key_bits - b
    low_sink = Sink(scratch.stem("low"), _low_dtype(low_bits))
    row = 32 + sum(s.dtype.itemsize for s in sinks)  # mixed key, order, low part, payloads, and their copies
    part_bits = 0
    while scratch.directory is not None and part_bits < b and n * row * 2 > memory.bytes << part_bits:
        part_bits += 1
    mask = np.uint64((1 << key_bits) - 1)
    mixed = (((k.astype(np.uint64) * np.uint64(_ODD)) & mask, list(p)) for k, p in blocks())
    if part_bits:
        parts = _spilled_parts(mixed, key_bits, part_bits, [s.dtype for s in sinks], scratch)
    else:
        parts = iter([_gathered(mixed, len(sinks))])
    per_part = 1 << (b - part_bits)
    counts = [_pack_part(m, pay, low_bits, k * per_part, per_part, low_sink, sinks) for k, (m, pay) in enumerate(parts)]
    starts = np.zeros((1 << b) + 1, dtype=np.uint32 if n < 1 << 32 else np.int64)
    np.cumsum(np.concatenate(counts), out=starts[1:])
    return Packed(starts, low_sink.done(), key_bits, [s.done() for s in sinks])


def _gathered(blocks: Iterable[tuple[np.ndarray, list[np.ndarray]]], width: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Every block's mixed keys and payloads, concatenated."""
    got = list(blocks)
    if not got:
        return np.zeros(0, dtype=np.uint64), [np.zeros(0) for _ in range(width)]
    return np.concatenate([m for m, _ in got]), [np.concatenate([p[j] for _, p in got]) for j in range(width)]


def _spilled_parts(
    blocks: Iterable[tuple[np.ndarray, list[np.ndarray]]],
    key_bits: int,
    part_bits: int,
    dtypes: Sequence[np.dtype],
    scratch: Scratch,
) -> Iterable[tuple[np.ndarray, list[np.ndarray]]]:
    """Mixed keys and payloads cut by their top ``part_bits`` bits into files, then read back a part at a time
    (each file removed once read)."""

    from moses_recaser.io.diskarrays import Sink, whole

    shift = np.uint64(key_bits - part_bits)
    files = [
        [Sink(scratch.stem(f"part{p}"), dt) for dt in (np.dtype(np.uint64), *dtypes)] for p in range(1 << part_bits)
    ]
    for mixed, payloads in blocks:
        which = (mixed >> shift).astype(np.int64)
        order = np.argsort(which, kind="stable")
        bounds = np.searchsorted(which[order], np.arange((1 << part_bits) + 1))
        for p in np.flatnonzero(np.diff(bounds)).tolist():
            at = order[bounds[p] : bounds[p + 1]]
            for sink, col in zip(files[p], (mixed, *payloads)):
                sink.add(col[at])
    for sinks in files:
        cols = [whole(s.done()) for s in sinks]
        remove_files(s.path for s in sinks if s.path is not None)
        yield cols[0], cols[1:]


def _pack_part(
    mixed: np.ndarray,
    payloads: list[np.ndarray],
    low_bits: int,
    first: int,
    buckets: int,
    low_sink: Sink,
    sinks: Sequence[Sink],
) -> np.ndarray:
    """Sort a part's mixed keys (buckets [first, first + buckets)), write their low parts and payloads in that
    order; the number of keys in each bucket."""
    order = np.argsort(mixed, kind="stable")
    mixed = mixed[order]
    if len(mixed) > 1 and (mixed[1:] == mixed[:-1]).any():
        raise ValueError("KeySet.pack: keys are not distinct")
    low_sink.add((mixed & np.uint64((1 << low_bits) - 1)).astype(low_sink.dtype))
    for sink, col in zip(sinks, payloads):
        sink.add(col[order])
    return np.bincount((mixed >> np.uint64(low_bits)).astype(np.int64) - first, minlength=buckets)
