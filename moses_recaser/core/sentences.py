"""Sentences a batch at a time: their tokens as flat arrays (``Layout``) and the facts computed on them.

Counting the tables, building lattices and the baselines all ask the same questions of a sentence:
which is its first word with a letter, which capitals are due to position (the first word with a
letter, and the first after ``.``, ``!`` or ``?``), and whether a line reads as a headline. Each is
answered here once, with numpy over a whole batch; the one-sentence definitions they implement are
kept in the tests as the oracle.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import TypeVar

import numpy as np

from moses_recaser.core import casing

T = TypeVar("T")
SENTENCE_END = frozenset({".", "!", "?"})
# a line ending in none of these reads as a headline (when it is short enough)
FINAL = frozenset({".", "!", "?", ":", ";", "…", "&quot;", "&apos;", "»", '"', "'", ")", "&#93;"})
HEADLINE_MAX = 20


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last may be shorter)."""
    chunk: list[T] = []
    for x in items:
        chunk.append(x)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@dataclass
class Layout:
    """Where each sentence's words lie in the batch's flat token arrays (S sentences; N target and M source
    words in all). For batches of plain token lists, the lists are the targets and there are no sources."""

    n_tgt: np.ndarray  # (S,) target words per sentence
    n_src: np.ndarray  # (S,) source words per sentence
    tgt_sent: np.ndarray  # (N,) sentence of each target word
    src_sent: np.ndarray  # (M,) sentence of each source word
    tgt_start: np.ndarray  # (S,) first target word of each sentence
    src_start: np.ndarray  # (S,) first source word of each sentence

    @classmethod
    def from_sentences(cls, targets: Sequence[Sequence[str]], sources: Sequence[Sequence[str]] | None = None) -> Layout:
        S = len(targets)
        n_tgt = np.fromiter(map(len, targets), dtype=np.int64, count=S)
        n_src = np.zeros(S, np.int64) if sources is None else np.fromiter(map(len, sources), dtype=np.int64, count=S)
        return cls(
            n_tgt=n_tgt,
            n_src=n_src,
            tgt_sent=np.repeat(np.arange(S), n_tgt),
            src_sent=np.repeat(np.arange(S), n_src),
            tgt_start=np.cumsum(n_tgt) - n_tgt,
            src_start=np.cumsum(n_src) - n_src,
        )


def first_in_sentence(mask: np.ndarray, sent: np.ndarray, start: np.ndarray) -> np.ndarray:
    """(S,) the position within its sentence of each sentence's first word with ``mask`` (-1: none)."""
    out = np.full(len(start), -1, dtype=np.int64)
    where = np.flatnonzero(mask)
    s, first = np.unique(sent[where], return_index=True)
    out[s] = where[first] - start[s]
    return out


def after_a_number(first: np.ndarray, words: Sequence[str], start: np.ndarray) -> np.ndarray:
    """``first`` (``first_in_sentence`` of the words with a letter), with -1 for a sentence whose first word with
    a letter comes after a number: the number starts the sentence, and the word after it takes no capital for
    its position ("30 proposals were ...": 47 of 52 such lines of newstest 2008-14's English)."""
    out = first.copy()
    for s in np.flatnonzero(first > 0).tolist():
        g = int(start[s])
        if any(c.isdigit() for w in words[g : g + int(first[s])] for c in w):
            out[s] = -1
    return out


def positional(letter: np.ndarray, end: np.ndarray, sent_start: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Per word: its capital is due to its position, the first word with a letter of its sentence
    (sentences start at ``sent_start``, ``n`` words long) or the first with a letter after ``.``, ``!``,
    ``?`` (``end``)."""
    segment_start = end.copy()
    segment_start[sent_start[n > 0]] = True
    segment = np.cumsum(segment_start)  # a new segment at each sentence start and sentence-end token
    where = np.flatnonzero(letter)
    out = np.zeros(len(letter), dtype=bool)
    out[where[np.unique(segment[where], return_index=True)[1]]] = True
    return out


def headline_flags(
    letter: np.ndarray,
    final: np.ndarray,
    capitalized: np.ndarray,
    long: np.ndarray,
    sent: np.ndarray,
    start: np.ndarray,
    n: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(S,) of each line: (looks like a headline: it has a letter, at most HEADLINE_MAX tokens and no FINAL
    token at its end; is title-cased: at least two words of more than three characters with a letter
    after its first word with a letter, and 60% of them capitalized)."""
    S = len(n)
    any_letter = np.bincount(sent, weights=letter, minlength=S) > 0
    last = start + n - 1
    has = n > 0
    headline = any_letter & (n <= HEADLINE_MAX)
    headline[has] &= ~final[last[has]]
    first = first_in_sentence(letter, sent, start)
    after_first = np.arange(len(sent)) - start[sent] > first[sent]
    longer = after_first & letter & long
    n_longer = np.bincount(sent, weights=longer, minlength=S)
    n_cap = np.bincount(sent, weights=longer & capitalized, minlength=S)
    title = any_letter & (n_longer >= 2) & (n_cap >= 0.6 * n_longer)
    return headline, title


def _column(tokens: list[str], test: object) -> np.ndarray:
    return np.fromiter(map(test, tokens), dtype=bool, count=len(tokens))  # type: ignore[call-overload]


def positional_words(sentences: Sequence[Sequence[str]]) -> list[set[int]]:
    """For each sentence, the positions whose capital is due to position (``positional``)."""
    layout = Layout.from_sentences(sentences)
    tokens = list(chain.from_iterable(sentences))
    pos = positional(
        _column(tokens, casing.has_letter), _column(tokens, SENTENCE_END.__contains__), layout.tgt_start, layout.n_tgt
    )
    flat = np.flatnonzero(pos)
    sent = layout.tgt_sent[flat]
    out: list[set[int]] = [set() for _ in sentences]
    for s, k in zip(sent.tolist(), (flat - layout.tgt_start[sent]).tolist()):
        out[s].add(k)
    return out


def first_letters(sentences: Sequence[Sequence[str]]) -> list[int]:
    """For each sentence, the position of its first word with a letter (-1: none)."""
    layout = Layout.from_sentences(sentences)
    tokens = list(chain.from_iterable(sentences))
    return first_in_sentence(_column(tokens, casing.has_letter), layout.tgt_sent, layout.tgt_start).tolist()


def headline_lines(sentences: Sequence[Sequence[str]]) -> list[tuple[bool, bool]]:
    """For each line, (looks like a headline, is title-cased) (``headline_flags``)."""
    layout = Layout.from_sentences(sentences)
    tokens = list(chain.from_iterable(sentences))
    headline, title = headline_flags(
        _column(tokens, casing.has_letter),
        _column(tokens, FINAL.__contains__),
        _column(tokens, casing.is_capitalized),
        _column(tokens, lambda w: len(w) > 3),
        layout.tgt_sent,
        layout.tgt_start,
        layout.n_tgt,
    )
    return list(zip(headline.tolist(), title.tolist()))


HYPHEN = "@-@"  # the hyphen inside a word, as Moses' tokenizer -a splits it off


def source_spans(source: Sequence[str], target: Sequence[str], unseen: Sequence[bool] | None = None) -> list[int]:
    """For each target position, the source position whose word it copies when it lies in a run of >= 2
    words with a letter that the source repeats verbatim up to case (-1: none; the longest run wins,
    then the first). A word that training's target never had (``unseen``) and the source writes in lowercase does
    not count among the two: a decoder passes a word it cannot translate through as it is, so "veraltete System"
    in its output is no copied name, while "The Next Day" stays a title whether training saw its words or not."""
    src = list(map(str.lower, source))  # casing.lower, mapped in C: this runs on every sentence
    tgt = list(map(str.lower, target))
    common = set(src).intersection(tgt)
    out = [-1] * len(tgt)
    if len(common) < 2:
        return out
    where: dict[str, list[int]] = {}
    for k, w in enumerate(src):
        if w in common:
            where.setdefault(w, []).append(k)
    best = [0] * len(tgt)
    for i, w in enumerate(tgt):
        for k in where.get(w, ()):
            if i and k and tgt[i - 1] == src[k - 1]:
                continue  # not the start of a run
            n = 0
            while i + n < len(tgt) and k + n < len(src) and tgt[i + n] == src[k + n]:
                n += 1
            if n < 2 or sum(_counts_toward_copy(tgt, i + d, source[k + d], unseen) for d in range(n)) < 2:
                continue
            for d in range(n):
                if n > best[i + d]:
                    best[i + d], out[i + d] = n, k + d
    return out


def _counts_toward_copy(tgt: Sequence[str], j: int, source_word: str, unseen: Sequence[bool] | None) -> bool:
    """Target word ``j`` of a run counts toward a copied name or title (``source_spans``). A part joined to the
    word before by Moses' hyphen ("Super @-@ Tunnel") is one word with it: German capitalizes every part of a
    compound noun, not only of a name."""
    if not casing.has_letter(tgt[j]) or (j and tgt[j - 1] == HYPHEN):
        return False
    return not (unseen is not None and unseen[j] and source_word == source_word.lower())


def capital_runs(words: Sequence[str], at_start: Sequence[bool]) -> list[bool]:
    """Per word: it and a word beside it both begin with a capital where no sentence starts ('Chinese Embassy',
    'Class A'): a name the MT system cased as one, which a language model of its common words would break up."""
    cap = [casing.is_capitalized(w) and not f for w, f in zip(words, at_start)]
    return [c and ((j > 0 and cap[j - 1]) or (j + 1 < len(cap) and cap[j + 1])) for j, c in enumerate(cap)]
