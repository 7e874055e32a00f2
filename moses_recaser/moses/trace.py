"""Readers for Moses decoder output: 1-best traces (-t, -tt, -print-alignment-info), n-best lists,
-alignment-output-file files, and the decoder's view of the input.

Each pattern below names the Moses function that prints (or reads) what it matches; see
``FORMATS.md`` in the moses-traces data for the facts they rest on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from moses_recaser.stats.symal import parse_links
from moses_recaser.errors import RecaserError
from moses_recaser.textio import LineReader, split_tokens, zip_readers
from moses_recaser.triples import Link, Phrase, Triple, check_links

# Manager::OutputPassthroughInformation: the input's passthrough tag, printed before the first word.
PASSTHROUGH = re.compile(r"<passthrough\b[^>]*>")
# Manager::OutputBest with -tt and KenLM: "|lm=(n:logp[:unk],...)| " leads the line;
# on an empty output only "|lm=(" is printed (never closed).
LM_PREFIX = re.compile(r"\|lm=\(([^)]*)\)\|(?: |$)")
LM_UNCLOSED = "|lm=("
# Hypothesis::OutputSurface: -t writes "|s-e| " after each phrase with a non-empty target;
# -tt writes "|s-e,wa=<s-t pairs, space separated>,total=<score>,<Name= v ...>| ".
# The -tt marker contains spaces, so the line is scanned with a regex, not split.
# (EMS analysis.perl reads -t with /([^|]+) \|([0-9]+)\-([0-9]+)\|\s*(.*)$/.)
_SCAN = re.compile(
    r"[ \t]*(?:(?P<marker>\|(?P<s>[0-9]+)-(?P<e>[0-9]+)(?:,(?P<extra>[^|]*))?\|)(?=[ \t]|$)|(?P<word>[^ \t]+))"
)
# A token that starts like a marker but is not one: a cut-short or garbled marker.
_MARKER_LIKE = re.compile(r"\|[0-9]+(?:-|,|$)")
_TT_WA = re.compile(r"wa=([0-9\- ]*),")
# -print-alignment-info: " ||| " then sentence-level source-target pairs.
_ALIGN_SEP = re.compile(r"(?:^|[ \t])\|\|\|(?:[ \t]|$)")
# Manager::OutputNBest field separator; the hypothesis keeps its trailing space before " |||".
_NBEST_SEP = " ||| "
_ID = re.compile(r"[0-9]+")
# -include-segmentation-in-n-best: "s[-s']=t[-t']" per phrase, target order.
_SEGMENT = re.compile(r"([0-9]+)(?:-([0-9]+))?=([0-9]+)(?:-([0-9]+))?")
# Input side (XmlInput::ProcessAndStripXMLTags): markup is stripped before positions are counted.
_XML_TAG = re.compile(r"</?[A-Za-z_][^<>]*>")


@dataclass
class TraceOptions:
    """How the decoder was run, as far as the output format depends on it."""

    unknown_prefix: str | None = None  # -mark-unknown prefix (Moses' default is "UNK"); None: off
    unknown_suffix: str = ""  # -unknown-word-suffix
    factor_delimiter: str = "|"  # -output-factor-delimiter; "" turns factor splitting off
    xml_input: bool = False  # the input had XML markup (-xml-input inclusive/exclusive/ignore)


@dataclass
class TraceLine:
    """One decoder output line, parsed."""

    tokens: list[str]  # factor 0 of each output word, unknown-word marks removed
    phrases: list[Phrase] = field(default_factory=list)
    links: list[Link] | None = None
    unknown: list[int] = field(default_factory=list)
    factors: list[str] | None = None  # extra factors per token ("" where none)
    passthrough: str | None = None
    lm: str | None = None  # the -tt "|lm=(...)|" content
    # character spans of each token's factor-0 text (after any unknown prefix) in the parsed
    # string, so a writer can replace words in place and keep everything else byte for byte
    spans: list[tuple[int, int]] = field(default_factory=list)


def _split_word(
    word: str, start: int, opts: TraceOptions
) -> tuple[str, str, bool, tuple[int, int]]:
    """Split an output word into (factor 0, extra factors, is_unknown, span of factor 0)."""
    extra = ""
    surface = word
    if opts.factor_delimiter and opts.factor_delimiter in word[1:]:
        cut = word.index(opts.factor_delimiter, 1)  # a leading delimiter is part of the word
        surface, extra = word[:cut], word[cut:]
    unknown = False
    offset = 0
    pre, suf = opts.unknown_prefix, opts.unknown_suffix
    if pre is not None and surface.startswith(pre) and surface.endswith(suf) and len(surface) > len(pre) + len(suf):
        surface = surface[len(pre) : len(surface) - len(suf)]
        offset = len(pre)
        unknown = True
    return surface, extra, unknown, (start + offset, start + offset + len(surface))


def parse_surface(text: str, opts: TraceOptions, base: int = 0) -> TraceLine:
    """Parse the surface part of an output line: words and optional -t/-tt markers.

    ``base`` is added to the character spans (the text's offset in the full line).
    """
    tokens: list[str] = []
    extras: list[str] = []
    unknown: list[int] = []
    spans: list[tuple[int, int]] = []
    phrases: list[Phrase] = []
    tt_links: list[Link] = []
    has_tt_wa = False
    phrase_start = 0
    pos = 0
    while pos < len(text):
        m = _SCAN.match(text, pos)
        if m is None:  # only trailing blanks are left
            break
        pos = m.end()
        if m.group("marker") is not None:
            s, e = int(m.group("s")), int(m.group("e"))
            if e < s:
                raise RecaserError(f"malformed segmentation marker {m.group('marker')!r}: end before start")
            if len(tokens) == phrase_start:
                raise RecaserError(f"segmentation marker {m.group('marker')!r} has no target words before it")
            extra = m.group("extra")
            if extra is not None:
                wa = _TT_WA.match(extra)
                if wa is not None:
                    has_tt_wa = True
                    for i, j in parse_links(wa.group(1)):
                        tt_links.append((s + i, phrase_start + j))
            phrases.append((s, e, phrase_start, len(tokens) - 1))
            phrase_start = len(tokens)
            continue
        word = m.group("word")
        if word is None:
            break
        if _MARKER_LIKE.match(word):
            raise RecaserError(f"malformed or cut-short segmentation marker starting {word[:40]!r}")
        surface, extra, is_unknown, span = _split_word(word, base + m.start("word"), opts)
        if is_unknown:
            unknown.append(len(tokens))
        tokens.append(surface)
        extras.append(extra)
        spans.append(span)
    if phrases and phrase_start != len(tokens):
        raise RecaserError(
            f"target tokens not covered in order: tokens {phrase_start}-{len(tokens) - 1} follow the last "
            "segmentation marker"
        )
    return TraceLine(
        tokens=tokens,
        phrases=phrases,
        links=tt_links if has_tt_wa else None,
        unknown=unknown,
        factors=extras if any(extras) else None,
        spans=spans,
    )


def parse_trace_line(line: str, opts: TraceOptions | None = None) -> TraceLine:
    """Parse one 1-best output line (plain, -t, -tt, with or without -print-alignment-info)."""
    opts = opts or TraceOptions()
    pos = 0
    passthrough = None
    m = PASSTHROUGH.match(line)
    if m is not None:
        passthrough = m.group(0)
        pos = m.end()
    lm = None
    if line.startswith("|lm=", pos):
        m = LM_PREFIX.match(line, pos)
        if m is not None:
            lm = m.group(1)
            pos = m.end()
        elif line.startswith(LM_UNCLOSED, pos) and not line[pos + len(LM_UNCLOSED) :].strip(" \t"):
            # -tt on an empty output: Moses prints "|lm=(" and nothing else
            return TraceLine(tokens=[], passthrough=passthrough, lm="")
        else:
            raise RecaserError("malformed or cut-short -tt '|lm=(...)|' prefix")
    surface_end = len(line)
    links = None
    m = _ALIGN_SEP.search(line, pos)
    if m is not None:
        surface_end = m.start()
        links = parse_links(line[m.end() :])
    parsed = parse_surface(line[pos:surface_end], opts, base=pos)
    parsed.passthrough = passthrough
    parsed.lm = lm
    if links is not None:
        parsed.links = links
    return parsed


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
    # segmentation entries contain '=', alignment pairs do not.
    for extra in fields[2:4]:
        text = extra.strip(" \t")
        if not text:
            continue
        if "=" in text:
            hyp.phrases = parse_segmentation(text)
        else:
            hyp.links = parse_links(text)
    return NBestEntry(id=int(id_text), hypothesis=hyp, raw_hypothesis=hyp_raw, fields=fields)


def source_tokens(line: str, opts: TraceOptions | None = None) -> list[str]:
    """The source tokens as the decoder indexes them (markup stripped, factor 0 kept)."""
    opts = opts or TraceOptions()
    if opts.xml_input:
        line = _XML_TAG.sub(" ", line)
    tokens = split_tokens(line)
    d = opts.factor_delimiter
    if d:
        tokens = [t[: t.index(d, 1)] if d in t[1:] else t for t in tokens]
    return tokens


def _make_triple(ident: int, source: list[str], parsed: TraceLine, links: list[Link] | None) -> Triple:
    triple = Triple(
        id=ident,
        source=source,
        target=parsed.tokens,
        phrases=parsed.phrases,
        links=links if links is not None else parsed.links,
        unknown=parsed.unknown,
        factors=parsed.factors,
        passthrough=parsed.passthrough,
    )
    triple.validate()
    return triple


def read_trace(
    source: str | None,
    trace: str,
    alignment: str | None = None,
    opts: TraceOptions | None = None,
) -> Iterator[Triple]:
    """Stream triples from a cased source file and a 1-best decoder output (and alignment file).

    Errors name the trace file and line (or the file that ends early).
    """
    opts = opts or TraceOptions()
    trace_reader = LineReader(trace, require_newline=True)
    readers = [trace_reader]
    if source is not None:
        readers.append(LineReader(source))
    if alignment is not None:
        readers.append(LineReader(alignment, require_newline=True))
    for ident, row in enumerate(zip_readers(*readers)):
        try:
            parsed = parse_trace_line(row[0], opts)
            src = source_tokens(row[1], opts) if source is not None else []
        except RecaserError as exc:
            raise exc.at(trace_reader.name, trace_reader.lineno) from None
        if source is None:  # monolingual: spans cannot be checked, nor used
            parsed.phrases, parsed.links = [], None
        links = None
        if alignment is not None and source is not None:
            try:
                links = parse_links(row[-1])
                check_links(links, len(src), len(parsed.tokens))
            except RecaserError as exc:
                raise exc.at(readers[-1].name, readers[-1].lineno) from None
        try:
            triple = _make_triple(ident, src, parsed, links)
        except RecaserError as exc:
            raise exc.at(trace_reader.name, trace_reader.lineno) from None
        yield triple


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
            triple = _make_triple(entry.id, src, entry.hypothesis, None)
        except RecaserError as exc:
            raise exc.at(reader.name, reader.lineno) from None
        triple.rank = rank
        triple.nbest = entry.fields
        rank += 1
        yield triple, line, entry.hypothesis.spans
    if src_reader is not None:
        src_reader.close()


def read_aligned_bitext(source: str, target: str, alignment: str | None = None) -> Iterator[Triple]:
    """Plain word-aligned data (e.g. EMS ``corpus`` files with ``model/aligned.grow-diag-final-and``)."""
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
