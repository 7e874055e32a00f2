"""Command line: ``moses-recaser SUBCOMMAND ...``; flags map onto library calls, nothing more."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from moses_recaser import __version__
from moses_recaser.stats.symal import SYMMETRIZATIONS
from moses_recaser.errors import RecaserError
from moses_recaser.moses.trace import TraceOptions, read_aligned_bitext, read_nbest, read_trace
from moses_recaser.textio import atomic_output
from moses_recaser.triples import write_triples

PROG = "moses-recaser"
log = logging.getLogger("moses_recaser")


def _trace_options(args: argparse.Namespace) -> TraceOptions:
    return TraceOptions(
        unknown_prefix=args.unknown_prefix,
        unknown_suffix=args.unknown_suffix,
        factor_delimiter=args.factor_delimiter,
        xml_input=args.xml_input,
    )


def add_trace_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoder output format")
    g.add_argument("--unknown-prefix", metavar="UNK", default=None,
                   help="strip this prefix from words the decoder marked unknown (-mark-unknown); off by default")
    g.add_argument("--unknown-suffix", metavar="S", default="", help="the -unknown-word-suffix, if one was set")
    g.add_argument("--factor-delimiter", metavar="D", default="|",
                   help="output factor delimiter (default '|'); '' keeps words whole")
    g.add_argument("--xml-input", action="store_true",
                   help="the decoder input had XML markup (-xml-input inclusive/exclusive/ignore): strip it from "
                        "the source before counting positions")


def cmd_triples(args: argparse.Namespace) -> int:
    opts = _trace_options(args)
    if (args.trace is None) == (args.target is None):
        raise RecaserError("give exactly one of --trace (decoder output) or --target (plain bitext)")
    if args.target is not None:
        triples = read_aligned_bitext(args.source, args.target, args.alignment)
    elif args.nbest:
        if args.alignment is not None:
            raise RecaserError("--alignment goes with a 1-best trace; n-best lists carry their own alignment field")
        triples = read_nbest(args.source, args.trace, opts)
    else:
        triples = read_trace(args.source, args.trace, args.alignment, opts)
    with atomic_output(args.output) as out:
        n = write_triples(triples, out)
    log.info("wrote %d triples", n)
    return 0


def cmd_tokenize(args: argparse.Namespace) -> int:
    from moses_recaser.textio import read_lines
    from moses_recaser.moses.tokenizer import tokenizer

    tok = tokenizer(args.lang, args.aggressive_dash_splits)
    with atomic_output(args.output) as out:
        for line in read_lines(args.input):
            out.write(" ".join(tok(line)) + "\n")
    return 0


def cmd_lm(args: argparse.Namespace) -> int:
    from moses_recaser.stats.build import estimate_lm, lm_from_text

    estimate_lm(lm_from_text(args.text), args.order, args.arpa, args.discount_fallback)
    return 0


def cmd_align(args: argparse.Namespace) -> int:
    from moses_recaser.stats.eflomal import align
    from moses_recaser.stats.symal import format_links
    from moses_recaser.moses.trace import read_aligned_bitext

    triples = list(read_aligned_bitext(args.src, args.tgt))
    links = align([t.source for t in triples], [t.target for t in triples], args.symmetrize,
                  priors=args.priors, priors_out=args.priors_out)
    with atomic_output(args.output) as out:
        for a in links:
            out.write(format_links(a) + "\n")
    return 0


def cmd_phrase_align(args: argparse.Namespace) -> int:
    from moses_recaser.moses.trace import read_aligned_bitext
    from moses_recaser.stats.npa import length_distribution, phrase_align_triple

    lengths = None
    if args.lengths_trace is not None:
        if args.lengths_source is None:
            raise RecaserError("--lengths-trace needs --lengths-source (the input the decoder translated)")
        lengths = length_distribution(read_trace(args.lengths_source, args.lengths_trace))
        log.info("source phrase lengths from the trace: %s",
                 " ".join(f"{k}:{v:.3f}" for k, v in lengths.items()))
    triples = read_aligned_bitext(args.src, args.tgt, args.alignment)
    with atomic_output(args.output) as out:
        write_triples((phrase_align_triple(t, lengths, args.seed) for t in triples), out)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    from moses_recaser.stats.build import StatsSettings, build_statistics, tempdir, version_signature
    from moses_recaser.modeldir import write_model

    settings = StatsSettings(lm_order=args.lm_order, lm=args.lm, symmetrization=args.symmetrize,
                             alignment=args.alignment)
    with tempdir() as work:
        tables, files, counts = build_statistics(args.src, args.tgt, args.alignment, settings, work)
        write_model(args.model, settings=vars(settings), signature=version_signature(settings), tables=tables,
                    copy_files=files, extra={"corpus": {"sentences": counts.sentences,
                                                        "target_tokens": counts.target_tokens}})
    print(version_signature(settings))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from moses_recaser.stats.build import tempdir
    from moses_recaser.model.train import TrainSettings, train

    settings = TrainSettings(
        lm_order=args.lm_order, lm=args.lm, symmetrization=args.symmetrize, feature_set=args.features,
        alignment_mode=args.phrase_features, sigma=args.sigma, max_iter=args.max_iter,
        max_candidates=args.max_candidates, npa_seed=args.seed, heldout_sentences=args.heldout,
        sigma_grid=tuple(args.sigma_grid or ()), monolingual=[str(Path(m).resolve()) for m in args.mono or ()],
    )
    if args.stats is None and (args.src is None or args.tgt is None):
        raise RecaserError("give the training bitext (--src and --tgt) or a statistics model (--stats)")
    if args.stats is not None and (args.src or args.tgt or args.alignment or args.lm):
        raise RecaserError("--stats replaces --src, --tgt, --alignment and --lm; give one or the other")
    lengths = None
    if args.lengths_trace is not None:
        if args.lengths_source is None:
            raise RecaserError("--lengths-trace needs --lengths-source (the input the decoder translated)")
        lengths = (args.lengths_trace, args.lengths_source)
    with tempdir() as work:
        report = train(args.src, args.tgt, args.alignment, args.dev_src, args.dev_tgt, args.dev_alignment,
                       args.model, settings, Path(work), lengths, stats_model=args.stats)
    from moses_recaser.modeldir import read_manifest

    log.info("dev GEN oracle %.2f%%; %d L-BFGS iterations; times %s", 100 * report.gen_oracle, report.iterations,
             ", ".join(f"{k} {v:.1f}s" for k, v in report.seconds.items()))
    print(read_manifest(args.model, verify=False).signature)
    return 0


def _recase_triples(args: argparse.Namespace, opts: TraceOptions):  # type: ignore[no-untyped-def]
    """The input as triples, from whichever input flag was given."""
    from moses_recaser.moses.trace import read_aligned_bitext
    from moses_recaser.triples import Triple, read_triples

    given = [x for x in (args.trace, args.triples, args.input) if x is not None]
    if len(given) != 1:
        raise RecaserError("give exactly one input: --trace, --triples or --input (see --help)")
    if args.trace is not None:
        return read_trace(args.source, args.trace, args.alignment, opts)
    if args.triples is not None:
        return read_triples(args.triples)
    if args.source is None:
        from moses_recaser.textio import read_lines, split_tokens

        return (Triple(id=i, source=[], target=split_tokens(x)) for i, x in enumerate(read_lines(args.input)))
    if args.align:
        return _aligned_input(args)
    return read_aligned_bitext(args.source, args.input, args.input_alignment)


def _aligned_input(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from moses_recaser.stats.eflomal import align
    from moses_recaser.moses.trace import read_aligned_bitext

    priors = Path(args.model) / "aligner.priors"
    if not priors.is_file():
        raise RecaserError("--align needs a model trained with eflomal alignment (it stores aligner.priors)",
                           str(args.model))
    triples = list(read_aligned_bitext(args.source, args.input))
    links = align([t.source for t in triples], [t.target for t in triples], priors=priors)
    for t, a in zip(triples, links):
        t.links = a
    return triples


def single_threaded_blas() -> None:
    """One BLAS thread, when numpy is not loaded yet. Recasing's matrix products are tiny, and OpenBLAS's
    extra threads spin between calls: measured on 2 cores, they took 1.2 s of CPU from a 1.7 s
    recasing run and kept ``--threads 2`` from scaling. Recasing commands call this first."""
    if "numpy" not in sys.modules:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")


def cmd_recase(args: argparse.Namespace) -> int:
    single_threaded_blas()
    from moses_recaser.model.recaser import Recaser

    opts = _trace_options(args)
    recaser = Recaser(args.model, alignment=args.phrase_features)
    if args.nbest:
        return _recase_nbest(args, opts, recaser)
    triples = _recase_triples(args, opts)
    with atomic_output(args.output) as out:
        if args.explain:
            import json

            for t in triples:
                for row in recaser.explain(t):
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.write("\n")
            return 0
        for t, tokens in zip_recased(triples, recaser, args.threads):
            if t.factors is not None:
                tokens = [w + f for w, f in zip(tokens, t.factors)]
            out.write(" ".join(tokens) + "\n")
    log.info("signature: %s", recaser.signature)
    return 0


_WORKER: dict = {}


def _worker_init() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and cleans up
    # the parent ends the pool with SIGTERM: die at once (the inherited handler raises an exception
    # wherever the worker happens to be, which can leave it blocked on the pool's queue lock)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _worker_recase(chunk):  # type: ignore[no-untyped-def]
    return _WORKER["recaser"].recase_batch(chunk)


def zip_recased(items, recaser, threads: int = 1, triple_of=None):  # type: ignore[no-untyped-def]
    """Pairs (item, recased tokens), streaming in fixed chunks; ``triple_of`` picks the triple out of an
    item. ``threads`` > 1 uses worker processes forked after the model is loaded (they share its pages
    copy-on-write instead of loading it again), with at most 2 chunks per worker in flight (bounded
    memory); the chunks are the same, so the output is too."""
    from moses_recaser.model.recaser import chunks

    pick = triple_of or (lambda x: x)
    if threads <= 1:
        for chunk in chunks(items):
            yield from zip(chunk, recaser.recase_batch([pick(x) for x in chunk]))
        return
    import multiprocessing as mp
    from collections import deque

    ctx = mp.get_context("fork")
    _WORKER["recaser"] = recaser
    with ctx.Pool(threads, initializer=_worker_init) as pool:
        pending: deque = deque()
        for chunk in chunks(items):
            pending.append((chunk, pool.apply_async(_worker_recase, ([pick(x) for x in chunk],))))
            if len(pending) >= 2 * threads:
                done, res = pending.popleft()
                yield from zip(done, res.get())
        while pending:
            done, res = pending.popleft()
            yield from zip(done, res.get())


def _recase_nbest(args: argparse.Namespace, opts: TraceOptions, recaser) -> int:  # type: ignore[no-untyped-def]
    from moses_recaser.moses.trace import iter_nbest

    if args.trace is None:
        raise RecaserError("--nbest goes with --trace (the n-best list)")
    records = iter_nbest(args.source, args.trace, opts)
    with atomic_output(args.output) as out:
        for (_, line, spans), tokens in zip_recased(records, recaser, args.threads, triple_of=lambda r: r[0]):
            pieces, pos = [], 0
            for (a, b), w in zip(spans, tokens):
                pieces += [line[pos:a], w]
                pos = b
            out.write("".join(pieces) + line[pos:] + "\n")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from moses_recaser.harness.metrics import case_scores
    from moses_recaser.textio import read_lines, split_tokens

    hyps = [split_tokens(x) for x in read_lines(args.hyp)]
    refs = [split_tokens(x) for x in read_lines(args.ref)]
    if len(hyps) != len(refs):
        raise RecaserError(f"line-count mismatch: {len(hyps)} output lines, {len(refs)} reference lines", args.hyp)
    scores = case_scores(hyps, refs)
    print(f"precision {100 * scores.precision:.2f}  cased-word F1 {100 * scores.f1:.2f}  "
          f"words {scores.words}  errors {scores.words - scores.correct}")
    if args.confusion:
        print(scores.confusion_table())
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    from moses_recaser.harness.config import load_config
    from moses_recaser.harness.experiment import results_markdown, run_experiment

    cfg = load_config(args.config)
    out = Path(args.out or Path("runs") / cfg.name)
    results = run_experiment(cfg, out, args.data_root, args.cache)
    print(results_markdown(results))
    return 0


def cmd_count(args: argparse.Namespace) -> int:
    from moses_recaser.stats.shards import count_shard, parse_shard

    i, n = parse_shard(args.shard)
    with atomic_output(args.output, binary=True) as out:
        count_shard(args.src, args.tgt, args.alignment, i, n, args.lm_order, out)
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from moses_recaser.stats.kneser_ney import estimate, write_arpa
    from moses_recaser.stats.shards import merge_shards
    from moses_recaser.stats.build import StatsSettings, tempdir, version_signature
    from moses_recaser.modeldir import write_model
    from moses_recaser.stats.tables import Tables

    stats, ngrams = merge_shards(args.shards)
    settings = StatsSettings(lm_order=ngrams.order, alignment="file", discount_fallback=args.discount_fallback)
    with tempdir() as work:
        arpa = Path(work) / "lm.arpa"
        with atomic_output(arpa) as out:
            write_arpa(estimate(ngrams, settings.discount_fallback), out)
        write_model(args.model, settings=vars(settings), signature=version_signature(settings),
                    tables=Tables.from_counts(stats), copy_files={"lm.arpa": str(arpa)},
                    extra={"corpus": {"sentences": stats.sentences, "target_tokens": stats.target_tokens}})
    print(version_signature(settings))
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
    p.add_argument("--nbest", action="store_true", help="--trace is an n-best list")
    p.add_argument("-o", "--output", metavar="FILE.jsonl", default="-", help="output (default stdout)")
    add_trace_flags(p)
    p.set_defaults(func=cmd_triples)

    p = sub.add_parser("tokenize", help="Moses tokenization (sacremoses, escaping on; jieba for zh)")
    p.add_argument("-l", "--lang", required=True, help="language code, e.g. en, fr, de, zh")
    p.add_argument("-i", "--input", default="-", help="raw text (default stdin)")
    p.add_argument("-o", "--output", default="-", help="tokenized text (default stdout)")
    p.add_argument("-a", "--aggressive-dash-splits", action="store_true", help="as tokenizer.perl -a")
    p.set_defaults(func=cmd_tokenize)

    p = sub.add_parser("lm", help="estimate an interpolated modified Kneser-Ney LM, as lmplz does")
    p.add_argument("-o", "--order", type=int, required=True, help="n-gram order (lmplz -o)")
    p.add_argument("--text", default="-", help="tokenized corpus, one sentence per line ('-': stdin)")
    p.add_argument("--arpa", required=True, help="output ARPA file ('-': stdout)")
    p.add_argument("--discount-fallback", action="store_true",
                   help="when discounts cannot be estimated (tiny corpus), use 0.5 1 1.5 as lmplz --discount_fallback")
    p.set_defaults(func=cmd_lm)

    p = sub.add_parser("align", help="word-align a tokenized bitext with eflomal and symmetrize")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
    p.add_argument("-o", "--output", required=True, help="Pharaoh i-j alignment file")
    p.add_argument("--symmetrize", default="grow-diag-final-and", choices=SYMMETRIZATIONS)
    p.add_argument("--priors", help="eflomal priors to align with (from --priors-out or eflomal-makepriors)")
    p.add_argument("--priors-out", help="write eflomal priors computed from this alignment")
    p.set_defaults(func=cmd_align)

    p = sub.add_parser("phrase-align", help="naive phrase aligner: word-aligned bitext -> phrase-aligned triples")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
    p.add_argument("--alignment", required=True, help="Pharaoh i-j file")
    p.add_argument("--lengths-trace", help="a Moses -t output to take source phrase lengths from")
    p.add_argument("--lengths-source", help="the input of --lengths-trace")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", default="-", help="triples JSON Lines (default stdout)")
    p.set_defaults(func=cmd_phrase_align)

    p = sub.add_parser("stats", help="tables and cased LM from a cased word-aligned bitext, into a model directory")
    p.add_argument("--src", required=True, help="cased, tokenized source side")
    p.add_argument("--tgt", required=True, help="cased, tokenized target side")
    p.add_argument("--alignment", help="Pharaoh i-j (e.g. EMS model/aligned.grow-diag-final-and); else eflomal")
    p.add_argument("--symmetrize", default="grow-diag-final-and", choices=SYMMETRIZATIONS)
    p.add_argument("--lm", help="an existing KenLM model (ARPA or binary) instead of estimating one")
    p.add_argument("--lm-order", type=int, default=3)
    p.add_argument("--model", required=True, help="output model directory")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("count", help="count one shard of a word-aligned bitext (map step; see 'merge')")
    p.add_argument("--src", required=True)
    p.add_argument("--tgt", required=True)
    p.add_argument("--alignment", required=True)
    p.add_argument("--shard", required=True, metavar="i/N", help="the i-th of N contiguous line blocks")
    p.add_argument("--lm-order", type=int, default=3)
    p.add_argument("-o", "--output", required=True, help="shard count file (.npz)")
    p.set_defaults(func=cmd_count)

    p = sub.add_parser("merge", help="merge shard count files into a model (reduce step; same as 'stats')")
    p.add_argument("shards", nargs="+", help="count files of shards 1..N")
    p.add_argument("--model", required=True, help="output model directory")
    p.add_argument("--discount-fallback", action=argparse.BooleanOptionalAction, default=True,
                   help="lmplz's fallback discounts for tiny corpora (default on, as 'stats')")
    p.set_defaults(func=cmd_merge)

    p = sub.add_parser("train", help="train a bilingual recaser: tables and LM from a bitext, CRF weights on dev")
    p.add_argument("--src", help="training source, cased and tokenized")
    p.add_argument("--tgt", help="training target, cased and tokenized")
    p.add_argument("--alignment", help="training word alignment (Pharaoh); else eflomal aligns")
    p.add_argument("--stats", metavar="DIR",
                   help="tables and LM from a statistics model ('stats', or 'merge' of shard counts) instead of "
                        "--src/--tgt")
    p.add_argument("--dev-src", required=True)
    p.add_argument("--dev-tgt", required=True, help="cased dev reference")
    p.add_argument("--dev-alignment", help="dev word alignment; else aligned with the training data")
    p.add_argument("--lm", help="an existing KenLM model (ARPA or binary) instead of estimating one")
    p.add_argument("--mono", action="append", metavar="FILE",
                   help="cased, tokenized target-language text without a source, for the LM and the case "
                        "prior (repeatable; e.g. the LM data of the Moses system)")
    p.add_argument("--lm-order", type=int, default=3)
    p.add_argument("--symmetrize", default="grow-diag-final-and", choices=SYMMETRIZATIONS)
    p.add_argument("--features", default="full", choices=["paper", "full"],
                   help="paper: the paper's features; full: plus source-copy, unseen-form and headline features")
    p.add_argument("--phrase-features", default="phrase", choices=["phrase", "links"],
                   help="align a word to its whole source phrase (paper) or to its linked words")
    p.add_argument("--sigma", type=float, default=0.5, help="Gaussian prior (eq. 5); the paper used 0.5")
    p.add_argument("--sigma-grid", type=lambda x: [float(v) for v in x.split(",")], metavar="S1,S2,...",
                   help="pick sigma from these by 2-fold cross-validation on dev")
    p.add_argument("--max-iter", type=int, default=200)
    p.add_argument("--max-candidates", type=int, default=5, help="cap on GEN per word")
    p.add_argument("--heldout", type=int, default=0, metavar="N",
                   help="also fit weights on N held-out training sentences (features from the other folds)")
    p.add_argument("--lengths-trace", help="a Moses -t output whose source phrase lengths the NPA copies")
    p.add_argument("--lengths-source", help="the input of --lengths-trace")
    p.add_argument("--seed", type=int, default=0, help="naive phrase aligner seed")
    p.add_argument("--model", required=True, help="output model directory")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("recase", help="recase lowercased MT output")
    p.add_argument("--model", required=True)
    p.add_argument("--source", help="cased, tokenized source (as the decoder saw it); without it: monolingual")
    p.add_argument("--trace", help="decoder output (plain, -t, -tt, alignment info), '-' for stdin")
    p.add_argument("--alignment", help="-alignment-output-file of the decoder, with --trace")
    p.add_argument("--nbest", action="store_true", help="--trace is an n-best list: recase it in place")
    p.add_argument("--triples", help="(F, e, A) JSON Lines")
    p.add_argument("--input", help="lowercased tokenized text ('-' for stdin)")
    p.add_argument("--input-alignment", help="Pharaoh source-target alignment of --input to --source")
    p.add_argument("--align", action="store_true", help="align --input to --source with the model's eflomal priors")
    p.add_argument("--phrase-features", choices=["phrase", "links"], help="override the model's choice")
    p.add_argument("--explain", action="store_true", help="per word: chosen form, runner-up, feature contributions")
    p.add_argument("--threads", type=int, default=1, metavar="N",
                   help="worker processes (output is byte-identical to --threads 1)")
    p.add_argument("-o", "--output", default="-")
    add_trace_flags(p)
    p.set_defaults(func=cmd_recase)

    p = sub.add_parser("eval", help="capitalization precision and cased-word F1 of a recased file")
    p.add_argument("--hyp", required=True, help="recased output, tokenized")
    p.add_argument("--ref", required=True, help="cased reference, tokenized the same way")
    p.add_argument("--confusion", action="store_true", help="print the per-tag confusion table")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("experiment", help="run a YAML experiment: precision table, learning curve")
    p.add_argument("config", help="configs/NAME.yaml")
    p.add_argument("--out", help="output directory (default runs/NAME)")
    p.add_argument("--data-root", help="corpora root (default: the config's, else MOSES_RECASER_DATA, else the shared corpora beside the project)")
    p.add_argument("--cache", help="stage cache (default runs/cache or MOSES_RECASER_CACHE)")
    p.set_defaults(func=cmd_experiment)
    return parser


def _setup_logging(args: argparse.Namespace) -> None:
    level = logging.WARNING if args.quiet else (logging.DEBUG if args.verbose else logging.INFO)
    logging.basicConfig(level=level, format=f"{PROG}: %(message)s", stream=sys.stderr)


def run(argv: Sequence[str] | None, parser_factory: Callable[[], argparse.ArgumentParser], prog: str) -> int:
    """Parse, dispatch and turn the package's errors into one line on stderr and exit code 2."""
    parser = parser_factory()
    args = parser.parse_args(argv)
    _setup_logging(args)
    # SIGTERM behaves like Ctrl-C, so atomic outputs are cleaned up the same way.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        return int(args.func(args) or 0)
    except RecaserError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; no output was written", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (e.g. `| head`); not an error of ours
        sys.stderr.close()
        return 0


def exit_now(code: int) -> NoReturn:
    """End a command-line process without tearing its objects down one by one (a loaded model is
    millions of them: 0.1 s of a 1 s recasing run): flush the streams and leave. Outputs are complete
    and renamed into place before this; pools and threads are joined by their ``with`` blocks."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed, or the reader went away
            pass
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    code = run(argv, build_parser, PROG)
    if argv is None:  # the console command, a process of its own (not a call from Python)
        exit_now(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
