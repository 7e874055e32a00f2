"""A plain word-aligned bitext: source and target lines, and optionally a Pharaoh alignment file (e.g. EMS
``corpus`` files with ``model/aligned.grow-diag-final-and``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from moses_recaser.core.triples import Triple
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import LineReader, check_length, split_tokens, zip_readers
from moses_recaser.moses.pharaoh import parse_links


def read_aligned_bitext(source: str, target: str, alignment: str | None = None) -> Iterator[Triple]:
    """One triple per line; errors name the file and line."""
    readers = [LineReader(source), LineReader(target)]
    if alignment is not None:
        readers.append(LineReader(alignment))
    for ident, row in enumerate(zip_readers(*readers)):
        yield triple_of_lines(ident, row, [r.name for r in readers], readers[-1].lineno)


def read_monolingual(path: str) -> Iterator[Triple]:
    """Tokenized text without a source, one triple per line; a line over the length limit names the file and
    line."""
    reader = LineReader(path)
    for ident, line in enumerate(reader):
        yield monolingual_triple(ident, line, reader.name, reader.lineno)


def monolingual_triple(ident: int, line: str, where: str, lineno: int) -> Triple:
    """The triple of a line without a source; an error names ``where`` and ``lineno``."""
    tokens = split_tokens(line)
    try:
        check_length(tokens)
    except RecaserError as exc:
        raise exc.at(where, lineno) from None
    return Triple(id=ident, source=[], target=tokens)


def triple_of_lines(ident: int, lines: Sequence[str], files: Sequence[str], lineno: int) -> Triple:
    """The triple of a line of each file (source, target, and alignment if given); an error names ``lineno`` and
    the file of a line over the length limit, else the last file."""
    sides = [split_tokens(lines[0]), split_tokens(lines[1])]
    for tokens, name in zip(sides, files):
        try:
            check_length(tokens)
        except RecaserError as exc:
            raise exc.at(name, lineno) from None
    try:
        links = parse_links(lines[2]) if len(lines) > 2 else None
        triple = Triple(id=ident, source=sides[0], target=sides[1], links=links)
        triple.validate()
    except RecaserError as exc:
        raise exc.at(files[-1], lineno) from None
    return triple
