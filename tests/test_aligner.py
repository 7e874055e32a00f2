"""eflomal word alignment on real shipped text (TICO-19), symmetrized, with priors."""

from __future__ import annotations

from pathlib import Path

import pytest

from moses_recaser.moses.tokenizer import tokenizer
from moses_recaser.stats.eflomal import align

TICO = Path(__file__).parents[1] / "data" / "tico19"
pytestmark = pytest.mark.slow  # every test here runs eflomal


@pytest.fixture(scope="module")
def bitext():
    fr = (TICO / "tico19-test.fr").read_text(encoding="utf-8").splitlines()[200:500]
    en = (TICO / "tico19-test.en").read_text(encoding="utf-8").splitlines()[200:500]
    return [tokenizer("fr")(x) for x in fr], [tokenizer("en")(x) for x in en]


@pytest.fixture(scope="module")
def joint(bitext, tmp_path_factory) -> tuple[list[list[tuple[int, int]]], Path]:
    """The bitext aligned in one run, and the priors that run wrote."""
    priors = tmp_path_factory.mktemp("joint") / "priors"
    return align(*bitext, priors_out=priors), priors


def test_alignment_links_are_inside_sentences_and_mostly_diagonal(bitext, joint):
    src, tgt = bitext
    links, priors = joint
    assert len(links) == len(src)
    n_links = sum(len(a) for a in links)
    assert n_links > 0.6 * sum(len(t) for t in tgt)
    for s, t, a in zip(src, tgt, links):
        assert all(0 <= i < len(s) and 0 <= j < len(t) for i, j in a)
    # French and English are close in order: most links lie near the diagonal
    near = sum(1 for s, t, a in zip(src, tgt, links) for i, j in a if abs(i / len(s) - j / len(t)) < 0.25)
    assert near > 0.8 * n_links
    lines = priors.read_text(encoding="utf-8").splitlines()
    assert any(x.startswith("LEX\t") for x in lines) and any(x.startswith("HMMF\t") for x in lines)
    # identical numbers and names align to each other
    hits = [(s[i], t[j]) for s, t, a in zip(src, tgt, links) for i, j in a if s[i] == t[j] and s[i][0].isdigit()]
    assert len(hits) > 10


@pytest.mark.parametrize("name", ["priors", "priors.gz"])
def test_alignment_with_priors_of_a_previous_run(bitext, tmp_path, name):
    """Priors written to a .gz name are compressed, and read back as such (they were read as plain text: exit 3)."""
    src, tgt = bitext
    priors = tmp_path / name
    align(src[:60], tgt[:60], priors_out=priors)  # (compression is the subject, not the priors' size)
    assert priors.read_bytes().startswith(b"\x1f\x8b") == name.endswith(".gz")
    links = align(src[:20], tgt[:20], priors=priors)
    assert len(links) == 20 and sum(len(a) for a in links) > 0


def test_empty_sentences_keep_their_line(bitext):
    src, tgt = bitext
    links = align([src[0], [], src[1]], [tgt[0], [], tgt[1]])
    assert len(links) == 3 and links[1] == []


def test_priors_of_an_existing_alignment_align_new_text_as_it_does(bitext, joint, tmp_path):
    """``priors_of_alignment``: priors from a word alignment file (the symmetrized links standing for both
    directions) let eflomal align new sentences alone nearly as one joint run aligns them."""
    from moses_recaser.moses.pharaoh import format_links
    from moses_recaser.stats.eflomal import priors_of_alignment

    src, tgt = bitext
    links, _ = joint
    for name, rows in (("src", src), ("tgt", tgt)):
        (tmp_path / name).write_text("".join(" ".join(r) + "\n" for r in rows[:250]), encoding="utf-8")
    (tmp_path / "wa").write_text("".join(format_links(a) + "\n" for a in links[:250]), encoding="utf-8")
    priors = tmp_path / "priors"
    priors_of_alignment(str(tmp_path / "src"), str(tmp_path / "tgt"), str(tmp_path / "wa"), priors, max_lines=200)
    new = align(src[250:], tgt[250:], priors=priors)
    alone = align(src[250:], tgt[250:])
    agree = [sum(len(set(a) & set(b)) for a, b in zip(x, links[250:])) for x in (new, alone)]
    assert agree[0] > agree[1], agree  # the priors carry the joint run's knowledge to 50 sentences aligned alone


def test_a_pair_too_long_for_eflomal_is_named_in_a_warning(bitext, tmp_path, caplog):
    """eflomal gives no links to a pair of 1024 tokens or more on a side: the line came out empty, exit 0, and
    nothing said why (train and recase --align lost its links the same way)."""
    from moses_recaser.cli.main import main
    from moses_recaser.stats.eflomal import EFLOMAL_MAX_TOKENS

    src, tgt = bitext
    long_src = [w for s in src for w in s][:EFLOMAL_MAX_TOKENS]
    lines = {"fr": [" ".join(s) for s in src[:20]], "en": [" ".join(t) for t in tgt[:20]]}
    lines["fr"][3] = " ".join(long_src)  # line 4: the limit on the source side alone
    lines["fr"][7] = " ".join(long_src[:-1])  # line 8: one token under it, aligned
    for lang, text in lines.items():
        (tmp_path / f"s.{lang}").write_text("".join(x + "\n" for x in text), encoding="utf-8")
    argv = ["align", "--source", str(tmp_path / "s.fr"), "--target", str(tmp_path / "s.en"), "-o", str(tmp_path / "a")]
    assert main(argv) == 0
    warning = [
        r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "eflomal aligns" in r.getMessage()
    ]
    assert len(warning) == 1 and warning[0].startswith(f"{tmp_path / 's.fr'}:4: {EFLOMAL_MAX_TOKENS} source and")
    assert "(1 such pair in all)" in warning[0]
    out = (tmp_path / "a").read_text(encoding="utf-8").split("\n")
    assert out[3] == "" and out[7] != "" and len(out) == 21
