"""One name per setting across both command lines (``cli.options``), and no given file silently left unused."""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from moses_recaser.cli import ems as ems_cli
from moses_recaser.cli import main as main_cli
from moses_recaser.cli.main import main
from moses_recaser.cli.options import OPTIONS, defaults_taken, markdown_table

PARSERS = {"moses-recaser": main_cli.build_parser, "moses-recaser-ems": ems_cli.build_parser}
DOCS = Path(__file__).parents[1] / "docs" / "settings.md"


def subcommands(build) -> dict[str, argparse.ArgumentParser]:
    parser = build()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def visible(p: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in p._actions if a.option_strings and a.help != argparse.SUPPRESS]


@pytest.mark.parametrize("prog", PARSERS)
def test_dash_o_is_an_output_in_every_subcommand(prog):
    seen = 0
    for name, p in subcommands(PARSERS[prog]).items():
        for a in p._actions:
            if "-o" in a.option_strings:
                seen += 1
                assert a.dest == "output", (prog, name, a.dest)
                # a file checked before any work (``writes``), or a directory: the model, the experiment's run
                assert "output" in (p.get_default("writes") or ()) or name in ("train", "stats", "merge", "experiment")
    # the rest print their result (eval, check) or write the file EMS names (ems train's -config)
    without = {"moses-recaser": {"eval"}, "moses-recaser-ems": {"train", "check"}}[prog]
    assert seen == len(subcommands(PARSERS[prog])) - len(without)


@pytest.mark.parametrize("prog", PARSERS)
def test_every_setting_has_its_one_spelling(prog):
    """A setting of the registry is spelt as the registry says, in every subcommand."""
    for name, p in subcommands(PARSERS[prog]).items():
        for a in visible(p):
            # the settings stored under this name (--nbest is a spelling of trace_format's value nbest)
            spelt = [o for o in OPTIONS.values() if o.kwargs.get("dest", o.name) == a.dest]
            if not spelt:
                continue
            if prog == "moses-recaser":
                flags = tuple(x for x in a.option_strings if not x.startswith("--no-"))
                assert flags in [o.flags for o in spelt], (name, a.dest)
            else:
                assert a.option_strings[0] in [o.ems for o in spelt], (name, a.dest)
            assert a.help, (name, a.dest)


def test_every_flag_has_help():
    for prog, build in PARSERS.items():
        for name, p in subcommands(build).items():
            for a in visible(p):
                if a.dest not in ("help", "quiet", "verbose", "version"):
                    assert a.help and a.help.strip(), (prog, name, a.option_strings)


def test_settings_table_in_docs_is_the_registry():
    table = markdown_table(main_cli.build_parser(), ems_cli.build_parser())
    assert table in DOCS.read_text(encoding="utf-8"), "regenerate: python tools/settings_table.py"


def _stated_default(help_text: str) -> str | None:
    """The default a flag's --help states ("default 3", "(default: links)", "default '|'"), as a value: quotes
    dropped, "0: none" as 0, on/off as True/False, stdin/stdout as '-', none as ''; None if it states none."""
    found = re.search(r"default:? ('[^']*'|[^;),\s]+)", help_text)
    if found is None:
        return None
    word = found.group(1).strip("'").removesuffix(":")
    return {"on": "True", "off": "False", "stdin": "-", "stdout": "-", "none": ""}.get(word, word)


def test_each_default_that_help_states_is_the_one_taken_and_the_one_in_the_settings_table():
    """A default said in --help is the value the flag takes when not given (a hand-written 'default: both' beside
    a setting whose default is links was not), and docs/settings.md shows it for that subcommand."""
    table = {
        r.split(" | ")[0].strip("| `"): r.split(" | ")[-1].rstrip(" |")
        for r in markdown_table(main_cli.build_parser(), ems_cli.build_parser()).splitlines()[2:]
    }
    checked = 0
    for prog, build in PARSERS.items():
        taken = defaults_taken(build())
        for command, p in subcommands(build).items():
            formatter = p._get_formatter()
            for a in visible(p):
                stated = _stated_default(formatter._expand_help(a)) if a.help else None
                value = taken.get(a.dest, {}).get(command)
                if stated is None or value is None:
                    # a default described, not a value ("the model's", "both"): none is taken
                    assert value is None or stated is not None or "%(default)" not in a.help, (prog, command, a.dest)
                    continue
                assert stated == value.strip("'"), (prog, command, a.dest, stated, value)
                if prog == "moses-recaser":
                    assert f"`{value}`".replace("|", "\\|") in table[a.dest], (a.dest, table[a.dest])
                checked += 1
    assert checked >= 40


def test_settings_table_names_the_subcommands_that_take_a_flag():
    """EMS passes -cores to the train step only; the input flags are recase's (and triples')."""
    rows = {
        r.split(" | ")[0].strip("| `"): r.split(" | ")
        for r in markdown_table(main_cli.build_parser(), ems_cli.build_parser()).splitlines()[2:]
    }
    assert rows["jobs"][2] == "`-cores` (train)"
    assert rows["trace_format"][1].startswith("`--trace-format` (") and "recase" in rows["trace_format"][1]
    assert rows["nbest"][1].startswith("`--nbest` (") and rows["trace"][2] == "`-trace` (recase)"
    assert all(r[1] for r in rows.values()), [n for n, r in rows.items() if not r[1]]  # each on moses-recaser


def test_ems_spellings_and_quiet_after_the_subcommand(tico, tmp_path):
    """``recase -model M`` as EMS users type it, and ``-q`` after the subcommand."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "moses_recaser", "recase", "-model", str(tico / "model"), "-input",
         str(tico / "test.lc.en"), "-o", str(out), "-q"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # -q after the subcommand: not even the signature line
    assert out.read_text(encoding="utf-8").count("\n") == 150


def _error(args: list[str], capsys) -> str:
    assert main(args) == 2
    return capsys.readouterr().err.strip()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--input", "IN", "--alignment", "WA"], "--alignment links the output to its source: give --source too"),
        (["--triples", "IN", "--source", "SRC"], "--source does not go with --trace-format jsonl"),
        (
            ["--input", "IN", "--source", "SRC", "--align", "--alignment", "WA"],
            "--align links text --input to its --source: give both, and no --alignment",
        ),
        (["--trace", "IN", "--alignment", "WA"], "give --source too"),
        (
            ["--trace", "IN", "--trace-format", "jsonl", "--source", "SRC"],
            "--source does not go with --trace-format jsonl",
        ),
    ],
)
def test_a_given_file_is_never_silently_unused(tico, tmp_path, capsys, extra, message):
    files = {"IN": tico / "test.lc.en", "SRC": tico / "test.fr", "WA": tmp_path / "wa"}
    (tmp_path / "wa").write_text("0-0\n" * 150, encoding="utf-8")
    args = ["recase", "--model", str(tico / "model"), *[str(files.get(x, x)) for x in extra]]
    err = _error(args, capsys)
    assert message in err and err.count("\n") == 0


def test_the_alignment_of_input_is_used(tico, tmp_path, capsys):
    """``--alignment`` with ``--input`` (once silently dropped) is read: a link outside the sentence is an error
    at its line, and the output is the library's for those links."""
    src = tmp_path / "src"
    src.write_text("Paris et la Seine .\n", encoding="utf-8")
    hyp = tmp_path / "hyp"
    hyp.write_text("paris and the seine .\n", encoding="utf-8")
    outs = {}
    args = ["-q", "recase", "--model", str(tico / "model"), "--source", str(src), "--input", str(hyp)]
    wa = tmp_path / "wa"
    wa.write_text("0-0 1-9\n", encoding="utf-8")
    assert "wa:1: alignment link 1-9 is outside" in _error([*args, "--alignment", str(wa)], capsys)
    for links in ("0-0 1-1 2-2 3-3 4-4", "0-3 3-0 4-4"):
        wa.write_text(links + "\n", encoding="utf-8")
        out = tmp_path / f"out{len(outs)}"
        assert main([*args, "--alignment", str(wa), "-o", str(out)]) == 0
        outs[links] = out.read_text(encoding="utf-8")
    from moses_recaser import Recaser

    r = Recaser.load(tico / "model")
    for links, text in outs.items():
        assert text == r.recase("paris and the seine .", source="Paris et la Seine .", alignment=links) + "\n"


def test_train_refuses_lengths_trace_without_its_source(tico, tmp_path, capsys):
    args = ["train", "--source", str(tico / "train.fr"), "--target", str(tico / "train.en"), "-o", str(tmp_path / "m")]
    err = _error([*args, "--lengths-trace", str(tico / "test.fr")], capsys)
    assert "--lengths-trace and --lengths-source go together" in err


def test_ems_recase_refuses_an_alignment_without_its_trace(tico, tmp_path, capsys):
    (tmp_path / "wa").write_text("0-0\n", encoding="utf-8")
    args = [
        "recase",
        "-in",
        str(tico / "test.lc.en"),
        "-model",
        str(tico / "model"),
        "-alignment",
        str(tmp_path / "wa"),
    ]
    assert ems_cli.main(args) == 2
    assert "-alignment links the -trace to its -source" in capsys.readouterr().err


def test_eval_prints_bleu_and_a_signature(tico, capsys):
    assert main(["eval", "--hyp", str(tico / "test.lc.en"), "--ref", str(tico / "test.en")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "BLEU" in out[0] and "case-insensitive BLEU 100.00" in out[0]  # lowercased text: only case is wrong
    assert out[1].startswith("signature: moses-recaser:") and "tok:none" in out[1]


def test_eval_error_names_file_line_and_cause(tico, tmp_path, capsys):
    hyp = tmp_path / "hyp"
    lines = (tico / "test.en").read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3].replace(" .", ".")  # detokenized
    hyp.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    err = _error(["eval", "--hyp", str(hyp), "--ref", str(tico / "test.en")], capsys)
    assert f"{hyp}:4: output and reference differ in more than case" in err and "detokenized" in err
    # files of different lengths: named at the first line one of them lacks
    hyp.write_text("".join(x + "\n" for x in lines[:5]), encoding="utf-8")
    err = _error(["eval", "--hyp", str(hyp), "--ref", str(tico / "test.en")], capsys)
    assert f"{tico / 'test.en'}:6: line-count mismatch: {hyp} has only 5 lines" in err


def test_python_dash_m():
    done = subprocess.run([sys.executable, "-m", "moses_recaser", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "recase" in done.stdout and "train" in done.stdout


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_help_that_cannot_be_written_is_an_error():
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "moses_recaser", "--help"], stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert done.returncode == 2
    assert done.stderr == "moses-recaser: error: <stdout>: cannot write: No space left on device\n"


def test_ems_check_names_the_problems_even_when_quiet(tmp_path, capsys):
    cfg = tmp_path / "config"
    cfg.write_text("[GENERAL]\nworking-dir = /tmp/x\n", encoding="utf-8")
    assert ems_cli.main(["check", str(cfg), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "problem(s) keep this config from running the recaser: " in err
    assert "recaser-train is not set" in err


@pytest.mark.parametrize(
    ("run", "args", "message"),
    [
        (main, ["recase", "-m", "M", "--input", "a", "--input", "b"], "--input a and --input b: a file is given once"),
        (main, ["recase", "-m", "M", "-i", "a", "-o", "x", "--output", "y"], "-o x and --output y: a file is given"),
        (main, ["eval", "--hyp", "a", "--hyp", "b", "--ref", "r"], "--hyp a and --hyp b: a file is given once"),
        (main, ["train", "--stats", "a", "--stats", "b", "-o", "m"], "--stats a and --stats b: a file is given once"),
        (ems_cli.main, ["recase", "-model", "M", "-in", "a", "-in", "b"], "--in a and --in b: a file is given once"),
    ],
)
def test_a_file_option_given_twice_is_refused(run, args, message, capsys, tmp_path, monkeypatch):
    """argparse keeps the last of a repeated option: the first file would be silently unused, or not written."""
    monkeypatch.chdir(tmp_path)
    assert run(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("run", "args", "message"),
    [
        (main, ["recase", "-m", "M", "--input", "-", "--source", "-"], "--source and --input both read standard input"),
        # without an input, stdin is the input (a filter: recase -m M < in > out)
        (main, ["recase", "-m", "M", "--source", "-"], "--source and --input both read standard input"),
        (main, ["eval", "--hyp", "-", "--ref", "-"], "--hyp and --ref both read standard input"),
    ],
)
def test_standard_input_is_read_by_one_option(run, args, message, capsys, tmp_path, monkeypatch):
    """Two inputs given as '-' would take stdin's lines in turns (half the lines recased, exit 0): refused
    before anything is read."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdin", io.StringIO("a\nb\n"))
    assert run(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_standard_input_or_a_fifo_under_two_names_is_read_by_one_option(tmp_path):
    """/dev/stdin beside '-', or one FIFO given twice, is one stream read as two files (lines taken in turns):
    refused before anything is read. A regular file behind stdin is opened on its own by each reader."""
    cli = str(Path(sys.executable).parent / "moses-recaser")

    def run(args: list[str], stdin: Any) -> subprocess.CompletedProcess:
        return subprocess.run([cli, *args], stdin=stdin, capture_output=True, text=True, timeout=60, cwd=tmp_path)

    proc = run(["eval", "--hyp", "-", "--ref", "/dev/stdin"], subprocess.PIPE)
    assert proc.returncode == 2
    assert proc.stderr == "moses-recaser: error: --hyp and --ref both read standard input: give one of them a file\n"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    proc = run(["eval", "--hyp", str(fifo), "--ref", str(fifo)], subprocess.DEVNULL)
    assert proc.returncode == 2
    assert proc.stderr == (
        f"moses-recaser: error: --hyp and --ref both read the pipe {fifo}: give one of them a file\n"
    )
    text = tmp_path / "text"
    text.write_text("The cat .\n", encoding="utf-8")
    with open(text, encoding="utf-8") as fh:
        proc = run(["eval", "--hyp", "/dev/stdin", "--ref", str(text)], fh)
    assert proc.returncode == 0 and "100.00" in proc.stdout
    # stdin on /dev/null (cron, CI) is no stream: /dev/null given twice reads nothing twice
    proc = run(["eval", "--hyp", "/dev/null", "--ref", "/dev/null"], subprocess.DEVNULL)
    assert "both read" not in proc.stderr
    # moses-recaser-ems: its files read when they are there count too, named as EMS spells them
    ems = str(Path(sys.executable).parent / "moses-recaser-ems")
    args = ["recase", "-in", str(text), "-source", str(text), "-trace", str(fifo), "-alignment", str(fifo)]
    proc = subprocess.run([ems, *args, "-model", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert (
        proc.stderr
        == f"moses-recaser-ems: error: -trace and -alignment both read the pipe {fifo}: give one of them a file\n"
    )
    proc = subprocess.run(
        [ems, "recase", "-in", "-", "-source", "-", "-model", str(tmp_path)],
        stdin=subprocess.PIPE,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        proc.stderr == "moses-recaser-ems: error: -in and -source both read standard input: give one of them a file\n"
    )


def test_the_usage_shows_a_required_output_as_required(capsys):
    """-o is checked after parsing (``options.finish_settings``): the usage showed it in brackets, as optional."""
    assert main(["lm", "--help"]) == 0
    usage = capsys.readouterr().out
    assert " -o FILE " in usage and "[-o FILE]" not in usage and "[-i FILE]" in usage
    assert main(["lm", "-i", "-"]) == 2
    # named by the long flag, as every other error names it
    assert "the following arguments are required: --output (see" in capsys.readouterr().err
    assert main(["recase", "-i", "-"]) == 2
    assert "the following arguments are required: --model (see" in capsys.readouterr().err


def test_a_renamed_option_is_said_by_its_new_name(capsys):
    """recase's --alignment-mode is --read now: the old name points there, not at the closest spelling
    (--alignment, a file)."""
    assert main(["recase", "-m", "x", "--alignment-mode", "links"]) == 2
    assert "unknown option --alignment-mode: it is --read now" in capsys.readouterr().err


def test_a_language_code_is_checked_where_a_misspelt_one_would_tokenize_as_no_language(tmp_path, capsys):
    """sacremoses takes any string for a language and tokenizes a misspelt one (EN, xx-bogus) by no language's
    rules: tokenize and eval --raw refuse it, as train and recase do."""
    text = tmp_path / "t.en"
    text.write_text("It's here.\n", encoding="utf-8")
    for lang in ("EN", "xx-bogus"):
        assert main(["tokenize", "-l", lang, "-i", str(text), "-o", str(tmp_path / "o")]) == 2
        assert f"--lang is '{lang}'; give a language code" in capsys.readouterr().err
    assert main(["eval", "--hyp", str(text), "--ref", str(text), "--raw", "--target-lang", "EN"]) == 2
    assert "--target-lang is 'EN'; give a language code" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
