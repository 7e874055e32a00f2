"""The README's Python block, run as written: in a directory that holds the files it names (train.fr, dev.en,
test.output, ...), made from the shipped TICO-19 slices, so that an example that no longer runs fails here."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from moses_recaser.moses.tokenizer import tokenizer

README = Path(__file__).parents[1] / "README.md"
TICO = Path(__file__).parents[1] / "data" / "tico19"


def _python_block() -> str:
    """The first ```python block after the README's '## Python' heading."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Python\n") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README: no python block under '## Python'"
    return match.group(1)


def _write(path: Path, lines: list[str]) -> None:
    path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")


def _files(d: Path) -> list[str]:
    """The files the block names. The alignments link word i to word i (a valid Pharaoh file; the block's
    workings are under test, not its model's quality); the -t trace is each line as one phrase."""
    sides = {}
    for lang in ("fr", "en"):
        tok = tokenizer(lang)
        text = (TICO / f"tico19-test.{lang}").read_text(encoding="utf-8").splitlines()
        sides[lang] = [" ".join(tok(x)) for x in text]
    fr, en = sides["fr"], sides["en"]

    def diagonal(a: str, b: str) -> str:
        return " ".join(f"{i}-{i}" for i in range(min(len(a.split()), len(b.split()))))

    _write(d / "train.fr", fr[:500])
    _write(d / "train.en", en[:500])
    _write(d / "train.gdfa", [diagonal(a, b) for a, b in zip(fr[:500], en[:500])])
    _write(d / "dev.fr", fr[500:560])
    _write(d / "dev.en", en[500:560])
    test_fr, test_en = fr[1950:1990], [x.lower() for x in en[1950:1990]]
    _write(d / "test.input.tok", test_fr)
    _write(d / "test.output", [f"{e} |0-{len(f.split()) - 1}|" for f, e in zip(test_fr, test_en)])
    _write(d / "test.output.wa", [diagonal(f, e) for f, e in zip(test_fr, test_en)])
    return test_en


def test_the_readme_python_block_runs_as_written(tmp_path, monkeypatch):
    """It trains, loads, recases one sentence each way, then streams the decoder's files: one printed line per
    test line, each the -t line's words in another case only, then the signature."""
    test_en = _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(_python_block(), str(README), "exec"), {"__name__": "readme"})
    printed = out.getvalue().split("\n")
    assert (tmp_path / "MODEL" / "manifest.yaml").is_file()
    assert len(printed) == len(test_en) + 2 and printed[-1] == ""
    for got, lowered in zip(printed, test_en):
        assert got.lower().split(" ") == lowered.split(" ")
    assert printed[:-2] != test_en  # recased, not copied
    assert printed[-2].startswith("moses-recaser:") and "|sigma:1|" in printed[-2]  # the block's sigma=1.0
