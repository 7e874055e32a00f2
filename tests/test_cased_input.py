"""Recasing input that already has case (#26): truecased or cased MT output, whose case is a feature of a model
trained with input_case="cased". Both models below are trained on the same TICO-19 files and word alignment,
so they differ only in that setting."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import TICO_SETTINGS, train_on_tico
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_truecaser import truecaser_of

from moses_recaser import Recaser
from moses_recaser.cli.main import main
from moses_recaser.core import casing
from moses_recaser.core.sentences import capital_runs
from moses_recaser.core.triples import Triple
from moses_recaser.harness.metrics import case_scores
from moses_recaser.model.truecaser import detruecased, sentence_starts
from moses_recaser.moses.pharaoh import parse_links
from moses_recaser.stats.npa import phrase_align_triple


@pytest.fixture(scope="module")
def models(tico, tmp_path_factory) -> Path:
    """TICO-19 fr-en (``tico``: train 1-700, dev 701-800, test 1951-2100 and their links): its model, for
    lowercased input, and one trained on the same files with input_case="cased"."""
    d = tmp_path_factory.mktemp("cased")
    for p in tico.iterdir():
        (d / (p.name if p.name != "model" else "model.lower")).symlink_to(p)
    train_on_tico(d, d / "model.cased", replace(TICO_SETTINGS, input_case="cased"))
    # the test set as a truecased Moses system would give it: truecased words in a -t trace with word links
    tc = truecaser_of([x.split() for x in (d / "train.en").read_text(encoding="utf-8").splitlines()])
    source = (d / "test.fr").read_text(encoding="utf-8").splitlines()
    target = (d / "test.en").read_text(encoding="utf-8").splitlines()
    wa = (d / "test.wa").read_text(encoding="utf-8").splitlines()
    with open(d / "test.tc.trace", "w", encoding="utf-8") as out:
        for k, (f, e, a) in enumerate(zip(source, target, wa)):
            t = phrase_align_triple(Triple(k, f.split(), tc.truecase(e.split()), links=parse_links(a)))
            words = []
            for s0, s1, t0, t1 in t.phrases:
                words += t.target[t0 : t1 + 1] + [f"|{s0}-{s1}|"]
            out.write(" ".join(words) + "\n")
    return d


def detruecase(tokens: list[str]) -> list[str]:
    """detruecase.perl (without -headline): a capital first letter at each sentence start."""
    return [detruecased(w) if start else w for w, start in zip(tokens, sentence_starts(tokens))]


def _recase(d: Path, model: str, *args: str) -> list[list[str]]:
    out = d / "out.txt"
    assert main(["-q", "recase", "--model", str(d / model), "-o", str(out), *args]) == 0
    return [x.split() for x in out.read_text(encoding="utf-8").splitlines()]


def _precision(d: Path, hyps: list[list[str]]) -> float:
    refs = [x.split() for x in (d / "test.en").read_text(encoding="utf-8").splitlines()]
    return case_scores(hyps, refs).precision


def test_lowercased_input_is_recased_as_before_byte_for_byte(models):
    """A model for cased input recases lowercased lines with the weights a model for lowercased input has: the
    same output, byte for byte."""
    args = ["--source", str(models / "test.fr"), "--input", str(models / "test.lc.en"), "--alignment"]
    lower = _recase(models, "model.lower", *args, str(models / "test.wa"))
    cased = _recase(models, "model.cased", *args, str(models / "test.wa"))
    assert lower == cased
    assert Recaser.load(models / "model.lower").recase("the united states .") == Recaser.load(
        models / "model.cased"
    ).recase("the united states .")


def test_a_truecased_trace_with_word_links(models):
    """Truecased -in with its -t trace and word links (what a truecasing EMS setup decodes): the decoder's case
    is read (better than lowercasing it away), the output changes case only, and sentence starts get their
    capital as detruecase.perl gives it. The input here is the truecased reference, whose case is right but for
    sentence starts, so detruecase.perl is near the ceiling; real decoder output is compared in docs/ems.md."""
    trace = ["--source", str(models / "test.fr"), "--trace", str(models / "test.tc.trace")]
    cased = _recase(models, "model.cased", *trace, "--alignment", str(models / "test.wa"))
    lower = _recase(models, "model.lower", *trace, "--alignment", str(models / "test.wa"))
    inputs = [[w for w in x.split() if not w.startswith("|")] for x in (models / "test.tc.trace").open()]
    for a, b in zip(cased, inputs, strict=True):
        assert [casing.lower(w) for w in a] == [casing.lower(w) for w in b]
    p_cased, p_lower, p_input, p_detrue = (
        _precision(models, h) for h in (cased, lower, inputs, [detruecase(x) for x in inputs])
    )
    assert p_cased > p_lower, (p_cased, p_lower)
    # a sentence start is where the truecased input is most often wrong: the recaser fixes nearly all of them
    assert p_cased - p_input > 0.9 * (p_detrue - p_input), (p_cased, p_input, p_detrue)


def test_a_line_in_capitals_is_recased_as_its_lowercase_is(models):
    """A line in capitals (a headline, a system that writes them) says nothing of its words' case: it is recased
    as the same line lowercased, with its source and links (a cased model used to keep it as it came, or lower
    only its first word: 'THE UNITED STATES .' -> 'the United States .'). A source in capitals still gives
    capitals (the ``all_caps`` constraint)."""
    r = Recaser.load(models / "model.cased")
    src = (models / "test.fr").read_text(encoding="utf-8").splitlines()
    wa = (models / "test.wa").read_text(encoding="utf-8").splitlines()
    upper = [x.upper() for x in (models / "test.en").read_text(encoding="utf-8").splitlines()]
    lowered = [" ".join(casing.lower(w) for w in x.split()) for x in upper]
    assert list(r.recase_lines(upper, src, wa)) == list(r.recase_lines(lowered, src, wa))
    assert r.recase("THE UNITED STATES .") == r.recase("the united states .")
    assert r.recase("THE UNITED STATES .").startswith("The United ")
    assert r.recase("THE UNITED STATES .", source="LES ÉTATS-UNIS .") == "THE UNITED STATES ."


def test_mixed_case_words_keep_the_decoder_form(models):
    """'CSeries' and 'iPhone' are in no table: lowercased input cannot get them back; with the decoder's case
    they stay."""
    line = "the company sold the CSeries jet and the iPhone in the United States ."
    assert Recaser.load(models / "model.cased").recase(line).split()[4] == "CSeries"
    assert Recaser.load(models / "model.cased").recase(line).split()[8] == "iPhone"
    assert "CSeries" not in Recaser.load(models / "model.lower").recase(line.lower())


@pytest.mark.parametrize("line", ["ırmak said that The virus is here .", "ſo said The doctor .", "ᲀ And"])
def test_a_sentence_start_whose_capital_is_another_word_is_kept(models, line):
    """A truecased line starting with 'ı' (dotless i): detruecase.perl's capital, 'I', lowercases to 'i', another
    word; it joined GEN unchecked, and the run died on the case-only check (an internal error)."""
    r = Recaser.load(models / "model.cased")
    for out in (r.recase(line), list(r.recase_lines([line] * 3))[-1]):
        assert [w.lower() for w in out.split()] == [w.lower() for w in line.split()]
        assert out.split()[0] == line.split()[0]


def test_the_model_records_the_setting(models):
    r = Recaser.load(models / "model.cased")
    assert "|in:cased|" in r.signature and r.manifest.settings["input_case"] == "cased"
    assert "|in:" not in Recaser.load(models / "model.lower").signature


def test_dev_words_cased_as_a_truecased_decoder_would():
    """``as_decoded``: a word linked to a source word takes the form that word translates to most in training
    (right or wrong for this sentence), other words truecase.perl's form, a sentence start its truecased form."""
    from moses_recaser.model.data import DECODED_SHARE, as_decoded, forms_by_lower
    from moses_recaser.model.truecaser import Truecaser
    from moses_recaser.stats.in_memory import count_triples
    from moses_recaser.stats.tables import Tables

    corpus = [Triple(k, ["la", "Réserve", "fédérale"], ["the", "Federal", "Reserve"], links=[(0, 0), (1, 2), (2, 1)])
              for k in range(3)]  # fmt: skip
    corpus += [Triple(3, ["un", "impôt", "fédéral"], ["a", "federal", "tax"], links=[(0, 0), (1, 2), (2, 1)])]
    corpus += [Triple(4, ["un", "impôt"], ["a", "federal", "tax"], links=[(0, 0), (1, 2)])] * 5
    tables = Tables.from_counts(count_triples(corpus, order=1))
    truecaser = Truecaser.from_forms(tables.forms, DECODED_SHARE)
    forms = forms_by_lower(tables)
    ref = Triple(
        0, ["Federal", "la", "fédérale", "impôt"], ["federal", "the", "federal", "tax"], links=[(2, 2), (3, 3)]
    )
    # 'federal' linked to 'fédérale' comes out as 'Federal' (wrong here); the first word is truecased
    assert as_decoded(ref, tables, truecaser, forms) == ["federal", "the", "Federal", "tax"]


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("700 dead after floods in the United States .", "decoded"),  # no word truecase.perl decided: as it came
        ("the floods in the United States left 700 dead .", "decoded:tc"),  # a truecased first word
        ('" the floods in Texas left 700 dead . " , he said .', "decoded:tc"),  # a start delayed by a quote
        ("700 dead . the floods hit the United States .", "decoded:tc"),  # the first start with a letter decides
    ],
)
def test_a_line_is_truecased_where_a_sentence_start_is_lowercase(models, line, kind):
    """The line's kind (cased MT output, or truecased output whose sentence starts a truecaser chose) is told by
    its first sentence start with a letter, as truecase.perl sees sentence starts: a line opening '700 dead'
    has none that truecase.perl changed, so its lowercase 'dead' is the system's own case, not a truecaser's.
    (A line with no capital at all reads as lowercased input.)"""
    named = _features_on(Recaser.load(models / "model.cased"), line, "dead")
    assert {name for name in named if name in ("decoded", "decoded:tc")} == {kind}, (line, named)


def _features_on(r: Recaser, line: str, word: str) -> set[str]:
    """The features on for the chosen form or the runner-up of ``word`` in a monolingual line (``explain``)."""
    row = next(x for x in r.explain(Triple(0, [], line.split())) if x["word"] == word)
    return {*row["features"], *(row["runner_up_features"] or {})}


def test_position_does_not_capitalize_cased_output(models):
    """In cased MT output the system cased the first word, and the word after a punctuation token, already:
    `initial` and `punct` (position) are off there, on in a truecased line and in lowercased input, where
    position is all there is."""
    r = Recaser.load(models / "model.cased")

    def initial_on(line: str, word: str) -> bool:
        return "initial" in _features_on(r, line, word)

    def punct_on(line: str, word: str) -> bool:
        return any(name.startswith("punct=") for name in _features_on(r, line, word))

    assert not initial_on("Dozens dead after floods in the United States .", "Dozens")
    assert initial_on("dozens dead after floods in the united states .", "dozens")  # no capital: lowercased input
    assert initial_on("the floods in the United States left 700 dead .", "the")
    # after a number the sentence has begun, whatever the input's case: "700 dead" stays lowercase
    assert not initial_on("700 dead after floods in the united states .", "dead")
    assert not initial_on("700 dead after floods in the United States .", "dead")
    assert not punct_on("Floods in Texas : the United States count 700 dead .", "the")
    assert punct_on("floods in Texas : the United States count 700 dead .", "the")
    assert punct_on("floods in texas : the united states count 700 dead .", "the")


def test_capital_runs_are_names_the_system_cased_as_one():
    """Two capitalized words side by side where no sentence starts are a run; a capital alone, or beside a
    sentence start's capital, is not."""
    words = "The Chinese Embassy said : Beijing and Class A drugs".split()
    assert capital_runs(words, sentence_starts(words)) == [
        False,  # 'The' starts the sentence
        True,
        True,
        False,
        False,
        False,  # 'Beijing' starts a sentence after ':'
        False,
        True,
        True,
        False,
    ]


def test_a_capital_run_is_a_feature_of_cased_output(models):
    """`decoded:run` is on for a capitalized form the input has beside another one, and off for the same word
    capitalized alone or lowercased."""
    r = Recaser.load(models / "model.cased")
    assert "decoded:run" in _features_on(r, "It was said in the Chinese Embassy on Monday .", "Embassy")
    assert "decoded:run:tc" in _features_on(r, "it was said in the Chinese Embassy on Monday .", "Embassy")
    for line, word in [
        ("It was said in the Embassy on Monday .", "Embassy"),
        ("It was said in the chinese embassy on Monday .", "embassy"),
    ]:
        assert not any(f.startswith("decoded:run") for f in _features_on(r, line, word))


_cased_token = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")), min_size=1, max_size=8),
    st.sampled_from(["ırmak", "ſo", "ᲀ", "İstanbul", "i̇stanbul", "ß", "ẞ", "ǅemal", "ΣΟΦΟΣ", "CSeries", "The", "."]),
)


@pytest.fixture(scope="module")
def cased(models) -> Recaser:
    """The model for cased input, loaded once for the 150 examples below."""
    return Recaser.load(models / "model.cased")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_cased_token, max_size=10), min_size=1, max_size=4), st.booleans())
def test_property_cased_input_changes_case_only(cased, lines, with_source):
    """A model for cased input reads each line's own case (sentence starts as detruecase.perl would make them):
    whatever the line, the output differs from it in case only (a line starting 'ırmak' died on that check)."""
    hyps = [" ".join(t.replace(" ", "").replace("\t", "") or "x" for t in toks) for toks in lines]
    sources = ["Le Document ΟΔΟΣ ırmak" for _ in hyps] if with_source else None
    for hyp, out in zip(hyps, cased.recase_lines(hyps, sources)):
        assert len(out.split()) == len(hyp.split())
        for a, b in zip(hyp.split(), out.split()):
            assert casing.is_recasing_of(b, a), (a, b)
