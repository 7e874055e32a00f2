"""Training pipeline: statistics from the training bitext, CRF weights from a separate dev set.

1. word-align training (and dev) data, unless alignments are given (eflomal, one joint run);
2. tables and the cased LM from the training data only (never from dev or test), streamed and counted in
   ``jobs`` processes (``stats.counting``); target-language text without a source (``monolingual``,
   ``--mono``) joins the LM and the target-side counts; the LM by this package's estimator or by lmplz;
3. dev: the naive phrase aligner turns its word links into phrase pairs; lattices over GEN of the
   lowercased dev reference, with the reference form added where GEN misses it;
4. bilingual weights by L-BFGS on eq. 5; monolingual weights on the same lattices with every
   source feature switched off (used when no source is given at recasing time);
5. optional held-out folds of the training data (``heldout_sentences``): tables and LM from the
   other folds, their lattices added to the dev lattices, so features that need examples the dev
   set lacks (headlines) get weights;
6. the model directory, written atomically, with every setting and a signature.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from moses_recaser import __version__
from moses_recaser.errors import RecaserError
from moses_recaser.model.crf import fit, make_batches
from moses_recaser.model.extractor import FeatureExtractor
from moses_recaser.model.features import FEATURE_SETS, feature_names, source_columns
from moses_recaser.model.gen import MAX_CANDIDATES
from moses_recaser.model.lattice import Flat
from moses_recaser.model.recaser import Weights, load_lm
from moses_recaser.model.streaming import CHUNK
from moses_recaser.modeldir import write_model
from moses_recaser.sentences import chunks
from moses_recaser.stats.build import Corpus, LMSettings, is_arpa, statistics
from moses_recaser.stats.counting import corpus_lines, count_text, pieces, read_piece
from moses_recaser.stats.npa import phrase_align_triple
from moses_recaser.stats.tables import Tables
from moses_recaser.textio import LineReader
from moses_recaser.triples import Triple, lowered

log = logging.getLogger(__name__)


@dataclass
class TrainSettings:
    """Every setting that changes the model's output; recorded in the model and its signature."""

    lm_order: int = 3
    lm: str | None = None
    symmetrization: str = "grow-diag-final-and"
    feature_set: str = "full"
    alignment_mode: str = "phrase"  # "phrase" (paper) or "links"
    sigma: float = 0.5
    sigma_grid: tuple[float, ...] = ()  # when set, sigma is picked by 2-fold cross-validation on dev
    max_iter: int = 200
    max_candidates: int = MAX_CANDIDATES
    npa_seed: int = 0
    npa_lengths: dict[int, float] | None = None
    heldout_sentences: int = 0
    heldout_folds: int = 2
    punct_min_count: int = 2
    discount_fallback: bool = True
    lm_estimator: str = "kn"  # "kn": this package's modified Kneser-Ney; "lmplz": KenLM's (train lmplz=...)
    lmplz_options: str = ""
    alignment_source: str = "files"  # or "eflomal"
    # cased, tokenized target-language text without a source: its sentences join the LM and the
    # target-side counts (case prior, training forms), not the translation tables
    monolingual: list[str] = field(default_factory=list)
    monolingual_digest: str | None = None  # sha256 of their contents, set when read

    def check(self) -> None:
        if self.feature_set not in FEATURE_SETS:
            raise RecaserError(f"unknown feature set {self.feature_set!r}; choose one of {', '.join(FEATURE_SETS)}")
        if self.alignment_mode not in ("phrase", "links"):
            raise RecaserError(f"unknown alignment mode {self.alignment_mode!r}; choose phrase or links")
        if self.sigma <= 0:
            raise RecaserError(f"sigma must be positive, got {self.sigma}")

    def signature(self, weights: np.ndarray | None = None) -> str:
        lm = f"file:{Path(self.lm).name}" if self.lm else f"{self.lm_estimator}{self.lm_order}"
        parts = [
            f"moses-recaser:{__version__}",
            f"lm:{lm}",
            f"align:{self.alignment_source}"
            + (f"+{self.symmetrization}" if self.alignment_source == "eflomal" else ""),
            f"feat:{self.feature_set}",
            f"a:{self.alignment_mode}",
            f"sigma:{self.sigma:g}",
            f"gen:{self.max_candidates}",
            f"npa:{self.npa_seed}",
        ]
        if self.heldout_sentences:
            parts.append(f"heldout:{self.heldout_sentences}x{self.heldout_folds}")
        if self.monolingual_digest:
            parts.append(f"mono:{self.monolingual_digest[:8]}")
        if weights is not None:
            parts.append("w:" + hashlib.sha256(np.asarray(weights, dtype="<f8").tobytes()).hexdigest()[:8])
        return "|".join(parts)


@dataclass
class TrainReport:
    dev_sentences: int = 0
    dev_words: int = 0
    gen_oracle: float = 0.0
    heldout_sentences: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    iterations: int = 0
    objective: float = 0.0


def punctuation_vocabulary(triples: Sequence[Triple], min_count: int, counted: dict[str, int]) -> list[str]:
    """Punctuation tokens followed by a word at least ``min_count`` times in ``triples`` plus the counts already
    made (the training statistics' ``punct``)."""
    dev = count_text((t.target for t in triples), order=0)
    c = dict(counted)
    for w, n in zip(dev.forms, dev.punct.tolist()):
        if n:
            c[w] = c.get(w, 0) + n
    return sorted(p for p, n in c.items() if n >= min_count)


def reference_lattices(extractor: FeatureExtractor, triples: Sequence[Triple]) -> tuple[list[Flat], int, int]:
    """Lattices of lowercased triples with their reference (chunk by chunk); returns them, the words, and
    the words whose reference GEN gives."""
    flats: list[Flat] = []
    words = hits = 0
    for part in chunks(triples, CHUNK):
        flat = extractor.flat([lowered(t) for t in part], [t.target for t in part])
        words += len(flat.per_pos)
        hits += len(flat.per_pos) - sum(flat.gen_misses)
        flats.append(flat)
    return flats, words, hits


def query_lm(lm_path: Path, work: Path, files: dict[str, str] | None = None) -> object:
    """The LM for feature queries: arrays built from an ARPA file (stored as lm.npz), else kenlm."""
    from moses_recaser.stats.arpa_arrays import ArrayLM

    if not is_arpa(str(lm_path)):
        return load_lm(lm_path)
    lm = ArrayLM.from_arpa(lm_path)
    if files is not None:
        npz = work / f"{lm_path.stem}.npz"
        lm.save(npz)
        files["lm.npz"] = str(npz)
    return lm


def _stats_from_model(directory: str, settings: TrainSettings) -> tuple[Tables, Path]:
    """Tables and LM of a statistics model (``stats``/``merge``); its LM order and LM are recorded."""
    from moses_recaser.model.recaser import lm_file
    from moses_recaser.modeldir import read_manifest, resolve_model

    d = resolve_model(directory)
    manifest = read_manifest(d)
    settings.lm_order = int(manifest.settings.get("lm_order", settings.lm_order))
    settings.lm = manifest.settings.get("lm")
    return Tables.load(d), lm_file(d, manifest)


def monolingual_digest(paths: Sequence[str]) -> str:
    """A sha256 of target-language files' lines, for the signature (read line by line)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(b"\0file\0")
        for line in LineReader(path):
            digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def _lm_settings(settings: TrainSettings, lmplz: str | None) -> LMSettings:
    return LMSettings(order=settings.lm_order, discount_fallback=settings.discount_fallback, lm=settings.lm,
                      lmplz=lmplz if settings.lm_estimator == "lmplz" else None, lmplz_options=settings.lmplz_options)


@dataclass(frozen=True)
class Bitext:
    """A cased, tokenized bitext: source and target files, a Pharaoh word alignment (None: eflomal aligns it),
    and the lines [start, end) of them to use (None: all)."""

    source: str
    target: str
    alignment: str | None = None
    lines: tuple[int, int] | None = None

    def triples(self) -> list[Triple]:
        """Its sentence pairs, read into memory (dev sets; training sets that eflomal aligns)."""
        from moses_recaser.moses.bitext import triple_of_lines

        files = [self.source, self.target] + ([self.alignment] if self.alignment else [])
        out: list[Triple] = []
        for piece in pieces(files, 1, self.lines):
            readers = [read_piece(piece, k) for k in range(len(files))]
            for k, rows in enumerate(zip(*readers)):
                out.append(triple_of_lines(piece.first + k, [text for _, text in rows], files, rows[-1][0]))
        return out

    def split(self, held_out: int) -> tuple[Bitext, Bitext]:
        """The bitext without its last ``held_out`` lines, and those lines."""
        n = corpus_lines([f for f in (self.source, self.target, self.alignment) if f])
        start, end = self.lines or (0, n)
        cut = end - held_out
        return Bitext(self.source, self.target, self.alignment, (start, cut)), \
            Bitext(self.source, self.target, self.alignment, (cut, end))


def train(model_dir: str, *, dev: Bitext, settings: TrainSettings, work: Path, train: Bitext | None = None,
          stats_model: str | None = None, jobs: int = 1, lmplz: str | None = None) -> TrainReport:
    """Train a model from a training bitext (tables and LM) and a dev bitext (weights). With
    ``stats_model`` (a directory from ``stats`` or ``merge``) the tables and the LM come from it instead
    of ``train``. ``jobs``: processes that count the training statistics (the model is the same whatever
    their number); ``lmplz``: KenLM's lmplz estimates the LM (``settings.lm_estimator``)."""
    settings.check()
    report = TrainReport()
    t0 = time.perf_counter()
    if (train is None) == (stats_model is None):
        raise RecaserError("give the training bitext or a statistics model, not both")
    if stats_model is not None and settings.heldout_sentences:
        raise RecaserError("--heldout needs the training bitext; it cannot be combined with --stats")
    if stats_model is not None and settings.monolingual:
        raise RecaserError("--mono cannot be combined with --stats (the statistics model is final); estimate an "
                           "LM on the text with lmplz and give it with --lm")
    if lmplz is not None:
        settings.lm_estimator = "lmplz"
    if settings.monolingual:
        settings.monolingual_digest = monolingual_digest(settings.monolingual)
    # a statistics model is checked before any corpus is read
    preloaded = _stats_from_model(stats_model, settings) if stats_model is not None else None
    dev_set = dev.triples()
    # the training bitext is read into memory only where that cannot be avoided: eflomal, held-out folds
    in_memory = train is not None and (train.alignment is None or dev.alignment is None or settings.heldout_sentences)
    train_set = train.triples() if in_memory and train is not None else []
    files: dict[str, str] = {}
    if (train is not None and train.alignment is None) or dev.alignment is None:
        from moses_recaser.stats.eflomal import align

        both = [t for t in train_set] + [t for t in dev_set]
        links = align([t.source for t in both], [t.target for t in both], settings.symmetrization,
                      priors_out=work / "aligner.priors")
        for t, a in zip(both, links):
            if t.links is None:
                t.links = a
        files["aligner.priors"] = str(work / "aligner.priors")
        settings.alignment_source = "eflomal"
    report.seconds["align"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if preloaded is not None:
        tables, lm_path = preloaded
    else:
        assert train is not None
        corpus = Corpus(triples=train_set, mono=settings.monolingual) if train_set or train.alignment is None else \
            Corpus(files=(train.source, train.target, train.alignment), lines=train.lines,  # type: ignore[arg-type]
                   mono=settings.monolingual)
        tables, lm_path, _ = statistics(corpus, _lm_settings(settings, lmplz), work, jobs=jobs)
    files["lm.arpa" if is_arpa(str(lm_path)) else "lm.bin"] = str(lm_path)
    report.seconds["statistics"] = time.perf_counter() - t0

    dev_triples = [phrase_align_triple(t, settings.npa_lengths, settings.npa_seed) for t in dev_set]
    punct = punctuation_vocabulary(dev_triples, settings.punct_min_count, tables.punct)
    names = feature_names(settings.feature_set, punct)

    t0 = time.perf_counter()
    lm = query_lm(lm_path, work, files)
    extractor = FeatureExtractor(tables, lm, names, settings.alignment_mode, settings.max_candidates)
    # two contiguous halves, for the cross-validation of sigma (a document stays within one)
    half = len(dev_triples) // 2 if settings.sigma_grid else len(dev_triples)
    halves = [reference_lattices(extractor, dev_triples[:half]), reference_lattices(extractor, dev_triples[half:])]
    flats = halves[0][0] + halves[1][0]
    words, hits = halves[0][1] + halves[1][1], halves[0][2] + halves[1][2]
    report.dev_sentences, report.dev_words = len(dev_triples), words
    report.gen_oracle = hits / words if words else 0.0
    if settings.heldout_sentences:
        flats += _heldout_lattices(train_set, settings, names, work, lmplz)
        report.heldout_sentences = settings.heldout_sentences
    report.seconds["lattices"] = time.perf_counter() - t0
    log.info("dev: %d sentences, %d words; GEN oracle %.2f%%", len(dev_triples), words, 100 * report.gen_oracle)

    t0 = time.perf_counter()
    if settings.sigma_grid:
        settings.sigma = select_sigma([halves[0][0], halves[1][0]], len(names), settings.sigma_grid,
                                      settings.max_iter)
    batches = make_batches(flats)
    log.info("training bilingual weights (sigma %g, %d features + LM)", settings.sigma, len(names))
    bi = fit(batches, len(names), settings.sigma, settings.max_iter)
    mask = np.array([True] + [n not in source_columns(names) for n in names])
    log.info("training monolingual weights (source features off)")
    mono_fit = fit(batches, len(names), settings.sigma, settings.max_iter, mask=mask)
    report.seconds["crf"] = time.perf_counter() - t0
    report.iterations = len(bi.log)
    report.objective = bi.log[-1][1] if bi.log else 0.0
    if not bi.converged:
        log.warning("L-BFGS stopped before convergence: %s", bi.message)

    weights = Weights(names=names, bilingual=bi.weights, monolingual=mono_fit.weights)
    # GEN and candidate facts of every training type, so that recasing starts warm
    extractor.save_registry(work / "candidates.npz")
    files["candidates.npz"] = str(work / "candidates.npz")
    doc = asdict(settings)
    write_model(
        model_dir,
        settings=doc,
        signature=settings.signature(np.concatenate([bi.weights, mono_fit.weights])),
        writers=[tables.save],
        copy_files=files,
        extra={
            "weights": weights.to_dict(),
            "training": {
                "dev_sentences": report.dev_sentences,
                "dev_words": report.dev_words,
                "gen_oracle": round(report.gen_oracle, 6),
                "heldout_sentences": report.heldout_sentences,
                "iterations": report.iterations,
                "objective": report.objective,
                "log": [[i, o, g] for i, o, g in bi.log],
            },
        },
    )
    return report


def select_sigma(halves: Sequence[Sequence[Flat]], n_features: int, grid: Sequence[float], max_iter: int) -> float:
    """The sigma of ``grid`` with the best 2-fold cross-validated word accuracy: weights fitted on one half
    of the dev lattices decode the other."""
    batches = [make_batches(h) for h in halves]
    best = (-1.0, float(grid[0]))
    for sigma in grid:
        correct = total = 0
        for k in (0, 1):
            w = fit(batches[k], n_features, sigma, max_iter).weights
            for flat in halves[1 - k]:
                paths = flat.best_paths(flat.unary @ w[1:], np.full(len(flat.n_pos), w[0]))
                for path, gold in zip(paths, flat.gold):
                    correct += int((path == gold).sum())
                    total += len(path)
        acc = correct / max(total, 1)
        log.info("sigma %g: cross-validated dev accuracy %.4f", sigma, acc)
        if acc > best[0]:
            best = (acc, float(sigma))
    log.info("picked sigma %g", best[1])
    return best[1]


def _heldout_lattices(train_set: Sequence[Triple], settings: TrainSettings, names: list[str],
                      work: Path, lmplz: str | None) -> list[Flat]:
    """Lattices of held-out training sentences, each fold featurized with the other folds' statistics."""
    rng = np.random.default_rng(settings.npa_seed)
    k = settings.heldout_folds
    fold = rng.integers(0, k, size=len(train_set))
    per_fold = max(settings.heldout_sentences // k, 1)
    out: list[Flat] = []
    for f in range(k):
        rest = [t for t, g in zip(train_set, fold) if g != f]
        held = [t for t, g in zip(train_set, fold) if g == f]
        pick = rng.permutation(len(held))[:per_fold]
        held = [phrase_align_triple(held[i], settings.npa_lengths, settings.npa_seed) for i in sorted(pick)]
        log.info("held-out fold %d: statistics from %d sentences, lattices for %d", f + 1, len(rest), len(held))
        corpus = Corpus(triples=rest, mono=settings.monolingual)
        tables, lm_path, _ = statistics(corpus, _lm_settings(settings, lmplz), work, f"fold{f}", quiet=True)
        extractor = FeatureExtractor(tables, query_lm(lm_path, work), names, settings.alignment_mode,
                                     settings.max_candidates)
        out += reference_lattices(extractor, held)[0]
    return out
