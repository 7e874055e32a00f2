"""Memory per line: a word aligned to nearly every source word gives no pairs, so a line's pairs, and the features
built over them, stay linear in its words however dense its alignment (``batch.MAX_ALIGNED``)."""

from __future__ import annotations

import tracemalloc

from moses_recaser.core.sentences import Layout
from moses_recaser.core.triples import Triple
from moses_recaser.model.batch import MAX_ALIGNED, alignment_pairs

N = MAX_ALIGNED + 8


def _pairs(t: Triple, mode: str = "links") -> list[tuple[int, int]]:
    pt, ps = alignment_pairs([t], Layout.of([t.target], [t.source]), mode)
    return list(zip(pt.tolist(), ps.tolist()))


def test_a_word_aligned_to_more_than_max_aligned_source_words_has_no_pairs():
    source, target = [f"w{i}" for i in range(N)], ["a", "b", "c"]
    links = [(i, 0) for i in range(N)] + [(i, 1) for i in range(MAX_ALIGNED)] + [(3, 2)]
    assert _pairs(Triple(0, source, target, links=links)) == [(1, i) for i in range(MAX_ALIGNED)] + [(2, 3)]
    # a phrase as wide: its words have none either; a linked word still takes its links
    wide = [(0, N - 1, 0, 2)]
    assert _pairs(Triple(0, source, target, phrases=wide)) == []
    assert _pairs(Triple(0, source, target, phrases=wide, links=[(5, 1)])) == [(1, 5)]
    split = [(0, MAX_ALIGNED - 1, 0, 1), (MAX_ALIGNED, N - 1, 2, 2)]
    got = _pairs(Triple(0, source, target, phrases=split), "phrase")
    assert got == [(t, s) for t in (0, 1) for s in range(MAX_ALIGNED)] + [(2, s) for s in range(MAX_ALIGNED, N)]


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
        (out,) = r.recase_batch([triple])  # the triple as a reader gives it (checking it is a reader's work)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(out) == 600
    assert peak - before < 30e6, f"{(peak - before) / 1e6:.0f} MB above the links"


def test_a_line_of_more_links_than_the_limit_is_refused_before_it_is_parsed(tmp_path, capsys):
    """Reading an alignment line is what still grew with its links (220 bytes a parsed link: a 2,500-word line linked
    all to all took 1.4 GB past the pairs' cap): a line of more than MAX_LINKS is one error, before any is parsed."""
    from moses_recaser.cli.main import main
    from moses_recaser.moses.pharaoh import MAX_LINKS

    (tmp_path / "hyp").write_text("the cat .\n", encoding="utf-8")
    (tmp_path / "src").write_text("le chat .\n", encoding="utf-8")
    (tmp_path / "wa").write_text(" ".join(["0-0"] * MAX_LINKS + ["1-1"]) + "\n", encoding="utf-8")
    args = ["--target", str(tmp_path / "hyp"), "--source", str(tmp_path / "src"), "--alignment", str(tmp_path / "wa")]
    assert main(["-q", "triples", *args, "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"moses-recaser: error: {tmp_path / 'wa'}:1: {MAX_LINKS + 1:,} links on one line, more than the limit of "
        f"{MAX_LINKS:,} ({MAX_ALIGNED} a word of the longest line): not a word alignment\n"
    )
    assert not (tmp_path / "out").exists()
