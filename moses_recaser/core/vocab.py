"""Strings numbered 0, 1, 2, ... kept as numpy arrays (UTF-8 bytes, offsets, a hash index) instead of Python
objects: a model with a million word types loads in the time it takes to read its arrays, and only the
strings a run looks up become Python strings.

A string's number is its place (``Vocab.from_words`` keeps the order given; ``add`` appends). Lookups go through a
dict of the strings looked up so far, then a ``KeySet`` of stable 63-bit hashes of the strings' bytes (CRC-32
and Adler-32) with the number of each hash's string; a hit is checked against the stored bytes. Strings of one
vocabulary whose hashes collide are kept in a small dict of their own.

It is the package's one numbering of words: stored vocabularies (tables, LM, candidates) and growing ones
(counting's, numbering a chunk of text at a time with ``add_all``; word types with columns,
``columns.WordTypes``). Added strings live in the dict and a list only, so growing from empty costs no hashing.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import repeat

import numpy as np

from moses_recaser.core.keyset import KeySet


def string_hash(data: bytes) -> int:
    """A stable 63-bit hash of a string's UTF-8 bytes (Python's hash() changes from process to process)."""
    return ((zlib.crc32(data) & 0x7FFFFFFF) << 32) | zlib.adler32(data)


def string_hashes(data: list[bytes]) -> np.ndarray:
    """``string_hash`` of each string, as int64: its two checksums a list at a time, in C (half the time)."""
    crc = np.fromiter(map(zlib.crc32, data), dtype=np.int64, count=len(data))
    return ((crc & 0x7FFFFFFF) << 32) | np.fromiter(map(zlib.adler32, data), dtype=np.int64, count=len(data))


class Vocab:
    """Strings numbered by their place: the stored ones (``of``, ``load``) first, then the ones added since
    (``add``, ``add_all``), which ``arrays`` stores with them."""

    def __init__(
        self, blob: bytes | np.ndarray, offsets: np.ndarray, index: KeySet, ids: np.ndarray, overflow: Mapping[str, int]
    ) -> None:
        # bytes, or a (mapped) uint8 array: only what is read is loaded
        self._blob = (memoryview(blob) if isinstance(blob, bytes) else blob.data).cast("B")
        self._offsets = offsets
        self._index = index
        self._ids = ids  # the number of the string of each hash in ``index``
        self._overflow = dict(overflow)
        self._stored = len(offsets) - 1
        self._known: dict[str, int] = {}  # strings looked up (their number, or -1: absent) or added
        self._added: list[str] = []

    @classmethod
    def from_words(cls, words: Iterable[str]) -> Vocab:
        """The strings numbered in the order given (each once)."""
        encoded = [w.encode("utf-8") for w in words]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
        keys = string_hashes(encoded)
        return cls._from_arrays(b"".join(encoded), offsets, keys)

    @classmethod
    def _from_arrays(cls, blob: bytes, offsets: np.ndarray, keys: np.ndarray) -> Vocab:
        """The strings of ``blob`` cut at ``offsets``, numbered in order, ``keys`` their ``string_hash``es."""
        _, first, counts = np.unique(keys, return_index=True, return_counts=True)
        overflow = {}
        if (counts > 1).any():  # the later strings of a shared hash
            clash = set(keys[first[counts > 1]].tolist())
            seen: set[int] = set()
            for i, k in enumerate(keys.tolist()):
                if k in clash:
                    if k in seen:
                        overflow[str(blob[offsets[i] : offsets[i + 1]], "utf-8")] = i
                    seen.add(k)
        index, order = KeySet.pack(keys[first])
        ids = first[order].astype(np.int32 if len(keys) < 1 << 31 else np.int64)
        return cls(blob, offsets, index, ids, overflow)

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """Everything, added strings included, for ``load``."""
        v = self if not self._added else Vocab.from_words(self)
        return {
            f"{prefix}.blob": np.frombuffer(v._blob, dtype=np.uint8),
            f"{prefix}.offsets": v._offsets,
            **v._index.arrays(f"{prefix}.hashes"),
            f"{prefix}.ids": v._ids,
            f"{prefix}.overflow": np.array("\n".join(f"{w}\t{i}" for w, i in v._overflow.items())),
        }

    @classmethod
    def load(cls, z: Mapping[str, np.ndarray], prefix: str) -> Vocab:
        """A stored vocabulary (``arrays``)."""
        text = str(z[f"{prefix}.overflow"])
        overflow = {w: int(i) for w, i in (x.rsplit("\t", 1) for x in text.split("\n"))} if text else {}
        blob, offsets, ids = z[f"{prefix}.blob"], z[f"{prefix}.offsets"], z[f"{prefix}.ids"]
        index = KeySet.load(z, f"{prefix}.hashes")
        return cls(blob, offsets, index, ids, overflow)

    def __len__(self) -> int:
        return self._stored + len(self._added)

    def __getitem__(self, i: int) -> str:
        if i >= self._stored:
            return self._added[i - self._stored]
        return str(self._blob[self._offsets[i] : self._offsets[i + 1]], "utf-8")

    def strings(self, ids: np.ndarray) -> list[str]:
        """The string of each number in ``ids`` (each distinct one decoded once)."""
        uniq, inverse = np.unique(ids, return_inverse=True)
        stored = uniq[uniq < self._stored]
        starts, ends = self._offsets[stored].tolist(), self._offsets[stored + 1].tolist()
        blob = self._blob
        decoded = [str(blob[a:b], "utf-8") for a, b in zip(starts, ends)]
        decoded += [self._added[i - self._stored] for i in uniq[len(stored) :].tolist()]
        return [decoded[k] for k in inverse.tolist()]

    def chunks(self, size: int) -> Iterator[list[str]]:
        """The strings in order, ``size`` at a time, each chunk decoded when it is reached: a walk over every
        string of a large vocabulary holds one chunk of Python strings (``list(vocab)`` holds them all, about 60
        bytes a string). The vocabulary must not grow meanwhile; ``compact`` keeps the numbering, so it may run."""
        n = len(self)
        for start in range(0, n, size):
            yield self._between(start, min(start + size, n))

    def _between(self, start: int, end: int) -> list[str]:
        """The strings numbered ``start`` to ``end`` - 1."""
        stored_end = min(end, self._stored)
        out: list[str] = []
        if start < stored_end:
            off = self._offsets[start : stored_end + 1].tolist()
            data, base = bytes(self._blob[off[0] : off[-1]]), off[0]
            out = [str(data[a - base : b - base], "utf-8") for a, b in zip(off, off[1:])]
        return out + self._added[max(start - self._stored, 0) : max(end - self._stored, 0)]

    def __iter__(self) -> Iterator[str]:
        for chunk in self.chunks(1 << 16):
            yield from chunk

    def __contains__(self, word: str) -> bool:
        return self.get(word) >= 0

    def get(self, word: str, default: int = -1) -> int:
        i = self._known.get(word)
        if i is None:
            i = self._known[word] = self._search_one(word)
        return i if i >= 0 else default

    def numbers(self, words: list[str], only: Sequence[int] | None = None) -> np.ndarray:
        """The number of each word (-1: not in the vocabulary); with ``only``, the words at those places are looked
        up and the others taken as absent (a caller that knows they are: most of a test set's new words are in no
        vocabulary of training words)."""
        if only is not None:
            out = np.full(len(words), -1, dtype=np.int64)
            out[only] = self.numbers([words[k] for k in only])
            return out
        out = self._lookup(words)
        unseen = np.flatnonzero(out == -2)
        if len(unseen):
            at = unseen.tolist()
            self._search(list(dict.fromkeys(words[i] for i in at)))
            out[unseen] = self._known_numbers(words, at)
        return out

    def add(self, word: str) -> int:
        """The word's number, appended if new."""
        i = self.get(word)
        if i < 0:  # (absent, and known to be: get remembered it)
            i = len(self)
            self._added.append(word)
            self._known[word] = i
        return i

    def add_all(self, words: list[str]) -> np.ndarray:
        """Each word's number (int64), the new ones appended in order of first occurrence: a vocabulary grown a
        chunk of text at a time pays one dict lookup a word, and Python work only for the words not met before."""
        out = self._lookup(words)
        missing = np.flatnonzero(out < 0)  # not looked up yet (-2), or known to be absent (-1)
        if len(missing):
            at = missing.tolist()
            new = self._absent(list(dict.fromkeys(words[i] for i in at)))
            self._known.update(zip(new, range(len(self), len(self) + len(new))))
            self._added += new
            out[missing] = self._known_numbers(words, at)
        return out

    def compact(self, keep: int = 0) -> None:
        """Move the added strings into the arrays and forget the strings looked up but the first ``keep`` (in a
        vocabulary numbered as met, the frequent ones, which every chunk of text would look up again): the same
        numbering, in a fraction of the memory (a string in the dict and the list takes about 150 bytes, in the
        arrays about 30), for registries that grow over every type of a large corpus."""
        if self._added:
            v = self._grown()
            self._blob, self._offsets, self._index, self._ids = v._blob, v._offsets, v._index, v._ids
            self._overflow, self._stored, self._added = v._overflow, v._stored, []
        first = range(min(keep, len(self)))
        self._known = dict(zip(map(self.__getitem__, first), first))

    def _grown(self) -> Vocab:
        """``Vocab.from_words(self)``, the stored strings' bytes and hashes taken as they are (a registry compacted a
        chunk at a time does no Python work per string it already holds)."""
        added = [w.encode("utf-8") for w in self._added]
        keys = np.empty(len(self), dtype=np.int64)
        keys[self._ids] = self._index.keys_at(0, len(self._index))
        for w, i in self._overflow.items():
            keys[i] = string_hash(w.encode("utf-8"))
        keys[self._stored :] = string_hashes(added)
        lengths = np.fromiter(map(len, added), dtype=np.int64, count=len(added))
        offsets = np.concatenate([self._offsets, self._offsets[-1] + np.cumsum(lengths)]).astype(np.int64)
        return Vocab._from_arrays(bytes(self._blob) + b"".join(added), offsets, keys)

    def held(self) -> int:
        """How many strings the dict and the list hold (what ``compact`` gives back)."""
        return len(self._known) + len(self._added)

    def words_from(self, start: int) -> list[str]:
        """The strings numbered ``start`` and up, in order (after ``add_all``: the ones it appended)."""
        stored = [self[i] for i in range(start, self._stored)]
        return stored + self._added[max(start - self._stored, 0) :]

    def _lookup(self, words: list[str]) -> np.ndarray:
        """Each word's number as far as ``_known`` tells (-1: absent, -2: not looked up yet)."""
        return np.fromiter(map(self._known.get, words, repeat(-2)), dtype=np.int64, count=len(words))

    def _known_numbers(self, words: list[str], at: list[int]) -> np.ndarray:
        """The numbers of ``words[i]`` for i in ``at``, every one of them in ``_known``."""
        return np.fromiter(map(self._known.__getitem__, [words[i] for i in at]), dtype=np.int64, count=len(at))

    def _absent(self, words: list[str]) -> list[str]:
        """Of distinct words that ``_known`` does not number, those not stored either."""
        if not self._stored:  # grown from empty: nothing to search
            return words
        unseen = [w for w in words if w not in self._known]
        if unseen:
            self._search(unseen)
        return [w for w in words if self._known[w] < 0]

    def _search(self, words: list[str]) -> None:
        """Look up words not looked up yet among the stored strings, and remember their numbers (-1: absent)."""
        if not self._stored:  # grown from empty: every string is an added one, and added ones are in _known
            self._known.update(zip(words, repeat(-1)))
            return
        encoded = [w.encode("utf-8") for w in words]
        pos, found = self._index.find(string_hashes(encoded))
        hits = np.flatnonzero(found)
        at = self._ids[pos[hits]].astype(np.int64)
        out = [-1] * len(words)  # a hash not found is no stored string's, nor a colliding one's (theirs is found)
        blob, overflow = self._blob, self._overflow
        # a hit's stored bytes compared (as ``_check`` does one): else the word is a colliding string, or absent
        for k, i, a, b in zip(hits.tolist(), at.tolist(), self._offsets[at].tolist(), self._offsets[at + 1].tolist()):
            out[k] = i if blob[a:b] == encoded[k] else overflow.get(words[k], -1)
        self._known.update(zip(words, out))

    def _search_one(self, word: str) -> int:
        data = word.encode("utf-8")
        at = self._index.find_one(string_hash(data)) if self._stored else -1
        return self._check(word, data, int(self._ids[at]) if at >= 0 else -1)

    def _check(self, word: str, data: bytes, at: int) -> int:
        """``at`` if the stored string there is ``word`` (a hash hit), else its number among the strings whose
        hash collides (-1: absent)."""
        if at >= 0 and self._blob[self._offsets[at] : self._offsets[at + 1]] == data:
            return at
        return self._overflow.get(word, -1)
