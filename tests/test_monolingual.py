"""Target-language text without a source (``train --mono``, config key ``monolingual``): it joins the
LM and the target-side counts, not the translation tables, and it is recorded in the signature."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from moses_recaser.cli.main import main
from moses_recaser.core.triples import Triple
from moses_recaser.harness.experiment_config import ExperimentConfig, SplitConfig
from moses_recaser.harness.stages import Sides, held_out_targets, monolingual_text
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.modeldir import read_manifest
from moses_recaser.model.recaser import Recaser
from moses_recaser.stats.tables import Tables

# a name the TICO-19 bitext never has, in sentences of its own
_MONO = [
    "The Zorblax Institute published new figures on Monday .",
    "According to Zorblax , the figures are final .",
    "Zorblax said the vaccine trial in Geneva would go on .",
] * 3


@pytest.fixture(scope="module")
def bitext(tico, tico_aligned) -> list[str]:
    """tico's training and dev sets with their word alignments (aligned once a run: the mono text is the
    subject here, not the aligner)."""
    return [
        *("--source", str(tico / "train.fr"), "--target", str(tico / "train.en")),
        *("--alignment", str(tico_aligned / "a")),
        *("--dev-source", str(tico / "dev.fr"), "--dev-target", str(tico / "dev.en")),
        *("--dev-alignment", str(tico_aligned / "dev.a")),
    ]


@pytest.fixture(scope="module")
def mono_model(bitext, tmp_path_factory):
    d = tmp_path_factory.mktemp("mono")
    mono = d / "mono.en"
    mono.write_text("".join(x + "\n" for x in _MONO) + "\n", encoding="utf-8")  # an empty line is skipped
    args = ["-q", "train", *bitext, "--max-iter", "60"]
    assert main([*args, "--monolingual", str(mono), "-o", str(d / "with")]) == 0
    return d, mono


def test_mono_text_joins_lm_and_forms_not_translation_tables(mono_model, tico):
    d, _ = mono_model
    tables = Tables.load(d / "with")
    assert "Zorblax" in tables.forms.vocab
    assert "Zorblax" not in tables.cased.tgt_vocab and "zorblax" not in tables.lower.tgt_vocab
    assert "Zorblax" not in Tables.load(tico / "model").forms.vocab
    assert "\tZorblax Institute\t" in (d / "with" / "lm.arpa").read_text(encoding="utf-8")


def test_mono_text_is_in_settings_and_signature(mono_model):
    d, mono = mono_model
    m = read_manifest(d / "with")
    assert m.settings["monolingual"] == [str(mono.resolve())]
    digest = hashlib.sha256(b"\0file\0" + mono.read_bytes()).hexdigest()
    assert m.settings["monolingual_digest"] == digest
    assert f"|mono:{digest[:8]}|" in m.signature


def test_mono_text_capitalizes_a_name_the_bitext_lacks(mono_model, tico):
    d, _ = mono_model
    t = Triple(0, [], ["the", "zorblax", "report", "was", "published", "on", "monday", "."])
    assert list(Recaser(d / "with").recase_triples([t]))[0][1] == "Zorblax"
    assert list(Recaser(tico / "model").recase_triples([t]))[0][1] == "zorblax"


def test_mono_errors_name_the_file_and_line(tico, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.en"
    bad.write_bytes(b"fine line\nbad \xff byte\n")
    args = [
        "-q",
        "train",
        "--source",
        str(tico / "train.fr"),
        "--target",
        str(tico / "train.en"),
        "--dev-source",
        str(tico / "dev.fr"),
        "--dev-target",
        str(tico / "dev.en"),
        "-o",
        str(tmp_path / "m"),
    ]
    assert main([*args, "--monolingual", "bad.en"]) != 0
    err = capsys.readouterr().err
    assert err.startswith("moses-recaser: error: bad.en:2: ") and "UTF-8" in err  # named as given
    assert not (tmp_path / "m").exists()
    assert (
        main(
            [
                "-q",
                "train",
                "--stats",
                str(tico / "model"),
                "--dev-source",
                str(tico / "dev.fr"),
                "--dev-target",
                str(tico / "dev.en"),
                "--monolingual",
                str(bad),
                "-o",
                str(tmp_path / "m"),
            ]
        )
        != 0
    )
    assert "--monolingual cannot be combined with --stats" in capsys.readouterr().err


def _corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpora"
    (root / "news" / "xx-en").mkdir(parents=True)
    for name, n in (("train", 30), ("test", 20), ("extra", 40)):
        lines = [f"{name} sentence number {k} with Some Names in it ." for k in range(n)]
        (root / "news" / "xx-en" / f"{name}.en").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return root


def test_config_monolingual_text_is_tokenized_and_checked_for_leaks(tmp_path):
    root = _corpus(tmp_path)
    cfg = ExperimentConfig(
        name="t",
        corpus="news",
        pair="xx-en",
        source="xx",
        target="en",
        splits=SplitConfig(train=["train"], dev=["train"], test=["test"]),
        monolingual=["xx-en/extra.en[0:10]", "xx-en/train.en"],
    )
    test = root / "news" / "xx-en" / "test.en"
    out = monolingual_text(cfg, root, tmp_path / "cache", [test])
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 40 and lines[0] == "extra sentence number 0 with Some Names in it ."
    assert monolingual_text(ExperimentConfig(), root, tmp_path / "cache", [test]) is None
    # the test set's own text among the monolingual files: refused, naming the set
    cfg.monolingual = ["xx-en/extra.en", "xx-en/test.en[0:5]"]
    with pytest.raises(RecaserError, match=r"repeats 5 of the 20 target lines of test.en"):
        monolingual_text(cfg, root, tmp_path / "cache", [test])
    cfg.monolingual = ["xx-en/missing.en"]
    with pytest.raises(RecaserError, match="monolingual file not found"):
        monolingual_text(cfg, root, tmp_path / "cache", [test])


def test_wmt21_references_count_as_held_out(tmp_path):
    root = _corpus(tmp_path)
    d = root / "wmt-system-outputs" / "wmt21" / "txt"
    for sub, name in (
        ("sources", "newstest2021.xx-en.src.xx"),
        ("references", "newstest2021.xx-en.ref.A.en"),
        ("system-outputs", "newstest2021.xx-en.hyp.sys1.en"),
    ):
        (d / sub).mkdir(parents=True)
        (d / sub / name).write_text("Reference sentence one, about Some Names here.\n", encoding="utf-8")
    files = {s: Sides(root / "x", root / "news" / "xx-en" / f"{f}.en") for s, f in (("dev", "train"), ("test", "test"))}
    cfg = ExperimentConfig(
        name="t",
        corpus="news",
        pair="xx-en",
        source="xx",
        target="en",
        wmt21="xx-en",
        monolingual=["../wmt-system-outputs/wmt21/txt/references/newstest2021.xx-en.ref.A.en"],
    )
    held = held_out_targets(cfg, root, tmp_path / "cache", files)
    assert held[:2] == [files["dev"].target, files["test"].target]
    assert held[2].read_text(encoding="utf-8") == "Reference sentence one , about Some Names here .\n"  # tokenized
    with pytest.raises(RecaserError, match="repeats 1 of the 1 target lines of newstest2021"):
        monolingual_text(cfg, root, tmp_path / "cache", held)


def test_dev_reference_lines_in_the_mono_text_are_left_out(tico, bitext, tmp_path):
    """An LM corpus often holds the bitext's target side, dev included (moses-recaser-ems holds dev out of the
    bitext): the LM and the forms must not have seen the lines the weights are fitted on."""
    from moses_recaser.stats.tables import Tables

    extra = "Zorglubia is a country .\n"
    (tmp_path / "with_dev.en").write_text((tico / "dev.en").read_text(encoding="utf-8") + extra, encoding="utf-8")
    (tmp_path / "without.en").write_text(extra, encoding="utf-8")
    common = ["-q", "train", *bitext, "--max-iter", "1"]
    for name in ("with_dev", "without"):
        assert main([*common, "--monolingual", str(tmp_path / f"{name}.en"), "-o", str(tmp_path / name)]) == 0
    a, b = (Tables.load(tmp_path / name).forms for name in ("with_dev", "without"))
    assert list(a.vocab) == list(b.vocab) and (a.count == b.count).all() and (a.initial == b.initial).all()
    assert "Zorglubia" in list(a.vocab)
