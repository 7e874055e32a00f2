"""A tiny end-to-end experiment on shipped data, and the config loader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moses_recaser.cli.main import main

ROOT = Path(__file__).parents[1]


def assert_plot(path):
    """The plot is drawn where matplotlib (the [plot] extra) is installed; without it, none is written and the
    experiment still completes."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is not None:
        assert path.stat().st_size > 1000
    else:
        assert not path.exists()


def _experiment(config: Path, root: Path, out: Path, cache: Path) -> int:
    return main(["-q", "experiment", str(config), "--data-root", str(root), "-o", str(out), "--cache", str(cache)])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, Path, Path, Path]:
    """configs/tico19-tiny.yaml with ``wmt21: fr-en`` (and ``input_case: cased``: the systems' own case recased
    too) run once on a WMT21-shaped tree beside the shipped TICO-19 data, made of lines no split uses: the tiny
    experiment and the WMT21 BLEU in one run (the config, its data root, the output and the cache)."""
    tmp = tmp_path_factory.mktemp("tiny")
    root = tmp / "root"
    root.mkdir()
    (root / "tico19").symlink_to(ROOT / "data" / "tico19")
    txt = root / "wmt-system-outputs" / "wmt21" / "txt"
    lines = {
        lang: (ROOT / "data" / "tico19" / f"tico19-test.{lang}").read_text(encoding="utf-8").splitlines()[1400:1440]
        for lang in ("fr", "en")
    }
    for sub, name, lang in [
        ("sources", "newstest2021.fr-en.src.fr", "fr"),
        ("references", "newstest2021.fr-en.ref.A.en", "en"),
        ("system-outputs", "newstest2021.fr-en.hyp.ref-copy.en", "en"),
    ]:
        (txt / sub).mkdir(parents=True, exist_ok=True)
        (txt / sub / name).write_text("".join(x + "\n" for x in lines[lang]), encoding="utf-8")
    config = tmp / "tiny-wmt21.yaml"
    config.write_text(
        (ROOT / "configs" / "tico19-tiny.yaml").read_text(encoding="utf-8") + "wmt21: fr-en\ninput_case: cased\n",
        encoding="utf-8",
    )
    out, cache = tmp / "out", tmp / "cache"
    assert _experiment(config, root, out, cache) == 0
    return config, root, out, cache


def test_tiny_experiment_end_to_end(tiny, capsys):
    config, root, out, cache = tiny
    results = json.loads((out / "results.json").read_text())
    systems = results["full"]["systems"]
    assert set(systems) == {"unigram", "trigram", "sacremoses", "crf-monolingual", "crf"}
    assert systems["crf"]["precision"] > systems["trigram"]["precision"]
    assert all("signature" in s for s in systems.values())
    assert (out / "results.md").read_text().startswith("# tico19-tiny")
    assert_plot(out / "learning_curve.png")
    assert next(p["words"] for p in results["learning_curve"]) >= 3000
    assert "|mono:" in systems["crf"]["signature"]  # the config's monolingual text went into the model
    for name in systems:
        lines = (out / f"test.{name}.en").read_text(encoding="utf-8").splitlines()
        assert len(lines) == 150
    # a rerun reuses every cached stage (no retraining): same model directory, same outputs
    before = (out / "test.crf.en").read_bytes()
    assert _experiment(config, root, out, cache) == 0
    assert json.loads((out / "results.json").read_text())["model"] == results["model"]
    assert (out / "test.crf.en").read_bytes() == before
    assert "| crf |" in capsys.readouterr().out


def test_wmt21_runs_recase_with_every_learning_curve_model(tiny):
    """End-to-end BLEU on a WMT21-shaped tree made of shipped TICO-19 lines no split uses: the learning
    curve's models recase the same aligned outputs, and their gaps come out as a curve of their own."""
    _, _, out, _ = tiny
    results = json.loads((out / "results.json").read_text())
    curve, bleu = results["wmt21_curve"], results["bleu"]
    assert [p["words"] for p in curve] == [p["words"] for p in results["learning_curve"]]
    assert curve[-1]["crf"] == bleu["mean_gap"]["crf"] and curve[-1]["trigram"] == bleu["mean_gap"]["trigram"]
    # the monolingual text shrinks with the bitext
    share = [p["monolingual_words"] / p["words"] for p in curve]
    assert curve[0]["monolingual_words"] < curve[-1]["monolingual_words"]
    assert max(share) - min(share) < 0.2 * share[-1]
    # the curve's capitalizers leave the main table as it was; their recased files are kept
    row = bleu["systems"]["ref-copy"]
    assert set(row) == {
        *("native", "lowercase", "unigram", "trigram", "sacremoses", "crf-monolingual", "crf", "crf-raw"),
        *("native:tok", "native:crf", "native:crf-raw"),  # the system's own case, recased tokenized and raw
    }
    assert row["native:crf-raw"]["case_only"] and (out / "wmt21" / "fr-en.ref-copy.native-crf-raw.en").is_file()
    assert "| raw: own case | raw: recased |" in (out / "results.md").read_text(encoding="utf-8")
    assert (
        row["native"]["bleu"] == pytest.approx(100.0)
        and row["lowercase"]["bleu"] < row["crf"]["bleu"] <= row["crf"]["bleu_ci"]
    )
    # the raw route: the lowercased raw line recased with the raw source, its letters' case changed alone
    raw = (out / "wmt21" / "fr-en.ref-copy.crf-raw.en").read_text(encoding="utf-8")
    assert row["crf-raw"]["case_only"] and raw.lower() == (out / "wmt21" / "fr-en.ref-copy.lowercase.en").read_text()
    assert row["lowercase"]["bleu"] < row["crf-raw"]["bleu"] <= row["crf-raw"]["bleu_ci"]
    assert "crf-raw" in bleu["mean_gap"]
    full = (out / "wmt21" / "fr-en.ref-copy.crf.en").read_text(encoding="utf-8").splitlines()
    for words in (3000,):
        recased = (out / "wmt21" / f"fr-en.ref-copy.crf.w{words}.en").read_text(encoding="utf-8").splitlines()
        assert len(recased) == 40 and [x.lower() for x in recased] == [x.lower() for x in full]
    assert_plot(out / "wmt21_gap_curve.png")
    assert "by training size" in (out / "results.md").read_text(encoding="utf-8")


def test_a_learning_curve_needs_crf_and_trigram(tmp_path):
    from moses_recaser.harness.experiment_config import load_config
    from moses_recaser.io.errors import RecaserError

    config = tmp_path / "c.yaml"
    text = (ROOT / "configs" / "tico19-tiny.yaml").read_text(encoding="utf-8")
    config.write_text(
        text.replace("systems: [unigram, trigram, sacremoses, crf-monolingual, crf]", "systems: [crf]"),
        encoding="utf-8",
    )
    with pytest.raises(RecaserError, match="learning curve") as err:
        load_config(config)
    assert [k for k, x in enumerate(text.splitlines(), 1) if x.startswith("learning_curve:")] == [err.value.line]


def test_an_unknown_system_is_refused_when_the_config_is_read(tmp_path):
    from moses_recaser.harness.experiment_config import load_config
    from moses_recaser.io.errors import RecaserError

    config = tmp_path / "c.yaml"
    text = (ROOT / "configs" / "tico19-tiny.yaml").read_text(encoding="utf-8")
    config.write_text(
        text.replace(
            "systems: [unigram, trigram, sacremoses, crf-monolingual, crf]",
            "systems:\n  - unigram\n  - trigram\n  - crff",
        ),
        encoding="utf-8",
    )
    with pytest.raises(RecaserError, match="unknown system 'crff'; did you mean 'crf'") as err:
        load_config(config)
    lines = config.read_text(encoding="utf-8").splitlines()
    assert err.value.line == lines.index("  - crff") + 1 and err.value.path == str(config)


def test_every_shipped_config_loads():
    from moses_recaser.harness.experiment_config import load_config

    names = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))
    assert {"fr-en.yaml", "en-fr.yaml", "de-en.yaml", "zh-en.yaml", "fr-de.yaml", "de-fr.yaml"} <= set(names)
    for name in names:
        cfg = load_config(ROOT / "configs" / name)
        assert cfg.splits.train and cfg.splits.dev and cfg.splits.test


def test_tokenized_copies_follow_contents_not_file_times(tmp_path):
    import os

    from moses_recaser.harness.datasets import tokenized

    raw = tmp_path / "corpus" / "news.en"
    raw.parent.mkdir()
    raw.write_text("Hello, world.\n", encoding="utf-8")
    out = tokenized(raw, "en", tmp_path / "cache")
    assert out.read_text(encoding="utf-8") == "Hello , world .\n"
    made = out.stat().st_mtime_ns
    later = made + 10**9
    os.utime(raw, ns=(later, later))  # a fresh copy of the same corpus: kept
    assert tokenized(raw, "en", tmp_path / "cache") == out and out.stat().st_mtime_ns == made
    raw.write_text("Goodbye, world.\n", encoding="utf-8")  # other contents: made anew
    assert tokenized(raw, "en", tmp_path / "cache").read_text(encoding="utf-8") == "Goodbye , world .\n"


def test_concatenated_splits_follow_their_parts_contents(tmp_path):
    import os

    from moses_recaser.harness.datasets import concatenate

    a, b = tmp_path / "a.en", tmp_path / "b.en"
    a.write_text("one\ntwo\nthree\n", encoding="utf-8")
    b.write_text("four\n", encoding="utf-8")
    out = tmp_path / "sets" / "train.en"
    assert concatenate([a, (b, None, None)], out).read_text(encoding="utf-8") == "one\ntwo\nthree\nfour\n"
    made = out.stat().st_mtime_ns
    later = made + 10**9
    os.utime(a, ns=(later, later))  # a fresh copy of the same part: kept, its time too
    assert concatenate([a, b], out) == out and out.stat().st_mtime_ns == made
    # another slice, or another split list, under the same name: made anew
    assert concatenate([(a, 1, 3), b], out).read_text(encoding="utf-8") == "two\nthree\nfour\n"
    assert concatenate([a], out).read_text(encoding="utf-8") == "one\ntwo\nthree\n"
    # a concatenation made before the stamps is adopted when its contents are right, not rewritten
    out.with_name(out.name + ".sha256").unlink()
    made = out.stat().st_mtime_ns
    assert concatenate([a], out) == out and out.stat().st_mtime_ns == made
    out.with_name(out.name + ".sha256").unlink()
    assert concatenate([b], out).read_text(encoding="utf-8") == "four\n"


def test_config_keys_are_the_settings_names(tmp_path):
    """A config spells a setting as the library and the command line name it (``feature_set``,
    ``alignment_mode``, ``heldout_sentences``); another spelling is an unknown key, with the close one named."""
    from moses_recaser.harness.experiment_config import load_config
    from moses_recaser.io.errors import RecaserError

    text = (ROOT / "configs" / "tico19-tiny.yaml").read_text(encoding="utf-8")
    new, old = tmp_path / "new.yaml", tmp_path / "old.yaml"
    changed = text.replace("alignment_mode: links", "alignment_mode: phrase").replace("set: full", "set: paper")
    new.write_text(changed + "heldout_sentences: 7\n", encoding="utf-8")
    cfg = load_config(new)
    assert (cfg.alignment_mode, cfg.heldout_sentences, cfg.feature_set) == ("phrase", 7, "paper")
    old.write_text(text.replace("feature_set:", "features:"), encoding="utf-8")
    with pytest.raises(RecaserError, match="unknown key 'features'; did you mean 'feature_set'"):
        load_config(old)


def test_stage_keys_follow_the_files_they_name_also_in_lists(tmp_path):
    """A cached model or alignment is keyed by the files it read, given one by one or as a list (a list was keyed
    by the names alone: a stage outlived a change to its training or test data)."""
    import os

    from moses_recaser.harness.stages import stage_key

    a, b = tmp_path / "train.fr", tmp_path / "train.en"
    a.write_text("un\n", encoding="utf-8")
    b.write_text("one\n", encoding="utf-8")
    keys = [stage_key(a, "x"), stage_key([a, b], "x"), stage_key([[str(a)], (a, b)], "x")]
    assert keys == [stage_key(a, "x"), stage_key([a, b], "x"), stage_key([[str(a)], (a, b)], "x")]  # stable
    b.write_text("two\n", encoding="utf-8")  # the same size, another time
    made = b.stat().st_mtime_ns
    os.utime(b, ns=(made + 10**9, made + 10**9))
    assert stage_key(a, "x") == keys[0]
    assert stage_key([a, b], "x") != keys[1] and stage_key([[str(a)], (a, b)], "x") != keys[2]
    assert stage_key([a, b], "x") != stage_key([a, b], "y") and stage_key([a], b) != stage_key([a, b])
