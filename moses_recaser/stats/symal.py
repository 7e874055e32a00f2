"""Symmetrization of two directional word alignments, as Moses' ``symal`` (symal/symal.cpp) does it."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from moses_recaser.core.triples import Link
from moses_recaser.io.errors import RecaserError

# symal (printgrow):
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
    # a point can join only from the union and only while one of its words is uncovered, which stays so once
    # false: when no such point is left, no pass can add one (a pass that finds none ends the growing anyway)
    left = union - in_current
    added = True
    while added and any(t not in tgt_cov or s not in src_cov for t, s in left):
        added = False
        pos = 0
        while pos < len(current):
            ti, sj = current[pos]
            for dt, ds in neighbours:
                p = (ti + dt, sj + ds)
                if p in left and not (p[0] in tgt_cov and p[1] in src_cov):
                    bisect.insort(current, p)
                    in_current.add(p)
                    left.discard(p)
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
