"""A new user's stumbles (issue 50): a misspelt flag, recase as a filter, the confusion table's tags, and a
training run that another run would not repeat."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

from moses_recaser.cli import ems as ems_cli
from moses_recaser.cli import main as main_cli
from moses_recaser.core import casing

CLI = str(Path(sys.executable).parent / "moses-recaser")


@pytest.mark.parametrize(
    ("run", "args", "said"),
    [
        (
            main_cli.main,
            ["recase", "--modle", "M"],
            "moses-recaser: error: unknown option --modle; did you mean --model? (see moses-recaser recase --help)",
        ),
        (
            main_cli.main,
            ["eval", "--hyp", "h", "--ref", "r", "--confusoin=yes"],
            "moses-recaser: error: unknown option --confusoin; did you mean --confusion? (see moses-recaser eval --help)",
        ),
        (
            main_cli.main,
            ["recase", "-m", "M", "--zzzzzz"],
            "moses-recaser: error: unknown option --zzzzzz (see moses-recaser recase --help)",
        ),
        (
            main_cli.main,
            ["recase", "-m", "M", "stray"],
            "moses-recaser: error: unrecognized arguments: stray (see moses-recaser recase --help)",
        ),
        (
            ems_cli.main,
            ["recase", "-modle", "M", "-in", "x"],
            "moses-recaser-ems: error: unknown option -modle; did you mean -model? (see moses-recaser-ems recase --help)",
        ),
        (  # before the options it requires are found missing (-corpus among them)
            ems_cli.main,
            ["train", "-corpsu", "x"],
            "moses-recaser-ems: error: unknown option -corpsu; did you mean -corpus? (see moses-recaser-ems train --help)",
        ),
    ],
)
def test_an_unknown_option_is_said_by_its_subcommand_with_the_closest_spelling(run, args, said, capsys):
    assert run(args) == 2
    assert capsys.readouterr().err == said + "\n"


def test_a_missing_required_option_is_still_said(capsys):
    assert ems_cli.main(["train", "-dir", "d"]) == 2
    assert capsys.readouterr().err == (
        "moses-recaser-ems: error: the following arguments are required: -corpus, -config "
        "(see moses-recaser-ems train --help)\n"
    )


def test_recase_without_an_input_reads_text_on_stdin(tico, tmp_path):
    """``moses-recaser recase -m MODEL < in > out``, as Moses' filters run: the same as ``--input in``."""
    text = tico / "test.lc.en"
    filtered = subprocess.run(
        [CLI, "-q", "recase", "-m", str(tico / "model")],
        stdin=text.open("rb"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert filtered.returncode == 0, filtered.stderr
    assert main_cli.main(["-q", "recase", "-m", str(tico / "model"), "-i", str(text), "-o", str(tmp_path / "o")]) == 0
    assert filtered.stdout == (tmp_path / "o").read_text(encoding="utf-8")
    assert filtered.stdout.count("\n") == 150 and filtered.stdout != text.read_text(encoding="utf-8")


def test_the_confusion_table_says_what_its_tags_mean(tmp_path, capsys):
    (tmp_path / "hyp").write_text("the us Said nato iphone 2006 .\n", encoding="utf-8")
    (tmp_path / "ref").write_text("The US said NATO iPhone 2006 .\n", encoding="utf-8")
    assert main_cli.main(["eval", "--hyp", str(tmp_path / "hyp"), "--ref", str(tmp_path / "ref"), "--confusion"]) == 0
    out = capsys.readouterr().out.splitlines()
    legend = out[-1]
    assert out[-7].startswith("ref\\out") and out[-2].startswith("AN ")
    # every tag, once, with examples that casing.tag gives that tag
    explained = re.findall(r"([A-Z]{2}) [^(]+\(([^)]+)\)", legend)
    assert [tag for tag, _ in explained] == casing.TAG_NAMES
    for tag, examples in explained:
        for word in examples.split(", "):
            assert casing.tag(word).name == tag, (word, tag)


@pytest.fixture(scope="module")
def small(tmp_path_factory, tico) -> Path:
    """60 training sentence pairs, their word alignment, and 10 dev pairs with theirs."""
    from moses_recaser.moses.pharaoh import format_links
    from moses_recaser.stats.eflomal import align

    d = tmp_path_factory.mktemp("small")
    for side, lang in (("f", "fr"), ("e", "en")):
        lines = (tico / f"train.{lang}").read_text(encoding="utf-8").splitlines(keepends=True)
        (d / side).write_text("".join(lines[:60]), encoding="utf-8")
        (d / f"dev.{side}").write_text("".join(lines[60:70]), encoding="utf-8")
    for name in ("", "dev."):
        src = [x.split() for x in (d / f"{name}f").read_text(encoding="utf-8").splitlines()]
        tgt = [x.split() for x in (d / f"{name}e").read_text(encoding="utf-8").splitlines()]
        (d / f"{name}a").write_text("".join(format_links(a) + "\n" for a in align(src, tgt)), encoding="utf-8")
    return d


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ([], "its training bitext with a seed of the system; give `alignment` (from"),
        (["--alignment", "a"], None),
        (
            ["--alignment", "a", "--dev-source", "dev.f", "--dev-target", "dev.e"],
            "its dev set with a seed of the system; give `dev_alignment` (from",
        ),  # fmt: skip
        (
            ["--dev-source", "dev.f", "--dev-target", "dev.e"],
            "its training bitext and dev set with a seed of the system; give `alignment` and `dev_alignment` (from",
        ),  # fmt: skip
        (["--alignment", "a", "--dev-source", "dev.f", "--dev-target", "dev.e", "--dev-alignment", "dev.a"], None),
    ],
)
def test_train_says_when_another_run_would_give_another_model(small, given, said, tmp_path, caplog):
    """eflomal seeds itself from the system: a model whose training or dev words it aligned is not made again by
    the same command (issue 50, item 5); the library's ``train`` names the arguments whose files make it so."""
    files = [str(small / x) if x in ("a", "dev.f", "dev.e", "dev.a") else x for x in given]
    argv = ["train", "--source", str(small / "f"), "--target", str(small / "e"), *files, "--dev-size", "6"]
    with caplog.at_level(logging.WARNING):
        assert main_cli.main([*argv, "--max-iter", "2", "-o", str(tmp_path / "m")]) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "reproducible" in r.getMessage()]
    if said is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and warnings[0].startswith("this model is not reproducible: eflomal aligned ")
        assert said in warnings[0], warnings[0]


def test_the_reproducibility_warning_names_the_commands_flags(small, tmp_path):
    """The warning comes from the library; the command names its own flags in it, as in its errors."""
    argv = [str(Path(sys.executable).parent / "moses-recaser"), "train", "--source", str(small / "f")]
    argv += ["--target", str(small / "e"), "--max-iter", "2", "--dev-size", "6", "-o", str(tmp_path / "m")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert [x for x in done.stderr.splitlines() if "reproducible" in x] == [
        "moses-recaser: warning: this model is not reproducible: eflomal aligned its training bitext with a seed of "
        "the system; give --alignment (from 'moses-recaser align') to train the same model again"
    ], done.stderr
