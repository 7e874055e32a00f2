"""Word alignments: Pharaoh ``i-j`` I/O and symmetrization of two directional alignments."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .errors import RecaserError
from .textio import split_tokens

Link = tuple[int, int]

# One Pharaoh pair "s-t" (GIZA/fast_align/eflomal/Moses all write source-target).
_PAIR = re.compile(r"(\d+)-(\d+)")


def parse_links(text: str) -> list[Link]:
    """Parse ``0-0 1-2 ...`` into (source, target) pairs; a bad pair raises RecaserError."""
    links: list[Link] = []
    for tok in split_tokens(text):
        m = _PAIR.fullmatch(tok)
        if m is None:
            raise RecaserError(f"malformed alignment pair {tok!r} (expected source-target, e.g. 0-1)")
        links.append((int(m.group(1)), int(m.group(2))))
    return links


def format_links(links: Iterable[Link]) -> str:
    return " ".join(f"{s}-{t}" for s, t in links)
