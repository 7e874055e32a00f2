"""What a library caller passes to ``Recaser``, checked once, as it is read: the Python face's boundary.

Files are the io layer's (``io.lines``); these are lines and triples given as objects (a list, a generator, an
open file). A wrong type, a line break inside a line, a NUL or a lone surrogate is a ``RecaserError`` naming the
stream (``hyps``, ``sources``, ``alignments``, ``triples``) and its line, before the method sees it.
"""

from __future__ import annotations

import dataclasses
import io
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import zip_longest
from typing import Any, Union, cast

from moses_recaser.core.triples import Link, Triple, triple_from_json
from moses_recaser.io.errors import RecaserError
from moses_recaser.moses.formats import Line, Record
from moses_recaser.moses.pharaoh import format_links
from moses_recaser.moses.trace import TraceOptions

# a word alignment: a Pharaoh line ("0-0 1-2") or (source, target) index pairs
Alignment = Union[str, Sequence[tuple[int, int]]]
STREAMS = ("hyps", "sources", "alignments")


def line_records(
    read_line: Callable[[int, Line], Record],
    options: TraceOptions,
    hyps: Iterable[str],
    sources: Iterable[str] | None,
    alignments: Iterable[Alignment] | None,
) -> Iterator[Record]:
    """The records of parallel streams of lines, each read by ``read_line`` (a line format's, ``FORMATS``)."""
    if alignments is not None and sources is None:
        raise RecaserError("an alignment links the hypothesis to its source: give the source too")
    for name, stream in zip(STREAMS, (hyps, sources, alignments)):
        # a str or bytes is an iterable of characters, each of which would be recased as a line
        if isinstance(stream, (str, bytes, bytearray)) or not (
            isinstance(stream, Iterable) or (stream is None and name != "hyps")
        ):
            raise RecaserError(f"{name} must be an iterable of lines (a list, a file), not {type(stream).__name__}")
    files = [isinstance(x, io.TextIOBase) for x in (hyps, sources)]  # (their first line's BOM dropped)
    ended = object()  # (not None: a None in a stream is a line of the wrong type, said so below)
    given_streams = 1 + len([x for x in (sources, alignments) if x is not None])  # alignments only with sources

    def records() -> Iterator[Record]:  # (the checks above at the call, the lines as they are read)
        rows = zip_longest(
            decoded_lines(hyps, "hyps"),
            decoded_lines(sources or (), "sources"),
            decoded_lines(alignments or (), "alignments"),
            fillvalue=ended,
        )
        for k, (hyp, src, links) in enumerate(rows):
            if any(v is ended for v in (hyp, src, links)[:given_streams]):
                # as the command line says it of files, at the longer stream's line
                given = list(zip(STREAMS, (hyp, src, links)))[:given_streams]
                short = [n for n, v in given if v is ended]
                longer = next(n for n, v in given if v is not ended)
                raise RecaserError(
                    f"line-count mismatch: {short[0]} has only {k} lines, {longer} has more", longer, k + 1
                )
            line = Line(
                one_line(hyp, "hyps", k, files[0]),
                None if sources is None else one_line(src, "sources", k, files[1]),
                None if alignments is None else pharaoh_line(cast(Alignment, links), k),  # (type checked there)
                options,
                STREAMS,
                k + 1,
            )
            yield read_line(k, line)

    return records()


def validated_triples(triples: Iterable[Triple]) -> Iterator[Triple]:
    """The triples, each checked as it passes as a line of a JSON Lines file is (``triple_from_json``: tokens,
    spans, links, unknown positions): a bad one is a RecaserError at ``triples:N``, not an IndexError deep in the
    lattice or a UnicodeEncodeError at the output."""
    for k, t in enumerate(items_of(triples, Triple, "triples")):
        try:
            # its tokens, phrases and unknown positions; the links apart, as they are (a copy of a dense line's
            # links as JSON would take more memory than recasing it)
            triple_from_json(dataclasses.replace(t, links=None).to_json())
            if t.links is not None:
                if not all(isinstance(a, (tuple, list)) and len(a) == 2 and all(map(_is_int, a)) for a in t.links):
                    raise TypeError
                t.validate()
        except (TypeError, ValueError):  # a field of another type (a link "0-1", a phrase 3)
            raise RecaserError(
                f"a Triple's fields are lists of str and of int tuples: {t!r}"[:300], "triples", k + 1
            ) from None
        except RecaserError as exc:
            raise exc.at("triples", k + 1) from None
        yield t


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def items_of(items: object, kind: type, name: str) -> Iterator[Any]:
    """The items of an iterable, each a ``kind``: anything else is a RecaserError at ``name:N``."""
    if isinstance(items, (str, bytes, bytearray)) or not isinstance(items, Iterable):
        raise RecaserError(f"{name} must be an iterable (a list, a generator), not {type(items).__name__}")
    for k, item in enumerate(items):
        if not isinstance(item, kind):
            raise RecaserError(f"an item must be a {kind.__name__}, not {type(item).__name__}", name, k + 1)
        yield item


def decoded_lines(stream: Iterable[Any], name: str) -> Iterator[Any]:
    """The stream's lines; a text file object that fails to decode its bytes (invalid UTF-8) is a RecaserError
    naming the stream (it decodes ahead in blocks, so the line is known only roughly: ``read_lines`` tells it).
    Any other iterable's exceptions are its own, and pass as they are."""
    if not isinstance(stream, io.TextIOBase):
        yield from stream
        return
    k = 0
    it = iter(stream)
    while True:
        try:
            line = next(it)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise RecaserError(
                f"cannot be decoded after its line {k} ({exc.encoding}: {exc.reason}); read_lines(PATH) names the line",
                name,
            ) from None
        k += 1
        yield line


def one_line(text: object, stream: str, k: int, bom: bool) -> str:
    """A line as given, less one trailing newline, and with ``bom`` on a stream's first line a UTF-8 byte-order
    mark; a newline inside it is an error (it would change the output's line structure). A carriage return inside
    it stays, as the command line keeps it."""
    if not isinstance(text, str):
        raise RecaserError(f"a line must be a str, got {type(text).__name__}", stream, k + 1)
    text = text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
    if bom and k == 0 and text.startswith("\ufeff"):
        text = text[1:]
    if "\n" in text:
        raise RecaserError("a line break inside the line", stream, k + 1)
    if "\0" in text:  # as the command line refuses it in a file: not text
        raise RecaserError(f"a NUL at character {text.index(chr(0))} of the line: not text", stream, k + 1)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate: no file could hold it, no output could write it
            raise RecaserError(f"character {exc.start} of the line is not text ({exc.reason})", stream, k + 1) from None
    return text


def pharaoh_line(links: Alignment, k: int) -> str:
    """A Pharaoh line of ``links`` (already one, or index pairs)."""
    if isinstance(links, str):
        return one_line(links, "alignments", k, True)  # (a U+FEFF can only be a byte-order mark there)
    try:
        pairs: list[Link] = [(operator.index(i), operator.index(j)) for i, j in links]
    except (TypeError, ValueError):
        raise RecaserError("an alignment is a Pharaoh string or (source, target) index pairs", "alignments", k + 1)
    return format_links(pairs)
