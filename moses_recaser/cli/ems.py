"""``moses-recaser-ems``: the commands Moses EMS calls, with recase.perl's and train-recaser.perl's flags.

- ``recase``: ``-in FILE -model MODEL [-moses BIN] [-lang L] [-headline SRC.sgm] [-b]`` as recase.perl
  (``-moses`` is accepted and ignored), plus ``-source TOK_INPUT -trace DECODER_OUTPUT [-alignment WA]``
  for the bilingual model. With recase.perl's flags alone it runs in monolingual mode.
- ``train``: ``-dir DIR -corpus CASED_TARGET -config OUT`` as train-recaser.perl's EMS template, plus
  ``-source-corpus CASED_SOURCE -alignment ALIGN`` (EMS's word alignment), ``-cores N``, ``-lmplz BIN`` and
  ``-mono FILE`` for target-language text without a source (the LM corpus).
- ``meta``: patch an installed ``experiment.meta`` with this project's step definitions.
- ``config``: switch a working EMS config to the recaser; ``check``: what keeps one from running it.

Errors go to stderr as ``moses-recaser-ems: error: ...`` with exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from moses_recaser.cli.common import main_of
from moses_recaser.outputs import atomic_output

PROG = "moses-recaser-ems"
log = logging.getLogger("moses_recaser")


def cmd_recase(args: argparse.Namespace) -> int:
    from moses_recaser.model.streaming import single_threaded_blas

    single_threaded_blas()
    from moses_recaser.ems import steps

    steps.recase_step(
        steps.RecaseStep(
            infile=args.infile,
            model=args.model,
            output=args.output,
            moses=args.moses,
            lang=args.lang,
            headline=args.headline,
            unbuffered=args.unbuffered,
            source=args.source,
            trace=args.trace,
            alignment=args.alignment,
            decoder_settings=args.decoder_settings or "",
        )
    )
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from moses_recaser.ems import steps

    steps.train_step(
        steps.TrainStep(
            dir=args.dir,
            corpus=args.corpus,
            config=args.config,
            source_corpus=args.source_corpus,
            alignment=args.alignment,
            dev_size=args.dev_size,
            cores=args.cores,
            lm=args.lm,
            lm_order=args.lm_order,
            lmplz=args.lmplz,
            lmplz_options=args.lmplz_options or "",
            feature_set=args.features,
            mono=args.mono or [],
        )
    )
    return 0


def cmd_meta(args: argparse.Namespace) -> int:
    from moses_recaser.ems.meta import patch_meta_file

    patched = patch_meta_file(args.moses_meta)
    return _write_noted(args.output, patched.text, patched.notes)


def _write_noted(path: str, text: str, notes: list[str]) -> int:
    """The amended file, written whole or not at all, then what was changed in it."""
    with atomic_output(path) as out:
        out.write(text)
    for note in notes:
        log.info("%s", note)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from moses_recaser.ems.config import merge
    from moses_recaser.textio import read_text

    merged = merge(read_text(args.merge), _this_command(), stock_set=args.stock_set)
    return _write_noted(args.output, merged.text, merged.notes)


def cmd_check(args: argparse.Namespace) -> int:
    from moses_recaser.ems.config import check, read_config
    from moses_recaser.errors import RecaserError
    from moses_recaser.textio import read_text

    notes = check(read_config(read_text(args.config)))
    for note in notes:
        log.info("%s", note)
    problems = [n for n in notes if n.startswith("problem")]
    if problems:
        raise RecaserError(
            f"{len(problems)} problem(s) keep this config from running the recaser (see above)", args.config
        )
    return 0


def _this_command() -> str:
    """This console command's absolute path: EMS's step scripts then find it whatever their PATH. The one
    installed beside the running interpreter comes first: another install earlier on PATH is not this one."""
    import shutil

    beside = Path(sys.executable).parent / PROG
    found = str(beside) if beside.is_file() else shutil.which(PROG) or str(beside)
    return str(Path(found).resolve())


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
    _flag(p, "moses", help="recase.perl's decoder: used only when -model is a Moses moses.ini (a stock recaser)")
    _flag(p, "lang", default="en", help="target language; 'en' uses recase.perl's lowercase list in headlines")
    _flag(p, "headline", help="source SGM: <hl> segments are title-cased, as recase.perl does")
    p.add_argument("-b", "--unbuffered", action="store_true", help="flush output (recase.perl -b)")
    _flag(p, "source", help="cased tokenized decoder input (EMS: evaluation/<set>.input.tok.<V>)")
    _flag(p, "trace", help="decoder output with -t markers (EMS: evaluation/<set>.output.<V>)")
    _flag(p, "alignment", help="-alignment-output-file (EMS: <system-output>.wa); skipped if absent")
    _flag(
        p,
        "decoder-settings",
        dest="decoder_settings",
        help="the decoder's settings (EMS: decoder-settings): an -alignment-output-file there is read when the "
        "-alignment file does not exist",
    )
    p.add_argument("-o", "--output", default="-", help="output (default stdout, as recase.perl)")
    p.set_defaults(func=cmd_recase, reads=("infile", "source", "trace", "headline"), writes=("output",))

    p = sub.add_parser("train", help="train-recaser.perl-compatible training step")
    _flag(p, "dir", required=True, help="working directory (EMS: OUT.model)")
    _flag(p, "corpus", required=True, help="cased tokenized target corpus")
    _flag(p, "config", required=True, help="output: the file later steps receive as -model")
    _flag(p, "source-corpus", dest="source_corpus", help="cased tokenized source corpus, line-parallel")
    _flag(p, "alignment", help="word alignment of source and corpus (EMS: model/aligned.grow-diag-final-and)")
    _flag(
        p,
        "dev-size",
        dest="dev_size",
        type=int,
        default=2000,
        help="sentence pairs held out from the end of the corpus to train the CRF weights (at most 10%%)",
    )
    _flag(p, "cores", type=int, default=1, help="processes that count the corpus (EMS's cores)")
    _flag(p, "lm", help="an existing KenLM model of the cased target")
    _flag(p, "lmplz", help="KenLM's lmplz (EMS: $moses-bin-dir/lmplz): it estimates the cased LM, sorting on disk")
    _flag(
        p,
        "lmplz-options",
        dest="lmplz_options",
        help="more options for lmplz (default '-S 1G'; e.g. \"--prune 0 0 1 -S 2G\")",
    )
    _flag(
        p,
        "mono",
        action="append",
        metavar="FILE",
        help="cased tokenized target-language text without a source (e.g. EMS's LM corpus), for the LM and "
        "the case prior; repeatable",
    )
    _flag(p, "lm-order", dest="lm_order", type=int, default=3)
    _flag(p, "features", default="full", choices=["paper", "full"])
    for ignored in ("train-script", "scripts-root-dir", "ngram-count", "first-step", "last-step", "build-kenlm"):
        _flag(p, ignored, dest=ignored.replace("-", "_"), help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_train, reads=("corpus", "source_corpus", "alignment", "lm", "mono"), writes=("config",))

    p = sub.add_parser("meta", help="patch Moses' experiment.meta with the bilingual recaser's steps")
    p.add_argument("--moses-meta", required=True, help="$MOSES/scripts/ems/experiment.meta")
    p.add_argument("-o", "--output", required=True, help="the patched meta, for experiment.perl -meta")
    p.set_defaults(func=cmd_meta, reads=("moses_meta",), writes=("output",))

    p = sub.add_parser(
        "config",
        help="an EMS config switched to the bilingual recaser (lowercasing, [RECASING], "
        "the decoder's -t and word links)",
    )
    p.add_argument("--merge", required=True, metavar="CONFIG", help="a working EMS config (e.g. Moses' config.toy)")
    p.add_argument(
        "--stock-set",
        action="store_true",
        help="also recase the first evaluation set with Moses' recase.perl, for a comparison in one run",
    )
    p.add_argument("-o", "--output", required=True, help="the new config, for experiment.perl -config")
    p.set_defaults(func=cmd_config, reads=("merge",), writes=("output",))

    p = sub.add_parser("check", help="what keeps an EMS config from running the recaser, and what to change")
    p.add_argument("config", help="an EMS config")
    p.set_defaults(func=cmd_check, reads=("config",))
    return parser


main = main_of(build_parser, PROG)

if __name__ == "__main__":
    sys.exit(main())
