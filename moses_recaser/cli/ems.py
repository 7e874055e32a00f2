"""``moses-recaser-ems``: the commands Moses EMS calls, with recase.perl's and train-recaser.perl's flags.

- ``recase``: ``-in FILE -model MODEL [-moses BIN] [-lang L] [-headline SRC.sgm] [-b]`` as recase.perl
  (``-moses`` is accepted and ignored), plus ``-source TOK_INPUT -trace DECODER_OUTPUT [-alignment WA]``
  for the bilingual model. With recase.perl's flags alone it runs in monolingual mode.
- ``train``: ``-dir DIR -corpus CASED_TARGET -config OUT`` as train-recaser.perl's EMS template, plus
  ``-source-corpus CASED_SOURCE -alignment ALIGN`` (EMS's word alignment), ``-cores N``, ``-lmplz BIN`` and
  ``-mono FILE`` for target-language text without a source (the LM corpus; a ``-mono`` without a file, as
  EMS writes it when the config names no such text, adds none).
- ``meta``: patch an installed ``experiment.meta`` with this project's step definitions.
- ``config``: put the recaser into a working EMS config (keeping its truecasing, or ``--lowercase``);
  ``check``: what keeps one from running it.

Errors go to stderr as ``moses-recaser-ems: error: ...`` with exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path
from typing import Any

from moses_recaser import RecaserError
from moses_recaser.cli.common import command_parser, main_of
from moses_recaser.cli.options import add

PROG = "moses-recaser-ems"
log = logging.getLogger("moses_recaser")


def add_recase(p: argparse.ArgumentParser) -> None:
    add(p, "input", ems=True, required=True, help="recaser input (lowercased or truecased, markup removed)")
    add(p, "model", ems=True, required=True, help="model directory, or the -config file of 'train'")
    _add_ems_flag(
        p, "moses", help="recase.perl's decoder: used only when -model is a Moses moses.ini (a stock recaser)"
    )
    _add_ems_flag(p, "lang", default="en", help="target language; 'en' uses recase.perl's lowercase list in headlines")
    _add_ems_flag(p, "headline", help="source SGM: <hl> segments are title-cased, as recase.perl does")
    p.add_argument(
        "-b",
        "--unbuffered",
        action="store_true",
        help="recase.perl's -b, taken for its command line: the output is written whole once complete (a failed "
        "step leaves nothing), not line by line",
    )
    add(p, "source", ems=True, help="cased tokenized decoder input (EMS: evaluation/<set>.input.tok.<V>)")
    add(p, "trace", ems=True, help="decoder output with -t markers (EMS: evaluation/<set>.output.<V>)")
    add(p, "alignment", ems=True, help="-alignment-output-file (EMS: <system-output>.wa); skipped if absent")
    _add_ems_flag(
        p,
        "decoder-settings",
        dest="decoder_settings",
        action=_DecoderSettings,
        help="the decoder's settings (EMS: decoder-settings), one quoted value, or '-- SETTINGS...' to the end of "
        "the line, as the decoder's own command line has them: an -alignment-output-file there is read when the "
        "-alignment file does not exist; -mark-unknown (with -unknown-word-prefix/-suffix), "
        "-output-factor-delimiter and -xml-input say how to read the trace",
    )
    add(p, "output", default="-", help="output (default stdout, as recase.perl)")
    p.set_defaults(
        reads=("input", "source", "trace", "headline"),
        # read when they are there: the output may not replace them either
        reads_if_there=("alignment", "model", "decoder_alignment", "moses"),
        decoder_alignment=None,
        input_flags={"decoder_alignment": "-decoder-settings -alignment-output-file"},
        writes=("output",),
        rewrites=("input",),
    )


class _DecoderSettings(argparse.Action):
    """-decoder-settings, and the -alignment-output-file named there (``decoder_alignment``), a file the step
    reads."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        from moses_recaser.moses.trace import decoder_alignment_file

        setattr(namespace, self.dest, values)
        namespace.decoder_alignment = decoder_alignment_file(values)


def cmd_recase(args: argparse.Namespace) -> int:
    from moses_recaser import RecaseStep, recase_step

    recase_step(
        RecaseStep(
            infile=args.input,
            model=args.model,
            output=args.output,
            moses=args.moses,
            lang=args.lang,
            headline=args.headline,
            source=args.source,
            trace=args.trace,
            alignment=args.alignment,
            decoder_settings=args.decoder_settings or "",
        )
    )
    return 0


class _AppendGiven(argparse.Action):
    """``-mono FILE`` adds FILE, as often as it is given; ``-mono`` without a file adds nothing."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        if values:
            setattr(namespace, self.dest, [*(getattr(namespace, self.dest) or []), values])


TRAIN_SETTINGS = (
    "lm",
    "lm_order",
    "lmplz",
    "lmplz_options",
    "feature_set",
    "input_case",
    "monolingual",
    "jobs",
    "memory",
    "lm_prune",
    "dev_size",
)


# how train's flags name what the library calls source and target (its errors' `source`, `target`)
TRAIN_SPELLINGS = {"source": "-source-corpus", "target": "-corpus"}

# the patched meta's train step passes [RECASING] tokenized as "-mono IN2", which EMS leaves empty when the
# config names none (experiment.perl's input of an ignored step): "-mono" then stands before the next flag
TRAIN_OVERRIDES: dict[str, dict[str, Any]] = {"monolingual": {"nargs": "?", "action": _AppendGiven}}


def add_train(p: argparse.ArgumentParser) -> None:
    _add_ems_flag(p, "dir", required=True, help="working directory (EMS: OUT.model)")
    _add_ems_flag(p, "corpus", required=True, help="cased tokenized target corpus")
    _add_ems_flag(p, "config", required=True, help="output: the file later steps receive as -model")
    _add_ems_flag(p, "source-corpus", dest="source_corpus", help="cased tokenized source corpus, line-parallel")
    add(p, "alignment", ems=True, help="word alignment of source and corpus (EMS: model/aligned.grow-diag-final-and)")
    for name in TRAIN_SETTINGS:
        add(p, name, ems=True, **TRAIN_OVERRIDES.get(name, {}))
    for ignored in ("train-script", "scripts-root-dir", "ngram-count", "first-step", "last-step", "build-kenlm"):
        _add_ems_flag(p, ignored, dest=ignored.replace("-", "_"), help=argparse.SUPPRESS)
    p.set_defaults(
        reads=("corpus", "source_corpus", "alignment", "lm", "monolingual"),
        writes=("config",),
        spellings=TRAIN_SPELLINGS,
    )


def cmd_train(args: argparse.Namespace) -> int:
    from moses_recaser import TrainStep, train_step

    step = TrainStep(args.dir, args.corpus, args.config, args.source_corpus, args.alignment)
    train_step(dataclasses.replace(step, settings={name: getattr(args, name) for name in TRAIN_SETTINGS}))
    return 0


def cmd_meta(args: argparse.Namespace) -> int:
    from moses_recaser import write_meta

    write_meta(args.moses_meta, args.output)
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from moses_recaser import write_config

    write_config(args.merge, args.output, _this_command(), stock_set=args.stock_set, lowercase=args.lowercase)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from moses_recaser import check_config

    check_config(args.config)
    return 0


def _this_command() -> str:
    """This console command's absolute path, quoted for a shell: EMS's step scripts then find it whatever their
    PATH. The one installed beside the running interpreter comes first: another install earlier on PATH is not
    this one."""
    import shlex
    import shutil

    beside = Path(sys.executable).parent / PROG
    found = str(beside) if beside.is_file() else shutil.which(PROG) or str(beside)
    path = str(Path(found).resolve())
    odd = [c for c in ("#", '"', "$", "\n") if c in path]
    if odd:  # experiment.perl's config reader ends a value at '#' and at the closing '"', and expands $NAME
        raise RecaserError(
            f"is installed at a path holding {odd[0]!r}, which an EMS config cannot hold: install "
            "moses-recaser elsewhere",
            path,
        )
    return shlex.quote(path)  # quoted for the step scripts' shell: a path with a space stays one word


def _add_ems_flag(p: argparse.ArgumentParser, name: str, **kw) -> None:  # type: ignore[no-untyped-def]
    """A Perl-style option: -name and --name both work (Getopt::Long accepts either)."""
    p.add_argument(f"-{name}", f"--{name}", **kw)


def add_meta(p: argparse.ArgumentParser) -> None:
    p.add_argument("--moses-meta", required=True, help="$MOSES/scripts/ems/experiment.meta")
    add(p, "output", required=True, help="the patched meta, for experiment.perl -meta")
    p.set_defaults(reads=("moses_meta",), writes=("output",))


def add_config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--merge", required=True, metavar="CONFIG", help="a working EMS config (e.g. Moses' config.toy)")
    p.add_argument(
        "--lowercase",
        action="store_true",
        help="switch the config to lowercasing (truecasing commented out) and run the recaser in recase.perl's "
        "place; without it a truecasing config keeps its truecasing and the recaser replaces detruecase.perl",
    )
    p.add_argument(
        "--stock-set",
        action="store_true",
        help="also restore case in a copy of the first evaluation set as stock Moses does (detruecase.perl; "
        "with --lowercase, recase.perl trained in the same run), for a comparison in one run",
    )
    add(p, "output", required=True, help="the new config, for experiment.perl -config")
    p.set_defaults(reads=("merge",), writes=("output",))


def add_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="an EMS config")
    p.set_defaults(reads=("config",))


COMMANDS = (
    ("recase", "recase.perl-compatible recasing (monolingual or with -source/-trace)", add_recase, cmd_recase),
    ("train", "train-recaser.perl-compatible training step", add_train, cmd_train),
    ("meta", "patch Moses' experiment.meta with the bilingual recaser's steps", add_meta, cmd_meta),
    (
        "config",
        "an EMS config with the bilingual recaser in place of detruecase.perl (--lowercase: of recase.perl), "
        "[RECASING], the decoder's -t and word links",
        add_config,
        cmd_config,
    ),
    ("check", "what keeps an EMS config from running the recaser, and what to change", add_check, cmd_check),
)


def build_parser() -> argparse.ArgumentParser:
    return command_parser(PROG, "moses-recaser commands for Moses EMS", COMMANDS)


main = main_of(build_parser, PROG)

if __name__ == "__main__":
    sys.exit(main())
