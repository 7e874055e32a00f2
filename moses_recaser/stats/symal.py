"""Word alignments: Pharaoh ``i-j`` I/O and symmetrization of two directional alignments."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable

from moses_recaser.errors import RecaserError
from moses_recaser.textio import split_tokens

Link = tuple[int, int]

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


# --- symmetrization, as Moses' symal (symal/symal.cpp, printgrow) ---------------------------
# symal works on points (target i, source j) kept in a sorted set; grow scans that set in
# order while inserting into it, so a point added ahead of the scan is itself scanned in the
# same pass. Neighbours are tried in symal's order: the 4 direct ones, then the diagonals.
_NEIGHBOURS = [(-1, 0), (0, -1), (1, 0), (0, 1)]
_DIAGONALS = [(-1, -1), (-1, 1), (1, -1), (1, 1)]

SYMMETRIZATIONS = ("intersection", "union", "grow", "grow-diag", "grow-diag-final", "grow-diag-final-and")


def symmetrize(src2tgt: Iterable[Link], tgt2src: Iterable[Link], method: str = "grow-diag-final-and") -> list[Link]:
    """Combine two directional alignments, given as (source, target) links.

    ``src2tgt`` is the direction in which each source word has at most one link (symal's ``a``),
    ``tgt2src`` the one in which each target word has at most one (symal's ``b``); many-to-many
    input is accepted too. Returns sorted (source, target) links.
    """
    if method not in SYMMETRIZATIONS:
        raise RecaserError(f"unknown symmetrization {method!r}; choose one of {', '.join(SYMMETRIZATIONS)}")
    a = {(t, s) for s, t in src2tgt}  # symal's (first=target, second=source) points
    b = {(t, s) for s, t in tgt2src}
    inter = a & b
    union = a | b
    if method == "intersection":
        return sorted((s, t) for t, s in inter)
    if method == "union":
        return sorted((s, t) for t, s in union)
    neighbours = _NEIGHBOURS + (_DIAGONALS if "diag" in method else [])
    current = sorted(inter)
    in_current = set(current)
    tgt_cov = {t for t, _ in current}
    src_cov = {s for _, s in current}
    added = True
    while added:
        added = False
        pos = 0
        while pos < len(current):
            ti, sj = current[pos]
            for dt, ds in neighbours:
                p = (ti + dt, sj + ds)
                if p in union and not (p[0] in tgt_cov and p[1] in src_cov):
                    if p not in in_current:
                        bisect.insort(current, p)
                        in_current.add(p)
                    tgt_cov.add(p[0])
                    src_cov.add(p[1])
                    added = True
            # the next point after (ti, sj) in the set as it is now
            pos = bisect.bisect_right(current, (ti, sj))
    if method.startswith("grow-diag-final"):
        both = method.endswith("-and")
        for only in (sorted(b - a), sorted(a - b)):  # symal adds b-only points first, then a-only
            for p in only:
                if p in in_current:
                    continue
                t_free, s_free = p[0] not in tgt_cov, p[1] not in src_cov
                if (t_free and s_free) if both else (t_free or s_free):
                    in_current.add(p)
                    tgt_cov.add(p[0])
                    src_cov.add(p[1])
    return sorted((s, t) for t, s in in_current)
