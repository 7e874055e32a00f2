"""Vocab: numbers are places, lookups through the hash key set and the collision dict, stored form equal."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moses_recaser import vocab as vocab_module
from moses_recaser.vocab import Vocab

WORDS = st.lists(
    st.text(min_size=1, max_size=6).filter(lambda w: "\n" not in w and "\t" not in w), unique=True, max_size=60
)


def _check(words: list[str], others: list[str]) -> None:
    v = Vocab.of(words)
    for again in (v, Vocab.load(v.arrays("v"), "v")):
        assert list(again) == words and len(again) == len(words)
        queries = words + [w for w in others if w not in words]
        want = [words.index(w) if w in words else -1 for w in queries]
        assert again.numbers(queries).tolist() == want
        fresh = Vocab.load(v.arrays("v"), "v")  # one word at a time: the other lookup path
        assert [fresh.get(w) for w in queries] == want


@settings(max_examples=100, deadline=None)
@given(WORDS, st.lists(st.text(max_size=6), max_size=20))
def test_numbers_are_places(words, others):
    _check(words, others)


@pytest.mark.parametrize("buckets", [1, 3])
def test_colliding_hashes(monkeypatch, buckets):
    """With a hash of a few values, nearly every string shares its hash: the later ones go to the collision dict,
    and every lookup still gives the string's own number."""
    monkeypatch.setattr(vocab_module, "string_hash", lambda data: len(data) % buckets)
    words = ["a", "bb", "ccc", "dd", "e", "ffff", "ggggg", "Über", "çà"]
    _check(words, ["zz", "y", "", "ccc "])


def test_added_words_are_stored():
    v = Vocab.of(["x", "y"])
    assert v.add("z") == 2 and v.add("x") == 0 and v.add_all(["w", "y", "w"]) == [3, 1, 3]
    back = Vocab.load(v.arrays("v"), "v")
    assert list(back) == ["x", "y", "z", "w"] and back.numbers(["w", "q"]).tolist() == [3, -1]
    assert np.asarray(v.arrays("v")["v.ids"]).dtype == np.int32
