"""Command line: ``moses-recaser SUBCOMMAND ...``; flags map onto library calls, nothing more."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Callable, Sequence

from . import __version__
from .errors import RecaserError
from .moses import TraceOptions, read_aligned_bitext, read_nbest, read_trace
from .textio import atomic_output
from .triples import write_triples

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


def main(argv: Sequence[str] | None = None) -> int:
    return run(argv, build_parser, PROG)


if __name__ == "__main__":
    sys.exit(main())
