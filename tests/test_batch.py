"""The batch forms of per-sentence facts (``sentences``, ``model.batch``) agree with their per-sentence
definitions (tests/oracles.py), and a batch's lattices equal those built one sentence at a time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import lattices, takes_source_word
from oracles import positional as sentence_positional
from oracles import source_flags as sentence_flags
from test_features import arpa, extractor  # noqa: F401  (fixtures)

from moses_recaser.core import casing
from moses_recaser.core.columns import WordTypes
from moses_recaser.core.sentences import FINAL, SENTENCE_END, Layout, first_in_sentence, headline_flags, positional
from moses_recaser.core.triples import Triple
from moses_recaser.model.batch import alignment_pairs, gc_paused

PROPS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
WORDS = [
    "Le",
    "chat",
    ".",
    "!",
    "?",
    ",",
    "Paris",
    "NSA",
    "de",
    "l'",
    "Über",
    "3",
    "«",
    "Hans-Peter",
    "x",
    "The",
    "Next",
    "Day",
    "&quot;",
    "iPhone",
    "ÉTÉ",
    ":",
]


@st.composite
def triples(draw) -> list[Triple]:
    """Sentences with phrases (tiling the target), links, both, or neither; some without source."""
    out = []
    for k in range(draw(st.integers(0, 5))):
        source = draw(st.lists(st.sampled_from(WORDS), max_size=8))
        n_tgt = draw(st.integers(0, 8))
        target = [w.lower() for w in draw(st.lists(st.sampled_from(WORDS), min_size=n_tgt, max_size=n_tgt))]
        phrases, links = [], None
        if source and target and draw(st.booleans()):
            # cut both sides into the same number of spans, target spans in order, source spans permuted
            n = draw(st.integers(1, min(len(source), len(target))))
            s_cuts = (
                sorted(draw(st.sets(st.integers(1, len(source) - 1), min_size=n - 1, max_size=n - 1))) if n > 1 else []
            )
            t_cuts = (
                sorted(draw(st.sets(st.integers(1, len(target) - 1), min_size=n - 1, max_size=n - 1))) if n > 1 else []
            )
            s_spans = list(zip([0, *s_cuts], [c - 1 for c in s_cuts] + [len(source) - 1]))
            t_spans = list(zip([0, *t_cuts], [c - 1 for c in t_cuts] + [len(target) - 1]))
            s_spans = draw(st.permutations(s_spans))
            phrases = [(s0, s1, t0, t1) for (s0, s1), (t0, t1) in zip(s_spans, t_spans)]
        if source and target and draw(st.booleans()):
            pairs = st.tuples(st.integers(0, len(source) - 1), st.integers(0, len(target) - 1))
            links = sorted(draw(st.sets(pairs, max_size=10)))
            if phrases:  # links must lie inside phrases
                inside = {(s, t) for s0, s1, t0, t1 in phrases for s in range(s0, s1 + 1) for t in range(t0, t1 + 1)}
                links = [a for a in links if a in inside]
        out.append(Triple(k, source, target, phrases=phrases, links=links))
    return out


def _source_facts(ts: list[Triple]):
    words = [w for t in ts for w in t.source]
    col = lambda f: np.array([f(w) for w in words], dtype=bool)
    return (
        col(casing.has_letter),
        col(lambda w: w in SENTENCE_END),
        col(lambda w: w in FINAL),
        col(casing.is_capitalized),
        col(lambda w: len(w) > 3),
    )


@PROPS
@given(triples())
def test_positional_and_flags_agree_with_the_sentence_definitions(ts):
    layout = Layout.from_sentences([t.target for t in ts], [t.source for t in ts])
    letter, end, final, cap, long = _source_facts(ts)
    pos = positional(letter, end, layout.src_start, layout.n_src)
    headline, title = headline_flags(letter, final, cap, long, layout.src_sent, layout.src_start, layout.n_src)
    first = first_in_sentence(letter, layout.src_sent, layout.src_start)
    for s, t in enumerate(ts):
        g0 = int(layout.src_start[s])
        assert {k for k in range(len(t.source)) if pos[g0 + k]} == sentence_positional(t.source)
        assert (bool(headline[s]), bool(title[s])) == sentence_flags(t.source)
        want = next((k for k, w in enumerate(t.source) if casing.has_letter(w)), -1)
        assert first[s] == want


def aligned_sources(triple: Triple, mode: str) -> list[list[int]]:
    """The per-sentence definition: each target word's aligned source words, ascending."""
    phrase_src: list[list[int]] = [[] for _ in triple.target]
    for s0, s1, t0, t1 in triple.phrases:
        for t in range(t0, t1 + 1):
            phrase_src[t] = list(range(s0, s1 + 1))
    if (mode == "phrase" and triple.phrases) or not triple.links:
        return phrase_src
    linked: dict[int, list[int]] = {}
    for s, t in triple.links:
        linked.setdefault(t, []).append(s)
    return [sorted(linked[t]) if t in linked else phrase_src[t] for t in range(len(triple.target))]


@PROPS
@given(triples(), st.sampled_from(["phrase", "links"]))
def test_alignment_pairs_agree_with_aligned_sources(ts, mode):
    layout = Layout.from_sentences([t.target for t in ts], [t.source for t in ts])
    pt, ps = alignment_pairs(ts, layout, mode)
    got = list(zip(pt.tolist(), ps.tolist()))
    want = [
        (int(layout.tgt_start[s]) + i, int(layout.src_start[s]) + k)
        for s, t in enumerate(ts)
        for i, al in enumerate(aligned_sources(t, mode))
        for k in al
    ]
    assert got == want


@PROPS
@given(triples())
def test_a_batch_gives_the_lattices_of_its_sentences_one_by_one(extractor, ts):  # noqa: F811
    batch = lattices(extractor, ts)
    for t, lat in zip(ts, batch):
        one = lattices(extractor, [t])[0]
        assert one.cands == lat.cands
        np.testing.assert_array_equal(one.unary, lat.unary)
        np.testing.assert_array_equal(one.lm, lat.lm)


def test_word_types_describe_each_type_once_in_order_of_first_sight():
    seen = []

    def describe(words: list[str]) -> dict[str, list]:
        seen.append(words)
        return {"len": [len(w) for w in words], "upper": [w.isupper() for w in words]}

    types = WordTypes([("len", np.int64), ("upper", bool)], describe)
    assert types.numbers(["b", "AA", "b"]).tolist() == [0, 1, 0]
    assert types.numbers(["ccc", "AA"]).tolist() == [2, 1]
    assert seen == [["b", "AA"], ["ccc"]]
    assert types["len"].tolist() == [1, 2, 3] and types["upper"].tolist() == [False, True, False]
    assert types.numbers([]).tolist() == []


def test_gc_paused_restores_the_collector_even_on_error():
    import gc

    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ValueError), gc_paused():
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # left as the caller had it
    finally:
        gc.enable()


def test_gc_paused_as_a_decorator():
    import gc

    @gc_paused()
    def inside() -> bool:
        return gc.isenabled()

    assert inside() is False and inside() is False  # usable more than once
    assert gc.isenabled()


@pytest.fixture(scope="module")
def paper_extractor(arpa):  # noqa: F811
    """Without src_span, whose copied runs also join GEN: GEN then takes aligned source words only."""
    from test_features import TOY

    from moses_recaser.model.extractor import FeatureExtractor
    from moses_recaser.model.features import feature_names
    from moses_recaser.stats.arpa_arrays import ArrayLM
    from moses_recaser.stats.in_memory import count_triples
    from moses_recaser.stats.tables import Tables

    return FeatureExtractor(
        Tables.from_counts(count_triples(TOY)),
        ArrayLM.from_arpa(arpa),
        feature_names("paper", [","]),
        alignment="links",
    )


@PROPS
@given(triples())
def test_gen_takes_the_aligned_source_words_its_oracle_takes(paper_extractor, ts):
    from moses_recaser.model.gen import gen

    C = paper_extractor.candidates
    fixed = paper_extractor.flat(ts).fixed  # words a constraint fixed (constraints.CONSTRAINTS): one form
    g = 0
    for t, lat in zip(ts, lattices(paper_extractor, ts)):
        for i, (tok, sources) in enumerate(zip(t.target, aligned_sources(t, "links"))):
            taken = [t.source[k] for k in sources if takes_source_word(t.source[k], tok)]
            want = gen(tok, C.gen_forms(tok), taken, C.max_candidates)
            assert lat.cands[i] == (want if g + i not in fixed else [casing.upper_all(tok)])
        g += len(t.target)
