"""The case-tag scheme and the case-only surface forms."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracles import positional

from moses_recaser.core import casing
from moses_recaser.core.casing import Tag
from moses_recaser.core.sentences import positional_words
from moses_recaser.model.gen import gen


@pytest.mark.parametrize(
    "token,tag",
    [
        ("house", Tag.AL),
        ("House", Tag.IU),
        ("NATO", Tag.AU),
        ("U.S.", Tag.AU),
        ("I", Tag.IU),
        ("A", Tag.IU),
        ("3D", Tag.IU),
        ("x-2", Tag.AL),
        ("McDonald", Tag.MX),
        ("iPhone", Tag.MX),
        ("2006", Tag.AN),
        (",", Tag.AN),
        ("北京", Tag.AN),
        ("&amp;", Tag.AN),
        ("&quot;", Tag.AN),
        ("&apos;s", Tag.AL),
        ("&apos;Malley", Tag.IU),
        ("AT&amp;T", Tag.AU),
        ("ÉTÉ", Tag.AU),
        ("été", Tag.AL),
        ("L'homme", Tag.IU),
        ("l'Homme", Tag.MX),
        ("straße", Tag.AL),
        ("ΟΔΟΣ", Tag.AU),
        ("", Tag.AN),
    ],
)
def test_tags(token, tag):
    assert casing.tag(token) == tag


@pytest.mark.parametrize(
    "token,upper,lower",
    [
        ("OMS", True, False),
        ("L&apos;OMS", True, False),
        ("&apos;S", True, False),
        ("&quot;", False, False),
        ("l&apos;OMS", False, True),
        ("Oms", False, True),
        ("ÉTÉ", True, False),
        ("2006", False, False),
    ],
)
def test_escaped_entities_are_not_letters_of_the_word(token, upper, lower):
    assert casing.is_upper_word(token) is upper
    assert casing.has_lower(token) is lower


# tokens mixing cased letters of every kind (incl. titlecase digraphs, final sigma, Other_Lowercase),
# uncased characters and Moses entities, so the shortcuts of tag and is_capitalized meet every case
_token = st.lists(
    st.sampled_from(
        ["a", "A", "é", "É", "ǅ", "ǆ", "Ǆ", "ß", "ς", "Σ", "ª", "ʰ", "3", "-", "'", "北", "&amp;", "&apos;", "&", ";"]
    ),
    max_size=6,
).map("".join) | st.text(max_size=5)


@given(_token)
def test_tag_shortcuts_agree_with_the_definition(token):
    assert casing.tag(token) == casing.tag_by_characters(token)
    assert casing.is_capitalized(token) == casing.is_capitalized_by_characters(token)


@pytest.mark.parametrize(
    "token,iu,au",
    [
        ("house", "House", "HOUSE"),
        ("l'homme", "L'homme", "L'HOMME"),
        ("(hello", "(Hello", "(HELLO"),
        ("straße", "Straße", "STRAßE"),  # ß -> SS would change the length: kept
        ("ßa", "ßa", "ßA"),
        ("οδος", "Οδος", "ΟΔΟΣ"),
        ("2006", "2006", "2006"),
        ("&apos;malley", "&apos;Malley", "&apos;MALLEY"),
        ("&quot;", "&quot;", "&quot;"),
        ("at&amp;t", "At&amp;t", "AT&amp;T"),
        ("ǆ", "ǅ", "Ǆ"),  # a digraph: IU title-cases (ǅ, as str.capitalize does), AU upper-cases (Ǆ)
    ],
)
def test_surface_forms_change_case_only(token, iu, au):
    got_iu = casing.apply(Tag.IU, token)
    got_au = casing.apply(Tag.AU, token)
    assert casing.is_recasing_of(got_iu, token) and casing.is_recasing_of(got_au, token)
    assert got_au == au
    assert got_iu == iu


def test_length_changing_lowercase_is_left_alone():
    assert casing.lower_all("İstanbul") == "İstanbul"
    assert casing.is_recasing_of(casing.apply(Tag.IU, "İstanbul"), "İstanbul")
    assert casing.upper_all("straße") == "STRAßE"  # not "STRASSE": a token never changes


def test_dotted_capital_i_comes_back_from_its_lowercase():
    low = "İstanbul".lower()  # "i" + U+0307 + "stanbul", one character longer
    assert len(low) == len("İstanbul") + 1
    assert casing.upper_first(low) == "İstanbul" and casing.upper_all(low) == "İSTANBUL"
    assert casing.is_recasing_of("İstanbul", low) and casing.is_recasing_of(low, "İstanbul")
    assert not casing.is_recasing_of("Istanbul", low)  # the dot is a letter's part, not case
    assert casing.tag("İstanbul") is Tag.IU


@pytest.mark.parametrize(
    "tokens,expected",
    [
        (["The", "cat", "."], {0}),
        (["&quot;", "Yes", "!", "He", "left", "."], {1, 3}),
        ([",", "2006", "la", "maison", "?", "Oui"], {2, 5}),
        ([], set()),
    ],
)
def test_positional(tokens, expected):
    assert positional(tokens) == expected
    assert positional_words([tokens]) == [expected]  # the batch form


def test_titlecase_letters_capitalize_a_word():
    """'ǅ', 'ǈ', 'ǋ', 'ǲ' (Unicode's titlecase letters, neither upper nor lower) begin a capitalized word: 'ǅungla'
    was tagged all lowercase, and the capital of 'ǆungla' was the upper-case 'Ǆungla' ('DŽungla'), so a source
    word 'ǅungla' could not be copied."""
    assert casing.tag("ǅungla") == Tag.IU and casing.is_capitalized("ǅungla")
    assert casing.tag("ǄUNGLA") == Tag.AU and casing.tag("ǆungla") == Tag.AL
    assert casing.upper_first("ǆungla") == "ǅungla" and casing.upper_all("ǆungla") == "ǄUNGLA"
    assert casing.upper_first("ǉubljana") == "ǈubljana"
    assert casing.upper_first("ᾳδης") == "ᾼδης"  # (its upper case is two letters, 'ΑΙ': it stayed 'ᾳ')
    assert casing.upper_first("straße") == "Straße" and casing.upper_first("ßa") == "ßa"


# Case-only, code point by code point: each changed code point is a case mapping of the input's, or the input's
# one of it (Σ of ς, ẞ of ß), and a second capital of a letter that has its own (KELVIN SIGN: its lowercase k has
# the capital K) neither comes nor goes
def _second_capital(c: str) -> bool:
    low = c.lower()
    return len(low) == 1 and low != c and len(low.upper()) == 1 and c not in (low.upper(), low.title())


def _mappings(c: str) -> tuple[str, ...]:
    return (c.upper(), c.lower(), c.title())


def changes_case_only(out: str, inp: str) -> bool:
    a, b = inp.replace("İ", "I\u0307"), out.replace("İ", "I\u0307")  # İ is the two characters of its lowercase
    return len(a) == len(b) and all(
        x == y or (not _second_capital(x) and not _second_capital(y) and (y in _mappings(x) or x in _mappings(y)))
        for x, y in zip(a, b)
    )


def test_the_second_capitals_are_the_four_compatibility_characters():
    found = {chr(i) for i in range(0x110000) if _second_capital(chr(i))} - {"İ", "ẞ"}
    assert found == casing.VARIANTS == {"\u212a", "\u2126", "\u212b", "\u03f4"}
    # İ and ẞ are not: İ's lowercase is two characters, and the capital of ẞ's lowercase ß is two letters, "SS"
    assert len("İ".lower()) == 2 and "ß".upper() == "SS"


@pytest.mark.parametrize("variant,letter", [("\u212a", "K"), ("\u2126", "Ω"), ("\u212b", "Å"), ("\u03f4", "Θ")])
def test_compatibility_capitals_keep_their_form(variant, letter):
    """The trial's finding: KELVIN SIGN came out as K (or k), and likewise OHM SIGN, ANGSTROM SIGN and GREEK
    CAPITAL THETA SYMBOL."""
    low = letter.lower()
    for t in (Tag.AL, Tag.IU, Tag.AU):
        assert casing.apply(t, variant) == variant and casing.apply(t, variant + "x")[0] == variant
    for form in (letter, low):
        assert not casing.is_recasing_of(form, variant) and not casing.is_recasing_of(variant, form)
    assert gen(variant, [letter, low], [letter]) == [variant]
    assert variant not in gen(low, [variant]) and casing.is_recasing_of(variant + "X", variant + "x")


_odd = st.lists(
    st.sampled_from(
        ["k", "K", "\u212a", "ω", "Ω", "\u2126", "å", "Å", "\u212b", "θ", "Θ", "\u03f4", "ϑ", "ß", "ẞ", "ς", "σ", "Σ"]
        + ["İ", "i\u0307", "ı", "i", "I", "ǅ", "ǆ", "Ǆ", "µ", "ſ", "ᾳ", "-", "&apos;", "3"]
    ),
    min_size=1,
    max_size=6,
).map("".join)


@given(_odd, st.lists(_odd, max_size=3), st.lists(_odd, max_size=3))
def test_property_every_changed_code_point_changes_by_case_mapping_alone(token, seen, source):
    low = casing.lower_all(token)
    forms = [casing.apply(t, x) for t in Tag for x in (token, low)]
    forms += gen(token, [s for s in seen if casing.lower(s) == casing.lower(token)], source)
    for form in forms:
        assert changes_case_only(form, token), (token, form)
    for other in seen + source:  # is_recasing_of, the check of every output token, allows no other change
        assert not casing.is_recasing_of(other, token) or changes_case_only(other, token), (token, other)
    assert [c for c in token if c in casing.VARIANTS] == [c for c in low if c in casing.VARIANTS]


def test_recasing_keeps_compatibility_characters(tico):
    from moses_recaser.model.recaser import Recaser

    line = "the temperature is 5 \u212a , 3 \u2126 , 2 \u212b and \u03f4 \u212a\u212ba ."
    (out,) = Recaser.load(tico / "model").recase_lines([line])
    assert all(map(changes_case_only, out.split(), line.split())), out
    assert [c for c in out if c in casing.VARIANTS] == list("\u212a\u2126\u212b\u03f4\u212a\u212b")
