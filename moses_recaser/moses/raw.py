"""Raw text in, raw text out: recased Moses tokens projected back onto the line they were cut from.

A raw (detokenized) line is tokenized as the model's training text was (``moses.tokenizer.tokenizer``:
sacremoses' port of tokenizer.perl, escaping on, no aggressive dash splits; a line without capitals as the line
would be in its case, ``caseless_tokenizer``: ``nr. 5`` as ``nr.`` ``5``, ``… werde. er`` as ``werde`` ``.``
``er``); the recaser recases those tokens;
``project`` writes back *the input line* with only the case of its letters changed. Nothing is detokenized:
spaces, quotes, punctuation, ``&``, ``<``, URLs, emoji, tabs and a ``\\r`` stay the input's, byte for byte, and so
do a file's line ends (``\\r\\n`` or ``\\n``, and none after a last line without one) and its byte-order mark
(``read_raw``, ``split_ends``).

What the tokenizer does to characters (sacremoses ``MosesTokenizer.tokenize``, as tokenizer.perl does):

- a run of white space (``\\s+``: tabs and no-break spaces too) is a token boundary, and the ASCII control
  characters (``[\\000-\\037]``) are deleted, inside a token too: both are skipped when a token is looked for;
- ``& | < > ' " [ ]`` are escaped (``&amp; &#124; &lt; &gt; &apos; &quot; &#91; &#93;``, ``&`` first):
  ``unescape`` is its exact inverse;
- anything else it changes (a literal ``DOTDOTMULTI``, its marker for runs of dots, comes back as ``..``) makes
  a token whose characters are not in the line: such a token keeps the input's characters.

A recased token is written back only when it is a recasing of its token (``casing.is_recasing_of``: KELVIN SIGN
and its like keep their form; ``i̇`` may become ``İ``, as in token mode); and the line as a whole must stay a
recasing of the input, which the Greek final-sigma rule can break across a token boundary (``ΟΔΟΣ'Α``): there
the tokens are taken one at a time, each kept only if the line stays one.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Callable, Iterator, Sequence

from moses_recaser.core import casing
from moses_recaser.core.triples import Triple
from moses_recaser.io.lines import LineReader, zip_readers
from moses_recaser.moses.formats import FORMATS, Inputs, Line, Record
from moses_recaser.moses.tokenizer import tokenizer

_ESCAPES = {
    "&amp;": "&",
    "&#124;": "|",
    "&lt;": "<",
    "&gt;": ">",
    "&apos;": "'",
    "&quot;": '"',
    "&#91;": "[",
    "&#93;": "]",
}
_ESCAPED = re.compile("|".join(map(re.escape, _ESCAPES)))
# what the tokenizer drops between tokens: white space, and the control characters it deletes
_BETWEEN = re.compile(r"[\s\x00-\x1f]*")


def _skipped(line: str, i: int) -> int:
    """Where the next token may start from ``i``: past white space and control characters."""
    m = _BETWEEN.match(line, i)
    return m.end() if m else i


def unescape(token: str) -> str:
    """A Moses-escaped token's characters as they were (escaping turns ``&`` first, so every ``&`` of an escaped
    token starts one of the eight entities)."""
    return _ESCAPED.sub(lambda m: _ESCAPES[m.group(0)], token) if "&" in token else token


def _char_positions(line: str, start: int, text: str) -> list[int] | None:
    """The positions of ``text``'s characters in ``line`` from ``start``, control characters between them
    skipped (the tokenizer deleted them); None where it is not there."""
    if line.startswith(text, start):
        return list(range(start, start + len(text)))
    out, i = [], start
    for c in text:
        while i < len(line) and line[i] != c and line[i] < " ":
            i += 1
        if i == len(line) or line[i] != c:
            return None
        out.append(i)
        i += 1
    return out


def locate(line: str, tokens: Sequence[str]) -> list[list[int] | None]:
    """For each (escaped) token of ``line``, the positions of its characters in the line, in order; None for a
    token the tokenizer changed. After such a token, the next is looked for further on."""
    out: list[list[int] | None] = []
    i = 0
    for token in tokens:
        text = unescape(token)
        pos = _char_positions(line, _skipped(line, i), text)
        if pos is None:
            k = line.find(text, i)
            pos = None if k < 0 else list(range(k, k + len(text)))
        out.append(pos)
        if pos:
            i = pos[-1] + 1
    return out


def project(line: str, tokens: Sequence[str], recased: Sequence[str]) -> str:
    """``line`` with the case of each of its ``tokens`` (as ``moses.tokenizer`` cut them) taken from ``recased``,
    and every other character as it is."""
    changes = []
    for pos, token, new in zip(locate(line, tokens), tokens, recased, strict=True):
        if pos is None or new == token:
            continue
        old, new = unescape(token), unescape(new)
        if not casing.is_recasing_of(new, old):
            continue
        if len(new) == len(pos):
            changes.append((pos, list(new)))
        elif pos[-1] - pos[0] == len(pos) - 1:  # 'i̇' as 'İ' changes a length: a span of the line, as it is
            changes.append((pos, [new] + [""] * (len(pos) - 1)))
    chars = list(line)  # one piece a position of the line: a change keeps the positions of the others
    for pos, pieces in changes:
        chars = _apply(chars, pos, pieces)
    out = "".join(chars)
    if casing.is_recasing_of(out, line):
        return out
    chars = list(line)
    for pos, pieces in changes:  # a final sigma's context crosses tokens: each kept if the line stays a recasing
        trial = _apply(chars, pos, pieces)
        if casing.is_recasing_of("".join(trial), line):
            chars = trial
    return "".join(chars)


def _apply(chars: list[str], pos: list[int], pieces: list[str]) -> list[str]:
    out = chars.copy()
    for p, piece in zip(pos, pieces):
        out[p] = piece
    return out


def line_reader(target_lang: str, source_lang: str | None) -> Callable[[int, Line], Record]:
    """``FORMATS["text"]``'s reading of one sentence, for raw lines: the hypothesis and its source tokenized for
    their languages first, and the output the raw hypothesis line with the recased tokens' case (``project``)."""
    tok_target, tok_caseless = tokenizer(target_lang), tokenizer(target_lang, caseless=True)
    tok_source = tokenizer(source_lang) if source_lang else None
    read_text = FORMATS["text"].read_line
    assert read_text is not None

    def read(ident: int, x: Line) -> Record:
        source = None if x.source is None or tok_source is None else " ".join(tok_source(composed(x.source)[0]))
        bom, hyp, end = split_ends(x.hyp)
        text, clusters = composed(hyp)
        tok = tok_caseless if text == text.lower() else tok_target  # (a line without capitals)
        record = read_text(ident, dataclasses.replace(x, hyp=" ".join(tok(text)), source=source))

        def line(t: Triple, recased: list[str]) -> str:
            out = project(text, t.target, recased)
            return bom + (out if clusters is None else decomposed(hyp, clusters, text, out)) + end

        return Record(record.triple, line)

    return read


def composed(line: str) -> tuple[str, list[str] | None]:
    """The line as the tokenizer and the model see it, each character with its combining marks composed (NFC, a
    cluster at a time: the tokenizer splits a word at a combining mark, so ``cafe\u0301`` would be two tokens),
    and the line's clusters (None: the line is in that form already)."""
    if unicodedata.is_normalized("NFC", line):
        return line, None
    clusters: list[str] = []  # each character with the combining marks (a nonzero combining class) after it
    for c in line:
        if clusters and unicodedata.combining(c):
            clusters[-1] += c
        else:
            clusters.append(c)
    return "".join(unicodedata.normalize("NFC", c) for c in clusters), clusters


def decomposed(line: str, clusters: list[str], text: str, out: str) -> str:
    """``out`` (``text`` recased) written back in the line's own characters: each cluster whose composed form
    changed case takes that case on its first character, its marks as they were; any other stays as it came."""
    if len(out) != len(text):  # ('i̇' as 'İ': a length changed) the line's own characters, recased as they are
        return line
    pieces, at = [], 0
    for c in clusters:
        n = len(unicodedata.normalize("NFC", c))
        new = out[at : at + n]
        if new != text[at : at + n]:
            first = c[0].upper() if new[0].isupper() else c[0].lower()
            trial = first + c[1:]
            if len(first) == 1 and unicodedata.normalize("NFC", trial) == new and casing.is_recasing_of(trial, c):
                c = trial
        pieces.append(c)
        at += n
    return "".join(pieces)


def split_ends(line: str) -> tuple[str, str, str]:
    """A raw line's byte-order mark (U+FEFF starting it), its text, and its line end (``\\r\\n``, ``\\n``, or
    none: a file's last line without one, or a line given as a string): the mark and the end are set aside from
    the tokenizer (a mark would stick to the first word) and written back as they came."""
    bom = "\ufeff" if line.startswith("\ufeff") else ""
    end = "\r\n" if line.endswith("\r\n") else "\n" if line.endswith("\n") else ""
    return bom, line[len(bom) : len(line) - len(end)], end


def read_raw(inp: Inputs, read: Callable[[int, Line], Record]) -> Iterator[Record]:
    """The records of raw files, ``read`` (a ``line_reader``) from ``inp.path`` (the hypotheses), its source and
    alignment if given, in lock step; errors name the file and line."""
    paths = [p for p in (inp.path, inp.source, inp.alignment) if p is not None]
    readers = [LineReader(p, keep_ends=k == 0) for k, p in enumerate(paths)]  # (the hypotheses: written back)
    names = [r.name for r in readers] + ["", ""]
    for k, row in enumerate(zip_readers(*readers)):
        more: list[str | None] = [*row[1:], None, None]
        line = Line(row[0], more[0], more[1], where=(names[0], names[1], names[2]), lineno=readers[0].lineno)
        yield read(k, line)
