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
between the two renames of a replacement left aside (``.old``). A run holds a lock (flock) on each of its temporary
files and directories while it lives: a run of another PID namespace (a container with the host's name, a cloned
machine on NFS), whose process id means nothing here, is not taken for dead.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import io
import logging
import lzma
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import sys
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from moses_recaser.errors import RecaserError
from moses_recaser.textio import COMPRESSED

log = logging.getLogger(__name__)

TAG = "moses-recaser"
STDOUT = "<stdout>"
MANIFEST = "manifest.yaml"  # modeldir.MANIFEST; modeldir imports this module, not the other way round
HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:40] or "host"
# what a temporary name of ours looks like: the target's name, then who made it
_OURS = re.compile(rf"^\.(?P<name>.+)\.{TAG}-(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-[0-9a-f]+\.(?P<kind>tmp|old|work)$")
# errors of writing, whoever raised them: a full disk or quota, a file too large, a read-only or failing disk
DISK_FAULTS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


# the outputs this process has put in place (what an interrupt that comes after them must not deny)
_WRITTEN: list[str] = []


def written() -> list[str]:
    """The outputs this process has put in place, in order."""
    return list(_WRITTEN)


def write_error(exc: OSError, path: str) -> RecaserError:
    """An OSError of writing ``path``, as the one line users see."""
    return RecaserError(f"cannot write: {exc.strerror or exc}", path)


def _temp_name(name: str, kind: str) -> str:
    return f".{name}.{TAG}-{HOST}-{os.getpid()}-{secrets.token_hex(4)}.{kind}"


# what a temporary name adds to the output's own (``_temp_name``), at most: the longest process id and kind
_TEMP_EXTRA = len(_temp_name("", "work")) - len(str(os.getpid())) + len(str(2**22))


def _check_name_length(real: Path, shown: str) -> None:
    """An output name too long for its temporary name beside it (the file system's limit, NAME_MAX) is refused
    now, not after the work."""
    try:
        limit = os.pathconf(real.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    if len(os.fsencode(real.name)) + _TEMP_EXTRA > limit:
        raise RecaserError(
            f"the name is too long: it is written under a temporary name beside it, which may have at most {limit} "
            f"bytes; give a name of at most {limit - _TEMP_EXTRA} bytes",
            shown,
        )


def _hold(fd: int) -> None:
    """Lock an open temporary file or directory of this run (``_held`` tells others it is in use)."""
    with contextlib.suppress(OSError):  # a file system without locks: the process id alone tells
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _held(path: str) -> bool:
    """A run, in any PID namespace of this kernel (or an NFS client), holds ``path`` locked (``_hold``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except PermissionError:  # another user's (mode 0600): its run may live in another namespace
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


@contextlib.contextmanager
def _holding(path: Path) -> Iterator[None]:
    """Hold ``path`` (a temporary directory of this run) locked for the block."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        yield
        return
    try:
        _hold(fd)
        yield
    finally:
        os.close(fd)


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove a directory tree of this tool's (a replaced model, a scratch directory), its read-only directories
    (a model kept at mode 555) made writable first; errors are ignored (the next run removes what is left)."""
    top = os.fspath(path)
    if os.path.islink(top) or not os.path.isdir(top):
        with contextlib.suppress(OSError):
            os.unlink(top)
        return
    shutil.rmtree(top, ignore_errors=True)
    if not os.path.lexists(top):
        return
    _owner_writable(top)  # what a read-only directory kept: made writable, then removed again
    for root, dirs, _ in os.walk(top):
        for d in dirs:  # (before the walk lists them; a link to a directory is removed, never followed)
            if not os.path.islink(os.path.join(root, d)):
                _owner_writable(os.path.join(root, d))
    shutil.rmtree(top, ignore_errors=True)


def _owner_writable(directory: str) -> None:
    with contextlib.suppress(OSError):
        mode = stat.S_IMODE(os.lstat(directory).st_mode)
        if mode & stat.S_IRWXU != stat.S_IRWXU:
            os.chmod(directory, mode | stat.S_IRWXU)


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
        if (
            m
            and m["host"] == HOST
            and (name is None or m["name"] == name)
            and not _alive(int(m["pid"]))
            and not _held(entry.path)
        ):
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
                remove_tree(entry.path)
            else:
                os.unlink(entry.path)
            log.debug("removed %s, left by a killed run", entry.path)


@contextlib.contextmanager
def made_dirs(path: str | os.PathLike[str]) -> Iterator[Path]:
    """The directory ``path``, made with its missing parents (the umask's mode); if the block fails, those this
    call made are removed again, when empty: a failed run leaves no trace of its own. (The path is resolved first:
    ``new/../old`` names ``old``, which is not made, and so never removed.)"""
    real = Path(os.path.realpath(path))
    missing: list[Path] = []
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
                if not d.is_dir():
                    raise RecaserError("is a file, not a directory", str(d)) from None
            except OSError as exc:
                raise write_error(exc, str(d)) from None
        yield real
    except BaseException:
        for d in reversed(made):  # deepest first; rmdir removes only an empty directory
            with contextlib.suppress(OSError):
                os.rmdir(d)
        raise


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
        with _holding(path):
            yield str(path)
    except OSError as exc:
        if exc.errno in DISK_FAULTS and exc.filename is None:  # a writer of scratch data that did not say which
            raise RecaserError(f"cannot write scratch data: {exc.strerror}", str(base)) from None
        raise
    finally:
        remove_tree(path)
        # what was put in place in it went with it: not an output to name after an interrupt
        _WRITTEN[:] = [w for w in _WRITTEN if not w.startswith(str(path) + os.sep)]


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


class _Compressing(io.RawIOBase):
    """Bytes written to ``out`` compressed as gzip (``.gz``: no name, no time, so the same text gives the same
    bytes) or xz (``.xz``). The stream's end is written by ``finish`` only: an output cut short by an error ends
    without it, which every reader of these formats reports (a FIFO's reader too), where a closed stream would
    pass for the whole output."""

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


def _wrap(raw: _Guarded, binary: bool, suffix: str | None = None) -> tuple[IO, _Compressing | None, IO]:
    """What is written to (text, or with ``binary`` bytes), the compressing stream under it (text with a
    ``suffix`` of ``textio.COMPRESSED``; else None) and the buffered file under that."""
    buffered = io.BufferedWriter(raw, buffer_size=1 << 16)
    packer = _Compressing(buffered, suffix) if suffix in COMPRESSED and not binary else None
    inner = buffered if packer is None else io.BufferedWriter(packer, buffer_size=1 << 16)
    return (inner if binary else io.TextIOWrapper(inner, encoding="utf-8", newline="\n")), packer, buffered


def _finish(fh: IO, shown: str, *, sync: bool) -> None:
    with _writing(shown):
        fh.flush()
        if sync:
            os.fsync(fh.fileno())


@contextlib.contextmanager
def _writing(shown: str) -> Iterator[None]:
    """A write error in the block is a ``RecaserError`` naming the file; a broken pipe stays one (the reader went
    away, which is not an error of ours)."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise write_error(exc, shown) from None


def output_target(path: str | os.PathLike[str]) -> tuple[Path, os.stat_result | None]:
    """Where writing ``path`` lands: symlinks followed to their target (which may not exist yet), and what is
    there now (None: nothing). Refuses what is not writable as a file, before any work."""
    shown = os.fspath(path)
    _refuse_planted_link(shown)
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
        _check_name_length(real, shown)
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


def _refuse_planted_link(shown: str) -> None:
    """A symlink in a sticky, world-writable directory (/tmp) made by someone other than this user or the
    directory's owner is not followed, anywhere along the path, as the kernel's protected_symlinks would not follow
    it for ``>``: this tool resolves its paths itself, which that guard never sees."""
    todo = list(reversed(Path(shown).parts))
    at = Path("/") if os.path.isabs(shown) else Path.cwd()
    if todo and os.path.isabs(shown):
        todo.pop()
    hops = 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            at = at.parent
            continue
        step = at / part
        try:
            link = os.lstat(step)
        except OSError:  # not there (yet): walked past by name, as realpath walks it ('nosuch/..')
            at = step
            continue
        if not stat.S_ISLNK(link.st_mode):
            at = step
            continue
        try:
            where, target = os.stat(at), os.readlink(step)
        except OSError:
            return
        if (
            where.st_mode & stat.S_ISVTX
            and where.st_mode & stat.S_IWOTH
            and link.st_uid not in (os.geteuid(), where.st_uid)
        ):
            raise RecaserError(
                f"goes through {step}, a symlink another user made in a sticky, world-writable directory (such as "
                "/tmp); not followed (as the kernel's protected_symlinks does not): give another path",
                shown,
            )
        hops += 1
        if hops > 40:
            raise RecaserError("cannot write: too many levels of symbolic links", shown)
        todo.extend(reversed(Path(target).parts))
        if os.path.isabs(target):
            at = Path("/")
            todo.pop()


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
    if _own_descriptor(os.fspath(path)) is None:  # (/dev/stdout is written where it stands, wherever that is)
        output_target(path)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str] | None, *, binary: bool = False, compress: bool = False) -> Iterator[IO]:
    """Open an output that holds the new content only when the block finishes without error.

    A regular file (or a new one) is written under a temporary name beside it and renamed over it at the end; on
    any exception, KeyboardInterrupt included, the temporary file is removed and the old file is untouched. A
    symlink is written through; a FIFO or device in place. ``None`` or ``-`` is stdout. Write errors are
    ``RecaserError``s naming the file. With ``compress`` (a data output, which the readers here decompress,
    knowing it by its bytes; not a config file that another program reads), text whose file is named ``.gz`` or
    ``.xz`` (the file written: a symlink's target) is compressed so.
    """
    if path is None or os.fspath(path) == "-":
        yield from _to_stdout(binary)
        return
    shown = os.fspath(path)
    own = _own_descriptor(shown)
    if own is not None:
        yield from _to_descriptor(own, shown, binary)
        return
    real, st = output_target(shown)
    suffix = next((x for x in COMPRESSED if real.name.endswith(x)), None) if compress else None
    if st is not None and not stat.S_ISREG(st.st_mode):
        yield from _in_place(real, shown, binary, suffix)
        return
    clean_stale(real.parent)  # every dead run's leftovers here, whatever output they were for
    tmp = real.parent / _temp_name(real.name, "tmp")
    try:
        # O_CREAT's mode goes through the umask, as open() does; a replaced file keeps its own mode
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        raise write_error(exc, shown) from None
    lock = os.dup(fd)  # the lock lasts until the rename, after the file is closed
    try:
        _hold(lock)
        try:
            # a file another user owns, or a bind-mounted one (no rename can replace it), is written in place
            in_place = st is not None and (not _same_owner(fd, st, shown) or is_mount_point(real))
        except BaseException:
            os.close(fd)  # (``_through`` closes it from here on)
            raise
        yield from _through(fd, shown, binary, sync=True, suffix=suffix)
        if in_place:
            _copy_into(tmp, real, shown)
            os.unlink(tmp)
        else:
            with _signals_held():
                try:
                    os.replace(tmp, real)
                except OSError as exc:
                    raise write_error(exc, shown) from None
                _WRITTEN.append(shown)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    finally:
        os.close(lock)


def _same_owner(fd: int, st: os.stat_result, shown: str) -> bool:
    """Give the new file (``fd``) the mode, owner and group of the file it replaces (``st``); False where it cannot
    have them (another user's file, a group this user is not in): that file is then written in place, as the
    shell's ``>`` writes it, once the new content is complete (a rename would hand it to this user, and in a
    sticky directory such as /tmp would be refused)."""
    try:
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
        if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
            os.fchown(fd, st.st_uid, st.st_gid)
            os.fchmod(fd, stat.S_IMODE(st.st_mode))  # (chown clears set-id bits)
    except PermissionError:
        return False
    except OSError as exc:
        raise write_error(exc, shown) from None
    return True


# held off while an output is put in place: whatever would end the run between its first change and its last
_HELD = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE}


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """The block runs whole as far as those signals go: they are noted, and raised again after it (in the main
    thread by handlers of the whole process, which no other thread of it, a BLAS pool's, can take; elsewhere by
    this thread's signal mask)."""
    if threading.current_thread() is not threading.main_thread():
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        return
    came: list[int] = []
    before = {sig: signal.signal(sig, lambda signum, frame: came.append(signum)) for sig in _HELD}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(came):
            signal.raise_signal(signum)


def _copy_into(tmp: Path, real: Path, shown: str) -> None:
    """The complete file ``tmp`` copied over ``real`` in place (its inode, owner and mode kept), only when the file
    system has room for it: first the new content gets a lasting name beside it (``FILE.new-XXXX``, which no run
    removes), so that a run killed midway (SIGKILL) leaves it whole; signals that would end the run are held off
    during the copy; a copy that fails midway says where the new content is. The lasting name goes when done."""
    try:
        fd = os.open(real, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))  # (a write-only file is writable so)
    except OSError as exc:
        raise write_error(exc, shown) from None
    try:
        st, vfs = os.fstat(fd), os.fstatvfs(fd)
        freed = min(st.st_size, st.st_blocks * 512)  # (what truncating gives back: a sparse file's holes take none)
        if os.path.getsize(tmp) > freed + vfs.f_bavail * vfs.f_frsize:
            raise RecaserError("cannot write: no room on its file system to write it in place", shown)
        with _signals_held():
            kept = _lasting_link(tmp, real, shown)
            try:
                with open(tmp, "rb") as src:
                    os.ftruncate(fd, 0)
                    while block := src.read(1 << 20):
                        view = memoryview(block)
                        while view:
                            view = view[os.write(fd, view) :]
                os.fsync(fd)
            except OSError as exc:
                raise RecaserError(
                    f"cannot write: {exc.strerror or exc}; it is cut short, and its whole new content is in {kept}",
                    shown,
                ) from None
            _WRITTEN.append(shown)
            with contextlib.suppress(OSError):
                os.unlink(kept)
    except RecaserError:
        raise
    except OSError as exc:
        raise write_error(exc, shown) from None
    finally:
        os.close(fd)


def _lasting_link(tmp: Path, real: Path, shown: str) -> Path:
    """A second name for ``tmp`` beside ``real`` that is nobody's yet (a link never replaces a name) and that no
    run takes for a leftover: ``FILE.new-XXXX``."""
    for _ in range(16):
        kept = real.with_name(f"{real.name}.new-{secrets.token_hex(4)}")
        try:
            os.link(tmp, kept)
            return kept
        except FileExistsError:
            continue
        except OSError as exc:
            raise RecaserError(
                f"cannot write it in place: no copy of the new content can be kept beside it first ({exc.strerror})",
                shown,
            ) from None
    raise RecaserError("cannot write it in place: no free name beside it to keep the new content under", shown)


_DESCRIPTOR = re.compile(r"/proc/(?:self|thread-self|(?P<pid>\d+))(?:/task/\d+)?/fd/(?P<fd>\d+)")


def _own_descriptor(shown: str) -> int | None:
    """The descriptor of this process that ``shown`` names (/dev/stdout, /dev/fd/N, /proc/self/fd/N, or a link to
    one), else None. Such a path is the open file itself (``>> log`` appends to it): writing it means writing
    that descriptor, as bash does, never replacing the file it was opened on."""
    p = os.path.abspath(shown)
    for _ in range(40):
        where = os.path.realpath(os.path.dirname(p))
        m = _DESCRIPTOR.fullmatch(os.path.join(where, os.path.basename(p)))
        if m and (m["pid"] is None or int(m["pid"]) == os.getpid()):
            return int(m["fd"])
        try:
            if not os.path.islink(p):
                return None
            p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
        except OSError:
            return None
    return None


def _to_descriptor(fd: int, shown: str, binary: bool) -> Iterator[IO]:
    """One of this process's open files (``_own_descriptor``), written where it stands, left open."""
    if fd == 1:
        yield from _to_stdout(binary)
        return
    try:
        dup = os.dup(fd)
    except OSError as exc:
        raise write_error(exc, shown) from None
    yield from _through(dup, shown, binary)


def _through(fd: int, shown: str, binary: bool, *, sync: bool = False, suffix: str | None = None) -> Iterator[IO]:
    """A descriptor opened for this output, written (and with ``sync`` on disk), then closed; text compressed by
    ``suffix`` (``_wrap``), its stream ended only when the block finishes without error."""
    fh, packer, buffered = _wrap(_Guarded(fd, shown), binary, suffix)
    try:
        yield fh
        _finish(fh, shown, sync=False)
        if packer is not None:
            with _writing(shown):
                packer.finish()
        _finish(buffered, shown, sync=sync)
    finally:
        for layer in (fh, buffered):
            with contextlib.suppress(OSError, RecaserError, ValueError):
                layer.close()


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
    fh = _wrap(_Guarded(fd, STDOUT, closefd=False), binary)[0]
    try:
        yield fh
        _finish(fh, STDOUT, sync=False)
    finally:
        if isinstance(fh, io.TextIOWrapper):  # stdout stays open for what follows
            with contextlib.suppress(OSError, RecaserError, ValueError):
                fh.detach()


def _in_place(real: Path, shown: str, binary: bool, suffix: str | None) -> Iterator[IO]:
    """A FIFO or device, opened as ``>`` opens it (a FIFO waits for its reader)."""
    try:
        fd = os.open(real, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise write_error(exc, shown) from None
    yield from _through(fd, shown, binary, suffix=suffix)


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
        if not _regular(manifest):
            return False
        with open(manifest, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return False
    return head.startswith(b"format_version:")


def foreign_entries(directory: Path) -> list[str]:
    """What a model directory holds besides its manifest and the regular files the manifest names (a user's notes,
    say; a named entry that is a directory, link or FIFO is no file the tool wrote), sorted; every entry if the
    manifest cannot be read as a mapping with ``files``."""
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
    unnamed: str  # what the foreign entries are: "which its manifest does not name as a file"
    ours: Callable[[Path], bool]
    foreign: Callable[[Path], list[str]]


MODEL = DirKind(
    "model", "manifest.yaml of ours", "which its manifest does not name as a file", is_model_dir, foreign_entries
)


def model_target(path: str | os.PathLike[str], kind: DirKind = MODEL) -> Path:
    """Where a directory of ``kind`` written to ``path`` lands (a symlink followed), checked before any work:
    nothing there, or one of this tool's that holds nothing else (replaced when the new one is complete); never
    another directory or a file."""
    shown = os.fspath(path)
    _refuse_planted_link(shown)
    real = Path(os.path.realpath(shown))
    noun = kind.noun
    if real == real.parent:
        raise RecaserError(f"cannot write a {noun} to the root directory", shown)
    cwd = Path.cwd().resolve()
    if real == cwd or real in cwd.parents:
        raise RecaserError(f"is the current directory (or holds it); give the {noun} a directory of its own", shown)
    parent = real.parent
    if os.path.lexists(real):
        if not real.is_dir():
            raise RecaserError(
                f"exists and is not a directory; give the {noun} a new path, or remove the file yourself", shown
            )
        if not kind.ours(real):
            raise RecaserError(
                f"exists and is not a moses-recaser {noun} (it has no {kind.mark}); give "
                f"the {noun} a new path, or remove the directory yourself",
                shown,
            )
        _refuse_foreign(kind, real, shown)
        if is_mount_point(real):
            raise RecaserError(
                f"is a mount point, which a rename cannot replace; give the {noun} a path inside it", shown
            )
        if _someone_elses(real):
            raise RecaserError(
                f"is another user's {noun}, which only they (or root) may replace; give the {noun} a new path", shown
            )
    if not parent.is_dir():
        raise RecaserError(f"the {noun}'s parent directory {parent} does not exist", shown)
    # the outer model could then never be replaced, holding a directory not its own
    outer = next((p for p in (parent, *parent.parents) if is_model_dir(p)), None)
    if outer is not None:
        raise RecaserError(f"is inside the model directory {outer}; give the {noun} a path outside it", shown)
    _check_name_length(real, shown)
    if not os.access(parent, os.W_OK | os.X_OK):
        reason = "read-only file system" if _read_only(parent) else "permission denied"
        raise RecaserError(f"cannot write: {reason} (directory {parent})", shown)
    return real


def _refuse_foreign(kind: DirKind, real: Path, shown: str, during: bool = False) -> None:
    others = kind.foreign(real)
    if others:
        raise _foreign_error(kind, others, shown, during)


def _foreign_error(kind: DirKind, others: list[str], shown: str, during: bool) -> RecaserError:
    more = f" and {len(others) - 1} more" if len(others) > 1 else ""
    return RecaserError(
        f"is a {kind.noun}, but {'during the run came to hold' if during else 'also holds'} {others[0]!r}{more}, "
        f"{kind.unnamed}; move them out of it, or give the {kind.noun} a new path"
        + (f"; the new {kind.noun} was not written" if during else ""),
        shown,
    )


def is_mount_point(path: Path) -> bool:
    """``path`` is a mount point, a bind mount of the same file system included (which ``os.path.ismount`` misses):
    a rename can neither replace nor remove it."""
    if os.path.ismount(path):
        return True
    try:
        with open("/proc/self/mountinfo", "rb") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return False
    target = os.fsencode(path)
    for line in lines:
        fields = line.split(b" ")
        if len(fields) > 4 and _unescape(fields[4]) == target:
            return True
    return False


def _unescape(field: bytes) -> bytes:
    """A path of /proc/self/mountinfo: space, tab, newline and backslash are written as octal escapes there."""
    return re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), field)


def _someone_elses(real: Path) -> bool:
    """``real`` belongs to another user, and this one is not root: replacing it would hand it over (and where they
    may not remove its files, leave the old one hidden beside it); in a sticky directory the rename would fail."""
    try:
        me = os.geteuid()
        return me != 0 and os.lstat(real).st_uid != me
    except OSError:
        return False


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str], kind: DirKind = MODEL) -> Iterator[Path]:
    """Build a directory of ``kind`` (a model) under a temporary name beside ``path``, then move it into place.

    An existing one at ``path`` is swapped for the new one in a single rename (Linux's RENAME_EXCHANGE) and only
    then removed; where the swap is not available, it is set aside, the new one renamed in, and the old removed
    (a crash between the two leaves it set aside, and the next run puts it back). Anything at ``path`` that is not
    one of this tool's, or one that holds other files too (then or at the swap), is refused (``model_target``). A
    new directory takes the umask's mode; a replaced one keeps its own, and (for root) its owner.
    """
    shown = os.fspath(path)
    real = model_target(shown, kind)
    clean_stale(real.parent)  # every dead run's leftovers here, whatever output they were for
    tmp = real.parent / _temp_name(real.name, "tmp")
    try:
        os.mkdir(tmp, 0o777)  # the umask applies, as for mkdir(1)
    except OSError as exc:
        raise write_error(exc, shown) from None
    try:
        with _holding(tmp):
            try:
                yield tmp
            except OSError as exc:
                # a writer that did not say which file, or named one of the hidden directory: the output is
                if exc.errno in DISK_FAULTS and (exc.filename is None or str(exc.filename).startswith(str(tmp))):
                    raise write_error(exc, shown) from None
                raise
            except RecaserError as exc:  # a file of the hidden directory named as the user will find it
                if exc.path is not None and exc.path.startswith(str(tmp) + os.sep):
                    inside = exc.path[len(str(tmp)) + 1 :]
                    raise RecaserError(exc.reason, os.path.join(shown, inside), exc.line) from None
                raise
            _sync_tree(tmp, shown)
            _swap_in(tmp, real, shown, kind)
    except BaseException:
        remove_tree(tmp)
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


def _swap_in(tmp: Path, real: Path, shown: str, kind: DirKind) -> None:
    """Put the complete directory ``tmp`` at ``real``; an old one there is removed once it is out of the way, and
    only if it still holds nothing but what it was made with (a file added during the run is kept, the new
    directory not written)."""
    try:
        if not os.path.lexists(real):
            with _signals_held():
                if not _renameat2(tmp, real, _RENAME_NOREPLACE):
                    os.rename(tmp, real)  # refuses a non-empty directory that appeared meanwhile
                _WRITTEN.append(shown)
            return
        if not kind.ours(real):  # something else took its place during the run
            raise RecaserError(
                f"was replaced during the run by something that is not a moses-recaser {kind.noun}; the new "
                f"{kind.noun} was not written",
                shown,
            )
        _refuse_foreign(kind, real, shown, during=True)
        _like(tmp, os.stat(real))
        with _signals_held():
            swapped = _renameat2(tmp, real, _RENAME_EXCHANGE)  # then tmp names the old one
            others = kind.foreign(tmp) if swapped else []
            if others:  # (added between the check and the swap: swapped back)
                _renameat2(tmp, real, _RENAME_EXCHANGE)
                raise _foreign_error(kind, others, shown, during=True)
            if swapped:
                _WRITTEN.append(shown)
        if swapped:
            remove_tree(tmp)
            return
        aside = real.parent / _temp_name(real.name, "old")
        with _holding(real):
            with _signals_held():
                os.rename(real, aside)
                os.rename(tmp, real)
                _WRITTEN.append(shown)
            remove_tree(aside)
    except OSError as exc:
        raise write_error(exc, shown) from None


def _like(tmp: Path, old: os.stat_result) -> None:
    """The new directory given the old one's mode, and for root its owner and group, down its tree (root's
    replacement of a user's model stays the user's)."""
    if os.geteuid() == 0 and (old.st_uid, old.st_gid) != (0, 0):
        for root, dirs, files in os.walk(tmp):
            for name in dirs + files:
                os.chown(os.path.join(root, name), old.st_uid, old.st_gid, follow_symlinks=False)
        os.chown(tmp, old.st_uid, old.st_gid)
    os.chmod(tmp, stat.S_IMODE(old.st_mode))
