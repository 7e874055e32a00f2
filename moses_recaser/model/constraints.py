"""Constraints: output words whose form a rule fixes before the CRF decodes, with no weight to learn.

Some cases are plain from the input but too rare in dev data for a weight to be learned: a source line in
capitals, a word the decoder could not translate and copied through. Each rule is a row of ``CONSTRAINTS``
that names the fixed form of some words of a batch; a fixed word's GEN is that one form, so Viterbi takes
it, and its neighbours see it through the LM. The first rule to fix a word wins. Rules apply when
recasing, not to the dev lattices, where the reference decides. ``--explain`` names the rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.sentences import Layout
from moses_recaser.core.triples import Triple
from moses_recaser.model.candidates import Candidates

ALL_CAPS_MIN_WORDS = 2  # all-upper words (two or more cased letters) a line in capitals has
# a sentence end inside a token: . ? or ! after two letters or digits and before two letters ('infection.the')
INNER_END = re.compile(r"(?<=[^\W_]{2})[.?!](?=[^\W\d_]{2})")
ADDRESS = re.compile(r"www\.|://|@|/")


@dataclass
class ConstraintInputs:
    """A batch as the rules read it: lowercased triples, their flat tokens and per-word facts."""

    triples: Sequence[Triple]
    layout: Layout
    target: list[str]  # (N,) lowercased output tokens
    source: list[str]  # (M,) cased source tokens
    tgt_positional: np.ndarray  # (N,) the word's capital would be due to its position
    src_letter: np.ndarray  # (M,) the source word has a letter (of any script: CJK too)
    src_lower: np.ndarray  # (M,) the source word has a lowercase letter
    src_upper: np.ndarray  # (M,) the source word is all upper with two or more cased letters (tag AU)
    pair_pos: np.ndarray  # (P,) (output word, aligned source word) pairs, flat indices
    pair_src: np.ndarray
    candidates: Candidates  # the training target's forms of a word (seen, likeliest, starts)

    @cached_property
    def all_caps(self) -> np.ndarray:
        """(S,) the source line is written in capitals: no lowercase letter, at least ALL_CAPS_MIN_WORDS
        all-upper words, and those at least half its words with a letter (a Chinese line holds no lowercase
        letter, and may hold two acronyms, 'PCOO' and 'DZBB')."""
        S = len(self.triples)
        sent = self.layout.src_sent
        letter = np.bincount(sent, weights=self.src_letter, minlength=S)
        lower = np.bincount(sent, weights=self.src_lower, minlength=S)
        upper = np.bincount(sent, weights=self.src_upper, minlength=S)
        return (lower == 0) & (upper >= ALL_CAPS_MIN_WORDS) & (2 * upper >= letter)


def _all_caps(x: ConstraintInputs) -> dict[int, str]:
    out: dict[int, str] = {}
    for s in np.flatnonzero(x.all_caps).tolist():
        g0 = int(x.layout.tgt_start[s])
        for g in range(g0, g0 + int(x.layout.n_tgt[s])):
            if casing.has_letter(x.target[g]):
                out[g] = casing.upper_all(x.target[g])
    return out


def _unknown(x: ConstraintInputs) -> dict[int, str]:
    out: dict[int, str] = {}
    marked = [(s, t) for s, t in enumerate(x.triples) if t.unknown and t.source]
    if not marked:
        return out
    aligned: dict[int, list[int]] = {}
    for g, k in zip(x.pair_pos.tolist(), x.pair_src.tolist()):
        aligned.setdefault(g, []).append(k)
    for s, t in marked:
        g0, k0 = int(x.layout.tgt_start[s]), int(x.layout.src_start[s])
        for i in t.unknown:
            g = g0 + i
            # the aligned source words, or without an alignment every source word
            where = aligned.get(g, range(k0, k0 + len(t.source)))
            forms = {x.source[k] for k in where if casing.lower(x.source[k]) == casing.lower(x.target[g])}
            if len(forms) == 1:
                (form,) = forms
                fixed = casing.upper_first(form) if x.tgt_positional[g] and casing.tag(form) is casing.Tag.AL else form
                if casing.is_recasing_of(fixed, x.target[g]):
                    out[g] = fixed
    return out


def _inner_start(x: ConstraintInputs) -> dict[int, str]:
    out: dict[int, str] = {}
    for g, word in enumerate(x.target):
        # one end, not in a web address (which has more: 'travel.gov.gr', or 'www.')
        if len(ends := INNER_END.findall(word)) != 1 or ADDRESS.search(word):
            continue
        before, after = INNER_END.split(word)
        C = x.candidates
        first, forms = C.likeliest(before), C.seen(after)
        # the piece after is a word of the training target ('com' is not), of three letters only if training began
        # sentences with it ('The'), no shorter ('sz' of '000651.sz'); the piece before a lowercase word or a
        # number (not an abbreviation, 'Co.', nor a name's address, 'Bild.de')
        word_after = (
            after.isalpha() and forms and (len(after) > 3 or len(after) == 3 and C.starts(casing.upper_first(after)))
        )
        if not (word_after and casing.lower(first) == first):
            continue
        fixed = (casing.upper_first(first) if x.tgt_positional[g] else first) + ends[0] + casing.upper_first(forms[0])
        if casing.is_recasing_of(fixed, word):
            out[g] = fixed
    return out


@dataclass(frozen=True)
class Constraint:
    name: str
    doc: str
    find: Callable[[ConstraintInputs], dict[int, str]]  # batch word -> its fixed form


CONSTRAINTS: tuple[Constraint, ...] = (
    Constraint(
        "all_caps",
        "the source line is in capitals (no lowercase letter, at least two all-upper words, and at least half "
        "its words with a letter): "
        "every output word with a letter is all upper",
        _all_caps,
    ),
    Constraint(
        "unknown",
        "the decoder marked the word unknown (-mark-unknown) and copied it from the source: "
        "the source word's form (capitalized at the start of a sentence)",
        _unknown,
    ),
    Constraint(
        "inner_start",
        "a sentence start the tokenizer kept inside a token: one . ? or ! between a lowercase word or a number "
        "and a word of the training target (of four letters or more, or three that began sentences there), in a "
        "token that is no web address; the word after takes a capital, each piece its most frequent training form "
        "('infection.The', '2020.Several'; but 'news.com', 'Bild.de', 'Co.are', 'travel.gov.gr')",
        _inner_start,
    ),
)


def fixed_forms(x: ConstraintInputs) -> tuple[dict[int, str], dict[int, str]]:
    """Every fixed word of the batch: its form, and the name of the rule that fixed it."""
    forms: dict[int, str] = {}
    why: dict[int, str] = {}
    for rule in CONSTRAINTS:
        for g, form in rule.find(x).items():
            if g not in forms:
                forms[g], why[g] = form, rule.name
    return forms, why
