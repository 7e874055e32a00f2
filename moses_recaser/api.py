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
from typing import TYPE_CHECKING, Any

from moses_recaser.io.errors import RecaserError
from moses_recaser.model.recaser import Recaser
from moses_recaser.model.settings import DERIVED, DEV_SIZE, TrainSettings
from moses_recaser.moses.trace import TraceOptions
from moses_recaser.stats.pieces import check_rereadable

if TYPE_CHECKING:
    from moses_recaser.model.data import Bitext

log = logging.getLogger("moses_recaser")
PathLike = str | os.PathLike[str]

__all__ = ["Recaser", "TrainedModel", "train"]


def train(
    source: PathLike | None,
    target: PathLike | None,
    model: PathLike,
    settings: TrainSettings | None = None,
    *,
    alignment: PathLike | None = None,
    dev_source: PathLike | None = None,
    dev_target: PathLike | None = None,
    dev_alignment: PathLike | None = None,
    dev_size: int = DEV_SIZE,
    dev_trace: PathLike | None = None,
    dev_trace_alignment: PathLike | None = None,
    dev_trace_options: TraceOptions | None = None,
    stats: PathLike | None = None,
    jobs: int = 1,
    lmplz: PathLike | None = None,
    work: PathLike | None = None,
    memory: str | int | None = None,
    raw: bool = False,
) -> TrainedModel:
    """Train a recaser into the directory ``model``; return it (its path and signature): the one entry point of
    training, which the command lines, the EMS step and the experiments call.

    - ``source``/``target``: the cased, tokenized training bitext (files), word-aligned by ``alignment``
      (Pharaoh; None: eflomal aligns it). Or ``stats``: a statistics model (``moses-recaser stats``/``merge``)
      whose tables and LM are used instead (then ``source`` and ``target`` are None).
    - The CRF weights are fitted on ``dev_source``/``dev_target`` (and ``dev_alignment``); without them, on
      the last ``dev_size`` sentence pairs of the training bitext (at most a tenth of it), held out from the
      tables. ``dev_trace`` (and ``dev_trace_alignment``): the decoder's ``-t`` output of the dev source,
      to fit the weights on what recasing will read.
    - ``jobs``: processes that count the corpus (the model is the same for every number); ``lmplz``: KenLM's
      lmplz binary estimates the LM; ``work``: where temporary files go (default: the system's); ``memory``:
      what the whole run may hold (``"2G"``, ``"50%"``, or a number of bytes; default ``"2G"``): counts beyond
      it are sorted on disk in ``work`` (the model is the same for every setting).
    - ``raw``: the bitext, the dev set and the monolingual text are raw (detokenized) text, as the user has it:
      tokenized here as ``Recaser.recase(raw=True)`` tokenizes (``moses.tokenizer``, for the settings'
      ``source_lang`` and ``target_lang``, ``jobs`` processes) and aligned with eflomal. Not with ``alignment``,
      ``dev_alignment``, ``dev_trace`` or ``stats``, which are of tokenized text.
    - ``settings``: every setting that changes the model (``TrainSettings(lm_order=4, sigma=2.0, ...)``; default:
      the defaults), recorded in the model and its signature.

    An existing model at ``model`` is replaced, atomically; anything else there is refused (``RecaserError``).
    Errors name the arguments and settings in backquotes (```dev_source```); the command lines spell them as
    their flags (``--dev-source``).
    """
    from moses_recaser.core.memory import SCIPY_SPACE, Memory, check_address_space
    from moses_recaser.core.workers import check_workers
    from moses_recaser.io.outputs import work_dir
    from moses_recaser.model.data import DecoderOutput
    from moses_recaser.model.train import fit_model

    check_workers(jobs)
    if isinstance(dev_size, bool) or not isinstance(dev_size, int):
        raise RecaserError(f"`dev_size` must be a whole number of sentence pairs, not {dev_size!r}")
    if dev_trace_options is not None and not isinstance(dev_trace_options, TraceOptions):
        raise RecaserError(f"`dev_trace_options` must be a TraceOptions, not {type(dev_trace_options).__name__}")
    _check_paths(
        model=model,
        source=source,
        target=target,
        alignment=alignment,
        stats=stats,
        dev_source=dev_source,
        dev_target=dev_target,
        dev_alignment=dev_alignment,
        dev_trace=dev_trace,
        dev_trace_alignment=dev_trace_alignment,
        lmplz=lmplz,
        work=work,
    )
    if work is not None:
        scratch_dir, model_dir = Path(os.path.realpath(work)), Path(os.path.realpath(model))
        if scratch_dir == model_dir or model_dir in scratch_dir.parents:
            raise RecaserError(
                f"`work` is inside the model directory {os.fspath(model)}, which the new model replaces: give a "
                "scratch directory outside it",
                os.fspath(work),
            )
    budget = Memory.from_setting(memory)
    # scipy (the CRF fit's) loaded before the long work: its OpenBLAS, short of address space (ulimit -v) later,
    # would retry for ever instead of raising MemoryError
    check_address_space(SCIPY_SPACE, "loading scipy")
    import scipy.optimize  # noqa: F401

    chosen = _settings(settings)
    if raw:
        _check_raw(chosen, alignment=alignment, dev_alignment=dev_alignment, dev_trace=dev_trace, stats=stats)
    training, dev = _bitexts(source, target, alignment, stats, dev_source, dev_target, dev_alignment, dev_size)
    if dev_trace_alignment is not None and dev_trace is None:
        raise RecaserError("`dev_trace_alignment` goes with `dev_trace`")
    dev_output = (
        DecoderOutput(os.fspath(dev_trace), _str(dev_trace_alignment), dev_trace_options or TraceOptions())
        if dev_trace is not None
        else None
    )
    with _as_recaser_errors(), work_dir("moses-recaser", work) as scratch:
        names: dict[str, str] = {}
        if raw:
            training, dev, chosen, names = _tokenized(training, dev, chosen, Path(scratch), jobs)
        try:
            report = fit_model(
                os.fspath(model),
                train=training,
                stats_model=_str(stats),
                dev=dev,
                settings=chosen,
                work=Path(scratch),
                jobs=jobs,
                lmplz=_str(lmplz),
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
        stats is None and alignment is None, dev_source is not None and dev_alignment is None and dev_trace is None
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
        raise RecaserError(f"{', '.join(given)} goes with tokenized text, not with `raw` (raw text is tokenized here)")


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


def _check_paths(**paths: object) -> None:
    """Each a file name (a str or a path; None: not given, which ``model`` must be), not an int or bytes: refused
    by the flag's name before any work, not a TypeError midway."""
    for name, value in paths.items():
        if value is None and name != "model":
            continue
        if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
            raise RecaserError(f"`{name}` must be a file name, not {value!r}")


def _str(path: PathLike | None) -> str | None:
    return None if path is None else os.fspath(path)


def _settings(settings: TrainSettings | None) -> TrainSettings:
    """A copy of ``settings`` (default: the defaults), checked."""
    if settings is not None and not isinstance(settings, TrainSettings):
        raise RecaserError(f"`settings` must be a TrainSettings, not {type(settings).__name__}")
    chosen = dataclasses.replace(settings or TrainSettings())
    default = TrainSettings()
    for name in DERIVED:
        if getattr(chosen, name) != getattr(default, name):
            raise RecaserError(
                f"setting `{name}` is train's to set from its inputs (alignment files or none, lmplz, dev_trace, "
                "the monolingual text), not yours"
            )
    chosen.check()  # before any work, and before a str of monolingual is taken for a list of names
    for m in chosen.monolingual:
        check_rereadable(m)  # (read twice: its digest, then its lines)
    # as given (errors name them so); the model records them resolved (``model.train``)
    chosen.monolingual = [os.fspath(m) for m in chosen.monolingual]
    return chosen


def _bitexts(
    source: PathLike | None,
    target: PathLike | None,
    alignment: PathLike | None,
    stats: PathLike | None,
    dev_source: PathLike | None,
    dev_target: PathLike | None,
    dev_alignment: PathLike | None,
    dev_size: int,
) -> tuple[Any, Any]:
    """The training bitext (None with ``stats``) and the dev bitext, held out from training when not given."""
    from moses_recaser.model.data import Bitext
    from moses_recaser.stats.pieces import corpus_lines

    if stats is not None and (source is not None or target is not None or alignment is not None):
        raise RecaserError("`stats` replaces `source`, `target` and `alignment`: give one or the other")
    if stats is None and (source is None or target is None):
        raise RecaserError("give the training bitext (`source` and `target`) or a statistics model (`stats`)")
    if (dev_source is None) != (dev_target is None):
        raise RecaserError("the dev set is two files: give both `dev_source` and `dev_target`")
    if dev_alignment is not None and dev_source is None:
        raise RecaserError("`dev_alignment` goes with `dev_source` and `dev_target`")
    training = None
    if source is not None and target is not None:
        training = Bitext(os.fspath(source), os.fspath(target), _str(alignment))
    if dev_source is not None and dev_target is not None:
        return training, Bitext(os.fspath(dev_source), os.fspath(dev_target), _str(dev_alignment))
    if training is None:
        raise RecaserError("with `stats`, give the dev set (`dev_source` and `dev_target`)")
    if dev_size < 1:
        raise RecaserError(f"`dev_size` must be at least 1 sentence pair, got {dev_size}")
    n = corpus_lines([f for f in (training.source, training.target, training.alignment) if f])
    if n < 2:
        raise RecaserError("the corpus needs at least 2 lines (training and dev)", training.target)
    held = min(dev_size, max(n // 10, 1))
    log.info("fitting the weights on the last %d of %d sentence pairs (held out from the tables)", held, n)
    return training.split(held)
