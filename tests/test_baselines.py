"""The copy-source rule baseline on hand-made sentences."""

from __future__ import annotations

from moses_recaser.core.triples import Triple
from moses_recaser.harness.baselines import CopySourceBaseline, MosesTruecaserBaseline

CORPUS = [s.split() for s in ["the next day was fine .", "we saw the reason .", "Paris is big ."] * 3]


def test_copy_source_takes_the_case_of_non_positional_source_words():
    rule = CopySourceBaseline(MosesTruecaserBaseline(CORPUS))
    t = Triple(
        0,
        ["Après", "The", "Next", "Day", ",", "la", "fondation", "Reason"],
        ["after", "the", "next", "day", ",", "the", "reason", "foundation"],
    )
    (out,) = list(rule.recase_triples([t]))
    # "The" and "Next" and "Day" and "Reason" are copied; "After" is the sentence start (sacremoses' rule)
    assert out == ["After", "The", "Next", "Day", ",", "The", "Reason", "foundation"]
    # the source's first word is capitalized by its position: nothing to copy from it
    t = Triple(0, ["Reason", "est", "là"], ["the", "reason", "is", "there"])
    (out,) = list(rule.recase_triples([t]))
    assert out[1] == "reason"
    assert "copy-source" in rule.signature
