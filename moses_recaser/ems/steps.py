"""What the EMS steps of ``ems/recaser.meta`` run: training on the system's cased bitext and its word
alignment, and recasing the decoder's output with its source and trace.

``moses-recaser-ems`` (``cli/ems.py``) maps recase.perl's and train-recaser.perl's flags onto these.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from moses_recaser import casing
from moses_recaser.ems.recase_perl import headline_flags, title_case
from moses_recaser.errors import RecaserError
from moses_recaser.model.recaser import Recaser
from moses_recaser.model.streaming import zip_recased
from moses_recaser.moses.trace import TraceOptions, read_trace
from moses_recaser.textio import LineReader, atomic_output, read_lines, split_tokens
from moses_recaser.triples import Triple

log = logging.getLogger(__name__)
POINTER_HEADER = "# moses-recaser model (written by moses-recaser-ems train); pass this file as -model\n"


@dataclass
class RecaseStep:
    """recase.perl's flags (``infile``, ``model``, ``lang``, ``headline``, ``unbuffered``) and the
    bilingual recaser's (``source``, ``trace``, ``alignment``)."""

    infile: str
    model: str
    output: str = "-"
    lang: str = "en"
    headline: str | None = None
    unbuffered: bool = False
    source: str | None = None
    trace: str | None = None
    alignment: str | None = None
    options: TraceOptions = field(default_factory=TraceOptions)


def recase_step(step: RecaseStep) -> None:
    """Recase ``infile`` (with its source and trace when given) and write it at once, completely or not at
    all: recase.perl prints to stdout, and a failed step must leave nothing behind."""
    if (step.source is None) != (step.trace is None):
        raise RecaserError("-source and -trace go together (the cased decoder input and its -t output)")
    recaser = Recaser(step.model)
    alignment = step.alignment
    if alignment is not None and not Path(alignment).is_file():
        log.warning("alignment file %s does not exist; using the trace's phrase spans only", alignment)
        alignment = None
    if step.trace is not None:
        triples = _checked_trace(step.infile, step.source, step.trace, alignment, step.options)
    else:
        triples = (Triple(id=i, source=[], target=split_tokens(x)) for i, x in enumerate(read_lines(step.infile)))
    flags = headline_flags(step.headline) if step.headline else None
    lines: list[str] = []
    for k, (_, tokens) in enumerate(zip_recased(triples, recaser)):
        if flags is not None:
            if k >= len(flags):
                raise RecaserError(f"the headline file has only {len(flags)} <seg> lines", step.headline)
            if flags[k]:
                tokens = title_case(tokens, step.lang)
        lines.append(" ".join(tokens) + "\n")
    with atomic_output(step.output) as out:
        out.write("".join(lines))
        if step.unbuffered:
            out.flush()


def _checked_trace(infile: str, source: str | None, trace: str, alignment: str | None,
                   options: TraceOptions) -> Iterator[Triple]:
    """Triples from the trace; each must carry the same words as the -in line EMS passes."""
    reader = LineReader(infile)
    lines = iter(reader)
    for t in read_trace(source, trace, alignment, options):
        line = next(lines, None)
        if line is None:
            raise RecaserError("line-count mismatch: -in has fewer lines than -trace", reader.name, reader.lineno + 1)
        if [casing.lower(w) for w in split_tokens(line)] != [casing.lower(w) for w in t.target]:
            raise RecaserError("the -in line and the -trace line have different words", reader.name, reader.lineno)
        yield t
    if next(lines, None) is not None:
        raise RecaserError("line-count mismatch: -in has more lines than -trace", reader.name, reader.lineno)


def stock_recase(recase_perl: str, infile: str, model: str, output: str, lang: str = "en",
                 moses: str | None = None, headline: str | None = None) -> None:
    """Moses' own recase.perl with its own flags only (for a side-by-side comparison in one EMS run)."""
    cmd = [recase_perl, "-in", infile, "-model", model, "-lang", lang]
    if moses:
        cmd += ["-moses", moses]
    if headline:
        cmd += ["-headline", headline]
    proc = subprocess.run(cmd, check=False, capture_output=True)
    sys.stderr.write(proc.stderr.decode("utf-8", "replace"))
    if proc.returncode != 0:
        raise RecaserError(f"recase.perl failed with exit code {proc.returncode}", recase_perl)
    with atomic_output(output, binary=True) as out:
        out.write(proc.stdout)


@dataclass
class TrainStep:
    """train-recaser.perl's EMS flags (``dir``, ``corpus``, ``config``) and the bilingual recaser's."""

    dir: str
    corpus: str
    config: str
    source_corpus: str | None = None
    alignment: str | None = None
    dev_size: int = 2000
    lm: str | None = None
    lm_order: int = 3
    feature_set: str = "full"
    mono: list[str] = field(default_factory=list)


def train_step(step: TrainStep) -> None:
    """Hold the last ``dev_size`` sentence pairs (at most 10%) out of the corpus for the CRF weights, train
    on the rest, and write ``config``: the pointer to the model that later steps receive as -model."""
    from moses_recaser.model.train import Bitext, TrainSettings, train

    target = [x for x in read_lines(step.corpus)]
    n = len(target)
    if n < 2:
        raise RecaserError("the corpus needs at least 2 lines (training and dev)", step.corpus)
    dev = min(step.dev_size, max(n // 10, 1))
    out_dir = Path(step.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = out_dir / "data"
    parts.mkdir(exist_ok=True)
    source = [x for x in read_lines(step.source_corpus)] if step.source_corpus else [""] * n
    if len(source) != n:
        raise RecaserError(f"line-count mismatch: {n} target lines, {len(source)} source lines", step.source_corpus)
    links = [x for x in read_lines(step.alignment)] if step.alignment else None
    if links is not None and len(links) != n:
        raise RecaserError(f"line-count mismatch: {n} corpus lines, {len(links)} alignment lines", step.alignment)
    if step.source_corpus is None:
        links = [""] * n  # monolingual: no source words, no links
    files = {}
    for name, sl in (("train", slice(0, n - dev)), ("dev", slice(n - dev, n))):
        for ext, lines in (("src", source), ("tgt", target), ("align", links)):
            if lines is None:
                continue
            p = parts / f"{name}.{ext}"
            p.write_text("".join(x + "\n" for x in lines[sl]), encoding="utf-8")
            files[f"{name}.{ext}"] = str(p)
    settings = TrainSettings(lm_order=step.lm_order, lm=step.lm, feature_set=step.feature_set,
                             monolingual=[str(Path(m).resolve()) for m in step.mono])
    model = out_dir / "model"
    with tempfile.TemporaryDirectory(prefix="moses-recaser-ems.") as work:
        train(str(model), train=Bitext(files["train.src"], files["train.tgt"], files.get("train.align")),
              dev=Bitext(files["dev.src"], files["dev.tgt"], files.get("dev.align")), settings=settings,
              work=Path(work))
    with atomic_output(step.config) as out:
        out.write(POINTER_HEADER)
        out.write(f"model: {model.resolve()}\n")
