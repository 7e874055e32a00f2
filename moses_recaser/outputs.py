"""Writing the user's files without ever harming them.

The rules, as a shell's ``>`` and a careful tool keep them:

- A regular file is replaced through a temporary file beside it and one rename, so it is either the old file or the
  whole new one; a new file takes the umask's mode, a replaced one keeps its mode.
- A symlink is written through, to its target (the link stays a link).
- A FIFO, a character or block device (``/dev/null``, a terminal) is written in place, as ``>`` writes it.
- A directory is never an output file, and a directory is replaced only when it is this tool's own model.
- Every write error is a ``RecaserError`` naming the file (``outputs are ... : No space left on device``), and
  nothing is left half-written.

Temporary names carry ``moses-recaser``, the host and the process id (``.NAME.moses-recaser-HOST-PID-XXXX.tmp``), so
the next run that writes beside them removes what a killed run (SIGKILL) left, and puts back a model that a crash
between the two renames of a replacement left aside (``.old``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import io
import logging
import os
import re
import secrets
import shutil
import socket
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from moses_recaser.errors import RecaserError

log = logging.getLogger(__name__)

TAG = "moses-recaser"
STDOUT = "<stdout>"
MANIFEST = "manifest.yaml"  # modeldir.MANIFEST; modeldir imports this module, not the other way round
HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:40] or "host"
# what a temporary name of ours looks like: the target's name, then who made it
_OURS = re.compile(rf"^\.(?P<name>.+)\.{TAG}-(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-[0-9a-f]+\.(?P<kind>tmp|old|work)$")


def write_error(exc: OSError, path: str) -> RecaserError:
    """An OSError of writing ``path``, as the one line users see."""
    return RecaserError(f"cannot write: {exc.strerror or exc}", path)


def _temp_name(name: str, kind: str) -> str:
    return f".{name}.{TAG}-{HOST}-{os.getpid()}-{secrets.token_hex(4)}.{kind}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _stale(directory: Path, name: str | None) -> Iterator[tuple[os.DirEntry[str], re.Match[str]]]:
    """The temporary names in ``directory`` (for ``name`` only, if given) whose run, on this host, is gone."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        m = _OURS.match(entry.name)
        if m and m["host"] == HOST and (name is None or m["name"] == name) and not _alive(int(m["pid"])):
            yield entry, m


def put_back(directory: Path, name: str | None = None) -> None:
    """Put a model that a replacement left aside, and died before renaming the new one in, back at its name, if
    nothing took its place (a reading run does this too: the model is only where the user left it)."""
    for entry, m in _stale(directory, name):
        target = directory / m["name"]
        if m["kind"] == "old" and not os.path.lexists(target):
            with contextlib.suppress(OSError):
                os.rename(entry.path, target)
                log.warning("put back %s, which an interrupted replacement had left aside", target)


def clean_stale(directory: Path, name: str | None = None) -> None:
    """Remove what killed runs of this host left in ``directory`` (for ``name`` only, if given): temporary files
    and directories whose process is gone, after ``put_back``."""
    put_back(directory, name)
    for entry, _ in _stale(directory, name):
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
            log.debug("removed %s, left by a killed run", entry.path)


@contextlib.contextmanager
def work_dir(prefix: str, parent: str | os.PathLike[str] | None = None) -> Iterator[str]:
    """A scratch directory (in ``parent``, else the system's temporary directory), removed at the end, and by the
    next run if this one is killed."""
    base = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    clean_stale(base, prefix)
    path = base / _temp_name(prefix, "work")
    try:
        os.mkdir(path, 0o700)
    except OSError as exc:
        raise write_error(exc, str(base)) from None
    try:
        yield str(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


class _Guarded(io.FileIO):
    """A file whose write errors name it (``cannot write: No space left on device``). A broken pipe stays a
    BrokenPipeError: the reader went away, which is not an error of ours."""

    def __init__(self, fd: int, shown: str, *, closefd: bool = True) -> None:
        super().__init__(fd, "wb", closefd=closefd)
        self.shown = shown

    def write(self, b: Any) -> int:
        try:
            return super().write(b)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise write_error(exc, self.shown) from None


def _wrap(raw: _Guarded, binary: bool) -> IO:
    buffered = io.BufferedWriter(raw, buffer_size=1 << 16)
    return buffered if binary else io.TextIOWrapper(buffered, encoding="utf-8", newline="\n")


def _finish(fh: IO, shown: str, *, sync: bool) -> None:
    try:
        fh.flush()
        if sync:
            os.fsync(fh.fileno())
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise write_error(exc, shown) from None


def output_target(path: str | os.PathLike[str]) -> tuple[Path, os.stat_result | None]:
    """Where writing ``path`` lands: symlinks followed to their target (which may not exist yet), and what is
    there now (None: nothing). Refuses what is not writable as a file, before any work."""
    shown = os.fspath(path)
    real = Path(os.path.realpath(shown))
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise RecaserError(f"cannot write: {exc.strerror}", shown) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise RecaserError("is a directory; give a file name", shown)
    if st is None or stat.S_ISREG(st.st_mode):  # the file is made anew beside it
        parent = real.parent
        if not parent.is_dir():
            raise RecaserError("the output's directory does not exist", shown)
        if is_model_dir(parent):  # a file put there would fail the model's next load, or be lost at its next write
            raise RecaserError(f"is inside the model directory {parent}; give an output outside it", shown)
        if not os.access(parent, os.W_OK | os.X_OK):
            reason = "read-only file system" if _read_only(parent) else "permission denied"
            raise RecaserError(f"cannot write: {reason} (directory {parent})", shown)
        # the rename would replace a file the user may not write, which the shell's > refuses
        if st is not None and not os.access(real, os.W_OK):
            raise RecaserError("cannot write: permission denied (a read-only file)", shown)
    elif not os.access(real, os.W_OK):
        raise RecaserError("cannot write: permission denied", shown)
    return real, st


def _read_only(directory: Path) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


NOT_A_FILE = (-1, -1)


def file_id(path: str | os.PathLike[str] | None) -> tuple[int, int]:
    """The regular file a path names, as (device, inode) through symlinks; NOT_A_FILE for stdin or stdout, a file
    not there yet, a FIFO or a device (written in place, and read as a stream): what tells that an output would
    replace an input."""
    if path is None or os.fspath(path) == "-":
        return NOT_A_FILE
    try:
        st = os.stat(path)
    except OSError:
        return NOT_A_FILE
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else NOT_A_FILE


def check_output(path: str | os.PathLike[str] | None) -> None:
    """Fail now, before long work, if ``path`` (an output file; ``-`` or None: stdout) cannot be written."""
    if path is None or os.fspath(path) == "-":
        if sys.stdout is None:
            raise RecaserError("standard output is closed; give an output file with -o", STDOUT)
        return
    output_target(path)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str] | None, *, binary: bool = False) -> Iterator[IO]:
    """Open an output that holds the new content only when the block finishes without error.

    A regular file (or a new one) is written under a temporary name beside it and renamed over it at the end; on
    any exception, KeyboardInterrupt included, the temporary file is removed and the old file is untouched. A
    symlink is written through; a FIFO or device in place. ``None`` or ``-`` is stdout. Write errors are
    ``RecaserError``s naming the file.
    """
    if path is None or os.fspath(path) == "-":
        yield from _to_stdout(binary)
        return
    shown = os.fspath(path)
    real, st = output_target(shown)
    if st is not None and not stat.S_ISREG(st.st_mode):
        yield from _in_place(real, shown, binary)
        return
    clean_stale(real.parent)  # every dead run's leftovers here, whatever output they were for
    tmp = real.parent / _temp_name(real.name, "tmp")
    try:
        # O_CREAT's mode goes through the umask, as open() does; a replaced file keeps its own mode
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        if st is not None:
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
    except OSError as exc:
        raise write_error(exc, shown) from None
    try:
        fh = _wrap(_Guarded(fd, shown), binary)
        try:
            yield fh
            _finish(fh, shown, sync=True)
        finally:
            with contextlib.suppress(OSError, RecaserError):
                fh.close()
        try:
            os.replace(tmp, real)
        except OSError as exc:
            raise write_error(exc, shown) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _to_stdout(binary: bool) -> Iterator[IO]:
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
    fh = _wrap(_Guarded(fd, STDOUT, closefd=False), binary)
    try:
        yield fh
        _finish(fh, STDOUT, sync=False)
    finally:
        if isinstance(fh, io.TextIOWrapper):  # stdout stays open for what follows
            with contextlib.suppress(OSError, RecaserError, ValueError):
                fh.detach()


def _in_place(real: Path, shown: str, binary: bool) -> Iterator[IO]:
    """A FIFO or device, opened as ``>`` opens it (a FIFO waits for its reader)."""
    try:
        fd = os.open(real, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise write_error(exc, shown) from None
    fh = _wrap(_Guarded(fd, shown), binary)
    try:
        yield fh
        _finish(fh, shown, sync=False)
    finally:
        with contextlib.suppress(OSError, RecaserError):
            fh.close()


# errors of writing, whoever raised them: a full disk or quota, a file too large, a read-only or failing disk
_DISK_FAULTS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}

# Linux's renameat2 flags: swap two names in one step, or rename only if the new name is free
_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """Linux's renameat2; False where the system or the file system lacks it (the caller falls back)."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd = -100
    if fn(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def is_model_dir(path: Path) -> bool:
    """A directory of this tool's: it holds a regular manifest.yaml that starts as ours does."""
    manifest = path / MANIFEST
    try:
        if not stat.S_ISREG(os.lstat(manifest).st_mode):
            return False
        with open(manifest, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return False
    return head.startswith(b"format_version:")


def foreign_entries(directory: Path) -> list[str]:
    """What a model directory holds besides its manifest and the files the manifest names (a user's notes, say),
    sorted; every entry if the manifest cannot be read as a mapping with ``files``."""
    import yaml

    try:
        with open(directory / MANIFEST, "rb") as fh:
            doc = yaml.safe_load(fh.read(1 << 24).decode("utf-8"))
        names = set(doc["files"]) if isinstance(doc, dict) and isinstance(doc.get("files"), dict) else set()
        entries = os.listdir(directory)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError, TypeError):
        return [MANIFEST]
    return sorted(e for e in entries if e != MANIFEST and e not in names)


def model_target(path: str | os.PathLike[str]) -> Path:
    """Where a model written to ``path`` lands (a symlink followed), checked before any work: nothing there, or a
    model of this tool's (replaced when the new one is complete); never another directory or a file."""
    shown = os.fspath(path)
    real = Path(os.path.realpath(shown))
    if real == real.parent:
        raise RecaserError("cannot write a model to the root directory", shown)
    cwd = Path.cwd().resolve()
    if real == cwd or real in cwd.parents:
        raise RecaserError("is the current directory (or holds it); give the model a directory of its own", shown)
    if os.path.lexists(real):
        if not real.is_dir():
            raise RecaserError(
                "exists and is not a directory; give the model a new path, or remove the file yourself", shown
            )
        if not is_model_dir(real):
            raise RecaserError(
                "exists and is not a moses-recaser model (it has no manifest.yaml of ours); give "
                "the model a new path, or remove the directory yourself",
                shown,
            )
        others = foreign_entries(real)
        if others:
            raise RecaserError(
                f"is a model, but also holds {others[0]!r}{f' and {len(others) - 1} more' if len(others) > 1 else ''}"
                ", which its manifest does not name; move them out of it, or give the model a new path",
                shown,
            )
    parent = real.parent
    if not parent.is_dir():
        raise RecaserError(f"the model's parent directory {parent} does not exist", shown)
    if not os.access(parent, os.W_OK | os.X_OK):
        reason = "read-only file system" if _read_only(parent) else "permission denied"
        raise RecaserError(f"cannot write: {reason} (directory {parent})", shown)
    return real


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Build a model directory under a temporary name beside ``path``, then move it into place.

    An existing model at ``path`` is swapped for the new one in a single rename (Linux's RENAME_EXCHANGE) and only
    then removed; where the swap is not available, it is set aside, the new one renamed in, and the old removed
    (a crash between the two leaves it set aside, and the next run puts it back). Anything at ``path`` that is not
    a model of this tool's, or a model that holds other files too, is refused (``model_target``). A new directory
    takes the umask's mode; a replaced one keeps its own.
    """
    shown = os.fspath(path)
    real = model_target(shown)
    clean_stale(real.parent)  # every dead run's leftovers here, whatever output they were for
    tmp = real.parent / _temp_name(real.name, "tmp")
    try:
        os.mkdir(tmp, 0o777)  # the umask applies, as for mkdir(1)
    except OSError as exc:
        raise write_error(exc, shown) from None
    try:
        try:
            yield tmp
        except OSError as exc:
            if exc.filename is None and exc.errno in _DISK_FAULTS:  # a writer that did not say which file
                raise write_error(exc, shown) from None
            raise
        _sync_tree(tmp, shown)
        _swap_in(tmp, real, shown)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _sync_tree(directory: Path, shown: str) -> None:
    """The model's files on disk before its name is: a crash after the rename finds it complete."""
    try:
        for entry in os.scandir(directory):
            if entry.is_file(follow_symlinks=False):
                fd = os.open(entry.path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
    except OSError as exc:
        raise write_error(exc, shown) from None


def _swap_in(tmp: Path, real: Path, shown: str) -> None:
    """Put the complete directory ``tmp`` at ``real``; an old model there is removed once it is out of the way."""
    try:
        if not os.path.lexists(real):
            if not _renameat2(tmp, real, _RENAME_NOREPLACE):
                os.rename(tmp, real)  # refuses a non-empty directory that appeared meanwhile
            return
        if not is_model_dir(real):  # something else took the model's place during the run
            raise RecaserError(
                "was replaced during the run by something that is not a moses-recaser model; "
                "the new model was not written",
                shown,
            )
        os.chmod(tmp, stat.S_IMODE(os.stat(real).st_mode))  # a replaced model keeps its directory's mode
        if _renameat2(tmp, real, _RENAME_EXCHANGE):
            shutil.rmtree(tmp, ignore_errors=True)  # tmp now names the old model
            return
        aside = real.parent / _temp_name(real.name, "old")
        os.rename(real, aside)
        os.rename(tmp, real)
        shutil.rmtree(aside, ignore_errors=True)
    except OSError as exc:
        raise write_error(exc, shown) from None
