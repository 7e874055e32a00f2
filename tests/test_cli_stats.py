"""The statistics commands end to end: tokenize, lm, phrase-align, stats."""

from __future__ import annotations

import json

import kenlm
import pytest
from conftest import TRACES

from moses_recaser.cli.main import main
from moses_recaser.io.modeldir import read_manifest
from moses_recaser.stats.tables import Tables


def _write(path, lines):
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return str(path)


def test_tokenize_escapes_like_moses(tmp_path, capsys):
    raw = _write(tmp_path / "raw", ['Tom & Jerry\'s "show" | <b>', "L'homme, c'est ça."])
    assert main(["tokenize", "-l", "en", "-i", raw]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "Tom &amp; Jerry &apos;s &quot; show &quot; &#124; &lt; b &gt;"
    assert main(["tokenize", "-l", "fr", "-i", raw, "-o", str(tmp_path / "tok")]) == 0
    assert (tmp_path / "tok").read_text(encoding="utf-8").splitlines()[1] == "L&apos; homme , c&apos; est ça ."


def test_tokenize_chinese_segments(tmp_path, capsys):
    raw = _write(tmp_path / "raw", ["我爱北京天安门。"])
    assert main(["tokenize", "-l", "zh", "-i", raw]) == 0
    out = capsys.readouterr().out.split()
    assert len(out) > 2 and "".join(out) == "我爱北京天安门。"


def test_lm_command_writes_arpa_kenlm_reads(tmp_path):
    corpus = _write(tmp_path / "c", ["the cat sat", "the dog sat", "a cat ran", "the cat ran"] * 3)
    arpa = tmp_path / "lm.arpa"
    assert main(["-q", "lm", "--lm-order", "2", "--input", corpus, "-o", str(arpa), "--discount-fallback"]) == 0
    model = kenlm.Model(str(arpa))
    assert model.order == 2
    assert model.score("the cat sat") > model.score("sat cat the")


def test_lm_command_error_without_fallback(tmp_path, capsys):
    corpus = _write(tmp_path / "c", ["a b"])
    assert (
        main(["lm", "--lm-order", "2", "--input", corpus, "-o", str(tmp_path / "x.arpa"), "--no-discount-fallback"])
        == 2
    )
    assert "--discount-fallback" in capsys.readouterr().err
    assert not (tmp_path / "x.arpa").exists()


def test_phrase_align_command_with_trace_lengths(tmp_path):
    d = TRACES / "mosesdecoder-promix-test_data"
    src = _write(tmp_path / "f", ["Das ist ein kleines Haus .", "Guten Tag"])
    tgt = _write(tmp_path / "e", ["this is a small house .", "hello"])
    wa = _write(tmp_path / "a", ["0-0 1-1 2-2 3-3 4-4 5-5", "0-0 1-0"])
    out = tmp_path / "t.jsonl"
    assert (
        main(
            [
                "-q",
                "phrase-align",
                "--source",
                src,
                "--target",
                tgt,
                "--alignment",
                wa,
                "--npa-seed",
                "1",
                "--lengths-trace",
                str(d / "test.nbest.nbest.segments"),
                "--lengths-source",
                str(d / "test.nbest.input"),
                "-o",
                str(out),
            ]
        )
        == 2
    )  # the promix trace is an n-best list, not a 1-best trace
    assert not out.exists()
    assert main(["-q", "phrase-align", "--source", src, "--target", tgt, "--alignment", wa, "-o", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert rows[1]["phrases"] == [[0, 1, 0, 0]]
    assert rows[0]["links"][0] == [0, 0]


def test_stats_command_builds_a_model(tmp_path):
    src = _write(tmp_path / "f", ["Le chat dort .", "le chien mange .", "OK ."] * 5)
    tgt = _write(tmp_path / "e", ["The cat sleeps .", "the dog eats .", "OK ."] * 5)
    wa = _write(tmp_path / "a", ["0-0 1-1 2-2 3-3", "0-0 1-1 2-2 3-3", "0-0 1-1"] * 5)
    model = tmp_path / "model"
    assert (
        main(
            [
                "-q",
                "stats",
                "--source",
                src,
                "--target",
                tgt,
                "--alignment",
                wa,
                "--lm-order",
                "2",
                "-o",
                str(model),
            ]
        )
        == 0
    )
    manifest = read_manifest(model)
    assert manifest.settings["lm_order"] == 2 and "lm:kn2" in manifest.signature
    tables = Tables.load(model)
    assert tables.cased.count("chat", "cat") == 5
    assert tables.cased.count("Le", "The") == 0  # sentence-initial: case due to position, not counted
    assert kenlm.Model(str(model / "lm.arpa")).order == 2


def test_stats_jobs_give_the_same_model(tmp_path):
    """``stats --jobs N`` (as ``train``'s) counts in N processes; the model is the one of one process, byte for
    byte."""
    words = ["Le chat dort .", "le chien mange à Paris .", "OK ."]
    src = _write(tmp_path / "f", [f"{w} {k}" for k in range(300) for w in words])
    tgt = _write(tmp_path / "e", [f"{w.replace('Le', 'The')} {k}" for k in range(300) for w in words])
    wa = _write(
        tmp_path / "a", [" ".join(f"{i}-{i}" for i in range(len(w.split()) + 1)) for _ in range(300) for w in words]
    )
    models = {}
    for jobs in ("1", "2"):
        models[jobs] = tmp_path / f"model{jobs}"
        args = ["stats", "--source", src, "--target", tgt, "--alignment", wa, "-o", str(models[jobs])]
        assert main(["-q", *args, "--jobs", jobs]) == 0
    one, two = ({p.name: p.read_bytes() for p in m.iterdir()} for m in models.values())
    assert one == two and "tables.npz" in one


def test_stats_command_mismatched_corpus(tmp_path, capsys):
    src = _write(tmp_path / "f", ["a", "b", "c"])
    tgt = _write(tmp_path / "e", ["a", "b"])
    wa = _write(tmp_path / "wa", ["0-0", "0-0", "0-0"])
    assert main(["stats", "--source", src, "--target", tgt, "--alignment", wa, "-o", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "line-count mismatch" in err and f"{src}:3" in err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    "bad,message",
    [("0-0 0-5", "alignment link 0-5 is outside the sentence"), ("0-x", "malformed alignment pair '0-x'")],
)
def test_stats_command_bad_alignment(tmp_path, capsys, bad, message):
    src = _write(tmp_path / "f", ["a b"])
    tgt = _write(tmp_path / "e", ["a b"])
    wa = _write(tmp_path / "wa", [bad])
    assert main(["stats", "--source", src, "--target", tgt, "--alignment", wa, "-o", str(tmp_path / "m")]) == 2
    assert f"{wa}:1: {message}" in capsys.readouterr().err
