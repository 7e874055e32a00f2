"""The catalogue of bad inputs: each gives one clear message naming the file and line, exit code 2,
and no output file (outputs are written to a temporary name and renamed only on success)."""

from __future__ import annotations

import re

import pytest
import yaml

from moses_recaser.cli.main import main


def _write(path, text: str | bytes):
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def _fails(capsys, argv, where: str, line: int | None, reason: str, out=None) -> None:
    rc = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2, err
    assert len(err) == 1, err  # one message
    loc = f"{where}:{line}: " if line is not None else f"{where}: "
    assert err[0].startswith(f"moses-recaser: error: {loc}"), err[0]
    assert re.search(reason, err[0]), err[0]
    if out is not None:
        assert not out.exists()
        assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]


@pytest.fixture
def files(tmp_path):
    src = _write(tmp_path / "src", "Das ist gut .\nJa .\nNein .\n")
    trace = _write(tmp_path / "trace", "this is |0-1| good . |2-3| \nyes . |0-1| \nno . |0-1| \n")
    wa = _write(tmp_path / "wa", "0-0 1-1 2-2 3-3 \n0-0 1-1 \n0-0 1-1 \n")
    return tmp_path, src, trace, wa


def test_line_count_mismatch_source_vs_trace(files, capsys):
    d, _src, trace, _wa = files
    short = _write(d / "short", "Das ist gut .\nJa .\n")
    _fails(
        capsys,
        ["triples", "--source", short, "--trace", trace, "-o", str(d / "o")],
        trace,
        3,
        "line-count mismatch",
        d / "o",
    )


def test_line_count_mismatch_trace_vs_alignment(files, capsys):
    d, src, trace, _wa = files
    long_wa = _write(d / "long.wa", "0-0\n0-0\n0-0\n0-0\n")
    _fails(
        capsys,
        ["triples", "--source", src, "--trace", trace, "--alignment", long_wa, "-o", str(d / "o")],
        long_wa,
        4,
        "line-count mismatch",
        d / "o",
    )


def test_truncated_last_line(files, capsys):
    d, src, _, _ = files
    cut = _write(d / "cut", "this is |0-1| good . |2-3| \nyes . |0-1| \nno . |0-")
    _fails(
        capsys, ["triples", "--source", src, "--trace", cut, "-o", str(d / "o")], cut, 3, "truncated last line", d / "o"
    )


def test_invalid_utf8(files, capsys):
    d, _, trace, _ = files
    bad = _write(d / "bad", b"Das ist gut .\nJa \xc3\x28 .\nNein .\n")
    _fails(capsys, ["triples", "--source", bad, "--trace", trace, "-o", str(d / "o")], bad, 2, "invalid UTF-8", d / "o")


def test_empty_file(files, capsys):
    d, src, _, _ = files
    empty = _write(d / "empty", "")
    _fails(capsys, ["triples", "--source", src, "--trace", empty, "-o", str(d / "o")], empty, 1, "empty file", d / "o")


@pytest.mark.parametrize(
    "trace_text,wa_text,culprit,reason",
    [
        ("this is |0-1| good . |2-7| \nyes . |0-1| \nno . |0-1| \n", None, "trace", "source span 2-7 is outside"),
        (
            "this is |0-1| good . |2-3| \nyes . |0-1| \nno . |0-1| \n",
            "0-0\n0-9\n0-0\n",
            "wa",
            "alignment link 0-9 is outside the sentence",
        ),
        (
            "this is |0-1| good . |2-3| \nyes . |0-1| \nno . |0-1| \n",
            "0-0\n0-x\n0-0\n",
            "wa",
            "malformed alignment pair '0-x'",
        ),
    ],
)
def test_spans_and_links(files, capsys, trace_text, wa_text, culprit, reason):
    d, src, _, _ = files
    trace = _write(d / "t2", trace_text)
    argv = ["triples", "--source", src, "--trace", trace, "-o", str(d / "o")]
    if wa_text is not None:
        argv += ["--alignment", _write(d / "wa2", wa_text)]
    path = trace if culprit == "trace" else str(d / "wa2")
    line = 1 if culprit == "trace" else 2
    _fails(capsys, argv, path, line, reason, d / "o")


def test_tt_markers_cut_short(files, capsys):
    d, src, _, _ = files
    tt = _write(d / "tt", "this is |0-1,wa=0-0 1-1 ,total=-1.2, LM0= -3 good . |2-3| \nyes . |0-1| \nno . |0-1| \n")
    _fails(
        capsys,
        ["triples", "--source", src, "--trace", tt, "-o", str(d / "o")],
        tt,
        1,
        "malformed or cut-short segmentation marker",
        d / "o",
    )


def test_ten_thousand_token_line_works(tico, tmp_path):
    words = ((tico / "test.lc.en").read_text(encoding="utf-8").split() * 200)[:10000]
    inp = _write(tmp_path / "long", " ".join(words) + "\n")
    out = tmp_path / "out"
    assert main(["-q", "recase", "--model", str(tico / "model"), "--input", inp, "-o", str(out)]) == 0
    got = out.read_text(encoding="utf-8").split()
    assert len(got) == 10000 and [w.lower() for w in got] == words


@pytest.fixture
def model(tico, tmp_path):
    """A copy of the trained test model, free to damage."""
    import shutil

    copy = tmp_path / "model"
    shutil.copytree(tico / "model", copy)
    return copy


def test_missing_model_file(model, tmp_path, capsys):
    (model / "tables.npz").unlink()
    inp = _write(tmp_path / "in", "hello\n")
    _fails(
        capsys,
        ["recase", "--model", str(model), "--input", inp, "-o", str(tmp_path / "o")],
        str(model),
        None,
        "model file tables.npz is missing",
        tmp_path / "o",
    )


def test_checksum_mismatch(model, tmp_path, capsys):
    with open(model / "tables.npz", "ab") as fh:
        fh.write(b"\n")
    inp = _write(tmp_path / "in", "hello\n")
    _fails(
        capsys,
        ["recase", "--model", str(model), "--input", inp, "-o", str(tmp_path / "o")],
        str(model),
        None,
        "checksum mismatch for tables.npz",
        tmp_path / "o",
    )


def test_model_from_a_newer_format_version(model, tmp_path, capsys):
    doc = yaml.safe_load((model / "manifest.yaml").read_text(encoding="utf-8"))
    doc["format_version"] = 99
    (model / "manifest.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    inp = _write(tmp_path / "in", "hello\n")
    _fails(
        capsys,
        ["recase", "--model", str(model), "--input", inp, "-o", str(tmp_path / "o")],
        str(model / "manifest.yaml"),
        None,
        "format version 99 is newer",
        tmp_path / "o",
    )


def test_yaml_config_with_unknown_key(tmp_path, capsys):
    cfg = _write(tmp_path / "exp.yaml", "name: x\nlm_order: 3\nsigmma: 2\n")
    _fails(
        capsys,
        ["experiment", cfg, "--out", str(tmp_path / "out")],
        cfg,
        3,
        "unknown key 'sigmma'; did you mean 'sigma'\\?$",
    )
    assert not (tmp_path / "out").exists()


def test_corpus_whose_sides_differ_in_length(tmp_path, capsys):
    src = _write(tmp_path / "f", "a\nb\nc\n")
    tgt = _write(tmp_path / "e", "a\nb\n")
    _fails(capsys, ["stats", "--src", src, "--tgt", tgt, "--model", str(tmp_path / "m")], src, 3, "line-count mismatch")
    assert not (tmp_path / "m").exists()
