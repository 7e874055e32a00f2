"""The inputs moses-recaser reads, by name: one row each in ``FORMATS``.

A format turns its files into records: the triple to recase, and the output line for its recased
words (an n-best line is rewritten in place, every other field kept byte for byte). The command line
offers the names of this registry (``--trace-format``), so a new format is a reader and a row here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from moses_recaser.core.triples import Triple, read_triples
from moses_recaser.moses.bitext import monolingual_triple, read_aligned_bitext, read_monolingual, triple_of_lines
from moses_recaser.moses.nbest import iter_nbest
from moses_recaser.moses.trace import TraceOptions, read_trace, trace_triple


def plain_line(triple: Triple, tokens: list[str]) -> str:
    """The recased words, with the decoder's extra output factors put back."""
    if triple.factors is not None:
        tokens = [w + f for w, f in zip(tokens, triple.factors)]
    return " ".join(tokens)


@dataclass(frozen=True)
class Record:
    """One sentence to recase, and how its recased words are written."""

    triple: Triple
    render: Callable[[Triple, list[str]], str] = plain_line

    def line(self, tokens: list[str]) -> str:
        return self.render(self.triple, tokens)


@dataclass(frozen=True)
class Inputs:
    """The files a format reads: ``path`` (its own file; ``-`` is stdin), the cased source the decoder saw
    (None: recase monolingually) and a Pharaoh alignment of the two (formats that carry none)."""

    path: str
    source: str | None = None
    alignment: str | None = None
    options: TraceOptions = field(default_factory=TraceOptions)


@dataclass(frozen=True)
class Line:
    """One sentence given as strings (the library's ``Recaser.recase``): the hypothesis line, its cased source
    line (None: monolingual) and its Pharaoh alignment line; ``where`` names the three in errors, at
    ``lineno``."""

    hyp: str
    source: str | None = None
    alignment: str | None = None
    options: TraceOptions = field(default_factory=TraceOptions)
    where: tuple[str, str, str] = ("hyp", "source", "alignment")
    lineno: int = 0


@dataclass(frozen=True)
class InputFormat:
    name: str
    description: str
    read: Callable[[Inputs], Iterator[Record]]
    takes_alignment: bool = True  # whether a separate alignment file goes with it
    takes_source: bool = True  # whether a separate source file goes with it
    # the same reading for one sentence given as strings (None: the format is not line by line)
    read_line: Callable[[int, Line], Record] | None = None


def _trace(inp: Inputs) -> Iterator[Record]:
    return (Record(t) for t in read_trace(inp.source, inp.path, inp.alignment, inp.options))


def _nbest(inp: Inputs) -> Iterator[Record]:
    for triple, line, spans in iter_nbest(inp.source, inp.path, inp.options):
        yield Record(triple, _in_place(line, spans))


def _in_place(line: str, spans: list[tuple[int, int]]) -> Callable[[Triple, list[str]], str]:
    """The n-best line with each word's characters (``spans``) replaced by its recased form."""

    def render(_: Triple, tokens: list[str]) -> str:
        pieces, pos = [], 0
        for (a, b), w in zip(spans, tokens):
            pieces += [line[pos:a], w]
            pos = b
        return "".join(pieces) + line[pos:]

    return render


def _jsonl(inp: Inputs) -> Iterator[Record]:
    return (Record(t) for t in read_triples(inp.path))


def _trace_line(ident: int, x: Line) -> Record:
    return Record(trace_triple(ident, x.hyp, x.source, x.alignment, x.options, x.where, x.lineno))


def _text(inp: Inputs) -> Iterator[Record]:
    if inp.source is None:
        return (Record(t) for t in read_monolingual(inp.path))
    return (Record(t) for t in read_aligned_bitext(inp.source, inp.path, inp.alignment))


def _text_line(ident: int, x: Line) -> Record:
    if x.source is None:
        return Record(monolingual_triple(ident, x.hyp, x.where[0], x.lineno))
    lines = [x.source, x.hyp] + ([] if x.alignment is None else [x.alignment])
    files = [x.where[1], x.where[0]] + ([] if x.alignment is None else [x.where[2]])
    return Record(triple_of_lines(ident, lines, files, x.lineno))


FORMATS: dict[str, InputFormat] = {
    f.name: f
    for f in (
        InputFormat(
            "trace",
            "Moses 1-best output: plain, -t, -tt or -print-alignment-info lines "
            "(with -alignment-output-file as the alignment)",
            _trace,
            read_line=_trace_line,
        ),
        InputFormat(
            "nbest",
            "a Moses n-best list, recased in place (its own segmentation or alignment fields)",
            _nbest,
            takes_alignment=False,
        ),
        InputFormat(
            "jsonl", "(F, e, A) triples, one JSON object a line", _jsonl, takes_alignment=False, takes_source=False
        ),
        InputFormat(
            "text",
            "tokenized text, one sentence a line (with a Pharaoh alignment to the source)",
            _text,
            read_line=_text_line,
        ),
    )
}
