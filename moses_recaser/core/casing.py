"""The case-tag scheme (paper section 1) and the project's one lowercasing.

Lowercasing is Python's ``str.lower()`` of the whole token (Unicode default case mapping,
including the Greek final-sigma rule). A recased token ``v`` of an input token ``w`` must satisfy
``lower(v) == lower(w)`` and have the same length, but for one character: ``İ`` (U+0130), whose
lowercase is two, ``i`` and a combining dot (U+0307), so that lowercased ``i̇stanbul`` can come back as
``İstanbul``. Other mappings that change length (``ß`` -> ``SS``) are never produced; such characters
keep their input form. So do the four second capitals of a letter that has its own (``VARIANTS``: KELVIN SIGN,
OHM SIGN, ANGSTROM SIGN, GREEK CAPITAL THETA SYMBOL): KELVIN SIGN lowercases to ``k``, whose capital is ``K``, so
case mapping cannot bring it back; and no character becomes one. A changed code point changes by case mapping alone.

Tags, over the *cased* characters of a token (those with ``isupper()`` or ``islower()``):

- ``AN``: no cased character (digits, punctuation, CJK): ``2006``, ``,``, ``北京``;
- ``AL``: every cased character lower: ``house``, ``l'homme``, ``3d``;
- ``IU``: the first cased character upper, the rest lower: ``House``, ``L'homme``; a token with a
  single cased character that is upper is IU, not AU (``I``, ``A``, ``3D``, ``X-2``);
- ``AU``: two or more cased characters, all upper: ``NATO``, ``U.S.``;
- ``MX``: anything else: ``McDonald``, ``iPhone``.

Moses-escaped characters (``&apos;``, ``&quot;``, ``&amp;``, ``&#124;`` ...) count as punctuation:
``&quot;`` is AN, ``&apos;s`` is AL, and IU(``&apos;malley``) is ``&apos;Malley``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from enum import IntEnum
from functools import lru_cache
from itertools import chain

# Moses-escaped characters (&amp; &apos; &quot; &lt; &gt; &#124; &#91; &#93;) are punctuation, not
# letters: casing skips over them ("&apos;malley" -> "&apos;Malley", never "&Apos;malley").
_ENTITY = re.compile(r"&(?:[a-z]+|#[0-9]+);")


class Tag(IntEnum):
    AL = 0
    IU = 1
    AU = 2
    MX = 3
    AN = 4


TAG_NAMES = [t.name for t in Tag]


def lower(token: str) -> str:
    """The project's lowercasing (see the module docstring)."""
    return token.lower()


def _masked(token: str) -> str:
    """The token with escaped entities blanked out (same length), so their letters do not count."""
    if "&" not in token:
        return token
    return _ENTITY.sub(lambda m: "\0" * len(m.group(0)), token)


@lru_cache(maxsize=1 << 18)
def tag(token: str) -> Tag:
    if token and "&" not in token:  # str.islower/isupper test the same characters as the loop below, in C
        if token.islower():
            return Tag.AL
        if token.isupper():
            return Tag.AU if sum(map(str.isupper, token)) > 1 else Tag.IU
        if token[0].isupper() and token[1:].islower():
            return Tag.IU
    return tag_by_characters(token)


def tag_by_characters(token: str) -> Tag:
    """``tag``'s definition, character by character (``tag`` takes shortcuts for the common cases)."""
    n_cased = 0
    n_upper = 0
    first_upper = False
    for c in _masked(token):
        if c.isupper() or c.istitle():  # a titlecase letter ('ǅ', 'ǈ': neither upper nor lower) capitalizes
            if n_cased == 0:
                first_upper = True
            n_cased += 1
            n_upper += 1
        elif c.islower():
            n_cased += 1
    if n_cased == 0:
        return Tag.AN
    if n_upper == 0:
        return Tag.AL
    if first_upper and n_upper == 1:
        return Tag.IU
    if n_upper == n_cased:
        return Tag.AU
    return Tag.MX


DOTTED_I = "\u0130"  # İ: lower() gives "i\u0307", two characters
_DOTTED_I_PARTS = "I\u0307"  # what upper-casing "i\u0307" a character at a time gives
# the characters whose one-character lowercase has a one-character capital other than them (K, Ω, Å, Θ); ẞ is
# not one: the capital of its lowercase ß is the two letters SS
VARIANTS = frozenset("\u03f4\u2126\u212a\u212b")


def variant_positions(text: str) -> list[int]:
    """Where ``text`` has a ``VARIANTS`` character, ``İ`` counted as the two characters of its lowercase."""
    if not any(v in text for v in VARIANTS):  # four substring searches: much faster than a set's test per character
        return []
    return [i for i, c in enumerate(text.replace(DOTTED_I, _DOTTED_I_PARTS)) if c in VARIANTS]


def _dotted(out: str) -> str:
    """``I`` + combining dot above as the one character ``İ`` (both lowercase to ``i̇``)."""
    return out.replace(_DOTTED_I_PARTS, DOTTED_I) if _DOTTED_I_PARTS in out else out


def _upper_char(c: str) -> str:
    u = c.upper()
    return u if len(u) == 1 and u.lower() == c.lower() else c


def _title_char(c: str) -> str:
    """A word's first letter capitalized: its titlecase form where that is one character of the same lowercase
    ('ǆ' gives 'ǅ', not the upper 'Ǆ'; 'ᾳ' gives 'ᾼ', whose upper case is two letters), else ``_upper_char``."""
    t = c.title()
    return t if len(t) == 1 and t.lower() == c.lower() else _upper_char(c)


def case_like(c: str, model: str) -> str:
    """The character ``c`` in the case of the character ``model``: upper or titlecase ('ǅ') where that is one
    character of the same lowercase, else as it is."""
    if model.isupper():
        return _upper_char(c)
    return _title_char(c) if model.istitle() else c


def upper_all(token: str) -> str:
    """AU(w): every character upper-cased where that keeps the length and the lowercase."""
    if token.isascii() and "&" not in token:
        return token.upper()  # the common case, and always length- and lowercase-preserving
    mask = _masked(token)
    # whole-token check first: Greek final sigma only round-trips in context (ΟΔΟΣ -> οδος)
    out = _dotted("".join(c if m == "\0" or len(u := c.upper()) != 1 else u for c, m in zip(token, mask)))
    if lower(out) == lower(token):
        return out
    out = _dotted("".join(c if m == "\0" else _upper_char(c) for c, m in zip(token, mask)))
    return out if lower(out) == lower(token) else token


def upper_first(token: str) -> str:
    """IU(w): the first cased character upper-cased, the rest as in lower(w)."""
    if token.isascii() and "&" not in token:  # the common case: ASCII cased characters are the letters
        low = token.lower()
        for i, c in enumerate(low):
            if c.isalpha():
                return low[:i] + c.upper() + low[i + 1 :]
        return token
    low = lower_all(token)
    for i, c in enumerate(_masked(low)):
        if c.isupper() or c.islower() or c.istitle():
            out = _dotted(low[:i] + _title_char(c) + low[i + 1 :])
            return out if lower(out) == lower(token) else token
    return token


def lower_all(token: str) -> str:
    """AL(w): the token lowercased, but for a length-changing lowercase ('İ': the token as given) and
    ``VARIANTS``, which keep their form."""
    low = lower(token)
    if len(low) != len(token):
        return token
    return low if VARIANTS.isdisjoint(token) else "".join(c if c in VARIANTS else x for c, x in zip(token, low))


def apply(t: Tag, token: str) -> str:
    """Surface form of tag ``t`` on ``token`` (MX has no single form: the token is returned as is)."""
    if t is Tag.AL:
        return lower_all(token)
    if t is Tag.IU:
        return upper_first(token)
    if t is Tag.AU:
        return upper_all(token)
    return token


def is_recasing_of(candidate: str, token: str) -> bool:
    """True when ``candidate`` differs from ``token`` in case only: the same lowercase, the same length
    counting ``İ`` as the two characters of its lowercase, and the same ``VARIANTS`` in the same places."""
    return (
        lower(candidate) == lower(token)
        and len(candidate) + candidate.count(DOTTED_I) == len(token) + token.count(DOTTED_I)
        and variant_positions(candidate) == variant_positions(token)
    )


@lru_cache(maxsize=1 << 18)
def is_capitalized(token: str) -> bool:
    """Has an upper-case first cased character (IU, AU, or MX starting upper)."""
    if "&" not in token and token:
        if token[0].isupper():
            return True
        if token[0].islower():
            return False
    return is_capitalized_by_characters(token)


def is_capitalized_by_characters(token: str) -> bool:
    """``is_capitalized``'s definition, character by character (a titlecase letter, 'ǅ', capitalizes)."""
    for c in _masked(token):
        if c.isupper() or c.istitle():
            return True
        if c.islower():
            return False
    return False


@lru_cache(maxsize=1 << 18)
def has_letter(token: str) -> bool:
    return any(c.isalpha() for c in _masked(token))


@lru_cache(maxsize=1 << 18)
def strip_diacritics(token: str) -> str:
    """The token without combining marks (NFD), for matching names across languages (Montréal ~ Montreal)."""
    if token.isascii():
        return token  # nothing to decompose
    decomposed = unicodedata.normalize("NFD", token)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


# escaped punctuation as the Moses tokenizer writes it
_ESCAPED = {"&quot;", "&apos;", "&amp;", "&lt;", "&gt;", "&#91;", "&#93;", "&#124;"}


@lru_cache(maxsize=1 << 16)
def is_punctuation(token: str) -> bool:
    if token in _ESCAPED:
        return True
    return bool(token) and all(unicodedata.category(c)[0] in "PS" for c in token)


def is_upper_word(token: str) -> bool:
    """Every cased character upper, and at least one; escaped entities (``&apos;``) do not count."""
    token = _masked(token)
    if token.isascii():
        return token.isupper()  # the same test for ASCII
    cased = [c for c in token if c.isupper() or c.islower()]
    return bool(cased) and all(c.isupper() for c in cased)


def has_lower(token: str) -> bool:
    """A lowercase letter outside escaped entities: "L&apos;HOMME" has none."""
    return any(map(str.islower, _masked(token)))


def has_case(tokens: Sequence[str]) -> bool:
    """Some token differs from its lowercase: the line came with case (truecased or cased MT output)."""
    return any(lower(t) != t for t in tokens)


def tells_case(tokens: Sequence[str]) -> bool:
    """The line's case says something of its words: it has a capital, and a lowercase letter too. A line in
    capitals (a headline, a system that writes them) is as mute on its words' case as a lowercased one."""
    return has_case(tokens) and any(c.islower() for t in tokens for c in t)


def check_case_only_all(inputs: Sequence[Sequence[str]], outputs: Sequence[Sequence[str]]) -> None:
    """``check_case_only`` on every sentence, in one go when all is well."""
    if list(map(len, inputs)) == list(map(len, outputs)):
        flat_in, flat_out = list(chain.from_iterable(inputs)), list(chain.from_iterable(outputs))
        # equal token lengths, and the lowercase of the joined tokens: "\n" ends a word for the
        # final-sigma rule as the end of a token does, so this is the per-token test (an "İ" made
        # from "i̇" changes a length: such sentences take the slow way)
        joined_in, joined_out = "\n".join(flat_in), "\n".join(flat_out)
        if (
            list(map(len, flat_in)) == list(map(len, flat_out))
            and joined_in.lower() == joined_out.lower()
            and variant_positions(joined_in) == variant_positions(joined_out)
        ):
            return
    for inp, out in zip(inputs, outputs, strict=True):
        check_case_only(inp, out)


def check_case_only(inp: Sequence[str], out: Sequence[str]) -> None:
    """Every output token a recasing of its input token (``is_recasing_of``)."""
    if len(inp) != len(out) or not all(map(is_recasing_of, out, inp)):
        raise AssertionError(f"internal error: recasing changed tokens: {list(inp)} -> {list(out)}")
