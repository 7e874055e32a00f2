"""Moses EMS for real: the meta patch on the four released experiment.meta files, and experiment.perl's own dry
run (no -exec: it writes the step scripts) on Moses' example config, switched to the recaser as docs/ems.md says.

These need Moses' scripts from ../shared/moses beside the project. Without that folder they skip, saying so;
MOSES_RECASER_REQUIRE_SHARED=1 (set by .ci/run) makes that a failure.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from moses_recaser.ems.meta import PATCHES, dangling_inputs, patch_meta, read_meta

SHARED = Path(__file__).resolve().parents[2] / "shared" / "moses"
EMS = str(Path(sys.executable).parent / "moses-recaser-ems")
METAS = ["RELEASE-2.1", "RELEASE-3.0", "RELEASE-4.0", "master-34452895"]
# master's experiment.perl cannot read RELEASE-2.1's meta at all (its LM steps are named otherwise: the
# unpatched meta stops in TRAINING:create-config too), so the dry runs take the three later ones
DRY_RUN_METAS = METAS[1:]


def _need_shared() -> None:
    if not list(SHARED.glob("mosesdecoder-*.tar.xz")):
        reason = f"needs Moses' own scripts: {SHARED} (../shared/moses beside the project) is missing"
        if os.environ.get("MOSES_RECASER_REQUIRE_SHARED") == "1":
            pytest.fail(reason + "; MOSES_RECASER_REQUIRE_SHARED=1 makes that a failure")
        pytest.skip(reason)


def _meta(name: str) -> Path:
    _need_shared()
    return SHARED / "experiment-meta" / f"{name}.experiment.meta"


@pytest.fixture(scope="session")
def moses(tmp_path_factory) -> Path:
    """A Moses tree: the real scripts from the source archive, and stand-ins for the binaries (a dry run only
    checks that the files the config names exist)."""
    _need_shared()
    root = tmp_path_factory.mktemp("moses")
    tarball = next(SHARED.glob("mosesdecoder-*.tar.xz"))
    subprocess.run(["tar", "-xJf", str(tarball), "-C", str(root), "mosesdecoder/scripts"], check=True)
    tree = root / "mosesdecoder"
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


def _command(work: Path, step: str) -> str:
    """The command a step script runs (experiment.perl's create_step wraps it in cd/mkdir/echo lines)."""
    lines = (work / "steps" / "0" / f"{step}.0").read_text(encoding="utf-8").splitlines()
    body = [x for x in lines if x and not x.startswith(("#!", "PATH=", "cd ", "echo ", "mkdir -p ", "touch "))]
    assert len(body) == 1, body
    return body[0]


@pytest.mark.parametrize("name", METAS)
def test_the_patch_works_on_every_released_meta(name):
    path = _meta(name)
    text = path.read_text(encoding="utf-8")
    patched = patch_meta(text, str(path))
    before, after = read_meta(text), read_meta(patched.text)
    ours = [after.find(p.section, p.name) for p in PATCHES]
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
    # from RELEASE-4.0 on, experiment.perl has $?name and the decoder's settings reach the recaser
    passes_settings = "-decoder-settings" in after.find("EVALUATION", "recase-output").attrs["template"]
    assert passes_settings == name.startswith(("RELEASE-4", "master"))
    assert any("optional template variables" in n for n in patched.notes) != passes_settings


@pytest.mark.parametrize("name", DRY_RUN_METAS)
def test_experiment_perl_schedules_the_recaser_with_the_expected_command_lines(moses, tmp_path, name):
    work = tmp_path / "work"
    toy = _toy_config(moses, work)
    config, meta = tmp_path / "config", tmp_path / "recaser.meta"
    # docs/ems.md's steps: patch the meta, switch the config (with a stock-recaser set beside it), run
    subprocess.run([EMS, "meta", "--moses-meta", str(_meta(name)), "-o", str(meta)], check=True, capture_output=True)
    subprocess.run(
        [EMS, "config", "--merge", str(toy), "--stock-set", "-o", str(config)], check=True, capture_output=True
    )
    proc = _dry_run(moses, config, meta, work)
    assert proc.returncode == 0 and "ERROR" not in proc.stdout + proc.stderr, proc.stdout[-2000:] + proc.stderr
    w, m = work, moses
    ems = str(Path(EMS).resolve())
    assert _command(w, "RECASING_consolidate-cased") == (
        f"{m}/scripts/ems/support/consolidate-training-data.perl fr en {w}/recasing/corpus.0 {w}/corpus/toy.clean.0"
    )
    assert _command(w, "RECASING_train") == (
        f"{ems} train -dir {w}/recasing/moses.ini.0.model -corpus {w}/recasing/corpus.0.en -source-corpus "
        f"{w}/recasing/corpus.0.fr -alignment {w}/model/aligned.0.grow-diag-final-and -config {w}/recasing/moses.ini.0 "
        "-dev-size 2000 -cores 4"
    )
    decode = _command(w, "EVALUATION_test_decode")
    assert decode.startswith(
        f"{m}/bin/moses -search-algorithm 1 -cube-pruning-pop-limit 5000 -s 5000 -threads 4 "
        f"-alignment-output-file {w}/evaluation/test.output.0.wa -t "
    )
    assert decode.endswith(f"< {w}/evaluation/test.input.lc.0 > {w}/evaluation/test.output.0")
    settings = (
        " -decoder-settings '-search-algorithm 1 -cube-pruning-pop-limit 5000 -s 5000 -threads 4'"
        if name != "RELEASE-3.0"
        else ""
    )
    assert _command(w, "EVALUATION_test_recase-output") == (
        f"{ems} recase -moses {m}/bin/moses -in {w}/evaluation/test.cleaned.0 -model {w}/recasing/moses.ini.0 "
        f"-trace {w}/evaluation/test.output.0 -source {w}/evaluation/test.input.tok.0 "
        f"-alignment {w}/evaluation/test.output.0.wa{settings} > {w}/evaluation/test.recased.0"
    )
    assert _command(w, "EVALUATION_test_remove-markup") == (
        f"{m}/scripts/ems/support/remove-segmentation-markup.perl < {w}/evaluation/test.output.0 > "
        f"{w}/evaluation/test.cleaned.0"
    )
    # the stock set: Moses' own recaser, trained by EMS on the same cased corpus
    assert _command(w, "RECASING_train-stock") == (
        f"{m}/scripts/recaser/train-recaser.perl -train-script {m}/scripts/training/train-model.perl -dir "
        f"{w}/recasing/stock-moses.ini.0.model -corpus {w}/recasing/corpus.0.en -scripts-root-dir {m}/scripts "
        f"-config {w}/recasing/stock-moses.ini.0"
    )
    assert _command(w, "EVALUATION_test-stock_recase-output-stock") == (
        f"{m}/scripts/recaser/recase.perl -moses {m}/bin/moses -in {w}/evaluation/test-stock.cleaned.0 -model "
        f"{w}/recasing/stock-moses.ini.0 > {w}/evaluation/test-stock.recased-stock.0"
    )
    steps = {p.name for p in (w / "steps" / "0").iterdir()}
    assert "EVALUATION_test-stock_recase-output.0" not in steps and "EVALUATION_test_recase-output-stock.0" not in steps


def test_a_truecasing_config_gets_a_clear_message_not_silence(moses, tmp_path):
    work = tmp_path / "work"
    toy = _toy_config(moses, work)  # config.toy truecases
    meta = tmp_path / "recaser.meta"
    subprocess.run([EMS, "meta", "--moses-meta", str(_meta("master-34452895")), "-o", str(meta)], check=True)
    # what EMS does with it: detruecase-output instead of any recaser, without a word
    proc = _dry_run(moses, toy, meta, work)
    assert proc.returncode == 0 and "recase" not in " ".join(p.name for p in (work / "steps" / "0").iterdir())
    check = subprocess.run([EMS, "check", str(toy)], capture_output=True, text=True)
    assert check.returncode == 2
    assert "output-truecaser is set, so EMS runs detruecase-output and never the recaser" in check.stderr
    assert "[RECASING] is missing or IGNORE" in check.stderr
    # merged, the check is clean
    merged = tmp_path / "config"
    subprocess.run([EMS, "config", "--merge", str(toy), "-o", str(merged)], check=True, capture_output=True)
    assert subprocess.run([EMS, "check", str(merged)], capture_output=True).returncode == 0


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
