"""``moses-recaser SUBCOMMAND ...``: flags mapped onto library calls, nothing more.

Each subcommand is a pair: ``add_NAME`` declares its flags (settings by their one name, ``cli.options``) and
``cmd_NAME`` calls the library. ``COMMANDS`` lists them in the order ``--help`` shows.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

from moses_recaser import RecaserError
from moses_recaser.cli.common import add_trace_flags, command_parser, main_of, print_result, trace_options
from moses_recaser.cli.options import add, unset_unless_given
from moses_recaser.model.settings import STATS_SETTINGS, check_stats_fixed

PROG = "moses-recaser"
log = logging.getLogger("moses_recaser")


# triples ---------------------------------------------------------------------------------------------------
def add_triples(p: argparse.ArgumentParser) -> None:
    add(p, "source", required=True, help="cased, tokenized source the decoder translated")
    add(p, "trace")
    add(p, "target", help="instead of --trace: the plain target side of a word-aligned bitext")
    add(p, "alignment", help="the decoder's -alignment-output-file, or the Pharaoh file of --target")
    add(p, "output", default="-", help="triples as JSON Lines (default stdout)")
    add_trace_flags(p)
    p.set_defaults(reads=("source", "trace", "target", "alignment"), writes=("output",))


def cmd_triples(args: argparse.Namespace) -> int:
    from moses_recaser import make_triples

    make_triples(
        args.source,
        args.output,
        trace=args.trace,
        target=args.target,
        alignment=args.alignment,
        trace_format=args.trace_format,
        trace_options=trace_options(args),
    )
    return 0


# tokenize --------------------------------------------------------------------------------------------------
def add_tokenize(p: argparse.ArgumentParser) -> None:
    p.add_argument("-l", "--lang", required=True, help="language code, e.g. en, fr, de, zh")
    add(p, "input", default="-", help="raw text (default stdin)")
    add(p, "output", default="-", help="tokenized text (default stdout)")
    p.add_argument("-a", "--aggressive-dash-splits", action="store_true", help="as tokenizer.perl -a")
    p.set_defaults(reads=("input",), writes=("output",), rewrites=("input",))


def cmd_tokenize(args: argparse.Namespace) -> int:
    from moses_recaser import tokenize_file

    tokenize_file(args.input, args.output, args.lang, args.aggressive_dash_splits)
    return 0


# lm --------------------------------------------------------------------------------------------------------
def add_lm(p: argparse.ArgumentParser) -> None:
    add(p, "input", default="-", help="tokenized corpus, one sentence a line (default stdin)")
    add(p, "output", required=True, help="the ARPA file ('-': stdout)")
    add(p, "lm_order")
    add(p, "discount_fallback")
    p.set_defaults(reads=("input",), writes=("output",))


def cmd_lm(args: argparse.Namespace) -> int:
    from moses_recaser import make_lm

    make_lm(args.input, args.output, args.lm_order, args.discount_fallback)
    return 0


# align, phrase-align ---------------------------------------------------------------------------------------
def add_align(p: argparse.ArgumentParser) -> None:
    add(p, "source", required=True)
    add(p, "target", required=True)
    add(p, "output", required=True, help="the Pharaoh i-j alignment")
    add(p, "symmetrization")
    p.add_argument("--priors", metavar="FILE", help="eflomal priors to align with (from --priors-out)")
    p.add_argument("--priors-out", metavar="FILE", help="write eflomal priors computed from this alignment")
    p.set_defaults(reads=("source", "target", "priors"), writes=("output", "priors_out"))


def cmd_align(args: argparse.Namespace) -> int:
    from moses_recaser import align

    align(args.source, args.target, args.output, args.symmetrization, priors=args.priors, priors_out=args.priors_out)
    return 0


def add_npa_lengths(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lengths-trace", metavar="FILE", help="a Moses -t output whose source phrase lengths the NPA copies"
    )
    p.add_argument("--lengths-source", metavar="FILE", help="the input of --lengths-trace")


def npa_lengths(args: argparse.Namespace) -> dict[int, float] | None:
    from moses_recaser import phrase_lengths

    if (args.lengths_trace is None) != (args.lengths_source is None):
        raise RecaserError("--lengths-trace and --lengths-source go together (a -t output and its input)")
    return phrase_lengths(args.lengths_source, args.lengths_trace) if args.lengths_trace else None


def add_phrase_align(p: argparse.ArgumentParser) -> None:
    add(p, "source", required=True)
    add(p, "target", required=True)
    add(p, "alignment", required=True, help="Pharaoh i-j word alignment of the two")
    add_npa_lengths(p)
    add(p, "npa_seed")
    add(p, "output", default="-", help="triples as JSON Lines (default stdout)")
    p.set_defaults(reads=("source", "target", "alignment", "lengths_trace", "lengths_source"), writes=("output",))


def cmd_phrase_align(args: argparse.Namespace) -> int:
    from moses_recaser import phrase_align

    phrase_align(args.source, args.target, args.alignment, args.output, npa_lengths(args), args.npa_seed)
    return 0


# stats, count, merge ---------------------------------------------------------------------------------------
MODEL_OUT = "the model directory to write (an existing model there is replaced; anything else is refused)"


def add_stats(p: argparse.ArgumentParser) -> None:
    add(p, "source", required=True)
    add(p, "target", required=True)
    add(p, "alignment", help="Pharaoh i-j (e.g. EMS model/aligned.grow-diag-final-and); else eflomal aligns")
    add(p, "symmetrization")
    add(p, "lm")
    add(p, "lm_order")
    add(p, "discount_fallback")
    add(p, "lm_prune")
    add(p, "jobs", help="processes that count the statistics (the model is the same for every N; default %(default)s)")
    add(p, "memory")
    add(p, "output", required=True, help=MODEL_OUT, metavar="DIR")
    p.set_defaults(reads=("source", "target", "alignment", "lm"), prints=True)


def cmd_stats(args: argparse.Namespace) -> int:
    from moses_recaser import Bitext, RunOptions, StatsSettings, statistics

    settings = StatsSettings(
        lm_order=args.lm_order,
        discount_fallback=args.discount_fallback,
        lm=args.lm,
        symmetrization=args.symmetrization,
        lm_prune=args.lm_prune,
    )
    bitext = Bitext(args.source, args.target, args.alignment)
    print_result(statistics(bitext, args.output, settings, RunOptions(args.jobs, args.memory)))
    return 0


def add_count(p: argparse.ArgumentParser) -> None:
    add(p, "source", required=True)
    add(p, "target", required=True)
    add(p, "alignment", required=True)
    p.add_argument("--shard", required=True, metavar="i/N", help="the i-th of N contiguous line blocks")
    add(p, "lm_order")
    add(p, "memory")
    add(p, "output", required=True, help="the shard's count file (.npz)")
    p.set_defaults(reads=("source", "target", "alignment"), writes=("output",))


def cmd_count(args: argparse.Namespace) -> int:
    from moses_recaser import Bitext, count_shard

    bitext = Bitext(args.source, args.target, args.alignment)
    count_shard(bitext, args.shard, args.output, args.lm_order, args.memory)
    return 0


def add_merge(p: argparse.ArgumentParser) -> None:
    p.add_argument("shards", nargs="+", help="count files of shards 1..N")
    add(p, "output", required=True, help=MODEL_OUT, metavar="DIR")
    add(p, "discount_fallback")
    add(p, "lm_prune")
    add(p, "memory")
    p.set_defaults(reads=("shards",), prints=True)


def cmd_merge(args: argparse.Namespace) -> int:
    from moses_recaser import merge_shards

    print_result(merge_shards(args.shards, args.output, args.discount_fallback, args.lm_prune, args.memory))
    return 0


# train -----------------------------------------------------------------------------------------------------
TRAIN_SETTINGS = (
    "lm_order",
    "symmetrization",
    "feature_set",
    "sigma",
    "sigma_grid",
    "feature_scaling",
    "max_iter",
    "max_candidates",
    "heldout_sentences",
    "heldout_folds",
    "punct_min_count",
    "npa_seed",
    "discount_fallback",
    "lm_prune",
    "lm",
    "lmplz_options",
    "monolingual",
    "input_case",
    "source_lang",
    "target_lang",
)


def add_train(p: argparse.ArgumentParser) -> None:
    add(p, "source", help="training source, cased and tokenized")
    add(p, "target", help="training target, cased and tokenized")
    add(p, "alignment", help="training word alignment (Pharaoh); else eflomal aligns it")
    add(
        p,
        "raw",
        help="the bitext, dev set and monolingual text are raw (detokenized): tokenized here for --source-lang and "
        "--target-lang, as recase --raw tokenizes, and aligned with eflomal",
    )
    p.add_argument(
        "--stats",
        metavar="DIR",
        help="tables and LM from a statistics model ('stats', or 'merge' of shard counts) instead of a bitext",
    )
    add(p, "dev_source")
    add(p, "dev_target")
    add(p, "dev_alignment")
    add(p, "dev_size")
    add(
        p,
        "dev_trace",
        help="the decoder's -t output of --dev-source: fit the weights on it, with --dev-target's case carried "
        "over to the words that match (docs/results.md compares the two fits)",
    )
    add(p, "dev_trace_alignment")
    for name in TRAIN_SETTINGS:
        # what a statistics model fixes is passed on only when given: with --stats, at any value, it is refused
        # (--lm is None unless given, and a file the command checks it reads, so it keeps its default)
        add(p, name, **(unset_unless_given(name) if name in STATS_SETTINGS and name != "lm" else {}))
    add(p, "alignment_mode")
    add(p, "lmplz")
    add_npa_lengths(p)
    add(
        p,
        "jobs",
        help="processes that count the training statistics (the model is the same for every N; default %(default)s)",
    )
    add(p, "memory")
    add(p, "output", required=True, help=MODEL_OUT, metavar="DIR")
    p.set_defaults(
        reads=(
            "source",
            "target",
            "alignment",
            "dev_source",
            "dev_target",
            "dev_alignment",
            "dev_trace",
            "dev_trace_alignment",
            "lm",
            "monolingual",
            "lengths_trace",
            "lengths_source",
        ),  # fmt: skip
        once=("stats",),
        prints=True,
    )


def cmd_train(args: argparse.Namespace) -> int:
    from moses_recaser import Bitext, DecoderOutput, RunOptions, TrainSettings, train

    values = {name: getattr(args, name) for name in (*TRAIN_SETTINGS, "alignment_mode") if hasattr(args, name)}
    values["sigma_grid"] = tuple(values["sigma_grid"] or ())
    values["monolingual"] = values["monolingual"] or []
    settings = TrainSettings(**values, npa_lengths=npa_lengths(args))
    if args.stats is not None:  # a flag the statistics model fixed would go unused at any value, its default too
        if args.source or args.target or args.alignment:
            raise RecaserError("`stats` replaces `source`, `target` and `alignment`: give one or the other")
        check_stats_fixed(settings, [k for k, v in values.items() if v is not None], args.lmplz)
    elif args.source is None or args.target is None:
        raise RecaserError("give the training bitext (`source` and `target`) or a statistics model (`stats`)")
    if (args.dev_source is None) != (args.dev_target is None):
        raise RecaserError("the dev set is two files: give both `dev_source` and `dev_target`")
    if args.dev_alignment is not None and args.dev_source is None:
        raise RecaserError("`dev_alignment` goes with `dev_source` and `dev_target`")
    if args.dev_trace_alignment is not None and args.dev_trace is None:
        raise RecaserError("`dev_trace_alignment` goes with `dev_trace`")
    model = train(
        args.stats or Bitext(args.source, args.target, args.alignment),
        args.output,
        settings,
        dev=Bitext(args.dev_source, args.dev_target, args.dev_alignment) if args.dev_source else None,
        dev_size=args.dev_size,
        dev_output=DecoderOutput(args.dev_trace, args.dev_trace_alignment) if args.dev_trace else None,
        run=RunOptions(args.jobs, args.memory, lmplz=args.lmplz),
        raw=args.raw,
    )
    print_result(model.signature)
    return 0


# recase ----------------------------------------------------------------------------------------------------
def add_recase(p: argparse.ArgumentParser) -> None:
    add(p, "model", required=True, help="the model directory ('train' wrote it)")
    add(p, "source", help="cased source: tokenized (as the decoder saw it), or raw with --raw; without it: monolingual")
    add(p, "trace")
    add(p, "triples")
    add(
        p,
        "input",
        help="text to recase, lowercased or not: tokenized, or raw with --raw (default: stdin, when no --trace or "
        "--triples is given)",
    )
    add(
        p,
        "alignment",
        help="word links of the decoder's output (--trace) or of --input to --source: Pharaoh i-j, such as "
        "the decoder's -alignment-output-file",
    )
    add(p, "align")
    add(p, "raw")
    add(p, "source_lang", help="--raw: the language of --source (default: the model's, from train --source-lang)")
    add(p, "target_lang", help="--raw: the language of --input (default: the model's, from train --target-lang)")
    add(p, "read")
    p.add_argument("--explain", action="store_true", help="per word: chosen form, runner-up, feature contributions")
    add(p, "jobs")
    add(p, "output", default="-", help="recased output (default stdout)")
    add_trace_flags(p)
    # the output may replace --input (recasing in place), never a file read beside it
    p.set_defaults(
        reads=("source", "trace", "alignment", "triples", "input"),
        reads_if_there=("model",),
        writes=("output",),
        rewrites=("input",),
        finish=stdin_unless_given,
    )


def stdin_unless_given(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """No input given: plain text on stdin, as Moses' filters read it (``recase -m MODEL < in > out``); set before
    the files are checked, so that ``--source -`` beside it is one reader too many."""
    if args.trace is None and args.triples is None and args.input is None:
        args.input = "-"


def cmd_recase(args: argparse.Namespace) -> int:
    from moses_recaser import Recaser

    given = [(flag, v) for flag, v in (("trace", args.trace), ("triples", args.triples), ("input", args.input)) if v]
    if len(given) > 1:
        raise RecaserError("give one input: --trace, --triples or --input (none of them: text on stdin)")
    fmt = {"trace": args.trace_format, "triples": "jsonl"}.get(given[0][0], "text")
    recaser = Recaser.load(args.model, read=args.read)
    recaser.recase_file(
        given[0][1],
        args.output,
        source=args.source,
        alignment=args.alignment,
        trace_format=fmt,
        trace_options=trace_options(args),
        align=args.align,
        explain=args.explain,
        jobs=args.jobs,
        raw=args.raw,
        source_lang=args.source_lang,
        target_lang=args.target_lang,
    )
    log.info("signature: %s", recaser.signature)
    return 0


# eval ------------------------------------------------------------------------------------------------------
def add_eval(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hyp", required=True, metavar="FILE", help="recased output, tokenized (raw with --raw)")
    p.add_argument("--ref", required=True, metavar="FILE", help="cased reference, tokenized the same way")
    add(p, "raw", help="both files are raw (detokenized) text: scored as sacrebleu scores it, on its tokens")
    add(p, "target_lang", help="the language of raw files: sacrebleu's tokenizer for it (13a; zh for Chinese)")
    p.add_argument("--confusion", action="store_true", help="print the per-tag confusion table")
    p.set_defaults(reads=("hyp", "ref"), prints=True)


def cmd_eval(args: argparse.Namespace) -> int:
    from moses_recaser import evaluate_files

    result = evaluate_files(args.hyp, args.ref, raw=args.raw, target_lang=args.target_lang)
    print_result(result.line())
    print_result(f"signature: {result.signature}")
    if args.confusion:
        print_result(result.case.confusion_table())
    return 0


# experiment ------------------------------------------------------------------------------------------------
def add_experiment(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="configs/NAME.yaml")
    add(p, "output", metavar="DIR", help="the run's directory (default runs/NAME)")
    p.add_argument(
        "--data-root",
        help="corpora root (default: the config's, else MOSES_RECASER_DATA, else the shared corpora beside the "
        "project)",
    )
    p.add_argument("--cache", help="stage cache (default runs/cache or MOSES_RECASER_CACHE)")
    p.set_defaults(reads=("config",), prints=True)


def cmd_experiment(args: argparse.Namespace) -> int:
    from moses_recaser import experiment

    print_result(experiment(args.config, args.output, args.data_root, args.cache))
    return 0


Command = tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
COMMANDS: tuple[Command, ...] = (
    ("train", "train a recaser: tables and LM from a bitext, CRF weights on dev", add_train, cmd_train),
    ("recase", "recase MT output (lowercased, truecased or cased)", add_recase, cmd_recase),
    ("eval", "capitalization precision, cased-word F1 and BLEU of a recased file", add_eval, cmd_eval),
    ("triples", "a decoder trace (or a word-aligned bitext) as (F, e, A) JSON Lines", add_triples, cmd_triples),
    ("tokenize", "Moses tokenization (sacremoses, escaping on; jieba for zh)", add_tokenize, cmd_tokenize),
    ("lm", "an interpolated modified Kneser-Ney LM, as lmplz estimates it", add_lm, cmd_lm),
    ("align", "word-align a tokenized bitext with eflomal and symmetrize", add_align, cmd_align),
    ("phrase-align", "the naive phrase aligner: word-aligned bitext -> triples", add_phrase_align, cmd_phrase_align),
    ("stats", "tables and cased LM of a word-aligned bitext, as a model directory", add_stats, cmd_stats),
    ("count", "count one shard of a word-aligned bitext (map step; see 'merge')", add_count, cmd_count),
    ("merge", "merge shard count files into a model (reduce step; as 'stats')", add_merge, cmd_merge),
    ("experiment", "run a YAML experiment: precision table, learning curve", add_experiment, cmd_experiment),
)


def build_parser() -> argparse.ArgumentParser:
    return command_parser(
        PROG, "Bilingual recasing of machine-translation output (Wang, Knight & Marcu, NAACL 2006).", COMMANDS
    )


main = main_of(build_parser, PROG)

if __name__ == "__main__":
    import sys

    sys.exit(main())
