"""A plain word-aligned bitext: source and target lines, and optionally a Pharaoh alignment file (e.g. EMS
``corpus`` files with ``model/aligned.grow-diag-final-and``)."""

from __future__ import annotations

from collections.abc import Iterator

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
        where = readers[-1]
        try:
            links = parse_links(row[2]) if alignment is not None else None
            triple = Triple(id=ident, source=split_tokens(row[0]), target=split_tokens(row[1]), links=links)
            triple.validate()
        except RecaserError as exc:
            raise exc.at(where.name, where.lineno) from None
        yield triple
