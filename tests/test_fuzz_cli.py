"""Fuzzing every subcommand's entry point: whatever the files and flag values, the command ends with exit 0, or
with 2 and one line on stderr; never a traceback, never an internal error (exit 3), never a partial output."""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moses_recaser.cli import ems as ems_cli
from moses_recaser.cli import main as main_cli

TAG = "moses-recaser"  # in every temporary name

_piece = st.one_of(
    st.sampled_from(
        [
            "das",
            "ist",
            "Haus",
            "the",
            "House",
            "|0-1|",
            "|2-2|",
            "|0-",
            "|||",
            "0-0",
            "1-2",
            "x-y",
            "&amp;",
            "word|NN",
            "<b>",
            "\t",
            "0",
            "-",
            "=",
            "[LM]",
            "[RECASING]",
            "# c",
            "order = 3",
            "[a] b",
            "\\",
            '"',
            "'",
            "{",
            "}",
            ":",
            "- x",
            "!!python/object:os.system",
            "1/2",
            "\u0130",
            "ß",
            "İstanbul",
            "\ufeff",
            "\r",
        ]
    ),
    st.text(min_size=1, max_size=5),
)
_line = st.lists(_piece, max_size=8).map(" ".join)
_content = st.one_of(
    st.lists(_line, max_size=5).map(lambda xs: "".join(x.replace("\n", " ") + "\n" for x in xs)),
    st.lists(_line, min_size=1, max_size=3).map("\n".join),  # no final newline
    st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
)
_int = st.integers(-3, 6).map(str) | st.sampled_from(["x", "", "1e3", "99999999999999999999"])


def _files(draw_contents: dict[str, str], d: Path) -> dict[str, str]:
    paths = {}
    for name, text in draw_contents.items():
        p = d / name
        p.write_bytes(text.encode("utf-8", "surrogatepass"))
        paths[name] = str(p)
    return paths


# an address-space cap while a command runs: a setting that makes memory explode shows as "out of memory"
# (asserted against below), not as the machine's OOM killer ending the test run
MEMORY_CAP = 6 << 30


def _run(entry: Callable[[list[str]], int], argv: list[str], capsys, d: Path, outputs: list[str]) -> None:
    before = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
    assert not [out for out in outputs if out in before]  # outputs are new here: each must not appear on failure
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(
        resource.RLIMIT_AS, (MEMORY_CAP if hard == resource.RLIM_INFINITY else min(MEMORY_CAP, hard), hard)
    )
    try:
        code = entry(argv)
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err and "out of memory" not in err, err
    assert code in (0, 2), (code, err)
    if code == 2:
        assert err.endswith("\n") and err.count("\n") == 1, err  # one line, usage errors too
        for out in outputs:
            assert not os.path.lexists(d / out), out
    assert not [p.name for p in d.iterdir() if TAG in p.name]  # no temporary file left
    for name, data in before.items():  # inputs untouched
        if name not in outputs:
            assert (d / name).read_bytes() == data, name


FAST = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.fixture
def scratch():
    d = Path(tempfile.mkdtemp(prefix="fuzz-cli."))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _fresh(d: Path) -> Path:
    for p in d.iterdir():
        shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    return d


@FAST
@given(
    st.fixed_dictionaries({"src": _content, "trace": _content, "wa": _content}),
    st.booleans(),
    st.sampled_from(["trace", "nbest", "text", "jsonl"]),
)
def test_fuzz_triples(scratch, capsys, contents, with_wa, fmt):
    f = _files(contents, _fresh(scratch))
    argv = ["triples", "--source", f["src"], "--trace", f["trace"], "--trace-format", fmt, "-o", str(scratch / "o")]
    _run(main_cli.main, argv + (["--alignment", f["wa"]] if with_wa else []), capsys, scratch, ["o"])


@FAST
@given(_content, st.sampled_from(["en", "fr", "de", "zh", "xx", ""]))
def test_fuzz_tokenize(scratch, capsys, text, lang):
    f = _files({"raw": text}, _fresh(scratch))
    _run(main_cli.main, ["tokenize", "-l", lang, "-i", f["raw"], "-o", str(scratch / "o")], capsys, scratch, ["o"])


@FAST
@given(_content, _int, st.booleans())
def test_fuzz_lm(scratch, capsys, text, order, fallback):
    f = _files({"c": text}, _fresh(scratch))
    argv = ["lm", "--lm-order", order, "--input", f["c"], "-o", str(scratch / "o")]
    argv.append("--discount-fallback" if fallback else "--no-discount-fallback")
    _run(main_cli.main, argv, capsys, scratch, ["o"])


_bitext = st.fixed_dictionaries({"src": _content, "tgt": _content, "wa": _content})


@SLOW
@given(_bitext)
def test_fuzz_align(scratch, capsys, contents):
    f = _files(contents, _fresh(scratch))
    _run(
        main_cli.main,
        ["align", "--source", f["src"], "--target", f["tgt"], "-o", str(scratch / "o")],
        capsys,
        scratch,
        ["o"],
    )


@FAST
@given(_bitext, _int)
def test_fuzz_phrase_align(scratch, capsys, contents, seed):
    f = _files(contents, _fresh(scratch))
    argv = [
        "phrase-align",
        "--source",
        f["src"],
        "--target",
        f["tgt"],
        "--alignment",
        f["wa"],
        "--npa-seed",
        seed,
        "-o",
        str(scratch / "o"),
    ]
    _run(main_cli.main, argv, capsys, scratch, ["o"])


@SLOW
@given(_bitext, _int)
def test_fuzz_stats(scratch, capsys, contents, order):
    f = _files(contents, _fresh(scratch))
    argv = [
        "stats",
        "--source",
        f["src"],
        "--target",
        f["tgt"],
        "--alignment",
        f["wa"],
        "--lm-order",
        order,
        "-o",
        str(scratch / "m"),
    ]
    _run(main_cli.main, argv, capsys, scratch, ["m"])


@FAST
@given(_bitext, st.sampled_from(["1/2", "2/2", "0/2", "3/2", "1/0", "a/b", "-1/2", "1"]), _int)
def test_fuzz_count_and_merge(scratch, capsys, contents, shard, order):
    f = _files(contents, _fresh(scratch))
    argv = [
        "count",
        "--source",
        f["src"],
        "--target",
        f["tgt"],
        "--alignment",
        f["wa"],
        "--shard",
        shard,
        "--lm-order",
        order,
        "-o",
        str(scratch / "s.npz"),
    ]
    _run(main_cli.main, argv, capsys, scratch, ["s.npz"])
    shards = [str(scratch / "s.npz")] if (scratch / "s.npz").exists() else [f["src"]]
    _run(main_cli.main, ["merge", *shards, "-o", str(scratch / "m")], capsys, scratch, ["m"])


@SLOW
@given(_bitext, st.fixed_dictionaries({"dsrc": _content, "dtgt": _content}), _int)
def test_fuzz_train(scratch, capsys, contents, dev, order):
    f = _files({**contents, **dev}, _fresh(scratch))
    argv = [
        "train",
        "--source",
        f["src"],
        "--target",
        f["tgt"],
        "--alignment",
        f["wa"],
        "--dev-source",
        f["dsrc"],
        "--dev-target",
        f["dtgt"],
        "--dev-alignment",
        f["wa"],
        "--lm-order",
        order,
        "--max-iter",
        "3",
        "-o",
        str(scratch / "m"),
    ]
    _run(main_cli.main, argv, capsys, scratch, ["m"])


@FAST
@given(
    st.fixed_dictionaries({"src": _content, "hyp": _content, "wa": _content}),
    st.sampled_from(["trace", "input", "triples", "trace-nbest"]),
    st.booleans(),
    _int,
)
def test_fuzz_recase(tico, scratch, capsys, contents, how, with_source, threads):
    f = _files(contents, _fresh(scratch))
    flag = {"trace": ["--trace"], "input": ["--input"], "triples": ["--triples"], "trace-nbest": ["--nbest", "--trace"]}
    argv = [
        "recase",
        "--model",
        str(tico / "model"),
        *flag[how],
        f["hyp"],
        "--jobs",
        threads,
        "-o",
        str(scratch / "o"),
    ]
    if with_source:
        argv += ["--source", f["src"], "--alignment", f["wa"]]
    _run(main_cli.main, argv, capsys, scratch, ["o"])


@FAST
@given(_content, _content)
def test_fuzz_eval(scratch, capsys, hyp, ref):
    f = _files({"hyp": hyp, "ref": ref}, _fresh(scratch))
    _run(main_cli.main, ["eval", "--hyp", f["hyp"], "--ref", f["ref"], "--confusion"], capsys, scratch, [])


_yaml_doc = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "name",
                "pair",
                "sigma",
                "lm_order",
                "splits",
                "systems",
                "train",
                "data_root",
                "heldout",
                "learning_curve",
                "features",
                "x",
            ]
        ),
        _piece | _int,
    ),
    max_size=5,
).map(lambda kv: "".join(f"{k}: {v}\n" for k, v in kv))


@FAST
@given(_yaml_doc | _content)
def test_fuzz_experiment(scratch, capsys, text):
    f = _files({"cfg.yaml": text}, _fresh(scratch))
    argv = [
        "experiment",
        f["cfg.yaml"],
        "-o",
        str(scratch / "out"),
        "--cache",
        str(scratch / "cache"),
        "--data-root",
        str(scratch),
    ]
    _run(main_cli.main, argv, capsys, scratch, ["out"])  # the stage cache is not an output: it may stay


@FAST
@given(st.fixed_dictionaries({"in": _content, "src": _content, "trace": _content, "wa": _content}), st.booleans())
def test_fuzz_ems_recase(tico, scratch, capsys, contents, bilingual):
    f = _files(contents, _fresh(scratch))
    argv = ["recase", "-in", f["in"], "-model", str(tico / "model"), "-o", str(scratch / "o")]
    if bilingual:
        argv += ["-source", f["src"], "-trace", f["trace"], "-alignment", f["wa"]]
    _run(ems_cli.main, argv, capsys, scratch, ["o"])


@SLOW
@given(_bitext, _int)
def test_fuzz_ems_train(scratch, capsys, contents, dev_size):
    f = _files(contents, _fresh(scratch))
    argv = [
        "train",
        "-dir",
        str(scratch / "work"),
        "-corpus",
        f["tgt"],
        "-source-corpus",
        f["src"],
        "-alignment",
        f["wa"],
        "-dev-size",
        dev_size,
        "-config",
        str(scratch / "cfg"),
    ]
    _run(ems_cli.main, argv, capsys, scratch, ["cfg", "work"])


_ems_text = st.lists(
    st.one_of(
        _line,
        st.sampled_from(
            [
                "[GENERAL]",
                "[RECASING]",
                "[EVALUATION]",
                "[TRUECASER]",
                "working-dir = /x",
                "decoder-settings = -t",
                "recase-output",
                "    in: system-output",
                "    out: recased-output",
                "    default-name: x",
                "    template: $binary IN OUT",
                "detruecase-output",
                "output-lowercaser = $moses-script-dir/x",
                "[EVALUATION:test]",
                "train",
                "  in: a",
                "  out: b",
                "IGNORE",
                "# comment",
            ]
        ),
    ),
    max_size=12,
).map(lambda xs: "\n".join(xs) + "\n")


@FAST
@given(_ems_text | _content)
def test_fuzz_ems_meta(scratch, capsys, text):
    f = _files({"experiment.meta": text}, _fresh(scratch))
    _run(ems_cli.main, ["meta", "--moses-meta", f["experiment.meta"], "-o", str(scratch / "o")], capsys, scratch, ["o"])


@FAST
@given(_ems_text | _content, st.booleans())
def test_fuzz_ems_config_and_check(scratch, capsys, text, stock):
    f = _files({"config": text}, _fresh(scratch))
    argv = ["config", "--merge", f["config"], "-o", str(scratch / "o")] + (["--stock-set"] * stock)
    _run(ems_cli.main, argv, capsys, scratch, ["o"])
    _run(ems_cli.main, ["check", f["config"]], capsys, scratch, [])


# which fuzzer drives which subcommand (``ems NAME`` for moses-recaser-ems): checked against both parsers
FUZZED = {
    "test_fuzz_triples": ["triples"],
    "test_fuzz_tokenize": ["tokenize"],
    "test_fuzz_lm": ["lm"],
    "test_fuzz_align": ["align"],
    "test_fuzz_phrase_align": ["phrase-align"],
    "test_fuzz_stats": ["stats"],
    "test_fuzz_count_and_merge": ["count", "merge"],
    "test_fuzz_train": ["train"],
    "test_fuzz_recase": ["recase"],
    "test_fuzz_eval": ["eval"],
    "test_fuzz_experiment": ["experiment"],
    "test_fuzz_ems_recase": ["ems recase"],
    "test_fuzz_ems_train": ["ems train"],
    "test_fuzz_ems_meta": ["ems meta"],
    "test_fuzz_ems_config_and_check": ["ems config", "ems check"],
}


def test_every_subcommand_is_fuzzed():
    import inspect

    from test_faults import subcommands

    assert sorted(n for names in FUZZED.values() for n in names) == sorted(subcommands())
    for test, names in FUZZED.items():
        source = inspect.getsource(globals()[test])
        for name in names:
            entry = "ems_cli.main" if name.startswith("ems ") else "main_cli.main"
            assert f'"{name.removeprefix("ems ")}"' in source and entry in source, (test, name)
