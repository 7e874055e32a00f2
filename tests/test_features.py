"""Feature values of the lattice on hand-made cases (tables from a toy bitext, a real KN trigram LM)."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from oracles import lattices

from moses_recaser.core.sentences import headline_lines
from moses_recaser.core.triples import Triple
from moses_recaser.model.extractor import FeatureExtractor, source_spans
from moses_recaser.model.features import feature_names
from moses_recaser.stats.arpa_arrays import ArrayLM
from moses_recaser.stats.in_memory import count_text, count_triples
from moses_recaser.stats.kneser_ney import estimate
from moses_recaser.stats.tables import Tables

TOY = [
    Triple(0, ["Le", "chat", "de", "Paris"], ["The", "cat", "of", "Paris"], links=[(0, 0), (1, 1), (2, 2), (3, 3)]),
    Triple(1, ["le", "chien", "dort"], ["the", "dog", "sleeps"], links=[(0, 0), (1, 1), (2, 2)]),
    Triple(2, ["Il", "voit", "la", "raison"], ["He", "sees", "the", "reason"], links=[(0, 0), (1, 1), (3, 3)]),
    Triple(3, ["Il", "a", "une", "raison"], ["He", "has", "a", "reason"], links=[(0, 0), (1, 1), (2, 2), (3, 3)]),
]


@pytest.fixture(scope="module")
def arpa(tmp_path_factory):
    text = io.StringIO()
    estimate(count_text([t.target for t in TOY], 3), text, discount_fallback=True)
    path = tmp_path_factory.mktemp("lm") / "lm.arpa"
    path.write_text(text.getvalue(), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def extractor(arpa) -> FeatureExtractor:
    tables = Tables.from_counts(count_triples(TOY))
    return FeatureExtractor(tables, ArrayLM.from_arpa(arpa), feature_names("full", [","]), alignment="links")


def values(ex: FeatureExtractor, triple: Triple, position: int, name: str) -> dict[str, float]:
    lat = lattices(ex, [triple])[0]
    col = ex.index[name]
    return {c: float(lat.unary[position, j, col]) for j, c in enumerate(lat.cands[position])}


def test_source_spans_find_runs_of_two_or_more_words():
    src = ["À", "partir", "de", "The", "Next", "Day", ",", "paru", "en", "janvier"]
    tgt = ["following", "the", "next", "day", ",", "released", "in", "january"]
    assert source_spans(src, tgt) == [-1, 3, 4, 5, 6, -1, -1, -1]  # the source positions copied
    # a single shared word, or a run with one word that has a letter, is no run
    assert source_spans(["Obama", ","], ["obama", ",", "he"]) == [-1, -1, -1]
    # the longest run wins where two overlap
    assert source_spans(["a", "b", "X", "b", "c", "d"], ["b", "c", "d"]) == [3, 4, 5]


def test_a_word_passed_through_makes_no_run_with_its_neighbour():
    # de-en Moses output: the decoder passed "veraltete" through and translated "System" as "system"; the
    # two repeat the source, but are no copied name
    src, tgt = ["das", "veraltete", "System", "zu"], ["the", "veraltete", "system", "to"]
    assert source_spans(src, tgt) == [-1, 1, 2, -1]
    assert source_spans(src, tgt, unseen=[False, True, False, False]) == [-1, -1, -1, -1]
    # words the source capitalizes still make a title, whether training saw them or not
    src, tgt = ["de", "The", "Next", "Day", "inédits"], ["of", "the", "next", "day", "inédits"]
    assert source_spans(src, tgt, unseen=[False, True, True, True, True]) == [-1, 1, 2, 3, 4]
    assert source_spans(src[3:], tgt[3:], unseen=[True, True]) == [-1, -1]


def test_the_parts_of_a_hyphenated_word_are_one_word_of_a_run():
    # de-en Moses output (tokenizer.perl -a): German capitalizes every part of a compound noun, so
    # "Super-Tunnel" copied as "super @-@ tunnel" is no name of two words
    src, tgt = ["einen", "Super", "@-@", "Tunnel", "zum"], ["a", "super", "@-@", "tunnel", "for"]
    assert source_spans(src, tgt) == [-1, -1, -1, -1, -1]
    # with a word beside it, the run has two words again
    src, tgt = ["von", "Jean", "@-@", "Marc", "Ayrault", "."], ["of", "jean", "@-@", "marc", "ayrault", "."]
    assert source_spans(src, tgt) == [-1, 1, 2, 3, 4, 5]
    # a part after the hyphen belongs to the word before it, whether that word is in the run or not
    src = ["Online", "-", "Server", "Trackern"]
    assert source_spans(src, ["offline", "@-@", "server", "trackern"]) == [-1, -1, -1, -1]
    assert source_spans(src, ["offline", "-", "server", "trackern"]) == [-1, 1, 2, 3]  # a dash joins nothing


def test_headline_lines():
    lines = [
        ["Spectaculaire", "saut", "au-dessus", "de", "Bogota"],
        ["Il", "est", "parti", "."],
        ["Obama", "Signs", "Bill", "On", "Health"],
    ]
    flags = headline_lines(lines)
    assert flags[0] == (True, False) and flags[1] == (False, False) and flags[2][1]


def test_src_span_and_gen_take_the_source_form_without_links(extractor):
    t = Triple(0, ["à", "partir", "de", "The", "Next", "Day"], ["following", "the", "next", "day"], links=[])
    lat = lattices(extractor, [t])[0]
    assert "The" in lat.cands[1] and "Day" in lat.cands[3]
    v = values(extractor, t, 1, "src_span")
    assert v["The"] == 1.0 and v["the"] == 0.0 and v["THE"] == 0.0


def test_src_span_gives_a_positional_capital_as_the_tables_know_the_word(arpa):
    # the tables know "in" only in lowercase: "In" at the start of the source is a positional capital, and
    # copied into the middle of the output it is "in"; "Berlin" keeps its capital
    toy = TOY + [
        Triple(
            4, ["es", "regnet", "in", "Berlin"], ["it", "rains", "in", "Berlin"], links=[(0, 0), (1, 1), (2, 2), (3, 3)]
        )
    ]
    ex = FeatureExtractor(
        Tables.from_counts(count_triples(toy)), ArrayLM.from_arpa(arpa), feature_names("full", [","]), alignment="links"
    )
    t = Triple(
        0,
        ["In", "Berlin", "regnet", "es", "."],
        ["it", "rains", "in", "berlin", "."],
        links=[(3, 0), (2, 1), (0, 2), (1, 3), (4, 4)],
    )
    v = values(ex, t, 2, "src_span")
    assert v["in"] == 1.0 and v["In"] == 0.0
    assert values(ex, t, 3, "src_span")["Berlin"] == 1.0


def test_upper_translation_reads_an_all_upper_source_word_at_a_sentence_start(extractor):
    # "LE" starts a sentence, but all upper is not explained by position: its key stays "LE", not the
    # "le" the tables know (this repeats after every sentence end)
    t = Triple(
        0,
        ["LE", "chat", ".", "LE", "chien"],
        ["the", "cat", ".", "the", "dog"],
        links=[(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)],
    )
    for position in (0, 3):
        v = values(extractor, t, position, "upper_translation")
        assert v["THE"] == 1.0 and v["The"] == 0.0 and v["the"] == 0.0
    assert set(values(extractor, t, 1, "upper_translation").values()) == {0.0}  # "chat" is not upper


def test_src_identical_ignores_positional_capitals_but_not_telling_case(extractor):
    # "Le" is capitalized by its position: no evidence for "Le" in the target
    t = Triple(0, ["Le", "chat"], ["le", "cat"], links=[(0, 0), (1, 1)])
    assert values(extractor, t, 0, "src_identical").get("Le") == 0.0
    # a mixed-case or all-upper first word is not explained by its position
    t = Triple(0, ["Hans-Peter", "dort"], ["hans-peter", "sleeps"], links=[(0, 0), (1, 1)])
    v = values(extractor, t, 0, "src_identical")
    assert v["Hans-Peter"] == 1.0 and v["Hans-peter"] == 0.0


def test_src_identical_rare_fires_against_the_case_prior(extractor):
    # "reason" is always lowercase in training: the source's "Reason" (a name) goes against the prior
    t = Triple(0, ["la", "fondation", "Reason"], ["the", "reason", "foundation"], links=[(2, 1)])
    v = values(extractor, t, 1, "src_identical:rare")
    assert v["Reason"] == 1.0 and v["reason"] == 0.0
    # "Paris" is always capitalized in training: identical, but not rare
    t = Triple(0, ["de", "Paris"], ["of", "paris"], links=[(1, 1)])
    assert values(extractor, t, 1, "src_identical")["Paris"] == 1.0
    assert values(extractor, t, 1, "src_identical:rare")["Paris"] == 0.0


def test_src_identical_iu_and_src_part(extractor):
    # a capitalized copy gets src_identical:IU on top; an acronym copy does not
    t = Triple(0, ["la", "NSA", "de", "Paris"], ["the", "nsa", "of", "paris"], links=[(1, 1), (3, 3)])
    assert values(extractor, t, 3, "src_identical:IU")["Paris"] == 1.0
    v = values(extractor, t, 1, "src_identical:IU")
    assert values(extractor, t, 1, "src_identical")["NSA"] == 1.0 and v["NSA"] == 0.0
    # a word unseen in training: its capitalized copy is a name's
    t = Triple(0, ["le", "Lausitzring"], ["the", "lausitzring"], links=[(1, 1)])
    assert values(extractor, t, 1, "src_identical")["Lausitzring"] == 1.0
    assert values(extractor, t, 1, "src_identical:IU")["Lausitzring"] == 0.0
    # a name inside a hyphenated source compound, wherever it is aligned; only with its case
    t = Triple(
        0,
        ["das", "Rakoczy-Fest", "und", "US-Medien"],
        ["the", "rakoczy", "festival", "and", "us", "media"],
        links=[(1, 2), (3, 5)],
    )
    v = values(extractor, t, 1, "src_part")
    assert v["Rakoczy"] == 1.0 and v["rakoczy"] == 0.0 and v["RAKOCZY"] == 0.0
    assert values(extractor, t, 4, "src_part") == {"us": 0.0, "Us": 0.0, "US": 1.0}
    assert values(extractor, t, 2, "src_part")["Festival"] == 0.0  # "Fest" is another word
    # no source: no source features
    assert set(values(extractor, Triple(0, [], ["rakoczy"]), 0, "src_part").values()) == {0.0}


def test_case_prior_of_unseen_words_has_its_own_feature(extractor):
    t = Triple(0, [], ["the", "unknownword", "reason"])
    unseen, seen = values(extractor, t, 1, "case_prior:unseen"), values(extractor, t, 2, "case_prior:unseen")
    assert set(values(extractor, t, 1, "case_prior").values()) == {0.0} and unseen["unknownword"] < 0
    assert set(seen.values()) == {0.0} and values(extractor, t, 2, "case_prior")["reason"] < 0


def test_after_name_fires_after_an_unseen_word_shaped_like_a_name(extractor):
    prior = extractor.candidates.prior
    assert prior.looks_like_a_name("xaris") and not prior.looks_like_a_name("xeeps")  # like Paris, sleeps
    t = Triple(0, [], ["the", "xaris", "cat", "of"])
    assert values(extractor, t, 2, "after_name") == {"cat": 0.0, "Cat": 1.0, "CAT": 1.0}
    assert set(values(extractor, t, 3, "after_name").values()) == {0.0}  # "cat" was seen
    # an unseen word of a lowercase shape, a seen name, or a sentence start: nothing
    for words in (["the", "xeeps", "cat"], ["the", "paris", "cat"]):
        assert set(values(extractor, Triple(0, [], words), 2, "after_name").values()) == {0.0}
    lat = lattices(extractor, [Triple(0, [], ["xaris"]), Triple(1, [], ["cat", "xaris"])])
    assert not lat[1].unary[0, :, extractor.index["after_name"]].any()


def test_initial_and_punctuation_features(extractor):
    t = Triple(0, [], [",", "the", "cat", ",", "he"])
    assert values(extractor, t, 1, "initial") == {"the": 0.0, "The": 1.0, "THE": 1.0}
    assert values(extractor, t, 2, "initial")["Cat"] == 0.0
    assert values(extractor, t, 4, "punct=,")["He"] == 1.0
    assert values(extractor, t, 4, "punct=,")["he"] == 0.0
    # after a number the sentence has begun: "30 proposals were ..." (newstest's English: 47 of 52 such lines)
    for before in (["30"], ["«", "1,200"], ["(", "2b", ")"]):
        t = Triple(0, [], [*before, "the", "cat"])
        assert set(values(extractor, t, len(before), "initial").values()) == {0.0}
    t = Triple(0, [], ["«", "(", "the", "cat"])
    assert values(extractor, t, 2, "initial")["The"] == 1.0


def test_cap_t1_is_the_log_of_the_summed_translation_probability(extractor):
    t = Triple(0, ["le", "chat", "de", "Paris"], ["the", "cat", "of", "paris"], links=[(3, 3)])
    v = values(extractor, t, 3, "cap_t1")
    assert v["Paris"] == pytest.approx(math.log(extractor.tables.cased.prob("Paris", "Paris")))
    assert v["Paris"] > v["paris"]
    # an unaligned word gets the neutral 0 for every candidate
    assert set(values(extractor, t, 1, "cap_t1").values()) == {0.0}


def test_lm_feature_is_the_trigram_log_probability(extractor):
    t = Triple(0, [], ["he", "sees"])
    lat = lattices(extractor, [t])[0]
    he, sees = lat.cands[0].index("He"), lat.cands[1].index("sees")
    lm = extractor.lm
    ids = lm.word_ids(["<s>", "He", "sees"])
    want = lm.score(np.array([ids[0]]), np.array([ids[1]]), np.array([ids[2]]))[0]
    assert lat.lm[1, 0, he, sees] == pytest.approx(want)


def test_batched_array_lattices_equal_one_by_one_kenlm_lattices(extractor, arpa):
    import kenlm

    through_kenlm = FeatureExtractor(extractor.tables, kenlm.Model(str(arpa)), extractor.names, alignment="links")
    triples = [
        Triple(0, ["Le", "chat", "de", "Paris"], ["the", "cat", "of", "paris"], links=[(0, 0), (1, 1), (3, 3)]),
        Triple(1, [], ["he", "sees", "the", "unknownword", ",", "a", "reason"]),
        Triple(2, ["Il", "a"], ["he", "has"], links=[(0, 0), (1, 1)]),
        Triple(3, [], []),
    ]
    batch = lattices(extractor, triples)
    for t, lat in zip(triples, batch):
        one = lattices(through_kenlm, [t])[0]
        assert one.cands == lat.cands
        np.testing.assert_allclose(one.unary, lat.unary)
        np.testing.assert_allclose(one.lm, lat.lm, atol=1e-5)
        assert (one.valid == lat.valid).all()


def test_reference_missing_from_gen_is_added_and_counted(extractor):
    t = Triple(0, [], ["the", "iphone", "cat"])
    lat = lattices(extractor, [t], [["The", "iPhone", "cat"]])[0]
    assert "iPhone" not in lattices(extractor, [t])[0].cands[1]  # GEN has no mixed-case form of an unseen word
    assert lat.cands[1][lat.gold[1]] == "iPhone"
    assert lat.gen_misses == 1


def test_a_stored_candidate_registry_gives_the_same_lattices(extractor, arpa, tmp_path):
    tables, lm = extractor.tables, ArrayLM.from_arpa(arpa)
    built = FeatureExtractor(tables, lm, extractor.names, alignment="links")
    path = tmp_path / "candidates.npz"
    built.save_registry(path)
    stored = FeatureExtractor(tables, lm, extractor.names, alignment="links", candidates_file=path)
    assert "paris" in stored.candidates._plain  # every lowercase training type is stored
    assert "_shape" in vars(stored.candidates.prior)  # the case prior's tables come with it
    fresh = FeatureExtractor(tables, lm, extractor.names, alignment="links")
    triples = [
        Triple(0, ["Le", "chat", "de", "Paris"], ["the", "cat", "of", "paris"], links=[(0, 0), (1, 1), (3, 3)]),
        Triple(1, [], ["he", "sees", "the", "unknownword", ",", "a", "reason"]),
        Triple(2, ["L'", "iPhone"], ["the", "iphone"], links=[(1, 1)]),
    ]
    refs = [["The", "cat", "of", "Paris"], ["He", "sees", "the", "unknownword", ",", "a", "reason"], ["The", "iPhone"]]
    for got, want in zip(lattices(stored, triples, refs), lattices(fresh, triples, refs)):
        assert got.cands == want.cands
        assert (got.gold == want.gold).all()
        np.testing.assert_array_equal(got.unary, want.unary)
        np.testing.assert_array_equal(got.lm, want.lm)
    assert "forms" not in vars(stored.candidates)  # training forms by lowercase: stored, not rebuilt
    # made with other settings (no case prior, another GEN size): not used
    other = FeatureExtractor(tables, lm, feature_names("paper", [","]), max_candidates=3, candidates_file=path)
    assert len(other.candidates.strings) == 0
