"""The counter of one piece of a corpus: its sentences counted a chunk at a time into numpy arrays.

What is counted: the target forms (everywhere, and as a sentence's first word with a letter), punctuation
followed by a word with a letter, linked word pairs (lowercased; and cased, with their case tags, where neither
word is capitalized by its position), and the LM's n-grams of every sentence padded as ``<s> w1 ... wn </s>``,
as KenLM's lmplz pads it. A ``Counter`` numbers the words of its chunks in its own vocabularies
(``columns.WordTypes``): its Python work is per word type (met for the first time, or again after a spill
compacted the vocabularies) and per token (one dict lookup), the rest is numpy. ``arrays`` gives everything for
a shard file that ``merge`` sums.

The key counts (word pairs, n-grams; ``keycounts.KeyCounts``) are held in memory up to the counter's share of
``--memory`` and spilled to disk as sorted runs past it. ``shard`` gives everything counted as a ``Shard``: the
vocabularies and per-type arrays, and each key table's sorted runs, in the counter's own word ids; ``merge`` sums
shards; ``save_shard`` and ``load_shard`` keep one in a file (``moses-recaser count``).

``count_piece`` reads a ``pieces.Piece`` a chunk of lines at a time: Moses' tokens (split on spaces and tabs
only) and, for a bitext, Pharaoh ``i-j`` word links, as Moses' alignment files have them.
"""

from __future__ import annotations

import logging
import re
import zipfile
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from itertools import chain, repeat
from typing import IO

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.casing import Tag
from moses_recaser.core.columns import WordTypes
from moses_recaser.core.memory import Memory, release, rss
from moses_recaser.core.sentences import SENTENCE_END, first_in_sentence, positional
from moses_recaser.core.vocab import Vocab
from moses_recaser.io.corpus import Piece, piece_blocks
from moses_recaser.io.diskarrays import Scratch
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import split_tokens
from moses_recaser.io.modeldir import DIGEST, MappedArrays, save_npz, text_array
from moses_recaser.moses.pharaoh import parse_links
from moses_recaser.stats.keycounts import KeyCounts, add_padded
from moses_recaser.stats.runs import PAIRS, KeyKind, Table, collect, merge_blocks, merge_rows, remove, renumbered_blocks

log = logging.getLogger(__name__)
UNK, BOS, EOS = "<unk>", "<s>", "</s>"  # the LM's own words
N_TAGS = len(Tag)
CHUNK_LINES = 20_000
KEEP_KNOWN = 1 << 16  # word types of each vocabulary kept in its dict by a spill (the first met: frequent ones)
# shard count files: 3, numpy arrays of the streamed counter; 4, each key table one sorted array (n-grams as
# packed or big-endian keys), read a block at a time; 5, with the digest of the corpus a shard was counted from;
# 6, with the sha256 of the file's own arrays (``modeldir.DIGEST``): a bad copy is refused, not merged
FORMAT = 6
MAX_ORDER = 6  # KenLM's default build (KENLM_MAX_ORDER), which reads the LM when lmplz or --lm gives it
_LINK_LINE = re.compile(r"[ \t]*(?:[0-9]+-[0-9]+(?:[ \t]+[0-9]+-[0-9]+)*)?[ \t]*")
# a block of such lines, each ended, with numbers of at most 9 digits (parsed as int64 in one go)
_LINK_BLOCK = re.compile(r"(?:[ \t]*(?:[0-9]{1,9}-[0-9]{1,9}(?:[ \t]+[0-9]{1,9}-[0-9]{1,9})*)?[ \t]*\n)*")
_OTHER_SPACE = re.compile(r"[^\S \t\n]")  # white space Moses does not split on
_TARGET_COLUMNS = [("lower", np.int64), ("letter", bool), ("punct", bool), ("end", bool), ("tag", np.int64)]
_SOURCE_COLUMNS = [("lower", np.int64), ("letter", bool), ("end", bool), ("tag", np.int64)]


def check_lm_order(order: int) -> None:
    """An n-gram order KenLM reads: 1 to MAX_ORDER (a larger one would count without bound)."""
    if isinstance(order, bool) or not isinstance(order, int):
        raise RecaserError(f"`lm_order` must be a whole number, not {order!r}")
    if not 1 <= order <= MAX_ORDER:
        raise RecaserError(f"the LM order must be between 1 and {MAX_ORDER} (KenLM's limit), not {order}")


class ReservedToken(RecaserError):
    """A corpus word that the LM keeps for itself (<s>, </s>, <unk>); ``count_piece`` names its file and line."""

    def __init__(self, token: str, where: str | None = None, line: int = 0) -> None:
        super().__init__(f"the corpus contains the reserved token {token!r}", where, line)
        self.token = token


def reserved_at(
    exc: ReservedToken, sentences: Sequence[Sequence[str]], path: str | None, line_of: Callable[[int], int]
) -> ReservedToken:
    """``exc`` placed at the first of ``sentences`` holding its token: in ``path``, at the line ``line_of`` gives
    that sentence's index (a reserved token is met a chunk at a time, where its line is not known)."""
    at = next((i for i, x in enumerate(sentences) if exc.token in x), None)
    return ReservedToken(exc.token, path, line_of(at)) if at is not None else exc


class Counter:
    """Counts of sentences added a chunk at a time (``add``), over its own vocabularies; ``arrays`` gives
    them for a shard file, ``merge`` sums such files."""

    def __init__(self, order: int) -> None:
        if order != 0:  # 0: tables only
            check_lm_order(order)
        self.order = order
        self.tgt_lower, self.src_lower = Vocab.from_words([]), Vocab.from_words([])  # lowercased words, numbered as met
        self.target = WordTypes(_TARGET_COLUMNS, self._describe_target)
        self.source = WordTypes(_SOURCE_COLUMNS, self._describe_source)
        self.forms = np.zeros(0, dtype=np.int64)
        self.initial = np.zeros(0, dtype=np.int64)
        self.punct = np.zeros(0, dtype=np.int64)
        self.lower_pairs, self.cased_pairs = KeyCounts(PAIRS), KeyCounts(PAIRS)
        self.tags = np.zeros((N_TAGS, N_TAGS), dtype=np.int64)
        self.ngrams = [KeyCounts(KeyKind.ngrams(k, 0)) for k in range(1, order + 1)]
        self.sentences = self.target_tokens = 0

    def key_counts(self) -> dict[str, KeyCounts]:
        """The key tables by their names in a shard."""
        return {
            "lower_pairs": self.lower_pairs,
            "cased_pairs": self.cased_pairs,
            **{f"ngrams{k}": kc for k, kc in enumerate(self.ngrams, 1)},
        }

    def held(self) -> int:
        """Bytes the key tables hold in memory."""
        return sum(kc.held for kc in self.key_counts().values())

    def spill(self, scratch: Scratch) -> None:
        """Write every key table's counts held as a sorted run (``scratch``), and hold none. The vocabularies are
        compacted too (``Vocab.compact``): a large corpus' word types as Python strings would otherwise crowd the
        counts out of the memory share, and the runs would shrink to a few MiB each."""
        for name, kc in self.key_counts().items():
            kc.spill(scratch, name)
        for vocab in (self.tgt_lower, self.src_lower, self.target.ids, self.source.ids):
            vocab.compact(keep=KEEP_KNOWN)
        release()

    def _describe_target(self, words: list[str]) -> dict[str, list]:
        for w in words:
            if w in (BOS, EOS, UNK):
                raise ReservedToken(w)
        return {
            "lower": self.tgt_lower.add_all([casing.lower(w) for w in words]).tolist(),
            "letter": [casing.has_letter(w) for w in words],
            "punct": [casing.is_punctuation(w) for w in words],
            "end": [w in SENTENCE_END for w in words],
            "tag": [int(casing.tag(w)) for w in words],
        }

    def _describe_source(self, words: list[str]) -> dict[str, list]:
        return {
            "lower": self.src_lower.add_all([casing.lower(w) for w in words]).tolist(),
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
        self.forms = add_padded(self.forms, np.bincount(tt, minlength=V))
        self.initial = add_padded(self.initial, np.bincount(tt[tgt_start[first >= 0] + first[first >= 0]], minlength=V))
        self.punct = add_padded(self.punct, np.bincount(tt[:-1][follows], minlength=V))
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
            self.ngrams[k - 1].add_rows(np.stack([stream[end - (k - 1 - j)] for j in range(k)], axis=1))

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

    def shard(self) -> Shard:
        """Everything counted: the vocabularies and per-type arrays, and each key table's sorted runs."""
        V = len(self.target)
        arrays = {
            "format": np.array(FORMAT),
            "order": np.array(self.order),
            "target.words": text_array(list(self.target.ids)),
            "target.lower": self.target["lower"],
            "source.words": text_array(list(self.source.ids)),
            "source.lower": self.source["lower"],
            "tgt_lower.words": text_array(self.tgt_lower),
            "src_lower.words": text_array(self.src_lower),
            "forms": add_padded(self.forms, np.zeros(V, np.int64)),
            "initial": add_padded(self.initial, np.zeros(V, np.int64)),
            "punct": add_padded(self.punct, np.zeros(V, np.int64)),
            "tags": self.tags,
            "totals": np.array([self.sentences, self.target_tokens], dtype=np.int64),
        }
        return Shard(arrays, {name: kc.tables() for name, kc in self.key_counts().items()})


@dataclass
class Shard:
    """What a counter counted: ``arrays`` (vocabularies in order of first appearance, per-type counts, tag
    counts, totals; ``Counter.shard``) and ``tables``, each key table's sorted runs over those vocabularies' ids
    (their merge is the table's counts). ``owned``: the runs' files are scratch files, removed once merged."""

    arrays: dict[str, np.ndarray]
    tables: dict[str, list[Table]]
    owned: bool = False

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def __contains__(self, name: str) -> bool:
        return name in self.arrays


def table_names(order: int) -> list[str]:
    return ["lower_pairs", "cased_pairs"] + [f"ngrams{k}" for k in range(1, order + 1)]


def table_kind(name: str, dtype: np.dtype) -> KeyKind:
    """The kind of a stored key table, from its name and its keys' dtype."""
    if name.startswith("ngrams"):
        k = int(name[len("ngrams") :])
        return KeyKind(k, 63 // k if dtype == np.int64 else 0)
    return PAIRS


def widest(runs: Sequence[Table]) -> KeyKind:
    """The kind that holds the keys of every run (byte strings if any run has them)."""
    return KeyKind(runs[0].kind.width, min(r.kind.bits for r in runs))


def save_shard(out: str | IO[bytes], shard: Shard, scratch: Scratch, memory: Memory) -> None:
    """A shard as one file: its arrays, and each key table's runs merged into one sorted array (through files
    of ``scratch``, a block at a time)."""
    arrays: dict[str, object] = dict(shard.arrays)
    merged = []
    for name, runs in shard.tables.items():
        kind = widest(runs) if runs else table_kind(name, np.dtype(np.int64))
        rows = merge_rows(memory, len(runs), kind.dtype.itemsize + 8)
        table = collect(merge_blocks([renumbered_blocks(r, kind, rows) for r in runs]), kind, scratch.stem(name))
        merged.append(table)
        arrays[f"{name}.keys"], arrays[f"{name}.counts"] = table.keys, table.counts
    save_npz(out, arrays, digest=True)  # type: ignore[arg-type]
    remove(merged)
    if shard.owned:
        remove(t for runs in shard.tables.values() for t in runs)


def load_shard(path: str) -> Shard:
    """A shard count file's arrays, its key tables read from the file as they are merged (``save_shard``)."""
    try:
        z = MappedArrays(path, user_file=True)  # the user's file: reached through a symlink too
        fmt = int(z["format"]) if "format" in z else -1
    except (RecaserError, zipfile.BadZipFile, ValueError) as exc:
        raise RecaserError(f"not a shard count file ({getattr(exc, 'reason', exc)})", path) from None
    if fmt != FORMAT:
        raise RecaserError("a shard count file of another format (count it again with this moses-recaser)", path)
    if DIGEST not in z or str(z[DIGEST]) != z.digest():
        raise RecaserError(
            "the shard count file is damaged or was changed after counting (its checksum does not match): count "
            "this shard again",
            path,
        )
    order = int(z["order"])
    tables = {}
    for name in table_names(order):
        keys, counts = z.stored(f"{name}.keys"), z.stored(f"{name}.counts")
        tables[name] = [Table(table_kind(name, keys.dtype), keys, counts)]
    table_files = {f"{n}.{c}" for n in tables for c in ("keys", "counts")}
    return Shard({k: np.array(z[k]) for k in z if k not in table_files and k != DIGEST}, tables)


@dataclass
class Links:
    """The word links of a chunk's sentences, flat: sentence, source position, target position."""

    sentence: np.ndarray
    src: np.ndarray
    tgt: np.ndarray
    where: Callable[[int], tuple[str, int]] = field(default=lambda s: ("", 0))  # file and line of sentence s

    @classmethod
    def from_pairs(
        cls, per_sentence: Sequence[Sequence[tuple[int, int]]], where: Callable[[int], tuple[str, int]] | None = None
    ) -> Links:
        """The links of each sentence, (source, target) position pairs; ``where`` names a sentence's file line."""
        n = np.fromiter(map(len, per_sentence), dtype=np.int64, count=len(per_sentence))
        flat = np.fromiter(
            chain.from_iterable(chain.from_iterable(per_sentence)), dtype=np.int64, count=2 * int(n.sum())
        ).reshape(-1, 2)
        return cls(np.repeat(np.arange(len(per_sentence)), n), flat[:, 0], flat[:, 1], where or (lambda s: ("", 0)))

    def check(self, n_src: np.ndarray, n_tgt: np.ndarray) -> None:
        """Every link inside its sentence (``n_src``, ``n_tgt`` tokens), or an error naming the first that is not."""
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


def _tokens(lines: list[str]) -> list[list[str]]:
    """Moses' tokens of each line (spaces and tabs only): str.split where no other white space occurs."""
    if _OTHER_SPACE.search("\n".join(lines)):
        return [split_tokens(x) for x in lines]
    return [x.split() for x in lines]


def _links(lines: list[str], path: str, first_line: int) -> Links:
    """The links of alignment lines: plain ``i-j`` lines parsed as one text, others one by one (``parse_links``)."""
    text = "\n".join(lines) + "\n"
    if _LINK_BLOCK.fullmatch(text):
        n = np.fromiter(map(str.count, lines, repeat("-")), dtype=np.int64, count=len(lines))
        flat = np.fromstring(text.replace("-", " "), dtype=np.int64, sep=" ").reshape(-1, 2)
        return Links(np.repeat(np.arange(len(lines)), n), flat[:, 0], flat[:, 1], lambda s: (path, first_line + s))
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
    return Links.from_pairs(per, lambda s: (path, first_line + s))


def count_piece(
    piece: Piece,
    order: int,
    progress: Callable[[int], None] | None = None,
    exclude: Collection[str] = (),
    memory: Memory | None = None,
    scratch: Scratch | None = None,
) -> Shard:
    """Count one piece, a chunk of lines at a time; lines of target-language text whose tokens, joined by
    spaces, are in ``exclude`` (a dev set's reference) are left out. The key tables are spilled to ``scratch``
    as sorted runs whenever this process would pass ``memory`` (bytes beyond its size at the start), and
    every one of them at the end when ``memory`` is given."""
    counter = Counter(order)
    blocks = zip(*[piece_blocks(piece, k, CHUNK_LINES) for k in range(len(piece.files))])
    base = rss()
    done = 0
    for texts in blocks:
        n = len(texts[0])
        first_line = piece.first + done + 1
        try:
            if piece.bitext:
                src, tgt, align = texts
                counter.add(_tokens(tgt), _tokens(src), _links(align, piece.files[2], first_line))
            else:  # empty lines of target-language text are no sentences
                counter.add([x for x in _tokens(texts[0]) if x and not (exclude and " ".join(x) in exclude)])
        except ReservedToken as exc:
            target = _tokens(texts[1] if piece.bitext else texts[0])
            raise reserved_at(exc, target, piece.files[1 if piece.bitext else 0], lambda i: first_line + i) from None
        del texts
        done += n
        if memory is not None and scratch is not None and must_spill(counter, memory, base):
            counter.spill(scratch)
        if progress is not None:
            progress(n)
    if memory is not None and scratch is not None and scratch.directory is not None:
        counter.spill(scratch)
    return counter.shard()


def must_spill(counter: Counter, memory: Memory, base: int) -> bool:
    """Whether the counts held must go to disk: this process, with room for merging what it holds (its size
    again) and for the next chunk's Python objects, would pass ``memory`` beyond ``base``."""
    held = counter.held()
    return held > 0 and rss() - base + held + CHUNK_MARGIN > memory.bytes


CHUNK_MARGIN = 160 << 20  # a chunk of CHUNK_LINES lines as Python objects, with its numpy arrays
