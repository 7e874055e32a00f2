"""``moses-recaser-ems``: the commands Moses EMS calls, with recase.perl's and train-recaser.perl's flags.

- ``recase``: ``-in FILE -model MODEL [-moses BIN] [-lang L] [-headline SRC.sgm] [-b]`` as recase.perl
  (``-moses`` is accepted and ignored), plus ``-source TOK_INPUT -trace DECODER_OUTPUT [-alignment WA]``
  for the bilingual model. With recase.perl's flags alone it runs in monolingual mode.
- ``train``: ``-dir DIR -corpus CASED_TARGET -config OUT`` as train-recaser.perl's EMS template, plus
  ``-source-corpus CASED_SOURCE -alignment ALIGN`` to reuse EMS's word alignment and ``-mono FILE`` for
  target-language text without a source (the LM corpus). The last
  ``-dev-size`` sentence pairs of the corpus train the CRF weights; the rest give the tables and LM.
  ``-config OUT`` is the file later steps receive as ``-model``: it points at the model directory.
- ``meta``: patch an installed ``experiment.meta`` with this project's step definitions.

Errors go to stderr as ``moses-recaser-ems: ERROR: ...`` with a non-zero exit, so EMS marks the
step as crashed.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from moses_recaser import casing
from moses_recaser.cli.main import exit_now, run, single_threaded_blas, zip_recased
from moses_recaser.errors import RecaserError
from moses_recaser.moses.trace import TraceOptions, read_trace
from moses_recaser.textio import LineReader, atomic_output, read_lines, split_tokens
from moses_recaser.triples import Triple

PROG = "moses-recaser-ems"
log = logging.getLogger("moses_recaser")

# recase.perl: words never capitalized in English headlines ("al-.+" and "el-.+" are patterns)
ALWAYS_LOWER_EN = {
    "a", "after", "against", "and", "any", "as", "at", "be", "because", "between", "by", "during", "for",
    "from", "his", "in", "is", "its", "last", "not", "of", "off", "on", "than", "the", "their", "this", "to",
    "was", "were", "which", "will", "with",
}


def _always_lower(word: str, lang: str) -> bool:
    if lang != "en":
        return False
    return word in ALWAYS_LOWER_EN or word.startswith(("al-", "el-")) and len(word) > 3


def headline_flags(sgm: str) -> list[bool]:
    """recase.perl -headline: one flag per <seg> line, true inside <hl> ... </hl>."""
    flags: list[bool] = []
    inside = False
    for line in read_lines(sgm):
        if "<hl>" in line:
            inside = True
        if "</hl>" in line:
            inside = False
        if line.lstrip().startswith("<seg"):
            flags.append(inside)
    return flags


def title_case(tokens: list[str], lang: str) -> list[str]:
    return [casing.upper_first(w) if not _always_lower(w, lang) else w for w in tokens]


# --- recase ----------------------------------------------------------------------------------

def _model_path(model: str) -> str:
    from moses_recaser.modeldir import resolve_model

    return str(resolve_model(model))


def cmd_recase(args: argparse.Namespace) -> int:
    if args.stock is not None:
        return _stock_recase(args)
    single_threaded_blas()
    from moses_recaser.model.recaser import Recaser

    if (args.source is None) != (args.trace is None):
        raise RecaserError("-source and -trace go together (the cased decoder input and its -t output)")
    recaser = Recaser(_model_path(args.model))
    alignment = args.alignment
    if alignment is not None and not Path(alignment).is_file():
        log.warning("alignment file %s does not exist; using the trace's phrase spans only", alignment)
        alignment = None
    if args.trace is not None:
        triples = _checked_trace(args.infile, args.source, args.trace, alignment)
    else:
        triples = (Triple(id=i, source=[], target=split_tokens(x)) for i, x in enumerate(read_lines(args.infile)))
    flags = headline_flags(args.headline) if args.headline else None
    # recase.perl prints to stdout; keep everything until the end, so a failure writes nothing
    lines: list[str] = []
    for k, (t, tokens) in enumerate(zip_recased(triples, recaser)):
        if flags is not None:
            if k >= len(flags):
                raise RecaserError(f"the headline file has only {len(flags)} <seg> lines", args.headline)
            if flags[k]:
                tokens = title_case(tokens, args.lang)
        lines.append(" ".join(tokens) + "\n")
    with atomic_output(args.output) as out:
        out.write("".join(lines))
        if args.unbuffered:
            out.flush()
    return 0


def _stock_recase(args: argparse.Namespace) -> int:
    """Run Moses' own recase.perl with its own flags only (for a side-by-side EMS comparison)."""
    import subprocess

    cmd = [args.stock, "-in", args.infile, "-model", args.stock_model or args.model, "-lang", args.lang]
    if args.moses:
        cmd += ["-moses", args.moses]
    if args.headline:
        cmd += ["-headline", args.headline]
    proc = subprocess.run(cmd, check=False, capture_output=True)
    sys.stderr.write(proc.stderr.decode("utf-8", "replace"))
    if proc.returncode != 0:
        raise RecaserError(f"recase.perl failed with exit code {proc.returncode}", args.stock)
    with atomic_output(args.output, binary=True) as out:
        out.write(proc.stdout)
    return 0


def _checked_trace(infile: str, source: str, trace: str, alignment: str | None):  # type: ignore[no-untyped-def]
    """Triples from the trace; each must carry the same words as the -in line EMS passes."""
    reader = LineReader(infile)
    lines = iter(reader)
    for t in read_trace(source, trace, alignment, TraceOptions()):
        line = next(lines, None)
        if line is None:
            raise RecaserError("line-count mismatch: -in has fewer lines than -trace", reader.name, reader.lineno + 1)
        if [casing.lower(w) for w in split_tokens(line)] != [casing.lower(w) for w in t.target]:
            raise RecaserError("the -in line and the -trace line have different words", reader.name, reader.lineno)
        yield t
    if next(lines, None) is not None:
        raise RecaserError("line-count mismatch: -in has more lines than -trace", reader.name, reader.lineno)


# --- train -----------------------------------------------------------------------------------

POINTER_HEADER = "# moses-recaser model (written by moses-recaser-ems train); pass this file as -model\n"


def cmd_train(args: argparse.Namespace) -> int:
    import tempfile

    from moses_recaser.model.train import TrainSettings, train

    target = [x for x in read_lines(args.corpus)]
    n = len(target)
    if n < 2:
        raise RecaserError("the corpus needs at least 2 lines (training and dev)", args.corpus)
    dev = min(args.dev_size, max(n // 10, 1))
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = out_dir / "data"
    parts.mkdir(exist_ok=True)
    source = [x for x in read_lines(args.source_corpus)] if args.source_corpus else [""] * n
    if len(source) != n:
        raise RecaserError(f"line-count mismatch: {n} target lines, {len(source)} source lines", args.source_corpus)
    links = [x for x in read_lines(args.alignment)] if args.alignment else None
    if links is not None and len(links) != n:
        raise RecaserError(f"line-count mismatch: {n} corpus lines, {len(links)} alignment lines", args.alignment)
    if args.source_corpus is None:
        links = [""] * n  # monolingual: no source words, no links
    files = {}
    for name, sl in (("train", slice(0, n - dev)), ("dev", slice(n - dev, n))):
        for ext, lines in (("src", source), ("tgt", target), ("align", links)):
            if lines is None:
                continue
            p = parts / f"{name}.{ext}"
            p.write_text("".join(x + "\n" for x in lines[sl]), encoding="utf-8")
            files[f"{name}.{ext}"] = str(p)
    settings = TrainSettings(lm_order=args.lm_order, lm=args.lm, feature_set=args.features,
                             monolingual=[str(Path(m).resolve()) for m in args.mono or ()])
    model = out_dir / "model"
    with tempfile.TemporaryDirectory(prefix="moses-recaser-ems.") as work:
        train(files["train.src"], files["train.tgt"], files.get("train.align"), files["dev.src"], files["dev.tgt"],
              files.get("dev.align"), str(model), settings, Path(work))
    with atomic_output(args.config) as out:
        out.write(POINTER_HEADER)
        out.write(f"model: {model.resolve()}\n")
    return 0


# --- meta ------------------------------------------------------------------------------------

def cmd_meta(args: argparse.Namespace) -> int:
    from moses_recaser.ems.meta import patch_meta

    text = Path(args.moses_meta).read_text(encoding="utf-8") if Path(args.moses_meta).is_file() else None
    if text is None:
        raise RecaserError("Moses experiment.meta not found", args.moses_meta)
    patched = patch_meta(text, args.moses_meta)
    with atomic_output(args.output) as out:
        out.write(patched)
    return 0


# --- parser ----------------------------------------------------------------------------------

def _flag(p: argparse.ArgumentParser, name: str, **kw) -> None:  # type: ignore[no-untyped-def]
    """A Perl-style option: -name and --name both work (Getopt::Long accepts either)."""
    p.add_argument(f"-{name}", f"--{name}", **kw)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="moses-recaser commands for Moses EMS")
    parser.add_argument("-q", "--quiet", action="store_true")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("recase", help="recase.perl-compatible recasing (monolingual or with -source/-trace)")
    _flag(p, "in", dest="infile", required=True, help="recaser input (lowercased, markup removed)")
    _flag(p, "model", required=True, help="model directory, or the -config file of 'train'")
    _flag(p, "moses", help="accepted and ignored (recase.perl's decoder)")
    _flag(p, "lang", default="en", help="target language; 'en' uses recase.perl's lowercase list in headlines")
    _flag(p, "headline", help="source SGM: <hl> segments are title-cased, as recase.perl does")
    p.add_argument("-b", "--unbuffered", action="store_true", help="flush output (recase.perl -b)")
    _flag(p, "source", help="cased tokenized decoder input (EMS: evaluation/<set>.input.tok.<V>)")
    _flag(p, "trace", help="decoder output with -t markers (EMS: evaluation/<set>.output.<V>)")
    _flag(p, "alignment", help="-alignment-output-file (EMS: <system-output>.wa); skipped if absent")
    p.add_argument("-o", "--output", default="-", help="output (default stdout, as recase.perl)")
    p.add_argument("--stock", metavar="RECASE_PERL",
                   help="run Moses' recase.perl instead, with its own flags only (for comparisons in one EMS run)")
    p.add_argument("--stock-model", metavar="MOSES_INI", help="the stock recaser's moses.ini, for --stock")
    p.set_defaults(func=cmd_recase)

    p = sub.add_parser("train", help="train-recaser.perl-compatible training step")
    _flag(p, "dir", required=True, help="working directory (EMS: OUT.model)")
    _flag(p, "corpus", required=True, help="cased tokenized target corpus")
    _flag(p, "config", required=True, help="output: the file later steps receive as -model")
    _flag(p, "source-corpus", dest="source_corpus", help="cased tokenized source corpus, line-parallel")
    _flag(p, "alignment", help="word alignment of source and corpus (EMS: model/aligned.grow-diag-final-and)")
    _flag(p, "dev-size", dest="dev_size", type=int, default=2000,
          help="sentence pairs held out from the end of the corpus to train the CRF weights (at most 10%%)")
    _flag(p, "lm", help="an existing KenLM model of the cased target")
    _flag(p, "mono", action="append", metavar="FILE",
          help="cased tokenized target-language text without a source (e.g. EMS's LM corpus), for the LM and "
               "the case prior; repeatable")
    _flag(p, "lm-order", dest="lm_order", type=int, default=3)
    _flag(p, "features", default="full", choices=["paper", "full"])
    for ignored in ("train-script", "scripts-root-dir", "ngram-count", "first-step", "last-step", "build-kenlm"):
        _flag(p, ignored, dest=ignored.replace("-", "_"), help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("meta", help="patch Moses' experiment.meta with the bilingual recaser's steps")
    p.add_argument("--moses-meta", required=True, help="$MOSES/scripts/ems/experiment.meta")
    p.add_argument("-o", "--output", required=True, help="the patched meta, for experiment.perl -meta")
    p.set_defaults(func=cmd_meta)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    code = run(argv, build_parser, PROG)
    if argv is None:  # the console command (see cli.exit_now)
        exit_now(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
