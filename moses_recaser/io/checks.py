"""The checks made before any work: every input there to read, every output writable and none of the inputs,
no stream read twice, no two outputs one file (the command line's, and ``Recaser.recase_file``'s)."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Collection, Mapping
from typing import Any

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import check_input
from moses_recaser.io.outputs import NOT_A_FILE, check_output, file_id, written_in_place
from moses_recaser.io.streams import STDOUT, own_descriptor

STDIN = "<stdin>"


def check_files(
    reads: Mapping[str, Any],
    writes: Mapping[str, Any],
    *,
    reads_if_there: Mapping[str, Any] | None = None,
    rewrites: Collection[str] = (),
    binary: Collection[str] = (),
    prints: bool = False,
) -> None:
    """Before any work: every input file (``reads``: a file name, a list of them or None, by argument name) is
    there to read (text, but the ``binary``), every output (``writes``) can be written and is none of the inputs
    (those and ``reads_if_there``, files read only when they are there) but those it may replace (``rewrites``:
    recasing in place), no two inputs read one stream, no two outputs are one file, and stdout is open if the
    result is printed there (``prints``). Errors name the arguments in backquotes; a value that is not a file
    name (an int, bytes) is one of them."""
    for name, value in {**reads, **(reads_if_there or {}), **writes}.items():
        for path in value if isinstance(value, list) else [value]:
            if path is not None and not isinstance(path, (str, os.PathLike)):  # ('' is said below, by its kind)
                raise RecaserError(f"`{name}` must be a file name, not {path!r}"[:300])
    inputs: dict[tuple[int, int], str] = {}
    rewritten: dict[tuple[int, int], str] = {}  # inputs an output may replace whole, not write into as they are read
    streams: dict[object, str] = {}  # the inputs that read a stream: one stream cannot be read as two files

    def one_reader(path: str, name: str) -> None:
        stream = _stream(path)
        if stream is not None:
            if stream in streams:
                what = "standard input" if stream == STDIN else f"the pipe {os.fspath(path)}"
                raise RecaserError(f"`{streams[stream]}` and `{name}` both read {what}: give one of them a file")
            streams[stream] = name

    for name, value in reads.items():
        for path in value if isinstance(value, list) else [] if value is None else [value]:
            check_input(path, text=name not in binary)
            one_reader(path, name)
            (rewritten if name in rewrites else inputs).setdefault(file_id(path), name)
    for name, path in (reads_if_there or {}).items():  # read only when there (EMS's optional files), not checked
        if path is not None:
            one_reader(path, name)
        inputs.setdefault(file_id(path), name)
    outputs: dict[object, str] = {}
    for name, path in writes.items():
        check_output(path)
        output = file_id(path, 1)
        read = inputs.get(output) or (rewritten.get(output) if written_in_place(path) else None)
        if output != NOT_A_FILE and read is not None:
            raise RecaserError(
                f"this output is also the file given as `{read}`, which the command only reads: give another output",
                STDOUT if path in (None, "-") else os.fspath(path),
            )
        key = _output_key(path, output)
        if key is not None and key in outputs:
            raise RecaserError(
                f"this output is also the one given as `{outputs[key]}`: give each output a file of its own",
                os.fspath(path),
            )
        outputs.setdefault(key, name)
    if prints and sys.stdout is None:
        raise RecaserError("standard output is closed, and this command prints its result there", STDOUT)


def _output_key(path: str | os.PathLike[str] | None, output: tuple[int, int]) -> object:
    """What two outputs must not share (one would replace the other): a regular file, a name not there yet, or
    stdout (``-``); None for an output not asked for, or a FIFO or device (written in place: /dev/null twice is
    fine)."""
    if path is None:
        return None
    fd = 1 if os.fspath(path) == "-" else own_descriptor(os.fspath(path))  # (/dev/stdout, /dev/fd/N)
    if fd is not None:
        return STDOUT if fd == 1 else fd
    if output != NOT_A_FILE:
        return output
    return None if os.path.lexists(path) and not os.path.islink(path) else os.path.realpath(path)


def _stream(path: str | os.PathLike[str]) -> object:
    """The stream an input reads, which no other input can read as well (None: a file, which each reader opens
    on its own): STDIN for ``-`` and for a name of standard input that is not a regular file (/dev/stdin,
    /dev/fd/0 on a pipe or terminal), (device, inode) for a FIFO."""
    if os.fspath(path) == "-":
        return STDIN
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return None
    piped = stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode)
    with contextlib.suppress(OSError, ValueError):
        stdin = os.fstat(0)
        # (a device that is not a terminal, /dev/null under cron, gives each reader the same: not one stream)
        if (st.st_dev, st.st_ino) == (stdin.st_dev, stdin.st_ino) and (piped or os.isatty(0)):
            return STDIN
    return (st.st_dev, st.st_ino) if piped else None
