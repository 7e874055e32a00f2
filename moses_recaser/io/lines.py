"""Line-oriented text input: strict UTF-8 with line numbers, lock-step reading (writing: ``outputs``)."""

from __future__ import annotations

import gzip
import hashlib
import lzma
import os
import re
import stat
import sys
from collections.abc import Iterator
from typing import BinaryIO

from moses_recaser.io.errors import RecaserError

# The project's one tokenization is Moses': a line is trimmed of " \t\n\r" at both ends (moses/Util.h Trim, in
# Sentence::init), then split on runs of spaces and tabs only. Any other character, other Unicode white space
# included (\v, \f, \x1c, \x85, U+3000: str.split() would split there), is part of a token.
_TOKEN_SEP = re.compile(r"[ \t]+")
_TRIM = " \t\n\r"
# What no token can hold, so that a line written from tokens splits back into the same tokens: a space or tab
# (they split it), a newline (it ends the line) or a NUL (not text). A carriage return inside a line is a token's,
# as the readers keep it, but not at the line's edges, where it is trimmed (``EDGE``). The JSON Lines reader
# refuses tokens that could not be read back so (``triples``).
NOT_IN_TOKEN = re.compile(r"[ \t\n\0]")
EDGE = "\r"

# The most tokens a sentence may hold on either side where it is recased or fitted as one (recase, triples,
# phrase-align, train's dev): memory and time per sentence grow with its length (about 2.7 KB and 0.1 ms a
# token), and a longer "line" is almost always a document that lost its line ends. README "Errors" names it.
MAX_TOKENS = 10_000


def check_length(tokens: list[str]) -> None:
    """A sentence within ``MAX_TOKENS``; a RecaserError without location if not (the caller places it)."""
    if len(tokens) > MAX_TOKENS:
        raise RecaserError(
            f"{len(tokens)} tokens on one line, more than the limit of {MAX_TOKENS:,}: split the line "
            "(a longer line is usually a document without line ends)"
        )


_TOKEN = re.compile(r"[^ \t]+")


def iter_tokens(line: str) -> Iterator[str]:
    """The tokens ``split_tokens`` gives, one at a time (for a very long line: memory as one token)."""
    return (m[0] for m in _TOKEN.finditer(line.strip(_TRIM)))


def split_tokens(line: str) -> list[str]:
    """Split a line into tokens the way the Moses decoder does (see ``_TOKEN_SEP``). Invariant: joined with
    spaces, the tokens split back into themselves."""
    line = line.strip(_TRIM)
    if "\t" not in line and "  " not in line:  # (as nearly every line is: str.split, 5 times as fast)
        return line.split(" ") if line else []
    return _TOKEN_SEP.split(line)


def open_binary(path: str) -> BinaryIO:
    """A file's bytes as the reader takes them: ``-`` is stdin; a gzip or xz file, known by its first bytes
    (``compression``), is decompressed."""
    if path == "-" and sys.stdin is None:
        raise RecaserError("standard input is closed; give an input file", "<stdin>")
    try:
        fh = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115 - closed by LineReader
    except FileNotFoundError:
        raise RecaserError("no such file", path) from None
    except IsADirectoryError:
        raise RecaserError("is a directory, not a file", path) from None
    except OSError as exc:
        raise RecaserError(f"cannot open: {exc.strerror}", path) from None
    try:
        # (a pipe's bytes too: peeked, not consumed; stdin replaced by a stream without peek is taken as it is)
        kind = compression(fh.peek(len(_XZ))) if hasattr(fh, "peek") else None
    except OSError as exc:
        if path != "-":
            fh.close()
        raise RecaserError(f"cannot read: {exc.strerror}", path) from None
    if kind == COMPRESSED[0]:
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    if kind == COMPRESSED[1]:
        return lzma.LZMAFile(fh, mode="rb")  # type: ignore[return-value]
    return fh


# Compressed input is known by its first bytes, not its name: a symlink 'x.gz' to plain text that an output
# through it wrote (outputs compress by the name of the file written), or 'L' to 'data.xz', reads as it was
# written. No UTF-8 text starts with either (0x8b and 0xfd start no character), so text is never taken for them.
_GZIP, _XZ = b"\x1f\x8b", b"\xfd7zXZ\x00"


def compression(head: bytes) -> str | None:
    """The suffix (of ``COMPRESSED``) of the compression a file starting with ``head`` holds; None: plain."""
    if head.startswith(_GZIP):
        return COMPRESSED[0]
    if head[:1] == _XZ[:1] and _XZ.startswith(head[: len(_XZ)]):
        return COMPRESSED[1]
    return None


def compressed(path: str) -> bool:
    """Whether a (regular) file is gzip or xz, from its first bytes; a file that cannot be read is not (its
    reader says why)."""
    try:
        with open(path, "rb") as fh:
            return compression(fh.read(len(_XZ))) is not None
    except OSError:
        return False


COMPRESSED = (".gz", ".xz")  # gzip and xz: input known by its bytes, outputs compressed by these names
# what reading a file can raise: the system's errors, and a compressed stream cut short or damaged
READ_FAULTS = (OSError, EOFError, gzip.BadGzipFile, lzma.LZMAError)


BOM = b"\xef\xbb\xbf"

# A line is read LINE_PIECE bytes at a time: a file without line ends (binary data, /dev/zero) is refused at its
# first NUL, and a line past MAX_LINE_BYTES (no sentence is that long) before it fills memory.
LINE_PIECE = 1 << 16
MAX_LINE_BYTES = 1 << 26


def not_text(at: int, path: str, lineno: int) -> RecaserError:
    """A NUL byte at byte ``at`` of line ``lineno``: binary data, which no token can hold (numpy's string arrays
    drop it)."""
    return RecaserError(f"a NUL byte at byte {at} of the line: not a text file", path, lineno)


def open_text(path: str, name: str | None = None) -> BinaryIO:
    """``open_binary`` for a text file: one whose first LINE_PIECE bytes (decompressed) hold a NUL is refused at
    once, at its line, before it is read (a binary file, a .tar.gz: its line count or its first long line would
    otherwise be what is said of it, after the work that counts it). ``name``: the file as errors name it."""
    fh = open_binary(path)
    try:
        head = fh.peek(LINE_PIECE)[:LINE_PIECE] if hasattr(fh, "peek") else b""
    except READ_FAULTS:
        head = b""  # (a damaged compressed file: its reader says so at its line)
    nul = head.find(b"\0")
    if nul >= 0:
        if path != "-":
            fh.close()
        start = head.rfind(b"\n", 0, nul) + 1
        lineno = head.count(b"\n", 0, nul) + 1
        at = nul - start - (len(BOM) if lineno == 1 and head.startswith(BOM) else 0)
        raise not_text(at, name or path, lineno)
    return fh


def read_line(fh: BinaryIO, path: str, lineno: int) -> bytes:
    """``fh.readline()`` (b"" at the end), in bounded memory: a NUL in a long line, or a line longer than
    MAX_LINE_BYTES, is a RecaserError at ``path``:``lineno`` as soon as it is read."""
    raw = fh.readline(LINE_PIECE)
    if len(raw) < LINE_PIECE or raw.endswith(b"\n"):
        return raw
    parts: list[bytes] = []
    size = -len(BOM) if lineno == 1 and raw.startswith(BOM) else 0  # (decode_line counts after a BOM)
    while True:
        nul = raw.find(b"\0")
        if nul >= 0:
            raise not_text(size + nul, path, lineno)
        parts.append(raw)
        size += len(raw)
        if size > MAX_LINE_BYTES:
            raise RecaserError(
                f"a line longer than {MAX_LINE_BYTES >> 20} MiB: not sentences (a file without line ends?)",
                path,
                lineno,
            )
        if len(raw) < LINE_PIECE or raw.endswith(b"\n"):
            return b"".join(parts)
        raw = fh.readline(LINE_PIECE)


def decode_line(raw: bytes, path: str, lineno: int, keep_ends: bool = False) -> str:
    """A line's text: without its line end (\\n or Windows' \\r\\n) and, on line 1, a UTF-8 byte-order
    mark, so that neither sticks to a token (``keep_ends``: both kept, for raw text written back as it came);
    invalid UTF-8, and a NUL byte (binary data, which no token can hold: numpy's string arrays drop it), is an
    error naming the file and line."""
    end = b""
    if raw.endswith(b"\n"):
        cut = 2 if raw.endswith(b"\r\n") else 1
        raw, end = raw[:-cut], raw[-cut:]
    bom = lineno == 1 and raw.startswith(BOM)
    if bom:
        raw = raw[len(BOM) :]
    nul = raw.find(b"\0")
    if nul >= 0:
        raise not_text(nul, path, lineno)
    try:
        text = raw.decode("utf-8")
        return ("\ufeff" if bom else "") + text + end.decode("ascii") if keep_ends else text
    except UnicodeDecodeError as exc:
        raise RecaserError(
            f"invalid UTF-8 at byte {exc.start} of the line ({raw[exc.start : exc.start + 4]!r})", path, lineno
        ) from None


def decode_lines(raws: list[bytes], path: str, first: int) -> list[str]:
    """``decode_line`` of lines read one after another (the first is line ``first``), decoded as one buffer when
    nothing needs a line of its own (no carriage return, NUL or byte-order mark, every line ended, valid UTF-8);
    the same lines, and the same errors, either way."""
    buf = b"".join(raws)
    fast = buf.endswith(b"\n") and b"\r" not in buf and b"\0" not in buf and not (first == 1 and buf.startswith(BOM))
    if fast:
        try:
            lines = buf.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            lines = []
        if len(lines) == len(raws) + 1:
            return lines[:-1]
    return [decode_line(raw, path, first + k) for k, raw in enumerate(raws)]


class LineReader:
    """Iterate over the lines of a file (or stdin for ``-``) as str, without the newline.

    Each line is decoded on its own so that invalid UTF-8 is reported with its line number; Windows line
    ends and a byte-order mark are taken off (``decode_line``).
    ``require_newline`` makes a last line without a newline an error: decoder output always
    ends its lines, so a missing newline means the file was cut short. A file with no lines at
    all is an error unless ``allow_empty``: in a pipeline it almost always means a failed step.
    ``keep_ends``: each line with its line end (none for a last line without one) and the first with its
    byte-order mark, for raw text that is written back byte for byte.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        require_newline: bool = False,
        allow_empty: bool = False,
        keep_ends: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self.name = "<stdin>" if self.path == "-" else self.path
        self.lineno = 0
        self.require_newline = require_newline
        self.allow_empty = allow_empty
        self.keep_ends = keep_ends
        self._fh: BinaryIO | None = None

    def __enter__(self) -> LineReader:  # noqa: PYI034 - no typing_extensions dependency for Self on 3.10
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._fh is not None and self.path != "-":
            self._fh.close()
        self._fh = None

    def error(self, reason: str, line: int | None = None) -> RecaserError:
        return RecaserError(reason, self.name, self.lineno if line is None else line)

    def __iter__(self) -> Iterator[str]:
        if self._fh is None:
            self._fh = open_text(self.path, self.name)
        fh = self._fh
        try:
            for raw in iter(lambda: read_line(fh, self.name, self.lineno + 1), b""):
                self.lineno += 1
                if not raw.endswith(b"\n") and self.require_newline:
                    raise self.error("truncated last line (no newline at the end): the file looks cut short")
                yield decode_line(raw, self.name, self.lineno, self.keep_ends)
        except READ_FAULTS as exc:
            raise self.error(f"read error: {exc}") from None
        finally:
            self.close()
        if self.lineno == 0 and not self.allow_empty:
            raise RecaserError("empty file (no lines)", self.name, 1)


def sha256(path: str | os.PathLike[str]) -> str:
    """The sha256 of a file's bytes, read in blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_lines(path: str | os.PathLike[str], *, require_newline: bool = False) -> Iterator[str]:
    """The lines of a text file as the command line reads them, lazily: UTF-8, each without its line end (\\n or
    \\r\\n) and the first without a byte-order mark; ``-`` is stdin, ``.gz`` and ``.xz`` are read as such.
    Invalid UTF-8 or a NUL byte is a ``RecaserError`` naming the file and line."""
    if not isinstance(path, (str, os.PathLike)) or not isinstance(os.fspath(path), str):
        raise RecaserError(f"read_lines takes a file name, not {path!r}"[:200])
    return iter(LineReader(path, require_newline=require_newline))


def zip_readers(*readers: LineReader) -> Iterator[tuple[str, ...]]:
    """Read files in lock step; a file that ends early is an error at the first line where they part."""
    iters = [iter(r) for r in readers]
    while True:
        row: list[str] = []
        ended: list[LineReader] = []
        for reader, it in zip(readers, iters):
            try:
                row.append(next(it))
            except StopIteration:
                ended.append(reader)
        if not ended:
            yield tuple(row)
            continue
        if len(ended) == len(readers):
            return
        longer = next(r for r in readers if r not in ended)
        short = ended[0]
        raise RecaserError(
            f"line-count mismatch: {short.name} has only {short.lineno} lines, {longer.name} has more",
            longer.name,
            longer.lineno,
        )


def check_input(path: str | os.PathLike[str], text: bool = True) -> None:
    """Fail now, before long work, if ``path`` cannot be read as a file, or (``text``) is a regular file that is
    not text (``open_text``; ``-``: stdin, always)."""
    shown = os.fspath(path)
    if shown == "-":
        if sys.stdin is None:
            open_binary(shown)  # (its error)
        return
    try:
        st = os.stat(shown)
    except FileNotFoundError:
        raise RecaserError("no such file", shown) from None
    except OSError as exc:
        raise RecaserError(f"cannot open: {exc.strerror}", shown) from None
    if stat.S_ISDIR(st.st_mode):
        raise RecaserError("is a directory, not a file", shown)
    if not os.access(shown, os.R_OK):
        raise RecaserError("cannot open: permission denied", shown)
    if text and stat.S_ISREG(st.st_mode):  # (a pipe's or a device's first bytes are the reader's: not taken here)
        open_text(shown).close()


def read_text(path: str | os.PathLike[str]) -> str:
    """A whole (small) UTF-8 file, such as a config: errors name the file, and the line of bad UTF-8."""
    reader = LineReader(path, allow_empty=True)
    return "".join(line + "\n" for line in reader)


def read_system(path: str) -> str | None:
    """A small file of the kernel's (/proc, /sys), whole; None where it is not there."""
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return None


def whole_text(path: str | os.PathLike[str]) -> str:
    """A whole UTF-8 file as Python's text mode reads it (universal newlines): a file this package wrote, read
    back; a fault or bad UTF-8 names the file."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except UnicodeDecodeError:
        raise RecaserError("invalid UTF-8", os.fspath(path)) from None
    except OSError as exc:
        raise RecaserError(f"cannot read: {exc.strerror}", os.fspath(path)) from None


def file_stat(path: str | os.PathLike[str]) -> os.stat_result | None:
    """The file's stat (links followed); None where there is nothing to stat."""
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def kind_of(path: str | os.PathLike[str], follow: bool = True) -> str | None:
    """What is at ``path``: "file" (a regular one), "dir", "link" (not ``follow``ed), "other" (a pipe, a device),
    or None (nothing, or nothing that can be looked at)."""
    try:
        mode = (os.stat if follow else os.lstat)(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISREG(mode):
        return "file"
    return "dir" if stat.S_ISDIR(mode) else "link" if stat.S_ISLNK(mode) else "other"


def read_regular(path: str | os.PathLike[str], limit: int, follow: bool = True) -> bytes | None:
    """The first ``limit`` bytes of a regular file (None: not one, or unreadable; a FIFO is not opened, so not
    waited on): to tell what a file is, not to read its contents."""
    if kind_of(path, follow) != "file":
        return None
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None
