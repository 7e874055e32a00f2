"""The candidate lattice of a batch of sentences, in flat form.

Every candidate of every position of every sentence is one row, in order: its id, its unary feature
values, and the LM over the batch's state cells (``viterbi``). Recasing decodes it directly
(``best_paths``); training pads its sentences into tensors of equal length (``crf.make_batches``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from moses_recaser.core.vocab import Vocab
from moses_recaser.model import viterbi
from moses_recaser.model.viterbi import Cells, SplitLM


@dataclass
class Flat:
    ids: np.ndarray  # (C,) candidate ids (extractor.FeatureExtractor.candidates)
    per_pos: np.ndarray  # (N,) candidates per position
    n_pos: np.ndarray  # (S,) positions per sentence
    unary: np.ndarray  # (C, D) unary feature values
    cells: Cells
    lm: SplitLM
    bilingual: np.ndarray  # (S,) bool: the sentence has a source
    gold: list[np.ndarray | None]  # per sentence, the reference's candidate index per position (training)
    gen_misses: list[int]  # per sentence, positions whose reference GEN did not give (training)
    fixed: dict[int, str] = field(default_factory=dict)  # positions (flat) a constraint fixed, and its name

    def scores(self, w: np.ndarray) -> np.ndarray:
        """Each candidate's unary score (C,): its features times ``w``, one weight vector (k,) for all, or one per
        candidate (C, k). By einsum, not ``@``: a library caller's numpy has OpenBLAS threads, which spin on the
        other cores after each product (1.6 s of CPU for 1.0 s of recasing newstest2014); einsum's loop runs at
        one BLAS thread's speed here."""
        return np.einsum("ck,k->c" if w.ndim == 1 else "ck,ck->c", self.unary, w)

    def best_paths(self, phi: np.ndarray, lm_weight: np.ndarray) -> list[np.ndarray]:
        """Viterbi: per sentence, the best candidate index per position, for unary scores ``phi`` (C,)
        and each sentence's LM weight."""
        return viterbi.viterbi(self.cells, self.lm, lm_weight, phi, self.n_pos)

    def words(self, paths: Sequence[np.ndarray], strings: Vocab) -> list[list[str]]:
        """Per sentence, the candidates that ``paths`` choose (an index per position)."""
        if not len(self.per_pos):
            return [[] for _ in paths]
        chosen = strings.strings(self.ids[np.cumsum(self.per_pos) - self.per_pos + np.concatenate(paths)])
        out, p0 = [], 0
        for n in self.n_pos.tolist():
            out.append(chosen[p0 : p0 + n])
            p0 += n
        return out

    def candidates(self, strings: Vocab) -> list[list[list[str]]]:
        """Per sentence, per position, its candidates' strings."""
        ids = self.ids.tolist()
        out, c0 = [], 0
        sizes = iter(self.per_pos.tolist())
        for n in self.n_pos.tolist():
            sentence = []
            for _ in range(n):
                k = next(sizes)
                sentence.append([strings[i] for i in ids[c0 : c0 + k]])
                c0 += k
            out.append(sentence)
        return out
