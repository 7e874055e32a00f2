"""Config-driven experiments: precision tables (paper Table 4), learning curves (Figure 4).

``moses-recaser experiment configs/NAME.yaml [--out DIR] [--data-root DIR]`` runs the stages below;
each stage's result is cached under a key made of its inputs and settings, so a rerun reuses what
is finished and redoes what changed:

1. tokenized train/dev/test sides (Moses tokenization, escaping on; jieba for zh);
2. one eflomal + symmetrization run over train, dev and test together (the test alignment only
   stands in for the decoder's, through the naive phrase aligner, as in the paper's section 6.2);
3. a model per training size (tables and LM from train, CRF weights from dev);
4. every system recases the lowercased test reference; precision, cased-word F1, headline lines,
   confusion table, paired bootstrap CRF vs trigram; all recased files and signatures are kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from moses_recaser import __version__
from moses_recaser.errors import RecaserError
from moses_recaser.harness.config import ExperimentConfig
from moses_recaser.harness.datasets import cache_dir, concatenate, data_root, tokenized
from moses_recaser.harness.metrics import case_scores, paired_bootstrap_precision
from moses_recaser.harness.systems import Trained
from moses_recaser.harness.systems import build as build_systems
from moses_recaser.moses.bitext import read_aligned_bitext
from moses_recaser.outputs import atomic_output, work_dir
from moses_recaser.sentences import headline_lines
from moses_recaser.stats.npa import phrase_align_triple
from moses_recaser.textio import read_lines
from moses_recaser.triples import lowered

log = logging.getLogger(__name__)


def _key(*parts: object) -> str:
    h = hashlib.sha256()
    for p in parts:
        if isinstance(p, Path) and p.is_file():
            st = p.stat()
            h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
        else:
            h.update(json.dumps(p, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


_SLICE = re.compile(r"(.+)\[([0-9]*):([0-9]*)\]")


def _parse_name(name: str) -> tuple[str, int | None, int | None]:
    """``set`` or ``set[a:b]`` (lines a to b-1, 0-based, as a Python slice)."""
    m = _SLICE.fullmatch(name)
    if m is None:
        return name, None, None
    return m.group(1), int(m.group(2)) if m.group(2) else None, int(m.group(3)) if m.group(3) else None


def _side(
    root: Path, cfg: ExperimentConfig, names: list[str], lang: str, directory: str, cache: Path
) -> list[tuple[Path, int | None, int | None]]:
    out = []
    for n in names:
        base, start, end = _parse_name(n)
        out.append((tokenized(root / cfg.corpus / directory / f"{base}.{lang}", lang, cache), start, end))
    return out


def prepare(cfg: ExperimentConfig, root: Path, cache: Path) -> dict[str, tuple[Path, Path]]:
    """Tokenized (source, target) files of each split."""
    out = {}
    src_dir = cfg.source_dir or cfg.pair
    tgt_dir = cfg.target_dir or cfg.pair
    for split in ("train", "dev", "test"):
        names = getattr(cfg.splits, split)
        if not names:
            raise RecaserError(f"the config names no {split} sets")
        if src_dir != tgt_dir:
            _check_pivot(root, cfg, names, src_dir, tgt_dir)
        src = _side(root, cfg, names, cfg.source, src_dir, cache)
        tgt = _side(root, cfg, names, cfg.target, tgt_dir, cache)
        tag = f"{cfg.name}.{split}"
        out[split] = (
            concatenate(src, cache / "sets" / f"{tag}.{cfg.source}"),
            concatenate(tgt, cache / "sets" / f"{tag}.{cfg.target}"),
        )
    return out


def _check_pivot(root: Path, cfg: ExperimentConfig, names: list[str], src_dir: str, tgt_dir: str) -> None:
    """Multi-parallel sets: the pivot sides of the two directories must match line by line."""
    for n in names:
        base = _parse_name(n)[0]
        a = root / cfg.corpus / src_dir / f"{base}.{cfg.pivot}"
        b = root / cfg.corpus / tgt_dir / f"{base}.{cfg.pivot}"
        for k, (x, y) in enumerate(zip(read_lines(a), read_lines(b), strict=False), 1):
            if x != y:
                raise RecaserError(f"the {cfg.pivot} sides of {src_dir} and {tgt_dir} differ at line {k}", str(b), k)


def align_all(files: dict[str, tuple[Path, Path]], cfg: ExperimentConfig, cache: Path) -> dict[str, Path]:
    key = _key(
        [str(p) for s in files.values() for p in s],
        [p for s in files.values() for p in s],
        cfg.symmetrization,
        cfg.name,
    )
    outs = {split: cache / "align" / f"{cfg.name}.{split}.{key}" for split in files}
    priors = cache / "align" / f"{cfg.name}.{key}.priors"
    outs["priors"] = priors
    if all(p.is_file() for p in outs.values()):
        return outs
    from moses_recaser.moses.pharaoh import format_links
    from moses_recaser.stats.eflomal import align

    sets = {split: list(read_aligned_bitext(str(s), str(t))) for split, (s, t) in files.items()}
    everything = [t for s in sets.values() for t in s]
    t0 = time.perf_counter()
    (cache / "align").mkdir(parents=True, exist_ok=True)
    links = align([t.source for t in everything], [t.target for t in everything], cfg.symmetrization, priors_out=priors)
    log.info("aligned %d sentence pairs in %.0f s", len(everything), time.perf_counter() - t0)
    pos = 0
    for split, triples in sets.items():
        with atomic_output(outs[split]) as fh:
            for a in links[pos : pos + len(triples)]:
                fh.write(format_links(a) + "\n")
        pos += len(triples)
    return outs


def _subset(files: tuple[Path, Path], align: Path, words: int, cache: Path, name: str) -> tuple[Path, Path, Path]:
    """The first lines of the training data holding ``words`` target words (named after the files they
    come from, so that other training data makes other subsets)."""
    key = _key(files[0], files[1], align)
    out = [cache / "subsets" / f"{name}.{words}.{key}.{x}" for x in ("src", "tgt", "align")]
    _head([files[0], files[1], align], 1, words, out)
    return out[0], out[1], out[2]


def _mono_subset(mono: Path, words: int, cache: Path) -> Path:
    """The first lines of the monolingual text holding ``words`` words (the learning curve scales the
    monolingual text with the bitext, so that each point's LM and case prior see the same share)."""
    out = cache / "subsets" / f"{mono.name}.{words}.{_key(mono)}"
    _head([mono], 0, words, [out])
    return out


def _head(files: Sequence[Path], count: int, words: int, out: Sequence[Path]) -> None:
    """Writes to ``out`` the first lines of the parallel ``files`` holding ``words`` words of file ``count``."""
    if all(p.is_file() for p in out):
        return
    out[0].parent.mkdir(parents=True, exist_ok=True)
    rows, total = [], 0
    for row in zip(*(read_lines(f) for f in files)):
        if total >= words:
            break
        rows.append(row)
        total += len(row[count].split())
    for k, p in enumerate(out):
        with atomic_output(p) as fh:
            fh.writelines(r[k] + "\n" for r in rows)


def _words(path: Path) -> int:
    return sum(len(x.split()) for x in read_lines(path))


MAX_SHARED = 0.01  # share of the dev/test target lines the monolingual text may repeat (short lines aside)


def monolingual_text(cfg: ExperimentConfig, root: Path, cache: Path, held_out: Sequence[Path]) -> Path | None:
    """The config's monolingual files, tokenized and concatenated; refused when they repeat more than
    MAX_SHARED of the lines of five or more tokens of any ``held_out`` file (dev and test targets, WMT21
    references): the evaluation data would have leaked into training."""
    if not cfg.monolingual:
        return None
    parts = []
    for entry in cfg.monolingual:
        base, start, end = _parse_name(entry)
        raw = root / cfg.corpus / base
        if not raw.is_file():
            raise RecaserError("monolingual file not found (config key 'monolingual')", str(raw))
        parts.append((tokenized(raw, cfg.target, cache), start, end))
    out = concatenate(parts, cache / "sets" / f"{cfg.name}.mono.{_key(cfg.monolingual)}.{cfg.target}")
    text = set(read_lines(out))
    for path in held_out:
        lines = [x for x in read_lines(path) if len(x.split()) >= 5]
        shared = [k for k, x in enumerate(lines) if x in text]
        if len(shared) > MAX_SHARED * len(lines):
            raise RecaserError(
                f"the monolingual text repeats {len(shared)} of the {len(lines)} target lines of "
                f"{path.name} (e.g. {lines[shared[0]][:60]!r}); leave that set out"
            )
    return out


def held_out_targets(cfg: ExperimentConfig, root: Path, cache: Path, files: dict[str, tuple[Path, Path]]) -> list[Path]:
    """The tokenized texts no training data may repeat: the dev and test targets, and the WMT21
    references the end-to-end runs score against."""
    out = [files["dev"][1], files["test"][1]]
    if cfg.wmt21:
        from moses_recaser.harness.bleu import wmt21_runs

        out.append(tokenized(wmt21_runs(root, cfg.wmt21)[1], cfg.target, cache))
    return out


def train_model(
    cfg: ExperimentConfig,
    train: tuple[Path, Path, Path],
    dev: tuple[Path, Path, Path],
    cache: Path,
    tag: str,
    mono: Path | None = None,
) -> Path:
    from moses_recaser.model.settings import TrainSettings
    from moses_recaser.model.train import Bitext
    from moses_recaser.model.train import train as train_crf

    settings = TrainSettings(
        lm_order=cfg.lm_order,
        symmetrization=cfg.symmetrization,
        feature_set=cfg.features,
        alignment_mode=cfg.phrase_features,
        sigma=cfg.sigma,
        heldout_sentences=cfg.heldout,
        feature_scaling=cfg.feature_scaling,
        monolingual=[str(mono)] if mono is not None else [],
    )
    from moses_recaser.model.features import FEATURE_REVISION, feature_names

    # the feature definitions are code: a change to them must not reuse a cached model
    # settings added later count only when used, so that models cached before them stay valid
    doc = {k: v for k, v in asdict(settings).items() if v or k not in ("monolingual", "monolingual_digest")}
    key = _key(list(train) + list(dev), doc, __version__, feature_names(cfg.features, []), FEATURE_REVISION)
    model = cache / "models" / f"{cfg.name}.{tag}.{key}"
    if (model / "manifest.yaml").is_file():
        return model
    model.parent.mkdir(parents=True, exist_ok=True)
    with work_dir("moses-recaser-exp") as work:
        train_crf(
            str(model),
            train=Bitext(str(train[0]), str(train[1]), str(train[2])),
            dev=Bitext(str(dev[0]), str(dev[1]), str(dev[2])),
            settings=settings,
            work=Path(work),
        )
    return model


def evaluate(
    cfg: ExperimentConfig,
    model: Path,
    test: tuple[Path, Path, Path],
    train_target: Sequence[Path],
    out: Path,
    tag: str = "",
) -> dict:
    triples = [phrase_align_triple(t) for t in read_aligned_bitext(str(test[0]), str(test[1]), str(test[2]))]
    refs = [t.target for t in triples]
    low = [lowered(t) for t in triples]
    headline = [k for k, flags in enumerate(headline_lines(refs)) if all(flags)]
    results: dict = {
        "test_sentences": len(refs),
        "test_words": sum(len(r) for r in refs),
        "headline_lines": len(headline),
        "systems": {},
    }
    hyps: dict[str, list[list[str]]] = {}
    for name, system in build_systems(cfg.systems, Trained(model, train_target)).items():
        t0 = time.perf_counter()
        hyp = system.recase_batch(low)
        seconds = time.perf_counter() - t0
        hyps[name] = hyp
        sc = case_scores(hyp, refs)
        hl = case_scores([hyp[k] for k in headline], [refs[k] for k in headline])
        signature = system.signature
        results["systems"][name] = {
            "precision": sc.precision,
            "f1": sc.f1,
            "headline_precision": hl.precision,
            "errors": sc.words - sc.correct,
            "seconds": seconds,
            "signature": signature,
            "confusion": sc.confusion.tolist(),
        }
        with atomic_output(out / f"test{tag}.{name}.{cfg.target}") as fh:
            fh.writelines(" ".join(x) + "\n" for x in hyp)
    if "crf" in hyps and "trigram" in hyps:
        crf, tri = case_scores(hyps["crf"], refs), case_scores(hyps["trigram"], refs)
        results["crf_vs_trigram"] = {
            "relative_error_reduction": (crf.precision - tri.precision) / (1 - tri.precision),
            "paired_bootstrap_p": paired_bootstrap_precision(crf, tri),
        }
    return results


def run_experiment(cfg: ExperimentConfig, out: Path, root: str | None = None, cache: str | None = None) -> dict:
    base = data_root(root or cfg.data_root)
    cdir = cache_dir(cache)
    files = prepare(cfg, base, cdir)
    aligns = align_all(files, cfg, cdir)
    tri = {s: (files[s][0], files[s][1], aligns[s]) for s in files}  # priors stay in aligns["priors"]
    mono = monolingual_text(cfg, base, cdir, held_out_targets(cfg, base, cdir, files))
    target_text = [files["train"][1]] + ([mono] if mono is not None else [])
    model = train_model(cfg, tri["train"], tri["dev"], cdir, "full", mono)
    results: dict[str, Any] = {"name": cfg.name, "config": asdict(cfg), "model": str(model), "version": __version__}
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)  # only now: a config that fails on its data leaves no results directory
    try:
        _evaluate_all(cfg, results, files, aligns, tri, mono, target_text, model, base, cdir, out)
    except BaseException:
        if made:  # a results directory this run made holds nothing of the user's: a failed run leaves none
            shutil.rmtree(out, ignore_errors=True)
        raise
    return results


def _evaluate_all(
    cfg: ExperimentConfig,
    results: dict[str, Any],
    files: dict,
    aligns: dict,
    tri: dict,
    mono: Path | None,
    target_text: list[Path],
    model: Path,
    base: Path,
    cdir: Path,
    out: Path,
) -> None:
    """The test sets recased by every system, the learning curve, and the results files, into ``out``."""
    results["full"] = evaluate(cfg, model, tri["test"], target_text, out)
    curve, curve_models = [], []
    if cfg.learning_curve:  # sizes of the whole, which each point's monolingual share follows
        full_words = _words(files["train"][1])
        mono_words = _words(mono) if mono is not None else 0
    for words in cfg.learning_curve:
        sub = _subset(files["train"], aligns["train"], words, cdir, cfg.name)
        n_words = _words(sub[1])
        sub_mono = _mono_subset(mono, round(mono_words * n_words / full_words), cdir) if mono is not None else None
        m = train_model(cfg, sub, tri["dev"], cdir, f"w{words}", sub_mono)
        sub_cfg = ExperimentConfig(**{**asdict(cfg), "systems": ["trigram", "crf"]})
        sub_cfg.splits = cfg.splits
        r = evaluate(
            sub_cfg, m, tri["test"], [sub[1]] + ([sub_mono] if sub_mono is not None else []), out, tag=f".w{words}"
        )
        curve.append(
            {
                "words": n_words,
                "monolingual_words": _words(sub_mono) if sub_mono is not None else 0,
                "crf": r["systems"]["crf"]["precision"],
                "trigram": r["systems"]["trigram"]["precision"],
            }
        )
        curve_models.append((f".w{words}", m))
    if curve:
        curve.append(
            {
                "words": full_words,
                "monolingual_words": mono_words,
                "crf": results["full"]["systems"]["crf"]["precision"],
                "trigram": results["full"]["systems"]["trigram"]["precision"],
            }
        )
        results["learning_curve"] = curve
        plot_curve(curve, out / "learning_curve.png", cfg.name)
    if cfg.wmt21:
        from moses_recaser.harness.bleu import run_bleu

        caps = build_systems(cfg.systems, Trained(model, target_text))
        for tag, m in curve_models:  # the learning curve's models recase the same aligned outputs
            caps["trigram" + tag], caps["crf" + tag] = build_systems(["trigram", "crf"], Trained(m, [])).values()
        bleu = run_bleu(cfg.wmt21, base, caps, aligns["priors"], out / "wmt21", cfg.wmt21_systems or None)
        if curve_models:
            results["wmt21_curve"] = _split_curve(bleu, curve, [tag for tag, _ in curve_models])
            plot_curve(
                results["wmt21_curve"],
                out / "wmt21_gap_curve.png",
                f"{cfg.name}, WMT21 {cfg.wmt21}",
                ylabel="mean gap to the case-insensitive BLEU",
                scale=1.0,
                level=("the systems' native casing", bleu["mean_gap"]["native"]),
            )
        results["bleu"] = bleu
    with atomic_output(out / "results.json") as fh:
        json.dump(results, fh, indent=1)
    with atomic_output(out / "results.md") as fh:
        fh.write(results_markdown(results))


def _split_curve(bleu: dict, curve: list[dict], tags: list[str]) -> list[dict]:
    """Moves the learning curve's capitalizers out of ``bleu`` into points of mean gap per training size
    (the last point: the full model's)."""
    gaps = []
    for point, tag in zip(curve, tags + [""]):
        gaps.append(
            {
                "words": point["words"],
                "monolingual_words": point["monolingual_words"],
                "crf": bleu["mean_gap"]["crf" + tag],
                "trigram": bleu["mean_gap"]["trigram" + tag],
            }
        )
    for name in [s + tag for tag in tags for s in ("crf", "trigram")]:
        for row in bleu["systems"].values():
            row.pop(name)
        bleu["mean_gap"].pop(name)
        bleu["mean_bleu"].pop(name)
    return gaps


def results_markdown(results: dict) -> str:
    full = results["full"]
    lines = [
        f"# {results['name']}",
        "",
        (
            f"Test: {full['test_sentences']} sentences, {full['test_words']} words, "
            f"{full['headline_lines']} title-cased headline lines."
        ),
        "",
        "| capitalizer | precision (%) | cased-word F1 (%) | headline precision (%) | errors |",
        "|---|---|---|---|---|",
    ]
    for name, r in full["systems"].items():
        hl = f"{100 * r['headline_precision']:.2f}" if full["headline_lines"] else "–"
        lines.append(f"| {name} | {100 * r['precision']:.2f} | {100 * r['f1']:.2f} | {hl} | {r['errors']} |")
    if "crf_vs_trigram" in full:
        c = full["crf_vs_trigram"]
        lines += [
            "",
            (
                f"CRF vs trigram: relative error reduction {100 * c['relative_error_reduction']:.1f}%, "
                f"paired bootstrap p = {c['paired_bootstrap_p']:.4f}."
            ),
        ]
    if results.get("learning_curve"):
        lines += ["", "| training words (bitext + monolingual) | trigram (%) | CRF (%) |", "|---|---|---|"]
        for p in results["learning_curve"]:
            lines.append(f"| {size_label(p)} | {100 * p['trigram']:.2f} | {100 * p['crf']:.2f} |")
    lines += ["", "Signatures:", ""] + [f"- {n}: `{r['signature']}`" for n, r in full["systems"].items()]
    if results.get("bleu"):
        from moses_recaser.harness.bleu import bleu_markdown

        lines += ["", bleu_markdown(results["bleu"])]
    if results.get("wmt21_curve"):
        lines += [
            "Mean gap to the case-insensitive upper bound by training size (the same aligned outputs):",
            "",
            "| training words (bitext + monolingual) | trigram gap | CRF gap |",
            "|---|---|---|",
        ]
        lines += [f"| {size_label(p)} | {p['trigram']:.2f} | {p['crf']:.2f} |" for p in results["wmt21_curve"]]
        lines.append("")
    return "\n".join(lines) + "\n"


def size_label(point: dict) -> str:
    """A learning-curve point's training size: bitext target words (+ monolingual words)."""
    mono = point.get("monolingual_words", 0)
    return f"{point['words']:,}" + (f" + {mono:,}" if mono else "")


def plot_curve(
    curve: list[dict],
    path: Path,
    title: str,
    ylabel: str = "precision (%)",
    scale: float = 100.0,
    level: tuple[str, float] | None = None,
) -> None:
    """Precision (or gap) against training size, CRF vs trigram; ``level``: a labelled horizontal line."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        log.warning("matplotlib is not installed (pip install 'moses-recaser[plot]'); no learning-curve plot")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [p["words"] for p in curve]
    ax.plot(xs, [scale * p["crf"] for p in curve], "o-", label="CRF-based capitalizer")
    ax.plot(xs, [scale * p["trigram"] for p in curve], "s--", label="LM-based (trigram) capitalizer")
    if level is not None:
        ax.axhline(level[1], color="grey", linestyle=":", label=level[0])
    ax.set_xscale("log")
    ticks: list[float] = []
    for x in sorted(xs, reverse=True):  # the sizes themselves, but none crowding a larger one
        if not ticks or x * 1.5 <= ticks[-1]:
            ticks.append(x)
    ax.set_xticks(ticks, [f"{x / 1000:,.0f}k" for x in ticks])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    mono = any(p.get("monolingual_words") for p in curve)
    ax.set_xlabel("training bitext size (target words)" + ("; monolingual text in proportion" if mono else ""))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)
