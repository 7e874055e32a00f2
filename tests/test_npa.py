"""The naive phrase aligner: consistency (property test), determinism, and the documented rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moses_recaser.core.triples import Triple, check_phrases
from moses_recaser.io.errors import RecaserError
from moses_recaser.stats.npa import length_distribution, phrase_align, phrase_align_triple


@st.composite
def aligned_pair(draw):
    m = draw(st.integers(1, 12))
    n = draw(st.integers(1, 12))
    links = draw(st.sets(st.tuples(st.integers(0, m - 1), st.integers(0, n - 1)), max_size=20))
    return m, n, sorted(links)


def _consistent(phrase, links) -> bool:
    s0, s1, t0, t1 = phrase
    for s, t in links:
        if (s0 <= s <= s1) != (t0 <= t <= t1):
            return False
    return True


@settings(max_examples=300)
@given(aligned_pair(), st.integers(0, 2**32 - 1))
def test_property_phrases_are_consistent_and_tile_the_target(pair, seed):
    m, n, links = pair
    phrases = phrase_align(m, n, links, rng=np.random.default_rng(seed))
    check_phrases(phrases, m, n)  # target spans tile the output, source spans inside and disjoint
    for p in phrases:
        assert _consistent(p, links), (p, links)


@given(aligned_pair())
def test_property_same_seed_same_phrases(pair):
    m, n, links = pair
    t = Triple(id=7, source=["x"] * m, target=["y"] * n, links=links)
    assert phrase_align_triple(t, seed=3).phrases == phrase_align_triple(t, seed=3).phrases


def test_unaligned_target_words_join_the_phrase_on_their_left():
    # target 1 and 3 are unaligned; 0 opens the sentence aligned
    phrases = phrase_align(2, 4, [(0, 0), (1, 2)], lengths={1: 1.0})
    assert phrases == [(0, 0, 0, 1), (1, 1, 2, 3)]


def test_unaligned_opening_target_word_joins_the_first_phrase():
    assert phrase_align(1, 2, [(0, 1)], lengths={1: 1.0}) == [(0, 0, 0, 1)]


def test_reach_back_forces_a_merge():
    # source 0 -> target 1 is a consistent phrase, but source 1 links targets 0 and 2 around it:
    # every phrase starting at source 1 reaches back, so the two merge into one pair
    links = [(0, 1), (1, 0), (1, 2)]
    for seed in range(5):
        assert phrase_align(2, 3, links, lengths={1: 1.0}, rng=np.random.default_rng(seed)) == [(0, 1, 0, 2)]


def test_unlinked_source_word_is_a_gap():
    assert phrase_align(3, 2, [(0, 0), (2, 1)], lengths={1: 1.0}) == [(0, 0, 0, 0), (2, 2, 1, 1)]


def test_no_links_gives_one_phrase():
    assert phrase_align(3, 2, [], lengths={1: 1.0}) == [(0, 2, 0, 1)]


def test_a_pair_with_an_empty_source_gets_no_phrases_as_recasing_reads_it():
    """An uncleaned dev corpus' pair with an empty source line: its target is unaligned (the phrase aligner
    refused it, so train and phrase-align stopped without naming the file or line), and the triple is valid."""
    assert phrase_align(0, 3, []) == []
    triple = Triple(id=4, source=[], target=["One", "thing", "."], links=[])
    out = phrase_align_triple(triple)
    assert out.phrases == [] and out.target == triple.target


def test_length_distribution_from_trace_triples():
    t = [Triple(0, ["a"] * 5, ["b"] * 3, phrases=[(0, 1, 0, 0), (2, 2, 1, 1), (3, 4, 2, 2)])]
    assert length_distribution(t) == {1: pytest.approx(1 / 3), 2: pytest.approx(2 / 3)}
    with pytest.raises(RecaserError, match="no phrase segmentation"):
        length_distribution([Triple(0, ["a"], ["b"])])
