"""Moses EMS for real: the meta patch on the four released experiment.meta files, and experiment.perl's own dry
run (no -exec: it writes the step scripts) on Moses' example config, switched to the recaser as docs/ems.md says.

These need Moses' scripts: MOSES_SCRIPTS, else ../shared/moses beside the project (tests/conftest.py). Without them
they skip, saying so; MOSES_RECASER_REQUIRE_SHARED=1 (set by .ci/run) makes that a failure.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import moses_meta

from moses_recaser.cli.ems import build_parser, main
from moses_recaser.ems.meta import PATCHES, dangling_inputs, patch_meta, read_meta

EMS = str(Path(sys.executable).parent / "moses-recaser-ems")
METAS = ["RELEASE-2.1", "RELEASE-3.0", "RELEASE-4.0", "master-34452895"]
# master's experiment.perl cannot read RELEASE-2.1's meta to the end: its LM steps are named otherwise, and it
# stops in TRAINING:create-config, the unpatched meta too. By then it has written the EVALUATION steps' scripts
# (the recaser's among them) and scheduled the others, so those are what is checked there.
STOPS = {"RELEASE-2.1": r"ERROR: number of defined LM sets \(\d+:[\w,]+\) and LM files \(\d+:\S*\) does not match"}
TRUECASING = ("input-truecaser", "output-truecaser", "detruecaser")


@pytest.fixture(scope="session")
def moses(moses_scripts, tmp_path_factory) -> Path:
    """A Moses tree: the real scripts, and stand-ins for the binaries (a dry run only checks that the files the
    config names exist)."""
    tree = tmp_path_factory.mktemp("moses") / "mosesdecoder"
    tree.mkdir()
    (tree / "scripts").symlink_to(moses_scripts)
    (tree / "bin").mkdir()
    for name in ("moses", "lmplz", "build_binary", "CreateOnDiskPt", "extract", "score", "consolidate", "symal"):
        (tree / "bin" / name).write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
        (tree / "bin" / name).chmod(0o755)
    for d in ("srilm/bin/i686", "irstlm/bin", "randlm/bin", "tools"):
        (tree / d).mkdir(parents=True)
    return tree


def _toy_config(moses: Path, work: Path) -> Path:
    """Moses' own config.toy, pointed at this Moses tree and a working directory (made first: experiment.perl's
    chdir into a missing one fails silently)."""
    text = (moses / "scripts/ems/example/config.toy").read_text(encoding="utf-8")
    text = re.sub(r"(?m)^working-dir = .*$", f"working-dir = {work}", text)
    text = re.sub(r"(?m)^moses-src-dir = .*$", f"moses-src-dir = {moses}", text)
    text = re.sub(r"(?m)^external-bin-dir = .*$", f"external-bin-dir = {moses}/tools", text)
    work.mkdir(parents=True, exist_ok=True)
    path = work.parent / "config.toy"
    path.write_text(text, encoding="utf-8")
    return path


def _dry_run(moses: Path, config: Path, meta: Path, work: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["perl", str(moses / "scripts/ems/experiment.perl"), "-config", str(config), "-meta", str(meta), "-no-graph"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _ran(proc: subprocess.CompletedProcess, name: str) -> None:
    """The dry run went through, or stopped where experiment.perl stops with this meta whatever the patch."""
    out = proc.stdout + proc.stderr
    if name in STOPS:
        assert proc.returncode != 0 and re.search(STOPS[name], proc.stderr) and out.count("ERROR") == 1, out[-2000:]
    else:
        assert proc.returncode == 0 and "ERROR" not in out, out[-2000:]


def _scheduled(proc: subprocess.CompletedProcess) -> set[str]:
    """The steps experiment.perl decided to run (its '12 EVALUATION:test:decode ->\trun' lines)."""
    return set(re.findall(r"^\d+ (\S+) ->\s+run$", proc.stdout, re.M))


def _steps(work: Path) -> set[str]:
    return {p.name.removesuffix(".0") for p in (work / "steps" / "0").iterdir() if p.name.endswith(".0")}


def _prepare(moses: Path, tmp_path: Path, name: str, *flags: str) -> tuple[Path, Path, Path, Path]:
    """docs/ems.md's steps 1 and 2 on Moses' config.toy: (work, config.toy, merged config, patched meta)."""
    work = tmp_path / "work"
    toy = _toy_config(moses, work)
    config, meta = tmp_path / "config", tmp_path / "recaser.meta"
    assert main(["-q", "meta", "--moses-meta", str(moses_meta(name)), "-o", str(meta)]) == 0
    assert main(["-q", "config", "--merge", str(toy), *flags, "-o", str(config)]) == 0
    return work, toy, config, meta


def _decoder_settings(name: str) -> str:
    """What the recase step passes of the decoder's settings: from RELEASE-4.0 on ($?name), nothing before."""
    if not name.startswith(("RELEASE-4", "master")):
        return ""
    return " -decoder-settings -- -search-algorithm 1 -cube-pruning-pop-limit 5000 -s 5000 -threads 4"


def _command(work: Path, step: str) -> str:
    """The command a step script runs (experiment.perl's create_step wraps it in cd/mkdir/echo lines)."""
    lines = (work / "steps" / "0" / f"{step}.0").read_text(encoding="utf-8").splitlines()
    body = [x for x in lines if x and not x.startswith(("#!", "PATH=", "cd ", "echo ", "mkdir -p ", "touch "))]
    assert len(body) == 1, body
    return body[0]


@pytest.mark.parametrize("name", METAS)
def test_the_patch_works_on_every_released_meta(name):
    path = moses_meta(name)
    text = path.read_text(encoding="utf-8")
    patched = patch_meta(text, str(path))
    before, after = read_meta(text), read_meta(patched.text)
    # RECASING tokenize keeps Moses' own input, raw: a file the config names, which no step writes
    ours = [after.find(p.section, p.name) for p in PATCHES if p.name != "tokenize"]
    assert all(s is not None for s in ours) and dangling_inputs(after, ours) == []
    changed = {(p.section, p.derive_from or p.name) for p in PATCHES if not p.adds}
    for step in before.steps:  # everything else byte for byte
        if (step.section, step.name) not in changed:
            new = after.find(step.section, step.name)
            assert after.lines[new.start : new.end] == before.lines[step.start : step.end]
    assert len(after.steps) == len(before.steps) + sum(p.adds for p in PATCHES)
    # the recaser reads the output the release's own recase step reads
    first = before.find("EVALUATION", "recase-output").names("in")[0]
    assert first == ("cleaned-output" if name == "RELEASE-2.1" else "transliterated-output")
    assert after.find("EVALUATION", "recase-output").names("in")[0] == first
    # the truecase layout's step reads what detruecase-output reads, the rest as recase-output
    truecased = after.find("EVALUATION", "recase-truecased-output")
    assert before.find("EVALUATION", "detruecase-output").names("in") == [first]
    assert truecased.names("in") == after.find("EVALUATION", "recase-output").names("in")
    detruecase = after.find("EVALUATION", "detruecase-output")
    assert detruecase.attrs == {**before.find("EVALUATION", "detruecase-output").attrs, "ignore-if": "recaser"}
    # from RELEASE-4.0 on, experiment.perl has $?name and the decoder's settings reach the recaser
    for step in ("recase-output", "recase-truecased-output"):
        passes_settings = "-decoder-settings" in after.find("EVALUATION", step).attrs["template"]
        assert passes_settings == name.startswith(("RELEASE-4", "master"))
    assert any("optional template variables" in n for n in patched.notes) != passes_settings


@pytest.mark.parametrize("name", METAS)
def test_truecase_layout_the_recaser_runs_in_detruecase_outputs_place(moses, tmp_path, name):
    """config --merge keeps config.toy's truecasing; the dry run writes the recaser's step where stock Moses writes
    detruecase-output, and its training is fitted for cased input."""
    work, toy, config, meta = _prepare(moses, tmp_path, name, "--stock-set")
    kept = [x for x in toy.read_text(encoding="utf-8").splitlines() if x.split(" = ")[0] in TRUECASING]
    assert len(kept) == 3 and set(kept) <= set(config.read_text(encoding="utf-8").splitlines())
    proc = _dry_run(moses, config, meta, work)
    _ran(proc, name)
    w, m, ems = work, moses, str(Path(EMS).resolve())
    steps = _steps(w)
    assert _command(w, "EVALUATION_test_recase-truecased-output") == (
        f"{ems} recase -moses {m}/bin/moses -in {w}/evaluation/test.cleaned.0 -model {w}/recasing/moses.ini.0 "
        f"-trace {w}/evaluation/test.output.0 -source {w}/evaluation/test.input.tok.0 "
        f"-alignment {w}/evaluation/test.output.0.wa{_decoder_settings(name)} > {w}/evaluation/test.recased.0"
    )
    assert "EVALUATION_test_detruecase-output" not in steps and "EVALUATION_test_recase-output" not in steps
    # the system is the user's: truecased input, decoded with -t and word links for the recaser
    decode = _command(w, "EVALUATION_test_decode")
    assert f"-alignment-output-file {w}/evaluation/test.output.0.wa -t " in decode
    assert decode.endswith(f"< {w}/evaluation/test.input.tc.0 > {w}/evaluation/test.output.0")
    # the stock set: Moses' own detruecase.perl on the same test set
    assert _command(w, "EVALUATION_test-stock_detruecase-output-stock") == (
        f"{m}/scripts/recaser/detruecase.perl < {w}/evaluation/test-stock.cleaned.0 > "
        f"{w}/evaluation/test-stock.truecased.0"
    )
    assert not {s for s in steps if s.startswith("EVALUATION_test-stock_") and "recase" in s}
    assert {"RECASING:consolidate-cased", "RECASING:train"} <= _scheduled(proc)
    assert not {"RECASING:train-stock", "RECASING:tokenize"} & _scheduled(proc)
    if name in STOPS:
        return
    assert _command(w, "RECASING_train") == (
        f"{ems} train -dir {w}/recasing/moses.ini.0.model -corpus {w}/recasing/corpus.0.en -source-corpus "
        f"{w}/recasing/corpus.0.fr -alignment {w}/model/aligned.0.grow-diag-final-and -mono  "
        f"-config {w}/recasing/moses.ini.0 -dev-size 2000 -cores 4 -input-case cased"
    )  # config.toy's LM corpus is its bitext's English side: no -mono text (see the test below)


@pytest.mark.parametrize("name", [m for m in METAS if _decoder_settings(m)])
def test_quoted_decoder_settings_reach_the_recaser_as_the_decoder_gets_them(moses, tmp_path, name):
    """A user's decoder-settings with quotes in them (-weight-overwrite 'LM0= 0.5'): the step script passes them
    unquoted, as the decode step does, and the recaser reads the words the decoder gets (they once broke the
    step: wrapped in single quotes, the shell split them apart)."""
    from moses_recaser.cli.common import attached_values, long_options, single_dash_long
    from moses_recaser.moses.trace import decoder_words

    work, _, config, meta = _prepare(moses, tmp_path, name)
    text = config.read_text(encoding="utf-8")
    quoted = "-s 5000 -threads $cores -weight-overwrite 'LM0= 0.5' -mark-unknown"
    text, n = re.subn(
        r"(?m)^(decoder-settings = \"-search-algorithm 1 .*)-s 5000 -threads \$cores\"$", rf'\1{quoted}"', text
    )
    assert n == 1
    config.write_text(text, encoding="utf-8")
    _ran(_dry_run(moses, config, meta, work), name)
    decode = shlex.split(_command(work, "EVALUATION_test_decode"))
    settings = decode[1 : decode.index("-alignment-output-file")]
    assert settings[-3:] == ["-weight-overwrite", "LM0= 0.5", "-mark-unknown"]
    recase = shlex.split(_command(work, "EVALUATION_test_recase-truecased-output"))
    assert recase[-2] == ">"
    parser = build_parser()
    args = parser.parse_args(attached_values(single_dash_long(recase[1:-2], long_options(parser))))
    assert decoder_words(args.decoder_settings) == settings
    assert args.input == f"{work}/evaluation/test.cleaned.0"


@pytest.mark.parametrize("name", METAS)
def test_lowercase_layout_the_recaser_runs_in_recase_outputs_place(moses, tmp_path, name):
    """config --merge --lowercase: today's layout, with a stock-recaser set beside it."""
    work, _, config, meta = _prepare(moses, tmp_path, name, "--lowercase", "--stock-set")
    proc = _dry_run(moses, config, meta, work)
    _ran(proc, name)
    w, m, ems = work, moses, str(Path(EMS).resolve())
    decode = _command(w, "EVALUATION_test_decode")
    assert decode.startswith(
        f"{m}/bin/moses -search-algorithm 1 -cube-pruning-pop-limit 5000 -s 5000 -threads 4 "
        f"-alignment-output-file {w}/evaluation/test.output.0.wa -t "
    )
    assert decode.endswith(f"< {w}/evaluation/test.input.lc.0 > {w}/evaluation/test.output.0")
    assert _command(w, "EVALUATION_test_recase-output") == (
        f"{ems} recase -moses {m}/bin/moses -in {w}/evaluation/test.cleaned.0 -model {w}/recasing/moses.ini.0 "
        f"-trace {w}/evaluation/test.output.0 -source {w}/evaluation/test.input.tok.0 "
        f"-alignment {w}/evaluation/test.output.0.wa{_decoder_settings(name)} > {w}/evaluation/test.recased.0"
    )
    assert _command(w, "EVALUATION_test_remove-markup") == (
        f"{m}/scripts/ems/support/remove-segmentation-markup.perl < {w}/evaluation/test.output.0 > "
        f"{w}/evaluation/test.cleaned.0"
    )
    # the stock set: Moses' own recaser, trained by EMS on the same cased corpus
    assert _command(w, "EVALUATION_test-stock_recase-output-stock") == (
        f"{m}/scripts/recaser/recase.perl -moses {m}/bin/moses -in {w}/evaluation/test-stock.cleaned.0 -model "
        f"{w}/recasing/stock-moses.ini.0 > {w}/evaluation/test-stock.recased-stock.0"
    )
    steps = _steps(w)
    assert "EVALUATION_test-stock_recase-output" not in steps and "EVALUATION_test_recase-output-stock" not in steps
    assert not {s for s in steps if "truecase" in s}
    assert {"RECASING:consolidate-cased", "RECASING:train", "RECASING:train-stock"} <= _scheduled(proc)
    if name in STOPS:
        return
    assert _command(w, "RECASING_consolidate-cased") == (
        f"{m}/scripts/ems/support/consolidate-training-data.perl fr en {w}/recasing/corpus.0 {w}/corpus/toy.clean.0"
    )
    train = _command(w, "RECASING_train")
    assert train == (
        f"{ems} train -dir {w}/recasing/moses.ini.0.model -corpus {w}/recasing/corpus.0.en -source-corpus "
        f"{w}/recasing/corpus.0.fr -alignment {w}/model/aligned.0.grow-diag-final-and -mono  "
        f"-config {w}/recasing/moses.ini.0 -dev-size 2000 -cores 4"
    )
    # experiment.perl's empty input of the tokenize step it ignores: a -mono without a file, read as none
    assert build_parser().parse_args(shlex.split(train)[1:]).monolingual is None
    assert _command(w, "RECASING_train-stock") == (
        f"{m}/scripts/recaser/train-recaser.perl -train-script {m}/scripts/training/train-model.perl -dir "
        f"{w}/recasing/stock-moses.ini.0.model -corpus {w}/recasing/corpus.0.en -scripts-root-dir {m}/scripts "
        f"-config {w}/recasing/stock-moses.ini.0"
    )


@pytest.mark.parametrize("name", METAS)
def test_an_lm_corpus_of_its_own_is_the_recasers_mono_text(moses, tmp_path, name):
    """An [LM] set beyond the bitext: config --merge cross-directs [RECASING] tokenized to its tokenized corpus
    (Moses' own syntax, config.toy's comment), and EMS tokenizes it (cased) and passes it to the training as
    -mono; config.toy's own LM set, its bitext's English side, is passed over."""
    news = tmp_path / "news.en"
    news.write_text("The Court ruled .\n", encoding="utf-8")
    work = tmp_path / "work"
    toy = _toy_config(moses, work)
    toy.write_text(toy.read_text(encoding="utf-8") + f"\n[LM:news]\nraw-corpus = {news}\n", encoding="utf-8")
    meta, config = tmp_path / "recaser.meta", tmp_path / "config"
    assert main(["-q", "meta", "--moses-meta", str(moses_meta(name)), "-o", str(meta)]) == 0
    merge = subprocess.run([EMS, "config", "--merge", str(toy), "-o", str(config)], capture_output=True, text=True)
    assert merge.returncode == 0 and "[LM:toy] passed over: the bitext's target side" in merge.stderr
    assert "tokenized = [LM:news:tokenized-corpus]" in config.read_text(encoding="utf-8").splitlines()
    proc = _dry_run(moses, config, meta, work)
    _ran(proc, name)
    assert {"LM:news:tokenize", "RECASING:train"} <= _scheduled(proc)
    if name in STOPS:
        return
    assert f" -mono {work}/lm/news.tok.0 -config " in _command(work, "RECASING_train")
    assert _command(work, "LM_news_tokenize").endswith(f"< {news} > {work}/lm/news.tok.0")


@pytest.mark.parametrize("name", METAS)
def test_a_truecasing_config_without_the_recaser_runs_as_stock_moses(moses, tmp_path, name):
    """config.toy as shipped, with the patched meta: the same step scripts as with Moses' own meta
    (detruecase.perl), byte for byte; and check names what the truecase layout lacks."""
    written = []
    for kind in ("stock", "patched"):
        work = tmp_path / kind / "work"
        toy = _toy_config(moses, work)
        meta = moses_meta(name)
        if kind == "patched":
            meta = tmp_path / "recaser.meta"
            assert main(["-q", "meta", "--moses-meta", str(moses_meta(name)), "-o", str(meta)]) == 0
        _ran(_dry_run(moses, toy, meta, work), name)
        steps = sorted((work / "steps" / "0").glob("[A-Z]*.0"))
        written.append({p.name: p.read_text(encoding="utf-8").replace(str(work), "WORK") for p in steps})
    assert written[0] == written[1]
    assert "EVALUATION_test_detruecase-output.0" in written[1]
    check = subprocess.run([EMS, "check", str(toy)], capture_output=True, text=True)
    assert check.returncode == 2
    assert check.stderr.splitlines()[-1] == (
        f"moses-recaser-ems: error: {toy}: 3 problem(s) keep this config from running the recaser: [RECASING] is "
        "missing or IGNORE: EMS trains no recaser; no evaluation set sets 'recaser': detruecase.perl runs; "
        '[RECASING] recaser-train is not set ("moses-recaser-ems train")'
    )
    assert "note: truecase layout: the patched meta runs the recaser as recase-truecased-output" in check.stderr
    # merged, in either layout, the check is clean
    for flags in ([], ["--lowercase"]):
        merged = tmp_path / "merged"
        assert main(["-q", "config", "--merge", str(toy), *flags, "-o", str(merged)]) == 0
        assert main(["-q", "check", str(merged)]) == 0


def test_the_overlay_given_as_a_meta_stops_experiment_perl_with_a_message(moses, tmp_path):
    from importlib import resources

    work = tmp_path / "work"
    toy = _toy_config(moses, work)
    overlay = resources.files("moses_recaser.ems").joinpath("recaser.meta")
    proc = _dry_run(moses, toy, Path(str(overlay)), work)
    assert proc.returncode != 0
    assert (
        "cannot possibly produce output REPORTING:this-file-is-not-a-meta_patch-experiment.meta-with_moses-"
        "recaser-ems-meta" in proc.stderr
    )
