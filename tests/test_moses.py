"""Parsing real Moses output: golden triples, edge-case tables, bad lines, and a property test."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TRACES, regtest_to_moses
from hypothesis import given
from hypothesis import strategies as st

from moses_recaser.io.errors import RecaserError
from moses_recaser.moses.nbest import parse_nbest_line, read_nbest
from moses_recaser.moses.trace import TraceOptions, decoder_options, parse_trace_line, read_trace, source_tokens

PROMIX = TRACES / "mosesdecoder-promix-test_data"


def _write(tmp_path: Path, name: str, lines: list[str]) -> str:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


# --- golden triples, checked by hand against the source sentences --------------------------


def test_golden_promix_segments_first_hypothesis():
    # source: "domando a los políticos en ambos lados del Atlántico" (9 tokens)
    triples = list(read_nbest(str(PROMIX / "test.nbest.input"), str(PROMIX / "test.nbest.nbest.segments")))
    first = triples[0]
    assert first.id == 0 and first.rank == 0
    assert first.source == ["domando", "a", "los", "políticos", "en", "ambos", "lados", "del", "Atlántico"]
    assert first.target == ["taming", "politicians", "on", "both", "sides", "of", "the", "Atlantic"]
    # taming=domando a, politicians=los políticos, on both=en ambos, sides of the Atlantic=lados del Atlántico
    assert first.phrases == [(0, 1, 0, 0), (2, 3, 1, 1), (4, 5, 2, 3), (6, 8, 4, 7)]
    assert first.links is None
    assert first.nbest[1] == "-16.9717"
    assert first.nbest[0].startswith("d: 0 -1.51037")
    assert [t.rank for t in triples[:3]] == [0, 1, 2]
    assert len(triples) == 100


def test_golden_regtest_reordering(tmp_path):
    one_best, nbest = regtest_to_moses(TRACES / "regtest-phrase.early-distortion-cost.kenlm" / "truth-results.txt")
    src = str(TRACES / "regtest-phrase.early-distortion-cost.kenlm" / "to-translate.txt")
    triples = list(read_nbest(src, _write(tmp_path, "nbest", nbest)))
    t = triples[0]
    # trotz Fortschritten Menschen Rechts dem Ende der ist unbekannt .
    assert t.source[4:7] == ["dem", "Ende", "der"]
    assert t.target[7:10] == ["the", "end", "of"]
    assert t.phrases == [
        (0, 0, 0, 0),
        (1, 1, 1, 1),
        (2, 3, 2, 3),
        (7, 7, 4, 4),
        (8, 8, 5, 5),
        (9, 9, 6, 6),
        (4, 6, 7, 9),
    ]
    assert t.nbest[-1] == ""  # the empty alignment field is kept untouched
    assert {x.id for x in triples} == {0, 1, 2, 3, 4}
    # the 1-best output of the same run (no -t) has the same tokens as n-best rank 0
    plain = list(read_trace(src, _write(tmp_path, "out", one_best)))
    firsts = [x for x in triples if x.rank == 0]
    assert [p.target for p in plain] == [f.target for f in firsts]


def test_golden_regtest_factors_and_alignment(tmp_path):
    d = TRACES / "regtest-phrase.nbest-with-alignment"
    _, nbest = regtest_to_moses(d / "truth-results.txt")
    triples = list(read_nbest(str(d / "to-translate.txt"), _write(tmp_path, "nbest", nbest)))
    t = triples[4]
    # input factors word|POS|head|rel: factor 0 is the source word
    assert t.source == [
        "beide",
        "Versäumnisse",
        "haben",
        "terroristische",
        "Gruppen",
        "in",
        "Pakistan",
        "gestärkt",
        ".",
    ]
    assert t.target[-2:] == [".", "gestärkt"]
    assert t.phrases[-2:] == [(8, 8, 7, 7), (7, 7, 8, 8)]
    assert t.links[-2:] == [(8, 7), (7, 8)]


def test_golden_xml_markup_sources(tmp_path):
    d = TRACES / "regtest-phrase.placeholder"
    one_best, _ = regtest_to_moses(d / "truth-results.txt")
    triples = list(
        read_trace(str(d / "to-translate.txt"), _write(tmp_path, "out", one_best), opts=TraceOptions(xml_input=True))
    )
    assert triples[0].source == ["das", "ist", "ein", "kleines", "haus"]  # double space and markup removed
    assert triples[1].source == ["das", "ist", "@tag@"]
    assert triples[1].target == ["this", "is", "blah", "bling", "blong"]


@pytest.mark.parametrize("folder", sorted(p.name for p in TRACES.glob("regtest-*")))
def test_every_regtest_file_parses(tmp_path, folder):
    d = TRACES / folder
    one_best, nbest = regtest_to_moses(d / "truth-results.txt")
    src = str(d / "to-translate.txt")
    opts = TraceOptions(xml_input="xml" in folder or "placeholder" in folder)
    assert len(list(read_trace(src, _write(tmp_path, "out", one_best), opts=opts))) == len(one_best)
    if nbest:
        got = list(read_nbest(src, _write(tmp_path, "nbest", nbest), opts))
        assert len(got) == len(nbest)
        assert all(t.target for t in got)


def test_every_promix_file_parses():
    plain = list(read_nbest(str(PROMIX / "test.nbest.input"), str(PROMIX / "test.nbest.nbest")))
    segs = list(read_nbest(str(PROMIX / "test.nbest.input"), str(PROMIX / "test.nbest.nbest.segments")))
    assert len(plain) == len(segs) == 100
    # property on real data: stripping the -t markers gives the plain run's tokens
    assert [p.target for p in plain] == [s.target for s in segs]
    assert all(s.phrases for s in segs) and not any(p.phrases for p in plain)


# --- edge cases of the 1-best line ---------------------------------------------------------

ONE_BEST_CASES = [
    # (line, options, tokens, phrases, links)
    ("das ist ein haus ", {}, ["das", "ist", "ein", "haus"], [], None),
    ("das ist |0-1| ein haus |2-3| ", {}, ["das", "ist", "ein", "haus"], [(0, 1, 0, 1), (2, 3, 2, 3)], None),
    (
        "Dies ist |0-1| ein |2-2| Test |3-3| ||| 0-0 1-1 2-2 3-3",
        {},
        ["Dies", "ist", "ein", "Test"],
        [(0, 1, 0, 1), (2, 2, 2, 2), (3, 3, 3, 3)],
        [(0, 0), (1, 1), (2, 2), (3, 3)],
    ),
    ("this is a house ||| 0-0 1-1 2-2 3-3 ", {}, ["this", "is", "a", "house"], [], [(0, 0), (1, 1), (2, 2), (3, 3)]),
    (
        (
            "|lm=(3:-1.2,2:-0.5:unk)| das ist |0-1,wa=0-0 1-1 ,total=-1.5, LM0= -2.3 TM0= -1 -2| haus |3-3,wa=0-0 ,"
            "total=-2, LM0= -1| "
        ),
        {},
        ["das", "ist", "haus"],
        [(0, 1, 0, 1), (3, 3, 2, 2)],
        [(0, 0), (1, 1), (3, 2)],
    ),
    ("das ist |0-1,wa=0-1 1-0 ,total=-1.5, LM0= -2.3| ", {}, ["das", "ist"], [(0, 1, 0, 1)], [(0, 1), (1, 0)]),
    ("|lm=(", {}, [], [], None),  # -tt on an empty output: unclosed
    ("", {}, [], [], None),
    ("   ", {}, [], [], None),
    ("UNKhaus ist |0-1| ", {"unknown_prefix": "UNK"}, ["haus", "ist"], [(0, 1, 0, 1)], None),
    ("UNKhaus ist ", {}, ["UNKhaus", "ist"], [], None),  # prefix stripping is opt-in
    ("haus|NN ist|VAFIN |0-1| ", {}, ["haus", "ist"], [(0, 1, 0, 1)], None),
    ("haus|NN ist ", {"factor_delimiter": ""}, ["haus|NN", "ist"], [], None),
    ("haus@@NN ist ", {"factor_delimiter": "@@"}, ["haus", "ist"], [], None),
    ('<passthrough tag="doc7"/>das ist |0-1| ', {}, ["das", "ist"], [(0, 1, 0, 1)], None),
    ("ein haus |2-3| das |0-0| ", {}, ["ein", "haus", "das"], [(2, 3, 0, 1), (0, 0, 2, 2)], None),  # -du gap at 1
    ("&amp; &#124; &lt;b&gt; |0-2| ", {}, ["&amp;", "&#124;", "&lt;b&gt;"], [(0, 2, 0, 2)], None),
    ("a\u00a0b c |0-1| ", {}, ["a\u00a0b", "c"], [(0, 1, 0, 1)], None),  # no-break space is not a separator
]


@pytest.mark.parametrize("line,opts,tokens,phrases,links", ONE_BEST_CASES)
def test_one_best_edge_cases(line, opts, tokens, phrases, links):
    parsed = parse_trace_line(line, TraceOptions(**opts))
    assert parsed.tokens == tokens
    assert parsed.phrases == phrases
    assert parsed.links == links


def test_one_best_keeps_unknown_factors_and_passthrough():
    parsed = parse_trace_line('<passthrough tag="x"/>UNKhaus|NN ist |0-1| ', TraceOptions(unknown_prefix="UNK"))
    assert parsed.unknown == [0]
    assert parsed.factors == ["|NN", ""]
    assert parsed.passthrough == '<passthrough tag="x"/>'
    line = '<passthrough tag="x"/>UNKhaus|NN ist |0-1| '
    assert [line[a:b] for a, b in parsed.spans] == ["haus", "ist"]


BAD_LINES = [
    ("das |0-1,wa=0-0 ", "malformed or cut-short segmentation marker"),
    ("das ist |0-1| ein", "target tokens not covered in order"),
    ("|0-1| das ", "has no target words before it"),
    ("das |3-1| ", "end before start"),
    ("das |0-0,wa=0-x ,total=-1.5,| ", "malformed word links in the -tt marker"),
    ("|lm=(3:-1 das", "cut-short -tt"),
    ("das ||| 0-0 1-x", "malformed alignment pair '1-x'"),
    ("das ||| 0-0 1", "malformed alignment pair '1'"),
]


@pytest.mark.parametrize("line,message", BAD_LINES)
def test_bad_one_best_lines(line, message):
    with pytest.raises(RecaserError, match=message):
        parse_trace_line(line)


NBEST_CASES = [
    ("0 ||| a b  ||| F= 1 ||| -1", ["a", "b"], [], None, ["F= 1", "-1"]),
    (
        "3 ||| a b  ||| F= 1 ||| -1 ||| 0-1=0-1 ||| 0-1 1-0 ",
        ["a", "b"],
        [(0, 1, 0, 1)],
        [(0, 1), (1, 0)],
        ["F= 1", "-1", "0-1=0-1", "0-1 1-0 "],
    ),
    ("3 ||| a b  ||| F= 1 ||| -1 ||| 0-1 1-0", ["a", "b"], [], [(0, 1), (1, 0)], ["F= 1", "-1", "0-1 1-0"]),
    ("0 ||| a |0-0| b |1-1|  ||| F= 1 ||| -1", ["a", "b"], [(0, 0, 0, 0), (1, 1, 1, 1)], None, ["F= 1", "-1"]),
    ("0 |||  ||| F= 1 ||| -1", [], [], None, ["F= 1", "-1"]),
    # bin/moses for an empty input line, with segmentation and word alignment in the n-best list: both empty,
    # the two separators one space apart
    ("1 |||  ||| F= 0 ||| 0 ||| ||| ", [], [], None, ["F= 0", "0", "||| "]),
    ("1 ||| a  ||| F= 0 ||| 0 ||| ||| 0-0 ", ["a"], [], [(0, 0)], ["F= 0", "0", "||| 0-0 "]),
]


@pytest.mark.parametrize("line,tokens,phrases,links,fields", NBEST_CASES)
def test_nbest_edge_cases(line, tokens, phrases, links, fields):
    entry = parse_nbest_line(line)
    assert entry.hypothesis.tokens == tokens
    assert entry.hypothesis.phrases == phrases
    assert entry.hypothesis.links == links
    assert entry.fields == fields
    # the raw hypothesis lets a writer replace words in place
    assert [line[a:b] for a, b in entry.hypothesis.spans] == tokens


@pytest.mark.parametrize(
    "line,message",
    [
        ("x ||| a  ||| F= 1 ||| -1", "is not a number"),
        ("0 ||| a", "not an n-best line"),
        ("0 ||| a b  ||| F= 1 ||| -1 ||| 0=0 1=x", "malformed segmentation entry '1=x'"),
    ],
)
def test_bad_nbest_lines(line, message):
    with pytest.raises(RecaserError, match=message):
        parse_nbest_line(line)


@pytest.mark.parametrize(
    "line,opts,tokens",
    [
        ("  Das  ist\tein Haus  ", {}, ["Das", "ist", "ein", "Haus"]),
        ("beide|PIAT|2|NK Versäumnisse|NN|3|SB", {}, ["beide", "Versäumnisse"]),
        ("| a", {}, ["|", "a"]),
        ('das <n english="dwelling" prob="0.8">haus</n> .', {"xml_input": True}, ["das", "haus", "."]),
        ('<n english="x" span="1-1" />das haus', {"xml_input": True}, ["das", "haus"]),
        ('das <n english="dwelling">haus</n>', {}, ["das", "<n", 'english="dwelling">haus</n>']),
    ],
)
def test_source_tokens(line, opts, tokens):
    assert source_tokens(line, TraceOptions(**opts)) == tokens


# --- files: line counts, spans, links --------------------------------------------------------


def test_span_outside_source_names_trace_line(tmp_path):
    src = _write(tmp_path, "src", ["a b", "c d"])
    out = _write(tmp_path, "out", ["x |0-1| ", "y |1-2| "])
    with pytest.raises(RecaserError) as err:
        list(read_trace(src, out))
    assert err.value.path == out and err.value.line == 2
    assert "source span 1-2 is outside the source sentence (2 tokens)" in str(err.value)


def test_line_count_mismatch_names_first_extra_line(tmp_path):
    src = _write(tmp_path, "src", ["a", "b", "c"])
    out = _write(tmp_path, "out", ["x ", "y "])
    with pytest.raises(RecaserError) as err:
        list(read_trace(src, out))
    assert (err.value.path, err.value.line) == (src, 3)
    assert "line-count mismatch" in err.value.reason


def test_alignment_link_outside_sentence_names_alignment_file(tmp_path):
    src = _write(tmp_path, "src", ["a b"])
    out = _write(tmp_path, "out", ["x y |0-1| "])
    wa = _write(tmp_path, "wa", ["0-0 2-1 "])
    with pytest.raises(RecaserError) as err:
        list(read_trace(src, out, wa))
    assert (err.value.path, err.value.line) == (wa, 1)
    assert "alignment link 2-1 is outside the sentence" in err.value.reason


def test_link_crossing_phrase_is_an_error(tmp_path):
    src = _write(tmp_path, "src", ["a b"])
    out = _write(tmp_path, "out", ["x |0-0| y |1-1| "])
    wa = _write(tmp_path, "wa", ["0-1 1-0 "])
    with pytest.raises(RecaserError, match="crosses the phrase boundary"):
        list(read_trace(src, out, wa))


def test_alignment_file_links_are_used(tmp_path):
    src = _write(tmp_path, "src", ["Das Haus"])
    out = _write(tmp_path, "out", ["the house |0-1| "])
    wa = _write(tmp_path, "wa", ["0-0 1-1 "])
    (t,) = read_trace(src, out, wa)
    assert t.links == [(0, 0), (1, 1)]
    assert t.phrases == [(0, 1, 0, 1)]


def test_truncated_trace_is_an_error(tmp_path):
    src = _write(tmp_path, "src", ["a", "b"])
    out = tmp_path / "out"
    out.write_text("x |0-0| \ny |0-0|", encoding="utf-8")
    with pytest.raises(RecaserError, match="truncated last line") as err:
        list(read_trace(src, str(out)))
    assert err.value.line == 2


def test_nbest_ids_beyond_source(tmp_path):
    src = _write(tmp_path, "src", ["a"])
    nb = _write(tmp_path, "nb", ["0 ||| x  ||| F= 1 ||| -1", "1 ||| y  ||| F= 1 ||| -1"])
    with pytest.raises(RecaserError, match="n-best id 1 but") as err:
        list(read_nbest(src, nb))
    assert err.value.line == 2


def test_nbest_skips_ids_and_rejects_backwards(tmp_path):
    src = _write(tmp_path, "src", ["a", "b", "c"])
    nb = _write(tmp_path, "nb", ["0 ||| x  ||| F= 1 ||| -1", "2 ||| z  ||| F= 1 ||| -1"])
    got = list(read_nbest(src, nb))
    assert [(t.id, t.source) for t in got] == [(0, ["a"]), (2, ["c"])]
    nb2 = _write(tmp_path, "nb2", ["1 ||| x  ||| F= 1 ||| -1", "0 ||| z  ||| F= 1 ||| -1"])
    with pytest.raises(RecaserError, match="go backwards"):
        list(read_nbest(src, nb2))


# --- property: markers stripped == plain output, spans tile the output ----------------------

_word = st.text(
    alphabet=st.characters(blacklist_characters=" \t\n\r|", blacklist_categories=("Cs",)), min_size=1, max_size=6
)


@st.composite
def segmented(draw):
    n_phrases = draw(st.integers(0, 6))
    phrases = [draw(st.lists(_word, min_size=1, max_size=4)) for _ in range(n_phrases)]
    lengths = [draw(st.integers(1, 3)) for _ in range(n_phrases)]
    order = draw(st.permutations(range(n_phrases)))
    # source spans: phrase k covers a block of the source; blocks laid out in `order`
    starts, pos = {}, 0
    for k in order:
        starts[k] = pos
        pos += lengths[k]
    spans = [(starts[k], starts[k] + lengths[k] - 1) for k in range(n_phrases)]
    return phrases, spans


@given(segmented(), st.sampled_from(["t", "tt"]))
def test_property_markers_strip_to_plain_output(seg, mode):
    phrases, spans = seg
    plain = "".join(w + " " for p in phrases for w in p)
    traced = ""
    for words, (s, e) in zip(phrases, spans):
        traced += "".join(w + " " for w in words)
        if mode == "t":
            traced += f"|{s}-{e}| "
        else:
            traced += f"|{s}-{e},wa=0-0 ,total=-1.25,LM0= -2.5 TM0= -1 -2| "
    got = parse_trace_line(traced, TraceOptions(factor_delimiter=""))
    assert got.tokens == parse_trace_line(plain, TraceOptions(factor_delimiter="")).tokens
    # target spans tile the output, in order, and carry the source spans written
    expect = 0
    for (s0, s1, t0, t1), (s, e), words in zip(got.phrases, spans, phrases):
        assert (s0, s1) == (s, e)
        assert t0 == expect and t1 - t0 + 1 == len(words)
        expect = t1 + 1
    assert expect == len(got.tokens)
    assert len(got.phrases) == len(phrases)


@pytest.mark.parametrize(
    "settings, options",
    [
        ("", TraceOptions()),
        ("-search-algorithm 1 -cube-pruning-pop-limit 5000 -s 5000", TraceOptions()),
        ("-mu", TraceOptions(unknown_prefix="UNK")),
        ("-mark-unknown -unknown-word-prefix << -unknown-word-suffix >>", TraceOptions("<<", ">>")),
        ("-mark-unknown false", TraceOptions()),
        ("-xi exclusive -output-factor-delimiter ~", TraceOptions(factor_delimiter="~", xml_input=True)),
        ("-xml-input pass-through", TraceOptions()),
        # as Moses' Parameter reads them: the first of a switch, the short name over the long one, booleans in
        # any case, the shell's quoting, -factor-delimiter as the output's unless -output-factor-delimiter
        ("-mu false -mu true", TraceOptions()),
        ("-mu false -mark-unknown", TraceOptions()),
        ("-mark-unknown false -mu", TraceOptions()),
        ("-mark-unknown -mu N", TraceOptions()),
        ("-mu TRUE", TraceOptions(unknown_prefix="UNK")),
        ("-mu -unknown-word-prefix 'UNK_' -unknown-word-suffix \"\"", TraceOptions(unknown_prefix="UNK_")),
        ("-fd _", TraceOptions(factor_delimiter="_")),
        ("-fd _ -output-factor-delimiter ~", TraceOptions(factor_delimiter="~")),
        ("-threads -1 -mu", TraceOptions(unknown_prefix="UNK")),
    ],
)
def test_the_decoder_settings_say_how_to_read_its_output(settings, options):
    """EMS's decoder-settings, read as Moses' Parameter reads them (OOVHandlingOptions, ReportingOptions)."""
    assert decoder_options(settings) == options


def test_the_decoder_settings_name_its_alignment_file():
    from moses_recaser.moses.trace import decoder_alignment_file

    assert decoder_alignment_file("-t -alignment-output-file out.wa") == "out.wa"
    assert decoder_alignment_file('-alignment-output-file "my out.wa" -t') == "my out.wa"
    assert decoder_alignment_file("-alignment-output-file a.wa -alignment-output-file b.wa") == "a.wa"
    assert decoder_alignment_file("-alignment-output-file -t") is None
    assert decoder_alignment_file("-threads 2 -v 0") is None
