"""The truecaser (``truecaser.Truecaser``): truecase.perl's rules, and agreement with Moses' own
train-truecaser.perl and truecase.perl on the same text (those need Moses' scripts, as test_ems_moses)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from moses_recaser.model.truecaser import Truecaser, detruecased, sentence_starts
from moses_recaser.moses.tokenizer import tokenizer
from moses_recaser.stats.in_memory import count_text
from moses_recaser.stats.tables import Tables

TICO = Path(__file__).parents[1] / "data" / "tico19" / "tico19-test.en"


def truecaser_of(lines: list[list[str]]) -> Truecaser:
    return Truecaser.from_forms(Tables.from_counts(count_text(lines, order=1)).forms)


def test_rules_of_truecase_perl():
    t = truecaser_of(
        [
            ["In", "the", "city", "of", "Paris", "the", "mayor", "said", "."],
            ["The", "mayor", "of", "Paris", "met", "the", "UN", "."],
            ["He", "said", "the", "un", "is", "not", "the", "UN", "and", "the", "UN", "is", "here", "."],
        ]
    )
    # a sentence start takes the best form; so does the word after '.', ':', '?', '!' and after a delayed start
    assert t.truecase(["The", "mayor", ":", "The", "city", "."]) == ["the", "mayor", ":", "the", "city", "."]
    assert t.truecase(["(", "The", "mayor", ")"]) == ["(", "the", "mayor", ")"]
    # elsewhere a seen form is kept, an unseen form of a known word takes the best, an unknown word is kept
    assert t.truecase(["the", "un", "UN", "Un", "PARIS", "Zorglub"]) == ["the", "un", "UN", "UN", "Paris", "Zorglub"]
    # only non-initial counts make the model: 'In' was only ever initial, so 'in' is unknown and kept
    assert t.truecase(["a", "In"]) == ["a", "In"]


def test_the_same_as_moses_truecaser_on_real_text(moses_scripts, tmp_path):
    """train-truecaser.perl + truecase.perl against Truecaser.from_forms on the same tokenized text: they
    differ only where Moses also starts a sentence inside a line (after ':' and the like), which the form counts
    do not know."""
    scripts = moses_scripts / "recaser"
    tok = tokenizer("en")
    lines = [" ".join(tok(x)) for x in TICO.read_text(encoding="utf-8").splitlines()]
    (tmp_path / "train.en").write_text("".join(x + "\n" for x in lines[:1800]), encoding="utf-8")
    test = "".join(x + "\n" for x in lines[1800:])
    model = tmp_path / "truecase-model.en"
    subprocess.run(["perl", str(scripts / "train-truecaser.perl"), "--model", str(model), "--corpus", str(tmp_path / "train.en")], check=True)  # fmt: skip
    theirs = subprocess.run(
        ["perl", str(scripts / "truecase.perl"), "--model", str(model)],
        input=test,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    ours = truecaser_of([x.split() for x in lines[:1800]])
    pairs = [
        (a, b) for line, perl in zip(lines[1800:], theirs) for a, b in zip(ours.truecase(line.split()), perl.split())
    ]
    assert len(theirs) == 300 and len(pairs) > 7000
    differ = [p for p in pairs if p[0] != p[1]]
    assert len(differ) <= len(pairs) // 500, differ
    # and the truecaser does something: many tokens differ from the text as it was
    changed = sum(a != b for line in lines[1800:] for a, b in zip(ours.truecase(line.split()), line.split()))
    assert changed > 200


def test_sentence_starts_are_those_detruecase_perl_capitalizes(moses_scripts):
    """detruecase.perl capitalizes the first letter at each sentence start; ``sentence_starts`` marks the same."""
    tok = tokenizer("en")
    lines = [" ".join(tok(x)).lower() for x in TICO.read_text(encoding="utf-8").splitlines()[:400]]
    lines += ["( the start is later .", 'one : two ? three ! four . " five', "ppe : PPE , ßa . &apos;cause"]
    theirs = subprocess.run(
        ["perl", str(moses_scripts / "recaser" / "detruecase.perl")],
        input="".join(x + "\n" for x in lines),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    ours = [
        " ".join(detruecased(w) if s else w for w, s in zip(line.split(), sentence_starts(line.split())))
        for line in lines
    ]
    assert ours == theirs


def test_a_rare_form_is_not_known_with_a_minimum_share():
    """``min_share``: a form that makes less than that share of its word's counts (a headline's 'Next') is not
    kept; truecase.perl's model (share 0) keeps every form seen."""
    lines = [["a", "next", "day"]] * 19 + [["The", "Next", "Day"]]
    assert truecaser_of(lines).truecase(["the", "Next", "day"]) == ["the", "Next", "day"]
    tc = Truecaser.from_forms(Tables.from_counts(count_text(lines, order=1)).forms, min_share=0.1)
    assert tc.truecase(["the", "Next", "day"]) == ["the", "next", "day"]
