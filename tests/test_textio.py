"""Strict UTF-8 with line numbers, lock-step reading, atomic outputs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moses_recaser.io import lines as textio
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import LineReader, iter_tokens, split_tokens, zip_readers
from moses_recaser.io.outputs import atomic_directory, atomic_output
from moses_recaser.moses.pharaoh import parse_links


def test_invalid_utf8_names_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_bytes(b"ok\nfine\nbad \xff byte\n")
    with pytest.raises(RecaserError) as err:
        list(LineReader(p))
    assert (err.value.path, err.value.line) == (str(p), 3)
    assert "invalid UTF-8 at byte 4" in err.value.reason


def test_missing_file():
    with pytest.raises(RecaserError, match="no such file"):
        list(LineReader("/nonexistent/x.txt"))


def test_gzip_input(tmp_path):
    import gzip

    p = tmp_path / "x.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        fh.write("a b\nc\n")
    assert list(LineReader(p)) == ["a b", "c"]


def test_zip_readers_reports_the_longer_file(tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.write_text("1\n2\n")
    b.write_text("1\n2\n3\n4\n")
    with pytest.raises(RecaserError) as err:
        list(zip_readers(LineReader(a), LineReader(b)))
    assert err.value.path == str(b) and err.value.line == 3
    assert f"{a} has only 2 lines" in err.value.reason


@pytest.mark.parametrize(
    "line,tokens",
    [
        ("a b", ["a", "b"]),
        ("  a\t\tb  ", ["a", "b"]),
        ("", []),
        (" \t ", []),
        ("a\u3000b", ["a\u3000b"]),
        ("a\u2009b", ["a\u2009b"]),
        ("a\vb \x1c \x85c", ["a\vb", "\x1c", "\x85c"]),
        ("a b\r", ["a", "b"]),  # Moses trims " \t\n\r" at the ends (a "\r\r\n" line end)
        ("\r a\rb", ["a\rb"]),
    ],
)
def test_split_tokens(line, tokens):
    """Moses' tokens; joined with spaces, they split back into themselves."""
    assert split_tokens(line) == tokens
    assert split_tokens(" ".join(tokens)) == tokens


def test_atomic_output_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "out.txt"
    with pytest.raises(RuntimeError), atomic_output(target) as out:
        out.write("partial\n")
        raise RuntimeError("boom")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_atomic_output_keeps_old_file_until_done(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt), atomic_output(target) as out:
        out.write("new\n")
        raise KeyboardInterrupt
    assert target.read_text() == "old\n"
    with atomic_output(target) as out:
        out.write("new\n")
    assert target.read_text() == "new\n"


def test_atomic_directory(tmp_path):
    target = tmp_path / "model"
    with pytest.raises(RuntimeError), atomic_directory(target) as d:
        (d / "f").write_text("x")
        raise RuntimeError
    assert not target.exists() and list(tmp_path.iterdir()) == []
    with atomic_directory(target) as d:
        (d / "manifest.yaml").write_text("format_version: 6\nfiles: {f: x}\n")
        (d / "f").write_text("x")
    with atomic_directory(target) as d:
        (d / "g").write_text("y")
    assert sorted(p.name for p in target.iterdir()) == ["g"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_windows_line_ends_and_a_byte_order_mark_are_not_text(tmp_path):
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"\xef\xbb\xbfcliquez sur ok .\r\nsecond line\r\n\xef\xbb\xbfkept\n")
    assert list(LineReader(path)) == ["cliquez sur ok .", "second line", "\ufeffkept"]  # a BOM only starts a file
    assert split_tokens(next(iter(LineReader(path))))[0] == "cliquez"


@given(st.text(alphabet=" \t\r\na-\u00e9\u2028", max_size=40))
def test_tokens_one_at_a_time_are_the_split_tokens(line):
    assert list(iter_tokens(line)) == split_tokens(line)


def test_a_long_alignment_line_is_read_pair_by_pair():
    """Duplicate links are one link; a line of a million pairs does not hold a regular expression's state for
    every character (700 MB for a 12 MB line), and a bad pair at its end is still found."""
    assert parse_links("0-0 1-1 0-0 2-1 1-1") == [(0, 0), (1, 1), (2, 1)]
    assert parse_links(" ".join(["0-0", "1-1"] * 100_000)) == [(0, 0), (1, 1)]
    with pytest.raises(RecaserError, match="malformed alignment pair 'x-1'"):
        parse_links("0-0 " * 100_000 + "x-1")


def test_a_file_without_line_ends_is_refused_as_it_is_read_not_held_whole(tmp_path, monkeypatch):
    """A NUL in a long line is named where it is (counted after a byte-order mark, as in a short line), and a line
    past MAX_LINE_BYTES is refused at its line: /dev/zero was read whole before its NUL was seen (out of memory)."""
    monkeypatch.setattr(textio, "MAX_LINE_BYTES", 1 << 20)
    for size in (100, 3 * textio.LINE_PIECE):  # short, and read in pieces
        path = tmp_path / f"nul{size}"
        path.write_bytes(textio.BOM + b"a" * 97 + b"\0" + b"b" * size + b"\n")
        with pytest.raises(RecaserError, match=r":1: a NUL byte at byte 97 of the line: not a text file$"):
            list(LineReader(path))
    long = tmp_path / "long"
    long.write_bytes(b"ok\n" + b"a" * (3 << 20))
    reader = LineReader(long)
    with pytest.raises(RecaserError, match=r"long:2: a line longer than 1 MiB: not sentences"):
        for line in reader:
            assert line == "ok"
    fine = tmp_path / "fine"
    fine.write_bytes(b"x" * ((1 << 20) - 5) + b"\r\ny\n")  # long, but within the limit
    assert list(LineReader(fine)) == ["x" * ((1 << 20) - 5), "y"]


def test_compressed_input_is_known_by_its_bytes_not_its_name(tmp_path, monkeypatch):
    """An output through a symlink 'out.gz' to 'out.txt' is written plain (by the name of the file written), and
    read back as such; a link 'L' to 'data.xz' and gzip data under any name are decompressed, plain text named
    '.gz' is read as it is, and so is gzip on stdin (they were decided by the name given: 'Not a gzipped file',
    or a NUL byte at line 1 of a file that is fine)."""
    import gzip
    import io
    import lzma
    import sys

    lines = ["the cat .", "ß İ ǅ"]
    text = "".join(x + "\n" for x in lines).encode("utf-8")
    (tmp_path / "data.xz").write_bytes(lzma.compress(text))
    (tmp_path / "L").symlink_to("data.xz")
    (tmp_path / "plain.gz").write_bytes(text)
    (tmp_path / "blob").write_bytes(gzip.compress(text))
    (tmp_path / "z.gz").symlink_to("blob")
    (tmp_path / "out.gz").symlink_to("out.txt")
    with atomic_output(str(tmp_path / "out.gz"), compress=True) as out:
        out.write("".join(x + "\n" for x in lines))
    assert (tmp_path / "out.txt").read_bytes() == text and (tmp_path / "out.gz").is_symlink()
    for name in ("data.xz", "L", "plain.gz", "blob", "z.gz", "out.gz"):
        assert list(LineReader(tmp_path / name)) == lines, name
    stdin = io.TextIOWrapper(io.BufferedReader(io.BytesIO(gzip.compress(text))), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert list(LineReader("-")) == lines
