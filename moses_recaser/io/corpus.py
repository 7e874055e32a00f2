"""A corpus of parallel files read in pieces: blocks of lines that separate processes can read on their own.

``pieces`` cuts ``files`` (a bitext: source, target, alignment; or target-language text alone) into at most
``jobs`` blocks of whole lines, the byte offset of each block's first line found by one scan of each file
(``line_offsets``), so that a worker seeks to its block instead of reading the lines before it. Files that
cannot seek (compressed, stdin) are one block read from the start. ``read_piece`` gives a block's lines,
decoded, with their line numbers for error messages.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import READ_FAULTS, compressed


@dataclass(frozen=True)
class Piece:
    """Lines [first, first + lines) of a bitext (source, target, alignment) or of target-language text
    (target alone), read from the byte offsets ``starts``."""

    files: tuple[str, ...]
    starts: tuple[int, ...]
    first: int
    lines: int

    @property
    def bitext(self) -> bool:
        return len(self.files) == 3


def _seekable(path: str) -> bool:
    return path != "-" and not compressed(path)


def line_offsets(path: str, wanted: Sequence[int]) -> tuple[int, list[int]]:
    """The number of lines of a file, and the byte offset at which each ``wanted`` line (0-based) starts."""
    targets = sorted(set(wanted))
    found: dict[int, int] = {}
    lines = offset = 0
    k = 0
    try:
        with open(path, "rb") as fh:
            while True:
                block = fh.read(1 << 24)
                if not block:
                    break
                n = block.count(b"\n")
                while k < len(targets) and targets[k] <= lines + n:
                    # the line starts after the (targets[k] - lines)-th newline of the block
                    at, need = 0, targets[k] - lines
                    for _ in range(need):
                        at = block.index(b"\n", at) + 1
                    found[targets[k]] = offset + at
                    k += 1
                lines += n
                offset += len(block)
                last = block[-1:]
    except OSError as exc:
        raise RecaserError(f"cannot read: {exc.strerror}", path) from None
    if offset and last != b"\n":
        lines += 1  # a last line without a newline
    return lines, [found.get(w, offset) for w in wanted]


def check_rereadable(path: str) -> None:
    """A corpus file that training reads more than once (its lines counted, then read): standard input, a pipe or
    a FIFO would be empty the second time, or wait for ever for a writer, so it is refused before a line is
    read. (A missing file is left to the open that names it.)"""
    if path == "-":
        raise RecaserError(
            "standard input cannot be a training corpus or dev set, which are read more than once: give a file"
        )
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if stat.S_ISDIR(mode):
        raise RecaserError("is a directory, not a file", path)
    if not stat.S_ISREG(mode):
        raise RecaserError(
            "not a regular file (a pipe?): a training corpus or dev set is read more than once; give a file", path
        )


def corpus_lines(files: Sequence[str]) -> int:
    """The number of lines of parallel files (an error names the first line one of them lacks); each is a
    regular file (``check_rereadable``)."""
    for f in files:
        check_rereadable(f)
    if not all(_seekable(f) for f in files):
        from moses_recaser.io.lines import LineReader, zip_readers

        return sum(1 for _ in zip_readers(*(LineReader(f, allow_empty=True) for f in files)))
    counts = [line_offsets(f, [])[0] for f in files]
    if len(set(counts)) > 1:
        short = min(range(len(files)), key=lambda k: counts[k])
        long = max(range(len(files)), key=lambda k: counts[k])
        raise RecaserError(
            f"line-count mismatch: {files[short]} has only {counts[short]} lines, {files[long]} has more",
            files[long],
            counts[short] + 1,
        )
    return counts[0]


def corpus_digest(files: Sequence[str]) -> str:
    """A sha256 of parallel files' text (compressed ones decompressed), file by file: shards counted apart are
    known by it to come from one corpus, which their line ranges alone cannot tell (two corpora of the same
    length, a corpus cleaned again)."""
    from moses_recaser.io.lines import open_binary

    whole = hashlib.sha256()
    for f in files:
        one = hashlib.sha256()
        try:
            with open_binary(f) as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    one.update(block)
        except READ_FAULTS as exc:
            raise RecaserError(f"cannot read: {getattr(exc, 'strerror', None) or exc}", f) from None
        whole.update(one.digest())
    return whole.hexdigest()


def pieces(files: Sequence[str], jobs: int, lines: tuple[int, int] | None = None) -> list[Piece]:
    """``files`` (parallel, line by line) cut into at most ``jobs`` blocks of lines ([start, end) of
    ``lines``, default all); files that cannot seek (compressed, stdin) make one block."""
    start, end = lines or (0, corpus_lines(files))
    if end <= start:
        return []
    if not all(_seekable(f) for f in files):
        return [Piece(tuple(files), (-1,) * len(files), start, end - start)]
    n = end - start
    bounds = sorted({start + n * i // jobs for i in range(jobs + 1)})
    offsets = [line_offsets(f, bounds[:-1])[1] for f in files]
    return [
        Piece(tuple(files), tuple(o[i] for o in offsets), bounds[i], bounds[i + 1] - bounds[i])
        for i in range(len(bounds) - 1)
    ]


def _read_lines(path: str, start: int, first: int, count: int) -> Iterator[tuple[int, str]]:
    """Lines [first, first + count) of a file from byte ``start`` (-1: read from the beginning), decoded,
    with their 1-based line numbers; errors name the file and line."""
    from moses_recaser.io.lines import LineReader, decode_line, read_line

    if start < 0:
        reader = LineReader(path)
        for line in reader:
            if reader.lineno > first + count:
                break
            if reader.lineno > first:
                yield reader.lineno, line
        return
    with open(path, "rb") as fh:
        fh.seek(start)
        for k in range(count):
            yield first + k + 1, decode_line(read_line(fh, path, first + k + 1), path, first + k + 1)


def read_piece(piece: Piece, k: int = 0) -> Iterator[tuple[int, str]]:
    """The lines of file ``k`` of a piece, with their 1-based line numbers."""
    return _read_lines(piece.files[k], piece.starts[k], piece.first, piece.lines)


def piece_blocks(piece: Piece, k: int, size: int) -> Iterator[list[str]]:
    """The lines of file ``k`` of a piece, ``size`` at a time (decoded a block at a time where the file can
    seek; errors name the file and line)."""
    path, start = piece.files[k], piece.starts[k]
    if start < 0:
        lines = (line for _, line in read_piece(piece, k))
        for done in range(0, piece.lines, size):
            yield [next(lines) for _ in range(min(size, piece.lines - done))]
        return
    from moses_recaser.io.lines import decode_lines, read_line

    with open(path, "rb") as fh:
        fh.seek(start)
        for done in range(0, piece.lines, size):
            n = min(size, piece.lines - done)
            line = piece.first + done + 1
            yield decode_lines([read_line(fh, path, line + j) for j in range(n)], path, line)
