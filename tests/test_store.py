"""The model directory: round trip, checksums, missing files, format versions, atomicity."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from test_tables import TOY

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.modeldir import FORMAT_VERSION, read_manifest, write_model
from moses_recaser.stats.in_memory import count_triples
from moses_recaser.stats.tables import Tables


@pytest.fixture
def model(tmp_path):
    lm = tmp_path / "toy.arpa"
    lm.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1\t<unk>\n\n\\end\\\n", encoding="utf-8")
    tables = Tables.from_counts(count_triples(TOY))
    return write_model(
        tmp_path / "model", settings={"lm_order": 3}, signature="sig", writers=[tables.save], copy_files={"lm.arpa": lm}
    ), tables


def test_round_trip(model):
    path, tables = model
    manifest = read_manifest(path)
    assert manifest.format_version == FORMAT_VERSION and manifest.signature == "sig"
    assert set(manifest.files) >= {"tables.npz", "lm.arpa"}
    back = Tables.load(path)
    assert list(back.cased.src_vocab) == list(tables.cased.src_vocab)
    assert np.array_equal(back.cased.pairs.keys(), tables.cased.pairs.keys())
    assert np.array_equal(back.cased.counts, tables.cased.counts)
    for f, e in [("Le", "The"), ("chat", "cat"), ("x", "The")]:
        assert back.cased.prob(f, e) == tables.cased.prob(f, e)
    assert list(back.forms.vocab) == list(tables.forms.vocab)
    assert np.array_equal(back.tags.counts, tables.tags.counts)


def test_checksum_mismatch(model):
    path, _ = model
    with open(path / "lm.arpa", "a", encoding="utf-8") as fh:
        fh.write("extra\n")
    with pytest.raises(RecaserError, match="lm.arpa has \\d+ bytes, not the \\d+ of its manifest"):
        read_manifest(path)  # the size tells first
    data = (path / "lm.arpa").read_bytes()[:-6]
    (path / "lm.arpa").write_bytes(data[:-1] + (b"x" if data[-1:] != b"x" else b"y"))
    with pytest.raises(RecaserError, match="checksum mismatch for lm.arpa"):
        read_manifest(path)


def test_missing_file(model):
    path, _ = model
    (path / "lm.arpa").unlink()
    with pytest.raises(RecaserError, match="model file lm.arpa is missing"):
        read_manifest(path)


def test_newer_format_version(model):
    path, _ = model
    doc = yaml.safe_load((path / "manifest.yaml").read_text())
    doc["format_version"] = FORMAT_VERSION + 1
    (path / "manifest.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(RecaserError, match="newer than this moses-recaser reads"):
        read_manifest(path)


def test_not_a_model(tmp_path):
    with pytest.raises(RecaserError, match="model directory not found"):
        read_manifest(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecaserError, match="manifest.yaml is missing"):
        read_manifest(tmp_path / "empty")


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_model(tmp_path / "m", settings={}, signature="s", copy_files={"lm.arpa": tmp_path / "absent"})
    assert list(tmp_path.iterdir()) == []
