"""Word alignments in Pharaoh form (``0-0 1-2 ...``, source-target), as GIZA++, fast_align, eflomal and the
Moses decoder's ``-alignment-output-file`` write them."""

from __future__ import annotations

import re
from collections.abc import Iterable

from moses_recaser.errors import RecaserError
from moses_recaser.textio import split_tokens
from moses_recaser.triples import Link

# One Pharaoh pair "s-t" (GIZA/fast_align/eflomal/Moses all write source-target).
_PAIR = re.compile(r"([0-9]+)-([0-9]+)")
_LINE = re.compile(r"[ \t]*(?:[0-9]+-[0-9]+(?:[ \t]+[0-9]+-[0-9]+)*)?[ \t]*")


def parse_links(text: str) -> list[Link]:
    """Parse ``0-0 1-2 ...`` into (source, target) pairs; a bad pair raises RecaserError."""
    if _LINE.fullmatch(text):  # the whole line checked at once, then split in C: this runs on every line
        nums = list(map(int, text.replace("-", " ").split()))
        return list(zip(nums[::2], nums[1::2]))
    links: list[Link] = []
    for tok in split_tokens(text):
        m = _PAIR.fullmatch(tok)
        if m is None:
            raise RecaserError(f"malformed alignment pair {tok!r} (expected source-target, e.g. 0-1)")
        links.append((int(m.group(1)), int(m.group(2))))
    return links


def format_links(links: Iterable[Link]) -> str:
    return " ".join(f"{s}-{t}" for s, t in links)
