"""The cached stages of an experiment, each keyed by its inputs and settings, so that a rerun reuses what is
finished and redoes what changed: tokenized sets, one eflomal run over them, the monolingual text, subsets for
a learning curve, and trained models.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import stat
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from moses_recaser._version import __version__
from moses_recaser.harness.datasets import concatenate, tokenized
from moses_recaser.harness.experiment_config import ExperimentConfig
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import file_stat, kind_of, read_lines
from moses_recaser.io.outputs import atomic_output, make_dirs
from moses_recaser.moses.bitext import read_aligned_bitext

log = logging.getLogger(__name__)
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Sides:
    """A tokenized parallel set: source and target files."""

    source: Path
    target: Path


@dataclass(frozen=True)
class Aligned:
    """A tokenized parallel set with its word alignment (Pharaoh)."""

    source: Path
    target: Path
    alignment: Path


@dataclass(frozen=True)
class Prepared:
    """What the data stages made: the aligned train, dev and test sets, eflomal's priors (for aligning system
    outputs later), and the monolingual text (None: the config has none)."""

    sets: dict[str, Aligned]
    priors: Path
    mono: Path | None

    @property
    def target_text(self) -> list[Path]:
        """The cased target-language text the monolingual capitalizers learn from."""
        return [self.sets["train"].target] + ([self.mono] if self.mono is not None else [])


def prepare_data(cfg: ExperimentConfig, root: Path, cache: Path) -> Prepared:
    """Tokenized, aligned sets and the monolingual text (checked not to repeat dev or test)."""
    files = prepare(cfg, root, cache)
    aligned = align_all(files, cfg, cache)
    sets = {s: Aligned(files[s].source, files[s].target, aligned[s]) for s in SPLITS}
    mono = monolingual_text(cfg, root, cache, held_out_targets(cfg, root, cache, files))
    return Prepared(sets, aligned["priors"], mono)


def stage_key(*parts: object) -> str:
    """A short hash of ``parts`` for a stage's cache: a file (a Path, also inside a list or a tuple) by its name,
    size and modification time, so that a stage is redone when a file it reads changes (a list of files was keyed
    by their names only: a cached model or alignment outlived a change to its training or test data); anything
    else by its JSON."""
    h = hashlib.sha256()
    _feed(h, parts)
    return h.hexdigest()[:16]


def _feed(h: Any, part: object) -> None:
    st = file_stat(part) if isinstance(part, Path) else None
    if st is not None and stat.S_ISREG(st.st_mode):
        h.update(f"{part}:{st.st_size}:{st.st_mtime_ns}".encode())
    elif isinstance(part, (list, tuple)):
        h.update(b"[")
        for p in part:
            _feed(h, p)
        h.update(b"]")
    else:
        h.update(json.dumps(part, sort_keys=True, default=str).encode())


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


def prepare(cfg: ExperimentConfig, root: Path, cache: Path) -> dict[str, Sides]:
    """Tokenized (source, target) files of each split."""
    out = {}
    src_dir = cfg.source_dir or cfg.pair
    tgt_dir = cfg.target_dir or cfg.pair
    for split in SPLITS:
        names = getattr(cfg.splits, split)
        if not names:
            raise RecaserError(f"the config names no {split} sets")
        if src_dir != tgt_dir:
            _check_pivot(root, cfg, names, src_dir, tgt_dir)
        src = _side(root, cfg, names, cfg.source, src_dir, cache)
        tgt = _side(root, cfg, names, cfg.target, tgt_dir, cache)
        tag = f"{cfg.name}.{split}"
        out[split] = Sides(
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


def align_all(files: dict[str, Sides], cfg: ExperimentConfig, cache: Path) -> dict[str, Path]:
    """One eflomal run over every set (its alignment of each, and ``priors``), cached."""
    paths = [p for s in files.values() for p in (s.source, s.target)]
    key = stage_key(
        [str(p) for p in paths],
        paths,
        cfg.symmetrization,
        cfg.name,
    )
    outs = {split: cache / "align" / f"{cfg.name}.{split}.{key}" for split in files}
    priors = cache / "align" / f"{cfg.name}.{key}.priors"
    outs["priors"] = priors
    if all(kind_of(p) == "file" for p in outs.values()):
        return outs
    from moses_recaser.moses.pharaoh import format_links
    from moses_recaser.stats.eflomal import align

    sets = {split: list(read_aligned_bitext(str(s.source), str(s.target))) for split, s in files.items()}
    everything = [t for s in sets.values() for t in s]
    t0 = time.perf_counter()
    make_dirs(cache / "align")
    links = align([t.source for t in everything], [t.target for t in everything], cfg.symmetrization, priors_out=priors)
    log.info("aligned %d sentence pairs in %.0f s", len(everything), time.perf_counter() - t0)
    pos = 0
    for split, triples in sets.items():
        with atomic_output(outs[split]) as fh:
            for a in links[pos : pos + len(triples)]:
                fh.write(format_links(a) + "\n")
        pos += len(triples)
    return outs


def subset(train: Aligned, words: int, cache: Path, name: str) -> Aligned:
    """The first lines of the training data holding ``words`` target words (named after the files they
    come from, so that other training data makes other subsets)."""
    key = stage_key(train.source, train.target, train.alignment)
    out = [cache / "subsets" / f"{name}.{words}.{key}.{x}" for x in ("src", "tgt", "align")]
    _head([train.source, train.target, train.alignment], 1, words, out)
    return Aligned(out[0], out[1], out[2])


def mono_subset(mono: Path, words: int, cache: Path) -> Path:
    """The first lines of the monolingual text holding ``words`` words (the learning curve scales the
    monolingual text with the bitext, so that each point's LM and case prior see the same share)."""
    out = cache / "subsets" / f"{mono.name}.{words}.{stage_key(mono)}"
    _head([mono], 0, words, [out])
    return out


def _head(files: Sequence[Path], count: int, words: int, out: Sequence[Path]) -> None:
    """Writes to ``out`` the first lines of the parallel ``files`` holding ``words`` words of file ``count``."""
    if all(kind_of(p) == "file" for p in out):
        return
    make_dirs(out[0].parent)
    rows, total = [], 0
    for row in zip(*(read_lines(f) for f in files)):
        if total >= words:
            break
        rows.append(row)
        total += len(row[count].split())
    for k, p in enumerate(out):
        with atomic_output(p) as fh:
            fh.writelines(r[k] + "\n" for r in rows)


def words_in(path: Path) -> int:
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
        if kind_of(raw) != "file":
            raise RecaserError("monolingual file not found (config key 'monolingual')", str(raw))
        parts.append((tokenized(raw, cfg.target, cache), start, end))
    out = concatenate(parts, cache / "sets" / f"{cfg.name}.mono.{stage_key(cfg.monolingual)}.{cfg.target}")
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


def held_out_targets(cfg: ExperimentConfig, root: Path, cache: Path, files: dict[str, Sides]) -> list[Path]:
    """The tokenized texts no training data may repeat: the dev and test targets, and the WMT21
    references the end-to-end runs score against."""
    out = [files["dev"].target, files["test"].target]
    if cfg.wmt21:
        from moses_recaser.harness.bleu import wmt21_runs

        out.append(tokenized(wmt21_runs(root, cfg.wmt21)[1], cfg.target, cache))
    return out


def train_model(
    cfg: ExperimentConfig, train: Aligned, dev: Aligned, cache: Path, tag: str, mono: Path | None = None
) -> Path:
    """The CRF model of ``train`` (tables, LM) and ``dev`` (weights) with the config's settings, cached under a
    key of its inputs, its settings and the feature code (``features.feature_revision``)."""
    from moses_recaser import Bitext, TrainSettings
    from moses_recaser import train as train_crf

    settings = TrainSettings(
        lm_order=cfg.lm_order,
        symmetrization=cfg.symmetrization,
        feature_set=cfg.feature_set,
        alignment_mode=cfg.alignment_mode,
        sigma=cfg.sigma,
        heldout_sentences=cfg.heldout_sentences,
        feature_scaling=cfg.feature_scaling,
        monolingual=[str(mono)] if mono is not None else [],
        input_case=cfg.input_case,
        source_lang=cfg.source,
        target_lang=cfg.target,
    )
    from moses_recaser.model.features import feature_names, feature_revision

    # the feature definitions are code: a change to them must not reuse a cached model
    # settings added later count only when used, so that models cached before them stay valid
    doc = {k: v for k, v in asdict(settings).items() if v or k not in ("monolingual", "monolingual_digest")}
    files = [train.source, train.target, train.alignment, dev.source, dev.target, dev.alignment]
    files += [mono] if mono is not None else []
    key = stage_key(files, doc, __version__, feature_names(cfg.feature_set, []), feature_revision())
    model = cache / "models" / f"{cfg.name}.{tag}.{key}"
    if kind_of(model / "manifest.yaml") == "file":
        return model
    make_dirs(model.parent)
    train_crf(
        Bitext(str(train.source), str(train.target), str(train.alignment)),
        model,
        settings,
        dev=Bitext(str(dev.source), str(dev.target), str(dev.alignment)),
    )
    return model
