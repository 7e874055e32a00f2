"""Table values on a hand-made toy bitext (every figure worked out by hand in the comments)."""

from __future__ import annotations

import pytest

from moses_recaser.core.casing import Tag
from moses_recaser.core.triples import Triple
from moses_recaser.stats.in_memory import count_triples
from moses_recaser.stats.tables import Tables

TOY = [
    Triple(0, ["Le", "chat"], ["The", "cat"], links=[(0, 0), (1, 1)]),
    Triple(1, ["le", "chien"], ["the", "dog"], links=[(0, 0), (1, 1)]),
    Triple(2, ["OK"], ["OK"], links=[(0, 0)]),
    Triple(3, [",", "le", "chat"], [",", "the", "cat", "."], links=[(1, 1), (2, 2)]),
    Triple(4, ["Je", "vois", "Paris"], ["I", "see", "Paris"], links=[(0, 0), (1, 1), (2, 2)]),
]
# Cased and tag tables skip links touching a word capitalized by position (each sentence's first
# word with a letter): Le-The, le-the (x2), OK-OK and Je-I. They keep chat-cat (x2), chien-dog,
# vois-see and Paris-Paris.


@pytest.fixture(scope="module")
def tables() -> Tables:
    return Tables.from_counts(count_triples(TOY))


def test_cased_translation_table(tables):
    t = tables.cased
    # N = 5 kept links, 4 linked target types: p0(E) = (c(E) + 1) / (N + |V| + 1) = (c(E) + 1) / 10
    assert t.p0("Paris") == pytest.approx(2 / 10)
    assert t.p0("cat") == pytest.approx(3 / 10)
    assert t.p0("The") == pytest.approx(1 / 10)  # only seen in a positional link: unseen here
    # Witten-Bell: p(E|F) = (c(F,E) + T(F) p0(E)) / (c(F) + T(F)); for "Paris": c = 1, T = 1
    assert t.prob("Paris", "Paris") == pytest.approx((1 + 2 / 10) / 2)
    assert t.prob("Paris", "paris") == pytest.approx((0 + 1 / 10) / 2)
    # "chat": c(chat, cat) = 2, T = 1
    assert t.prob("chat", "cat") == pytest.approx((2 + 3 / 10) / 3)
    # unseen source words (including the positional "Le"): the unigram
    assert t.prob("Chat", "cat") == pytest.approx(3 / 10)
    assert t.prob("Le", "The") == pytest.approx(1 / 10)
    assert t.prob("nowhere", "Nowhere") > 0


def test_lowercased_t_table(tables):
    t = tables.lower
    # every link counts, lowercased: le-the x3, chat-cat x2, chien-dog, ok-ok, je-i, vois-see,
    # paris-paris: N = 10, 7 types -> p0 = (c + 1) / 18
    assert t.p0("the") == pytest.approx(4 / 18)
    assert t.prob("le", "the") == pytest.approx((3 + 4 / 18) / 4)
    assert t.prob("le", "cat") == pytest.approx((0 + 3 / 18) / 4)


def test_tag_table(tables):
    # tag pairs over kept links: AL-AL x4, IU-IU (Paris); add-one over 5 tags
    assert tables.tags.prob(Tag.IU, Tag.IU) == pytest.approx((1 + 1) / (1 + 5))
    assert tables.tags.prob(Tag.AL, Tag.AL) == pytest.approx((4 + 1) / (4 + 5))
    assert tables.tags.prob(Tag.IU, Tag.AL) == pytest.approx(1 / 9)
    assert tables.tags.prob(Tag.AU, Tag.MX) == pytest.approx(1 / 5)  # unseen source tag: uniform
    assert tables.tags.probs().sum(axis=1) == pytest.approx([1.0] * 5)


def test_forms(tables):
    f = tables.forms
    counts = dict(zip(f.vocab, f.count.tolist()))
    assert counts == {",": 1, ".": 1, "OK": 1, "The": 1, "cat": 2, "dog": 1, "the": 2, "I": 1, "see": 1, "Paris": 1}
    initial = {w: int(c) for w, c in zip(f.vocab, f.initial) if c}
    # the first word with a letter: The, the, OK, "the" after the comma, I
    assert initial == {"The": 1, "the": 2, "OK": 1, "I": 1}
    groups = f.by_lower()
    assert [f.vocab[i] for i in groups["the"]] == ["the", "The"]


def test_tables_round_trip_with_their_packed_pairs(tables, tmp_path):
    import numpy as np

    tables.save(tmp_path)
    again = Tables.load(tmp_path)
    for name in ("cased", "lower"):
        a, b = getattr(tables, name), getattr(again, name)
        assert (b.pairs.keys() == a.pairs.keys()).all() and (b.counts == a.counts).all()
        f = np.repeat(np.arange(-1, len(a.src_vocab)), len(a.tgt_vocab) + 1)
        e = np.tile(np.arange(-1, len(a.tgt_vocab)), len(a.src_vocab) + 1)
        assert (a.probs(f, e) == b.probs(f, e)).all()
        listed = {
            (a.src_vocab[k // len(a.tgt_vocab)], a.tgt_vocab[k % len(a.tgt_vocab)]) for k in a.pairs.keys().tolist()
        }
        for fi, ei in zip(f.tolist(), e.tolist()):  # a listed pair's count, an unlisted one's none
            if fi >= 0 and ei >= 0:
                assert (b.count(a.src_vocab[fi], a.tgt_vocab[ei]) > 0) == ((a.src_vocab[fi], a.tgt_vocab[ei]) in listed)
