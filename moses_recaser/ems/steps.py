"""What the EMS steps of ``ems/recaser.meta`` run: training on the system's cased bitext and its word
alignment, and recasing the decoder's output with its source and trace.

``moses-recaser-ems`` (``cli/ems.py``) maps recase.perl's and train-recaser.perl's flags onto these.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from moses_recaser.core import casing
from moses_recaser.core.triples import Triple
from moses_recaser.ems.recase_perl import (
    check_headline_count,
    headline_flags,
    is_moses_ini,
    moses_ini_files,
    recase_with_moses,
    title_case,
)
from moses_recaser.io.checks import check_files
from moses_recaser.io.errors import RecaserError, of_kind
from moses_recaser.io.lines import LineReader, kind_of, read_text
from moses_recaser.io.outputs import NOT_A_FILE, atomic_output, file_id, is_within, made_dirs
from moses_recaser.model.recaser import Recaser
from moses_recaser.moses.bitext import read_monolingual
from moses_recaser.moses.trace import (
    TraceOptions,
    decoder_alignment_file,
    decoder_options,
    parse_trace_line,
    read_trace,
)

log = logging.getLogger(__name__)
POINTER_HEADER = "# moses-recaser model (written by moses-recaser-ems train); pass this file as -model\n"


@dataclass
class RecaseStep:
    """recase.perl's flags (``infile``, ``model``, ``moses``, ``lang``, ``headline``) and the
    bilingual recaser's (``source``, ``trace``, ``alignment``, and the decoder's ``decoder_settings``, for an
    ``-alignment-output-file`` given there and the trace's format: ``-mark-unknown`` and the rest)."""

    infile: str
    model: str
    output: str = "-"
    moses: str | None = None
    lang: str = "en"
    headline: str | None = None
    source: str | None = None
    trace: str | None = None
    alignment: str | None = None
    decoder_settings: str = ""

    @property
    def options(self) -> TraceOptions:
        """The trace's format, as the decoder's settings made it (-mark-unknown and the rest)."""
        return decoder_options(self.decoder_settings)


def recase_step(step: RecaseStep) -> None:
    """Recase ``infile`` (with its source and trace when given) to ``output``, streamed as ``moses-recaser recase``
    streams it: a file appears whole or not at all; stdout, as recase.perl prints it (an error after lines went
    there says how many)."""
    step = of_kind("step", step, RecaseStep)
    check_files(
        {"input": step.infile, "source": step.source, "trace": step.trace, "headline": step.headline},
        {"output": step.output},
        reads_if_there={"alignment": step.alignment, "model": step.model, "moses": step.moses},
        rewrites=("input",),
    )
    if (step.source is None) != (step.trace is None):
        raise RecaserError("-source and -trace go together (the cased decoder input and its -t output)")
    if step.alignment is not None and step.trace is None:
        raise RecaserError("-alignment links the -trace to its -source: give those too")
    lines = _stock_model(step) if is_moses_ini(step.model) else _recase(step, Recaser(step.model))
    with atomic_output(step.output, compress=True) as out:
        for line in lines:
            out.write(line + "\n")


def _recase(step: RecaseStep, recaser: Recaser) -> Iterator[str]:
    alignment = word_alignment(step.alignment, step.decoder_settings)
    if step.trace is not None:
        triples = _checked_trace(step.infile, step.source, step.trace, alignment, step.options)
    else:
        triples = read_monolingual(step.infile)
    sgm = step.headline
    flags = headline_flags(sgm) if sgm else []
    k = 0
    for k, tokens in enumerate(recaser.recase_triples(triples), 1):
        if sgm:
            if k > len(flags):
                check_headline_count(flags, k, sgm, step.infile)
            if flags[k - 1]:
                tokens = title_case(tokens, step.lang)
        yield " ".join(tokens)
    if sgm:
        check_headline_count(flags, k, sgm, step.infile)


def _stock_model(step: RecaseStep) -> list[str]:
    """A Moses recasing model (train-recaser.perl's moses.ini, as Moses' unpatched meta trains): recased
    as recase.perl does, with the decoder given by -moses."""
    if not step.moses or kind_of(step.moses) != "file":
        raise RecaserError(
            "-model is a Moses moses.ini (train-recaser.perl's model, as Moses' unpatched meta "
            "trains): give the Moses decoder with -moses to recase with it as recase.perl does, or "
            "patch the meta (moses-recaser-ems meta) so that EMS trains moses-recaser's model",
            step.model,
        )
    log.warning("%s is a Moses recasing model: recasing as recase.perl does (no source, no trace)", step.model)
    out = file_id(step.output, 1)
    for path in moses_ini_files(step.model) if out != NOT_A_FILE else ():
        if file_id(path) == out:
            raise RecaserError(
                f"this output is also {path}, a file of the -model moses.ini, which the step only reads: give "
                "another output",
                step.output,
            )
    return recase_with_moses(step.moses, step.model, step.infile, step.lang, step.headline)


def word_alignment(alignment: str | None, decoder_settings: str) -> str | None:
    """The decoder's word links: ``alignment`` when it is there, else an ``-alignment-output-file`` given in
    the decoder's settings (EMS's decode step writes IN.wa only with report-precision-by-coverage). A pipe or a
    device is there as a file is."""
    if alignment is not None and _there(alignment):
        return alignment
    given = decoder_alignment_file(decoder_settings)
    if given is not None and _there(given):
        return given
    if alignment is not None or given is not None:
        log.warning("no word alignment file (%s); using the trace's phrase spans only", alignment or given)
    return None


def _there(path: str) -> bool:
    """The file is there (a pipe or device too); a directory given is a mistake, not an absent file."""
    kind = kind_of(path)
    if kind == "dir":
        raise RecaserError("is a directory, not a file", path)
    return kind is not None


def _checked_trace(
    infile: str, source: str | None, trace: str, alignment: str | None, options: TraceOptions
) -> Iterator[Triple]:
    """Triples from the trace; each must carry the same words as the -in line EMS passes (which keeps the
    trace's markers when EMS skipped remove-markup)."""
    reader = LineReader(infile)
    lines = iter(reader)
    for t in read_trace(source, trace, alignment, options):
        line = next(lines, None)
        if line is None:
            raise RecaserError("line-count mismatch: -in has fewer lines than -trace", reader.name, reader.lineno + 1)
        try:
            words = parse_trace_line(line, options).tokens
        except RecaserError as exc:
            raise exc.at(reader.name, reader.lineno) from None
        if [casing.lower(w) for w in words] != [casing.lower(w) for w in t.target]:
            raise RecaserError("the -in line and the -trace line have different words", reader.name, reader.lineno)
        yield t
    if next(lines, None) is not None:
        raise RecaserError("line-count mismatch: -in has more lines than -trace", reader.name, reader.lineno)


@dataclass
class TrainStep:
    """train-recaser.perl's EMS flags (``dir``, ``corpus``, ``config``), the bilingual recaser's files, and
    ``settings``: keywords of the library's ``train`` by their one name (``jobs``, ``dev_size``, ``lm_order``,
    ``monolingual`` ...); what is not given takes the library's default."""

    dir: str
    corpus: str
    config: str
    source_corpus: str | None = None
    alignment: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)


def train_step(step: TrainStep) -> None:
    """Train on the corpus but its last ``dev_size`` sentence pairs (at most 10%), which train the CRF weights;
    the corpus is read where it is, line by line, its statistics counted in ``jobs`` processes. ``config``, the
    pointer to the model that later steps receive as -model, is written before the work and renamed into place
    after it; a failed run leaves neither, nor the directories it made."""
    from moses_recaser import DEV_SIZE, Bitext, RunOptions, TrainSettings, train
    from moses_recaser.core.memory import parse_memory
    from moses_recaser.core.workers import check_workers

    # (before the step's directories are made)
    check_workers(step.settings.get("jobs", 1))
    if step.settings.get("memory") is not None:
        parse_memory(step.settings["memory"])

    step = of_kind("step", step, TrainStep)
    check_files(
        {"corpus": step.corpus, "source_corpus": step.source_corpus, "alignment": step.alignment},
        {"config": step.config},
    )
    if not isinstance(step.settings, dict):
        raise RecaserError(f"`settings` must be a dict of train's settings by name, not {step.settings!r}"[:300])
    if step.source_corpus is None or step.alignment is None:
        raise RecaserError(
            "moses-recaser-ems train needs -source-corpus and -alignment (the cased source side and "
            "EMS's word alignment, which the patched meta passes); without a source, train a "
            "monolingual model with 'moses-recaser train'",
            step.corpus,
        )
    given = {k: v for k, v in step.settings.items() if v is not None}
    out_dir = Path(step.dir)
    if kind_of(out_dir, follow=False) is not None and kind_of(out_dir) != "dir":  # (a dangling link too)
        raise RecaserError("is a file: -dir names the step's working directory", step.dir)
    model = out_dir / "model"
    if is_within(step.config, model):
        raise RecaserError(
            f"-config names the model directory {model} (or a file in it): give it another path", step.config
        )
    with made_dirs(out_dir), atomic_output(step.config) as out:
        out.write(POINTER_HEADER)
        out.write(f"model: {model.resolve()}\n")
        out.flush()  # on disk before the work: a full disk fails here, not after the model replaced the old one
        run = RunOptions(**{k: given.pop(k) for k in ("jobs", "memory", "lmplz") if k in given}, work=out_dir)
        dev_size = given.pop("dev_size", DEV_SIZE)
        bitext = Bitext(step.source_corpus, step.corpus, step.alignment)
        train(bitext, model, TrainSettings(**given), dev_size=dev_size, run=run)


def write_meta(moses_meta: str, output: str) -> list[str]:
    """Moses' installed experiment.meta with the recaser's steps, written to ``output``; what was changed (logged)."""
    from moses_recaser.ems.meta import patch_meta

    check_files({"moses_meta": moses_meta}, {"output": output})
    patched = patch_meta(read_text(moses_meta), moses_meta)
    return _written(output, patched.text, patched.notes)


def write_config(
    config: str, output: str, ems_command: str, stock_set: bool = False, lowercase: bool = False
) -> list[str]:
    """A working EMS config with the recaser in place (``ems.config.merge``), written to ``output``; what was
    changed (logged)."""
    from moses_recaser.ems.config import merge

    check_files({"merge": config}, {"output": output})
    with _located_in(config):
        merged = merge(read_text(config), ems_command, stock_set=stock_set, lowercase=lowercase)
    return _written(output, merged.text, merged.notes)


@contextlib.contextmanager
def _located_in(config: str) -> Iterator[None]:
    """A config's error that names no file, said of ``config`` (``ems.config`` reads text, not files)."""
    try:
        yield
    except RecaserError as exc:
        if exc.path is not None:
            raise
        raise exc.at(config, exc.line) from None


def _written(output: str, text: str, notes: list[str]) -> list[str]:
    """The amended file, written whole or not at all, then what was changed in it (logged)."""
    with atomic_output(output) as out:
        out.write(text)
    for note in notes:
        log.info("%s", note)
    return notes


def check_config(config: str) -> list[str]:
    """What keeps an EMS config from running the recaser, and what to change: its notes (logged), then an error
    that names every problem, if any."""
    from moses_recaser.ems.config import check, read_config

    check_files({"config": config}, {})
    with _located_in(config):
        notes = check(read_config(read_text(config)))
    for note in notes:
        log.info("%s", note)
    problems = [n.removeprefix("problem: ") for n in notes if n.startswith("problem")]
    if problems:
        raise RecaserError(
            f"{len(problems)} problem(s) keep this config from running the recaser: {'; '.join(problems)}", config
        )
    return notes
