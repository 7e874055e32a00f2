"""Word alignment at recasing time, from the model's own lowercase translation table: deterministic, in process.

Each direction is fast_align's model (Dyer, Chahuneau & Smith 2013, "A Simple, Fast, and Effective
Reparameterization of IBM Model 2"): a word links to the word of highest ``p(a = i) t(word | i)`` on the other side,
or to none when NULL scores higher, under the diagonal prior ``p(a_j = i) ∝ exp(-λ |i/m - j/n|)``. No EM is run:
``t`` is read from the links that training counted (``Tables.lower``: c(f, e) over the training alignment), with
one link spread by the unigram, ``t(e|f) = (c(f, e) + p0(e)) / (c(f) + 1)``, ``p0(e) = (c(e) + 1) / (N + |V| + 1)``,
and the same the other way round. Two words spelled the same (a name, a number), one of which training never
linked, are taken as a translation. The two directions are symmetrized as Moses' symal does (``symal.symmetrize``).

Every value is a function of its own sentence pair alone, computed element by element (the prior's normaliser in
closed form, not by a sum whose order could depend on the batch), so a sentence gets the same links in any batch
and at any ``jobs``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.triples import Link
from moses_recaser.stats.symal import symmetrize
from moses_recaser.stats.tables import TranslationTable

TENSION = 6.0  # fast_align's λ (its default 4, which its EM then fits)
P_NULL = 0.02  # fast_align's default is 0.08; at recasing time a word left unlinked loses its source evidence
SAME_SPELLING = 0.5  # t of two words spelled the same, one of which training never linked
OTHER = {"src": "tgt", "tgt": "src"}
CELLS = 1 << 16  # word pairs aligned at a time: their arrays take about 5 MB
MAX_TOKENS = 1024  # a pair with this many tokens on a side is not aligned (eflomal's limit: 1M cells take 110 MB)


def too_long(source: Sequence[str], target: Sequence[str]) -> bool:
    return max(len(source), len(target)) >= MAX_TOKENS


class TableAligner:
    """Aligns tokenized sentence pairs with the link counts of ``table`` (a model's ``Tables.lower``)."""

    def __init__(self, table: TranslationTable) -> None:
        self.table = table
        n_links = float(table.tgt_count.sum())
        # c(f) and c(e), and each side's unigram p0; a word the table lacks (id -1) reads the last entry
        self.total = {
            side: np.append(np.asarray(c, dtype=np.float64), 0.0)
            for side, c in (("src", table.src_total), ("tgt", table.tgt_count))
        }
        self.p0 = {side: (c + 1.0) / (n_links + len(c)) for side, c in self.total.items()}

    def align(
        self, sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]], method: str = "grow-diag-final-and"
    ) -> list[list[Link]]:
        """The symmetrized (source, target) links of each pair of token lists, aligned ``CELLS`` word pairs at a
        time (a pair's links are its own: the parts change nothing but the memory held). A pair with
        ``MAX_TOKENS`` or more on a side gets none (``too_long``), as eflomal gives none."""
        sources = [() if too_long(s, t) else s for s, t in zip(sources, targets)]
        out: list[list[Link]] = []
        start, cells = 0, 0
        for k, (s, t) in enumerate(zip(sources, targets)):
            if cells and cells + len(s) * len(t) > CELLS:
                out += self._align_part(sources[start:k], targets[start:k], method)
                start, cells = k, 0
            cells += len(s) * len(t)
        return out + self._align_part(sources[start:], targets[start:], method)

    def _align_part(
        self, sources: Sequence[Sequence[str]], targets: Sequence[Sequence[str]], method: str
    ) -> list[list[Link]]:
        words = {
            "src": [casing.lower(w) for s in sources for w in s],
            "tgt": [casing.lower(w) for t in targets for w in t],
        }
        ids = {"src": self.table.src_vocab.numbers(words["src"]), "tgt": self.table.tgt_vocab.numbers(words["tgt"])}
        lengths = {"src": [len(s) for s in sources], "tgt": [len(t) for t in targets]}
        grid = Grid(np.array(lengths["src"], np.int64), np.array(lengths["tgt"], np.int64))
        counts, same = self._cells(words, ids, grid)
        # each target word picks a source word (symal's b), each source word a target word (symal's a)
        picks = {
            "tgt": self._picks(counts, same, ids, grid, "tgt").tolist(),
            "src": self._picks(counts[grid.transposed], same[grid.transposed], ids, grid, "src").tolist(),
        }
        out, at = [], {"src": 0, "tgt": 0}
        for m, n in zip(lengths["src"], lengths["tgt"]):
            b = [(s, t) for t, s in enumerate(picks["tgt"][at["tgt"] : at["tgt"] + n]) if s >= 0]
            a = [(s, t) for s, t in enumerate(picks["src"][at["src"] : at["src"] + m]) if t >= 0]
            out.append(symmetrize(a, b, method))
            at["src"] += m
            at["tgt"] += n
        return out

    def _cells(
        self, words: dict[str, list[str]], ids: dict[str, np.ndarray], grid: Grid
    ) -> tuple[np.ndarray, np.ndarray]:
        """c(f_i, e_j) of each cell (target-major), and whether its two words count as spelled the same."""
        fw, ew = grid.words["tgt"]["src"], grid.words["tgt"]["tgt"]
        f, e = ids["src"][fw], ids["tgt"][ew]
        counts = np.zeros(len(f), dtype=np.float64)
        both = np.flatnonzero((f >= 0) & (e >= 0))
        if len(both) and len(self.table.pairs):
            pos, found = self.table.pairs.find(f[both] * len(self.table.tgt_vocab) + e[both])
            counts[both] = np.where(found, np.asarray(self.table.counts)[pos], 0)
        numbered: dict[str, int] = {}  # the batch's words numbered, to compare them as integers
        code = {
            side: np.array([numbered.setdefault(w, len(numbered)) for w in ws], np.int64) for side, ws in words.items()
        }
        alnum = np.array([any(c.isalnum() for c in w) for w in words["src"]], dtype=bool)
        same = (code["src"][fw] == code["tgt"][ew]) & alnum[fw] & ((f < 0) | (e < 0))
        return counts, same

    def _picks(
        self, counts: np.ndarray, same: np.ndarray, ids: dict[str, np.ndarray], grid: Grid, side: str
    ) -> np.ndarray:
        """For each word of ``side`` in the batch (the cells given in ``side``-major order): the position in its
        sentence of the word of the other side that it links to, or -1 for NULL."""
        other = OTHER[side]
        word, among = grid.words[side][side], grid.words[side][other]
        sizes = grid.other_length(side)  # a word's cells are contiguous, as many as the other side has words
        # the prior's position of each word, and its normaliser (a word's own)
        at = (grid.position[side] + 1) / grid.length[side]
        z = log_normaliser(grid.position[side] + 1, grid.length[side], np.maximum(sizes, 1)) - np.log1p(-P_NULL)
        t = (counts + self.p0[side][ids[side][word]]) / (self.total[other][ids[other][among]] + 1.0)
        score = np.log(np.maximum(t, np.where(same, SAME_SPELLING, 0.0)))
        score -= TENSION * np.abs((grid.position[other][among] + 1) / grid.length[other][among] - at[word])
        score -= z[word]
        starts = np.cumsum(sizes) - sizes
        best = np.full(len(sizes), -np.inf)
        some = np.flatnonzero(sizes > 0)
        if len(some):
            best[some] = np.maximum.reduceat(score, starts[some])
        hits = np.flatnonzero(score == best[word])
        linked, first = np.unique(word[hits], return_index=True)  # the first of equal bests
        link = np.full(len(sizes), -1, dtype=np.int64)
        link[linked] = grid.position[other][among[hits[first]]]
        null = np.log(P_NULL) + np.log(self.p0[side][ids[side]])
        return np.where(best > null, link, -1)


def log_normaliser(j: np.ndarray, n: np.ndarray, m: np.ndarray) -> np.ndarray:
    """log Σ_{i=1..m} exp(-λ |i/m - j/n|), fast_align's normaliser, as two geometric series in closed form."""
    k = (j * m) // n  # the i with i/m <= j/n
    x, step = j / n, TENSION / m
    below = np.exp(step - TENSION * x) * np.expm1(step * k) / np.expm1(step)
    above = np.exp(TENSION * x - step * (k + 1)) * np.expm1(-step * (m - k)) / np.expm1(-step)
    return np.log(below + above)


class Grid:
    """Every (source word, target word) cell of a batch of sentence pairs, by the batch's flat word indices:
    ``words[major][side]``, with the cells grouped by the words of ``major``, sentence by sentence."""

    def __init__(self, m: np.ndarray, n: np.ndarray) -> None:
        self.m, self.n = m, n
        start = {"src": np.cumsum(m) - m, "tgt": np.cumsum(n) - n}
        self.length = {"src": np.repeat(m, m), "tgt": np.repeat(n, n)}  # each word's sentence length
        self.position = {
            s: np.arange(len(self.length[s])) - np.repeat(start[s], v) for s, v in (("src", m), ("tgt", n))
        }
        cells = m * n
        first = np.repeat(np.cumsum(cells) - cells, cells)
        sent = np.repeat(np.arange(len(m)), cells)
        local = np.arange(len(sent)) - first
        mm, nn, f0, e0 = m[sent], n[sent], start["src"][sent], start["tgt"][sent]
        self.words = {
            "tgt": {"src": f0 + local % mm, "tgt": e0 + local // mm},  # local = j * m + i
            "src": {"src": f0 + local // nn, "tgt": e0 + local % nn},  # local = i * n + j
        }
        self.transposed = first + (local % nn) * mm + local // nn  # each source-major cell's target-major index

    def other_length(self, side: str) -> np.ndarray:
        """For each word of ``side``: the length of its sentence's other side."""
        return np.repeat(self.m, self.n) if side == "tgt" else np.repeat(self.n, self.m)
