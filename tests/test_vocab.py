"""Vocab: numbers are places, lookups through the hash key set and the collision dict, stored form equal."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moses_recaser.core import vocab as vocab_module
from moses_recaser.core.vocab import Vocab

WORDS = st.lists(
    st.text(min_size=1, max_size=6).filter(lambda w: "\n" not in w and "\t" not in w), unique=True, max_size=60
)


def _check(words: list[str], others: list[str]) -> None:
    v = Vocab.from_words(words)
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


@given(st.lists(st.binary(max_size=40), max_size=30))
def test_the_hash_of_a_list_is_each_strings_hash(data):
    assert vocab_module.string_hashes(data).tolist() == [vocab_module.string_hash(x) for x in data]


def _few_hashes(monkeypatch: pytest.MonkeyPatch, buckets: int) -> None:
    """Hashes of ``buckets`` values (by length), for lists and for one string alike."""
    monkeypatch.setattr(vocab_module, "string_hash", lambda data: len(data) % buckets)
    monkeypatch.setattr(
        vocab_module, "string_hashes", lambda data: np.array([len(x) % buckets for x in data], dtype=np.int64)
    )


@pytest.mark.parametrize("buckets", [1, 3])
def test_colliding_hashes(monkeypatch, buckets):
    """With a hash of a few values, nearly every string shares its hash: the later ones go to the collision dict,
    and every lookup still gives the string's own number."""
    _few_hashes(monkeypatch, buckets)
    words = ["a", "bb", "ccc", "dd", "e", "ffff", "ggggg", "Über", "çà"]
    _check(words, ["zz", "y", "", "ccc "])


def test_only_the_words_at_the_given_places_are_looked_up():
    v = Vocab.from_words(["x", "y", "z"])
    assert v.numbers(["z", "y", "w", "x"], [0, 2, 3]).tolist() == [2, -1, -1, 0]
    assert v.numbers(["z"], []).tolist() == [-1]
    assert "y" not in v._known  # (not looked up: nothing cached of it)


def test_added_words_are_stored():
    v = Vocab.from_words(["x", "y"])
    assert v.add("z") == 2 and v.add("x") == 0 and v.add_all(["w", "y", "w"]).tolist() == [3, 1, 3]
    back = Vocab.load(v.arrays("v"), "v")
    assert list(back) == ["x", "y", "z", "w"] and back.numbers(["w", "q"]).tolist() == [3, -1]
    assert np.asarray(v.arrays("v")["v.ids"]).dtype == np.int32


@pytest.mark.parametrize("stored", [[], ["b", "x"]])
def test_add_all_numbers_new_words_in_order_of_first_occurrence(stored):
    """The bulk path a growing vocabulary (counting, word types) takes: as ``add`` one word at a time would."""
    chunks = [["a", "b", "a", "c"], [], ["c", "d", "b", "e", "d"]]
    bulk, one = Vocab.from_words(stored), Vocab.from_words(stored)
    for chunk in chunks:
        start = len(bulk)
        got = bulk.add_all(chunk)
        assert got.dtype == np.int64 and got.tolist() == [one.add(w) for w in chunk]
        assert bulk.words_from(start) == list(one)[start:]
    assert list(bulk) == list(one) and bulk.words_from(0) == list(one)
    assert bulk.numbers(["d", "q"]).tolist() == [list(one).index("d"), -1]


@settings(max_examples=60, deadline=None)
@given(WORDS, WORDS, st.lists(st.text(max_size=6), max_size=20), st.integers(0, 4))
def test_compacted_vocabulary_keeps_its_numbers(first, second, others, keep):
    """Strings added, moved into the arrays (``compact``), then more added: the same numbers, the same stored
    form, and lookups of any string as before; right after, the dict holds the first ``keep`` strings only."""
    plain, compacted = Vocab.from_words([]), Vocab.from_words([])
    for v in (plain, compacted):
        v.add_all(first)
    compacted.compact(keep)
    assert compacted.held() == min(keep, len(plain))
    for v in (plain, compacted):
        v.add_all(second)
    assert list(compacted) == list(plain)
    queries = first + second + others
    assert compacted.numbers(queries).tolist() == plain.numbers(queries).tolist()
    assert [compacted.get(w) for w in queries] == [plain.get(w) for w in queries]
    a, b = compacted.arrays("v"), plain.arrays("v")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_strings_of_many_numbers_at_once():
    """``strings`` gives what indexing gives, for stored and added strings, repeated and in any order."""
    v = Vocab.from_words(["a", "Öl", "b", "naïve"])
    v.add("new")
    v.add("ßig")
    ids = np.array([5, 0, 1, 4, 1, 3, 5, 2, 0])
    assert v.strings(ids) == [v[i] for i in ids.tolist()]
    assert v.strings(np.zeros(0, dtype=np.int64)) == []


@pytest.mark.parametrize("buckets", [1, 3])
def test_compacting_keeps_colliding_strings(monkeypatch, buckets):
    """A vocabulary grown and compacted (``compact`` reuses the stored strings' hashes) with strings sharing their
    hash is stored as one made from all its strings at once, and finds each string."""
    _few_hashes(monkeypatch, buckets)
    words = ["a", "bb", "ccc", "dd", "e", "ffff", "ggggg", "Über", "çà"]
    v = Vocab.from_words(words[:3])
    v.add_all(words[3:6])
    v.compact()
    v.add_all(words[6:])
    v.compact()
    a, b = v.arrays("v"), Vocab.from_words(words).arrays("v")
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert v.numbers(words + ["zz"]).tolist() == list(range(len(words))) + [-1]


@settings(max_examples=60, deadline=None)
@given(WORDS, WORDS, st.integers(1, 7))
def test_chunks_walk_the_strings_in_order(stored, added, size):
    """``chunks`` gives every string once, in order, ``size`` at a time (the last chunk the rest), over stored
    and added strings alike, and a ``compact`` between two chunks changes nothing."""
    v = Vocab.from_words(stored)
    v.add_all([w for w in added if w not in stored])
    want = list(v)
    got = []
    for chunk in v.chunks(size):
        assert 0 < len(chunk) <= size
        got.append(chunk)
        v.compact()
    assert [w for c in got for w in c] == want and all(len(c) == size for c in got[:-1])
