"""The catalogue of bad inputs: each gives one clear message naming the file and line, exit code 2,
and no output file (outputs are written to a temporary name and renamed only on success)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from moses_recaser import Bitext, TrainSettings
from moses_recaser.cli.main import main
from moses_recaser.io.errors import RecaserError


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
    data = bytearray((model / "tables.npz").read_bytes())
    data[-1] ^= 0xFF  # the same size: the checksum tells
    (model / "tables.npz").write_bytes(bytes(data))
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
        ["experiment", cfg, "-o", str(tmp_path / "out")],
        cfg,
        3,
        "unknown key 'sigmma'; did you mean 'sigma'\\?$",
    )
    assert not (tmp_path / "out").exists()


def test_corpus_whose_sides_differ_in_length(tmp_path, capsys):
    src = _write(tmp_path / "f", "a\nb\nc\n")
    tgt = _write(tmp_path / "e", "a\nb\n")
    _fails(
        capsys,
        ["stats", "--source", src, "--target", tgt, "-o", str(tmp_path / "m")],
        src,
        3,
        "line-count mismatch",
    )
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("command", ["count", "stats", "train"])
def test_a_corpus_read_twice_must_be_a_regular_file(tmp_path, capsys, command):
    """Training counts a corpus's lines, then reads them: a FIFO would wait for ever for a second writer, and
    standard input would come back empty (a misleading 'has only 0 lines'). Both are refused before a line is
    read, by a process that cannot hang the suite if they are not."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    cli = str(Path(sys.executable).parent / "moses-recaser")
    tgt = _write(tmp_path / "e", "the cat\n" * 20)
    links = _write(tmp_path / "a", "0-0 1-1\n" * 20)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    extra = {"count": ["--shard", "1/1"], "stats": [], "train": ["--dev-size", "5"]}[command]
    for source, said in ((str(fifo), f"{fifo}: not a regular file (a pipe?)"), ("-", "standard input cannot be")):
        args = [cli, command, "--source", source, "--target", tgt, "--alignment", links, *extra]
        args += ["-o", str(tmp_path / "out")]
        done = subprocess.run(args, input="le chat\n" * 20, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        assert said in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert not (tmp_path / "out").exists()


# --- issue #27: input edges -------------------------------------------------------------------------------------

_OK_TRIPLE = '{"id": 0, "source": ["le", "chat"], "target": ["the", "cat"], "phrases": [], "links": [[0, 0], [1, 1]]}'


def _line(**kw: str) -> str:
    fields = {"id": "1", "source": '["le"]', "target": '["the"]', "phrases": "[]", "links": "[]", **kw}
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"


@pytest.mark.parametrize(
    "line,reason",
    [
        (_line(target='["\\ud800"]'), "lone surrogate"),
        (_line(source='["a\\udc00b"]'), "lone surrogate"),
        (_line(factors='["|x\\ud800"]'), "lone surrogate"),
        (_line(source="[" * 100_000 + "]" * 100_000), "nested too deeply"),
        (_line(links="[[0, " + "1" * 5000 + "]]"), "invalid JSON: Exceeds the limit"),
        (_line(id="9" * 5000), "invalid JSON: Exceeds the limit"),
        (_line(target='["the cat"]'), r"'target' entry 0 \('the cat'\) is not a token"),
        (_line(target='["the\\t"]'), "is not a token"),
        (_line(source='["le\\nx"]'), "is not a token"),
        (_line(target='["a\\r"]'), "has a carriage return at the line's edge"),
        (_line(target='[""]'), "is not a token"),
        (_line(target='["a\\u0000b"]'), "is not a token"),
        (_line(passthrough='"a\\nb"'), "'passthrough' must be a string without line ends"),
        # a factor is written onto its word: with a space or a tab it made the output line's tokens more
        (_line(factors='[" X Y"]'), r"'factors' entry 0 \(' X Y'\) holds a space, tab"),
        (_line(factors='["|a\\tb"]'), "'factors' entry 0 .* holds a space, tab"),
        (_line(target="[" + ", ".join(['"w"'] * 10_001) + "]"), "10001 tokens on one line, more than the limit"),
    ],
    ids=[
        "surrogate",
        "surrogate-source",
        "surrogate-factor",
        "deep",
        "digits-link",
        "digits-id",
        "space",
        "tab",
        "newline",
        "cr",
        "empty",
        "nul",
        "passthrough-newline",
        "factor-space",
        "factor-tab",
        "too-long",
    ],
)
def test_jsonl_edges_are_refused_at_their_line(tmp_path, capsys, line, reason):
    triples = tmp_path / "t.jsonl"
    triples.write_text(_OK_TRIPLE + "\n" + line + "\n", encoding="utf-8", errors="surrogatepass")
    out = tmp_path / "o"
    argv = ["triples", "--source", str(triples), "--trace", str(triples), "--trace-format", "jsonl", "-o", str(out)]
    _fails(capsys, argv, str(triples), 2, reason, out)


@pytest.mark.parametrize("char", ["\u00a0", "\u2028", "\v", "\f", "\x1c", "\x85", "\u3000"])
def test_jsonl_tokens_that_survive_a_round_trip_are_kept(tmp_path, char):
    """White space other than spaces and tabs (what str.split() would split on, and Moses does not) is part of a
    token in JSON Lines as in text input: the two readers give the same tokens, and the line written from them
    splits back into them."""
    from moses_recaser.core.triples import read_triples
    from moses_recaser.io.lines import split_tokens
    from moses_recaser.moses.bitext import read_monolingual

    tokens = [f"a{char}b", "c", f"{char}d"]
    triples = tmp_path / "t.jsonl"
    triples.write_text(_line(target=json.dumps(tokens)) + "\n", encoding="utf-8")
    text = _write(tmp_path / "t.txt", " ".join(tokens) + "\n")
    assert next(read_triples(str(triples))).target == tokens
    assert next(read_monolingual(text)).target == tokens
    assert split_tokens(" ".join(tokens)) == tokens


def test_the_token_limit_per_line(tico, tmp_path, capsys):
    """MAX_TOKENS tokens recase (test_ten_thousand_token_line_works); one more is one line naming file and line,
    in every reader: plain text, text with a source, decoder output, and the monolingual EMS step."""
    from moses_recaser.cli.ems import main as ems_main
    from moses_recaser.io.lines import MAX_TOKENS

    assert MAX_TOKENS == 10_000
    words = ["w"] * (MAX_TOKENS + 1)
    long = _write(tmp_path / "long", "a b\n" + " ".join(words) + "\n")
    model = str(tico / "model")
    out = tmp_path / "o"
    reason = f"{MAX_TOKENS + 1} tokens on one line, more than the limit of 10,000"
    _fails(capsys, ["recase", "--model", model, "--input", long, "-o", str(out)], long, 2, reason, out)
    _fails(capsys, ["recase", "--model", model, "--input", long, "--source", long, "-o", str(out)], long, 2, reason)
    # the file whose line is too long is named, not the last one read beside it
    short = _write(tmp_path / "short", "a b\nc d\n")
    wa = _write(tmp_path / "wa", "0-0\n0-0\n")
    args = ["recase", "--model", model, "--input", short, "--source", long, "--alignment", wa, "-o", str(out)]
    _fails(capsys, args, long, 2, reason)
    _fails(capsys, ["recase", "--model", model, "--trace", long, "--source", long, "-o", str(out)], long, 2, reason)
    _fails(capsys, ["triples", "--source", long, "--target", long, "-o", str(out)], long, 2, reason, out)
    assert ems_main(["recase", "-in", long, "-model", model, "-o", str(out)]) == 2
    assert (
        capsys.readouterr().err
        == f"moses-recaser-ems: error: {long}:2: {reason}: split the line (a longer line is usually a document without line ends)\n"
    )
    assert not out.exists()


def test_input_without_a_final_newline_is_read_whole(tico, tmp_path):
    """Decided (#27): plain text input (--input, -in) may lack its final newline, as text files often do; its
    last line is recased like any other, and every output line ends with one. (Decoder output and alignments
    without one are refused as cut short: test_truncated_last_line.)"""
    from moses_recaser.cli.ems import main as ems_main

    with_nl, without = (
        _write(tmp_path / "a", "the cat .\nhello world\n"),
        _write(tmp_path / "b", "the cat .\nhello world"),
    )
    model = str(tico / "model")
    for name, path in (("a", with_nl), ("b", without)):
        assert main(["-q", "recase", "--model", model, "--input", path, "-o", str(tmp_path / f"{name}.out")]) == 0
        assert ems_main(["-q", "recase", "-in", path, "-model", model, "-o", str(tmp_path / f"{name}.ems")]) == 0
    a, b = (tmp_path / "a.out").read_bytes(), (tmp_path / "b.out").read_bytes()
    assert a == b and a.endswith(b"\n") and a.count(b"\n") == 2
    assert (tmp_path / "a.ems").read_bytes() == (tmp_path / "b.ems").read_bytes() == a


@pytest.mark.parametrize("command", ["lm", "count"])
@pytest.mark.parametrize("order", ["-1", "0", "7", "99999999999999999999"])
def test_lm_order_out_of_range_is_one_line(tmp_path, capsys, order, command):
    corpus = _write(tmp_path / "c", "a b c\n" * 5)
    out = tmp_path / "x.arpa"
    files = ["--input", corpus] if command == "lm" else ["--source", corpus, "--target", corpus, "--shard", "1/1"]
    files += ["--alignment", _write(tmp_path / "a", "0-0\n" * 5)] if command == "count" else []
    assert main([command, "--lm-order", order, *files, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("moses-recaser: error: the LM order must be") and err.count("\n") == 1, err
    assert not out.exists()


def _experiment(tmp_path, extra: str = "", **replace: str) -> str:
    d = tmp_path / "data" / "c" / "p"
    d.mkdir(parents=True, exist_ok=True)
    for lang in ("fr", "en"):
        (d / f"set.{lang}").write_text("Un deux .\n" * 30, encoding="utf-8")
    doc = {
        "corpus": "c",
        "pair": "p",
        "source": "fr",
        "target": "en",
        "splits": '\n  train: ["set[0:10]"]\n  dev: ["set[10:20]"]\n  test: ["set[20:30]"]',
        "systems": "[trigram]",
    }
    doc.update(replace)
    return _write(tmp_path / "cfg.yaml", "".join(f"{k}: {v}\n" for k, v in doc.items()) + extra)


@pytest.mark.parametrize(
    "replace,extra,line,reason",
    [
        ({"name": "../../../escaped"}, "", 10, "'name' must be a plain name"),
        ({"name": "a/b"}, "", 10, "'name' must be a plain name"),
        ({"source": "fr/../../x"}, "", 3, "'source' must be a plain name"),
        ({"corpus": "../../c"}, "", 1, "'corpus' leads out of the data root"),
        ({"pair": "p/../../.."}, "", 2, "'pair' leads out of the data root"),
        ({"splits": '\n  train: ["../p/set[0:10]"]'}, "", 6, "'train' leads out of the data root"),
        ({}, 'monolingual: ["../x.en"]\n', 10, "'monolingual' leads out of the data root"),
        ({}, "heldout_sentences: " + "9" * 5000 + "\n", 10, "'heldout_sentences' has a number too long to read"),
        ({}, "sigma: !!python/object/apply:os.system [echo]\n", 10, "'sigma' has a value that is not plain YAML"),
        ({}, "lm_order: three\n", 10, "'lm_order' must be a int"),
        ({"splits": "\n  train: [5]"}, "", 6, "'train' must be a list of strings, got 5"),
        ({}, 'learning_curve: ["x"]\n', 10, "'learning_curve' must be a list of positive whole numbers"),
        ({}, "learning_curve: [-5]\n", 10, "'learning_curve' must be a list of positive whole numbers"),
        ({}, "systems: [[crf]]\n", 10, "'systems' must be a list of strings"),
    ],
    ids=["name", "name-slash", "source", "corpus", "pair", "split", "monolingual", "digits", "tag", "type"]
    + ["split-item", "curve-item", "curve-negative", "systems-item"],
)
def test_experiment_config_values_that_escape_or_do_not_read(tmp_path, capsys, replace, extra, line, reason):
    cfg = _experiment(tmp_path, extra, **replace)
    argv = ["experiment", cfg, "--data-root", str(tmp_path / "data"), "--cache", str(tmp_path / "cache")]
    out = tmp_path / "out"
    _fails(capsys, [*argv, "-o", str(out)], cfg, line, reason, out)
    assert not list(tmp_path.parent.glob("escaped*")) and not list(tmp_path.glob("escaped*"))


def test_an_absolute_corpus_path_is_taken_as_given(tmp_path):
    cfg = _experiment(tmp_path, corpus=str(tmp_path / "data" / "c"))
    out = tmp_path / "out"
    assert (
        main(
            [
                "-q",
                "experiment",
                cfg,
                "--data-root",
                str(tmp_path),
                "--cache",
                str(tmp_path / "cache"),
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert (out / "results.json").is_file()


def test_a_deeply_nested_experiment_config_is_one_line(tmp_path, capsys):
    cfg = _write(tmp_path / "deep.yaml", "splits:\n  train: " + "[" * 20_000 + "]" * 20_000 + "\n")
    _fails(capsys, ["experiment", cfg], cfg, None, "nested too deeply to be a config")


@pytest.mark.parametrize(
    "values",
    [
        {"sigma": float("nan")},
        {"sigma": float("inf")},
        {"sigma_grid": (1.0, float("nan"))},
        {"sigma": 1e200},
        {"sigma_grid": (1e-170,)},
    ],
)
def test_a_sigma_that_is_not_a_positive_number_is_refused(values):
    """NaN passed 'sigma <= 0' and left every weight unfitted, with exit 0; 1e200 and 1e-170 overflowed (an
    internal error) after the tables and the LM were built."""
    from moses_recaser.model.settings import TrainSettings

    name = "sigma_grid" if "sigma_grid" in values else "sigma"
    with pytest.raises(RecaserError, match=f"^`{name}` must be a positive number"):
        TrainSettings(**values).check()


@pytest.mark.parametrize("values", [{"heldout_folds": 1}, {"punct_min_count": 0}])
def test_settings_once_unreachable_are_checked(values):
    from moses_recaser.model.settings import TrainSettings

    with pytest.raises(RecaserError, match="must be at least"):
        TrainSettings(**values).check()


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--lm-order", "x"],
        ["recase", "--bogus"],
        ["bogus"],
        [],
        ["ems", "recase", "-bogus"],
        ["ems", "train"],
    ],
)
def test_a_usage_error_is_one_line(argv, capsys):
    """argparse's own errors (a bad value, an unknown flag or command, a missing argument) are one line that
    points at --help, not the whole usage block first."""
    from moses_recaser.cli.ems import main as ems_main

    entry = ems_main if argv[:1] == ["ems"] else main
    assert entry(argv[1:] if argv[:1] == ["ems"] else argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip().endswith("--help)"), err
    assert err.startswith("moses-recaser-ems: error: " if argv[:1] == ["ems"] else "moses-recaser: error: "), err


def test_stats_refuses_a_given_lm_that_is_not_one(tmp_path, capsys):
    """stats stores a given --lm as it is: a text file (a corpus given by mistake) or an ARPA file cut short is
    refused now, not by the train that reads the statistics model later."""
    src = _write(tmp_path / "f", "le chat\n" * 5)
    tgt = _write(tmp_path / "e", "the cat\n" * 5)
    links = _write(tmp_path / "a", "0-0 1-1\n" * 5)
    cut = _write(tmp_path / "cut.arpa", "\\data\\\nngram 1=3\n\n\\1-grams:\n-1.0\t<s>\t-0.5\n")
    for lm, said in ((tgt, "neither an ARPA file nor a KenLM binary"), (cut, "ends before its \\end\\ line")):
        args = ["stats", "--source", src, "--target", tgt, "--alignment", links, "--lm", lm]
        assert main([*args, "-o", str(tmp_path / "m")]) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, err
        assert not (tmp_path / "m").exists()


def test_a_reserved_token_in_the_corpus_is_named_at_its_line(tmp_path, capsys):
    """<s>, </s> and <unk> are the LM's own: a corpus line holding one is an error at that line, which a large
    corpus would otherwise hide."""
    src = _write(tmp_path / "f", "le chat\n" * 5)
    tgt = _write(tmp_path / "e", "the cat\nthe cat\nthe <unk> cat\nthe cat\nthe cat\n")
    links = _write(tmp_path / "a", "0-0 1-1\n" * 5)
    _fails(
        capsys,
        ["stats", "--source", src, "--target", tgt, "--alignment", links, "-o", str(tmp_path / "m")],
        tgt,
        3,
        "the corpus contains the reserved token '<unk>'",
    )


def test_a_bad_training_alignment_is_named_where_the_dev_set_is_aligned_by_it(tico, tmp_path, capsys):
    """With no --dev-alignment, the training alignment becomes eflomal's priors for aligning dev: a malformed pair
    there was an error without its file and line."""
    n = len((tico / "train.en").read_text(encoding="utf-8").splitlines())
    bad = _write(tmp_path / "bad.gdfa", "".join("0-0 about\n" if k == 9 else "0-0\n" for k in range(n)))
    argv = ["train", "--source", str(tico / "train.fr"), "--target", str(tico / "train.en"), "--alignment", bad]
    argv += ["--dev-source", str(tico / "dev.fr"), "--dev-target", str(tico / "dev.en"), "-o", str(tmp_path / "m")]
    _fails(capsys, argv, bad, 10, "malformed alignment pair 'about'", tmp_path / "m")


@pytest.mark.parametrize("where", ["train", "dev"])
def test_a_reserved_token_is_named_at_its_line_where_eflomal_aligns(tico, tmp_path, capsys, where):
    """Aligned by eflomal (no --alignment), the training bitext is counted from memory, and the dev reference's
    punctuation too: a reserved token there was an error without its file and line. (A short bitext: eflomal's
    time grows with the square root of the lines, its sampling iterations shrink with it.)"""
    files = {}
    for name, n in (("train.fr", 60), ("train.en", 60), ("dev.fr", 20), ("dev.en", 20)):
        lines = (tico / name).read_text(encoding="utf-8").splitlines()[:n]
        if name == f"{where}.en":
            lines[6] = "the <unk> is here"
        files[name] = _write(tmp_path / name, "".join(x + "\n" for x in lines))
    argv = ["train", "--source", files["train.fr"], "--target", files["train.en"]]
    argv += ["--dev-source", files["dev.fr"], "--dev-target", files["dev.en"], "-o", str(tmp_path / "m")]
    _fails(capsys, argv, files[f"{where}.en"], 7, "the corpus contains the reserved token '<unk>'", tmp_path / "m")


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--lmplz-options", "-S 1G"], "--lmplz-options are options of lmplz: give --lmplz too"),
        (["--lm", "LM", "--lmplz", "lmplz"], "--lmplz cannot be combined with --lm"),
        (["--lm", "LM", "--lmplz-options", "-S 1G"], "--lmplz-options cannot be combined with --lm"),
    ],
)
def test_lmplz_settings_that_would_go_unused_are_refused(tmp_path, capsys, extra, said):
    """--lmplz-options without --lmplz was recorded in the model and never used (the LM estimated here); with
    --lm, lmplz never runs."""
    src = _write(tmp_path / "f", "le chat\n" * 5)
    tgt = _write(tmp_path / "e", "the cat\n" * 5)
    links = _write(tmp_path / "a", "0-0 1-1\n" * 5)
    lm = _write(tmp_path / "lm.arpa", "\\data\\\nngram 1=1\n\n\\1-grams:\n-1.0\t<s>\n\n\\end\\\n")
    extra = [lm if x == "LM" else x for x in extra]
    argv = ["train", "--source", src, "--target", tgt, "--alignment", links, *extra]
    argv += ["--dev-source", src, "--dev-target", tgt, "--dev-alignment", links, "-o", str(tmp_path / "m")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"moses-recaser: error: {said}"), err
    assert err.count("\n") == 1 and not (tmp_path / "m").exists()


def test_a_carriage_return_inside_a_token_goes_through_triples_and_back(tmp_path, capsys):
    """Text input keeps a carriage return inside a line as part of a token; 'triples' wrote such a token, and
    the JSON Lines reader then refused the tool's own file."""
    src = _write(tmp_path / "s", "le chat\rnoir .\n")
    tgt = _write(tmp_path / "h", "the cat\rblack .\n")
    links = _write(tmp_path / "a", "0-0 1-1 2-2\n")
    jsonl = tmp_path / "t.jsonl"
    assert main(["-q", "triples", "--source", src, "--target", tgt, "--alignment", links, "-o", str(jsonl)]) == 0
    from moses_recaser.core.triples import read_triples

    (triple,) = read_triples(str(jsonl))
    assert triple.target == ["the", "cat\rblack", "."] and triple.source == ["le", "chat\rnoir", "."]


def test_a_directory_given_as_a_corpus_or_an_lm_is_called_a_directory(tmp_path, capsys):
    """It was 'not a regular file (a pipe?)' for a corpus, and 'LM file not found' for an LM given to train()."""
    from moses_recaser import train

    src = _write(tmp_path / "f", "le chat\n" * 5)
    tgt = _write(tmp_path / "e", "The cat\n" * 5)  # (a dev target with case: one without is refused first)
    links = _write(tmp_path / "a", "0-0 1-1\n" * 5)
    d = tmp_path / "d"
    d.mkdir()
    dev = ["--dev-source", src, "--dev-target", tgt, "--dev-alignment", links, "-o", str(tmp_path / "m")]
    argv = ["train", "--source", str(d), "--target", tgt, "--alignment", links, *dev]
    _fails(capsys, argv, str(d), None, "is a directory, not a file", tmp_path / "m")
    for where, source, settings in (
        ("source", d, TrainSettings()),
        ("lm", src, TrainSettings(lm=str(d))),
        ("monolingual", src, TrainSettings(monolingual=[str(d)])),
    ):
        with pytest.raises(RecaserError, match=re.escape(f"{d}: is a directory, not ")):
            train(Bitext(source, tgt, links), tmp_path / "m", settings, dev=Bitext(src, tgt, links))
        assert not (tmp_path / "m").exists(), where


def test_a_given_lm_that_is_no_lm_is_refused_before_alignment(tico, tmp_path, monkeypatch):
    """--lm was looked at only after eflomal and counting (minutes on a large corpus)."""
    from moses_recaser import train
    from moses_recaser.stats import eflomal

    def not_now(*args, **kwargs):
        raise AssertionError("aligned before the LM was looked at")

    monkeypatch.setattr(eflomal, "align", not_now)
    text = _write(tmp_path / "text.lm", "the cat\n")
    with pytest.raises(RecaserError, match=re.escape(f"{text}: neither an ARPA file nor a KenLM binary")):
        train(
            Bitext(tico / "train.fr", tico / "train.en"),
            tmp_path / "m",
            TrainSettings(lm=text),
            dev=Bitext(tico / "dev.fr", tico / "dev.en"),
        )


@pytest.mark.parametrize("dev", ["blank", "a trace of other words"])
def test_a_dev_set_that_carries_no_case_is_refused_before_the_work(tico, tmp_path, capsys, dev):
    """A dev target of blank lines (a failed earlier step), or a dev trace none of whose words are the
    reference's: every weight was fitted to 0, exit 0, and the model lowercased what it recased."""
    src, ref = tico / "dev.fr", tico / "dev.en"
    lines = ref.read_text(encoding="utf-8").splitlines()
    argv = ["train", "--source", str(tico / "train.fr"), "--target", str(tico / "train.en")]
    argv += ["--dev-source", str(src), "-o", str(tmp_path / "m")]
    if dev == "blank":
        bad = _write(tmp_path / "dev.en", "\n" * len(lines))
        argv += ["--dev-target", bad]
        said = f"the dev target's {len(lines)} lines have no words"
    else:
        sources = src.read_text(encoding="utf-8").splitlines()
        bad = _write(tmp_path / "dev.trace", "".join(f"zzz |0-{len(s.split()) - 1}| \n" for s in sources))
        argv += ["--dev-target", str(ref), "--dev-trace", bad]
        said = "none of the decoder output's .* words matches the dev reference"
    _fails(capsys, argv, bad, None, said, tmp_path / "m")


@pytest.mark.parametrize("input_case", ["lower", "cased"])
def test_a_lowercased_or_small_dev_target_is_warned_of(tico, tico_aligned, tmp_path, caplog, input_case):
    """A lowercased dev reference (an easy slip in a lowercasing EMS setup) trained silently, into weights that
    leave sentence starts in lowercase; text without capitals exists (TICO-19's first lines), so it is a warning.
    A cased dev set of 30 sentences, for a model of cased input, is warned of too (``data.CASED_DEV_MIN``)."""
    import logging

    from moses_recaser import train

    lines = (tico / "dev.en").read_text(encoding="utf-8").splitlines()[:30]
    cased = input_case == "cased"
    low = _write(tmp_path / "dev.en", "".join((x if cased else x.lower()) + "\n" for x in lines))
    src = _write(tmp_path / "dev.fr", "".join((tico / "dev.fr").read_text(encoding="utf-8").splitlines(True)[:30]))
    # the bitext with its eflomal links, made once for the suite (the dev set is the subject)
    aligned = tico_aligned
    links = _write(tmp_path / "dev.a", "".join((aligned / "dev.a").read_text(encoding="utf-8").splitlines(True)[:30]))
    with caplog.at_level(logging.WARNING):
        train(
            Bitext(aligned / "f", aligned / "e", aligned / "a"),
            tmp_path / "m",
            TrainSettings(max_iter=2, input_case=input_case),
            dev=Bitext(src, low, links),
        )
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    lowered = any(x.startswith(f"{low}: the dev target has no word with a capital letter") for x in said)
    small = any(
        x.startswith(f"{low}: 30 dev sentences fit the weights of cased input; with fewer than 100") for x in said
    )
    assert (lowered, small) == (not cased, cased), said


def test_links_that_differ_from_the_trace_lines_own_are_refused(tmp_path, capsys):
    """A -print-alignment-info line carries its own word links: an --alignment file that says otherwise (another
    run's) won silently, the line's links unread."""
    src = _write(tmp_path / "src", "le chat est noir .\n")
    trace = _write(tmp_path / "trace", "the cat is black . ||| 0-0 1-1 2-2 3-3 4-4\n")
    same = _write(tmp_path / "same", "4-4 3-3 2-2 1-1 0-0\n")  # the same links, in another order: read
    out = tmp_path / "o"
    assert main(["triples", "--source", src, "--trace", trace, "--alignment", same, "-o", str(out)]) == 0
    other = _write(tmp_path / "other", "0-4 1-3 2-2 3-1 4-0\n")
    argv = ["triples", "--source", src, "--trace", trace, "--alignment", other, "-o", str(out)]
    _fails(capsys, argv, other, 1, "differ from the trace line's own \\(-print-alignment-info, in .*trace\\)")


def test_a_missing_lmplz_is_refused_before_any_work(tmp_path, capsys):
    """`--lmplz` naming no program is one line before alignment and counting (it was lmplz's own failure, after
    them), and no model is written."""
    src = _write(tmp_path / "c.fr", "Le chat .\n" * 20)
    tgt = _write(tmp_path / "c.en", "The cat .\n" * 20)
    wa = _write(tmp_path / "c.wa", "0-0 1-1 2-2\n" * 20)
    argv = ["-q", "train", "--source", src, "--target", tgt, "--alignment", wa, "--lmplz", str(tmp_path / "lmplz")]
    assert main([*argv, "--dev-size", "5", "-o", str(tmp_path / "model")]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"moses-recaser: error: {tmp_path / 'lmplz'}: no such program, or not executable: give the path of KenLM's lmplz\n"
    )
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize("given", ["source", "target", "alignment"])
@pytest.mark.parametrize("kind", ["nul", "elf", "tar.gz"])
def test_a_file_that_is_not_text_is_named_so_before_the_work(tmp_path, capsys, given, kind):
    """A binary file given where text is expected is said to be one at its first NUL, before any line is counted:
    training counted the corpus' lines first, and said 'line-count mismatch' of a file of NULs."""
    import gzip
    import io
    import tarfile

    text = "Das ist gut .\nJa .\n" * 50
    files = {
        "source": _write(tmp_path / "f", text),
        "target": _write(tmp_path / "e", text.replace("Das ist", "That is")),
        "alignment": _write(tmp_path / "a", "0-0 1-1 2-2 3-3\n0-0 1-1\n" * 50),
    }
    if kind == "nul":
        binary = bytes(4096)
    elif kind == "elf":
        binary = b"\x7fELF\x02\x01\x01\n" + bytes(range(256)) * 8  # (a line end before the first NUL)
    else:
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            member = tarfile.TarInfo("corpus.fr")
            member.size = len(text)
            tar.addfile(member, io.BytesIO(text.encode()))
        binary = gzip.compress(archive.getvalue())
    files[given] = _write(tmp_path / f"binary.{kind}", binary)
    line, at = (2, 0) if kind == "elf" else (1, 0 if kind == "nul" else 9)
    argv = ["train", *(a for k, v in files.items() for a in (f"--{k}", v)), "--dev-size", "10", "-o", "m"]
    _fails(capsys, argv, files[given], line, rf"a NUL byte at byte {at} of the line: not a text file$", tmp_path / "m")
