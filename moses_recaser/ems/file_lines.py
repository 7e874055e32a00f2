"""The logical lines of an EMS file, as ``experiment.perl`` reads its meta (``read_meta``) and its config
(``read_config``): ``#`` and what follows stripped, blank lines skipped, a line ending in ``\\`` joined with
the next one. The two readers join differently, and each keeps its own rule (``join_meta``,
``join_config``): read_meta appends the next line, then replaces the backslash with the blanks and the line
end around it (``s/\\s*\\\\\\s*[\\n\\r]*\\s+/ /``); read_config replaces the backslash and the blanks
before it (``s/\\s*\\\\\\s*$/ /``), then appends. Neither strips comments from the appended line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence

# Perl reads the files as bytes: its \s is ASCII white space, not NEL (U+0085) or NBSP
_COMMENT = re.compile(r"#.*$")
_CONTINUED = re.compile(r"\\\s*$", re.A)
_META_JOIN = re.compile(r"\s*\\\s*[\n\r]*\s+", re.A)
_CONFIG_JOIN = re.compile(r"\s*\\\s*$", re.A)
_PERL_SPACE = " \t\n\r\f\v"  # Perl's \s
_LINE = re.compile(r"[^\n]*\n|[^\n]+")


def join_meta(line: str, following: str) -> str:
    return _META_JOIN.sub(" ", line + "\n" + following, count=1)


def join_config(line: str, following: str) -> str:
    return _CONFIG_JOIN.sub(" ", line) + following


def split_lines(text: str) -> list[str]:
    """The physical lines of ``text``, each with its ``\\n``: Perl's ``<FILE>`` splits there only, not at
    ``\\r``, U+0085 or U+2028 as ``str.splitlines`` does."""
    return _LINE.findall(text)


def logical_lines(lines: Sequence[str], join: Callable[[str, str], str]) -> Iterator[tuple[int, int, str]]:
    """(start, end, text) of each non-blank logical line: physical lines [start, end), 0-based (``split_lines``'s)."""
    i, n = 0, len(lines)
    while i < n:
        start = i
        line = _COMMENT.sub("", lines[i].rstrip("\n"))
        i += 1
        if not line.strip(_PERL_SPACE):
            continue
        while _CONTINUED.search(line) and i < n:
            line = join(line, lines[i].rstrip("\n"))
            i += 1
        yield start, i, line
