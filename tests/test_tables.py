"""Table values on a hand-made toy bitext (every figure worked out by hand in the comments)."""

from __future__ import annotations

import pytest

from moses_recaser.casing import Tag
from moses_recaser.tables import Tables, count_triples
from moses_recaser.triples import Triple

TOY = [
    Triple(0, ["Le", "chat"], ["The", "cat"], links=[(0, 0), (1, 1)]),
    Triple(1, ["le", "chien"], ["the", "dog"], links=[(0, 0), (1, 1)]),
    Triple(2, ["OK"], ["OK"], links=[(0, 0)]),
    Triple(3, [",", "le", "chat"], [",", "the", "cat", "."], links=[(1, 1), (2, 2)]),
]


@pytest.fixture(scope="module")
def tables() -> Tables:
    return Tables.from_counts(count_triples(TOY))


def test_cased_translation_table(tables):
    t = tables.cased
    # links: Le-The, chat-cat x2, le-the x2, chien-dog, OK-OK: N = 7 links, 5 linked target types
    # p0(E) = (c(E) + 1) / (N + |V| + 1) = (c(E) + 1) / 13
    assert t.p0("The") == pytest.approx(2 / 13)
    assert t.p0("cat") == pytest.approx(3 / 13)
    assert t.p0("Cat") == pytest.approx(1 / 13)  # unseen form
    # Witten-Bell: p(E|F) = (c(F,E) + T(F) p0(E)) / (c(F) + T(F)); for "Le": c = 1, T = 1
    assert t.prob("Le", "The") == pytest.approx((1 + 2 / 13) / 2)
    assert t.prob("Le", "the") == pytest.approx((0 + 3 / 13) / 2)
    # "chat": c(chat, cat) = 2, T = 1
    assert t.prob("chat", "cat") == pytest.approx((2 + 3 / 13) / 3)
    # unseen source word: the unigram
    assert t.prob("Chat", "cat") == pytest.approx(3 / 13)
    assert t.prob("nowhere", "Nowhere") > 0


def test_lowercased_t_table(tables):
    t = tables.lower
    # lowercased links: le-the x3, chat-cat x2, chien-dog, ok-ok: N = 7, 4 types -> p0 = (c + 1) / 12
    assert t.p0("the") == pytest.approx(4 / 12)
    assert t.prob("le", "the") == pytest.approx((3 + 4 / 12) / 4)
    assert t.prob("le", "cat") == pytest.approx((0 + 3 / 12) / 4)


def test_tag_table(tables):
    # tag pairs over links: IU-IU (Le/The), AL-AL x5, AU-AU (OK/OK); add-one over 5 tags
    assert tables.tags.prob(Tag.IU, Tag.IU) == pytest.approx((1 + 1) / (1 + 5))
    assert tables.tags.prob(Tag.AL, Tag.AL) == pytest.approx((5 + 1) / (5 + 5))
    assert tables.tags.prob(Tag.IU, Tag.AL) == pytest.approx(1 / 10)
    assert tables.tags.prob(Tag.AU, Tag.MX) == pytest.approx(1 / 5)  # unseen source tag: uniform
    assert tables.tags.probs().sum(axis=1) == pytest.approx([1.0] * 5)


def test_forms(tables):
    f = tables.forms
    counts = dict(zip(f.vocab, f.count.tolist()))
    assert counts == {",": 1, ".": 1, "OK": 1, "The": 1, "cat": 2, "dog": 1, "the": 2}
    initial = {w: int(c) for w, c in zip(f.vocab, f.initial) if c}
    # the first word with a letter: The, the, OK, and "the" after the comma
    assert initial == {"The": 1, "the": 2, "OK": 1}
    groups = f.by_lower()
    assert [f.vocab[i] for i in groups["the"]] == ["the", "The"]
