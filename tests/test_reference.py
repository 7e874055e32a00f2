"""A reference's case carried over to decoder output that differs from it in words and order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from moses_recaser.core import casing
from moses_recaser.model.reference import carry_case


def test_matched_words_take_the_reference_form_and_the_rest_stay_undecided():
    out = "the athlete jhonathan florez jumped from a helicopter above bogota .".split()
    ref = "Athlete Jhonathan Florez jumped from a helicopter above Bogota , the capital of Colombia .".split()
    got = carry_case(out, ref)
    assert got[0] is None  # the reference has no "the" before "athlete"
    assert got[1:4] == [None, "Jhonathan", "Florez"]  # "Athlete" is capitalized by its place in the reference
    assert got[4:10] == ["jumped", "from", "a", "helicopter", "above", "Bogota"] and got[10] == "."


def test_a_word_moved_to_a_sentence_start_is_capitalized_and_one_moved_away_is_undecided():
    assert carry_case(["he", "left", "yesterday", "."], ["Yesterday", ",", "he", "left", "."]) == [
        "He",
        "left",
        None,
        ".",
    ]
    assert carry_case(["yesterday", "he", "left", "."], ["He", "left", "yesterday", "."]) == [None, None, "left", "."]


@given(
    st.lists(st.sampled_from(["a", "A", "the", "The", "Paris", "paris", ".", "NATO", "x"]), max_size=8),
    st.lists(st.sampled_from(["a", "A", "the", "The", "Paris", "paris", ".", "NATO", "x"]), max_size=8),
)
def test_carried_forms_are_recasings_of_the_output(out, ref):
    out = [casing.lower(w) for w in out]
    got = carry_case(out, ref)
    assert len(got) == len(out)
    assert all(g is None or casing.is_recasing_of(g, w) for g, w in zip(got, out))
