"""The trained recaser end to end: quality sanity, invariants, round trips, all input forms."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moses_recaser import TrainSettings
from moses_recaser.cli.main import main
from moses_recaser.core import casing
from moses_recaser.core.sentences import chunks
from moses_recaser.core.triples import Triple
from moses_recaser.harness.metrics import case_scores
from moses_recaser.io.modeldir import read_manifest
from moses_recaser.model.recaser import Recaser
from moses_recaser.moses.bitext import read_aligned_bitext


def _lines(path):
    return [x.split() for x in path.read_text(encoding="utf-8").splitlines()]


def test_model_records_settings_weights_and_signature(tico):
    m = read_manifest(tico / "model")
    # the defaults: the configuration docs/results.md evaluates
    assert m.settings["sigma"] == 1.0 and m.settings["alignment_mode"] == "links"
    assert m.settings["feature_set"] == "full"
    assert m.extra["weights"]["names"][0] == "lm"
    assert set(m.extra["weights"]["modes"]) == {"both", "phrases", "links", "source", "mono"}
    assert "feat:full" in m.signature and "|w:" in m.signature
    assert "|align:files|" in m.signature  # the links given for training and dev (eflomal's: test_readme)
    assert 0.95 < m.extra["training"]["gen_oracle"] <= 1.0
    assert "aligner.priors" not in m.files  # --align aligns with the tables, not eflomal's priors


def test_bilingual_beats_monolingual_beats_lowercase(tico):
    out_bi, out_mono = tico / "bi.en", tico / "mono.en"
    assert (
        main(
            [
                "-q",
                "recase",
                "--model",
                str(tico / "model"),
                "--source",
                str(tico / "test.fr"),
                "--input",
                str(tico / "test.lc.en"),
                "--alignment",
                str(tico / "test.wa"),
                "-o",
                str(out_bi),
            ]
        )
        == 0
    )
    assert (
        main(["-q", "recase", "--model", str(tico / "model"), "--input", str(tico / "test.lc.en"), "-o", str(out_mono)])
        == 0
    )
    ref = _lines(tico / "test.en")
    p_bi = case_scores(_lines(out_bi), ref).precision
    p_mono = case_scores(_lines(out_mono), ref).precision
    p_low = case_scores(_lines(tico / "test.lc.en"), ref).precision
    assert p_low < p_mono < p_bi
    assert p_bi > 0.95


def test_round_trip_through_disk_is_byte_identical(tico, tmp_path):
    triples = list(read_aligned_bitext(str(tico / "test.fr"), str(tico / "test.lc.en")))
    a = list(Recaser(tico / "model").recase_triples(triples))
    copy = tmp_path / "copied-model"
    shutil.copytree(tico / "model", copy)
    b = list(Recaser(copy).recase_triples(triples))
    assert a == b
    # batches of another size give the same as one batch, and so does the streaming path
    r = Recaser(copy)
    assert [t for part in chunks(triples, 7) for t in list(r.recase_triples(part))] == a
    assert list(r.recase_triples(triples)) == a


def test_trace_input_recases_and_drops_markers(tico, tmp_path):
    src = tico / "trace.src"
    src.write_text("Le virus SARS-CoV-2 provoque la COVID-19 .\nL' OMS a publié un rapport .\n", encoding="utf-8")
    trace = tico / "trace.out"
    trace.write_text(
        "the sars-cov-2 virus |0-2| causes |3-3| covid-19 |4-5| . |6-6| \n"
        "the who |0-1| published |2-3| a report |4-5| . |6-6| \n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "-q",
                "recase",
                "--model",
                str(tico / "model"),
                "--source",
                str(src),
                "--trace",
                str(trace),
                "-o",
                str(out),
            ]
        )
        == 0
    )
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0].split()[:3] == ["The", "SARS-CoV-2", "virus"]
    assert "|" not in out.read_text()
    assert [casing.lower(x) for x in lines[1].split()] == ["the", "who", "published", "a", "report", "."]


def test_nbest_is_recased_in_place(tico, tmp_path):
    src = tico / "nb.src"
    src.write_text("L' OMS a publié .\n", encoding="utf-8")
    nb = tico / "nb"
    nb.write_text(
        "0 ||| the who |0-1| published |2-3| . |4-4|  ||| LM0= -1 TM0= -2 ||| -3.5 ||| 0-1=0-1 2-3=2 4=3 "
        "||| 0-0 1-1 \n"
        "0 ||| who published . |0-4|  ||| LM0= -1 TM0= -2 ||| -4.5\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "-q",
                "recase",
                "--model",
                str(tico / "model"),
                "--source",
                str(src),
                "--trace",
                str(nb),
                "--nbest",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("0 ||| The ")
    assert lines[0].endswith(" ||| LM0= -1 TM0= -2 ||| -3.5 ||| 0-1=0-1 2-3=2 4=3 ||| 0-0 1-1 ")
    assert "|0-1|" in lines[0] and len(lines) == 2


def test_triples_input_and_explain(tico, tmp_path):
    t = Triple(
        0,
        ["Le", "Canada", "et", "l'", "OMS"],
        ["canada", "and", "the", "who"],
        phrases=[(0, 1, 0, 0), (2, 2, 1, 1), (3, 4, 2, 3)],
    )
    f = tmp_path / "t.jsonl"
    f.write_text(t.dumps() + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["-q", "recase", "--model", str(tico / "model"), "--triples", str(f), "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8").split()[0] == "Canada"
    assert main(["-q", "recase", "--model", str(tico / "model"), "--triples", str(f), "--explain", "-o", str(out)]) == 0
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines() if x]
    assert next(r["chosen"] for r in rows) == "Canada"
    assert {"lm", "initial"} <= set(rows[0]["features"])
    assert rows[0]["runner_up"] in ("canada", "CANADA")


_token = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")), min_size=1, max_size=8),
    st.sampled_from(
        [
            "&amp;",
            "&#124;",
            "&quot;",
            "http://who.int/Covid",
            "/home/DOC",
            "ß",
            "İstanbul",
            "ΟΔΟΣ",
            "σοφός",
            "word|FACTOR",
            "<b>",
            "2020",
            "covid-19",
            "ǆemal",
            "ﬁne",
        ]
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(_token, max_size=12), min_size=1, max_size=4), st.booleans())
def test_property_case_only_and_same_length(tico, lines, with_source):
    rec = _recaser(tico)
    triples = []
    for k, toks in enumerate(lines):
        toks = [t.replace(" ", "").replace("\t", "") or "x" for t in toks]
        src = ["Le", "Document", "HTTP://WHO.INT/COVID", "Ǆemal", "ΟΔΟΣ"] if with_source else []
        links = [(min(i, len(src) - 1), i) for i in range(len(toks))] if src else None
        triples.append(Triple(k, src, toks, links=links))
    out = list(rec.recase_triples(triples))
    assert len(out) == len(triples)
    for t, o in zip(triples, out):
        assert len(o) == len(t.target)
        for a, b in zip(t.target, o):
            # the same length, but for the one documented exception: İ and the two characters of its lowercase
            # (i + U+0307) are case variants of each other (casing.is_recasing_of; "0-İ" may come out "0-i̇")
            assert casing.lower(a) == casing.lower(b) and casing.is_recasing_of(b, a), (a, b)


def test_a_batch_mixing_sentences_with_and_without_source_recases_each_as_alone(tico):
    rec = _recaser(tico)
    triples = [t for t, _ in zip(read_aligned_bitext(str(tico / "test.fr"), str(tico / "test.lc.en")), range(40))]
    for t in triples:
        t.links = [(min(i, len(t.source) - 1), i) for i in range(len(t.target))]
    mixed = [t if k % 2 else Triple(t.id, [], t.target) for k, t in enumerate(triples)]
    alone = [list(rec.recase_triples([t]))[0] for t in mixed]
    assert list(rec.recase_triples(mixed)) == alone
    # the two modes differ on some of these sentences, so a mix-up of weights would show
    assert any(alone[k] != list(rec.recase_triples([Triple(k, [], triples[k].target)]))[0] for k in range(1, 40, 2))


_CACHE: dict = {}


def _recaser(tico) -> Recaser:
    if "r" not in _CACHE:
        _CACHE["r"] = Recaser(tico / "model")
    return _CACHE["r"]


def test_output_is_deterministic_across_runs_and_threads(tico, tmp_path):
    lines = (tico / "test.lc.en").read_text(encoding="utf-8").splitlines() * 4
    inp = tmp_path / "in"
    inp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outs = []
    for threads in (1, 2, 3, 1):
        out = tmp_path / f"out{len(outs)}"
        assert (
            main(
                [
                    "-q",
                    "recase",
                    "--model",
                    str(tico / "model"),
                    "--input",
                    str(inp),
                    "--jobs",
                    str(threads),
                    "-o",
                    str(out),
                ]
            )
            == 0
        )
        outs.append(out.read_bytes())
    assert len(set(outs)) == 1
    assert len(outs[0].decode().splitlines()) == len(lines)


def test_bilingual_trace_output_is_identical_across_threads(tico, tmp_path):
    from moses_recaser.moses.bitext import read_aligned_bitext
    from moses_recaser.stats.npa import phrase_align_triple

    triples = list(read_aligned_bitext(str(tico / "test.fr"), str(tico / "test.lc.en")))
    f = tmp_path / "t.jsonl"
    rows = []
    for t in triples:
        t.links = [(min(i, len(t.source) - 1), i) for i in range(len(t.target))] if t.source else []
        rows.append(phrase_align_triple(t).dumps())
    f.write_text("\n".join(rows * 3) + "\n", encoding="utf-8")
    outs = []
    for threads in (1, 2):
        out = tmp_path / f"o{threads}"
        assert (
            main(
                [
                    "-q",
                    "recase",
                    "--model",
                    str(tico / "model"),
                    "--triples",
                    str(f),
                    "--jobs",
                    str(threads),
                    "-o",
                    str(out),
                ]
            )
            == 0
        )
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_recasing_commands_can_still_limit_blas_threads():
    # workers.single_threaded_blas works only while numpy is unloaded: importing the CLIs must not load it
    code = "import sys, moses_recaser.cli.main, moses_recaser.cli.ems; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_recase_command_sets_one_blas_thread_before_numpy_loads(tico):
    # single_threaded_blas sets the variable only while numpy is unloaded (it once sat in a module that loads it)
    lc = tico / "test.lc.en"
    code = (
        "import os, sys; from moses_recaser.cli.main import main; "
        f"main(['-q', 'recase', '--model', {str(tico / 'model')!r}, '--input', {str(lc)!r}, '-o', os.devnull]); "
        "print(os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["1", "True"]


def test_the_console_command_flushes_its_output_and_exit_code(tico, tmp_path):
    # as a process of its own, the command leaves with os._exit (cli.exit_now): piped output must be whole
    model, lc = str(tico / "model"), tico / "test.lc.en"
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout block-buffered
    out = subprocess.run(
        [sys.executable, "-m", "moses_recaser.cli.main", "-q", "recase", "--model", model, "--input", "-"],
        input=lc.read_text(encoding="utf-8"),
        capture_output=True,
        text=True,
        check=False,
        env=buffered,
    )
    want = tmp_path / "want.en"
    assert main(["-q", "recase", "--model", model, "--input", str(lc), "-o", str(want)]) == 0
    assert out.returncode == 0 and out.stdout == want.read_text(encoding="utf-8")
    bad = subprocess.run(
        [sys.executable, "-m", "moses_recaser.cli.main", "recase", "--model", str(tmp_path / "none"), "--input", "-"],
        input="x\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "model not found" in bad.stderr


_chars = st.sampled_from(["a", "A", "σ", "Σ", "ς", "i", "İ", "ı", "I", "ß", "ẞ", "'", ".", "\n", "x"])
_sentence = st.lists(st.lists(_chars, min_size=1, max_size=4).map("".join), max_size=4)


@given(
    st.lists(
        st.tuples(
            _sentence, st.lists(st.sampled_from(["same", "upper", "lower", "swap", "drop"]), min_size=4, max_size=4)
        ),
        max_size=4,
    )
)
def test_case_only_check_of_a_batch_agrees_with_the_per_token_test(cases):
    from moses_recaser.core.casing import check_case_only_all

    inputs, outputs = [], []
    for sent, how in cases:
        out = []
        for tok, h in zip(sent, how):
            out.append(
                {"same": tok, "upper": tok.upper(), "lower": tok.lower(), "swap": tok.swapcase(), "drop": tok[1:]}[h]
            )
        inputs.append(sent)
        outputs.append(out)
    ok = all(
        len(i) == len(o) and all(casing.is_recasing_of(b, a) for a, b in zip(i, o)) for i, o in zip(inputs, outputs)
    )
    if ok:
        check_case_only_all(inputs, outputs)
    else:
        with pytest.raises(AssertionError, match="recasing changed tokens"):
            check_case_only_all(inputs, outputs)


def test_the_signature_tells_a_dev_only_eflomal_alignment_apart(tico, tmp_path):
    """Tables from a given alignment, dev aligned by eflomal: not 'align:eflomal' (as if the tables were)."""
    import moses_recaser

    links = tmp_path / "train.wa"
    links.write_text("".join("0-0\n" for _ in (tico / "train.en").read_text(encoding="utf-8").splitlines()))
    for side in ("fr", "en"):  # a short dev set: eflomal's time is not the subject
        dev = (tico / f"dev.{side}").read_text(encoding="utf-8").splitlines(True)[:20]
        (tmp_path / f"dev.{side}").write_text("".join(dev), encoding="utf-8")
    model = moses_recaser.train(
        moses_recaser.Bitext(tico / "train.fr", tico / "train.en", links),
        tmp_path / "m",
        TrainSettings(max_iter=5),
        dev=moses_recaser.Bitext(tmp_path / "dev.fr", tmp_path / "dev.en"),
    )
    assert "|align:files+dev:eflomal+grow-diag-final-and|" in read_manifest(model).signature
