"""Training pipeline: statistics from the training bitext, CRF weights from a separate dev set.

1. word-align training (and dev) data, unless alignments are given (eflomal, one joint run);
2. tables and the cased LM from the training data only (never from dev or test), streamed and counted in
   ``jobs`` processes (``stats.parallel``); target-language text without a source (``monolingual``,
   ``--mono``) joins the LM and the target-side counts; the LM by this package's estimator or by lmplz;
3. dev: the naive phrase aligner turns its word links into phrase pairs; lattices over GEN of the
   lowercased dev reference, with the reference form added where GEN misses it;
4. weights by L-BFGS on eq. 5 for each input mode (``modes.MODES``: phrases and links, phrases, links,
   source alone, no source), each on dev lattices built from what the mode has, the features that read
   what it lacks held at 0;
5. optional held-out folds of the training data (``heldout_sentences``): tables and LM from the
   other folds, their lattices added to the dev lattices, so features that need examples the dev
   set lacks (headlines) get weights;
6. the model directory, written atomically, with every setting and a signature.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from moses_recaser.core.memory import Memory, map_large_blocks
from moses_recaser.core.triples import Triple, lowered
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import LineReader
from moses_recaser.io.modeldir import release_mapped, write_model
from moses_recaser.model.crf import FitResult, feature_scale, fit, make_batches
from moses_recaser.model.data import Bitext, DecoderOutput, cased_dev_words, check_dev, tables_for_dev
from moses_recaser.model.extractor import FeatureExtractor
from moses_recaser.model.features import feature_names
from moses_recaser.model.lattice import Flat
from moses_recaser.model.modes import BY_NAME, CASE_SUFFIX, CASED_MODES, MODES, Weights, mask_of
from moses_recaser.model.recaser import load_lm
from moses_recaser.model.settings import TrainSettings, check_stats_fixed
from moses_recaser.model.streaming import CHUNK
from moses_recaser.model.truecaser import Truecaser
from moses_recaser.stats.build import (
    Corpus,
    LMSettings,
    Statistics,
    is_arpa,
    lm_is_arpa,
    model_lm_file,
    statistics,
)
from moses_recaser.stats.counter import ReservedToken, reserved_at
from moses_recaser.stats.in_memory import count_text
from moses_recaser.stats.npa import phrase_align_triple
from moses_recaser.stats.tables import Tables

log = logging.getLogger(__name__)


@dataclass
class TrainReport:
    dev_sentences: int = 0
    dev_words: int = 0
    gen_oracle: float = 0.0
    heldout_sentences: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    iterations: int = 0
    objective: float = 0.0
    signature: str = ""  # the model's, as its manifest records it


def punctuation_vocabulary(
    triples: Sequence[Triple], min_count: int, counted: dict[str, int], target: str | None = None
) -> list[str]:
    """Punctuation tokens followed by a word at least ``min_count`` times in ``triples`` plus the counts already
    made (the training statistics' ``punct``). ``target``: the file of the triples' targets (errors name it)."""
    try:
        dev = count_text((t.target for t in triples), order=0)
    except ReservedToken as exc:
        raise reserved_at(exc, [t.target for t in triples], target, lambda i: triples[i].id + 1) from None
    c = dict(counted)
    for w, n in zip(dev.forms, dev.punct.tolist()):
        if n:
            c[w] = c.get(w, 0) + n
    return sorted(p for p, n in c.items() if n >= min_count)


def reference_lattices(
    extractor: FeatureExtractor,
    triples: Sequence[Triple],
    references: Sequence[Sequence[str | None]] | None = None,
    decoded: Sequence[Sequence[str] | None] | None = None,
) -> tuple[list[Flat], int, int]:
    """Lattices of lowercased triples with their reference, the triples' own targets unless ``references``
    (chunk by chunk), and with ``decoded``, the words as the input to recase would have them; returns them,
    the words, and the words whose reference GEN gives."""
    flats: list[Flat] = []
    words = hits = 0
    refs: Sequence[Sequence[str | None]] = references if references is not None else [t.target for t in triples]
    for k in range(0, len(triples), CHUNK):
        release_mapped()  # the pages of the tables and the LM that the last chunk's lookups touched
        part = triples[k : k + CHUNK]
        flat = extractor.flat(
            [lowered(t) for t in part], refs[k : k + CHUNK], None if decoded is None else decoded[k : k + CHUNK]
        )
        words += len(flat.per_pos)
        hits += len(flat.per_pos) - sum(flat.gen_misses)
        flats.append(flat)
    return flats, words, hits


def query_lm(lm_path: Path, arrays: Path | None) -> object:
    """The LM for feature queries: its query arrays (``lm.npz``, mapped), else kenlm (a binary LM)."""
    from moses_recaser.stats.arpa_arrays import ArrayLM

    return ArrayLM.load(arrays) if arrays is not None else load_lm(lm_path)


@dataclass(frozen=True)
class StatsModel:
    """The tables and LM of a statistics model (``stats``/``merge``), with the LM settings it records; the tables
    copied into the work directory (``tables_file``), the LM read where it is."""

    tables: Tables
    tables_file: Path
    lm_path: Path
    lm_order: int
    lm: str | None
    lm_prune: int


def _stats_from_model(directory: str, settings: TrainSettings, work: Path) -> StatsModel:
    """A statistics model, read and checked (its LM order, else that of ``settings``)."""
    from moses_recaser.io.modeldir import ModelSnapshot, read_manifest, resolve_model
    from moses_recaser.io.outputs import copy_file, make_dirs
    from moses_recaser.model.recaser import lm_file

    d = resolve_model(directory)
    copy = work / "stats.model"
    make_dirs(copy)
    with ModelSnapshot(d) as snap:  # an edited model is one error, as when recasing loads it
        manifest = read_manifest(snap.root)
        order = int(manifest.settings.get("lm_order", settings.lm_order))
        copy_file(snap.root / "tables.npz", copy / "tables.npz")
        tables = Tables.load(copy)
    prune = int(manifest.settings.get("lm_prune", 0))
    return StatsModel(tables, copy / "tables.npz", lm_file(d, manifest), order, manifest.settings.get("lm"), prune)


def monolingual_digest(paths: Sequence[str]) -> str:
    """A sha256 of target-language files' lines, for the signature (read line by line)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(b"\0file\0")
        for line in LineReader(path):
            digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def _lm_settings(settings: TrainSettings, lmplz: str | None) -> LMSettings:
    return LMSettings(
        order=settings.lm_order,
        discount_fallback=settings.discount_fallback,
        lm=settings.lm,
        lmplz=lmplz if settings.lm_estimator == "lmplz" else None,
        lmplz_options=settings.lmplz_options,
        prune=settings.lm_prune,
    )


def fit_model(
    model_dir: str,
    *,
    dev: Bitext,
    settings: TrainSettings,
    work: Path,
    train: Bitext | None = None,
    stats_model: str | None = None,
    jobs: int = 1,
    lmplz: str | None = None,
    dev_output: DecoderOutput | None = None,
    memory: Memory | None = None,
    named_as: dict[str, str] | None = None,
) -> TrainReport:
    """Train a model from a training bitext (tables and LM) and a dev bitext (weights): the work behind the one
    entry point, ``moses_recaser.train``, which checks and resolves its inputs first. With
    ``stats_model`` (a directory from ``stats`` or ``merge``) the tables and the LM come from it instead
    of ``train``. ``jobs``: processes that count the training statistics (the model is the same whatever
    their number); ``lmplz``: KenLM's lmplz estimates the LM (``settings.lm_estimator``); ``dev_output``:
    the weights are fitted on the decoder's output for the dev source instead of the dev reference.
    ``settings`` is not changed: what training decides (the alignment source, a picked sigma) is recorded
    in the model's own copy."""
    _check_inputs(settings, train, stats_model, lmplz)
    settings = _with_derived(settings, lmplz, dev_output)
    report = TrainReport()
    files: dict[str, str] = {}
    memory = memory or Memory.from_setting(None)
    map_large_blocks()
    with _timed(report, "align"):
        # a statistics model is checked before any corpus is read
        preloaded = _stats_from_model(stats_model, settings, work) if stats_model is not None else None
        if preloaded is not None:
            settings = settings.changed(lm_order=preloaded.lm_order, lm=preloaded.lm, lm_prune=preloaded.lm_prune)
        dev_set = dev.triples()
        check_dev(dev_set, dev, settings.input_case == "cased")
        # the decoder's dev output, read (and checked) before the work as well
        decoded = dev_output.triples(dev, dev_set) if dev_output is not None else None
        train_set, aligned = _read_and_align(
            train, dev_set, dev.alignment is None and dev_output is None, settings, work, dev.source
        )
        if aligned:
            # the tables' alignment is what the signature names first; dev's alone is told apart
            source = "eflomal" if train is not None and train.alignment is None else "files+dev:eflomal"
            settings = settings.changed(alignment_source=source)
    with _timed(report, "statistics"):
        if preloaded is not None:
            tables, tables_file, lm_path = preloaded.tables, preloaded.tables_file, preloaded.lm_path
            lm_arrays = _arrays_of_lm(lm_path, work, memory)
        else:
            assert train is not None
            dev_lines = frozenset(" ".join(t.target) for t in dev_set)
            stats = _train_statistics(train, train_set, settings, lmplz, work, jobs, dev_lines, memory)
            tables, tables_file, lm_path, lm_arrays = stats.tables, stats.tables_file, stats.lm, stats.lm_arrays
        files["tables.npz"] = str(tables_file)
        name, copy = model_lm_file(Path(lm_path), work)
        files[name] = copy
        if lm_arrays is not None:
            files["lm.npz"] = str(lm_arrays)

    if decoded is None:
        dev_triples = [phrase_align_triple(t, settings.npa_lengths, settings.npa_seed) for t in dev_set]
        dev_refs: list[list[str | None]] = [list(t.target) for t in dev_set]
    else:
        dev_triples, dev_refs = decoded
    dev_file = dev.target if dev_output is None else dev_output.trace
    punct = punctuation_vocabulary(dev_triples, settings.punct_min_count, tables.punct, dev_file)
    names = feature_names(settings.feature_set, punct, decoded=settings.input_case == "cased")
    dev_cased = cased_dev_words(dev_triples, tables, dev_output is not None) if settings.input_case == "cased" else []

    with _timed(report, "lattices"):
        dev_tables, dev_lm = tables_for_dev(tables, query_lm(lm_path, lm_arrays), dev_triples, dev_refs, dev_cased)
        extractor = FeatureExtractor(dev_tables, dev_lm, names, settings.alignment_mode, settings.max_candidates)
        heldout = (
            _heldout_extractors(train_set, settings, names, work, lmplz, memory) if settings.heldout_sentences else []
        )
        report.heldout_sentences = settings.heldout_sentences
        if settings.sigma_grid:
            settings = settings.changed(
                sigma=_cross_validated_sigma(extractor, dev_triples, dev_refs, settings, names, jobs)
            )
    with _timed(report, "crf"):
        weights, fit_log = _fit_modes(
            extractor, dev_triples, dev_refs, heldout, settings, names, report, jobs, dev_cased
        )

    # GEN and candidate facts of every training type, so that recasing starts warm
    extractor.save_registry(work / "candidates.npz")
    files["candidates.npz"] = str(work / "candidates.npz")
    _write(model_dir, settings, weights, files, report, fit_log, named_as or {})
    return report


def _arrays_of_lm(lm_path: Path, work: Path, memory: Memory) -> Path | None:
    """The query arrays of a statistics model's LM, made in ``work`` (None for a binary LM)."""
    from moses_recaser.io.diskarrays import Scratch
    from moses_recaser.io.outputs import work_dir
    from moses_recaser.stats.arpa_arrays import write_arrays

    if not is_arpa(str(lm_path)):
        return None
    out = work / "stats.model" / "lm.npz"
    with work_dir("moses-recaser-lm", work) as tmp:
        write_arrays(lm_path, out, Scratch(tmp), memory.working())
    return out


@contextmanager
def _timed(report: TrainReport, stage: str) -> Iterator[None]:
    """Record the stage's wall time in ``report.seconds``."""
    t0 = time.perf_counter()
    yield
    report.seconds[stage] = time.perf_counter() - t0


def _check_inputs(settings: TrainSettings, train: Bitext | None, stats_model: str | None, lmplz: str | None) -> None:
    """Settings and inputs that cannot go together are refused before any work."""
    settings.check()
    if (train is None) == (stats_model is None):
        raise RecaserError("give the training bitext or a statistics model, not both")
    if stats_model is not None:
        check_stats_fixed(settings, lmplz=lmplz)
    elif settings.lm is not None and (lmplz is not None or settings.lmplz_options):
        given = "`lmplz`" if lmplz is not None else "`lmplz_options`"
        raise RecaserError(f"{given} cannot be combined with `lm`: the LM is given, lmplz would not run")
    elif settings.lmplz_options and lmplz is None:
        raise RecaserError(
            "`lmplz_options` are options of lmplz: give `lmplz` too (without it the LM is estimated "
            "here, and they would go unused)"
        )
    if settings.lm is not None:
        lm_is_arpa(settings.lm)  # what the file is, before alignment and counting
    if lmplz is not None and shutil.which(lmplz) is None:  # (the program, before alignment and counting)
        raise RecaserError("no such program, or not executable: give the path of KenLM's lmplz", lmplz)
    if stats_model is not None and settings.heldout_sentences:
        raise RecaserError("`heldout_sentences` needs the training bitext; it cannot be combined with `stats`")
    if stats_model is not None and settings.monolingual:
        raise RecaserError(
            "`monolingual` cannot be combined with `stats` (the statistics model is final); estimate an "
            "LM on the text with lmplz and give it with `lm`"
        )


def _with_derived(settings: TrainSettings, lmplz: str | None, dev_output: DecoderOutput | None) -> TrainSettings:
    """A copy of ``settings`` with what the inputs decide: the LM estimator, the monolingual text's digest,
    and whether the weights are fitted on decoder output."""
    return settings.changed(
        dev_decoded=dev_output is not None,
        lm_estimator="lmplz" if lmplz is not None else settings.lm_estimator,
        monolingual_digest=monolingual_digest(settings.monolingual) if settings.monolingual else None,
    )


def _read_and_align(
    train: Bitext | None,
    dev_set: list[Triple],
    dev_links: bool,
    settings: TrainSettings,
    work: Path,
    dev_source: str,
) -> tuple[list[Triple], bool]:
    """The training sentences read into memory (only where that cannot be avoided: eflomal, held-out folds),
    and whether eflomal aligned anything: the training bitext without an alignment, and dev when ``dev_links``
    (decoder output has the decoder's alignment). Aligned triples get their links in place. A training bitext
    with its alignment is not read into memory for dev's sake: dev is aligned alone, with eflomal priors made
    from the training alignment (``eflomal.priors_of_alignment``)."""
    in_memory = train is not None and (train.alignment is None or settings.heldout_sentences)
    train_set = train.triples() if in_memory and train is not None else []
    from moses_recaser.stats.eflomal import align, priors_of_alignment

    if not ((train is not None and train.alignment is None) or dev_links):
        return train_set, False
    priors = work / "dev.priors"
    given = train is not None and train.alignment is not None
    if given:
        assert train is not None and train.alignment is not None
        priors_of_alignment(train.source, train.target, train.alignment, priors, train.lines)
    both = ([] if given else train_set) + dev_set
    n_train = len(both) - len(dev_set)

    def file_line(k: int) -> str:  # (a triple's id is its line's index in its file)
        return f"{train.source if k < n_train else dev_source}:{both[k].id + 1}"  # type: ignore[union-attr]

    links = align(
        [t.source for t in both],
        [t.target for t in both],
        settings.symmetrization,
        priors=priors if given else None,
        where=file_line,
    )
    for t, a in zip(both, links):
        if t.links is None:
            t.links = a
    return train_set, True


def _train_statistics(
    train: Bitext,
    train_set: list[Triple],
    settings: TrainSettings,
    lmplz: str | None,
    work: Path,
    jobs: int,
    dev_lines: frozenset[str] = frozenset(),
    memory: Memory | None = None,
) -> Statistics:
    """Tables and LM of the training bitext: from the triples in memory when it was read, else streamed; the
    monolingual text less ``dev_lines`` (the dev reference: it often holds the bitext's target side, from
    which dev may have been held out)."""
    mono = settings.monolingual
    if train_set or train.alignment is None:
        corpus = Corpus(triples=train_set, triples_target=train.target, mono=mono, exclude=dev_lines)
    else:
        files = (train.source, train.target, train.alignment)
        corpus = Corpus(files=files, lines=train.lines, mono=mono, exclude=dev_lines)
    return statistics(corpus, _lm_settings(settings, lmplz), work, jobs=jobs, memory=memory)


def _cross_validated_sigma(
    extractor: FeatureExtractor,
    dev_triples: Sequence[Triple],
    dev_refs: Sequence[Sequence[str | None]],
    settings: TrainSettings,
    names: list[str],
    jobs: int = 1,
) -> float:
    """``select_sigma`` over two contiguous halves of dev, so that a document stays within one."""
    half, view = len(dev_triples) // 2, BY_NAME["both"].view
    halves = [
        reference_lattices(extractor, [view(t) for t in dev_triples[:half]], dev_refs[:half])[0],
        reference_lattices(extractor, [view(t) for t in dev_triples[half:]], dev_refs[half:])[0],
    ]
    cv_scale = feature_scale(halves[0] + halves[1]) if settings.feature_scaling else None
    return select_sigma(halves, len(names), settings.sigma_grid, settings.max_iter, cv_scale, jobs)


def _fit_modes(
    extractor: FeatureExtractor,
    dev_triples: Sequence[Triple],
    dev_refs: Sequence[Sequence[str | None]],
    heldout: Sequence[tuple[FeatureExtractor, list[Triple]]],
    settings: TrainSettings,
    names: list[str],
    report: TrainReport,
    jobs: int = 1,
    dev_cased: Sequence[Sequence[Sequence[str]]] = (),
) -> tuple[Weights, list[tuple[int, float, float]]]:
    """The weights of every input mode (``modes.MODES``), each fitted on dev lattices of what the mode has,
    starting from the weights of the mode before it (the modes read nested or near sets of features, so the
    fits start close to their optimum); with ``dev_cased`` (the dev words as cased input would have them, in
    one or more variants, each a copy of the dev lattices), the weights of ``modes.CASED_MODES`` too, each
    starting from its lowercase twin's. The report gets the dev figures and the fit of the first mode (both)."""
    by_mode: dict[str, np.ndarray] = {}
    previous: np.ndarray | None = None
    scale: np.ndarray | None = None
    fit_log: list[tuple[int, float, float]] = []
    held_cased = [_truecased(fx, held) if dev_cased else [] for fx, held in heldout]
    for mode in MODES + (CASED_MODES if dev_cased else ()):
        views = [mode.view(t) for t in dev_triples]
        if mode.cased:
            previous = by_mode[mode.name.removesuffix(CASE_SUFFIX)]
            flats, words, hits = reference_lattices(extractor, views, dev_refs, dev_cased[0])
            for variant in dev_cased[1:]:
                flats += reference_lattices(extractor, views, dev_refs, variant)[0]
        else:
            flats, words, hits = reference_lattices(extractor, views, dev_refs)
        for (fold_extractor, held), cased in zip(heldout, held_cased):
            view = [mode.view(t) for t in held]
            flats += reference_lattices(fold_extractor, view, decoded=cased if mode.cased else None)[0]
        if settings.feature_scaling and scale is None:  # the first mode (both) reads every feature
            scale = feature_scale(flats)
        log.info("training the %s weights (%s; sigma %g)", mode.name, mode.doc.split(":")[0], settings.sigma)
        result = fit(
            make_batches(flats),
            len(names),
            settings.sigma,
            settings.max_iter,
            init=previous,
            mask=mask_of(mode, names),
            scale=scale,
            jobs=jobs,
        )
        warn_unconverged(result, f"the {mode.name} weights")
        by_mode[mode.name] = previous = result.weights
        if mode.name == "both":
            report.dev_sentences, report.dev_words = len(dev_triples), words
            report.gen_oracle = hits / words if words else 0.0
            report.iterations, report.objective = len(result.log), result.log[-1][1] if result.log else 0.0
            fit_log = result.log
            log.info("dev: %d sentences, %d words; GEN oracle %.2f%%", len(dev_triples), words, 100 * report.gen_oracle)
    return Weights(names=names, by_mode=by_mode), fit_log


def _truecased(fold: FeatureExtractor, held: Sequence[Triple]) -> list[list[str]]:
    """A held-out fold's target sentences as truecase.perl would case them, with a truecaser of the fold's forms."""
    truecaser = Truecaser.from_forms(fold.tables.forms)
    return [truecaser.truecase(t.target) for t in held]


def _write(
    model_dir: str,
    settings: TrainSettings,
    weights: Weights,
    files: dict[str, str],
    report: TrainReport,
    fit_log: Sequence[tuple[int, float, float]],
    named_as: dict[str, str],
) -> None:
    """The model directory, atomically: every setting, the signature, the weights and the fit's record;
    ``named_as``: the file the user named for each that train made from it (raw text, tokenized)."""
    report.signature = settings.signature(weights.matrix())
    write_model(
        model_dir,
        # the monolingual files as the user named them, resolved: the record says which files, from anywhere
        settings={
            **asdict(settings),
            "monolingual": [str(Path(named_as.get(m, m)).resolve()) for m in settings.monolingual],
        },
        signature=report.signature,
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
                "log": [[i, o, g] for i, o, g in fit_log],
            },
        },
    )


def select_sigma(
    halves: Sequence[Sequence[Flat]],
    n_features: int,
    grid: Sequence[float],
    max_iter: int,
    scale: np.ndarray | None = None,
    jobs: int = 1,
) -> float:
    """The sigma of ``grid`` with the best 2-fold cross-validated word accuracy: weights fitted on one half
    of the dev lattices decode the other. Each half's fit starts from its fit at the sigma before."""
    batches = [make_batches(h) for h in halves]
    best = (-1.0, float(grid[0]))
    start: list[np.ndarray | None] = [None, None]
    for sigma in grid:
        correct = total = 0
        for k in (0, 1):
            result = fit(batches[k], n_features, sigma, max_iter, init=start[k], scale=scale, jobs=jobs)
            warn_unconverged(result, f"the cross-validation fit (sigma {sigma:g}, half {k + 1})")
            w = start[k] = result.weights
            for flat in halves[1 - k]:
                paths = flat.best_paths(flat.scores(w[1:]), np.full(len(flat.n_pos), w[0]))
                for path, gold in zip(paths, flat.gold):
                    labeled = np.asarray(gold) >= 0
                    correct += int((path == gold)[labeled].sum())
                    total += int(labeled.sum())
        acc = correct / max(total, 1)
        log.info("sigma %g: cross-validated dev accuracy %.4f", sigma, acc)
        if acc > best[0]:
            best = (acc, float(sigma))
    log.info("picked sigma %g", best[1])
    return best[1]


def _heldout_extractors(
    train_set: Sequence[Triple],
    settings: TrainSettings,
    names: list[str],
    work: Path,
    lmplz: str | None,
    memory: Memory | None = None,
) -> list[tuple[FeatureExtractor, list[Triple]]]:
    """Held-out training sentences (phrase-aligned as dev is) in folds, each with an extractor over the other
    folds' statistics."""
    rng = np.random.default_rng(settings.npa_seed)
    k = settings.heldout_folds
    fold = rng.integers(0, k, size=len(train_set))
    per_fold = max(settings.heldout_sentences // k, 1)
    out: list[tuple[FeatureExtractor, list[Triple]]] = []
    for f in range(k):
        rest = [t for t, g in zip(train_set, fold) if g != f]
        held = [t for t, g in zip(train_set, fold) if g == f]
        pick = rng.permutation(len(held))[:per_fold]
        held = [phrase_align_triple(held[i], settings.npa_lengths, settings.npa_seed) for i in sorted(pick)]
        log.info("held-out fold %d: statistics from %d sentences, lattices for %d", f + 1, len(rest), len(held))
        corpus = Corpus(triples=rest, mono=settings.monolingual)
        stats = statistics(corpus, _lm_settings(settings, lmplz), work, f"fold{f}", quiet=True, memory=memory)
        extractor = FeatureExtractor(
            stats.tables, query_lm(stats.lm, stats.lm_arrays), names, settings.alignment_mode, settings.max_candidates
        )
        out.append((extractor, held))
    return out


def warn_unconverged(result: FitResult, what: str) -> None:
    if not result.converged:
        log.warning("L-BFGS stopped before convergence for %s: %s", what, result.message)
