"""``moses-recaser SUBCOMMAND ...``: flags mapped onto library calls, nothing more."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from moses_recaser import __version__
from moses_recaser.cli.common import add_trace_flags, main_of, say, trace_options
from moses_recaser.errors import RecaserError
from moses_recaser.model.settings import FEATURE_SETS, TrainSettings
from moses_recaser.moses.formats import FORMATS, Inputs, Record
from moses_recaser.outputs import atomic_output
from moses_recaser.stats.symal import SYMMETRIZATIONS

PROG = "moses-recaser"
DEFAULTS = TrainSettings()
log = logging.getLogger("moses_recaser")


def cmd_triples(args: argparse.Namespace) -> int:
    from moses_recaser.moses.bitext import read_aligned_bitext
    from moses_recaser.triples import write_triples

    if (args.trace is None) == (args.target is None):
        raise RecaserError("give exactly one of --trace (decoder output) or --target (plain bitext)")
    if args.target is not None:
        triples = read_aligned_bitext(args.source, args.target, args.alignment)
    else:
        triples = (
            r.triple
            for r in _read(args.trace_format, Inputs(args.trace, args.source, args.alignment, trace_options(args)))
        )
    with atomic_output(args.output) as out:
        n = write_triples(triples, out)
    log.info("wrote %d triples", n)
    return 0


def _read(name: str, inputs: Inputs):  # type: ignore[no-untyped-def]
    fmt = FORMATS[name]
    if inputs.alignment is not None and not fmt.takes_alignment:
        raise RecaserError(f"an alignment file does not go with --trace-format {name} ({fmt.description})")
    return fmt.read(inputs)


def cmd_tokenize(args: argparse.Namespace) -> int:
    from moses_recaser.moses.tokenizer import tokenize_file

    tokenize_file(args.input, args.output, args.lang, args.aggressive_dash_splits)
    return 0


def cmd_lm(args: argparse.Namespace) -> int:
    from moses_recaser.stats.build import estimate_lm, lm_from_text
    from moses_recaser.stats.counting import count_text

    estimate_lm(count_text(lm_from_text(args.text), args.order), args.arpa, args.discount_fallback)
    return 0


def cmd_align(args: argparse.Namespace) -> int:
    from moses_recaser.moses.pharaoh import format_links
    from moses_recaser.stats.eflomal import aligned_bitext

    triples = aligned_bitext(args.src, args.tgt, args.symmetrize, priors=args.priors, priors_out=args.priors_out)
    with atomic_output(args.output) as out:
        for t in triples:
            out.write(format_links(t.links or []) + "\n")
    return 0


def cmd_phrase_align(args: argparse.Namespace) -> int:
    from moses_recaser.moses.bitext import read_aligned_bitext
    from moses_recaser.stats.npa import lengths_from_trace, phrase_align_triple
    from moses_recaser.triples import write_triples

    lengths = lengths_from_trace(args.lengths_source, args.lengths_trace) if args.lengths_trace else None
    triples = read_aligned_bitext(args.src, args.tgt, args.alignment)
    with atomic_output(args.output) as out:
        write_triples((phrase_align_triple(t, lengths, args.seed) for t in triples), out)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from moses_recaser.stats.build import StatsSettings, write_statistics

    settings = StatsSettings(
        lm_order=args.lm_order, lm=args.lm, symmetrization=args.symmetrize, alignment=args.alignment
    )
    say(write_statistics(args.src, args.tgt, args.alignment, settings, args.model))
    return 0


def cmd_count(args: argparse.Namespace) -> int:
    from moses_recaser.stats.shards import count_shard, parse_shard

    i, n = parse_shard(args.shard)
    with atomic_output(args.output, binary=True) as out:
        count_shard(args.src, args.tgt, args.alignment, i, n, args.lm_order, out)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from moses_recaser.stats.shards import merge_into_model

    say(merge_into_model(args.shards, args.model, args.discount_fallback))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from moses_recaser.model.train import Bitext, DecoderOutput, train
    from moses_recaser.modeldir import read_manifest
    from moses_recaser.stats.build import tempdir
    from moses_recaser.stats.npa import lengths_from_trace

    if args.stats is not None and (args.src or args.tgt or args.alignment or args.lm):
        raise RecaserError("--stats replaces --src, --tgt, --alignment and --lm; give one or the other")
    if args.stats is None and (args.src is None or args.tgt is None):
        raise RecaserError("give the training bitext (--src and --tgt) or a statistics model (--stats)")
    settings = TrainSettings(
        lm_order=args.lm_order,
        lm=args.lm,
        symmetrization=args.symmetrize,
        feature_set=args.features,
        alignment_mode=args.phrase_features,
        sigma=args.sigma,
        max_iter=args.max_iter,
        max_candidates=args.max_candidates,
        npa_seed=args.seed,
        heldout_sentences=args.heldout,
        sigma_grid=tuple(args.sigma_grid or ()),
        monolingual=[str(Path(m).resolve()) for m in args.mono or ()],
        npa_lengths=lengths_from_trace(args.lengths_source, args.lengths_trace) if args.lengths_trace else None,
        lmplz_options=args.lmplz_options or "",
    )
    bitext = Bitext(args.src, args.tgt, args.alignment) if args.stats is None else None
    if args.dev_trace_alignment and not args.dev_trace:
        raise RecaserError("--dev-trace-alignment goes with --dev-trace")
    dev_output = DecoderOutput(args.dev_trace, args.dev_trace_alignment) if args.dev_trace else None
    with tempdir() as work:
        report = train(
            args.model,
            train=bitext,
            stats_model=args.stats,
            dev=Bitext(args.dev_src, args.dev_tgt, args.dev_alignment),
            settings=settings,
            work=Path(work),
            jobs=args.jobs,
            lmplz=args.lmplz,
            dev_output=dev_output,
        )
    log.info(
        "dev GEN oracle %.2f%%; %d L-BFGS iterations; times %s",
        100 * report.gen_oracle,
        report.iterations,
        ", ".join(f"{k} {v:.1f}s" for k, v in report.seconds.items()),
    )
    say(read_manifest(args.model, verify=False).signature)
    return 0


def _records(args: argparse.Namespace, recaser) -> object:  # type: ignore[no-untyped-def]
    """The input as records, from whichever input flag was given."""
    given = [x for x in (args.trace, args.triples, args.input) if x is not None]
    if len(given) != 1:
        raise RecaserError("give exactly one input: --trace, --triples or --input (see --help)")
    if args.align:
        if args.input is None or args.source is None:
            raise RecaserError("--align aligns --input to --source: give both")
        from moses_recaser.stats.eflomal import aligned_bitext

        return (Record(t) for t in aligned_bitext(args.source, args.input, priors=recaser.aligner_priors()))
    if args.trace is not None:
        return _read(args.trace_format, Inputs(args.trace, args.source, args.alignment, trace_options(args)))
    if args.triples is not None:
        return _read("jsonl", Inputs(args.triples))
    return _read("text", Inputs(args.input, args.source, args.input_alignment))


def cmd_recase(args: argparse.Namespace) -> int:
    from moses_recaser.model.streaming import single_threaded_blas, zip_recased

    single_threaded_blas()
    from moses_recaser.model.recaser import Recaser

    recaser = Recaser(args.model, prefer=args.phrase_features)
    records = _records(args, recaser)
    with atomic_output(args.output) as out:
        if args.explain:
            for r in records:  # type: ignore[attr-defined]
                for row in recaser.explain(r.triple):
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.write("\n")
            return 0
        for r, tokens in zip_recased(records, recaser, args.threads, triple_of=lambda r: r.triple):  # type: ignore[arg-type]
            out.write(r.line(tokens) + "\n")
    log.info("signature: %s", recaser.signature)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from moses_recaser.harness.metrics import case_scores_of_files

    scores = case_scores_of_files(args.hyp, args.ref)
    say(
        f"precision {100 * scores.precision:.2f}  cased-word F1 {100 * scores.f1:.2f}  "
        f"words {scores.words}  errors {scores.words - scores.correct}"
    )
    if args.confusion:
        say(scores.confusion_table())
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    from moses_recaser.harness.config import load_config
    from moses_recaser.harness.experiment import results_markdown, run_experiment

    cfg = load_config(args.config)
    results = run_experiment(cfg, Path(args.out or Path("runs") / cfg.name), args.data_root, args.cache)
    say(results_markdown(results))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Bilingual recasing of machine-translation output (Wang, Knight & Marcu, NAACL 2006).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="only errors on stderr, no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("triples", help="turn a decoder trace (or a word-aligned bitext) into (F, e, A) JSON Lines")
    p.add_argument("--source", required=True, metavar="SRC", help="cased, tokenized source the decoder translated")
    p.add_argument("--trace", metavar="OUT", help="decoder output with -t/-tt/-print-alignment-info, or '-' for stdin")
    p.add_argument("--target", metavar="TGT", help="instead of --trace: plain target side of a word-aligned bitext")
    p.add_argument("--alignment", metavar="WA", help="-alignment-output-file, or Pharaoh i-j file for --target")
    p.add_argument("-o", "--output", metavar="FILE.jsonl", default="-", help="output (default stdout)")
    add_trace_flags(p)
    p.set_defaults(func=cmd_triples, reads=("source", "trace", "target", "alignment"), writes=("output",))

    p = sub.add_parser("tokenize", help="Moses tokenization (sacremoses, escaping on; jieba for zh)")
    p.add_argument("-l", "--lang", required=True, help="language code, e.g. en, fr, de, zh")
    p.add_argument("-i", "--input", default="-", help="raw text (default stdin)")
    p.add_argument("-o", "--output", default="-", help="tokenized text (default stdout)")
    p.add_argument("-a", "--aggressive-dash-splits", action="store_true", help="as tokenizer.perl -a")
    p.set_defaults(func=cmd_tokenize, reads=("input",), writes=("output",))

    p = sub.add_parser("lm", help="estimate an interpolated modified Kneser-Ney LM, as lmplz does")
    p.add_argument("-o", "--order", type=int, required=True, help="n-gram order (lmplz -o)")
    p.add_argument("--text", default="-", help="tokenized corpus, one sentence per line ('-': stdin)")
    p.add_argument("--arpa", required=True, help="output ARPA file ('-': stdout)")
    p.add_argument(
        "--discount-fallback",
        action="store_true",
        help="when discounts cannot be estimated (tiny corpus), use 0.5 1 1.5 as lmplz --discount_fallback",
    )
    p.set_defaults(func=cmd_lm, reads=("text",), writes=("arpa",))

    p = sub.add_parser("align", help="word-align a tokenized bitext with eflomal and symmetrize")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
    p.add_argument("-o", "--output", required=True, help="Pharaoh i-j alignment file")
    p.add_argument("--symmetrize", default="grow-diag-final-and", choices=SYMMETRIZATIONS)
    p.add_argument("--priors", help="eflomal priors to align with (from --priors-out or eflomal-makepriors)")
    p.add_argument("--priors-out", help="write eflomal priors computed from this alignment")
    p.set_defaults(func=cmd_align, reads=("src", "tgt", "priors"), writes=("output", "priors_out"))

    p = sub.add_parser("phrase-align", help="naive phrase aligner: word-aligned bitext -> phrase-aligned triples")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
    p.add_argument("--alignment", required=True, help="Pharaoh i-j file")
    p.add_argument("--lengths-trace", help="a Moses -t output to take source phrase lengths from")
    p.add_argument("--lengths-source", help="the input of --lengths-trace")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", default="-", help="triples JSON Lines (default stdout)")
    p.set_defaults(
        func=cmd_phrase_align,
        reads=("src", "tgt", "alignment", "lengths_trace", "lengths_source"),
        writes=("output",),
    )

    p = sub.add_parser("stats", help="tables and cased LM from a cased word-aligned bitext, into a model directory")
    p.add_argument("--src", required=True, help="cased, tokenized source side")
    p.add_argument("--tgt", required=True, help="cased, tokenized target side")
    p.add_argument("--alignment", help="Pharaoh i-j (e.g. EMS model/aligned.grow-diag-final-and); else eflomal")
    p.add_argument("--symmetrize", default="grow-diag-final-and", choices=SYMMETRIZATIONS)
    p.add_argument("--lm", help="an existing KenLM model (ARPA or binary) instead of estimating one")
    p.add_argument("--lm-order", type=int, default=DEFAULTS.lm_order)
    p.add_argument("--model", required=True, help="output model directory")
    p.set_defaults(func=cmd_stats, reads=("src", "tgt", "alignment", "lm"), prints=True)

    p = sub.add_parser("count", help="count one shard of a word-aligned bitext (map step; see 'merge')")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
    p.add_argument("--alignment", required=True)
    p.add_argument("--shard", required=True, metavar="i/N", help="the i-th of N contiguous line blocks")
    p.add_argument("--lm-order", type=int, default=DEFAULTS.lm_order)
    p.add_argument("-o", "--output", required=True, help="shard count file (.npz)")
    p.set_defaults(func=cmd_count, reads=("src", "tgt", "alignment"), writes=("output",))

    p = sub.add_parser("merge", help="merge shard count files into a model (reduce step; same as 'stats')")
    p.add_argument("shards", nargs="+", help="count files of shards 1..N")
    p.add_argument("--model", required=True, help="output model directory")
    p.add_argument(
        "--discount-fallback",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="lmplz's fallback discounts for tiny corpora (default on, as 'stats')",
    )
    p.set_defaults(func=cmd_merge, reads=("shards",), prints=True)

    p = sub.add_parser("train", help="train a bilingual recaser: tables and LM from a bitext, CRF weights on dev")
    p.add_argument("--src", help="training source, cased and tokenized")
    p.add_argument("--tgt", help="training target, cased and tokenized")
    p.add_argument("--alignment", help="training word alignment (Pharaoh); else eflomal aligns")
    p.add_argument(
        "--stats",
        metavar="DIR",
        help="tables and LM from a statistics model ('stats', or 'merge' of shard counts) instead of --src/--tgt",
    )
    p.add_argument("--dev-src", required=True)
    p.add_argument("--dev-tgt", required=True, help="cased dev reference")
    p.add_argument("--dev-alignment", help="dev word alignment; else aligned with the training data")
    p.add_argument(
        "--dev-trace",
        metavar="TRACE",
        help="the decoder's -t output for --dev-src: fit the weights on it, with --dev-tgt's case carried "
        "over to the words that match (docs/results.md compares the two fits)",
    )
    p.add_argument("--dev-trace-alignment", metavar="WA", help="the -alignment-output-file of --dev-trace")
    p.add_argument("--lm", help="an existing KenLM model (ARPA or binary) instead of estimating one")
    p.add_argument(
        "--mono",
        action="append",
        metavar="FILE",
        help="cased, tokenized target-language text without a source, for the LM and the case "
        "prior (repeatable; e.g. the LM data of the Moses system)",
    )
    p.add_argument("--lm-order", type=int, default=DEFAULTS.lm_order)
    p.add_argument("--lmplz", metavar="BIN", help="KenLM's lmplz estimates the LM (it sorts on disk: large corpora)")
    p.add_argument("--lmplz-options", metavar="OPTIONS", help="more options for lmplz (default '-S 1G')")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="processes that count the training statistics (the model is the same for every N)",
    )
    p.add_argument("--symmetrize", default="grow-diag-final-and", choices=SYMMETRIZATIONS)
    p.add_argument(
        "--features",
        default=DEFAULTS.feature_set,
        choices=FEATURE_SETS,
        help="paper: the paper's features; full: plus source-copy, unseen-form and headline features "
        "(default %(default)s)",
    )
    p.add_argument(
        "--phrase-features",
        default=DEFAULTS.alignment_mode,
        choices=["phrase", "links"],
        help="for input with phrases and word links: align a word to its whole source phrase (the "
        "paper) or to its linked words (default %(default)s)",
    )
    p.add_argument(
        "--sigma",
        type=float,
        default=DEFAULTS.sigma,
        help="Gaussian prior (eq. 5; default %(default)s, the paper used 0.5)",
    )
    p.add_argument(
        "--sigma-grid",
        type=lambda x: [float(v) for v in x.split(",")],
        metavar="S1,S2,...",
        help="pick sigma from these by 2-fold cross-validation on dev",
    )
    p.add_argument("--max-iter", type=int, default=DEFAULTS.max_iter)
    p.add_argument(
        "--max-candidates", type=int, default=DEFAULTS.max_candidates, help="cap on GEN per word (default %(default)s)"
    )
    p.add_argument(
        "--heldout",
        type=int,
        default=0,
        metavar="N",
        help="also fit weights on N held-out training sentences (features from the other folds)",
    )
    p.add_argument("--lengths-trace", help="a Moses -t output whose source phrase lengths the NPA copies")
    p.add_argument("--lengths-source", help="the input of --lengths-trace")
    p.add_argument("--seed", type=int, default=0, help="naive phrase aligner seed")
    p.add_argument("--model", required=True, help="output model directory")
    p.set_defaults(
        func=cmd_train,
        reads=(
            "src",
            "tgt",
            "alignment",
            "dev_src",
            "dev_tgt",
            "dev_alignment",
            "dev_trace",
            "dev_trace_alignment",
            "lm",
            "mono",
            "lengths_trace",
            "lengths_source",
        ),
        prints=True,
    )

    p = sub.add_parser("recase", help="recase lowercased MT output")
    p.add_argument("--model", required=True)
    p.add_argument("--source", help="cased, tokenized source (as the decoder saw it); without it: monolingual")
    p.add_argument("--trace", help="decoder output (plain, -t, -tt, alignment info), '-' for stdin")
    p.add_argument("--alignment", help="-alignment-output-file of the decoder, with --trace")
    p.add_argument("--triples", help="(F, e, A) JSON Lines")
    p.add_argument("--input", help="lowercased tokenized text ('-' for stdin)")
    p.add_argument("--input-alignment", help="Pharaoh source-target alignment of --input to --source")
    p.add_argument("--align", action="store_true", help="align --input to --source with the model's eflomal priors")
    p.add_argument(
        "--phrase-features",
        choices=["phrase", "links"],
        help="for input with phrases and word links, read only these (with the weights fitted for them)",
    )
    p.add_argument("--explain", action="store_true", help="per word: chosen form, runner-up, feature contributions")
    p.add_argument(
        "--threads", type=int, default=1, metavar="N", help="worker processes (output is byte-identical to --threads 1)"
    )
    p.add_argument("-o", "--output", default="-")
    add_trace_flags(p)
    p.set_defaults(
        func=cmd_recase,
        reads=("source", "trace", "alignment", "triples", "input", "input_alignment"),
        writes=("output",),
    )

    p = sub.add_parser("eval", help="capitalization precision and cased-word F1 of a recased file")
    p.add_argument("--hyp", required=True, help="recased output, tokenized")
    p.add_argument("--ref", required=True, help="cased reference, tokenized the same way")
    p.add_argument("--confusion", action="store_true", help="print the per-tag confusion table")
    p.set_defaults(func=cmd_eval, reads=("hyp", "ref"), prints=True)

    p = sub.add_parser("experiment", help="run a YAML experiment: precision table, learning curve")
    p.add_argument("config", help="configs/NAME.yaml")
    p.add_argument("--out", help="output directory (default runs/NAME)")
    p.add_argument(
        "--data-root",
        help="corpora root (default: the config's, else MOSES_RECASER_DATA, else the "
        "shared corpora beside the project)",
    )
    p.add_argument("--cache", help="stage cache (default runs/cache or MOSES_RECASER_CACHE)")
    p.set_defaults(func=cmd_experiment, reads=("config",), prints=True)
    return parser


main = main_of(build_parser, PROG)

if __name__ == "__main__":
    import sys

    sys.exit(main())
