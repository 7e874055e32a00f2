"""Decoder output as it comes: lines in capitals, unknown words, Windows line ends, and each input mode scored
with the weights fitted for what it has."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from moses_recaser import Bitext, TrainSettings
from moses_recaser.cli.main import main
from moses_recaser.core import casing
from moses_recaser.core.triples import Triple
from moses_recaser.harness.metrics import case_scores
from moses_recaser.model.features import ALIGNMENT, SOURCE, columns_reading
from moses_recaser.model.modes import BY_NAME, MODES, mode_of
from moses_recaser.model.recaser import Recaser
from moses_recaser.moses.bitext import read_aligned_bitext
from moses_recaser.moses.trace import TraceOptions, read_trace

_CACHE: dict = {}


def _recaser(tico) -> Recaser:
    if "r" not in _CACHE:
        _CACHE["r"] = Recaser(tico / "model")
    return _CACHE["r"]


def _diagonal(src: list[str], tgt: list[str]) -> list[tuple[int, int]]:
    return [(min(i, len(src) - 1), i) for i in range(len(tgt))]


# --- a source line in capitals -------------------------------------------------------------


@pytest.mark.parametrize("with_links", [True, False])
def test_a_source_line_in_capitals_gives_an_output_line_in_capitals(tico, with_links):
    src = "CLIQUEZ SUR OK POUR CONTINUER . PUIS FERMEZ LA FENÊTRE .".split()
    tgt = "click on ok to continue . then close the window .".split()
    t = Triple(0, src, tgt, links=_diagonal(src, tgt) if with_links else None)
    (out,) = list(_recaser(tico).recase_triples([t]))
    assert out == "CLICK ON OK TO CONTINUE . THEN CLOSE THE WINDOW .".split()


def test_a_line_with_one_acronym_or_lowercase_letters_is_not_in_capitals(tico):
    rec = _recaser(tico)
    for src in ("L' OMS a publié un rapport .", "OMS", "COVID-19 : L' OMS PUBLIE un rapport ."):
        s = src.split()
        tgt = [casing.lower(w) for w in s]
        rows = rec.explain(Triple(0, s, tgt, links=_diagonal(s, tgt)))
        assert not any("fixed_by" in r for r in rows), src


def test_a_chinese_line_with_two_acronyms_is_not_in_capitals(tico):
    # no lowercase letter in a CJK line, and two all-upper words: the WMT21 zh-en outputs came back in capitals
    src = "菲律宾 总统府 新闻部 ( PCOO ) 部长 在 接受 DZBB 电台 采访 时 说".split()
    tgt = "minister of the philippine presidential communications operations office ( pcoo ) told dzbb radio".split()
    rows = _recaser(tico).explain(Triple(0, src, tgt, links=_diagonal(src, tgt)))
    assert not any("fixed_by" in r for r in rows)


def _upper_file(path, out) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    out.write_text("".join(" ".join(map(casing.upper_all, x.split())) + "\n" for x in lines), encoding="utf-8")


def test_an_uppercased_test_set_comes_back_in_capitals(tico, tmp_path):
    """The shipped test slice with its source and reference in capitals, a token at a time as
    casing.upper_all writes them (as tools/allcaps_check.py does): at least 95% of the words match."""
    for name in ("test.fr", "test.en"):
        _upper_file(tico / name, tmp_path / name)
    assert "&apos;" in (tmp_path / "test.fr").read_text(encoding="utf-8")  # escapes stay escapes
    out = tmp_path / "out"
    assert (
        main(
            [
                "-q",
                "recase",
                "--model",
                str(tico / "model"),
                "--source",
                str(tmp_path / "test.fr"),
                "--input",
                str(tico / "test.lc.en"),
                "--alignment",
                str(tico / "test.wa"),
                "-o",
                str(out),
            ]
        )
        == 0
    )
    hyp = [x.split() for x in out.read_text(encoding="utf-8").splitlines()]
    ref = [x.split() for x in (tmp_path / "test.en").read_text(encoding="utf-8").splitlines()]
    words = [(h, r) for hs, rs in zip(hyp, ref) for h, r in zip(hs, rs)]
    assert sum(h == r for h, r in words) / len(words) >= 0.95
    assert case_scores(hyp, ref).precision >= 0.95


def test_escaped_entities_do_not_make_a_line_in_capitals_lowercase(tico):
    """'&apos;' and '&quot;' are the Moses tokenizer's escapes: their letters are not the line's."""
    src = "L&apos; OMS PUBLIE UN &quot; RAPPORT &quot; AUJOURD&apos;HUI .".split()
    tgt = "the who publishes a &quot; report &quot; today .".split()
    (out,) = list(_recaser(tico).recase_triples([Triple(0, src, tgt, links=_diagonal(src, tgt))]))
    assert out == "THE WHO PUBLISHES A &quot; REPORT &quot; TODAY .".split()


def test_explain_names_the_constraint(tico):
    src, tgt = "CLIQUEZ SUR OK .".split(), "click on ok .".split()
    rows = _recaser(tico).explain(Triple(0, src, tgt, links=_diagonal(src, tgt)))
    assert [r["chosen"] for r in rows] == ["CLICK", "ON", "OK", "."]
    assert [r.get("fixed_by") for r in rows] == ["all_caps", "all_caps", "all_caps", None]


# --- a sentence start inside a token ------------------------------------------------------------


@pytest.mark.parametrize("with_source", [True, False])
def test_a_sentence_start_the_tokenizer_kept_inside_a_token_is_capitalized(tico, with_source):
    # TICO-19's own text glues sentences ('infection.The'); its training and dev slices have none, so no weight
    # could learn it: a constraint fixes it, with the source and without
    tgt = "masks protect against infection.the who says so , and news.com and www.who.int report it .".split()
    src = "les masques protègent de l' infection.L' OMS le dit , et news.com et www.who.int le rapportent .".split()
    t = Triple(0, src if with_source else [], tgt, links=_diagonal(src, tgt) if with_source else None)
    rows = _recaser(tico).explain(t)
    chosen = {r["word"]: r["chosen"] for r in rows}
    assert chosen["infection.the"] == "infection.The"
    assert [r.get("fixed_by") for r in rows if r["word"] == "infection.the"] == ["inner_start"]
    # a web address's pieces are not sentences: 'com' is no word of the training target, 'www.' an address
    assert chosen["news.com"] == "news.com"
    assert chosen["www.who.int"] == "www.who.int"
    assert list(_recaser(tico).recase_triples([t]))[0][3] == "infection.The"
    # and as raw text: the tokenizer keeps 'infection.the' one token there too
    (line,) = _recaser(tico).recase_lines(
        ["masks protect against infection.the WHO says so."], raw=True, target_lang="en"
    )
    assert "against infection.The" in line


def test_a_sentence_start_inside_the_first_token_capitalizes_both_pieces(tico):
    (out,) = list(_recaser(tico).recase_triples([Triple(0, [], "infection.the virus spreads .".split())]))
    assert out[0] == "Infection.The"


# --- unknown words ------------------------------------------------------------------------


def test_a_marked_unknown_word_keeps_its_source_form(tico):
    rec = _recaser(tico)
    # "Wingsuit" is capitalized by its position in the source; marked unknown, the decoder copied it
    src = "Wingsuit : il a sauté du sommet .".split()
    tgt = "he jumped from the summit in wingsuit .".split()
    links = [(2, 0), (3, 1), (4, 2), (5, 3), (5, 4), (0, 6), (7, 7)]
    marked = Triple(0, src, tgt, links=links, unknown=[6])
    assert list(rec.recase_triples([marked]))[0][6] == "Wingsuit"
    # a lowercase source word copied to the start of the output is capitalized there
    src2 = "le wingsuit est dangereux .".split()
    tgt2 = "wingsuit is dangerous .".split()
    first = Triple(1, src2, tgt2, links=[(1, 0), (2, 1), (3, 2), (4, 3)], unknown=[0])
    assert list(rec.recase_triples([first]))[0][0] == "Wingsuit"
    # without an alignment, the one source word equal to it up to case
    assert list(rec.recase_triples([Triple(2, src, tgt, unknown=[6])]))[0][6] == "Wingsuit"


def test_unknown_marks_of_a_trace_reach_the_output(tico, tmp_path):
    src = tmp_path / "src"
    src.write_text("Monserrate : il a survolé le sanctuaire .\n", encoding="utf-8")
    trace = tmp_path / "trace"
    trace.write_text("he |2-2| flew over |3-4| the sanctuary |5-6| UNKmonserrate |0-0| . |7-7| \n", encoding="utf-8")
    (t,) = read_trace(str(src), str(trace), opts=TraceOptions(unknown_prefix="UNK"))
    assert t.unknown == [5] and t.target[5] == "monserrate"
    out = tmp_path / "out"
    assert (
        main(
            [
                "-q",
                "recase",
                "--model",
                str(tico / "model"),
                "--source",
                str(src),
                "--trace",
                str(trace),
                "--unknown-prefix",
                "UNK",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert out.read_text(encoding="utf-8").split()[5] == "Monserrate"


def test_a_passed_through_word_unmarked_keeps_a_source_case_that_position_does_not_explain(tico):
    rec = _recaser(tico)
    src = "il a survolé le sanctuaire de Monserrate .".split()
    tgt = "he flew over the monserrate sanctuary .".split()
    links = [(0, 0), (2, 1), (2, 2), (3, 3), (6, 4), (4, 5), (7, 6)]
    assert list(rec.recase_triples([Triple(0, src, tgt, links=links)]))[0][4] == "Monserrate"


# --- Windows line ends ----------------------------------------------------------------------


def test_a_trace_with_windows_line_ends_reads_as_with_unix_ones(tico, tmp_path):
    lines = ["the who |0-1| published |2-3| a report |4-5| . |6-6| ", "covid-19 |0-0| spreads |1-1| . |2-2| "]
    src_lines = ["L' OMS a publié un rapport .", "COVID-19 progresse ."]
    for name, end in (("unix", "\n"), ("windows", "\r\n")):
        (tmp_path / f"src.{name}").write_text("".join(x + end for x in src_lines), encoding="utf-8", newline="")
        (tmp_path / f"trace.{name}").write_text("".join(x + end for x in lines), encoding="utf-8", newline="")
        assert (
            main(
                [
                    "-q",
                    "recase",
                    "--model",
                    str(tico / "model"),
                    "--source",
                    str(tmp_path / f"src.{name}"),
                    "--trace",
                    str(tmp_path / f"trace.{name}"),
                    "-o",
                    str(tmp_path / f"out.{name}"),
                ]
            )
            == 0
        )
    assert (tmp_path / "out.windows").read_bytes() == (tmp_path / "out.unix").read_bytes()


# --- input modes --------------------------------------------------------------------------


def test_each_input_has_its_mode():
    src, tgt = ["Le", "chat"], ["the", "cat"]
    assert mode_of(Triple(0, [], tgt)).name == "mono"
    assert mode_of(Triple(0, src, tgt)).name == "source"
    assert mode_of(Triple(0, src, tgt, links=[(0, 0)])).name == "links"
    assert mode_of(Triple(0, src, tgt, phrases=[(0, 1, 0, 1)])).name == "phrases"
    both = Triple(0, src, tgt, phrases=[(0, 1, 0, 1)], links=[(0, 0), (1, 1)])
    assert mode_of(both).name == "both"
    assert mode_of(both, prefer="phrase").name == "phrases" and mode_of(both, prefer="links").name == "links"


def test_each_mode_fits_only_the_features_its_input_has(tico):
    rec = _recaser(tico)
    names = rec.weights.names
    alignment = columns_reading(names, {ALIGNMENT})
    source = columns_reading(names, {SOURCE})
    by = rec.weights.by_mode
    assert alignment.any() and source.any()
    assert (by["mono"][1:][alignment | source] == 0).all()
    assert (by["source"][1:][alignment] == 0).all() and (by["source"][1:][source] != 0).any()
    for name in ("both", "phrases", "links"):
        assert (by[name][1:][alignment] != 0).any()
    # fitted on different lattices, the modes' weights differ
    assert len({tuple(np.round(w, 6)) for w in by.values()}) == len(MODES)


def _inputs(tico) -> dict[str, list[Triple]]:
    """Test sentences as each mode has them (a diagonal stands in for links and one-word phrases)."""
    base = [t for t, _ in zip(read_aligned_bitext(str(tico / "test.fr"), str(tico / "test.lc.en")), range(60))]
    out: dict[str, list[Triple]] = {}
    for m in MODES:
        rows = []
        for t in base:
            links = _diagonal(t.source, t.target)
            k = min(len(t.source), len(t.target))  # one-word phrases; the last takes the target words left
            phrases = [(i, i, i, i) for i in range(k - 1)] + ([(k - 1, k - 1, k - 1, len(t.target) - 1)] if k else [])
            rows.append(m.view(Triple(t.id, t.source, t.target, phrases=phrases, links=links)))
        out[m.name] = rows
    return out


def test_each_input_mode_is_scored_with_its_own_weights(tico):
    rec = _recaser(tico)
    inputs = _inputs(tico)
    rng = np.random.default_rng(0)
    for m in MODES:
        want = list(rec.recase_triples(inputs[m.name]))
        others = copy.copy(rec)
        others.weights = copy.deepcopy(rec.weights)
        for name in others.weights.by_mode:
            if name != m.name:  # every other mode's weights scrambled: the output stays
                others.weights.by_mode[name] = rng.normal(0, 5, len(others.weights.by_mode[name]))
        assert list(others.recase_triples(inputs[m.name])) == want, m.name
        mine = copy.copy(rec)
        mine.weights = copy.deepcopy(rec.weights)
        w = mine.weights.by_mode[m.name]
        mine.weights.by_mode[m.name] = np.where(np.arange(len(w)) == 0, -5.0, -w)  # its own: it changes
        assert list(mine.recase_triples(inputs[m.name])) != want, m.name


def test_recase_phrase_features_flag_reads_one_side_of_input_with_both(tico, tmp_path):
    src = tmp_path / "src"
    src.write_text("L' OMS a publié un rapport .\n", encoding="utf-8")
    trace = tmp_path / "trace"
    trace.write_text("the who |0-1| published |2-3| a report |4-5| . |6-6| \n", encoding="utf-8")
    align = tmp_path / "align"
    align.write_text("0-0 1-1 2-2 3-2 4-3 5-4 6-5\n", encoding="utf-8")
    (t,) = read_trace(str(src), str(trace), str(align))
    assert mode_of(t) is BY_NAME["both"]
    for prefer in ("phrase", "links"):
        out = tmp_path / f"out.{prefer}"
        assert (
            main(
                [
                    "-q",
                    "recase",
                    "--model",
                    str(tico / "model"),
                    "--source",
                    str(src),
                    "--trace",
                    str(trace),
                    "--alignment",
                    str(align),
                    "--read",
                    prefer,
                    "-o",
                    str(out),
                ]
            )
            == 0
        )
        view = BY_NAME["phrases" if prefer == "phrase" else "links"].view(t)
        assert out.read_text(encoding="utf-8").split() == list(_recaser(tico).recase_triples([view]))[0]


def test_every_fit_that_stops_early_is_warned_about(tico, tico_aligned, tmp_path, caplog):
    from moses_recaser import train

    caplog.set_level("WARNING", logger="moses_recaser")
    train(
        Bitext(tico_aligned / "f", tico_aligned / "e", tico_aligned / "a"),
        tmp_path / "model",
        TrainSettings(max_iter=1, sigma_grid=(0.5, 1.0)),
        dev=Bitext(tico / "dev.fr", tico / "dev.en", tico_aligned / "dev.a"),
    )
    said = caplog.text
    for m in MODES:
        assert f"before convergence for the {m.name} weights" in said
    assert "before convergence for the cross-validation fit (sigma 0.5, half 1)" in said
