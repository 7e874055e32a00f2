"""Symmetrization against hand-worked examples (Moses symal semantics), and Pharaoh I/O."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moses_recaser.io.errors import RecaserError
from moses_recaser.moses.pharaoh import format_links, parse_links
from moses_recaser.stats.symal import symmetrize

# Example 1: a diagonal neighbour. src2tgt a = {0-0, 1-1}, tgt2src b = {0-0}.
# Intersection {0-0}; 1-1 is in the union and touches 0-0 only diagonally.
EX1 = ([(0, 0), (1, 1)], [(0, 0)])
# Example 2: final vs final-and, and symal's order (b-only points before a-only points).
# a = {0-0, 1-2}, b = {0-0, 2-2}. No growing (2-2 and 1-2 are not neighbours of 0-0).
# final: b-only 2-2 first (both words free: added), then a-only 1-2 (target 2 now covered,
# source 1 free: added by final, refused by final-and, which needs both free).
EX2 = ([(0, 0), (1, 2)], [(0, 0), (2, 2)])
# Example 3: growing along a chain, direct neighbours only.
# a = {0-0, 1-0, 2-1}; b = {0-0, 2-1, 2-2}. Intersection {0-0, 2-1}.
# grow: from 0-0, the neighbour 1-0 (source 1 free) is added; from 2-1, 2-2 (target 2 free).
EX3 = ([(0, 0), (1, 0), (2, 1)], [(0, 0), (2, 1), (2, 2)])

CASES = [
    (EX1, "intersection", [(0, 0)]),
    (EX1, "union", [(0, 0), (1, 1)]),
    (EX1, "grow", [(0, 0)]),
    (EX1, "grow-diag", [(0, 0), (1, 1)]),
    (EX1, "grow-diag-final-and", [(0, 0), (1, 1)]),
    (EX2, "grow-diag", [(0, 0)]),
    (EX2, "grow-diag-final", [(0, 0), (1, 2), (2, 2)]),
    (EX2, "grow-diag-final-and", [(0, 0), (2, 2)]),
    (EX2, "intersection", [(0, 0)]),
    (EX3, "intersection", [(0, 0), (2, 1)]),
    (EX3, "grow", [(0, 0), (1, 0), (2, 1), (2, 2)]),
    (EX3, "grow-diag-final-and", [(0, 0), (1, 0), (2, 1), (2, 2)]),
]


@pytest.mark.parametrize("example,method,expected", CASES)
def test_symmetrization_hand_worked(example, method, expected):
    a, b = example
    assert symmetrize(a, b, method) == expected


def test_grow_diag_final_and_swapped_directions_differ_only_in_final_order():
    a, b = EX2
    # with the directions swapped, the a-only point 1-2 comes first and blocks 2-2
    assert symmetrize(b, a, "grow-diag-final-and") == [(0, 0), (1, 2)]


def test_unknown_method():
    with pytest.raises(RecaserError, match="unknown symmetrization"):
        symmetrize([], [], "grow-final")


def test_pharaoh_round_trip():
    assert parse_links("0-0 1-2  3-1 ") == [(0, 0), (1, 2), (3, 1)]
    assert format_links([(0, 0), (1, 2)]) == "0-0 1-2"
    with pytest.raises(RecaserError, match="malformed alignment pair 'a-1'"):
        parse_links("0-0 a-1")


def _symal_reference(a, b, method):
    """symal's grow loop without the early stop: every pass scans every point, until one adds nothing."""
    import bisect

    a, b = {(t, s) for s, t in a}, {(t, s) for s, t in b}
    union, current = a | b, sorted(a & b)
    in_current, tgt_cov, src_cov = set(current), {t for t, _ in current}, {s for _, s in current}
    steps = [(-1, 0), (0, -1), (1, 0), (0, 1)] + ([(-1, -1), (-1, 1), (1, -1), (1, 1)] if "diag" in method else [])
    added = True
    while added:
        added, pos = False, 0
        while pos < len(current):
            ti, sj = current[pos]
            for dt, ds in steps:
                p = (ti + dt, sj + ds)
                if p in union and not (p[0] in tgt_cov and p[1] in src_cov):
                    if p not in in_current:
                        bisect.insort(current, p)
                        in_current.add(p)
                    tgt_cov.add(p[0])
                    src_cov.add(p[1])
                    added = True
            pos = bisect.bisect_right(current, (ti, sj))
    if method.startswith("grow-diag-final"):
        for only in (sorted(b - a), sorted(a - b)):
            for p in only:
                t_free, s_free = p[0] not in tgt_cov, p[1] not in src_cov
                if p not in in_current and ((t_free and s_free) if method.endswith("-and") else (t_free or s_free)):
                    in_current.add(p)
                    tgt_cov.add(p[0])
                    src_cov.add(p[1])
    return sorted((s, t) for t, s in in_current)


_LINKS = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=30)


@given(_LINKS, _LINKS, st.sampled_from(["grow", "grow-diag", "grow-diag-final", "grow-diag-final-and"]))
def test_symmetrization_stops_growing_early_with_the_same_links(a, b, method):
    assert symmetrize(a, b, method) == _symal_reference(a, b, method)
