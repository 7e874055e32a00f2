"""Moses 1-best decoder output: plain, ``-t``, ``-tt`` and ``-print-alignment-info`` lines, with the
``-alignment-output-file`` file beside them, and the decoder's view of its input (``source_tokens``).

Each pattern below names the Moses function that prints (or reads) what it matches; see
``FORMATS.md`` in the moses-traces data for the facts they rest on.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import takewhile

from moses_recaser.core.triples import Link, Phrase, Triple, check_links
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import LineReader, split_tokens, zip_readers
from moses_recaser.moses.pharaoh import parse_links

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
# Input side (XmlInput::ProcessAndStripXMLTags): markup is stripped before positions are counted.
_XML_TAG = re.compile(r"</?[A-Za-z_][^<>]*>")


@dataclass
class TraceOptions:
    """How the decoder was run, as far as the output format depends on it."""

    unknown_prefix: str | None = None  # -mark-unknown prefix (Moses' default is "UNK"); None: off
    unknown_suffix: str = ""  # -unknown-word-suffix
    factor_delimiter: str = "|"  # -output-factor-delimiter; "" turns factor splitting off
    xml_input: bool = False  # the input had XML markup (-xml-input inclusive/exclusive/ignore)

    def __post_init__(self) -> None:
        """Each field of its type: a library user's wrong value would be taken silently (``xml_input="no"`` is
        true) or fail deep in the reader."""
        for name, value, ok in (
            (
                "unknown_prefix",
                self.unknown_prefix,
                self.unknown_prefix is None or isinstance(self.unknown_prefix, str),
            ),
            ("unknown_suffix", self.unknown_suffix, isinstance(self.unknown_suffix, str)),
            ("factor_delimiter", self.factor_delimiter, isinstance(self.factor_delimiter, str)),
            ("xml_input", self.xml_input, isinstance(self.xml_input, bool)),
        ):
            if not ok:
                kind = (
                    "True or False"
                    if name == "xml_input"
                    else "a string" + (" or None" if name == "unknown_prefix" else "")
                )
                raise RecaserError(f"TraceOptions {name} is {value!r}; it must be {kind}")


# Parameter.cpp's short names of the decoder parameters read below
_SHORT = {"mark-unknown": "mu", "xml-input": "xi", "report-segmentation": "t", "factor-delimiter": "fd"}
_XML_STRIPPED = ("inclusive", "exclusive", "ignore", "constraint")


def decoder_words(settings: str) -> list[str]:
    """The decoder's settings (EMS's ``decoder-settings``) as the shell splits them on the decoder's command line
    (quotes removed), or at whitespace where the shell would refuse them (an unclosed quote)."""
    try:
        return shlex.split(settings)
    except ValueError:
        return settings.split()


def _is_switch(word: str) -> bool:
    """Parameter::isOption: a dash, then anything but a digit ("-1" is a value)."""
    return len(word) > 1 and word[0] == "-" and not word[1].isdigit()


def decoder_setting(words: Sequence[str], name: str) -> list[str] | None:
    """The values of the Moses parameter ``name`` in the decoder's command-line ``words``, as
    Parameter::LoadParam reads them: the words after the first ``-name`` up to the next switch, then those after
    the first short-name switch (``-mu``) written over them one by one; None: not given."""
    values: list[str] | None = None
    for switch in ("-" + name, "-" + _SHORT[name]) if name in _SHORT else ("-" + name,):
        if switch not in words:
            continue
        given = list(takewhile(lambda w: not _is_switch(w), words[words.index(switch) + 1 :]))
        values = given if values is None else given + values[len(given) :]
    return values


def decoder_alignment_file(settings: str) -> str | None:
    """The ``-alignment-output-file`` the decoder's settings name (None: none; the flag without a file is none, as
    the decoder reads it: BookkeepingOptions.cpp writes no alignment then)."""
    values = decoder_setting(decoder_words(settings), "alignment-output-file")
    return values[0] if values else None


def decoder_options(settings: str) -> TraceOptions:
    """What the decoder's settings say of its output's format: ``-mark-unknown`` (with ``-unknown-word-prefix``,
    default "UNK", and ``-unknown-word-suffix``), ``-output-factor-delimiter`` (default ``-factor-delimiter``'s)
    and ``-xml-input``, read as Moses reads them (OOVHandlingOptions.cpp, ReportingOptions.cpp,
    InputOptions.cpp; a switch alone is true, one value is yes/y/true/1 in any case, more leave it off)."""
    words = decoder_words(settings)

    def first(name: str, default: str) -> str:
        values = decoder_setting(words, name)
        return values[0] if values else default

    mark = decoder_setting(words, "mark-unknown")
    marked = mark is not None and (mark == [] or (len(mark) == 1 and mark[0].lower() in ("yes", "y", "true", "1")))
    return TraceOptions(
        unknown_prefix=first("unknown-word-prefix", "UNK") if marked else None,
        unknown_suffix=first("unknown-word-suffix", ""),
        factor_delimiter=first("output-factor-delimiter", first("factor-delimiter", "|")),
        xml_input=first("xml-input", "pass-through") in _XML_STRIPPED,
    )


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

    def triple(self, ident: int, source: list[str], links: list[Link] | None = None) -> Triple:
        """The sentence as a checked triple (``links``: from an alignment file, else the line's own)."""
        triple = Triple(
            id=ident,
            source=source,
            target=self.tokens,
            phrases=self.phrases,
            links=links if links is not None else self.links,
            unknown=self.unknown,
            factors=self.factors,
            passthrough=self.passthrough,
        )
        triple.validate()
        return triple


def _split_word(word: str, start: int, opts: TraceOptions) -> tuple[str, str, bool, tuple[int, int]]:
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
                if wa is None and extra.startswith("wa="):  # links of the phrase that would be dropped unsaid
                    raise RecaserError(f"malformed word links in the -tt marker {m.group('marker')[:60]!r}")
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


def trace_triple(
    ident: int,
    line: str,
    source: str | None,
    alignment: str | None = None,
    opts: TraceOptions | None = None,
    where: tuple[str | None, str | None, str | None] = (None, None, None),
    lineno: int = 0,
) -> Triple:
    """One decoder output line as a checked triple, with its source line (None: monolingual, spans dropped)
    and its ``-alignment-output-file`` line. An error is placed at ``where`` (the names of the trace, the
    source and the alignment) and ``lineno``."""
    opts = opts or TraceOptions()
    try:
        parsed = parse_trace_line(line, opts)
        src = source_tokens(source, opts) if source is not None else []
    except RecaserError as exc:
        raise exc.at(where[0], lineno) from None
    if source is None:  # monolingual: spans cannot be checked, nor used
        parsed.phrases, parsed.links = [], None
    links = None
    if alignment is not None and source is not None:
        try:
            links = parse_links(alignment)
            check_links(links, len(src), len(parsed.tokens))
            if parsed.links is not None and set(links) != set(parsed.links):  # (one would go unread)
                trace = where[0] or "the trace"
                raise RecaserError(
                    f"these word links differ from the trace line's own (-print-alignment-info, in {trace}): the "
                    "two come from other runs; give one of them"
                )
        except RecaserError as exc:
            raise exc.at(where[2], lineno) from None
    try:
        return parsed.triple(ident, src, links)
    except RecaserError as exc:
        raise exc.at(where[0], lineno) from None


def read_trace(
    source: str | None,
    trace: str,
    alignment: str | None = None,
    opts: TraceOptions | None = None,
) -> Iterator[Triple]:
    """Stream triples from a cased source file and a 1-best decoder output (and alignment file).

    Errors name the trace file and line (or the file that ends early).
    """
    readers = [LineReader(trace, require_newline=True)]
    if source is not None:
        readers.append(LineReader(source))
    if alignment is not None:
        readers.append(LineReader(alignment, require_newline=True))
    where = (readers[0].name, readers[1].name if source is not None else None, readers[-1].name)
    for ident, row in enumerate(zip_readers(*readers)):
        yield trace_triple(
            ident,
            row[0],
            row[1] if source is not None else None,
            row[-1] if alignment is not None else None,
            opts,
            where,
            readers[0].lineno,
        )
