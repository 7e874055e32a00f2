"""Word alignments in Pharaoh form (``0-0 1-2 ...``, source-target), as GIZA++, fast_align, eflomal and the
Moses decoder's ``-alignment-output-file`` write them."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from moses_recaser.core.triples import Link
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import MAX_TOKENS, iter_tokens

# One Pharaoh pair "s-t" (GIZA/fast_align/eflomal/Moses all write source-target).
_PAIR = re.compile(r"[0-9]+-[0-9]+")
_LINE = re.compile(r"[ \t]*(?:[0-9]+-[0-9]+(?:[ \t]+[0-9]+-[0-9]+)*)?[ \t]*")
_LONG = 1 << 16  # characters: a line of thousands of links (a sentence's has tens)
# the links of one line: 32 a word of the longest line allowed. What reading a line holds stays bounded (about
# 70 MB), where a 2,500-word line linked all to all (6.25M links) took 1.4 GB; model.batch bounds a sentence's
# (target word, source word) pairs by the same number
MAX_LINKS = 32 * MAX_TOKENS


def parse_links(text: str) -> list[Link]:
    """Parse ``0-0 1-2 ...`` into (source, target) pairs, each once (in order of first mention: a pair repeated
    a million times is one link, not a million); a bad pair, or more than MAX_LINKS, raises RecaserError."""
    if text.count("-") > MAX_LINKS:  # (counted before any is parsed)
        raise RecaserError(
            f"{text.count('-'):,} links on one line, more than the limit of {MAX_LINKS:,} (32 a word of the "
            "longest line): not a word alignment"
        )
    # the whole line checked at once, then split in C, each distinct pair parsed once a run (``_pair``): this runs
    # on every line (a long one pair by pair: the regular expression's backtracking state takes 50 bytes a
    # character, 700 MB for a 12 MB line)
    if len(text) <= _LONG and _LINE.fullmatch(text):
        return list(dict.fromkeys(map(_pair, text.split())))
    links: dict[Link, None] = {}
    for tok in iter_tokens(text):
        if _PAIR.fullmatch(tok) is None:
            raise RecaserError(f"malformed alignment pair {tok!r} (expected source-target, e.g. 0-1)")
        links[_pair(tok)] = None
    return list(links)


@lru_cache(maxsize=1 << 14)  # a corpus's lines share few pairs (near the diagonal): 1,941 in newstest2014's
def _pair(text: str) -> Link:
    s, _, t = text.partition("-")
    return int(s), int(t)


def format_links(links: Iterable[Link]) -> str:
    return " ".join(f"{s}-{t}" for s, t in links)
