"""Baseline capitalizers, with the CRF recaser's interface (``systems.Capitalizer``); ``systems.SYSTEMS``
names them.

- ``UnigramRecaser``: each word's most frequent training form, the sentence's first word with a letter
  capitalized (paper section 2);
- ``TrigramRecaser``: Lita et al. (2003), exact Viterbi over GEN with the cased modified-KN LM alone,
  then the sentence-initial rule (the paper's "strong baseline");
- ``MosesTruecaserBaseline``: sacremoses' MosesTruecaser trained on the same tokenized target corpus (the
  Python API on token lists), then the Moses detruecase rule (first word, and words after . ? ! :, upper);
- ``CopySourceBaseline``: the truecaser, then the case of source words copied.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.sentences import first_letters, positional_words
from moses_recaser.core.triples import Triple, lowered
from moses_recaser.io.modeldir import read_manifest
from moses_recaser.model.batch import gc_paused
from moses_recaser.model.extractor import FeatureExtractor
from moses_recaser.model.gen import MAX_CANDIDATES
from moses_recaser.model.recaser import load_model_lm
from moses_recaser.stats.tables import Tables


def _initial_rule(sentences: list[list[str]]) -> list[list[str]]:
    """Each sentence's first word with a letter capitalized (in place)."""
    for tokens, i in zip(sentences, first_letters(sentences)):
        if i >= 0 and not casing.is_capitalized(tokens[i]):
            tokens[i] = casing.upper_first(tokens[i])
    return sentences


class UnigramRecaser:
    def __init__(self, model_dir: str | os.PathLike[str]) -> None:
        self.manifest = read_manifest(model_dir)
        self.signature = f"unigram|{self.manifest.signature}"
        tables = Tables.load(Path(model_dir))
        self.best = {k: tables.forms.vocab[ids[0]] for k, ids in tables.forms.by_lower().items()}

    def recase_triples(self, triples: Sequence[Triple]) -> list[list[str]]:
        out = []
        for t in triples:
            toks = []
            for w in t.target:
                form = self.best.get(casing.lower(w))
                toks.append(form if form is not None and casing.is_recasing_of(form, w) else casing.lower_all(w))
            out.append(toks)
        _initial_rule(out)
        casing.check_case_only_all([t.target for t in triples], out)
        return out


class TrigramRecaser:
    def __init__(self, model_dir: str | os.PathLike[str]) -> None:
        d = Path(model_dir)
        self.manifest = read_manifest(d)
        self.signature = f"trigram|{self.manifest.signature}"
        tables = Tables.load(d)
        self.extractor = FeatureExtractor(
            tables,
            load_model_lm(d, self.manifest),
            [],
            "phrase",
            int(self.manifest.settings.get("max_candidates", MAX_CANDIDATES)),
        )
        self.weights = np.array([1.0])

    @gc_paused()
    def recase_triples(self, triples: Sequence[Triple]) -> list[list[str]]:
        # monolingual: GEN without source words, LM only
        flat = self.extractor.flat([Triple(t.id, [], lowered(t).target) for t in triples])
        paths = flat.best_paths(np.zeros(len(flat.ids)), np.full(len(flat.n_pos), self.weights[0]))
        out = _initial_rule(flat.words(paths, self.extractor.candidates.strings))
        casing.check_case_only_all([t.target for t in triples], out)
        return out


class MosesTruecaserBaseline:
    def __init__(self, target_corpus: Iterable[Sequence[str]]) -> None:
        import sacremoses
        from sacremoses import MosesDetruecaser, MosesTruecaser

        self.signature = f"sacremoses-truecase+detruecase|sacremoses:{getattr(sacremoses, '__version__', '?')}"
        self.truecaser = MosesTruecaser()
        self.truecaser.train([list(s) for s in target_corpus], save_to=None, progress_bar=False)
        self.detruecaser = MosesDetruecaser()

    def recase_triples(self, triples: Sequence[Triple]) -> list[list[str]]:
        out = []
        for t in triples:
            low = lowered(t).target
            tc = self.truecaser.truecase(" ".join(low), return_str=False, use_known=False)
            dt = self.detruecaser.detruecase(" ".join(tc), return_str=False)
            toks = [d if casing.is_recasing_of(d, w) else w for d, w in zip(dt, low)]
            if len(dt) != len(low):  # sacremoses re-split a token: keep the lowercase input
                toks = list(low)
            out.append(toks)
        casing.check_case_only_all([t.target for t in triples], out)
        return out


class CopySourceBaseline:
    """The ten-line rule of issue #4: sacremoses truecase+detruecase, then every word that equals, up to
    case, a source word not capitalized by its position takes that word's case (the first such word)."""

    def __init__(self, base: MosesTruecaserBaseline) -> None:
        self.base = base
        self.signature = f"{base.signature}|copy-source"

    def recase_triples(self, triples: Sequence[Triple]) -> list[list[str]]:
        out = []
        positions = positional_words([t.source for t in triples])
        for t, toks, pos in zip(triples, self.base.recase_triples(triples), positions):
            forms: dict[str, str] = {}
            for k, w in enumerate(t.source):
                if k not in pos:
                    forms.setdefault(casing.lower(w), w)
            out.append(
                [
                    f if (f := forms.get(casing.lower(w))) is not None and casing.is_recasing_of(f, w) else w
                    for w in toks
                ]
            )
        casing.check_case_only_all([t.target for t in triples], out)
        return out
