"""`moses-recaser triples` end to end, through the console entry point."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import TRACES

from moses_recaser.cli.main import main

PROMIX = TRACES / "mosesdecoder-promix-test_data"


def test_triples_from_nbest(tmp_path):
    out = tmp_path / "t.jsonl"
    rc = main(
        [
            "-q",
            "triples",
            "--source",
            str(PROMIX / "test.nbest.input"),
            "--trace",
            str(PROMIX / "test.nbest.nbest.segments"),
            "--nbest",
            "-o",
            str(out),
        ]
    )
    assert rc == 0
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 100
    assert rows[0]["phrases"][0] == [0, 1, 0, 0] and rows[0]["rank"] == 0


def test_triples_from_stdin_1best(tmp_path):
    src = tmp_path / "src"
    src.write_text("Das Haus\nKlein\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "moses_recaser.cli.main", "triples", "--source", str(src), "--trace", "-"],
        input="the house |0-1| \nsmall |0-0| \n",
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [json.loads(x) for x in proc.stdout.splitlines()]
    assert rows[1] == {"id": 1, "source": ["Klein"], "target": ["small"], "phrases": [[0, 0, 0, 0]], "links": None}


def test_triples_from_plain_bitext(tmp_path):
    (tmp_path / "f").write_text("Das Haus\n", encoding="utf-8")
    (tmp_path / "e").write_text("the house\n", encoding="utf-8")
    (tmp_path / "a").write_text("0-0 1-1\n", encoding="utf-8")
    out = tmp_path / "t.jsonl"
    assert (
        main(
            [
                "-q",
                "triples",
                "--source",
                str(tmp_path / "f"),
                "--target",
                str(tmp_path / "e"),
                "--alignment",
                str(tmp_path / "a"),
                "-o",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["links"] == [[0, 0], [1, 1]]


def test_error_message_exit_code_and_no_partial_output(tmp_path, capsys):
    src = tmp_path / "src"
    src.write_text("a b\nc d\ne f\n", encoding="utf-8")
    trace = tmp_path / "trace"
    trace.write_text("x |0-1| \ny |0-5| \nz |0-1| \n", encoding="utf-8")
    out = tmp_path / "t.jsonl"
    rc = main(["triples", "--source", str(src), "--trace", str(trace), "-o", str(out)])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err == f"moses-recaser: error: {trace}:2: source span 0-5 is outside the source sentence (2 tokens)"
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src", "trace"]
