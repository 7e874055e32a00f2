"""Memory per line: a sentence whose phrases or links make more than ``MAX_LINKS`` (target word, source word)
pairs makes none, so a line's pairs, and the features built over them, stay bounded however dense its alignment;
an alignment line of more links than that is refused as it is read (docs/reliability.md, "Memory per line")."""

from __future__ import annotations

import tracemalloc

from moses_recaser.core.sentences import Layout
from moses_recaser.core.triples import Triple
from moses_recaser.model.batch import alignment_pairs
from moses_recaser.moses.pharaoh import MAX_LINKS


def _pairs(t: Triple, mode: str = "links") -> list[tuple[int, int]]:
    pt, ps = alignment_pairs([t], Layout.from_sentences([t.target], [t.source]), mode)
    return list(zip(pt.tolist(), ps.tolist()))


def test_a_sentence_whose_alignment_makes_more_than_max_links_pairs_has_none():
    words = [f"w{i}" for i in range(600)]
    assert _pairs(Triple(0, words, words, phrases=[(0, 599, 0, 599)])) == []  # 360,000 pairs
    assert _pairs(Triple(0, words, words, links=[(i, j) for i in range(600) for j in range(600)])) == []
    within = _pairs(Triple(0, words, words, phrases=[(0, 499, 0, 499)]), "phrase")  # 250,000: as before
    assert len(within) == 250_000 <= MAX_LINKS and within[:2] == [(0, 0), (0, 1)]
    # a sentence past the bound leaves the others of its batch as they are
    small = Triple(1, ["a", "b"], ["x", "y"], links=[(0, 0), (1, 1)])
    wide = Triple(0, words, words, phrases=[(0, 599, 0, 599)])
    pt, ps = alignment_pairs(
        [wide, small], Layout.from_sentences([wide.target, small.target], [wide.source, small.source]), "links"
    )
    assert list(zip(pt.tolist(), ps.tolist())) == [(600, 600), (601, 601)]


def test_a_densely_aligned_line_takes_memory_linear_in_its_words(tico):
    """The trial's finding: one 2,500-token line linked all to all peaked at 2.7 GB; the pairs (a word with every
    source word) and the features over them grew with the square of the line. 600 words linked all to all (360,000
    links) took 110 MB above the links themselves; now a few MB."""
    from moses_recaser.model.recaser import Recaser

    r = Recaser.load(tico / "model")
    source = (tico / "test.fr").read_text(encoding="utf-8").split()[:600]
    target = (tico / "test.lc.en").read_text(encoding="utf-8").split()[:600]
    triple = Triple(0, source, target, links=[(i, j) for i in range(600) for j in range(600)])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        (out,) = list(r.recase_triples([triple]))  # the triple as a reader gives it (checking it is a reader's work)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(out) == 600
    assert peak - before < 30e6, f"{(peak - before) / 1e6:.0f} MB above the links"


def test_a_line_of_more_links_than_the_limit_is_refused_before_it_is_parsed(tmp_path, capsys):
    """Reading an alignment line is what still grew with its links (220 bytes a parsed link: a 2,500-word line linked
    all to all took 1.4 GB past the pairs' cap): a line of more than MAX_LINKS is one error, before any is parsed."""
    from moses_recaser.cli.main import main

    (tmp_path / "hyp").write_text("the cat .\n", encoding="utf-8")
    (tmp_path / "src").write_text("le chat .\n", encoding="utf-8")
    (tmp_path / "wa").write_text(" ".join(["0-0"] * MAX_LINKS + ["1-1"]) + "\n", encoding="utf-8")
    args = ["--target", str(tmp_path / "hyp"), "--source", str(tmp_path / "src"), "--alignment", str(tmp_path / "wa")]
    assert main(["-q", "triples", *args, "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"moses-recaser: error: {tmp_path / 'wa'}:1: {MAX_LINKS + 1:,} links on one line, more than the limit of "
        f"{MAX_LINKS:,} (32 a word of the longest line): not a word alignment\n"
    )
    assert not (tmp_path / "out").exists()
