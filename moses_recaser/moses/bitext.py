"""A plain word-aligned bitext: source and target lines, and optionally a Pharaoh alignment file (e.g. EMS
``corpus`` files with ``model/aligned.grow-diag-final-and``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from moses_recaser.errors import RecaserError
from moses_recaser.moses.pharaoh import parse_links
from moses_recaser.textio import LineReader, split_tokens, zip_readers
from moses_recaser.triples import Triple


def read_aligned_bitext(source: str, target: str, alignment: str | None = None) -> Iterator[Triple]:
    """One triple per line; errors name the file and line."""
    readers = [LineReader(source), LineReader(target)]
    if alignment is not None:
        readers.append(LineReader(alignment))
    for ident, row in enumerate(zip_readers(*readers)):
        yield triple_of_lines(ident, row, [r.name for r in readers], readers[-1].lineno)


def triple_of_lines(ident: int, lines: Sequence[str], files: Sequence[str], lineno: int) -> Triple:
    """The triple of a line of each file (source, target, and alignment if given); an error names the last
    file and ``lineno``."""
    try:
        links = parse_links(lines[2]) if len(lines) > 2 else None
        triple = Triple(id=ident, source=split_tokens(lines[0]), target=split_tokens(lines[1]), links=links)
        triple.validate()
    except RecaserError as exc:
        raise exc.at(files[-1], lineno) from None
    return triple
