"""The model directory: round trip, checksums, missing files, format versions, atomicity."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from test_tables import TOY

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.modeldir import FORMAT_VERSION, MappedArrays, read_manifest, save_npz, write_model
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


def test_a_manifest_in_yaml_reads_as_its_json(tico, tmp_path):
    """The manifest is written as JSON, read without PyYAML; one written in YAML (by hand, or as earlier versions
    wrote it) reads the same, loads the same model, and marks the directory as a model of ours."""
    import shutil

    from moses_recaser import Recaser
    from moses_recaser.io.outputs import is_model_dir

    model = tmp_path / "model"
    shutil.copytree(tico / "model", model)
    text = (model / "manifest.yaml").read_text(encoding="utf-8")
    assert text.startswith("{") and is_model_dir(model)
    lines = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines()[:20]
    src = (tico / "test.fr").read_text(encoding="utf-8").splitlines()[:20]
    links = (tico / "test.wa").read_text(encoding="utf-8").splitlines()[:20]
    as_json = Recaser.load(model)
    want = (as_json.signature, list(as_json.recase_lines(lines, src, links)))
    (model / "manifest.yaml").write_text(yaml.safe_dump(yaml.safe_load(text), sort_keys=False), encoding="utf-8")
    assert is_model_dir(model) and read_manifest(model) == read_manifest(tico / "model")
    as_yaml = Recaser.load(model)
    assert (as_yaml.signature, list(as_yaml.recase_lines(lines, src, links))) == want


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


def test_mapped_arrays_read_every_header(tmp_path):
    """The headers ``save_npz`` writes are read without numpy's literal parser (``_PLAIN_HEADER``); every other
    one (a record dtype) by numpy's: both give the arrays back, and a shape past the stored data is damage."""
    arrays = {
        "f8": np.linspace(0, 1, 7),
        "empty": np.zeros(0, dtype=np.int32),
        "scalar": np.array(3, dtype=np.uint16),
        "cube": np.arange(24, dtype=">i8").reshape(2, 3, 4),
        "bools": np.array([True, False]),
        "text": np.array("a\nb"),
        "record": np.array([(1, 2.5)], dtype=[("a", "<i4"), ("b", "<f8")]),
    }
    save_npz(tmp_path / "a.npz", arrays)
    fortran = np.asfortranarray(np.arange(12).reshape(3, 4))
    np.savez(tmp_path / "f.npz", fortran=fortran)  # (save_npz writes C order only)
    for path, stored in ((tmp_path / "a.npz", arrays), (tmp_path / "f.npz", {"fortran": fortran})):
        z = MappedArrays(path)
        for name, a in stored.items():
            assert z[name].dtype == a.dtype and z[name].shape == a.shape and np.array_equal(z[name], a), name
    assert z["fortran"].flags.f_contiguous
    data = bytearray((tmp_path / "a.npz").read_bytes())
    at = data.index(b"'shape': (7,)")
    data[at : at + 13] = b"'shape': (9,)"
    (tmp_path / "b.npz").write_bytes(bytes(data))
    with pytest.raises(RecaserError, match="larger than the stored data"):
        MappedArrays(tmp_path / "b.npz")["f8"]
