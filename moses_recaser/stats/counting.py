"""The training statistics of a corpus of any size: counted a chunk of sentences at a time, into numpy arrays,
in parallel shards, and merged.

What is counted (``Counts``): the target forms (everywhere, and as a sentence's first word with a letter),
punctuation followed by a word, linked word pairs (lowercased; and cased, with their case tags, where neither
word is capitalized by its position), and the LM's n-grams. A ``Counter`` counts sentences a chunk at a time
with its own vocabularies: its Python work is per word type (met for the first time) and per token (one dict
lookup), the rest is numpy. ``count_corpus`` splits the corpus into line blocks (``Piece``: byte offsets
found by one scan), counts each in a worker process (``jobs``), writes each shard's counts to a file, and
merges the files in line order, so that the result does not depend on ``jobs`` and equals a single pass. The
merge keeps every count in numpy arrays, keyed by integers.
"""

from __future__ import annotations

import logging
import re
import threading
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from pathlib import Path

import numpy as np

from moses_recaser import casing
from moses_recaser.casing import Tag
from moses_recaser.errors import RecaserError
from moses_recaser.modeldir import save_npz, text_array, words_of
from moses_recaser.moses.pharaoh import parse_links
from moses_recaser.sentences import SENTENCE_END, first_in_sentence, positional
from moses_recaser.stats.kneser_ney import BOS, EOS, UNK, NGramCounts
from moses_recaser.textio import split_tokens
from moses_recaser.triples import Triple
from moses_recaser.workers import check_workers, worker_signals

log = logging.getLogger(__name__)
N_TAGS = len(Tag)
CHUNK_LINES = 50_000
FORMAT = 3  # shard count files: 3, numpy arrays of the streamed counter
MAX_ORDER = 6  # KenLM's default build (KENLM_MAX_ORDER), which reads the LM when lmplz or --lm gives it
_LINK_LINE = re.compile(r"[ \t]*(?:[0-9]+-[0-9]+(?:[ \t]+[0-9]+-[0-9]+)*)?[ \t]*")
_OTHER_SPACE = re.compile(r"[^\S \t\n]")  # white space Moses does not split on
_COMPACT_AT = 1 << 23


# --- accumulating integer keys ----------------------------------------------------------------


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


# --- growing per-type columns ------------------------------------------------------------------


class Vocabulary:
    """Word -> id in order of first appearance, with per-type facts computed once (``describe``)."""

    def __init__(self, describe: Callable[[list[str]], dict[str, list]], columns: Sequence[tuple[str, type]]) -> None:
        self.ids: dict[str, int] = {}
        self.words: list[str] = []
        self.describe = describe
        self.columns: dict[str, np.ndarray] = {name: np.zeros(1024, dtype=dtype) for name, dtype in columns}

    def __len__(self) -> int:
        return len(self.words)

    def numbers(self, tokens: list[str]) -> np.ndarray:
        ids = np.fromiter(map(self.ids.get, tokens, repeat(-1)), dtype=np.int64, count=len(tokens))
        missing = np.flatnonzero(ids < 0)
        if len(missing):
            new = list(dict.fromkeys(tokens[i] for i in missing.tolist()))
            start = len(self.words)
            self.ids.update(zip(new, range(start, start + len(new))))
            self.words += new
            facts = self.describe(new)
            for name, col in self.columns.items():
                if len(self.words) > len(col):
                    grown = np.zeros(max(len(self.words), 2 * len(col)), dtype=col.dtype)
                    grown[: len(col)] = col
                    self.columns[name] = col = grown
                col[start : len(self.words)] = facts[name]
            ids[missing] = np.fromiter(
                map(self.ids.__getitem__, (tokens[i] for i in missing.tolist())), dtype=np.int64, count=len(missing)
            )
        return ids

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name][: len(self.words)]


class Lowercase:
    """Lowercase word -> id, in order of first appearance."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def id(self, word: str) -> int:
        return self.ids.setdefault(casing.lower(word), len(self.ids))

    @property
    def words(self) -> list[str]:
        return list(self.ids)


# --- the counter ---------------------------------------------------------------------------


def check_lm_order(order: int) -> None:
    """An n-gram order KenLM reads: 1 to MAX_ORDER (a larger one would count without bound)."""
    if not 1 <= order <= MAX_ORDER:
        raise RecaserError(f"the LM order must be between 1 and {MAX_ORDER} (KenLM's limit), not {order}")


class Counter:
    """Counts of sentences added a chunk at a time (``add``), over its own vocabularies; ``arrays`` gives
    them for a shard file, ``merge`` sums such files."""

    def __init__(self, order: int) -> None:
        if order != 0:  # 0: tables only
            check_lm_order(order)
        self.order = order
        self.tgt_lower, self.src_lower = Lowercase(), Lowercase()
        self.target = Vocabulary(
            self._describe_target,
            [("lower", np.int64), ("letter", bool), ("punct", bool), ("end", bool), ("tag", np.int64)],
        )
        self.source = Vocabulary(
            self._describe_source, [("lower", np.int64), ("letter", bool), ("end", bool), ("tag", np.int64)]
        )
        self.forms = np.zeros(0, dtype=np.int64)
        self.initial = np.zeros(0, dtype=np.int64)
        self.punct = np.zeros(0, dtype=np.int64)
        self.lower_pairs, self.cased_pairs = KeyCounts(), KeyCounts()
        self.tags = np.zeros((N_TAGS, N_TAGS), dtype=np.int64)
        self.ngrams = [GramCounts(k) for k in range(1, order + 1)]
        self.sentences = self.target_tokens = 0

    def _describe_target(self, words: list[str]) -> dict[str, list]:
        for w in words:
            if w in (BOS, EOS, UNK):
                raise RecaserError(f"the corpus contains the reserved token {w!r}")
        return {
            "lower": [self.tgt_lower.id(w) for w in words],
            "letter": [casing.has_letter(w) for w in words],
            "punct": [casing.is_punctuation(w) for w in words],
            "end": [w in SENTENCE_END for w in words],
            "tag": [int(casing.tag(w)) for w in words],
        }

    def _describe_source(self, words: list[str]) -> dict[str, list]:
        return {
            "lower": [self.src_lower.id(w) for w in words],
            "letter": [casing.has_letter(w) for w in words],
            "end": [w in SENTENCE_END for w in words],
            "tag": [int(casing.tag(w)) for w in words],
        }

    def add(
        self, targets: Sequence[list[str]], sources: Sequence[list[str]] | None = None, links: Links | None = None
    ) -> None:
        """Sentences of target tokens, and for a bitext their source tokens and word links."""
        n_tgt = np.fromiter(map(len, targets), dtype=np.int64, count=len(targets))
        tgt_start = np.cumsum(n_tgt) - n_tgt
        tt = self.target.numbers(list(chain.from_iterable(targets)))
        sent = np.repeat(np.arange(len(targets)), n_tgt)
        self.sentences += len(targets)
        self.target_tokens += len(tt)
        V = len(self.target)
        letter = self.target["letter"][tt]
        first = first_in_sentence(letter, sent, tgt_start)
        same = sent[1:] == sent[:-1]
        follows = same & self.target["punct"][tt[:-1]] & letter[1:]
        self.forms = _plus(self.forms, np.bincount(tt, minlength=V))
        self.initial = _plus(self.initial, np.bincount(tt[tgt_start[first >= 0] + first[first >= 0]], minlength=V))
        self.punct = _plus(self.punct, np.bincount(tt[:-1][follows], minlength=V))
        self._count_ngrams(tt, tgt_start, n_tgt)
        if sources is not None and links is not None:
            self._count_links(tt, tgt_start, n_tgt, sources, links)

    def _count_ngrams(self, tt: np.ndarray, start: np.ndarray, n: np.ndarray) -> None:
        """Every sentence as ``<s> w1 ... wn </s>`` (LM ids: <unk> 0, <s> 1, </s> 2, then the target's)."""
        S = len(n)
        stream = np.empty(len(tt) + 2 * S, dtype=np.int64)
        pos = start + 2 * np.arange(S)  # where each sentence's <s> goes
        is_word = np.ones(len(stream), dtype=bool)
        is_word[pos] = is_word[pos + n + 1] = False
        stream[pos], stream[pos + n + 1] = 1, 2
        stream[is_word] = tt + 3
        depth = np.arange(len(stream)) - np.repeat(pos, n + 2) + 1  # tokens of the sentence up to here
        for k in range(1, self.order + 1):
            end = np.flatnonzero((depth >= k) & (stream != 1))  # an n-gram ends at every word and </s>
            self.ngrams[k - 1].add(np.stack([stream[end - (k - 1 - j)] for j in range(k)], axis=1))

    def _count_links(
        self, tt: np.ndarray, tgt_start: np.ndarray, n_tgt: np.ndarray, sources: Sequence[list[str]], links: Links
    ) -> None:
        n_src = np.fromiter(map(len, sources), dtype=np.int64, count=len(sources))
        src_start = np.cumsum(n_src) - n_src
        st = self.source.numbers(list(chain.from_iterable(sources)))
        links.check(n_src, n_tgt)
        s_flat = src_start[links.sentence] + links.src
        t_flat = tgt_start[links.sentence] + links.tgt
        S, T = self.source, self.target
        src_pos = positional(S["letter"][st], S["end"][st], src_start, n_src)
        tgt_pos = positional(T["letter"][tt], T["end"][tt], tgt_start, n_tgt)
        fs, es = st[s_flat], tt[t_flat]
        self.lower_pairs.add((S["lower"][fs] << 32) | T["lower"][es])
        case = ~src_pos[s_flat] & ~tgt_pos[t_flat]  # case due to position says nothing of the word
        self.cased_pairs.add((fs[case] << 32) | es[case])
        self.tags += np.bincount(S["tag"][fs[case]] * N_TAGS + T["tag"][es[case]], minlength=N_TAGS * N_TAGS).reshape(
            N_TAGS, N_TAGS
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """Everything counted, for a shard file (``merge`` reads it)."""
        V = len(self.target)
        out = {
            "format": np.array(FORMAT),
            "order": np.array(self.order),
            "target.words": text_array(self.target.words),
            "target.lower": self.target["lower"],
            "source.words": text_array(self.source.words),
            "source.lower": self.source["lower"],
            "tgt_lower.words": text_array(self.tgt_lower.words),
            "src_lower.words": text_array(self.src_lower.words),
            "forms": _plus(self.forms, np.zeros(V, np.int64)),
            "initial": _plus(self.initial, np.zeros(V, np.int64)),
            "punct": _plus(self.punct, np.zeros(V, np.int64)),
            "tags": self.tags,
            "totals": np.array([self.sentences, self.target_tokens], dtype=np.int64),
        }
        for name, kc in (("lower_pairs", self.lower_pairs), ("cased_pairs", self.cased_pairs)):
            out[f"{name}.keys"], out[f"{name}.counts"] = kc.compact()
        for k, gc in enumerate(self.ngrams, 1):
            out[f"ngrams{k}.rows"], out[f"ngrams{k}.counts"] = gc.rows()
        return out


def _plus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b for arrays of different lengths (the shorter is padded with 0)."""
    if len(a) < len(b):
        a, b = b, a
    out = a.copy()
    out[: len(b)] += b
    return out


@dataclass
class Links:
    """The word links of a chunk's sentences, flat: sentence, source position, target position."""

    sentence: np.ndarray
    src: np.ndarray
    tgt: np.ndarray
    where: Callable[[int], tuple[str, int]] = field(default=lambda s: ("", 0))  # file and line of sentence s

    @classmethod
    def of(
        cls, per_sentence: Sequence[Sequence[tuple[int, int]]], where: Callable[[int], tuple[str, int]] | None = None
    ) -> Links:
        n = np.fromiter(map(len, per_sentence), dtype=np.int64, count=len(per_sentence))
        flat = np.fromiter(
            chain.from_iterable(chain.from_iterable(per_sentence)), dtype=np.int64, count=2 * int(n.sum())
        ).reshape(-1, 2)
        return cls(np.repeat(np.arange(len(per_sentence)), n), flat[:, 0], flat[:, 1], where or (lambda s: ("", 0)))

    def check(self, n_src: np.ndarray, n_tgt: np.ndarray) -> None:
        bad = np.flatnonzero((self.src >= n_src[self.sentence]) | (self.tgt >= n_tgt[self.sentence]))
        if len(bad):
            k = int(bad[0])
            s = int(self.sentence[k])
            path, line = self.where(s)
            raise RecaserError(
                f"alignment link {self.src[k]}-{self.tgt[k]} is outside the sentence "
                f"({n_src[s]} source, {n_tgt[s]} target tokens)",
                path or None,
                line,
            )


# --- reading a corpus in pieces ------------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """Lines [first, first + lines) of a bitext (source, target, alignment) or of target-language text
    (target alone), read from the byte offsets ``starts``."""

    files: tuple[str, ...]
    starts: tuple[int, ...]
    first: int
    lines: int

    @property
    def bitext(self) -> bool:
        return len(self.files) == 3


def _seekable(path: str) -> bool:
    return not path.endswith((".gz", ".xz")) and path != "-"


def line_offsets(path: str, wanted: Sequence[int]) -> tuple[int, list[int]]:
    """The number of lines of a file, and the byte offset at which each ``wanted`` line (0-based) starts."""
    targets = sorted(set(wanted))
    found: dict[int, int] = {}
    lines = offset = 0
    k = 0
    try:
        with open(path, "rb") as fh:
            while True:
                block = fh.read(1 << 24)
                if not block:
                    break
                n = block.count(b"\n")
                while k < len(targets) and targets[k] <= lines + n:
                    # the line starts after the (targets[k] - lines)-th newline of the block
                    at, need = 0, targets[k] - lines
                    for _ in range(need):
                        at = block.index(b"\n", at) + 1
                    found[targets[k]] = offset + at
                    k += 1
                lines += n
                offset += len(block)
                last = block[-1:]
    except OSError as exc:
        raise RecaserError(f"cannot read: {exc.strerror}", path) from None
    if offset and last != b"\n":
        lines += 1  # a last line without a newline
    return lines, [found.get(w, offset) for w in wanted]


def corpus_lines(files: Sequence[str]) -> int:
    """The number of lines of parallel files (an error names the first line one of them lacks)."""
    if not all(_seekable(f) for f in files):
        from moses_recaser.textio import LineReader, zip_readers

        return sum(1 for _ in zip_readers(*(LineReader(f, allow_empty=True) for f in files)))
    counts = [line_offsets(f, [])[0] for f in files]
    if len(set(counts)) > 1:
        short = min(range(len(files)), key=lambda k: counts[k])
        long = max(range(len(files)), key=lambda k: counts[k])
        raise RecaserError(
            f"line-count mismatch: {files[short]} has only {counts[short]} lines, {files[long]} has more",
            files[long],
            counts[short] + 1,
        )
    return counts[0]


def pieces(files: Sequence[str], jobs: int, lines: tuple[int, int] | None = None) -> list[Piece]:
    """``files`` (parallel, line by line) cut into at most ``jobs`` blocks of lines ([start, end) of
    ``lines``, default all); files that cannot seek (compressed, stdin) make one block."""
    start, end = lines or (0, corpus_lines(files))
    if end <= start:
        return []
    if not all(_seekable(f) for f in files):
        return [Piece(tuple(files), (-1,) * len(files), start, end - start)]
    n = end - start
    bounds = sorted({start + n * i // jobs for i in range(jobs + 1)})
    offsets = [line_offsets(f, bounds[:-1])[1] for f in files]
    return [
        Piece(tuple(files), tuple(o[i] for o in offsets), bounds[i], bounds[i + 1] - bounds[i])
        for i in range(len(bounds) - 1)
    ]


def _read_lines(path: str, start: int, first: int, count: int) -> Iterator[tuple[int, str]]:
    """Lines [first, first + count) of a file from byte ``start`` (-1: read from the beginning), decoded,
    with their 1-based line numbers; errors name the file and line."""
    from moses_recaser.textio import LineReader, decode_line

    if start < 0:
        reader = LineReader(path)
        for line in reader:
            if reader.lineno > first + count:
                break
            if reader.lineno > first:
                yield reader.lineno, line
        return
    with open(path, "rb") as fh:
        fh.seek(start)
        for k in range(count):
            yield first + k + 1, decode_line(fh.readline(), path, first + k + 1)


def read_piece(piece: Piece, k: int = 0) -> Iterator[tuple[int, str]]:
    """The lines of file ``k`` of a piece, with their 1-based line numbers."""
    return _read_lines(piece.files[k], piece.starts[k], piece.first, piece.lines)


def _tokens(lines: list[str]) -> list[list[str]]:
    """Moses' tokens of each line (spaces and tabs only): str.split where no other white space occurs."""
    if _OTHER_SPACE.search("\n".join(lines)):
        return [split_tokens(x) for x in lines]
    return [x.split() for x in lines]


def _links(lines: list[str], path: str, first_line: int) -> Links:
    per = []
    for k, line in enumerate(lines):
        if _LINK_LINE.fullmatch(line):
            nums = list(map(int, line.replace("-", " ").split()))
            per.append(list(zip(nums[::2], nums[1::2])))
        else:
            try:
                per.append(parse_links(line))
            except RecaserError as exc:
                raise exc.at(path, first_line + k) from None
    return Links.of(per, lambda s: (path, first_line + s))


def count_piece(piece: Piece, order: int, progress: Callable[[int], None] | None = None) -> Counter:
    """Count one piece, a chunk of lines at a time."""
    counter = Counter(order)
    readers = [read_piece(piece, k) for k in range(len(piece.files))]
    done = 0
    while done < piece.lines:
        n = min(CHUNK_LINES, piece.lines - done)
        rows = [list(zip(*[next(r) for _ in range(n)])) for r in readers]  # (line numbers, texts) per file
        first_line = rows[0][0][0]
        if piece.bitext:
            src, tgt, align = rows[0][1], rows[1][1], rows[2][1]
            counter.add(_tokens(list(tgt)), _tokens(list(src)), _links(list(align), piece.files[2], first_line))
        else:  # empty lines of target-language text are no sentences
            counter.add([x for x in _tokens(list(rows[0][1])) if x])
        done += n
        if progress is not None:
            progress(n)
    return counter


# --- shards in parallel, and the merge --------------------------------------------------------


@dataclass
class Counts:
    """The merged counts: vocabularies (target forms in order of first appearance, as the LM's), and arrays
    keyed by their ids."""

    order: int
    forms: list[str]
    form_count: np.ndarray
    initial: np.ndarray
    punct: np.ndarray
    source: list[str]
    tgt_lower: list[str]
    src_lower: list[str]
    lower_pairs: tuple[np.ndarray, np.ndarray]  # keys (source lowercase id << 32 | target lowercase id), counts
    cased_pairs: tuple[np.ndarray, np.ndarray]  # keys (source id << 32 | form id), counts
    tags: np.ndarray
    ngrams: list[tuple[np.ndarray, np.ndarray]]  # per order: (N, k) LM word ids (<unk>, <s>, </s>, forms), counts
    sentences: int
    target_tokens: int

    def ngram_counts(self) -> NGramCounts:
        """The LM's n-gram counts (vocabulary: <unk>, <s>, </s>, then the forms)."""
        if not self.order:
            raise RecaserError("no n-grams were counted (order 0)")
        return NGramCounts.from_rows([UNK, BOS, EOS] + self.forms, self.ngrams, self.order)

    def punctuation(self, min_count: int = 1) -> list[str]:
        """Punctuation tokens followed by a word with a letter at least ``min_count`` times, sorted."""
        return sorted(w for w, c in zip(self.forms, self.punct.tolist()) if c and c >= min_count)


def count_corpus(
    bitext: Sequence[str] | None = None,
    mono: Sequence[str] = (),
    order: int = 3,
    jobs: int = 1,
    lines: tuple[int, int] | None = None,
    triples: Iterable[Triple] | None = None,
    work: Path | None = None,
    quiet: bool = False,
) -> Counts:
    """The counts of a word-aligned bitext (files: source, target, alignment; lines [start, end) of them) or of
    word-aligned ``triples`` in memory, and of target-language text (``mono`` files, empty lines left out),
    counted in ``jobs`` processes; the same counts whatever ``jobs`` is."""
    check_workers(jobs, "--jobs")
    parts = (pieces(bitext, jobs, lines) if bitext else []) + [p for m in mono for p in pieces([m], jobs)]
    first = [_counter_of(triples, order).arrays()] if triples is not None else []
    total = sum(p.lines for p in parts)
    if jobs <= 1 or len(parts) <= 1:
        with _progress(total, quiet) as tick:
            return merge(chain(first, (count_piece(p, order, tick).arrays() for p in parts)), order)
    import multiprocessing as mp

    from moses_recaser.outputs import work_dir

    ctx = mp.get_context("fork")
    with work_dir("moses-recaser-counts", work) as tmp:
        done = ctx.Value("q", 0)
        with _progress(total, quiet, done), ctx.Pool(jobs, initializer=_init_worker, initargs=(done,)) as pool:
            paths = pool.starmap(_count_to_file, [(p, order, f"{tmp}/shard.{i}.npz") for i, p in enumerate(parts)])
        return merge(chain(first, map(load_shard, paths)), order)


_DONE: dict[str, object] = {}


def _init_worker(done: object) -> None:
    worker_signals()
    _DONE["value"] = done


def _count_to_file(piece: Piece, order: int, path: str) -> str:
    done = _DONE["value"]

    def tick(n: int) -> None:
        with done.get_lock():  # type: ignore[attr-defined]
            done.value += n  # type: ignore[attr-defined]

    save_npz(path, count_piece(piece, order, tick).arrays())
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


def load_shard(path: str) -> dict[str, np.ndarray]:
    """A shard count file's arrays (``Counter.arrays``)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            shard = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise RecaserError(f"not a shard count file ({exc})", path) from None
    if int(shard.get("format", -1)) != FORMAT:
        raise RecaserError("a shard count file of another format (count it again with this moses-recaser)", path)
    return shard


def merge(shards: Iterable[dict[str, np.ndarray]], order: int) -> Counts:
    """Sum shards' counts (``Counter.arrays``), taken in the order of their lines: the forms come out in order of
    first appearance in the whole text, as a single pass makes them."""
    forms, source, tgt_lower, src_lower = _Union(), _Union(), _Union(), _Union()
    form_count, initial, punct = (np.zeros(0, np.int64) for _ in range(3))
    tags = np.zeros((N_TAGS, N_TAGS), dtype=np.int64)
    lower, cased = KeyCounts(), KeyCounts()
    grams = [GramCounts(k) for k in range(1, order + 1)]
    sentences = tokens = 0
    for z in shards:
        if int(z["order"]) != order:
            raise RecaserError(f"shards counted with LM order {int(z['order'])} and {order} cannot be merged")
        t_map = forms.add(words_of(z["target.words"]))
        s_map = source.add(words_of(z["source.words"]))
        tl_map, sl_map = tgt_lower.add(words_of(z["tgt_lower.words"])), src_lower.add(words_of(z["src_lower.words"]))
        V = len(forms.words)
        form_count = _plus(form_count, np.bincount(t_map, weights=z["forms"], minlength=V).astype(np.int64))
        initial = _plus(initial, np.bincount(t_map, weights=z["initial"], minlength=V).astype(np.int64))
        punct = _plus(punct, np.bincount(t_map, weights=z["punct"], minlength=V).astype(np.int64))
        tags += z["tags"]
        for kc, name, a, b in ((lower, "lower_pairs", sl_map, tl_map), (cased, "cased_pairs", s_map, t_map)):
            keys = z[f"{name}.keys"]
            kc.add((a[keys >> 32] << 32) | b[keys & 0xFFFFFFFF], z[f"{name}.counts"])
        lm_map = np.concatenate([np.arange(3), t_map + 3])
        for k in range(1, order + 1):
            grams[k - 1].add(lm_map[z[f"ngrams{k}.rows"]], z[f"ngrams{k}.counts"])
        sentences += int(z["totals"][0])
        tokens += int(z["totals"][1])
    V = len(forms.words)
    ngrams = [g.rows() for g in grams]
    return Counts(
        order=order,
        forms=forms.words,
        form_count=_plus(form_count, np.zeros(V, np.int64)),
        initial=_plus(initial, np.zeros(V, np.int64)),
        punct=_plus(punct, np.zeros(V, np.int64)),
        source=source.words,
        tgt_lower=tgt_lower.words,
        src_lower=src_lower.words,
        lower_pairs=lower.compact(),
        cased_pairs=cased.compact(),
        tags=tags,
        ngrams=ngrams,
        sentences=sentences,
        target_tokens=tokens,
    )


class _Union:
    """Words of several shards, numbered in order of first appearance across them."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.words: list[str] = []

    def add(self, words: list[str]) -> np.ndarray:
        """Each word's number (new words numbered after the ones seen before)."""
        ids = self.ids
        for w in words:
            if w not in ids:
                ids[w] = len(self.words)
                self.words.append(w)
        return np.fromiter(map(ids.__getitem__, words), dtype=np.int64, count=len(words))


def _counter_of(triples: Iterable[Triple], order: int) -> Counter:
    from moses_recaser.sentences import chunks

    counter = Counter(order)
    for chunk in chunks(triples, CHUNK_LINES):
        for t in chunk:
            if t.links is None:
                raise RecaserError(f"sentence {t.id} has no word alignment; the tables need word links")
        counter.add([t.target for t in chunk], [t.source for t in chunk], Links.of([t.links or [] for t in chunk]))
    return counter


def count_triples(triples: Iterable[Triple], order: int = 3) -> Counts:
    """The counts of word-aligned triples in memory: the same counter as for files."""
    return merge([_counter_of(triples, order).arrays()], order)


def count_text(sentences: Iterable[list[str]], order: int = 3, skip_empty: bool = False) -> Counts:
    """The target-side counts of target-language sentences in memory (an empty one counts as ``<s> </s>``,
    as lmplz counts it, unless ``skip_empty``)."""
    from moses_recaser.sentences import chunks

    counter = Counter(order)
    for chunk in chunks((s for s in sentences if s or not skip_empty), CHUNK_LINES):
        counter.add(chunk)
    return merge([counter.arrays()], order)
