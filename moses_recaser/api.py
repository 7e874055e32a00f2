"""The public API, as ``moses_recaser`` exports it: ``Recaser`` (load a model, recase lines) and ``train``.

Both console commands are built on these calls: ``moses-recaser train`` and ``moses-recaser-ems train`` are
``train``, ``moses-recaser recase`` is ``Recaser.load`` and ``Recaser.recase_file``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from moses_recaser.core.memory import DEFAULT_MEMORY
from moses_recaser.io.checks import check_files
from moses_recaser.io.corpus import check_rereadable
from moses_recaser.io.errors import RecaserError, of_kind
from moses_recaser.model.data import Bitext, DecoderOutput
from moses_recaser.model.settings import DEV_SIZE, TrainSettings
from moses_recaser.moses.trace import TraceOptions
from moses_recaser.stats.build import StatsSettings, write_statistics

log = logging.getLogger("moses_recaser")
PathLike = str | os.PathLike[str]


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How ``train`` runs, not what it makes (the model is the same for every value): ``jobs`` processes count
    the corpus (and tokenize raw text); ``memory`` (``"2G"``, ``"50%"``): counts beyond it are sorted on disk in
    ``work`` (default: the system's temporary directory), and the whole run stays within it plus 100 MiB, a setting
    below what the training needs refused before any work (a number of bytes is neither checked nor promised);
    ``lmplz``, KenLM's lmplz binary, estimates the LM instead of this package (the settings' ``lm_estimator``)."""

    jobs: int = 1
    memory: str | int | None = DEFAULT_MEMORY
    work: PathLike | None = None
    lmplz: PathLike | None = None


def train(
    data: Bitext | PathLike,
    model: PathLike,
    settings: TrainSettings | None = None,
    *,
    dev: Bitext | None = None,
    dev_size: int = DEV_SIZE,
    dev_output: DecoderOutput | None = None,
    run: RunOptions | None = None,
    raw: bool = False,
) -> TrainedModel:
    """Train a recaser into the directory ``model``; return it (its path and signature): the one entry point of
    training, which the command lines, the EMS step and the experiments call.

    - ``data``: the cased, tokenized training bitext, ``Bitext(source, target, alignment)`` (files; the Pharaoh
      word alignment None: eflomal aligns it); or the directory of a statistics model (``moses-recaser stats`` or
      ``merge``), whose tables and LM are used.
    - ``dev``: the bitext the CRF weights are fitted on; without it, the last ``dev_size`` sentence pairs of the
      training bitext (at most a tenth of it), held out from the tables. ``dev_output``: the decoder's ``-t``
      output of the dev source, ``DecoderOutput(trace, alignment, options)``, to fit the weights on what
      recasing will read.
    - ``settings``: every setting that changes the model (``TrainSettings(lm_order=4, sigma=2.0, ...)``; default:
      the defaults), recorded in the model and its signature. ``run``: how the work runs (``RunOptions``).
    - ``raw``: the bitexts and the monolingual text are raw (detokenized) text, as the user has it: tokenized here
      as ``Recaser.recase(raw=True)`` tokenizes (``moses.tokenizer``, for the settings' ``source_lang`` and
      ``target_lang``) and aligned with eflomal. Not with alignment files, ``dev_output`` or a statistics model,
      which are of tokenized text.

    An existing model at ``model`` is replaced, atomically; anything else there is refused (``RecaserError``).
    Errors name the arguments and settings in backquotes (```dev_source``` for ``dev.source``); the command lines
    spell them as their flags (``--dev-source``).
    """
    from moses_recaser.core.memory import SCIPY_SPACE, Memory, check_address_space
    from moses_recaser.core.workers import check_workers
    from moses_recaser.io.outputs import model_target, work_dir
    from moses_recaser.model.train import fit_model

    run = of_kind("run", run or RunOptions(), RunOptions)
    of_kind("raw", raw, bool)  # a config's "yes" is not true
    dev_output = None if dev_output is None else of_kind("dev_output", dev_output, DecoderOutput)
    check_workers(run.jobs)
    if data is None:
        raise RecaserError("give the training bitext (`source` and `target`) or a statistics model (`stats`)")
    stats = None if isinstance(data, Bitext) else data
    training = _bitext("", data) if isinstance(data, Bitext) else None
    dev_set = _bitext("dev_", of_kind("dev", dev, Bitext)) if dev is not None else None
    if isinstance(dev_size, bool) or not isinstance(dev_size, int):
        raise RecaserError(f"`dev_size` must be a whole number of sentence pairs, not {dev_size!r}")
    _check_paths(("model",), model=model, stats=stats, lmplz=run.lmplz, work=run.work)
    if dev_output is not None:
        _check_paths(("dev_trace",), dev_trace=dev_output.trace, dev_trace_alignment=dev_output.alignment)
        of_kind("dev_output.options", dev_output.options, TraceOptions)
        dev_output = DecoderOutput(os.fspath(dev_output.trace), _str(dev_output.alignment), dev_output.options)
    budget = Memory.from_setting(run.memory)
    chosen = _settings(settings)
    model_target(os.fspath(model))  # a destination that cannot take the model fails now, before any reading
    given = [("stats", stats), ("lm", chosen.lm), *(("monolingual", m) for m in chosen.monolingual), ("work", run.work)]
    for prefix, b in (("", training), ("dev_", dev_set)):
        given += [(prefix + k, getattr(b, k)) for k in ("source", "target", "alignment")] if b is not None else []
    given += [("dev_trace", dev_output.trace), ("dev_trace_alignment", dev_output.alignment)] if dev_output else []
    _refuse_inputs_inside(model, given)
    if not isinstance(run.memory, int):  # a setting as the flags give it (bytes, the tests', promise nothing)
        files: list[Any] = [data] if training is None else [training.source, training.target, training.alignment]
        files += [dev_set.source, dev_set.target, dev_set.alignment] if dev_set is not None else []
        budget.check_training(_text_bytes([*files, *chosen.monolingual]), run.jobs)
    # scipy (the CRF fit's) loaded before the long work: its OpenBLAS, short of address space (ulimit -v) later,
    # would retry for ever instead of raising MemoryError
    check_address_space(SCIPY_SPACE, "loading scipy")
    import scipy.optimize  # noqa: F401

    if raw:
        alignments = {"alignment": training and training.alignment, "dev_alignment": dev_set and dev_set.alignment}
        _check_raw(chosen, **alignments, dev_trace=dev_output, stats=stats)
    if dev_set is None:
        training, dev_set = _held_out(training, dev_size)
    with _as_recaser_errors(), work_dir("moses-recaser", run.work) as scratch:
        names: dict[str, str] = {}
        if raw:
            training, dev_set, chosen, names = _tokenized(training, dev_set, chosen, Path(scratch), run.jobs)
        try:
            report = fit_model(
                os.fspath(model),
                train=training,
                stats_model=_str(stats),
                dev=dev_set,
                settings=chosen,
                work=Path(scratch),
                jobs=run.jobs,
                lmplz=_str(run.lmplz),
                dev_output=dev_output,
                memory=budget,
                named_as=names,
            )
        except RecaserError as exc:  # a raw file's line, named as the user named the file
            if exc.path not in names:
                raise
            raise exc.at(names[exc.path], exc.line) from None
    log.info(
        "dev GEN oracle %.2f%%; %d L-BFGS iterations; times %s",
        100 * report.gen_oracle,
        report.iterations,
        ", ".join(f"{k} {v:.1f}s" for k, v in report.seconds.items()),
    )
    _warn_if_eflomal_aligned(
        training is not None and training.alignment is None,
        dev is not None and dev_set.alignment is None and dev_output is None,
    )
    return TrainedModel(Path(model), report.signature)


def _warn_if_eflomal_aligned(train_aligned: bool, dev_aligned: bool) -> None:
    """eflomal seeds its sampler from the system and takes no seed: what it aligned differs from run to run, and
    so does the model; the arguments whose files would make it the same are named."""
    named = [
        (what, arg)
        for what, arg, aligned in (
            ("training bitext", "`alignment`", train_aligned),
            ("dev set", "`dev_alignment`", dev_aligned),
        )
        if aligned
    ]
    if named:
        what, args = zip(*named)
        log.warning(
            "this model is not reproducible: eflomal aligned its %s with a seed of the system; give %s (from "
            "'moses-recaser align') to train the same model again",
            " and ".join(what),
            " and ".join(args),
        )


def _check_raw(settings: TrainSettings, **tokenized: object) -> None:
    """``raw`` training: the languages to tokenize for, and no input that is of tokenized text."""
    for name in ("source_lang", "target_lang"):
        if getattr(settings, name) is None:
            raise RecaserError(f"raw text is tokenized for its language: give `{name}` with `raw`")
    given = [f"`{name}`" for name, value in tokenized.items() if value is not None]
    if given:
        verb = "goes" if len(given) == 1 else "go"
        raise RecaserError(
            f"{', '.join(given)} {verb} with tokenized text, not with `raw` (raw text is tokenized here)"
        )


def _tokenized(
    training: Bitext | None, dev: Bitext, settings: TrainSettings, scratch: Path, jobs: int
) -> tuple[Bitext | None, Bitext, TrainSettings, dict[str, str]]:
    """The raw bitexts and monolingual text tokenized into ``scratch`` (each file once): the bitexts and settings
    that read them, and the name the user gave each tokenized file (the model records those)."""
    from moses_recaser.moses.tokenizer import tokenize_file

    made: dict[tuple[str, str], str] = {}

    def tokenized(path: str, lang: str | None) -> str:
        assert lang is not None  # (_check_raw)
        if (path, lang) not in made:
            made[path, lang] = str(scratch / f"raw{len(made)}.{lang}")
            log.info("tokenizing %s (%s)", path, lang)
            tokenize_file(path, made[path, lang], lang, jobs=jobs)
        return made[path, lang]

    def bitext(b: Bitext) -> Bitext:
        return dataclasses.replace(
            b, source=tokenized(b.source, settings.source_lang), target=tokenized(b.target, settings.target_lang)
        )

    train_tok, dev_tok = None if training is None else bitext(training), bitext(dev)
    mono = [tokenized(m, settings.target_lang) for m in settings.monolingual]
    names = {tok: path for (path, _), tok in made.items()}
    return train_tok, dev_tok, dataclasses.replace(settings, monolingual=mono), names


@dataclasses.dataclass(frozen=True)
class TrainedModel(os.PathLike[str]):
    """What ``train`` made: the model's directory and its signature. It is a path itself (``Recaser.load``,
    ``open`` and ``os.fspath`` take it), so code that took ``train``'s result for the directory keeps working."""

    path: Path
    signature: str

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def __str__(self) -> str:
        return os.fspath(self.path)


@contextlib.contextmanager
def _as_recaser_errors() -> Iterator[None]:
    """A fault of the system met on the way (a full disk, an unreadable file) as a ``RecaserError``, as the command
    line reports it: the library raises one kind of error for what is not a bug."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        where = None if exc.filename is None else os.fspath(exc.filename)
        raise RecaserError(exc.strerror or str(exc), where) from None


def _check_paths(required: tuple[str, ...] = (), **paths: object) -> None:
    """Each a file name (a str or a path; None: not given, which the ``required`` must be), not an int or bytes:
    refused by the flag's name before any work, not a TypeError midway."""
    for name, value in paths.items():
        if value is None and name not in required:
            continue
        if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
            raise RecaserError(f"`{name}` must be a file name, not {value!r}")


def _str(path: PathLike | None) -> str | None:
    return None if path is None else os.fspath(path)


def _settings(settings: TrainSettings | None) -> TrainSettings:
    """A copy of ``settings`` (default: the defaults), checked."""
    chosen = dataclasses.replace(of_kind("settings", settings or TrainSettings(), TrainSettings))
    chosen.check()  # before any work, and before a str of monolingual is taken for a list of names
    for m in chosen.monolingual:
        check_rereadable(m)  # (read twice: its digest, then its lines)
    # as given (errors name them so); the model records them resolved (``model.train``)
    chosen.monolingual = [os.fspath(m) for m in chosen.monolingual]
    return chosen


def _bitext(prefix: str, b: Bitext) -> Bitext:
    """A bitext of the caller's, its files checked as file names (named ``dev_source`` for ``prefix`` dev_)."""
    files = {"source": b.source, "target": b.target, "alignment": b.alignment}
    _check_paths((prefix + "source", prefix + "target"), **{prefix + k: v for k, v in files.items()})
    return Bitext(os.fspath(b.source), os.fspath(b.target), _str(b.alignment))


def _refuse_inputs_inside(model: PathLike, given: list[tuple[str, Any]]) -> None:
    """No input (nor the scratch directory) in the model directory, which the new model replaces: a statistics
    model, a corpus or an LM there would be gone, or read as it is replaced."""
    from moses_recaser.io.outputs import is_within

    for name, path in given:
        if path is not None and is_within(path, model):
            raise RecaserError(
                f"`{name}` is inside the model directory {os.fspath(model)}, which the new model replaces: keep it "
                "outside",
                os.fspath(path),
            )


def _text_bytes(files: list[Any]) -> int:
    """Bytes of the training's files (of a statistics model's directory: the files in it), for the memory it
    needs."""
    from moses_recaser.io.lines import file_stat, kind_of
    from moses_recaser.io.outputs import entries

    paths: list[Path] = []
    for f in (Path(f) for f in files if f is not None):
        paths += [f / name for name, kind in entries(f).items() if kind == "file"] if kind_of(f) == "dir" else [f]
    return sum(st.st_size for st in map(file_stat, paths) if st is not None)


def _held_out(training: Bitext | None, dev_size: int) -> tuple[Bitext, Bitext]:
    """The training bitext without its last ``dev_size`` sentence pairs (at most a tenth), and those pairs."""
    from moses_recaser.io.corpus import corpus_lines

    if training is None:
        raise RecaserError("with a statistics model, give the dev set (`dev_source` and `dev_target`)")
    if dev_size < 1:
        raise RecaserError(f"`dev_size` must be at least 1 sentence pair, got {dev_size}")
    n = corpus_lines([f for f in (training.source, training.target, training.alignment) if f])
    if n < 2:
        raise RecaserError("the corpus needs at least 2 lines (training and dev)", training.target)
    held = min(dev_size, max(n // 10, 1))
    log.info("fitting the weights on the last %d of %d sentence pairs (held out from the tables)", held, n)
    return training.split(held)


# The other subcommands' work: one function each, which the command line maps its flags onto. Outputs are
# written whole or not at all, as every output of the package ('-': stdout).


def make_triples(
    source: PathLike,
    output: PathLike,
    *,
    trace: PathLike | None = None,
    target: PathLike | None = None,
    alignment: PathLike | None = None,
    trace_format: str = "trace",
    trace_options: TraceOptions | None = None,
) -> int:
    """The (F, e, A) triples of a decoder's ``trace`` of ``source`` (its ``alignment`` the decoder's
    -alignment-output-file), or of a word-aligned bitext ``source``/``target``/``alignment``, as JSON Lines
    (``output.gz``: gzipped); their number."""
    from moses_recaser.core.triples import write_triples
    from moses_recaser.io.outputs import atomic_output
    from moses_recaser.moses.bitext import read_aligned_bitext
    from moses_recaser.moses.formats import FORMATS, Inputs

    if (trace is None) == (target is None):
        raise RecaserError("give exactly one of `trace` (decoder output) or `target` (plain bitext)")
    check_files({"source": source, "trace": trace, "target": target, "alignment": alignment}, {"output": output})
    if trace_format not in FORMATS:
        raise RecaserError(f"`trace_format` is {trace_format!r}; choose one of {', '.join(FORMATS)}")
    of_kind("trace_options", trace_options or TraceOptions(), TraceOptions)
    if target is not None:
        triples = read_aligned_bitext(os.fspath(source), os.fspath(target), _str(alignment))
    else:
        fmt = FORMATS[trace_format]
        if alignment is not None and not fmt.takes_alignment:
            raise RecaserError(f"an alignment file does not go with `trace_format` {trace_format} ({fmt.description})")
        inputs = Inputs(os.fspath(trace or ""), os.fspath(source), _str(alignment), trace_options or TraceOptions())
        triples = (r.triple for r in fmt.read(inputs))
    with atomic_output(output, compress=True) as out:
        n = write_triples(triples, out)
    log.info("wrote %d triples", n)
    return n


def make_lm(text: PathLike, output: PathLike, lm_order: int = 3, discount_fallback: bool = True) -> None:
    """An interpolated modified Kneser-Ney LM of tokenized ``text`` (one sentence a line), in ARPA, as lmplz
    estimates it."""
    from moses_recaser.stats.build import estimate_lm, lm_from_text
    from moses_recaser.stats.counter import check_lm_order
    from moses_recaser.stats.in_memory import count_text

    check_files({"input": text}, {"output": output})
    check_lm_order(lm_order)
    estimate_lm(count_text(lm_from_text(os.fspath(text)), lm_order), os.fspath(output), discount_fallback)


def align(
    source: PathLike,
    target: PathLike,
    output: PathLike,
    symmetrization: str = "grow-diag-final-and",
    *,
    priors: PathLike | None = None,
    priors_out: PathLike | None = None,
) -> None:
    """A tokenized bitext word-aligned with eflomal both ways and symmetrized, as Pharaoh ``i-j`` lines;
    ``priors``: eflomal priors to align with, ``priors_out``: the priors of this alignment, written."""
    from moses_recaser.io.outputs import atomic_output
    from moses_recaser.moses.pharaoh import format_links
    from moses_recaser.stats.eflomal import aligned_bitext

    check_files({"source": source, "target": target, "priors": priors}, {"output": output, "priors_out": priors_out})
    triples = aligned_bitext(os.fspath(source), os.fspath(target), symmetrization, priors, priors_out)
    with atomic_output(output, compress=True) as out:
        for t in triples:
            out.write(format_links(t.links or []) + "\n")


def phrase_align(
    source: PathLike,
    target: PathLike,
    alignment: PathLike,
    output: PathLike,
    lengths: dict[int, float] | None = None,
    seed: int = 0,
) -> None:
    """The naive phrase aligner (paper section 5) over a word-aligned bitext: its triples as JSON Lines.
    ``lengths``: the weights of source phrase lengths to copy (``phrase_lengths``)."""
    from moses_recaser.core.triples import write_triples
    from moses_recaser.io.outputs import atomic_output
    from moses_recaser.moses.bitext import read_aligned_bitext
    from moses_recaser.stats.npa import phrase_align_triple

    check_files({"source": source, "target": target, "alignment": alignment}, {"output": output})
    if alignment is None:
        raise RecaserError("`alignment` is the word alignment the phrases are made from: give it")
    TrainSettings(npa_lengths=lengths, npa_seed=seed).check()  # (the settings' own checks of the two)
    triples = read_aligned_bitext(os.fspath(source), os.fspath(target), os.fspath(alignment))
    with atomic_output(output, compress=True) as out:
        write_triples((phrase_align_triple(t, lengths, seed) for t in triples), out)


def phrase_lengths(source: PathLike, trace: PathLike) -> dict[int, float]:
    """The source phrase lengths of a Moses ``-t`` output of ``source``, as weights for the phrase aligner
    (``TrainSettings.npa_lengths``)."""
    from moses_recaser.stats.npa import lengths_from_trace

    check_files({"lengths_source": source, "lengths_trace": trace}, {})
    return lengths_from_trace(os.fspath(source), os.fspath(trace))


def count_shard(
    bitext: Bitext, shard: str, output: PathLike, lm_order: int = 3, memory: str | int | None = DEFAULT_MEMORY
) -> None:
    """The counts of the ``shard`` ``"i/N"`` of a word-aligned bitext (its i-th of N contiguous line blocks) into
    a count file, which ``merge_shards`` merges with the others (a map step, one machine each)."""
    from moses_recaser.core.memory import Memory
    from moses_recaser.io.outputs import atomic_output
    from moses_recaser.stats import shards
    from moses_recaser.stats.counter import check_lm_order

    of_kind("bitext", bitext, Bitext)
    if not isinstance(shard, str):
        raise RecaserError(f"`shard` must be i/N with 1 <= i <= N, got {shard!r}")
    i, n = shards.parse_shard(shard)
    check_files({"source": bitext.source, "target": bitext.target, "alignment": bitext.alignment}, {"output": output})
    check_lm_order(lm_order)
    if bitext.alignment is None:
        raise RecaserError("a shard is counted from a word-aligned bitext: give its `alignment`")
    budget = Memory.from_setting(memory)
    with atomic_output(output, binary=True) as out:
        shards.count_shard(bitext.source, bitext.target, bitext.alignment, i, n, lm_order, out, budget)


def merge_shards(
    counts: list[PathLike],
    model: PathLike,
    discount_fallback: bool = True,
    lm_prune: int = 0,
    memory: str | int | None = DEFAULT_MEMORY,
) -> str:
    """The statistics model of shard count files (``count_shard``), as ``statistics`` makes it of the whole
    bitext; its signature."""
    from moses_recaser.core.memory import Memory
    from moses_recaser.stats.shards import merge_into_model

    if isinstance(counts, (str, os.PathLike)) or not counts:
        raise RecaserError(f"`shards` must be a list of shard count files, not {counts!r}"[:300])
    check_files({"shards": list(counts)}, {}, binary=("shards",))
    budget = Memory.from_setting(memory)
    return merge_into_model([os.fspath(c) for c in counts], os.fspath(model), discount_fallback, budget, lm_prune)


def statistics(
    bitext: Bitext, model: PathLike, settings: StatsSettings | None = None, run: RunOptions | None = None
) -> str:
    """A statistics model of a bitext (its tables and LM, no weights), for ``train`` with its directory as the
    data; its signature. ``bitext.alignment`` None: eflomal aligns it."""
    from moses_recaser.core.memory import Memory

    run = of_kind("run", run or RunOptions(), RunOptions)
    of_kind("bitext", bitext, Bitext)
    check_files({"source": bitext.source, "target": bitext.target, "alignment": bitext.alignment}, {})
    chosen = dataclasses.replace(
        of_kind("settings", settings or StatsSettings(), StatsSettings), alignment=_str(bitext.alignment)
    )
    return write_statistics(
        bitext.source,
        bitext.target,
        bitext.alignment,
        chosen,
        os.fspath(model),
        run.jobs,
        Memory.from_setting(run.memory),
    )
