"""Every command-line setting, declared once: its one name, its flag, its EMS spelling and its default.

A setting's ``name`` is the same everywhere: the ``argparse`` destination, the keyword of the library's
``train`` (a ``TrainSettings`` field where it changes the model), the key of the YAML experiment configs and
the model manifest. ``moses-recaser`` spells it ``--name-with-dashes``; ``moses-recaser-ems`` keeps the
single-dash names EMS passes (``-cores``). Defaults come from ``TrainSettings`` and the library, never from a
parser of their own.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moses_recaser import DEFAULT_MEMORY, DEV_SIZE, FEATURE_SETS, FORMATS, INPUT_CASES, SYMMETRIZATIONS, TrainSettings

DEFAULTS = TrainSettings()
ALIGNMENT_MODES = ("phrase", "links")


def _floats(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, got {text!r}") from None


@dataclass(frozen=True)
class Option:
    """One setting: ``flags`` are its spellings on ``moses-recaser`` (the first is the one shown), ``ems`` on
    ``moses-recaser-ems`` (None: not there); ``kwargs`` go to argparse."""

    name: str
    help: str
    flags: tuple[str, ...]
    ems: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)


def _opt(name: str, help: str, *flags: str, ems: str | None = None, **kw: Any) -> Option:
    return Option(name, help, flags or ("--" + name.replace("_", "-"),), ems, kw)


OPTIONS: dict[str, Option] = {
    o.name: o
    for o in (
        # files
        _opt("source", "cased, tokenized source side (the decoder's input)", ems="-source", metavar="FILE"),
        _opt("target", "cased, tokenized target side", metavar="FILE"),
        _opt(
            "alignment",
            "word alignment, Pharaoh i-j (a training bitext's, or the decoder's -alignment-output-file)",
            ems="-alignment",
            metavar="FILE",
        ),
        _opt("output", "output file ('-': stdout)", "-o", "--output", ems="-o", metavar="FILE"),
        _opt(
            "model",
            "a model directory (or moses-recaser-ems's -config file)",
            "-m",
            "--model",
            ems="-model",
            metavar="DIR",
        ),  # fmt: skip
        _opt("input", "tokenized text to read ('-': stdin)", "-i", "--input", ems="-in", metavar="FILE"),
        _opt(
            "trace",
            "decoder output: plain, -t, -tt, -print-alignment-info, an n-best list ('-': stdin)",
            ems="-trace",
            metavar="FILE",
        ),
        _opt("triples", "(F, e, A) JSON Lines: the source and links come with them", metavar="FILE"),
        _opt("dev_trace", "the decoder's -t output of the dev source, to fit the weights on", metavar="FILE"),
        _opt("dev_trace_alignment", "the -alignment-output-file of --dev-trace", metavar="FILE"),
        # what the decoder output holds (moses.formats, moses.trace.TraceOptions)
        _opt(
            "trace_format",
            "what --trace holds: " + "; ".join(f"{f.name}: {f.description}" for f in FORMATS.values()),
            choices=sorted(FORMATS),
            default="trace",
        ),
        _opt(
            "nbest",
            "--trace is an n-best list (--trace-format nbest)",
            action="store_const",
            const="nbest",
            dest="trace_format",
        ),
        _opt(
            "unknown_prefix",
            "strip this prefix from words the decoder marked unknown (-mark-unknown); off by default",
            metavar="UNK",
        ),
        _opt("unknown_suffix", "the -unknown-word-suffix, if one was set", default="", metavar="S"),
        _opt(
            "factor_delimiter",
            "output factor delimiter (default '%(default)s'); '' keeps words whole",
            default="|",
            metavar="D",
        ),
        _opt(
            "xml_input",
            "the decoder input had XML markup (-xml-input inclusive/exclusive/ignore): strip it from the source "
            "before counting positions",
            action="store_true",
        ),
        _opt("align", "align --input to --source with the model's translation table", action="store_true"),
        _opt(
            "raw",
            "--input and --source are raw (detokenized) text: tokenized as the model's training text was, and the "
            "output is --input with only the case of its letters changed",
            action="store_true",
        ),
        _opt(
            "source_lang",
            "the source language (en, fr, de, zh ...): train records it, and recase --raw tokenizes raw sources for it",
            metavar="LANG",
        ),
        _opt(
            "target_lang",
            "the target language: train records it, and recase --raw tokenizes raw text to recase for it",
            metavar="LANG",
        ),
        _opt("dev_source", "cased, tokenized dev source", metavar="FILE"),
        _opt("dev_target", "cased, tokenized dev reference", metavar="FILE"),
        _opt("dev_alignment", "dev word alignment (Pharaoh); else eflomal aligns it", metavar="FILE"),
        _opt(
            "dev_size",
            "without a dev set: sentence pairs held out from the end of the training bitext to fit the "
            "weights (at most a tenth of it; default %(default)s)",
            ems="-dev-size",
            type=int,
            default=DEV_SIZE,
            metavar="N",
        ),
        _opt(
            "monolingual",
            "cased, tokenized target-language text without a source, for the LM and the case prior "
            "(repeatable; e.g. the LM data of the Moses system)",
            ems="-mono",
            action="append",
            metavar="FILE",
        ),
        _opt("lm", "an existing KenLM model (ARPA or binary) instead of estimating one", ems="-lm", metavar="FILE"),
        _opt(
            "lmplz",
            "KenLM's lmplz binary: it estimates the LM, sorting on disk (large corpora)",
            ems="-lmplz",
            metavar="BIN",
        ),
        _opt(
            "lmplz_options",
            "more options for lmplz (default: none; its -S is then what is left of --memory, at most 1G)",
            ems="-lmplz-options",
            metavar="OPTIONS",
        ),
        # settings that change the model (TrainSettings fields)
        _opt(
            "lm_order",
            "n-gram order of the cased LM (default %(default)s)",
            ems="-lm-order",
            type=int,
            default=DEFAULTS.lm_order,
            metavar="N",
        ),
        _opt(
            "symmetrization",
            "symmetrization of eflomal's two directions, as Moses' symal (default %(default)s)",
            choices=SYMMETRIZATIONS,
            default=DEFAULTS.symmetrization,
        ),
        _opt(
            "feature_set",
            "paper: the paper's features; full: plus source-copy, unseen-form and headline features "
            "(default %(default)s)",
            ems="-feature-set",
            choices=FEATURE_SETS,
            default=DEFAULTS.feature_set,
        ),
        _opt(
            "alignment_mode",
            "for input with phrases and word links: a word's translation features read its linked words "
            "(links) or its whole source phrase (phrase, the paper); default %(default)s",
            choices=ALIGNMENT_MODES,
            default=DEFAULTS.alignment_mode,
        ),
        _opt(
            "read",
            "for input with phrases and word links, read only these (with their mode's weights); default: both",
            choices=ALIGNMENT_MODES,
        ),
        _opt(
            "input_case",
            "what the output to recase comes as: lower (lowercased), or cased (truecased or cased MT output, "
            "whose case becomes a feature: weights also fitted on dev words truecased as truecase.perl would, "
            "or as --dev-trace has them); default %(default)s",
            ems="-input-case",
            choices=INPUT_CASES,
            default=DEFAULTS.input_case,
        ),
        _opt(
            "sigma",
            "Gaussian prior of the weights (eq. 5; default %(default)s, the paper used 0.5)",
            type=float,
            default=DEFAULTS.sigma,
        ),  # fmt: skip
        _opt(
            "sigma_grid", "pick sigma from these by 2-fold cross-validation on dev", type=_floats, metavar="S1,S2,..."
        ),  # fmt: skip
        _opt("feature_scaling", "scale each weight's prior by its feature's typical size", action="store_true"),
        _opt(
            "max_iter",
            "L-BFGS iterations at most, per fit (default %(default)s)",
            type=int,
            default=DEFAULTS.max_iter,
            metavar="N",
        ),  # fmt: skip
        _opt(
            "max_candidates",
            "cap on GEN's candidate forms per word (default %(default)s)",
            type=int,
            default=DEFAULTS.max_candidates,
            metavar="N",
        ),  # fmt: skip
        _opt(
            "heldout_sentences",
            "also fit the weights on N held-out training sentences (features from the other folds; default "
            "%(default)s: none)",
            type=int,
            default=DEFAULTS.heldout_sentences,
            metavar="N",
        ),
        _opt(
            "heldout_folds",
            "folds of the held-out training sentences, each with statistics from the others (default %(default)s)",
            type=int,
            default=DEFAULTS.heldout_folds,
            metavar="K",
        ),
        _opt(
            "punct_min_count",
            "a punctuation token gets a feature of its own when seen before a word at least N times in training "
            "and dev (default %(default)s)",
            type=int,
            default=DEFAULTS.punct_min_count,
            metavar="N",
        ),
        _opt(
            "npa_seed",
            "seed of the naive phrase aligner (default %(default)s)",
            type=int,
            default=DEFAULTS.npa_seed,
            metavar="N",
        ),  # fmt: skip
        _opt(
            "lm_prune",
            "leave out of the LM the n-grams of its highest order seen at most N times, as lmplz --prune 0 0 N "
            "(train-recaser.perl prunes with 1); default %(default)s: none",
            ems="-lm-prune",
            type=int,
            default=DEFAULTS.lm_prune,
            metavar="N",
        ),
        _opt(
            "discount_fallback",
            "when Kneser-Ney discounts cannot be estimated (a tiny corpus), use lmplz's fallback 0.5 1 1.5 "
            "(default on)",
            action=argparse.BooleanOptionalAction,
            default=DEFAULTS.discount_fallback,
        ),
        # how the work is done (same output whatever the value)
        _opt(
            "jobs",
            "worker processes (the output is the same for every N; default %(default)s)",
            "-j",
            "--jobs",
            ems="-cores",
            type=int,
            default=1,
            metavar="N",
        ),
        _opt(
            "memory",
            "what the counts may hold in memory, worker processes included, as lmplz's -S: 2G, 500M, 50%% "
            "(of physical memory); counts beyond it are sorted on disk (the output is the same for every size); "
            "train refuses a setting below what it holds whatever the setting, and keeps within it plus 100 MiB "
            "(docs/performance.md; default %(default)s)",
            "-S",
            "--memory",
            ems="-memory",
            metavar="SIZE",
            default=DEFAULT_MEMORY,
        ),
    )
}


def add(p: argparse.ArgumentParser, name: str, *, ems: bool = False, **overrides: Any) -> argparse.Action:
    """Add the setting ``name`` to a subcommand's parser (its EMS spelling with ``ems``); ``overrides``
    change argparse's arguments for this command (a default, ``required``, a help text)."""
    o = OPTIONS[name]
    kw = {"help": o.help, **o.kwargs, **overrides}
    kw["dest"] = kw.get("dest", name)  # another setting's spelling (--nbest: a trace_format) keeps that name
    if ems:
        if o.ems is None:
            raise ValueError(f"setting {name} has no EMS spelling")
        # Getopt::Long takes -name and --name; a one-letter flag keeps its long form
        flags: tuple[str, ...] = (o.ems, "-" + o.ems) if len(o.ems) > 2 else (o.ems, *o.flags[1:])
    else:
        flags = o.flags
    return p.add_argument(*flags, **kw)


def unset_unless_given(name: str) -> dict[str, Any]:
    """``add``'s overrides for a setting that stays out of the namespace unless the command line gives it
    (argparse's SUPPRESS), for a command that must tell a given default from none; its help still shows the
    default."""
    o = OPTIONS[name]
    default = o.kwargs.get("default")
    return {"default": argparse.SUPPRESS, "help": o.help.replace("%(default)s", str(default))}


REQUIRED = "required_settings"


def require_after_parsing(p: argparse.ArgumentParser) -> None:
    """Each option added with ``required=True`` checked by ``finish_settings`` instead of argparse: after the
    parse, so that an unknown option is said first (argparse would say
    ``-corpus`` is missing, not that ``-corpsu`` is unknown)."""
    for a in p._actions:  # argparse keeps no public list of them
        if a.required and a.option_strings:
            a.required = False
            # named by its long flag, as every other error names it (``--model``, not ``-m``)
            flag = next((o for o in a.option_strings if len(o) > 2), a.option_strings[0])
            p.set_defaults(**{REQUIRED: [*(p.get_default(REQUIRED) or []), (a.dest, flag)]})


def finish_settings(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """After argparse: what a command's own ``finish`` default makes of its settings, where argparse cannot
    (recase's standard input when no input is given); then argparse's 'required' for settings added with
    ``required=True``."""
    finish = getattr(args, "finish", None)
    if finish is not None:
        finish(parser, args)
    missing = [flag for name, flag in getattr(args, REQUIRED, None) or () if getattr(args, name, None) is None]
    if missing:
        parser.error("the following arguments are required: " + ", ".join(missing))


def commands_taking(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Each flag shown in ``--help`` of ``parser``'s subcommands, and the subcommands
    that take it, in ``--help``'s order: read from the parsers themselves, so the docs cannot drift from them."""
    out: dict[str, list[str]] = {}
    for action in parser._actions:  # argparse keeps no public list of them
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                for a in sub._actions:
                    for flag in a.option_strings if a.help != argparse.SUPPRESS else ():
                        out.setdefault(flag, []).append(command)
    return out


def markdown_table(main: argparse.ArgumentParser, ems: argparse.ArgumentParser) -> str:
    """docs/settings.md's table: each setting's one name, its flags on ``main`` (``moses-recaser``) and ``ems``
    (``moses-recaser-ems``) with the subcommands that take them, and its default."""
    rows = [
        "| name (API, YAML, model) | moses-recaser | moses-recaser-ems | default |",
        "|---|---|---|---|",
    ]
    on_main, on_ems = commands_taking(main), commands_taking(ems)
    given = defaults_taken(main)
    for o in OPTIONS.values():
        by_command = given.get(o.name, {})
        values = list(dict.fromkeys(by_command.values()))
        # the subcommands named where the default is not every one's that takes the flag
        every = len(values) == 1 and len(by_command) == len({c for f in o.flags for c in on_main.get(f, ())})
        cell = "; ".join(
            f"`{v}`" + ("" if every else f" ({', '.join(c for c, w in by_command.items() if w == v)})") for v in values
        )
        rows.append(
            f"| `{o.name}` | {_flags_cell(o.flags, on_main)} | {_flags_cell((o.ems,) if o.ems else (), on_ems)} | "
            f"{cell.replace('|', chr(92) + '|')} |"
        )  # a '|' in a cell is escaped, as GitHub's tables need
    return "\n".join(rows) + "\n"


def defaults_taken(parser: argparse.ArgumentParser) -> dict[str, dict[str, str]]:
    """Each setting's default as each subcommand of ``parser`` takes it, shown as ``--help`` shows it ('' as
    ``''``; a flag passed on only when given, at the settings' default): from the parsers themselves. A setting
    without one (None, a switch that is off) is left out."""
    out: dict[str, dict[str, str]] = {}
    for action in parser._actions:  # argparse keeps no public list of them
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                for a in sub._actions:
                    value = getattr(DEFAULTS, a.dest, None) if a.default == argparse.SUPPRESS else a.default
                    if a.dest in OPTIONS and a.help != argparse.SUPPRESS and value is not None and value is not False:
                        out.setdefault(a.dest, {}).setdefault(command, "''" if value == "" else str(value))
    return out


def _flags_cell(flags: Sequence[str], commands_taking: Mapping[str, list[str]]) -> str:
    """A table cell: the flags, and the subcommands that take them (none: the setting is not on this command)."""
    commands = list(dict.fromkeys(c for f in flags for c in commands_taking.get(f, ())))
    return f"{', '.join(f'`{f}`' for f in flags)} ({', '.join(commands)})" if commands else ""
