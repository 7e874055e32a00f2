"""Streams of output: a descriptor written through buffers (and gzip or xz), its write errors named, and the lines
written where they cannot be taken back (stdout, a FIFO, ``/dev/fd/N``) counted (``io.outputs`` decides where
an output goes; this writes it)."""

from __future__ import annotations

import contextlib
import io
import lzma
import os
import re
import sys
import zlib
from collections.abc import Iterator
from typing import IO, Any

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import COMPRESSED

STDOUT = "<stdout>"

# lines this process wrote to each output written where it stands (stdout, a FIFO, /dev/fd/N), by its name: no
# rename can take them back, so an error or an interrupt after them says so
_IN_PLACE: dict[str, int] = {}


def in_place_lines() -> dict[str, int]:
    """How many lines this process has written to each output written where it stands, by its name."""
    return dict(_IN_PLACE)


def write_error(exc: OSError, path: str) -> RecaserError:
    """An OSError of writing ``path``, as the one line users see."""
    return RecaserError(f"cannot write: {exc.strerror or exc}", path)


def dup_descriptor(fd: int, shown: str) -> int:
    try:
        return os.dup(fd)
    except OSError as exc:
        raise write_error(exc, shown) from None


_DESCRIPTOR = re.compile(r"/proc/(?:self|thread-self|(?P<pid>\d+))(?:/task/\d+)?/fd/(?P<fd>\d+)")


def own_descriptor(shown: str) -> int | None:
    """The descriptor of this process that ``shown`` names (/dev/stdout, /dev/fd/N, or a link to one), else None:
    such a path is the open file itself (``>> log`` appends to it), written where it stands, as bash writes it."""
    p = os.path.abspath(shown)
    for _ in range(40):
        m = _DESCRIPTOR.fullmatch(os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p)))
        if m and (m["pid"] is None or int(m["pid"]) == os.getpid()):
            return int(m["fd"])
        try:
            if not os.path.islink(p):
                return None
            p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
        except OSError:  # (a link that cannot be read: the path is written as any other, and says why)
            return None
    return None


class _Guarded(io.FileIO):
    """A file whose write errors name it; with ``count``, the lines written through it are counted (``_IN_PLACE``).
    A broken pipe stays a BrokenPipeError: the reader went away, which is not an error of ours."""

    def __init__(self, fd: int, shown: str, *, closefd: bool = True, count: bool = False) -> None:
        super().__init__(fd, "wb", closefd=closefd)
        self.shown = shown
        self.count = count

    def write(self, b: Any) -> int:
        try:
            n = super().write(b)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise write_error(exc, self.shown) from None
        if self.count and n:
            _IN_PLACE[self.shown] = _IN_PLACE.get(self.shown, 0) + bytes(memoryview(b)[:n]).count(b"\n")
        return n or 0


class _Compressing(io.RawIOBase):
    """Bytes written to ``out`` compressed as gzip (no name, no time: the same text gives the same bytes) or xz.
    The stream's end is written by ``finish`` only, so an output cut short is one its reader reports as such."""

    def __init__(self, out: IO, suffix: str) -> None:
        super().__init__()
        self._out = out
        self._packer: Any = zlib.compressobj(6, zlib.DEFLATED, 31) if suffix == COMPRESSED[0] else lzma.LZMACompressor()

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = bytes(b)
        self._out.write(self._packer.compress(data))
        return len(data)

    def finish(self) -> None:
        self._out.write(self._packer.flush())


@contextlib.contextmanager
def errors_named(shown: str) -> Iterator[None]:
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise write_error(exc, shown) from None


def stream_to(
    fd: int,
    shown: str,
    binary: bool,
    *,
    sync: bool = False,
    suffix: str | None = None,
    in_place: bool = False,
    closefd: bool = True,
) -> Iterator[IO]:
    """A descriptor opened for this output, written (and with ``sync`` on disk), then closed (stdout: left open);
    text compressed by ``suffix``, its stream ended only when the block finishes without error; the lines of plain
    text written ``in_place`` counted."""
    compress = suffix in COMPRESSED and not binary
    raw = _Guarded(fd, shown, closefd=closefd, count=in_place and not binary and not compress)
    buffered = io.BufferedWriter(raw, buffer_size=1 << 16)
    packer = _Compressing(buffered, suffix) if compress and suffix else None
    inner = buffered if packer is None else io.BufferedWriter(packer, buffer_size=1 << 16)
    fh: IO = inner if binary else io.TextIOWrapper(inner, encoding="utf-8", newline="\n")
    try:
        yield fh
        with errors_named(shown):
            fh.flush()
            if packer is not None:
                packer.finish()
            buffered.flush()
            if sync:
                os.fsync(fd)
    finally:
        for layer in (fh, buffered):  # (stdout's descriptor stays open: ``closefd``)
            with contextlib.suppress(OSError, RecaserError, ValueError):
                layer.close()


def to_stdout(binary: bool) -> Iterator[IO]:
    if sys.stdout is None:
        raise RecaserError("standard output is closed; give an output file with -o", STDOUT)
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # a stream without a file (captured, in-process): as it is
        yield sys.stdout.buffer if binary else sys.stdout
        sys.stdout.flush()
        return
    yield from stream_to(fd, STDOUT, binary, in_place=True, closefd=False)
