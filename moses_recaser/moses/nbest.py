"""Moses n-best lists (``-n-best-list``): ``id ||| hypothesis  ||| features ||| total`` and the optional
segmentation (``-include-segmentation-in-n-best``) and word-alignment fields."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from moses_recaser.core.triples import Phrase, Triple
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import LineReader, split_tokens
from moses_recaser.moses.pharaoh import parse_links
from moses_recaser.moses.trace import TraceLine, TraceOptions, parse_surface, source_tokens

# Manager::OutputNBest field separator; the hypothesis keeps its trailing space before " |||".
_NBEST_SEP = " ||| "
_EXTRA_SEP = re.compile(r"(?<![^ \t])\|\|\|(?![^ \t])")  # a field separator whatever the spaces around it
_ID = re.compile(r"[0-9]+")
# -include-segmentation-in-n-best: "s[-s']=t[-t']" per phrase, target order.
_SEGMENT = re.compile(r"([0-9]+)(?:-([0-9]+))?=([0-9]+)(?:-([0-9]+))?")


@dataclass
class NBestEntry:
    """One n-best line: translation id, parsed hypothesis and the other fields untouched."""

    id: int
    hypothesis: TraceLine
    raw_hypothesis: str
    fields: list[str]  # every field after the hypothesis, as printed (features, total, ...)


def parse_segmentation(text: str) -> list[Phrase]:
    phrases: list[Phrase] = []
    for tok in split_tokens(text):
        m = _SEGMENT.fullmatch(tok)
        if m is None:
            raise RecaserError(f"malformed segmentation entry {tok!r} (expected s[-s']=t[-t'])")
        s0 = int(m.group(1))
        s1 = int(m.group(2)) if m.group(2) is not None else s0
        t0 = int(m.group(3))
        t1 = int(m.group(4)) if m.group(4) is not None else t0
        if s1 < s0 or t1 < t0:
            raise RecaserError(f"malformed segmentation entry {tok!r}: end before start")
        phrases.append((s0, s1, t0, t1))
    return phrases


def parse_nbest_line(line: str, opts: TraceOptions | None = None) -> NBestEntry:
    """Parse ``id ||| hyp  ||| features ||| total[ ||| segmentation][ ||| alignment]``."""
    opts = opts or TraceOptions()
    parts = line.split(_NBEST_SEP)
    if len(parts) < 3:
        raise RecaserError("not an n-best line: expected 'id ||| hypothesis ||| features ...'")
    id_text = parts[0].strip(" \t")
    if not _ID.fullmatch(id_text):
        raise RecaserError(f"n-best translation id {id_text!r} is not a number")
    hyp_raw = parts[1]
    base = len(parts[0]) + len(_NBEST_SEP)
    hyp = parse_surface(hyp_raw, opts, base=base)
    fields = parts[2:]
    # Fields 4 and 5 (after the total score) are the segmentation and/or the word alignment;
    # segmentation entries contain '=', alignment pairs do not. An empty one leaves "||| |||" (one space
    # between: an empty hypothesis's), which the split above does not cut.
    for extra in _EXTRA_SEP.split(_NBEST_SEP.join(fields[2:]))[:2] if len(fields) > 2 else ():
        text = extra.strip(" \t")
        if not text:
            continue
        if "=" in text:
            hyp.phrases = parse_segmentation(text)
        else:
            hyp.links = parse_links(text)
    return NBestEntry(id=int(id_text), hypothesis=hyp, raw_hypothesis=hyp_raw, fields=fields)


def read_nbest(source: str | None, nbest: str, opts: TraceOptions | None = None) -> Iterator[Triple]:
    """Stream triples from an n-best list: one per hypothesis, with its rank and untouched fields."""
    for triple, _, _ in iter_nbest(source, nbest, opts):
        yield triple


def iter_nbest(
    source: str | None, nbest: str, opts: TraceOptions | None = None
) -> Iterator[tuple[Triple, str, list[tuple[int, int]]]]:
    """Like read_nbest, also giving each raw line and its words' character spans (to rewrite in place)."""
    opts = opts or TraceOptions()
    src_reader = LineReader(source) if source is not None else None
    src_iter = iter(src_reader) if src_reader is not None else None
    reader = LineReader(nbest, require_newline=True)
    current = -1
    src: list[str] = []
    rank = 0
    for line in reader:
        try:
            entry = parse_nbest_line(line, opts)
        except RecaserError as exc:
            raise exc.at(reader.name, reader.lineno) from None
        if entry.id < current:
            raise reader.error(f"n-best ids go backwards ({entry.id} after {current})")
        if entry.id > current:
            while current < entry.id:
                if src_iter is None:
                    current = entry.id
                    break
                try:
                    src = source_tokens(next(src_iter), opts)
                except StopIteration:
                    raise reader.error(
                        f"line-count mismatch: n-best id {entry.id} but {src_reader.name} has only "  # type: ignore[union-attr]
                        f"{src_reader.lineno} lines"  # type: ignore[union-attr]
                    ) from None
                current += 1
            rank = 0
        if src_iter is None:
            entry.hypothesis.phrases, entry.hypothesis.links = [], None
        try:
            triple = entry.hypothesis.triple(entry.id, src)
        except RecaserError as exc:
            raise exc.at(reader.name, reader.lineno) from None
        triple.rank = rank
        triple.nbest = entry.fields
        rank += 1
        yield triple, line, entry.hypothesis.spans
    if src_reader is not None:
        src_reader.close()
