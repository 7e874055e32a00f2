"""GEN: the cased candidates of one output token."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracles import takes_source_word

from moses_recaser.core import casing
from moses_recaser.model.candidates import Candidates
from moses_recaser.model.gen import MAX_CANDIDATES, gen
from moses_recaser.model.prior import CasePrior
from moses_recaser.stats.in_memory import count_text
from moses_recaser.stats.tables import Tables


@pytest.mark.parametrize(
    "token,seen,source,want",
    [
        ("house", (), (), ["house", "House", "HOUSE"]),
        ("HOUSE", (), (), ["house", "House", "HOUSE"]),  # the input's own case does not matter
        ("2014", (), (), ["2014"]),
        ("a", (), (), ["a", "A"]),  # IU and AU coincide
        ("montreal-trudeau", (), (), ["montreal-trudeau", "Montreal-trudeau", "MONTREAL-TRUDEAU", "Montreal-Trudeau"]),
        ("&apos;malley", (), (), ["&apos;malley", "&apos;Malley", "&apos;MALLEY"]),
        ("straße", (), (), ["straße", "Straße", "STRAßE"]),
        ("iphone", ("iPhone", "IPHONE"), (), ["iphone", "Iphone", "IPHONE", "iPhone"]),
        ("mcdonald", (), ("McDonald", "house"), ["mcdonald", "Mcdonald", "MCDONALD", "McDonald"]),
        ("montreal", (), ("Montréal",), ["montreal", "Montreal", "MONTREAL"]),  # diacritics: the case pattern
        ("ebay", (), ("EBay", "eBay"), ["ebay", "Ebay", "EBAY", "EBay", "eBay"]),
        # a titlecase letter in the pattern is copied as one ('ǅ'): it was taken for a lowercase letter
        ("xǆungla", (), ("xǅüngla",), ["xǆungla", "Xǆungla", "XǄUNGLA", "xǅungla"]),
    ],
)
def test_gen_hand_cases(token, seen, source, want):
    assert gen(token, seen, taken(source, token)) == want


def taken(source, token: str) -> list[str]:
    """The aligned source words GEN takes (the extractor's test, here its oracle)."""
    return [s for s in source if takes_source_word(s, token)]


def test_gen_caps_training_forms_but_keeps_its_own_and_the_sources():
    seen = ["aBc", "abC", "ABc", "AbC", "aBC"]
    assert gen("abc", seen, (), max_candidates=5) == ["abc", "Abc", "ABC", "aBc", "abC"]
    assert gen("abc", seen, ("AbC",), max_candidates=3) == ["abc", "Abc", "ABC", "AbC"]


_token = st.lists(
    st.sampled_from(["a", "B", "é", "É", "ß", "ς", "Σ", "İ", "ǅ", "3", "-", "'", "&apos;", "&", "x"]),
    min_size=1,
    max_size=6,
).map("".join) | st.text(min_size=1, max_size=5)


@given(_token, st.lists(_token, max_size=3), st.lists(_token, max_size=3))
def test_gen_gives_distinct_recasings_starting_with_the_tag_forms(token, seen, source):
    seen = [s for s in seen if casing.lower(s) == casing.lower(token)] + [casing.upper_all(token)]
    out = gen(token, seen, taken(source, token))
    assert len(out) == len(set(out))
    assert all(casing.is_recasing_of(f, token) for f in out)
    low = casing.lower_all(token)
    tag_forms = [
        f
        for f in dict.fromkeys((low, casing.upper_first(low), casing.upper_all(low)))
        if casing.is_recasing_of(f, token)
    ]
    assert out[: len(tag_forms)] == tag_forms


def test_gen_gives_the_dotted_capital_i_of_a_lowercased_turkish_name():
    low = "İzmir".lower()
    assert gen(low, ["İzmir"]) == [low, "İzmir", "İZMIR"]


def test_gen_joins_the_parts_training_forms_for_an_unseen_hyphenated_word():
    lines = ["x the QR and the Code and YouTube", "x a Krise and a Bundestagsfraktion"] * 3
    tables = Tables.from_counts(count_text((x.split() for x in lines), order=0))
    cands = Candidates(tables, CasePrior(tables), None, MAX_CANDIDATES)
    assert cands.gen_forms("qr-code") == ["QR-Code"]
    assert "QR-Code" in gen("qr-code", cands.gen_forms("qr-code"))
    # an unseen part: the case its shape makes likelier (like "Bundestagsfraktion", "Krise")
    assert cands.gen_forms("youtube-plattfraktion") == ["YouTube-Plattfraktion"]
    # a seen word: its training forms
    assert cands.gen_forms("youtube") == ["YouTube"] and not cands.gen_forms("nothing")
