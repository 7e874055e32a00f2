"""What Moses' ``scripts/recaser/recase.perl`` does besides decoding, ported for the EMS recase step:
``-headline SRC.sgm`` title-cases the segments inside ``<hl>`` ... ``</hl>``, except the words of its
English lowercase list.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from itertools import islice

from moses_recaser.core import casing
from moses_recaser.io.lines import kind_of, read_lines, read_regular

# recase.perl's %ALWAYS_LOWER for -lang en. It is a hash, so its "al-.+" and "el-.+" are looked up as
# the literal strings, as recase.perl does, not as patterns.
ALWAYS_LOWER_EN = frozenset(
    {
        "a",
        "after",
        "against",
        "al-.+",
        "and",
        "any",
        "as",
        "at",
        "be",
        "because",
        "between",
        "by",
        "during",
        "el-.+",
        "for",
        "from",
        "his",
        "in",
        "is",
        "its",
        "last",
        "not",
        "of",
        "off",
        "on",
        "than",
        "the",
        "their",
        "this",
        "to",
        "was",
        "were",
        "which",
        "will",
        "with",
    }
)


def headline_flags(sgm: str) -> list[bool]:
    """One flag per ``<seg`` line of an SGM file: true between a line with ``<hl>`` and one with
    ``</hl>`` (recase.perl reads /<hl>/, /<.hl>/ and /^<seg/, line by line)."""
    flags: list[bool] = []
    inside = False
    for line in read_lines(sgm):
        if "<hl>" in line:
            inside = True
        if "</hl>" in line:
            inside = False
        if line.startswith("<seg"):
            flags.append(inside)
    return flags


def check_headline_count(flags: list[bool], lines: int, sgm: str, infile: str) -> None:
    """A headline file has one ``<seg`` line per input line: with more or fewer it is another set's. Named at
    the first line without a partner: -in's (``infile``) or the headline file's ``<seg``."""
    from moses_recaser.io.errors import RecaserError

    n = len(flags)
    if lines > n:
        raise RecaserError(f"line {n + 1} of -in, but the headline file {sgm} has {n} <seg> lines", infile, n + 1)
    if lines < n:
        segs = (k for k, line in enumerate(read_lines(sgm), 1) if line.startswith("<seg"))
        raise RecaserError(
            f"<seg> line {lines + 1}, but -in {infile} has {lines} lines", sgm, next(islice(segs, lines, None))
        )


def moses_ini_files(ini: str) -> list[str]:
    """The files a Moses config names in its [feature] lines (``path=``), as given and as seen from the config's
    directory: what the decoder reads beside the config."""
    out, section = [], ""
    for line in read_lines(ini):
        text = line.strip()
        if text.startswith("["):
            section = text
        elif section == "[feature]":
            for word in text.split():
                if word.startswith("path="):
                    path = word[len("path=") :]
                    out += [path, os.path.join(os.path.dirname(ini), path)]
    return out


def title_case(tokens: list[str], lang: str, upper: Callable[[str], str] | None = None) -> list[str]:
    """A headline's words capitalized (``upper``; by default a word in lowercase gets its first letter capital
    and a word with a capital keeps the recaser's form: "NATO", "iPhone", where recase.perl's ucfirst would give
    "IPhone"), but for ``ALWAYS_LOWER_EN`` when ``lang`` is ``en``."""
    upper = upper or _capitalized_if_lower
    keep = ALWAYS_LOWER_EN if lang == "en" else frozenset()
    return [w if w in keep else upper(w) for w in tokens]


def is_moses_ini(path: str) -> bool:
    """Whether a file is a Moses decoder config (what train-recaser.perl writes as its model)."""
    head = read_regular(path, 1 << 16)
    # (bytes to tell the kind of file by, not text to read: bad UTF-8 in them is no error here)
    for line in (head or b"").decode("utf-8", "replace").splitlines():
        if line.strip() and not line.startswith("#"):
            return line.startswith("[")
    return False


def recase_with_moses(moses: str, ini: str, infile: str, lang: str = "en", headline: str | None = None) -> list[str]:
    """What recase.perl does with a Moses recasing model: decode ``infile`` with it (``moses -v 0 -f INI -i IN
    -dl 0``), capitalize the first word and (but for Czech) each word after ``.``, and title-case headlines.
    The output lines, without their line ends."""
    import subprocess

    from moses_recaser.io.errors import RecaserError

    try:
        proc = subprocess.run([moses, "-v", "0", "-f", ini, "-i", infile, "-dl", "0"], check=False, capture_output=True)
    except OSError as exc:
        raise RecaserError(f"cannot run the Moses decoder given with -moses: {exc.strerror}", moses) from None
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise RecaserError(f"the Moses decoder failed with exit code {proc.returncode} ({' '.join(tail)})", moses)
    flags = headline_flags(headline) if headline else []
    out = []
    for k, line in enumerate(_decoded_lines(proc.stdout, infile)):
        words = line.rstrip().split(" ")
        words[0] = _ucfirst(words[0])
        if lang != "cs":
            words = [words[0]] + [_ucfirst(w) if p == "." else w for p, w in zip(words, words[1:])]
        if k < len(flags) and flags[k]:
            words = title_case(words, lang, _ucfirst)
        out.append(" ".join(words))
    if headline:
        check_headline_count(flags, len(out), headline, infile)
    return out


def _decoded_lines(stdout: bytes, infile: str) -> list[str]:
    """The decoder's output lines, split at ``\n`` only, as recase.perl reads them (U+2028 or a form feed inside a
    line stays in it): one per line of ``infile`` (counted when it is a file; a pipe was read by the decoder)."""
    from moses_recaser.io.corpus import corpus_lines
    from moses_recaser.io.errors import RecaserError

    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = stdout.count(b"\n", 0, exc.start) + 1
        raise RecaserError(
            f"the Moses decoder given with -moses wrote invalid UTF-8 in its line {at}", infile, at
        ) from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if kind_of(infile) == "file":
        given = corpus_lines([infile])
        if len(lines) != given:
            raise RecaserError(
                f"the Moses decoder given with -moses wrote {len(lines)} lines for the {given} of -in",
                infile,
                min(len(lines), given) + 1,
            )
    return lines


def _capitalized_if_lower(word: str) -> str:
    return casing.upper_first(word) if word == casing.lower(word) else word


def _ucfirst(word: str) -> str:
    """Perl's ucfirst: the first character in title case (the rest untouched), but where that takes more than one
    character ("ß" -> "Ss", "ﬁ" -> "Fi"): such a word stays as it is, since recasing changes case only."""
    first = word[:1].title()
    return first + word[1:] if len(first) == 1 else word
