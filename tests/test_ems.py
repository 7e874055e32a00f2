"""Moses EMS integration without Moses' own scripts: the meta reader and patch on a hand-made meta, the
config merge, and the steps' commands on a trained model (tests/test_ems_moses.py drives experiment.perl)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from moses_recaser.core import casing
from moses_recaser.ems.meta import PATCHES, dangling_inputs, patch_meta, read_meta
from moses_recaser.harness.metrics import case_scores
from moses_recaser.io.errors import RecaserError
from moses_recaser.moses.pharaoh import format_links, parse_links
from moses_recaser.stats.npa import phrase_align_triple

EMS = str(Path(sys.executable).parent / "moses-recaser-ems")

# A small meta in experiment.meta's format, with the steps around the recaser as Moses has them.
MOSES_META = """# test meta
[CORPUS] multiple
tokenize
\tin: raw-stem
\tout: tokenized-stem
\ttemplate: tok IN OUT
clean
\tin: tokenized-stem
\tout: clean-stem
parse
\tin: clean-stem
\tout: clean-parsed-stem
\tpass-unless: input-parser

[TRAINING] single
consolidate
\tin: CORPUS:clean-parsed-stem
\tout: corpus
symmetrize-giza
\tin: corpus
\tout: word-alignment
\tdefault-name: model/aligned
build-suffix-array
\tin: corpus
\tout: suffix-array
\ttemplate: $salm-index IN.$input-extension ; \\
\t\tmv IN.${input-extension}.id_voc OUT.${input-extension}.id_voc # a comment \\
\t\t; echo done

[RECASING] single
tokenize
\tin: raw
\tout: tokenized
\tdefault-name: recasing/cased
\ttemplate: $output-tokenizer < IN > OUT
train
\tin: tokenized
\tout: recase-config
\ttemplate: $moses-script-dir/recaser/train-recaser.perl -train-script $TRAINING:script -dir OUT.model -corpus IN -scripts-root-dir $moses-script-dir -config OUT $recasing-settings
\tdefault-name: recasing/moses.ini
\ttmp-name: recasing/model
\tignore-unless: EVALUATION:recaser
\terror: cannot execute binary file

[EVALUATION] multiple
input-from-sgm
\tin: input-sgm
\tout: raw-input
tokenize-input
\tin: raw-input
\tout: tokenized-input
decode
\tin: TRAINING:config tokenized-input
\tout: system-output
remove-markup
\tin: system-output
\tout: cleaned-output
\tpass-unless: report-segmentation
transliterate
\tin: cleaned-output
\tout: transliterated-output
\tpass-unless: transliteration
recase-output
\tin: transliterated-output RECASING:recase-config
\tout: recased-output
\tdefault-name: evaluation/recased
\tpass-unless: recaser
\tignore-if: output-truecaser
\ttemplate: $recaser -moses $RECASING:decoder -in IN -model IN1 > OUT
detruecase-output
\tin: transliterated-output
\tout: recased-output
\tdefault-name: evaluation/truecased
\tignore-unless: output-truecaser
\ttemplate: $detruecaser < IN > OUT
detokenize-output
\tin: recased-output
\tout: detokenized-output
"""


def test_the_reader_joins_continued_lines_and_drops_comments_as_experiment_perl():
    meta = read_meta(MOSES_META)
    step = meta.find("TRAINING", "build-suffix-array")
    # s/\#.*$// strips the first line only, then the next lines are joined raw (experiment.perl's read_meta)
    assert step.attrs["template"] == (
        "$salm-index IN.$input-extension ; mv IN.${input-extension}.id_voc "
        "OUT.${input-extension}.id_voc # a comment ; echo done"
    )
    assert meta.find("TRAINING", "symmetrize-giza").names("out") == ["word-alignment"]
    assert meta.sections == {"CORPUS": "multiple", "TRAINING": "single", "RECASING": "single", "EVALUATION": "multiple"}


def test_patch_changes_only_the_recaser_steps():
    patched = patch_meta(MOSES_META)
    meta = read_meta(patched.text)
    train = meta.find("RECASING", "train")
    assert train.names("in") == ["cased-corpus", "TRAINING:word-alignment", "tokenized"]
    assert "-source-corpus IN.$input-extension" in train.attrs["template"]
    assert " -mono IN2 " in train.attrs["template"]  # [RECASING] tokenized: empty when the config names none
    assert meta.find("RECASING", "tokenize").attrs["ignore-unless"] == "raw"
    assert train.names("rerun-on-change") == ["recaser-train", "recasing-settings"]
    recase = meta.find("EVALUATION", "recase-output")
    assert recase.names("in") == ["transliterated-output", "RECASING:recase-config", "system-output", "tokenized-input"]
    assert [s.name for s in meta.steps if s.section == "RECASING"] == [
        "tokenize",
        "consolidate-cased",
        "train",
        "train-stock",
    ]
    assert meta.find("EVALUATION", "remove-markup").names("pass-unless") == [
        "report-segmentation",
        "report-precision-by-coverage",
    ]
    # every other line is byte for byte as before
    original = read_meta(MOSES_META)
    changed = {(p.section, p.derive_from or p.name) for p in PATCHES if not p.adds}
    for step in original.steps:
        if (step.section, step.name) not in changed:
            new = meta.find(step.section, step.name)
            assert meta.lines[new.start : new.end] == original.lines[step.start : step.end]
    # the truecase layout: the recaser in detruecase-output's place, reading what recase-output reads
    assert meta.find("EVALUATION", "detruecase-output").attrs["ignore-if"] == "recaser"
    truecased = meta.find("EVALUATION", "recase-truecased-output")
    assert truecased.names("in") == recase.names("in") and truecased.attrs["template"] == recase.attrs["template"]
    assert truecased.attrs["ignore-unless"] == "AND output-truecaser recaser"
    assert truecased.attrs["ignore-if"] == "stock-recaser"
    stock = meta.find("EVALUATION", "detruecase-output-stock")
    assert stock.attrs["template"] == "$stock-recaser < IN > OUT"
    assert stock.attrs["ignore-unless"] == "AND output-truecaser recaser stock-recaser"
    evaluation = [s.name for s in meta.steps if s.section == "EVALUATION"]
    assert evaluation[evaluation.index("detruecase-output") :][:4] == [
        "detruecase-output",
        "recase-truecased-output",
        "detruecase-output-stock",
        "detokenize-output",
    ]
    # a meta without $?name templates: the decoder's settings cannot be passed, and the notes say so
    assert "-decoder-settings" not in recase.attrs["template"]
    assert any("optional template variables" in n for n in patched.notes)


def test_every_input_of_the_patched_steps_is_produced_by_some_step():
    meta = read_meta(patch_meta(MOSES_META).text)
    # RECASING tokenize keeps Moses' own input, raw: a file the config names, which no step writes
    ours = [meta.find(p.section, p.name) for p in PATCHES if p.name != "tokenize"]
    assert dangling_inputs(meta, ours) == []
    # and the check itself catches a dangling name
    broken = read_meta(patch_meta(MOSES_META.replace("\tout: word-alignment", "\tout: aligned")).text)
    assert dangling_inputs(broken, [broken.find("RECASING", "train")]) == ["[RECASING] train: TRAINING:word-alignment"]


def test_patch_fails_clearly_on_what_is_not_a_moses_meta_or_was_patched_before():
    text = MOSES_META.replace("recase-output\n", "recase-something\n")
    with pytest.raises(RecaserError, match=r"lacks the steps the recaser patches: \[EVALUATION\] recase-output"):
        patch_meta(text, "experiment.meta")
    with pytest.raises(RecaserError, match="patched before"):
        patch_meta(patch_meta(MOSES_META).text)


def test_meta_command(tmp_path, capsys):
    src = tmp_path / "experiment.meta"
    src.write_text(MOSES_META, encoding="utf-8")
    out = tmp_path / "recaser.meta"
    assert _ems(capsys, "meta", "--moses-meta", str(src), "-o", str(out)).returncode == 0
    assert "-trace IN2 -source IN3" in out.read_text(encoding="utf-8")
    bad = _ems(capsys, "meta", "--moses-meta", str(tmp_path / "nope"), "-o", str(out))
    assert bad.returncode == 2 and bad.stderr == f"moses-recaser-ems: error: {tmp_path / 'nope'}: no such file\n"


def _ems(capsys, *args: str) -> subprocess.CompletedProcess[str]:
    """moses-recaser-ems in this process, where the process is not what is tested: its exit code, stdout and
    stderr, as subprocess.run(capture_output=True, text=True) has them (notes, which go to logging, aside)."""
    from moses_recaser.cli.ems import main

    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, out.out, out.err)


def _write(path: Path, lines) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def ems_work(tico, tmp_path_factory):
    """An EMS working directory with a trained recaser, a decoder -t trace and its .wa file."""
    w = tmp_path_factory.mktemp("ems")
    fr = (tico / "train.fr").read_text(encoding="utf-8").splitlines() + (tico / "dev.fr").read_text(
        encoding="utf-8"
    ).splitlines()
    en = (tico / "train.en").read_text(encoding="utf-8").splitlines() + (tico / "dev.en").read_text(
        encoding="utf-8"
    ).splitlines()
    test_fr = (tico / "test.fr").read_text(encoding="utf-8").splitlines()
    test_en = (tico / "test.en").read_text(encoding="utf-8").splitlines()
    # tico's links: train, dev and test aligned in one eflomal run
    links = [(tico / f"{name}.wa").read_text(encoding="utf-8").splitlines() for name in ("train", "dev", "test")]
    _write(w / "recasing" / "corpus.1.fr", fr)
    _write(w / "recasing" / "corpus.1.en", en)
    _write(w / "model" / "aligned.1.grow-diag-final-and", links[0] + links[1])
    # the decoder's view: lowercased output with -t markers (phrases from the NPA) and its .wa file
    _write(w / "evaluation" / "test.input.tok.1", test_fr)
    _write(w / "evaluation" / "test.reference.tok.1", test_en)
    trace, wa, cleaned = [], [], []
    for k, (f, e) in enumerate(zip(test_fr, test_en)):
        low = [casing.lower(x) for x in e.split()]
        t = phrase_align_triple(next(iter(read_aligned_bitext_from(f, " ".join(low), parse_links(links[2][k])))))
        out = ""
        for s0, s1, t0, t1 in t.phrases:
            out += "".join(x + " " for x in t.target[t0 : t1 + 1]) + f"|{s0}-{s1}| "
        trace.append(out)
        wa.append(format_links(t.links) + " ")
        cleaned.append(" ".join(t.target))
    _write(w / "evaluation" / "test.output.1", trace)
    _write(w / "evaluation" / "test.output.1.wa", wa)
    _write(w / "evaluation" / "test.cleaned.1", cleaned)
    # the LM corpus: TICO-19 English lines no split uses
    from moses_recaser.moses.tokenizer import tokenizer

    raw = (Path(__file__).parents[1] / "data" / "tico19" / "tico19-test.en").read_text(encoding="utf-8")
    _write(w / "lm" / "corpus.en", [" ".join(tokenizer("en")(x)) for x in raw.splitlines()[800:1400]])
    # [RECASING] train, as the overlay's template expands it, with -mono from recasing-settings
    cmd = (
        f"{EMS} train -dir {w}/recasing/moses.ini.1.model -corpus {w}/recasing/corpus.1.en "
        f"-source-corpus {w}/recasing/corpus.1.fr -alignment {w}/model/aligned.1.grow-diag-final-and "
        f"-config {w}/recasing/moses.ini.1 -dev-size 100 -mono {w}/lm/corpus.en"
    )
    proc = subprocess.run(["bash", "-c", cmd], check=True, capture_output=True, text=True)
    (w / "train.stderr").write_text(proc.stderr, encoding="utf-8")
    return w


def read_aligned_bitext_from(src: str, tgt: str, links):
    from moses_recaser.core.triples import Triple

    yield Triple(0, src.split(), tgt.split(), links=links)


def test_training_step_writes_the_config_later_steps_receive(ems_work):
    config = (ems_work / "recasing" / "moses.ini.1").read_text(encoding="utf-8")
    assert config.startswith("# moses-recaser model") and "model: " in config
    assert (ems_work / "recasing" / "moses.ini.1.model" / "model" / "manifest.yaml").is_file()
    from moses_recaser.io.modeldir import read_manifest

    m = read_manifest(ems_work / "recasing" / "moses.ini.1.model" / "model")
    assert m.settings["monolingual"] == [str(ems_work / "lm" / "corpus.en")] and "|mono:" in m.signature


def test_recase_step_as_the_overlay_expands_it(ems_work):
    w = ems_work
    cmd = (
        f"{EMS} recase -moses /opt/moses/bin/moses -in {w}/evaluation/test.cleaned.1 -model {w}/recasing/moses.ini.1 "
        f"-trace {w}/evaluation/test.output.1 -source {w}/evaluation/test.input.tok.1 "
        f"-alignment {w}/evaluation/test.output.1.wa > {w}/evaluation/test.recased.1"
    )
    subprocess.run(["bash", "-c", cmd], check=True, capture_output=True)
    out = (w / "evaluation" / "test.recased.1").read_text(encoding="utf-8").splitlines()
    ref = (w / "evaluation" / "test.reference.tok.1").read_text(encoding="utf-8").splitlines()
    assert len(out) == len(ref)
    bi = case_scores([x.split() for x in out], [x.split() for x in ref]).precision
    # recase.perl's own flags only: monolingual mode still works
    mono_cmd = (
        f"{EMS} recase -moses /opt/moses/bin/moses -in {w}/evaluation/test.cleaned.1 "
        f"-model {w}/recasing/moses.ini.1 > {w}/evaluation/test.recased.mono.1"
    )
    subprocess.run(["bash", "-c", mono_cmd], check=True, capture_output=True)
    mono_out = (w / "evaluation" / "test.recased.mono.1").read_text(encoding="utf-8").splitlines()
    assert len(mono_out) == len(ref)
    mono = case_scores([x.split() for x in mono_out], [x.split() for x in ref]).precision
    low = case_scores(
        [x.split() for x in (w / "evaluation" / "test.cleaned.1").read_text().splitlines()], [x.split() for x in ref]
    ).precision
    assert low < mono < bi


def test_recase_step_without_the_wa_file(ems_work, tmp_path):
    w = ems_work
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            EMS,
            "recase",
            "-in",
            f"{w}/evaluation/test.cleaned.1",
            "-model",
            f"{w}/recasing/moses.ini.1",
            "-trace",
            f"{w}/evaluation/test.output.1",
            "-source",
            f"{w}/evaluation/test.input.tok.1",
            "-alignment",
            f"{w}/evaluation/missing.wa",
            "-o",
            str(out),
        ],
        check=False,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and "no word alignment file" in proc.stderr
    assert len(out.read_text().splitlines()) == 150


def test_recase_step_with_a_directory_as_its_word_links_is_one_line(ems_work, tmp_path, capsys):
    """'Skipped if absent' is for a file EMS did not write; a directory given (as -alignment, or as the decoder
    settings' -alignment-output-file) is a mistake, refused as the main command refuses it: it was taken for an
    absent file, with a warning that -q hides, and recasing went on without the links."""
    w = ems_work
    (tmp_path / "links.wa").mkdir()
    base = ["-q", "recase", "-in", f"{w}/evaluation/test.cleaned.1", "-model", f"{w}/recasing/moses.ini.1"]
    base += ["-trace", f"{w}/evaluation/test.output.1", "-source", f"{w}/evaluation/test.input.tok.1"]
    out = tmp_path / "out"
    for extra in (
        ["-alignment", str(tmp_path / "links.wa")],
        ["-decoder-settings", f"-alignment-output-file {tmp_path}"],
    ):
        proc = _ems(capsys, *base, *extra, "-o", str(out))
        assert proc.returncode == 2 and proc.stderr.endswith(": is a directory, not a file\n"), proc.stderr
        assert proc.stderr.count("\n") == 1 and not out.exists()


def test_headline_sgm_title_cases_hl_segments(ems_work, tmp_path, capsys):
    w = ems_work
    lines = (w / "evaluation" / "test.cleaned.1").read_text(encoding="utf-8").splitlines()[:3]
    inp = _write(tmp_path / "in", lines)
    sgm = _write(
        tmp_path / "src.sgm",
        [
            '<srcset setid="t" srclang="fr">',
            '<doc docid="d1">',
            "<hl>",
            '<seg id="1">x</seg>',
            "</hl>",
            "<p>",
            '<seg id="2">y</seg>',
            '<seg id="3">z</seg>',
            "</p>",
            "</doc>",
            "</srcset>",
        ],
    )
    out = tmp_path / "out"
    args = ["recase", "-in", str(inp), "-model", f"{w}/recasing/moses.ini.1", "-headline", str(sgm), "-o", str(out)]
    assert _ems(capsys, *args).returncode == 0
    first = out.read_text(encoding="utf-8").splitlines()[0].split()
    for word in first:
        if casing.has_letter(word) and word not in {
            "a",
            "the",
            "of",
            "and",
            "in",
            "to",
            "for",
            "with",
            "is",
            "as",
            "by",
            "on",
            "at",
            "from",
        }:
            assert casing.is_capitalized(word), first
    # a headline file of more segments than -in has lines is the wrong file, as one of fewer is
    longer = _write(
        tmp_path / "long.sgm", sgm.read_text(encoding="utf-8").replace("</p>", '<seg id="4">w</seg>\n</p>').splitlines()
    )

    def refused(infile: Path, headline: Path) -> str:
        proc = _ems(
            capsys,
            *("recase", "-in", str(infile), "-model", f"{w}/recasing/moses.ini.1", "-headline", str(headline)),
            *("-o", str(tmp_path / "none")),
        )
        assert proc.returncode == 2 and proc.stdout == "" and not (tmp_path / "none").exists()
        return proc.stderr

    at = next(k for k, x in enumerate(longer.read_text(encoding="utf-8").splitlines(), 1) if 'id="4"' in x)
    assert refused(inp, longer) == f"moses-recaser-ems: error: {longer}:{at}: <seg> line 4, but -in {inp} has 3 lines\n"
    # and -in of more lines than the file has segments, at -in's first line without one
    more = _write(tmp_path / "more.in", [*inp.read_text(encoding="utf-8").splitlines(), "one more line"])
    assert (
        refused(more, sgm)
        == f"moses-recaser-ems: error: {more}:4: line 4 of -in, but the headline file {sgm} has 3 <seg> lines\n"
    )


def test_a_headline_keeps_the_capitals_the_recaser_gave():
    """A headline capitalizes the words left in lowercase; "NATO", "US" and "iPhone" keep the recaser's form
    (recase.perl's ucfirst lowercases nothing either, but would make "IPhone")."""
    from moses_recaser.ems.recase_perl import title_case

    words = "NATO and the US talk to iPhone maker in New York".split()
    assert " ".join(title_case(words, "en")) == "NATO and the US Talk to iPhone Maker in New York"
    assert " ".join(title_case(words, "de")) == "NATO And The US Talk To iPhone Maker In New York"


def test_recase_errors_exit_non_zero(ems_work, tmp_path, capsys):
    w = ems_work
    short = _write(tmp_path / "short", ["one line"])
    proc = _ems(
        capsys,
        "recase",
        "-in",
        str(short),
        "-model",
        f"{w}/recasing/moses.ini.1",
        "-trace",
        f"{w}/evaluation/test.output.1",
        "-source",
        f"{w}/evaluation/test.input.tok.1",
    )
    assert proc.returncode == 2
    assert "moses-recaser-ems: error:" in proc.stderr and proc.stdout == ""
    proc = _ems(capsys, "recase", "-in", str(short), "-model", str(tmp_path / "nope"))
    assert proc.returncode == 2 and "model not found" in proc.stderr


def test_a_stock_moses_ini_is_recased_as_recase_perl_does_with_moses_or_refused(tmp_path, capsys):
    ini = _write(tmp_path / "moses.ini", ["# MERT optimized configuration", "[input-factors]", "0"])
    inp = _write(tmp_path / "in", ["the house . it is here", "obama signs bill"])
    sgm = _write(
        tmp_path / "src.sgm",
        ['<doc docid="d">', "<p>", '<seg id="1">a</seg>', "</p>", "<hl>", '<seg id="2">b</seg>', "</hl>", "</doc>"],
    )
    out = tmp_path / "out"
    proc = _ems(capsys, "recase", "-in", str(inp), "-model", str(ini), "-o", str(out))
    assert (
        proc.returncode == 2
        and "is a Moses moses.ini" in proc.stderr
        and "give the Moses decoder with -moses" in proc.stderr
        and not out.exists()
    )
    # a stand-in decoder that copies its input: recase.perl's own rules are what is left to see
    moses = tmp_path / "moses"
    moses.write_text('#!/bin/sh\nwhile [ "$1" != "-i" ]; do shift; done\ncat "$2"\n', encoding="utf-8")
    moses.chmod(0o755)
    subprocess.run(
        [
            EMS,
            "recase",
            "-in",
            str(inp),
            "-model",
            str(ini),
            "-moses",
            str(moses),
            "-headline",
            str(sgm),
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
    )
    assert out.read_text(encoding="utf-8").splitlines() == ["The house . It is here", "Obama Signs Bill"]
    # a headline file of another set, the decoder and the files the moses.ini names are checked before any work
    from moses_recaser.cli.ems import main as ems_main

    table = _write(tmp_path / "phrase-table", ["le ||| the ||| 1 ||| 0-0 |||"])
    ini.write_text(ini.read_text() + f"[feature]\nPhraseDictionaryMemory name=T0 path={table}\n", encoding="utf-8")
    extra = _write(tmp_path / "more.sgm", sgm.read_text().replace("</doc>", '<seg id="3">c</seg>\n</doc>').splitlines())
    kept = {p: p.read_bytes() for p in (moses, table, out)}
    for flags, message in (
        (
            ["-headline", str(extra), "-o", str(out)],
            f"{extra}:{_seg_at(extra, 3)}: <seg> line 3, but -in {inp} has 2 lines",
        ),
        (["-o", str(moses)], f"{moses}: this output is also the file given as -moses"),
        (["-o", str(table)], f"{table}: this output is also {table}, a file of the -model moses.ini"),
    ):
        assert ems_main(["-q", "recase", "-in", str(inp), "-model", str(ini), "-moses", str(moses), *flags]) == 2
        assert message in capsys.readouterr().err
        assert all(p.read_bytes() == b for p, b in kept.items())


def test_a_stock_moses_ini_keeps_the_lines_and_tokens_of_its_decoder(tmp_path):
    """The stock decoder's output is split where Moses splits it (at \\n, not at U+2028 or a form feed), one line
    per -in line, valid UTF-8, and ucfirst that would change a token ('ß' -> 'Ss') leaves it: a wrong decoder
    output is one line naming -in, nothing written."""
    ini = _write(tmp_path / "moses.ini", ["[input-factors]", "0"])
    lines = ["line\u2028sep here .", "form\ffeed .", "next\x85line .", "ß is . ﬁle is ."]
    inp = tmp_path / "in"
    inp.write_bytes("".join(x + "\n" for x in lines).encode("utf-8"))
    out = tmp_path / "out"

    def recase(decoder: str) -> subprocess.CompletedProcess:
        moses = tmp_path / "moses"
        moses.write_text(f'#!/bin/sh\nwhile [ "$1" != "-i" ]; do shift; done\n{decoder}\n', encoding="utf-8")
        moses.chmod(0o755)
        cmd = [EMS, "-q", "recase", "-in", str(inp), "-model", str(ini), "-moses", str(moses), "-o", str(out)]
        return subprocess.run(cmd, check=False, capture_output=True)

    assert recase('cat "$2"').returncode == 0
    want = ["Line\u2028sep here .", "Form\ffeed .", "Next\x85line .", "ß is . ﬁle is ."]
    assert out.read_bytes() == "".join(x + "\n" for x in want).encode("utf-8")
    out.unlink()
    for decoder, message in (
        ('head -n 2 "$2"', f"{inp}:3: the Moses decoder given with -moses wrote 2 lines for the 4 of -in"),
        ("printf 'a\\nb\\377\\n'", f"{inp}:2: the Moses decoder given with -moses wrote invalid UTF-8 in its line 2"),
    ):
        proc = recase(decoder)
        assert proc.returncode == 2 and proc.stderr.decode() == f"moses-recaser-ems: error: {message}\n"
        assert not out.exists()


def test_the_recase_step_reads_markers_in_in_and_an_alignment_file_from_decoder_settings(ems_work, tmp_path):
    w = ems_work
    args = [
        "-model",
        f"{w}/recasing/moses.ini.1",
        "-trace",
        f"{w}/evaluation/test.output.1",
        "-source",
        f"{w}/evaluation/test.input.tok.1",
    ]
    plain = tmp_path / "plain"
    subprocess.run(
        [
            EMS,
            "recase",
            "-in",
            f"{w}/evaluation/test.cleaned.1",
            *args,
            "-alignment",
            f"{w}/evaluation/test.output.1.wa",
            "-o",
            str(plain),
        ],
        check=True,
        capture_output=True,
    )
    # EMS without remove-markup passes the marked output as -in; a user's -alignment-output-file comes in
    # the decoder's settings, while EMS's IN2.wa does not exist
    marked = tmp_path / "marked"
    proc = subprocess.run(
        [
            EMS,
            "recase",
            "-in",
            f"{w}/evaluation/test.output.1",
            *args,
            "-alignment",
            str(tmp_path / "absent.wa"),
            "-decoder-settings",
            f"-threads 2 -alignment-output-file {w}/evaluation/test.output.1.wa",
            "-o",
            str(marked),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    assert marked.read_text() == plain.read_text()
    assert "absent.wa" not in proc.stderr  # the decoder settings' file was found


def test_the_recase_step_never_writes_over_a_file_it_reads(ems_work, tmp_path, capsys):
    """-o naming the word links (given as -alignment, or as the decoder settings' -alignment-output-file) or the
    model's pointer file is refused before any work, the file untouched: EMS reads those only when they are
    there, and they were once replaced by the recased text."""
    from moses_recaser.cli.ems import main as ems_main

    w = ems_work
    wa = tmp_path / "test.output.wa"
    wa.write_bytes((w / "evaluation" / "test.output.1.wa").read_bytes())
    pointer = tmp_path / "moses.ini.1"
    pointer.write_bytes((w / "recasing" / "moses.ini.1").read_bytes())
    keep = {p: p.read_bytes() for p in (wa, pointer)}
    common = ["-q", "recase", "-in", f"{w}/evaluation/test.cleaned.1", "-model", str(pointer)]
    common += ["-trace", f"{w}/evaluation/test.output.1", "-source", f"{w}/evaluation/test.input.tok.1"]
    for extra, out, flag in (
        (["-alignment", str(wa)], wa, "-alignment"),
        (["-decoder-settings", f"-threads 2 -alignment-output-file {wa}"], wa, "-decoder-settings -alignment"),
        ([], pointer, "-model"),
    ):
        assert ems_main([*common, *extra, "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"moses-recaser-ems: error: {out}: this output is also the file given as {flag}")
        assert err.count("\n") == 1
        assert all(p.read_bytes() == b for p, b in keep.items())


def test_the_recase_step_reads_word_links_from_a_pipe(ems_work, tmp_path):
    """An -alignment that is a pipe (bash's <(...), a FIFO) is read as a file is, not skipped as absent."""
    w = ems_work
    args = ["-in", f"{w}/evaluation/test.cleaned.1", "-model", f"{w}/recasing/moses.ini.1"]
    args += ["-trace", f"{w}/evaluation/test.output.1", "-source", f"{w}/evaluation/test.input.tok.1"]
    wa = f"{w}/evaluation/test.output.1.wa"
    from_file = subprocess.run([EMS, "recase", *args, "-alignment", wa], check=True, capture_output=True, text=True)
    cmd = " ".join([EMS, "recase", *args, "-alignment", f"<(cat {wa})"])
    piped = subprocess.run(["bash", "-c", cmd], check=True, capture_output=True, text=True)
    # a file taken as absent is said so (whether the links change the output depends on the fixture's model,
    # whose eflomal alignment seeds itself at random: once they did not)
    absent = [EMS, "recase", *args, "-alignment", f"{tmp_path}/none.wa"]
    skipped = subprocess.run(absent, check=True, capture_output=True, text=True)
    assert "no word alignment file" in skipped.stderr and "no word alignment file" not in piped.stderr
    assert piped.stdout == from_file.stdout


def test_the_recase_step_reads_unknown_word_marks_from_the_decoder_settings(ems_work, tmp_path):
    """With -mark-unknown in the decoder's settings (-unknown-word-prefix, default UNK), a marked word is the
    decoder's pass-through: it keeps its source form, as ``moses-recaser recase --unknown-prefix`` has it."""
    from moses_recaser.cli.ems import main as ems_main

    src = _write(tmp_path / "input.tok", ["le président Xyzzy est à Paris ."])
    for settings, marked in (
        ("-search-algorithm 1 -mark-unknown", "UNKXyzzy"),
        ("-mu -unknown-word-prefix @@", "@@Xyzzy"),
        ("-mu", "UNKXyzzy"),  # one word that looks like a flag of ours: still the settings' value
        ("-v 0 -unknown-word-prefix '@@' -mark-unknown false -mu true", "@@Xyzzy"),  # the shell's words; -mu wins
    ):
        out = _write(tmp_path / "output", [f"the president |0-1| {marked} |2-2| is |3-3| in |4-4| paris . |5-6| "])
        cleaned = _write(tmp_path / "cleaned", [f"the president {marked} is in paris ."])
        rec = tmp_path / "recased"
        args = ["-q", "recase", "-in", str(cleaned), "-model", f"{ems_work}/recasing/moses.ini.1", "-trace", str(out)]
        assert ems_main([*args, "-source", str(src), "-decoder-settings", settings, "-o", str(rec)]) == 0
        assert rec.read_text(encoding="utf-8").split()[2] == "Xyzzy"
    # without the switch the prefix is part of the word, as the decoder printed it
    assert ems_main([*args, "-source", str(src), "-o", str(rec)]) == 0
    assert casing.lower(rec.read_text(encoding="utf-8").split()[2]) == "@@xyzzy"


def test_steps_that_succeed_say_nothing_ems_reads_as_a_crash(ems_work, tmp_path):
    """EMS judges a step by patterns in its stderr (experiment.perl, check_if_crashed), not by its exit code."""
    import re

    patterns = [
        "error",
        "killed",
        "core dumped",
        "can't read",
        "no such file or directory",
        "unknown option",
        "died at",
        "exit code",
        "permission denied",
        "segmentation fault",
        "abort",
        "no space left on device",
        ": not found",
        "can't locate",
        "unrecognized option",
        "Exception",
    ]
    w = ems_work
    proc = subprocess.run(
        [
            EMS,
            "recase",
            "-in",
            f"{w}/evaluation/test.cleaned.1",
            "-model",
            f"{w}/recasing/moses.ini.1",
            "-trace",
            f"{w}/evaluation/test.output.1",
            "-source",
            f"{w}/evaluation/test.input.tok.1",
            "-alignment",
            str(tmp_path / "missing.wa"),
            "-o",
            str(tmp_path / "out"),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    for text in (proc.stderr, (w / "train.stderr").read_text(encoding="utf-8")):
        assert text.strip(), "nothing was logged: the check would be empty"
        assert not [p for p in patterns if re.search(p, text, re.I)], text


def test_a_step_defined_twice_is_refused_at_its_line(tmp_path, capsys):
    """#27: a meta with a step defined twice (an IndexError once) names the second definition; which one
    experiment.perl would run, and which to patch, nobody can tell."""
    train = MOSES_META.index("train\n\tin: tokenized")
    end = MOSES_META.index("\n", MOSES_META.index("tmp-name: recasing/model")) + 1
    twice = MOSES_META[:end] + MOSES_META[train:end] + MOSES_META[end:]
    with pytest.raises(RecaserError, match=r"step \[RECASING\] train is defined twice \(first at line \d+\)") as err:
        patch_meta(twice, "experiment.meta")
    assert err.value.line == MOSES_META[:end].count("\n") + 1
    src, out = tmp_path / "experiment.meta", tmp_path / "patched.meta"
    src.write_text(twice, encoding="utf-8")
    proc = _ems(capsys, "meta", "--moses-meta", str(src), "-o", str(out))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"moses-recaser-ems: error: {src}:{err.value.line}: step [RECASING] train")
    assert not out.exists()


@pytest.mark.parametrize("text", ["", "\n", "# only a comment\n", "garbage words\n"])
@pytest.mark.parametrize("command", ["config", "check"])
def test_a_file_that_is_no_ems_config_is_refused_by_merge_and_check_alike(tmp_path, text, command, capsys):
    """#27: decided: a config without sections or settings is not an EMS config; merging one used to exit 0 with
    a config that lost its [GENERAL] lines, and `check` listed the five things such a file lacks."""
    src, out = tmp_path / "config", tmp_path / "merged"
    src.write_text(text, encoding="utf-8")
    args = ("config", "--merge", str(src), "-o", str(out)) if command == "config" else ("check", str(src))
    proc = _ems(capsys, *args)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"moses-recaser-ems: error: {src}:1: no sections and no settings: not an EMS config (give a working one, "
        "such as Moses' config.toy)\n"
    )
    assert not out.exists()


def test_config_merge_adds_each_missing_section_once():
    from moses_recaser.ems.config import merge, read_config

    merged = merge("[GENERAL]\nworking-dir = /x\n", "/bin/moses-recaser-ems", lowercase=True).text
    headers = [line for line in merged.splitlines() if line.startswith("[")]
    assert headers == ["[GENERAL]", "[RECASING]", "[EVALUATION]"], merged
    cfg = read_config(merged)
    assert cfg.lookup("GENERAL", "output-lowercaser") and cfg.lookup("RECASING", "decoder")
    assert cfg.lookup("EVALUATION", "report-segmentation") == "yes"


# A truecasing config as Moses' example configs are (config.toy: truecase.perl, detruecase.perl, [RECASING] IGNORE)
TRUECASING = """[GENERAL]
working-dir = /x
cores = 2
output-extension = en
data = /data
input-truecaser = $moses-script-dir/recaser/truecase.perl
output-truecaser = $moses-script-dir/recaser/truecase.perl
detruecaser = $moses-script-dir/recaser/detruecase.perl

[LM]
order = 5

[LM:nc]
raw-corpus = /data/nc.en

[RECASING] IGNORE
recasing-settings = ""
decoder = $moses-bin-dir/moses

[EVALUATION]
decoder-settings = "-threads 2"

[EVALUATION:test]
input-sgm = /data/test.sgm
"""
EMS_BIN = "/bin/moses-recaser-ems"


def _merged(text: str = TRUECASING, **kw):
    from moses_recaser.ems.config import merge, read_config

    merged = merge(text, EMS_BIN, **kw)
    return merged, read_config(merged.text)


def test_config_merge_keeps_truecasing_and_puts_the_recaser_in_detruecase_outputs_place():
    merged, cfg = _merged()
    kept = [
        x
        for x in TRUECASING.splitlines(keepends=True)
        if x.split(" = ")[0] in ("input-truecaser", "output-truecaser", "detruecaser")
    ]
    assert len(kept) == 3 and all(x in merged.text.splitlines(keepends=True) for x in kept)
    assert "lowercase" not in merged.text and "#input-truecaser" not in merged.text
    assert cfg.lookup("RECASING", "recasing-settings") == "-dev-size 2000 -cores $cores -input-case cased"
    assert cfg.lookup("RECASING", "tokenized") == "[LM:nc:tokenized-corpus]"  # the recaser's -mono text
    assert cfg.lookup("EVALUATION", "recaser") == f"{EMS_BIN} recase"
    assert cfg.lookup("RECASING", "recaser-train") == f"{EMS_BIN} train"
    assert any("recase-truecased-output" in n for n in merged.notes)
    assert not [n for n in merged.notes if n.startswith("problem")], merged.notes
    # merged again: nothing more to change
    assert _merged(merged.text)[0].text == merged.text


def test_config_merge_splits_lines_at_newlines_only_and_keeps_every_other_byte():
    """experiment.perl reads a config a line at a time (``<INI>``: split at ``\\n`` only, ``\\s`` over bytes): NEL
    (U+0085), LINE SEPARATOR (U+2028) and NBSP belong to their line. Split at them (str.splitlines), a comment's
    tail became a setting EMS skips, a value was cut, and the merged config was one experiment.perl rejects."""
    odd = (
        "# note\x85output-lowercaser = /evil\n"  # a comment all through, for EMS
        "#\u2028[RECASING]\n"
        "tuning-set = a\u2028b\xa0c\n"  # one value, its NBSP a byte of it as for Perl
        "#\u2028detruecaser = /evil\n"
    )
    text = TRUECASING.replace("cores = 2\n", "cores = 2\n" + odd)
    merged, cfg = _merged(text)
    for line in odd.split("\n")[:-1]:
        assert line + "\n" in merged.text
    assert len(cfg.lines) == merged.text.count("\n")
    assert cfg.lookup("GENERAL", "tuning-set") == "a\u2028b\xa0c"
    assert cfg.lookup("GENERAL", "output-lowercaser") is None
    assert cfg.lookup("GENERAL", "detruecaser") == "$moses-script-dir/recaser/detruecase.perl"
    assert [s.name for s in cfg.sections].count("RECASING") == 1
    assert merged.text == _merged()[0].text.replace("cores = 2\n", "cores = 2\n" + odd)


def test_config_merge_lowercase_is_an_explicit_switch():
    merged, cfg = _merged(lowercase=True)
    for key in ("input-truecaser", "output-truecaser", "detruecaser"):
        assert cfg.lookup("GENERAL", key) is None and f"\n#{key} = " in merged.text
    assert cfg.lookup("GENERAL", "output-lowercaser") == "$moses-script-dir/tokenizer/lowercase.perl"
    assert cfg.lookup("RECASING", "recasing-settings") == "-dev-size 2000 -cores $cores"
    assert not [n for n in merged.notes if n.startswith("problem")], merged.notes
    # a truecase-layout config switched later keeps its settings but for -input-case
    again, cfg = _merged(_merged()[0].text, lowercase=True)
    assert cfg.lookup("RECASING", "recasing-settings") == "-dev-size 2000 -cores $cores"
    # a lowercasing config is merged in the lowercase layout without the option
    assert _merged(merged.text)[0].text == merged.text


def test_config_merge_of_a_config_that_restores_no_case_asks_for_the_switch(tmp_path, capsys):
    with pytest.raises(RecaserError) as err:
        _merged("[GENERAL]\nworking-dir = /x\n")
    assert err.value.reason == (
        "this config neither truecases (output-truecaser) nor lowercases (output-lowercaser): its decoder writes "
        "cased text; give `lowercase` to switch it to lowercasing and the recaser"
    )
    src, out = tmp_path / "config", tmp_path / "merged"
    src.write_text("[GENERAL]\nworking-dir = /x\n", encoding="utf-8")
    proc = _ems(capsys, "config", "--merge", str(src), "-o", str(out))
    said = err.value.reason.replace("`lowercase`", "--lowercase")  # (the library's name, as the command spells it)
    assert proc.returncode == 2 and proc.stderr == f"moses-recaser-ems: error: {src}: {said}\n"
    assert not out.exists()


@pytest.mark.parametrize(
    ("old", "new", "tokenized", "note"),
    [
        ("", "", "[LM:nc:tokenized-corpus]", "reads the LM corpus"),
        # the config's own recaser text wins: Moses' train-recaser.perl trains on it
        ("[RECASING] IGNORE\n", "[RECASING] IGNORE\nraw = /data/big.en\n", None, "[RECASING] raw: kept"),
        ("[RECASING] IGNORE\n", "[RECASING] IGNORE\ntokenized = /data/tok.en\n", "/data/tok.en", "tokenized: kept"),
        # an LM on the bitext's own target side is not more text
        ("raw-corpus = /data/nc.en\n", "parallel-corpus-stem = /data/bitext\n", None, "trains on the bitext alone"),
        # nor is the bitext's target file itself (config.toy's LM), which also holds the held-out dev lines
        ("[LM]", "[CORPUS:nc]\nraw-stem = $data/nc\n\n[LM]", None, "[LM:nc] passed over: the bitext's target side"),
        ("[RECASING]", "[LM:news]\nraw-corpus = /data/news.en\n\n[RECASING]", "[LM:nc:tokenized-corpus]", "1 other"),
    ],
)
def test_config_merge_names_the_cased_text_the_recasers_training_reads(old, new, tokenized, note):
    merged, cfg = _merged(TRUECASING.replace(old, new, 1))
    assert (
        cfg.get("RECASING", "tokenized") is None
        if tokenized is None
        else cfg.lookup("RECASING", "tokenized") == tokenized
    )
    assert any(note in n for n in merged.notes), merged.notes


@pytest.mark.parametrize(
    ("lowercase", "stock"), [(False, "$detruecaser"), (True, "$moses-script-dir/recaser/recase.perl")]
)
def test_config_merge_stock_set_restores_case_as_stock_moses_does_in_the_layout(lowercase, stock):
    merged, cfg = _merged(stock_set=True, lowercase=lowercase)
    assert cfg.sets("EVALUATION") == ["EVALUATION:test", "EVALUATION:test-stock"]
    assert cfg.get("EVALUATION:test-stock", "stock-recaser").value == stock
    assert cfg.get("EVALUATION:test-stock", "input-sgm").value == "/data/test.sgm"


def test_config_merge_stock_set_merged_again_stays_one_set():
    """A second merge keeps the stock set (one section, the user's flags on its stock-recaser kept) and switches
    its stock recaser when the layout changes; experiment.perl would take the last of two copies."""
    merged, _ = _merged(stock_set=True)
    edited = merged.text.replace("stock-recaser = $detruecaser", 'stock-recaser = "$detruecaser -b"')
    again, cfg = _merged(edited, stock_set=True)
    assert again.text.count("[EVALUATION:test-stock]") == 1
    assert cfg.get("EVALUATION:test-stock", "stock-recaser").value == "$detruecaser -b"
    lowered, cfg = _merged(edited, stock_set=True, lowercase=True)
    assert lowered.text.count("[EVALUATION:test-stock]") == 1
    assert cfg.get("EVALUATION:test-stock", "stock-recaser").value == "$moses-script-dir/recaser/recase.perl"


def test_config_merge_puts_the_recaser_in_a_set_that_names_its_own():
    """A set's own recaser wins over [EVALUATION]'s (experiment.perl's backoff): EMS would run recase.perl with
    the recaser's flags. Merge sets ours there too, and check names a set whose recaser is another."""
    text = TRUECASING + "recaser = $moses-script-dir/recaser/recase.perl\n"
    merged, cfg = _merged(text)
    assert cfg.lookup("EVALUATION:test", "recaser") == f"{EMS_BIN} recase"
    assert any(n.startswith("[EVALUATION:test] recaser: set to moses-recaser-ems recase") for n in merged.notes)
    assert not [p for p in _problems(merged.text) if "recaser is" in p]


def test_config_merge_switching_layout_switches_a_stock_set_added_before():
    """A config merged with --stock-set, then merged --lowercase alone: the stock set an earlier merge added
    switches to recase.perl with the layout (its $detruecaser is commented out, which experiment.perl would
    refuse as an unknown parameter)."""
    merged, _ = _merged(stock_set=True)
    lowered, cfg = _merged(merged.text, lowercase=True)
    assert cfg.get("EVALUATION:test-stock", "stock-recaser").value == "$moses-script-dir/recaser/recase.perl"
    assert cfg.lookup("GENERAL", "detruecaser") is None


def test_config_merge_quotes_an_install_path_with_a_space_and_refuses_a_hash(tmp_path, monkeypatch, capsys):
    """EMS pastes the recaser's command into a shell script: an install path with a space is quoted there (one
    word for the shell); experiment.perl ends a config value at '#', so such a path is refused."""
    from moses_recaser.cli import ems as ems_cli

    src = tmp_path / "config"
    src.write_text(TRUECASING, encoding="utf-8")
    for where in ("My Tools", "tools#2", "$HOME"):
        bin_dir = tmp_path / where / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "moses-recaser-ems").write_text("#!/bin/sh\n", encoding="utf-8")
        monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
        out = tmp_path / f"merged.{where}"
        code = ems_cli.main(["-q", "config", "--merge", str(src), "-o", str(out)])
        if where != "My Tools":  # experiment.perl ends a value at '#' and expands $NAME in it
            assert code == 2 and not out.exists()
            assert f"is installed at a path holding {where[-2] if '#' in where else '$'!r}" in capsys.readouterr().err
        else:
            assert code == 0
            quoted = f"'{bin_dir}/moses-recaser-ems' recase"
            assert f'recaser = "{quoted}"' in out.read_text(encoding="utf-8")


def test_config_merge_turns_on_the_trace_in_a_set_that_turns_it_off():
    """A set's own report-segmentation / report-precision-by-coverage = no wins over [EVALUATION]'s yes
    (experiment.perl's backoff): merge sets it to yes there too, and check names a set left without."""
    text = TRUECASING + "report-segmentation = no\nreport-precision-by-coverage = no\n"
    problems = _problems(text)
    assert "note: [EVALUATION:test] without report-segmentation the decoder writes no -t markers" in " ".join(problems)
    merged, cfg = _merged(text)
    for key in ("report-segmentation", "report-precision-by-coverage"):
        assert cfg.lookup("EVALUATION:test", key) == "yes"
        assert any(n.startswith(f"[EVALUATION:test] {key}: set to yes") for n in merged.notes), merged.notes
    assert not [p for p in _problems(merged.text) if "without report" in p]


def test_config_merge_refuses_a_config_that_decodes_with_moses_chart():
    """experiment.perl decodes with moses_chart when hierarchical-rule-set is set (Perl truth: "false" is true):
    no -t markers, and links that count <s> and </s>. Refused at merge, named by check, before a long run."""
    from moses_recaser.ems.config import merge

    for value in ("true", "1", "false"):
        text = TRUECASING.replace("[RECASING]", f"[TRAINING]\nhierarchical-rule-set = {value}\n\n[RECASING]")
        with pytest.raises(RecaserError, match="hierarchical-rule-set: EMS decodes this config with moses_chart"):
            merge(text, EMS_BIN)
        assert any(p.startswith("problem: [TRAINING] hierarchical-rule-set") for p in _problems(text))
    # experiment.perl's get: [TRAINING] alone, $variables resolved, the first word
    for accepted in (
        TRUECASING.replace("[RECASING]", "[TRAINING]\nhierarchical-rule-set = 0\n\n[RECASING]"),
        TRUECASING.replace("cores = 2", "cores = 2\nhierarchical-rule-set = true"),
        TRUECASING.replace("cores = 2", "cores = 2\nhier = 0").replace(
            "[RECASING]", "[TRAINING]\nhierarchical-rule-set = $hier\n\n[RECASING]"
        ),
    ):
        assert _merged(accepted)[1].lookup("EVALUATION", "recaser") == f"{EMS_BIN} recase"
    refused = TRUECASING.replace("cores = 2", "cores = 2\nhier = 1").replace(
        "[RECASING]", "[TRAINING]\nhierarchical-rule-set = $hier\n\n[RECASING]"
    )
    with pytest.raises(RecaserError, match="moses_chart") as caught:
        merge(refused, EMS_BIN)
    assert caught.value.line == refused.splitlines().index("hierarchical-rule-set = $hier") + 1


def _problems(text: str) -> list[str]:
    from moses_recaser.ems.config import check, read_config

    return check(read_config(text))


def test_check_names_what_each_layout_lacks():
    # truecase layout, as Moses ships it: detruecase.perl runs, and what the recaser needs is named
    problems = _problems(TRUECASING)
    assert problems[0] == "note: truecase layout: the patched meta runs the recaser as recase-truecased-output"
    assert [p for p in problems if p.startswith("problem")] == [
        "problem: [RECASING] is missing or IGNORE: EMS trains no recaser",
        "problem: no evaluation set sets 'recaser': detruecase.perl runs",
        'problem: [RECASING] recaser-train is not set ("moses-recaser-ems train")',
    ]
    assert any("lack -input-case cased" in p for p in problems)
    assert any("no [RECASING] raw or tokenized" in p for p in problems)
    # merged: clean in both layouts
    for lowercase in (False, True):
        assert not [p for p in _problems(_merged(lowercase=lowercase)[0].text) if not p.startswith("note: ")]
    # lowercase layout: recasing-settings fitted for cased input do not fit it
    lower = _merged(lowercase=True)[0].text.replace("-cores $cores", "-cores $cores -input-case cased")
    assert _problems(lower)[0] == "note: lowercase layout: the patched meta runs the recaser as recase-output"
    assert any("hold -input-case cased, but the recaser reads lowercased output" in p for p in _problems(lower))
    no_recaser = "\n".join(x for x in lower.splitlines() if not x.startswith("recaser ="))
    assert "problem: no evaluation set sets 'recaser': EMS recases nothing" in _problems(no_recaser)
    stock = no_recaser.replace("[EVALUATION]\n", "[EVALUATION]\nrecaser = $moses-script-dir/recaser/recase.perl\n")
    assert any(
        p.startswith("note: [EVALUATION:test] recaser is '$moses-script-dir/recaser/recase.perl'")
        for p in _problems(stock)
    )
    # no evaluation set: the recaser would be trained and never run
    no_set = TRUECASING.replace("[EVALUATION:test]\ninput-sgm = /data/test.sgm\n", "")
    assert "problem: no [EVALUATION:set]: EMS decodes no test set, so the recaser is trained but never run" in (
        _problems(_merged(no_set)[0].text)
    )
    # neither layout: the decoder writes cased text
    assert _problems("[GENERAL]\nworking-dir = /x\n")[0].startswith(
        "problem: the config neither truecases (output-truecaser) nor lowercases (output-lowercaser)"
    )


def test_ems_train_takes_mono_files_and_an_empty_mono():
    """The patched train step writes '-mono IN2'; EMS leaves IN2 empty when the config names no cased text."""
    from moses_recaser.cli.ems import build_parser

    base = ["train", "-dir", "d", "-corpus", "c.en", "-config", "ini"]
    parse = build_parser().parse_args
    assert parse([*base[:5], "-mono", "-config", "ini", "-cores", "2"]).monolingual is None
    assert parse([*base, "-mono"]).monolingual is None
    assert parse([*base, "-mono", "a.en", "-mono", "b.en"]).monolingual == ["a.en", "b.en"]


def test_ems_train_with_a_file_as_its_dir_is_one_line(tmp_path):
    """-dir is the step's working directory; a file there is named, not 'File exists', and is left as it was."""
    c = tmp_path / "c"
    c.write_text("x\n")
    args = ["train", "-corpus", str(c), "-source-corpus", str(c), "-alignment", str(c), "-config", "ini"]
    for d, shown, said in (
        (c, c, "is a file: -dir names the step's working directory"),
        (c / "sub", c, "is a file, not a directory"),
    ):
        proc = subprocess.run([EMS, *args, "-dir", str(d)], capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stdout == ""
        assert proc.stderr == f"moses-recaser-ems: error: {shown}: {said}\n"
    assert c.read_text() == "x\n" and sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_ems_train_with_its_pointer_at_the_model_path_is_refused_before_work(tmp_path):
    """-config DIR/model would be the model's own path: said before training, and nothing is written."""
    c = tmp_path / "c"
    c.write_text("x\n")
    (tmp_path / "step").mkdir()
    args = ["train", "-corpus", str(c), "-source-corpus", str(c), "-alignment", str(c), "-dir", "step"]
    proc = subprocess.run([EMS, *args, "-config", "step/model"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (
        "moses-recaser-ems: error: step/model: -config names the model directory step/model (or a file in it): "
        "give it another path\n"
    )
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["c", "step"]


def test_ems_train_names_cores_as_ems_spells_it(tmp_path):
    """-cores is the library's jobs, -memory its --memory: a bad value is refused by the name the step script
    gives it."""
    c = tmp_path / "c"
    c.write_text("x\n")
    args = ["train", "-corpus", str(c), "-source-corpus", str(c), "-alignment", str(c), "-dir", "d", "-config", "i"]
    proc = subprocess.run([EMS, *args, "-cores", "0"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "moses-recaser-ems: error: -cores must be between 1 and 256 (processes), not 0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]
    proc = subprocess.run([EMS, *args, "-memory", "10"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "moses-recaser-ems: error: -memory 10 is too small: a run needs at least 256M\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_ems_train_errors_from_the_library_name_the_flags_as_ems_spells_them(tmp_path):
    """Settings the library refuses (-lmplz-options without -lmplz, a -dev-size of 0) are named by the step's
    own flags, not moses-recaser's (--lmplz-options); the main command still says --dev-size."""
    c = tmp_path / "c"
    c.write_text("a b\n" * 4)
    (tmp_path / "a").write_text("0-0 1-1\n" * 4)
    args = ["train", "-corpus", "c", "-source-corpus", "c", "-alignment", "a", "-dir", "d", "-config", "i"]
    for extra, said in (
        (["-lmplz-options", "-S 1G"], "-lmplz-options are options of lmplz: give -lmplz too"),
        (["-dev-size", "0"], "-dev-size must be at least 1 sentence pair, got 0"),
        (["-lm", "c", "-lmplz", "/bin/true"], "-lmplz cannot be combined with -lm:"),
    ):
        proc = subprocess.run([EMS, *args, *extra], capture_output=True, text=True, cwd=tmp_path)
        error = [x for x in proc.stderr.splitlines() if "error" in x]  # (after the step's info lines)
        assert proc.returncode == 2 and len(error) == 1 and error[0].startswith(f"moses-recaser-ems: error: {said}")
        assert "--" not in proc.stderr and "Traceback" not in proc.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "c"]
    main_args = ["train", "--source", "c", "--target", "c", "--alignment", "a", "-o", "m", "--dev-size", "0"]
    proc = subprocess.run([EMS[: -len("-ems")], *main_args], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "error: --dev-size must be at least 1" in proc.stderr


def _seg_at(sgm: Path, n: int) -> int:
    """The line number of the n-th <seg> line of an SGM file."""
    return [k for k, x in enumerate(sgm.read_text(encoding="utf-8").splitlines(), 1) if x.startswith("<seg")][n - 1]
