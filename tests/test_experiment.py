"""A tiny end-to-end experiment on shipped data, and the config loader."""

from __future__ import annotations

import json
from pathlib import Path

from moses_recaser.cli import main

ROOT = Path(__file__).parents[1]


def test_tiny_experiment_end_to_end(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["-q", "experiment", str(ROOT / "configs" / "tico19-tiny.yaml"), "--data-root", str(ROOT / "data"),
               "--out", str(out), "--cache", str(tmp_path / "cache")])
    assert rc == 0
    results = json.loads((out / "results.json").read_text())
    systems = results["full"]["systems"]
    assert set(systems) == {"unigram", "trigram", "sacremoses", "crf-monolingual", "crf"}
    assert systems["crf"]["precision"] > systems["trigram"]["precision"]
    assert all("signature" in s for s in systems.values())
    assert (out / "results.md").read_text().startswith("# tico19-tiny")
    assert (out / "learning_curve.png").stat().st_size > 1000
    assert next(p["words"] for p in results["learning_curve"]) >= 3000
    assert "|mono:" in systems["crf"]["signature"]  # the config's monolingual text went into the model
    for name in systems:
        lines = (out / f"test.{name}.en").read_text(encoding="utf-8").splitlines()
        assert len(lines) == 150
    # a rerun reuses every cached stage (no retraining): same model directory, same outputs
    before = (out / "test.crf.en").read_bytes()
    assert main(["-q", "experiment", str(ROOT / "configs" / "tico19-tiny.yaml"), "--data-root",
                 str(ROOT / "data"), "--out", str(out), "--cache", str(tmp_path / "cache")]) == 0
    assert json.loads((out / "results.json").read_text())["model"] == results["model"]
    assert (out / "test.crf.en").read_bytes() == before
    assert "| crf |" in capsys.readouterr().out


def test_every_shipped_config_loads():
    from moses_recaser.config import load_config

    names = sorted(p.name for p in (ROOT / "configs").glob("*.yaml"))
    assert {"fr-en.yaml", "en-fr.yaml", "de-en.yaml", "zh-en.yaml", "fr-de.yaml", "de-fr.yaml"} <= set(names)
    for name in names:
        cfg = load_config(ROOT / "configs" / name)
        assert cfg.splits.train and cfg.splits.dev and cfg.splits.test


def test_tokenized_copies_follow_contents_not_file_times(tmp_path):
    import os

    from moses_recaser.datasets import tokenized

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
