"""Config-driven experiments: precision tables (paper Table 4), learning curves (Figure 4).

``moses-recaser experiment configs/NAME.yaml [-o DIR] [--data-root DIR]`` runs the stages of ``stages``
(each cached under a key of its inputs and settings):

1. tokenized train/dev/test sides (Moses tokenization, escaping on; jieba for zh);
2. one eflomal + symmetrization run over train, dev and test together (the test alignment only
   stands in for the decoder's, through the naive phrase aligner, as in the paper's section 6.2);
3. a model per training size (tables and LM from train, CRF weights from dev);

then every system recases the lowercased test reference (``evaluate``): precision, cased-word F1, headline
lines, confusion table, paired bootstrap CRF vs trigram; all recased files and signatures are kept, and
``report`` writes results.json and results.md.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from moses_recaser._version import __version__
from moses_recaser.core.sentences import headline_lines
from moses_recaser.core.triples import lowered
from moses_recaser.harness.datasets import cache_dir, cache_path, data_root
from moses_recaser.harness.experiment_config import ExperimentConfig
from moses_recaser.harness.metrics import case_scores, paired_bootstrap_precision
from moses_recaser.harness.report import plot_curve, results_markdown, split_curve
from moses_recaser.harness.stages import Aligned, Prepared, mono_subset, prepare_data, subset, train_model, words_in
from moses_recaser.harness.systems import Trained
from moses_recaser.harness.systems import build as build_systems
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import read_regular
from moses_recaser.io.outputs import (
    DirKind,
    atomic_directory,
    atomic_output,
    entries,
    is_within,
    made_dirs,
    model_target,
)
from moses_recaser.moses.bitext import read_aligned_bitext
from moses_recaser.stats.npa import phrase_align_triple


@dataclass
class SystemScores:
    """One capitalizer on the test set."""

    precision: float
    f1: float
    headline_precision: float
    errors: int
    seconds: float
    signature: str
    confusion: list[list[int]]


@dataclass
class TestResults:
    """Every capitalizer on the test set, and the CRF against the trigram (when both ran)."""

    test_sentences: int
    test_words: int
    headline_lines: int
    systems: dict[str, SystemScores] = field(default_factory=dict)
    crf_vs_trigram: dict[str, float] | None = None


@dataclass
class CurvePoint:
    """A learning curve's point: training size, and the CRF's and trigram's precision (or BLEU gap)."""

    words: int
    monolingual_words: int
    crf: float
    trigram: float


@dataclass
class Results:
    """An experiment's results, as results.json holds them (``to_json``)."""

    name: str
    config: dict[str, Any]
    model: str
    version: str
    full: TestResults | None = None
    learning_curve: list[CurvePoint] = field(default_factory=list)
    bleu: dict[str, Any] | None = None
    wmt21_curve: list[CurvePoint] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The results as plain values; empty parts left out."""
        return {k: v for k, v in asdict(self).items() if v not in (None, [])}


def evaluate(
    cfg: ExperimentConfig, model: Path, test: Aligned, train_target: list[Path], out: Path, tag: str = ""
) -> TestResults:
    """Every system of ``cfg`` recases the lowercased test reference; the recased files go to ``out``."""
    aligned = read_aligned_bitext(str(test.source), str(test.target), str(test.alignment))
    triples = [phrase_align_triple(t) for t in aligned]
    refs = [t.target for t in triples]
    low = [lowered(t) for t in triples]
    headline = [k for k, flags in enumerate(headline_lines(refs)) if all(flags)]
    results = TestResults(len(refs), sum(len(r) for r in refs), len(headline))
    hyps: dict[str, list[list[str]]] = {}
    for name, system in build_systems(cfg.systems, Trained(model, train_target)).items():
        t0 = time.perf_counter()
        hyp = hyps[name] = list(system.recase_triples(low))
        seconds = time.perf_counter() - t0
        sc = case_scores(hyp, refs)
        hl = case_scores([hyp[k] for k in headline], [refs[k] for k in headline])
        results.systems[name] = SystemScores(
            sc.precision, sc.f1, hl.precision, sc.words - sc.correct, seconds, system.signature, sc.confusion.tolist()
        )
        with atomic_output(out / f"test{tag}.{name}.{cfg.target}") as fh:
            fh.writelines(" ".join(x) + "\n" for x in hyp)
    if "crf" in hyps and "trigram" in hyps:
        crf, tri = case_scores(hyps["crf"], refs), case_scores(hyps["trigram"], refs)
        results.crf_vs_trigram = {
            "relative_error_reduction": (crf.precision - tri.precision) / (1 - tri.precision),
            "paired_bootstrap_p": paired_bootstrap_precision(crf, tri),
        }
    return results


def experiment(
    config: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    root: str | None = None,
    cache: str | None = None,
) -> str:
    """Run the YAML experiment ``config`` (configs/NAME.yaml) into ``output`` (default runs/NAME), with the
    corpora under ``root`` and the stages cached in ``cache``: its results as markdown (results.md)."""
    from moses_recaser.harness.experiment_config import load_config
    from moses_recaser.io.checks import check_files

    check_files({"config": config}, {})
    cfg = load_config(config)
    return results_markdown(run_experiment(cfg, Path(output or Path("runs") / cfg.name), root, cache))


def run_experiment(
    cfg: ExperimentConfig, out: Path, root: str | None = None, cache: str | None = None
) -> dict[str, Any]:
    """Run the experiment of ``cfg`` into the directory ``out`` (results.json, results.md, recased files, plots);
    returns results.json's contents. ``out`` is new, empty or an earlier run's (``RUN``), checked before the work;
    the run is built beside it and takes its place whole at the end, so a failed run leaves it as it was."""
    base = data_root(root or cfg.data_root)
    with made_dirs(out.parent):
        real, cpath = model_target(out, RUN), cache_path(cache)
        if is_within(cpath, real):
            raise RecaserError("the cache is inside the run directory, which a run replaces whole", str(cpath))
        # (made now, the run's hidden directory keeps a parent made for it from being removed by another run)
        with atomic_directory(out, RUN) as run:
            cdir = cache_dir(cache)
            data = prepare_data(cfg, base, cdir)
            model = train_model(cfg, data.sets["train"], data.sets["dev"], cdir, "full", data.mono)
            results = Results(cfg.name, asdict(cfg), str(model), __version__)
            results.full = evaluate(cfg, model, data.sets["test"], data.target_text, run)
            curve_models = _learning_curve(cfg, data, results, cdir, run)
            if cfg.wmt21:
                _wmt21(cfg, data, model, curve_models, results, base, run)
            doc = results.to_json()
            with atomic_output(run / "results.json") as fh:
                json.dump(doc, fh, indent=1)
            with atomic_output(run / "results.md") as fh:
                fh.write(results_markdown(doc))
    return doc


def _is_run(path: Path) -> bool:
    """An experiment's run directory (a regular results.json that ``run_experiment`` wrote), or an empty one."""
    try:
        if not entries(path):
            return True
    except OSError:
        return False
    return _run_names(path) is not None


@dataclass(frozen=True)
class RunNames:
    """What a run writes, by the config its results.json records: the names at the top of its directory, and its
    wmt21/ files, PAIR.SYSTEM.CAPITALIZER.LANG (any system of the pair)."""

    top: frozenset[str]
    pair: str | None
    endings: tuple[str, ...]  # ".CAPITALIZER.LANG"

    def wmt21_file(self, name: str) -> bool:
        start = f"{self.pair}."
        return name.startswith(start) and any(
            name.endswith(e) and len(name) > len(start) + len(e) for e in self.endings
        )


def _run_names(path: Path) -> RunNames | None:
    """``RunNames`` of the run directory ``path`` (None: no results.json of a run there)."""
    text = read_regular(path / "results.json", 1 << 26, follow=False)
    if text is None:
        return None
    try:
        doc = json.loads(text)
        cfg = doc["config"]
        target, tags = str(cfg["target"]), [f".w{w}" for w in cfg.get("learning_curve") or []]
        systems = [str(s) for s in cfg["systems"]]
        pair = cfg.get("wmt21")
        if not {"name", "version", "model"} <= set(doc):
            return None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    curve = [f"{t}.{n}" for t in tags for n in ("trigram", "crf")]
    top = {"results.json", "results.md", "learning_curve.png", "wmt21_gap_curve.png"}
    top |= {f"test.{n}.{target}" for n in systems} | {f"test{c}.{target}" for c in curve}
    if not pair:
        return RunNames(frozenset(top), None, ())
    lang = str(pair).split("-")[-1]
    caps = [
        *systems,
        *(f"{n}{t}" for t in tags for n in ("trigram", "crf")),
        "native-crf",
        "native-crf-raw",
        "lowercase",
        "crf-raw",
    ]
    return RunNames(frozenset(top | {"wmt21"}), str(pair), tuple(f".{c}.{lang}" for c in caps))


def _run_foreign(path: Path) -> list[str]:
    """What a run directory holds that its run did not write (every entry, if it cannot be read): names its
    config does not give, anything but regular files (wmt21/ itself aside), and in wmt21/ other files."""
    names = _run_names(path)
    try:
        there = entries(path)
        if names is None:
            return sorted(there)
        out = [name for name, kind in there.items() if name not in names.top or kind != "file"]
        if names.pair and "wmt21" in out and there["wmt21"] == "dir":
            out.remove("wmt21")
            out += [
                f"wmt21/{name}"
                for name, kind in entries(path / "wmt21").items()
                if kind != "file" or not names.wmt21_file(name)
            ]
    except OSError:
        return ["(unreadable)"]
    return sorted(out)


RUN = DirKind("run directory", "results.json of ours", "which no run writes", _is_run, _run_foreign)


def _learning_curve(
    cfg: ExperimentConfig, data: Prepared, results: Results, cache: Path, out: Path
) -> list[tuple[str, Path]]:
    """A model per size of ``cfg.learning_curve`` (the monolingual text in proportion), each scored on the test
    set against the trigram; the points, the full model's last, go to ``results``. Returns (tag, model) pairs."""
    if not cfg.learning_curve:
        return []
    assert results.full is not None
    full_words = words_in(data.sets["train"].target)
    mono_words = words_in(data.mono) if data.mono is not None else 0
    curve_cfg = replace(cfg, systems=["trigram", "crf"])
    models: list[tuple[str, Path]] = []
    for words in cfg.learning_curve:
        sub = subset(data.sets["train"], words, cache, cfg.name)
        n_words = words_in(sub.target)
        sub_mono = mono_subset(data.mono, round(mono_words * n_words / full_words), cache) if data.mono else None
        m = train_model(cfg, sub, data.sets["dev"], cache, f"w{words}", sub_mono)
        text = [sub.target] + ([sub_mono] if sub_mono is not None else [])
        r = evaluate(curve_cfg, m, data.sets["test"], text, out, tag=f".w{words}")
        mono_n = words_in(sub_mono) if sub_mono is not None else 0
        results.learning_curve.append(
            CurvePoint(n_words, mono_n, r.systems["crf"].precision, r.systems["trigram"].precision)
        )
        models.append((f".w{words}", m))
    full = results.full.systems
    results.learning_curve.append(CurvePoint(full_words, mono_words, full["crf"].precision, full["trigram"].precision))
    plot_curve([asdict(p) for p in results.learning_curve], out / "learning_curve.png", cfg.name)
    return models


def _wmt21(
    cfg: ExperimentConfig,
    data: Prepared,
    model: Path,
    curve_models: list[tuple[str, Path]],
    results: Results,
    base: Path,
    out: Path,
) -> None:
    """End-to-end BLEU on WMT21 system outputs, by the full model and the learning curve's models."""
    from moses_recaser.harness.bleu import run_bleu

    caps = build_systems(cfg.systems, Trained(model, data.target_text))
    for tag, m in curve_models:  # the learning curve's models recase the same aligned outputs
        caps["trigram" + tag], caps["crf" + tag] = build_systems(["trigram", "crf"], Trained(m, [])).values()
    assert cfg.wmt21 is not None
    bleu = run_bleu(cfg.wmt21, base, caps, data.priors, out / "wmt21", cfg.wmt21_systems or None)
    if curve_models:
        gaps = split_curve(bleu, [asdict(p) for p in results.learning_curve], [tag for tag, _ in curve_models])
        results.wmt21_curve = [CurvePoint(**g) for g in gaps]
        plot_curve(
            gaps,
            out / "wmt21_gap_curve.png",
            f"{cfg.name}, WMT21 {cfg.wmt21}",
            ylabel="mean gap to the case-insensitive BLEU",
            scale=1.0,
            level=("the systems' native casing", bleu["mean_gap"]["native"]),
        )
    results.bleu = bleu
