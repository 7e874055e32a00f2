"""The case prior: seen words' case odds, and the shape of rare words for the unseen ones."""

from __future__ import annotations

import math

import numpy as np

from moses_recaser.core.casing import Tag
from moses_recaser.model.prior import CasePrior
from moses_recaser.stats.in_memory import count_text
from moses_recaser.stats.tables import Tables


def prior_of(lines: list[str]) -> CasePrior:
    # target-language text alone: the prior reads only the target forms
    # "x" takes the sentence-initial position
    return CasePrior(Tables.from_counts(count_text((["x"] + line.split() for line in lines), order=0)))


# frequent "-ong" words are lowercase, rare ones are names; rare long "-ing" words are lowercase,
# short rare words are acronyms
TEXT = (
    ["it was long and strong and wrong"] * 50
    + ["he met Yanlong and Dalong and Zhong and Wenlong"]
    + ["a calming , soothing , humming , drumming sound"]
    + ["the NTB and the ABX met the KPQ"]
)


def test_unseen_words_follow_rare_words_not_frequent_ones():
    prior = prior_of(TEXT)
    p = prior.shape_probs("yunlong")
    assert p[Tag.IU] > 0.5 > p[Tag.AL]  # like Yanlong, Dalong: not like long, strong
    q = prior.shape_probs("rumming")
    assert q[Tag.AL] > 0.5 > q[Tag.IU]
    # short words: the acronyms' length
    assert prior.shape_probs("zqx")[Tag.AU] > prior.shape_probs("zqxwvbnm")[Tag.AU]


def test_the_shape_estimate_backs_off_to_shorter_suffixes_and_sums_to_one():
    prior = prior_of(TEXT)
    for low in ("yunlong", "ong", "g", "qqqqqqqqqq", "é", "zzz"):
        p = prior.shape_probs(low)
        assert math.isclose(sum(p), 1.0) and min(p) > 0
    # no rare word ends in "xyz": the length's estimate
    length_only = prior.shape_probs("abcxyz")
    other = prior.shape_probs("defxyz")
    np.testing.assert_allclose(length_only, other)


def test_seen_words_keep_their_counts():
    prior = prior_of(TEXT)
    long_, Long = prior.log_probs(["long", "Long"])
    assert long_ > math.log(0.95) and Long < math.log(0.05)
    # an unseen word's log prior is its shape's
    (yun,) = prior.log_probs(["Yunlong"])
    assert math.isclose(yun, math.log(prior.shape_probs("yunlong")[Tag.IU]))


def test_stored_tables_give_the_same_prior():
    built = prior_of(TEXT)
    stored = CasePrior(built.tables)
    stored.use(built.arrays())
    words = ["Yunlong", "yunlong", "NTB", "ntb", "long", "Calming", "ABXQ"]
    assert stored.log_probs(words) == built.log_probs(words)


def test_an_unseen_hyphenated_word_takes_its_parts_case():
    prior = prior_of(TEXT + ["the Krise and the Krise and the Code met the QR"] * 3)
    lp = dict(
        zip(
            *[
                ["Corona-Krise", "Corona-krise", "corona-krise"],
                prior.log_probs(["Corona-Krise", "Corona-krise", "corona-krise"]),
            ]
        )
    )
    assert lp["Corona-Krise"] > lp["Corona-krise"] and lp["Corona-Krise"] > lp["corona-krise"]
    # the sum of its parts' log priors; a part without a letter adds nothing
    parts = prior.log_probs(["Corona", "Krise"])
    assert math.isclose(lp["Corona-Krise"], sum(parts))
    assert math.isclose(prior.log_probs(["Corona-Krise-19"])[0], sum(parts))
    # a seen hyphenated word keeps its own counts
    seen = prior_of(["x the long-term"] * 5)
    (own,) = seen.log_probs(["long-term"])
    assert math.isclose(own, math.log((5 + seen.shape_probs("long-term")[Tag.AL]) / 6))


def test_a_models_vocabularies_of_training_forms_hold_only_forms_whose_lowercase_training_has(tico):
    # what Candidates._describe takes for granted: a form whose lowercase is no training type is looked up in none
    # of them (unseen, no cased-table row, no counts in the prior)
    from moses_recaser import Recaser
    from moses_recaser.core import casing

    r = Recaser.load(tico / "model")
    c = r.extractor.candidates
    types = set(c.training_types())
    forms = set(r.tables.forms.vocab)
    assert {casing.lower(f) for f in forms} == types
    assert set(r.tables.cased.tgt_vocab) <= forms
    assert set(c.prior._lower[0]) == types
    assert set(r.tables.lower.tgt_vocab) <= types  # (what _describe_target takes for granted)
    assert {casing.lower(f) for f in r.tables.cased.src_vocab} <= set(r.tables.lower.src_vocab)  # (source_ids)
    new = ["Zzyzxq", "ZZYZXQ", "zzyzxq"]
    facts = c._describe(new)
    assert facts["oov"] == [True] * 3 and facts["unseen"] == [True] * 3 and facts["cased"] == [-1] * 3
    # the prior of such a form is its shape's, as when every vocabulary is searched
    assert facts["prior"] == c.prior.log_probs(new)
