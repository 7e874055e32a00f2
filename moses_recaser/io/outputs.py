"""Outputs: the named output changes whole or not at all, and nothing else changes (docs/reliability.md).

- A regular file (or a new one) is written under a temporary name beside it, then renamed over it: the path holds
  the old file or the whole new one. A new file takes the umask's mode, a replaced one keeps its mode.
- A symlink is written through to its target; a FIFO, a device, stdout and ``/dev/fd/N`` are written in place.
- A directory is never an output file; a directory is replaced only when it is this tool's own (a model, a run),
  holding nothing else, and then in one rename-exchange.
- Write errors are one ``RecaserError`` naming the output; signals that would end the run are held while an
  output is put in place, so an interrupt comes before or after it, never in the middle.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import COMPRESSED
from moses_recaser.io.streams import (
    STDOUT,
    dup_descriptor,
    errors_named,
    own_descriptor,
    stream_to,
    to_stdout,
    write_error,
)

MANIFEST = "manifest.yaml"  # the mark of a model directory (io.modeldir writes it)
# errors of writing, whoever raised them: a full disk or quota, a file too large, a read-only or failing disk
DISK_FAULTS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}
# signals that end a run: the command line raises them as KeyboardInterrupt, and they are held (``_signals_held``)
# while an output is put in place
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

_WRITTEN: list[str] = []  # outputs this process put in place (an interrupt after them must not deny them)


def outputs_written() -> list[str]:
    """The outputs this process has put in place, in order."""
    return list(_WRITTEN)


NOT_A_FILE = (-1, -1)


def file_id(path: str | os.PathLike[str] | None, std: int = 0) -> tuple[int, int]:
    """The regular file a path names, as (device, inode) through symlinks (``-`` or None: the file on descriptor
    ``std``, 0 for an input, 1 for an output); NOT_A_FILE for a file not there yet, a FIFO or a device: what tells
    that an output would replace an input."""
    try:
        st = os.fstat(std) if path is None or os.fspath(path) == "-" else os.stat(path)
    except OSError:
        return NOT_A_FILE
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else NOT_A_FILE


def written_in_place(path: str | os.PathLike[str] | None) -> bool:
    """Whether an output is written where it stands, as it goes (stdout, ``/dev/fd/N``, a FIFO or a device), not
    renamed into place when whole."""
    if path is None or os.fspath(path) == "-" or own_descriptor(os.fspath(path)) is not None:
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def _writable_dir(parent: Path, shown: str) -> None:
    if not os.access(parent, os.W_OK | os.X_OK):
        try:
            read_only = bool(os.statvfs(parent).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        reason = "read-only file system" if read_only else "permission denied"
        raise RecaserError(f"cannot write: {reason} (directory {parent})", shown)


def output_target(path: str | os.PathLike[str]) -> tuple[Path, os.stat_result | None]:
    """Where writing ``path`` lands (symlinks followed) and what is there now (None: nothing), refused now, before
    any work, if it cannot be written as a file."""
    shown = os.fspath(path)
    if not shown:  # (the shell's > refuses it too)
        raise RecaserError("an empty name; give a file name", shown)
    if shown.endswith(("/", "/.", "/..")) or shown in (".", ".."):  # as the shell's > refuses 'NAME/'
        raise RecaserError("names a directory; give a file name", shown)
    real = Path(os.path.realpath(shown))
    try:
        st: os.stat_result | None = os.stat(real)
    except FileNotFoundError:
        # another process's pipe or socket (/proc/PID/fd/N) resolves to no path ("pipe:[N]"): opened as named
        st = _stat(shown)
        if st is None or stat.S_ISREG(st.st_mode):  # (a deleted file's "NAME (deleted)" is a new file's name)
            st = None
        else:
            real = Path(shown)
    except OSError as exc:
        raise RecaserError(f"cannot write: {exc.strerror}", shown) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise RecaserError("is a directory; give a file name", shown)
    if st is not None and not stat.S_ISREG(st.st_mode):  # a FIFO or device: written in place
        if not os.access(real, os.W_OK):
            raise RecaserError("cannot write: permission denied", shown)
        return real, st
    if not real.parent.is_dir():
        raise RecaserError(f"the output's directory does not exist (make it first: mkdir -p {real.parent})", shown)
    if is_model_dir(real.parent):  # a file there would fail the model's next load, or go when it is replaced
        raise RecaserError(f"is inside the model directory {real.parent}; give an output outside it", shown)
    _writable_dir(real.parent, shown)
    if st is not None and not os.access(real, os.W_OK):  # the rename would replace a file that > would refuse
        raise RecaserError("cannot write: permission denied (a read-only file)", shown)
    return real, st


def check_output(path: str | os.PathLike[str] | None) -> None:
    """Fail now, before long work, if ``path`` (an output file; ``-`` or None: stdout) cannot be written."""
    if path is None or os.fspath(path) == "-":
        if sys.stdout is None:
            raise RecaserError("standard output is closed; give an output file with -o", STDOUT)
        return
    fd = own_descriptor(os.fspath(path))
    if fd is None:
        output_target(path)
        return
    try:  # /dev/fd/N: a descriptor the shell opened for writing (N>FILE), or not
        writable = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE != os.O_RDONLY
    except OSError:
        writable = False
    if not writable:
        raise RecaserError(f"descriptor {fd} is not open for writing (as N>FILE opens it)", os.fspath(path))


def _temp_name(real: Path, kind: str = "tmp") -> Path:
    """``.NAME.XXXXXXXX.moses-recaser.KIND`` beside ``real``, NAME cut to keep it within the 255 bytes a file
    name may have: a name the shell's > takes is never refused for its temporary's sake."""
    tail = f".{os.urandom(4).hex()}.moses-recaser.{kind}"
    return real.with_name("." + os.fsdecode(os.fsencode(real.name)[: 254 - len(tail)]) + tail)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str] | None, *, binary: bool = False, compress: bool = False) -> Iterator[IO]:
    """An output that holds the new content only when the block finishes without error (module docstring).
    ``None`` or ``-`` is stdout. With ``compress`` (a data output, not a config another program reads), text
    whose file is named ``.gz`` or ``.xz`` (the file written: a symlink's target) is compressed so."""
    if path is None or os.fspath(path) == "-":
        yield from to_stdout(binary)
        return
    shown = os.fspath(path)
    own = own_descriptor(shown)
    if own is not None:
        yield from (
            to_stdout(binary) if own == 1 else stream_to(dup_descriptor(own, shown), shown, binary, in_place=True)
        )
        return
    real, st = output_target(shown)
    suffix = next((x for x in COMPRESSED if real.name.endswith(x)), None) if compress else None
    if st is not None and not stat.S_ISREG(st.st_mode):
        yield from stream_to(_open(real, os.O_WRONLY | os.O_TRUNC, shown), shown, binary, suffix=suffix, in_place=True)
        return
    tmp = _temp_name(real)
    fd = -1
    try:
        with _signals_held():  # an interrupt between the open and the try would leave the file
            # O_CREAT's mode goes through the umask, as the shell's > does; a replaced file keeps its own mode
            fd = _open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, shown)
        if st is not None:
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
        yield from stream_to(fd, shown, binary, sync=True, suffix=suffix)
        with _signals_held():
            try:
                os.replace(tmp, real)
            except OSError as exc:
                raise write_error(exc, shown) from None
            _WRITTEN.append(shown)
    except BaseException:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:  # (nothing there: the output is a new file, checked as such)
        return None


def _open(path: Path, flags: int, shown: str) -> int:
    try:
        return os.open(path, flags | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise write_error(exc, shown) from None


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """The block runs whole as far as the ending signals go: they are noted, and raised again after it (in the
    main thread by handlers of the process; elsewhere by this thread's signal mask)."""
    if threading.current_thread() is not threading.main_thread():
        held = signal.pthread_sigmask(signal.SIG_BLOCK, ENDING_SIGNALS)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return
    came: list[int] = []
    before = {sig: signal.signal(sig, lambda signum, frame: came.append(signum)) for sig in ENDING_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(came):
            signal.raise_signal(signum)


# ---- directories -------------------------------------------------------------------------------------------------


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove a directory tree this tool made (a scratch directory, a replaced model), its read-only directories
    made writable first; what cannot be removed stays. The directory that holds the tree is never touched (the
    tree gone already, or not empty at the end: TMPDIR, or the model's parent, stays as it is)."""
    top = os.fspath(path)

    def writable_then_again(func: Callable[..., Any], p: str, _: object) -> None:
        if os.fspath(p) != top:
            with contextlib.suppress(OSError):
                os.chmod(os.path.dirname(p), 0o700)
                func(p)

    shutil.rmtree(path, onerror=writable_then_again)


@contextlib.contextmanager
def made_dirs(path: str | os.PathLike[str]) -> Iterator[Path]:
    """The directory ``path``, made with its missing parents (the umask's mode); if the block fails, those this
    call made are removed again, when empty."""
    real = Path(os.path.realpath(path))
    missing = []
    p = real
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    if not p.is_dir():
        raise RecaserError("is a file, not a directory", str(p))
    made: list[Path] = []
    try:
        for d in reversed(missing):
            try:
                os.mkdir(d)
                made.append(d)
            except FileExistsError:  # (made meanwhile by another run: its own)
                pass
            except OSError as exc:
                raise write_error(exc, str(d)) from None
        yield real
    except BaseException:
        for d in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(d)
        raise


_SCRATCH: list[str] = []  # the scratch directories in use (a forked worker's too: it inherits them)


@contextlib.contextmanager
def work_dir(prefix: str, parent: str | os.PathLike[str] | None = None) -> Iterator[str]:
    """A scratch directory (in ``parent``, else $TMPDIR), removed at the end, an interrupt's end included. A full
    disk under it is said of the directory the user can give room to (``parent`` or TMPDIR), by the outermost
    scratch directory: not of one inside it, which is gone when the message is read."""
    base = os.path.abspath(parent if parent is not None else tempfile.gettempdir())
    nested = any(base == d or base.startswith(d + os.sep) for d in _SCRATCH)
    path = ""
    try:
        with _signals_held():  # an interrupt between the mkdir and keeping its name would leave the directory
            path = os.path.abspath(tempfile.mkdtemp(prefix=f".{prefix}.", suffix=".work", dir=base))
            _SCRATCH.append(path)
        yield path
    except (OSError, RecaserError) as exc:
        if nested:
            raise
        if not path and isinstance(exc, OSError):
            raise write_error(exc, base) from None
        # a writer of scratch data: said of the directory, as its file is gone when the message is read
        if isinstance(exc, OSError):
            inside = exc.filename is None or os.fspath(exc.filename).startswith(path)
            fault = exc.strerror if exc.errno in DISK_FAULTS else None
        else:  # (an output of ours in it: ``write_error``'s message)
            inside = exc.path is not None and exc.path.startswith(path + os.sep)
            fault = next((os.strerror(e) for e in DISK_FAULTS if exc.reason == f"cannot write: {os.strerror(e)}"), None)
        if inside and fault is not None:
            room = "give TMPDIR a directory with more room" if parent is None else "free some room on its disk"
            raise RecaserError(f"cannot write scratch data: {fault}; {room}", base) from None
        raise
    finally:
        if path:
            remove_tree(path)
            _SCRATCH.remove(path)
            # what was put in place in it went with it: not an output to name after an interrupt
            _WRITTEN[:] = [w for w in _WRITTEN if not os.path.realpath(w).startswith(path + os.sep)]


def is_model_dir(path: Path) -> bool:
    """A directory of this tool's: it holds a regular manifest.yaml that starts as ours does (in JSON, or in YAML as
    earlier versions wrote it)."""
    manifest = path / MANIFEST
    try:
        if not _regular(manifest):
            return False
        with open(manifest, "rb") as fh:
            return fh.read(20).startswith((b'{\n "format_version":', b"format_version:"))
    except OSError:
        return False


def foreign_entries(directory: Path) -> list[str]:
    """What a model directory holds besides its manifest and the regular files the manifest names, sorted."""
    import yaml

    try:
        with open(directory / MANIFEST, "rb") as fh:
            doc = yaml.safe_load(fh.read(1 << 24).decode("utf-8"))
        names = set(doc["files"]) if isinstance(doc, dict) and isinstance(doc.get("files"), dict) else set()
        entries = os.listdir(directory)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError, TypeError):
        return [MANIFEST]
    return sorted(e for e in entries if e != MANIFEST and (e not in names or not _regular(directory / e)))


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


@dataclass(frozen=True)
class DirKind:
    """A kind of directory this tool writes whole, and replaces only when it is one of its own: how to tell one
    (``ours``), and what in it the tool did not write (``foreign``: a user's notes, say)."""

    noun: str  # "model"
    mark: str  # what tells one: "manifest.yaml of ours"
    unnamed: str  # what the foreign entries are: "which is not a regular file its manifest names"
    ours: Callable[[Path], bool]
    foreign: Callable[[Path], list[str]]


MODEL = DirKind(
    "model", "manifest.yaml of ours", "which is not a regular file its manifest names", is_model_dir, foreign_entries
)


def model_target(path: str | os.PathLike[str], kind: DirKind = MODEL) -> Path:
    """Where a directory of ``kind`` written to ``path`` lands (a symlink followed), checked before any work:
    nothing there, or one of this tool's that holds nothing else; never another directory or a file."""
    shown, noun = os.fspath(path), kind.noun
    real = Path(os.path.realpath(shown))
    cwd = Path.cwd().resolve()
    if real == cwd or real in cwd.parents:
        raise RecaserError(f"is the current directory (or holds it); give the {noun} a directory of its own", shown)
    if os.path.lexists(real):
        if not real.is_dir():
            raise RecaserError(
                f"exists and is not a directory; give the {noun} a new path, or remove the file yourself", shown
            )
        if not kind.ours(real):
            raise RecaserError(
                f"exists and is not a moses-recaser {noun} (it has no {kind.mark}); give the {noun} a new path, "
                "or remove the directory yourself",
                shown,
            )
        _refuse_foreign(kind, real, shown)
    if not real.parent.is_dir():
        raise RecaserError(f"the {noun}'s parent directory {real.parent} does not exist", shown)
    outer = next((p for p in real.parents if is_model_dir(p)), None)  # it could never be replaced, holding this
    if outer is not None:
        raise RecaserError(f"is inside the model directory {outer}; give the {noun} a path outside it", shown)
    _writable_dir(real.parent, shown)
    return real


def _refuse_foreign(kind: DirKind, real: Path, shown: str, during: bool = False) -> None:
    others = kind.foreign(real)
    if others:
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        raise RecaserError(
            f"is a {kind.noun}, but {'during the run came to hold' if during else 'also holds'} {others[0]!r}{more}, "
            f"{kind.unnamed}; move them out of it, or give the {kind.noun} a new path"
            + (f"; the new {kind.noun} was not written" if during else ""),
            shown,
        )


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str], kind: DirKind = MODEL) -> Iterator[Path]:
    """Build a directory of ``kind`` under a temporary name beside ``path``, then put it in place: an old one
    there (checked by ``model_target``, then and at the swap) is exchanged for it in one rename and removed. A
    new directory takes the umask's mode; a replaced one keeps its own."""
    shown = os.fspath(path)
    real = model_target(shown, kind)
    tmp = _temp_name(real)
    made = False
    try:
        with _signals_held(), errors_named(shown):  # (an interrupt before ``made`` would leave the directory)
            os.mkdir(tmp, 0o777)  # the umask applies, as for mkdir(1)
            made = True
        try:
            yield tmp
        except OSError as exc:  # a writer that did not say which file, or named one of the hidden directory
            if exc.errno in DISK_FAULTS and (exc.filename is None or os.fspath(exc.filename).startswith(str(tmp))):
                raise write_error(exc, shown) from None
            raise
        except RecaserError as exc:  # a file of the hidden directory named as the user will find it
            if exc.path is not None and exc.path.startswith(str(tmp) + os.sep):
                raise RecaserError(exc.reason, os.path.join(shown, exc.path[len(str(tmp)) + 1 :]), exc.line) from None
            raise
        _sync_files(tmp, shown)
        _swap_in(tmp, real, shown, kind)
    except BaseException:
        if made:
            remove_tree(tmp)
        raise


def _sync_files(directory: Path, shown: str) -> None:
    """The files on disk before the directory's name is: a crash after the rename finds them complete."""
    with errors_named(shown):
        for entry in os.scandir(directory):
            if entry.is_file(follow_symlinks=False):
                fd = os.open(entry.path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)


# Linux's renameat2 flags: rename only if the new name is free, or swap two names in one step. Through them a
# model's path always holds a whole model, for a reader that loads it while it is replaced (EMS's recase step).
_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2


def _renameat2(src: Path, dst: Path, flags: int) -> bool:
    """Linux's renameat2; False where the system or the file system lacks it (the caller falls back)."""
    import ctypes  # (here: only a model's or a run's directory is swapped in)

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if fn(-100, os.fsencode(src), -100, os.fsencode(dst), flags) == 0:  # (-100: AT_FDCWD)
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def _swap_in(tmp: Path, real: Path, shown: str, kind: DirKind) -> None:
    """Put the complete directory ``tmp`` at ``real``; an old one there is removed once it is out of the way, and
    only if it still holds nothing but what it was made with."""
    with errors_named(shown):
        if not os.path.lexists(real):
            with _signals_held():
                if not _renameat2(tmp, real, _RENAME_NOREPLACE):
                    os.rename(tmp, real)  # (refuses a non-empty directory that appeared meanwhile)
                _WRITTEN.append(shown)
            return
        if not kind.ours(real):
            raise RecaserError(
                f"was replaced during the run by something that is not a moses-recaser {kind.noun}; the new "
                f"{kind.noun} was not written",
                shown,
            )
        _refuse_foreign(kind, real, shown, during=True)
        os.chmod(tmp, stat.S_IMODE(os.stat(real).st_mode))
        old = tmp
        with _signals_held():
            if _renameat2(tmp, real, _RENAME_EXCHANGE):  # (then tmp names the old one)
                if kind.foreign(old):  # a file put in it between the check and the swap: swapped back
                    _renameat2(tmp, real, _RENAME_EXCHANGE)
                    _refuse_foreign(kind, real, shown, during=True)
            else:  # no exchange here: a crash between the two renames leaves the old one aside
                old = _temp_name(real, "old")
                os.rename(real, old)
                os.rename(tmp, real)
            _WRITTEN.append(shown)
        remove_tree(old)


def is_within(path: str | os.PathLike[str], directory: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is ``directory`` or inside it, symbolic links resolved."""
    p, d = Path(os.path.realpath(path)), Path(os.path.realpath(directory))
    return p == d or d in p.parents


def make_dirs(path: str | os.PathLike[str]) -> Path:
    """The directory ``path``, with its missing parents, made if it is not there (a cache's, a run's); kept."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise write_error(exc, os.fspath(path)) from None
    return Path(path)


def remove_files(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Scratch files no longer needed, deleted (one already gone is fine)."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def copy_file(source: str | os.PathLike[str], copy: str | os.PathLike[str]) -> None:
    """``source`` copied to ``copy`` (a scratch file), decompressed if it is gzip or xz; a fault names the file."""
    from moses_recaser.io.lines import open_binary

    with open_binary(os.fspath(source)) as src:
        try:
            with open(copy, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        except OSError as exc:
            raise write_error(exc, os.fspath(copy)) from None


def entries(directory: str | os.PathLike[str]) -> dict[str, str | None]:
    """The names in ``directory`` and what each is (``lines.kind_of``, links not followed); OSError if it cannot
    be listed."""
    from moses_recaser.io.lines import kind_of

    return {e.name: kind_of(e.path, follow=False) for e in os.scandir(directory)}
