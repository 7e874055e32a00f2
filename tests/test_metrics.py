"""Metrics on hand-computed cases."""

from __future__ import annotations

import pytest

from moses_recaser.core.casing import Tag
from moses_recaser.harness.metrics import case_scores, paired_bootstrap_precision
from moses_recaser.io.errors import RecaserError


def test_precision_f1_and_confusion_by_hand():
    refs = [["The", "US", "said", "no", "."], ["Paris", "is", "big"]]
    hyps = [["The", "us", "Said", "no", "."], ["paris", "is", "big"]]
    s = case_scores(hyps, refs)
    # 8 words, correct: The, no, ., is, big = 5
    assert (s.correct, s.words) == (5, 8) and s.precision == pytest.approx(5 / 8)
    # reference words with an upper-case letter: The, US, Paris (3); output ones: The, Said (2); hits: The (1)
    p, r = 1 / 2, 1 / 3
    assert s.f1 == pytest.approx(2 * p * r / (p + r))
    assert s.confusion[Tag.AU, Tag.AL] == 1  # US -> us
    assert s.confusion[Tag.AL, Tag.IU] == 1  # said -> Said
    assert s.confusion[Tag.IU, Tag.AL] == 1  # Paris -> paris
    assert s.confusion[Tag.AN, Tag.AN] == 1
    assert s.per_sentence == [(3, 5), (2, 3)]
    assert "ref\\out" in s.confusion_table()


def test_outputs_that_differ_beyond_case_are_refused():
    with pytest.raises(RecaserError, match="differ in more than case"):
        case_scores([["a", "b"]], [["a", "c"]])
    with pytest.raises(ValueError):
        case_scores([["a"]], [["a"], ["b"]])


def test_paired_bootstrap():
    refs = [["A", "b"]] * 50
    good = case_scores([["A", "b"]] * 50, refs)
    bad = case_scores([["a", "b"]] * 50, refs)
    assert paired_bootstrap_precision(good, bad, samples=200) < 0.01
    assert paired_bootstrap_precision(bad, good, samples=200) > 0.99
