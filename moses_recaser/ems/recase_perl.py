"""What Moses' ``scripts/recaser/recase.perl`` does besides decoding, ported for the EMS recase step:
``-headline SRC.sgm`` title-cases the segments inside ``<hl>`` ... ``</hl>``, except the words of its
English lowercase list.
"""

from __future__ import annotations

from moses_recaser import casing
from moses_recaser.textio import read_lines

# recase.perl's %ALWAYS_LOWER for -lang en. It is a hash, so its "al-.+" and "el-.+" are looked up as
# the literal strings, as recase.perl does, not as patterns.
ALWAYS_LOWER_EN = frozenset({
    "a", "after", "against", "al-.+", "and", "any", "as", "at", "be", "because", "between", "by", "during",
    "el-.+", "for", "from", "his", "in", "is", "its", "last", "not", "of", "off", "on", "than", "the", "their",
    "this", "to", "was", "were", "which", "will", "with",
})


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


def title_case(tokens: list[str], lang: str) -> list[str]:
    """A headline's words capitalized, but for ``ALWAYS_LOWER_EN`` when ``lang`` is ``en``."""
    keep = ALWAYS_LOWER_EN if lang == "en" else frozenset()
    return [w if w in keep else casing.upper_first(w) for w in tokens]
