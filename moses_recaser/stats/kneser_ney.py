"""Interpolated modified Kneser-Ney n-gram estimation, as KenLM's ``lmplz`` does it, written as ARPA.

The steps mirror lmplz's pipeline (kenlm/lm/builder):

1. n-gram counts of every order (``counter``), each sentence padded as ``<s> w1 ... wn </s>`` (one ``<s>``);
2. adjusted counts (adjust_counts.cc): the highest order keeps raw counts; a lower-order n-gram
   gets the number of distinct words seen to its left, except n-grams that begin with ``<s>``,
   which keep their raw count (nothing can stand left of ``<s>``);
3. three discounts per order from the counts of adjusted counts t1..t4:
   ``Y = t1 / (t1 + 2 t2)``, ``D_k = k - (k + 1) Y t_{k+1} / t_k`` for k = 1, 2, 3+;
4. initial probabilities (initial_probabilities.cc), per context c:
   ``u(w|c) = (a(cw) - D(a(cw))) / sum_x a(cx)`` and
   ``gamma(c) = (D1 N1(c) + D2 N2(c) + D3 N3+(c)) / sum_x a(cx)``;
5. interpolation (interpolate.cc): ``p(w|c) = u(w|c) + gamma(c) p(w|c')`` with c' the context
   less its first word, down to unigrams, which interpolate with the uniform distribution
   over the vocabulary (``<s>`` excluded, ``<unk>`` included);
6. ARPA: log10 p, and log10 gamma as the backoff of every n-gram that is a context.

Pruning (``prune`` = T, lmplz's ``--prune 0 ... 0 T`` as train-recaser.perl runs it with T = 1): n-grams of the
highest order seen at most T times are left out. As in lmplz, their counts still make the adjusted counts and
the discounts, and their context's denominator; the mass they would have had goes to the context's backoff:
``gamma(c) = (sum over kept cw of D(a(cw)) + sum over pruned cw of a(cw)) / sum_x a(cx)``.

The n-grams come as sorted tables (``merge.Counts``: keys that sort as their words do, an n-gram's index its
rank). The orders below the highest are held in memory (keys, adjusted counts, probabilities, backoffs: about
32 bytes an n-gram, checked against ``--memory``); the highest order, the largest, is read from its table a
block at a time: once for its adjusted-count statistics, once for its contexts' backoffs, once for its
probabilities. Blocks are cut where a context ends, so every sum is taken in the order one pass over all
n-grams takes it: the numbers do not depend on the memory.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Protocol

import numpy as np

from moses_recaser.core.memory import Memory
from moses_recaser.io.diskarrays import whole
from moses_recaser.io.errors import RecaserError
from moses_recaser.stats.runs import Block, KeyKind, Table

if TYPE_CHECKING:
    from moses_recaser.stats.merge import Counts

log = logging.getLogger(__name__)

BOS_ID = 1  # <unk>, <s>, </s> take ids 0, 1, 2 (as lmplz numbers them)
BLOCK_ROWS = 1 << 18  # n-grams of the highest order read at a time (more when a context is larger)
LEVEL_BYTES = 41  # bytes an n-gram below the highest order holds: key, adjusted count, p, gamma, a flag

# lmplz --discount_fallback's default discounts, for corpora too small to estimate them
FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)


class NGramSink(Protocol):
    """What takes the estimated n-grams besides the ARPA file (``arpa_arrays.ArrayLMWriter``): per order, the
    words of a block of n-grams, their log10 probabilities and backoffs as the ARPA file prints them, and for
    the orders below the highest, whether a kept n-gram extends each."""

    def add(
        self, order: int, rows: np.ndarray, lp: list[str], bo: list[str] | None, extended: np.ndarray | None
    ) -> None: ...


@dataclass
class Estimate:
    """What an estimate reports: the discounts of every order, and the n-grams written per order."""

    discounts: list[tuple[float, float, float]]
    written: list[int] = field(default_factory=list)


@dataclass
class _Level:
    """An order below the highest, in memory: sorted keys (an n-gram's index is its rank), adjusted counts,
    interpolated probabilities, backoff weights as contexts (1 where not a context), and whether a kept n-gram
    of the next order extends it."""

    kind: KeyKind
    keys: np.ndarray
    adjusted: np.ndarray
    p: np.ndarray = field(default_factory=lambda: np.zeros(0))
    gamma: np.ndarray = field(default_factory=lambda: np.zeros(0))
    extended: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def index(self, rows: np.ndarray) -> np.ndarray:
        """The index of each n-gram (rows of ids), every one of them present."""
        if self.kind.width == 1:
            return rows[:, 0]
        return np.searchsorted(self.keys, self.kind.pack(rows))


def _discounts(t: np.ndarray, n: int, fallback: bool) -> tuple[float, float, float]:
    """Discounts from t1..t4, the counts of adjusted counts 1-4 (``t[1:5]``)."""
    t1, t2, t3, t4 = (int(x) for x in t[1:5])
    problem = None
    if min(t1, t2, t3, t4) == 0:
        problem = f"counts of adjusted counts 1-4 are {t1}, {t2}, {t3}, {t4}"
    else:
        y = t1 / (t1 + 2.0 * t2)
        d = (1 - 2 * y * t2 / t1, 2 - 3 * y * t3 / t2, 3 - 4 * y * t4 / t3)
        bad = [f"D{k}={v:.4f}" for k, v in enumerate(d, 1) if not 0.0 < v <= k]
        if not bad:
            return d
        problem = f"discount {', '.join(bad)} out of range"
    if fallback:
        log.warning("order %d: %s; using lmplz's fallback discounts %s", n, problem, FALLBACK_DISCOUNTS)
        return FALLBACK_DISCOUNTS
    raise RecaserError(
        f"cannot estimate Kneser-Ney discounts for order {n}: {problem} (the corpus is too small for this "
        "order; lmplz's --discount_fallback, here `discount_fallback`, uses 0.5 1 1.5)"
    )


def _count_of_counts(adjusted: np.ndarray) -> np.ndarray:
    return np.bincount(np.minimum(adjusted[adjusted > 0], 5), minlength=6)


def _in_groups(table: Table, n: int, rows: int) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """The table's n-grams a block at a time, each block ending where a context (the first n-1 words) ends,
    with the index of its first n-gram."""
    at = 0
    carry: Block | None = None
    for keys, counts in table.blocks(rows):
        if carry is not None:
            keys, counts = np.concatenate([carry[0], keys]), np.concatenate([carry[1], counts])
        if n == 1:
            cut = len(keys)
        else:
            ctx = table.kind.unpack(keys[-1:])[:, :-1]
            last = table.kind.unpack(keys)[:, :-1]
            same = (last == ctx).all(axis=1)
            cut = int(np.flatnonzero(~same)[-1]) + 1 if not same.all() else 0
        if cut:
            yield at, keys[:cut], counts[:cut]
            at += cut
        carry = (keys[cut:], counts[cut:])
    if carry is not None and len(carry[0]):
        yield at, carry[0], carry[1]


def _disc(a: np.ndarray, d: tuple[float, float, float]) -> np.ndarray:
    return np.select([a == 0, a == 1, a == 2], [0.0, d[0], d[1]], d[2])


@dataclass
class _Pass:
    """One context-complete block of order n: its rows, adjusted counts as floats, the index of each n-gram's
    context and suffix in order n-1, its discount, what is kept, and per context in [c0, c0 + len(total)):
    the total adjusted count, the discounted (and pruned) mass, and the kept n-grams."""

    rows: np.ndarray
    a: np.ndarray
    ctx: np.ndarray
    suffix: np.ndarray
    disc: np.ndarray
    kept: np.ndarray
    c0: int
    total: np.ndarray
    mass: np.ndarray
    n_kept: np.ndarray

    @property
    def gamma(self) -> np.ndarray:
        return self.mass / np.where(self.total > 0, self.total, 1.0)

    def probabilities(self, lower: _Level) -> np.ndarray:
        """p(w | c) of the block's n-grams (kept or not)."""
        local = self.ctx - self.c0
        safe = np.where(self.total > 0, self.total, 1.0)
        u = (self.a - self.disc) / safe[local]
        return u + self.gamma[local] * lower.p[self.suffix]


def _block_pass(
    n: int,
    kind: KeyKind,
    keys: np.ndarray,
    adjusted: np.ndarray,
    raw: np.ndarray,
    lower: _Level,
    d: tuple[float, float, float],
    prune: int,
) -> _Pass:
    """The sums of one context-complete block of order n >= 2 (see ``_Pass``)."""
    rows = kind.unpack(keys)
    a = adjusted.astype(np.float64)
    ctx, suffix = lower.index(rows[:, :-1]), lower.index(rows[:, 1:])
    disc = _disc(a, d)
    kept = raw > prune if prune else np.ones(len(a), dtype=bool)
    mass = np.where(kept, disc, a)  # a pruned n-gram's whole count goes to its context's backoff
    c0 = int(ctx[0])
    local = ctx - c0
    m = int(local[-1]) + 1
    return _Pass(
        rows=rows,
        a=a,
        ctx=ctx,
        suffix=suffix,
        disc=disc,
        kept=kept,
        c0=c0,
        total=np.bincount(local, weights=a, minlength=m),
        mass=np.bincount(local, weights=mass, minlength=m),
        n_kept=np.bincount(local[kept], minlength=m),
    )


def _levels(counts: Counts, memory: Memory) -> list[_Level]:
    """The orders below the highest, in memory, with their adjusted counts (left types, from the order above;
    raw counts for n-grams that begin with <s>)."""
    N, V = counts.order, len(counts.forms) + 3
    held = sum(len(t) for t in counts.ngrams[1:-1]) + V
    memory.need(LEVEL_BYTES * held, f"the LM's {held:,} n-grams of orders 1 to {N - 1}")
    levels = []
    for n in range(1, N):
        t = counts.ngrams[n - 1]
        if n == 1:
            levels.append(_Level(KeyKind(1, 63), np.arange(V, dtype=np.int64), _unigram_counts(t, V)))
        else:
            levels.append(_Level(t.kind, whole(t.keys), whole(t.counts).astype(np.int64)))
    for n in range(1, N):
        level, above = levels[n - 1], counts.ngrams[n]
        left = np.zeros(len(level.keys), dtype=np.int64)
        for keys, _ in above.blocks(4 * BLOCK_ROWS):
            idx = level.index(above.kind.unpack(keys)[:, 1:])
            left += np.bincount(idx, minlength=len(left))
        first = level.keys == BOS_ID if n == 1 else level.kind.unpack(level.keys)[:, 0] == BOS_ID
        level.adjusted = np.where(first, level.adjusted, left)
    return levels


def estimate(
    counts: Counts,
    out: IO[str],
    discount_fallback: bool = False,
    prune: int = 0,
    sink: NGramSink | None = None,
    memory: Memory | None = None,
) -> Estimate:
    """Estimate the LM of ``counts`` and write it to ``out`` as ARPA (unigrams in vocabulary order, like lmplz;
    higher orders in the order of their words' ids); ``sink`` gets every n-gram too. See the module docstring."""
    memory = memory or Memory.unbounded()
    words = counts.lm_vocab()
    N, V = counts.order, len(words)
    vocab = np.array(words, dtype=object)
    if prune < 0:
        raise RecaserError(f"the pruning threshold must be 0 (none) or more, not {prune}")
    levels = _levels(counts, memory)
    top = counts.ngrams[N - 1]
    top_t = np.zeros(6, dtype=np.int64)
    for _, c in top.blocks(BLOCK_ROWS):
        top_t += _count_of_counts(c)
    if N == 1:
        top_t = _count_of_counts(_unigram_counts(top, V))
    t = [_count_of_counts(lv.adjusted) for lv in levels] + [top_t]
    discounts = [_discounts(t[n - 1], n, discount_fallback) for n in range(1, N + 1)]
    report = Estimate(discounts)
    if N == 1:
        _write_unigrams_only(counts, vocab, discounts[0], out, sink, report)
        return report
    _unigram_probabilities(levels[0], discounts[0], V)
    for n in range(2, N):
        _lower_order(counts.ngrams[n - 1], n, levels, discounts[n - 1])
    kept = _top_contexts(top, N, levels[-1], discounts[-1], prune)
    sizes = [len(lv.keys) for lv in levels] + [kept]
    out.write("\\data\\\n")
    out.writelines(f"ngram {n}={sizes[n - 1]}\n" for n in range(1, N + 1))
    for n, level in enumerate(levels, 1):
        _write_level(n, level, vocab, out, sink)
        report.written.append(len(level.keys))
        if n < N - 1:  # what is left of the level once the next order is done
            level.keys, level.adjusted, level.gamma = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    levels[-1].gamma = levels[-1].adjusted = np.zeros(0)
    report.written.append(_write_top(top, N, levels[-1], discounts[-1], prune, vocab, out, sink))
    out.write("\n\\end\\\n")
    return report


def _unigram_counts(table: Table, V: int) -> np.ndarray:
    raw = np.zeros(V, dtype=np.int64)
    raw[table.kind.unpack(whole(table.keys))[:, 0]] = whole(table.counts)
    return raw


def _unigram_probabilities(level: _Level, d: tuple[float, float, float], V: int) -> np.ndarray:
    """p of every unigram (interpolated with the uniform distribution over the vocabulary less <s>); returns the
    backoff numerator's gamma of the empty context."""
    a = level.adjusted.astype(np.float64)
    disc = _disc(a, d)
    ctx = np.zeros(len(a), dtype=np.int64)
    total = np.bincount(ctx, weights=a, minlength=1)
    safe = np.where(total > 0, total, 1.0)
    gamma = np.bincount(ctx, weights=disc, minlength=1) / safe
    p = (a - disc) / safe[ctx] + gamma[0] / (V - 1)
    p[BOS_ID] = 1.0  # never predicted; lmplz writes log10 p(<s>) as 0
    level.p = p
    level.gamma = np.ones(len(a))
    level.extended = np.zeros(len(a), dtype=bool)
    return gamma


def _lower_order(table: Table, n: int, levels: list[_Level], d: tuple[float, float, float]) -> None:
    """p of order n < N (in memory), and the backoffs of order n - 1 as contexts."""
    level, lower = levels[n - 1], levels[n - 2]
    level.p = np.zeros(len(level.keys))
    level.gamma = np.ones(len(level.keys))
    level.extended = np.zeros(len(level.keys), dtype=bool)
    for at, keys, raw in _in_groups(table, n, BLOCK_ROWS):
        b = _block_pass(n, table.kind, keys, level.adjusted[at : at + len(keys)], raw, lower, d, 0)
        level.p[at : at + len(keys)] = b.probabilities(lower)
        _set_contexts(lower, b)


def _set_contexts(lower: _Level, b: _Pass) -> None:
    """The backoffs of a block's contexts (1 where there is nothing to back off from), and which a kept n-gram
    extends."""
    span = slice(b.c0, b.c0 + len(b.total))
    lower.gamma[span] = np.where(b.total > 0, b.gamma, 1.0)
    lower.extended[span] = b.n_kept > 0


def _top_contexts(top: Table, N: int, lower: _Level, d: tuple[float, float, float], prune: int) -> int:
    """The backoffs of the highest order's contexts (one pass over it); the number of n-grams kept."""
    kept = 0
    for _, keys, raw in _in_groups(top, N, BLOCK_ROWS):
        b = _block_pass(N, top.kind, keys, raw, raw, lower, d, prune)
        _set_contexts(lower, b)
        kept += int(b.kept.sum())
    return kept


def _printed(values: np.ndarray) -> list[str]:
    """Numbers as the ARPA file prints them: 7 significant digits, and 0 as "0" (never "-0")."""
    return list(map("{:.7g}".format, np.where(values == 0, 0.0, values).tolist()))


def _texts(rows: np.ndarray, vocab: np.ndarray) -> list[str]:
    """The n-grams of rows of word ids (``vocab``: the words as an object array), words joined by spaces."""
    return list(map(" ".join, zip(*[vocab[rows[:, j]].tolist() for j in range(rows.shape[1])])))


def _write_level(n: int, level: _Level, vocab: np.ndarray, out: IO[str], sink: NGramSink | None) -> None:
    """Section n of the ARPA file (an order below the highest), ``BLOCK_ROWS`` n-grams at a time."""
    out.write(f"\n\\{n}-grams:\n")
    for start in range(0, len(level.keys), BLOCK_ROWS):
        end = min(start + BLOCK_ROWS, len(level.keys))
        rows = level.keys[start:end].reshape(-1, 1) if n == 1 else level.kind.unpack(level.keys[start:end])
        lps = _printed(np.log10(level.p[start:end]))
        bos = _printed(np.log10(level.gamma[start:end]))
        texts = _texts(rows, vocab)
        out.write("".join(f"{lp}\t{text}\t{bo}\n" for lp, text, bo in zip(lps, texts, bos)))
        if sink is not None:
            sink.add(n, rows, lps, bos, level.extended[start:end])


def _write_top(
    top: Table,
    N: int,
    lower: _Level,
    d: tuple[float, float, float],
    prune: int,
    vocab: np.ndarray,
    out: IO[str],
    sink: NGramSink | None,
) -> int:
    """Section N of the ARPA file: the highest order's kept n-grams, a context-complete block at a time."""
    out.write(f"\n\\{N}-grams:\n")
    written = 0
    for _, keys, raw in _in_groups(top, N, BLOCK_ROWS):
        b = _block_pass(N, top.kind, keys, raw, raw, lower, d, prune)
        p = b.probabilities(lower)[b.kept]
        rows = b.rows[b.kept]
        lps = _printed(np.log10(p))
        out.write("".join(f"{lp}\t{text}\n" for lp, text in zip(lps, _texts(rows, vocab))))
        if sink is not None:
            sink.add(N, rows, lps, None, None)
        written += len(rows)
    return written


def _write_unigrams_only(
    counts: Counts,
    vocab: np.ndarray,
    d: tuple[float, float, float],
    out: IO[str],
    sink: NGramSink | None,
    report: Estimate,
) -> None:
    """A unigram LM: raw counts are the adjusted counts, no backoffs."""
    V = len(vocab)
    level = _Level(KeyKind(1, 63), np.arange(V, dtype=np.int64), _unigram_counts(counts.ngrams[0], V))
    _unigram_probabilities(level, d, V)
    out.write("\\data\\\n")
    out.write(f"ngram 1={V}\n")
    out.write("\n\\1-grams:\n")
    lps = _printed(np.log10(level.p))
    out.write("".join(f"{lp}\t{w}\n" for lp, w in zip(lps, vocab)))
    if sink is not None:
        sink.add(1, level.keys.reshape(-1, 1), lps, None, None)
    out.write("\n\\end\\\n")
    report.written.append(V)


def log_discounts(report: Estimate) -> str:
    return ", ".join("/".join(f"{d:.3f}" for d in ds) for ds in report.discounts)
