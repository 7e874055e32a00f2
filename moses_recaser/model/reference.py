"""A reference's case carried over to decoder output, which differs from the reference in more than case.

The output's words are matched to the reference's in order (longest common blocks of lowercase words,
difflib's matching), and a matched word takes the reference word's form. Capitals that position explains
(the first word with a letter, and the first after ``.``, ``!``, ``?``: ``sentences.positional_words``) do
not carry over to a place where position does not explain them: such a word stays undecided. A word
moved to a sentence start takes its capital there. Undecided words are None: weights fitted on such output
sum over their forms (``crf.batch_objective``), and precision on it counts decided words only.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from moses_recaser.core import casing
from moses_recaser.core.casing import Tag
from moses_recaser.core.sentences import positional_words


def carry_case(output: Sequence[str], reference: Sequence[str]) -> list[str | None]:
    """For each output word, its form in the reference, or None where the reference does not decide it."""
    out_low = [casing.lower(w) for w in output]
    ref_low = [casing.lower(w) for w in reference]
    out_pos, ref_pos = positional_words([output, reference])
    carried: list[str | None] = [None] * len(output)
    matcher = SequenceMatcher(None, out_low, ref_low, autojunk=False)
    for block in matcher.get_matching_blocks():
        for d in range(block.size):
            i, j = block.a + d, block.b + d
            form = reference[j]
            if not casing.is_recasing_of(form, output[i]):
                continue
            if i in out_pos and j not in ref_pos and casing.tag(form) is Tag.AL:
                form = casing.upper_first(form)
            elif j in ref_pos and i not in out_pos and casing.tag(form) is Tag.IU:
                continue  # a capital due to the reference's word order, undecided here
            carried[i] = form
    return carried
