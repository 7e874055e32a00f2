"""The model directory: a manifest, numpy arrays, vocabularies, the LM, and checksums.

Layout::

    MODEL/manifest.yaml   format_version, settings, signature, weights, and the sha256 and size of every other file,
                          as JSON (which YAML reads too; a manifest in YAML is read as well)
    MODEL/tables.npz      translation, tag and form tables, their vocabularies as arrays (``vocab.Vocab``:
                          UTF-8 bytes, offsets, packed hashes), loaded with allow_pickle=False
    MODEL/lm.arpa         the cased LM (or lm.bin: a KenLM model given with --lm or made by lmplz)
    MODEL/lm.npz          the LM's query arrays and their packed keys (stats.arpa_arrays.ArrayLM)
    MODEL/candidates.npz  GEN and candidate facts of every training type, and the training word types'
                          facts (model/candidates.py, extractor.FeatureExtractor.save_registry)
    MODEL/aligner.priors  eflomal's priors, which earlier versions stored (listed, never read)

Only the regular files the manifest names are read, each checked against its size and then its sha256 before it
is parsed (``sizes`` was added within version 6: a manifest without it is checked by sha256 alone).

Format versions: 1, the first; 2, candidates.npz with GEN results as pool segments and the word types,
lm.npz with its hash index; 3, every optional array of version 2 always stored; 4 and 5, facts of the
decoder-output fixes (input modes and their weights, escapes read past by the casing facts); 6, keys packed
(``keyset.KeySet``) in place of int64 keys with a hash table, and the tables' pair counts in int32. This
version reads version 6 only: an older model is refused with a message to retrain it.

The directory is built under a temporary name and moved into place (``outputs.atomic_directory``: an existing
model is swapped in one rename-exchange), so a crash or Ctrl-C never leaves a half-written model.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import mmap
import os
import re
import shutil
import stat
import struct
import weakref
import zipfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from moses_recaser.io.diskarrays import Stored, blocks_of
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import sha256
from moses_recaser.io.outputs import DISK_FAULTS, atomic_directory
from moses_recaser.io.streams import write_error

FORMAT_VERSION = 6
MANIFEST = "manifest.yaml"
PRIORS = "aligner.priors"  # eflomal's priors, stored by earlier versions for recase --align: not read


def text_array(words: Iterable[str]) -> np.ndarray:
    """Strings as one newline-joined array (npz files take no pickled lists)."""
    return np.array("\n".join(words))


def words_of(a: np.ndarray) -> list[str]:
    """The strings of ``text_array``."""
    s = str(a)
    return s.split("\n") if s else []


# the member of a ``save_npz(..., digest=True)`` file that holds the sha256 of the others (``MappedArrays.digest``)
DIGEST = "digest"


def save_npz(
    path: str | os.PathLike[str] | IO[bytes], arrays: Mapping[str, np.ndarray | Stored], *, digest: bool = False
) -> None:
    """np.savez with fixed zip timestamps, so equal arrays give equal bytes (and equal checksums). A ``Stored``
    array (one dimension) is copied from its file a block at a time: nothing is held in memory whole. With
    ``digest``, a last member DIGEST holds the sha256 of the others (names and bytes): a file that travels alone
    (a shard count file) is checked by it where it is read."""
    h = hashlib.sha256() if digest else None
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            value = arrays[name]
            array = np.zeros(0, dtype=value.dtype) if isinstance(value, Stored) else np.asarray(value)
            shape = (value.count,) if isinstance(value, Stored) else array.shape
            head = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                head, {**np.lib.format.header_data_from_array_1_0(array), "shape": shape}
            )
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.file_size = head.tell() + int(np.prod(shape, dtype=np.int64)) * array.dtype.itemsize
            if h is not None:
                h.update(name.encode("utf-8") + b"\0" + head.getvalue())
            with zf.open(info, "w") as out:  # what ZipFile.writestr does, its size known before
                out.write(head.getvalue())
                chunks = blocks_of(value, max((16 << 20) // max(array.dtype.itemsize, 1), 1))
                for chunk in chunks if isinstance(value, Stored) else [array]:
                    data = np.ascontiguousarray(chunk).data
                    out.write(data)
                    if h is not None:
                        h.update(data)
        if h is not None:
            held = io.BytesIO()
            np.lib.format.write_array(held, np.array(h.hexdigest()))
            zf.writestr(zipfile.ZipInfo(f"{DIGEST}.npy", date_time=(1980, 1, 1, 0, 0, 0)), held.getvalue())


def open_regular(path: str | os.PathLike[str], *, dir_fd: int | None = None, user_file: bool = False) -> int:
    """A read-only descriptor of ``path`` if it is a regular file. A symlink, FIFO, device, socket or directory is
    refused without being read or waited on (a FIFO would block, /dev/zero never ends). A ``user_file`` (a file
    the user names, such as a shard count file, not a file inside a model directory) is reached through symlinks
    as every input is."""
    shown = os.fspath(path)
    nofollow = 0 if user_file else getattr(os, "O_NOFOLLOW", 0)
    flags = os.O_RDONLY | os.O_NONBLOCK | nofollow | getattr(os, "O_CLOEXEC", 0)
    where = "it must be a regular file" if user_file else "a model directory holds regular files only"
    try:
        fd = os.open(shown, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise RecaserError("no such file" if user_file else "model file is missing", shown) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not user_file:
            raise RecaserError(f"is a symlink; {where}", shown) from None
        raise RecaserError(f"cannot open: {exc.strerror}", shown) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RecaserError(f"is not a regular file; {where}", shown)
    return fd


def plain_name(name: object, where: str) -> str:
    """A model file's name from a manifest: one plain name inside the directory, never a path out of it."""
    if not isinstance(name, str) or not name or name.startswith(".") or "/" in name or "\\" in name or "\0" in name:
        raise RecaserError(f"manifest entry {name!r} is not a plain file name inside the model directory", where)
    return name


# the map of every archive mapped (alive while an array of it is), for ``release_mapped``
_MAPS: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()


def release_mapped() -> None:
    """Drop the pages of every mapped archive from this process's resident memory (they are read again, from the
    page cache, when next touched): lookups in a large model's key sets touch nearly every page of them, and
    training makes many (dev lattices, the registry of training types) where a few pages at a time would do."""
    for mapped in list(_MAPS):
        if not mapped.closed:
            mapped.madvise(mmap.MADV_DONTNEED)


# mapped archives smaller than this in all keep their pages between rounds of lookups (``trim_mapped``): they
# cost no more than their files, and dropping and reading them again cost a small model's recasing 6%
MAPPED_KEEP = 64 << 20


def trim_mapped() -> None:
    """``release_mapped`` where the mapped archives are large enough for their pages to matter (MAPPED_KEEP)."""
    if sum(len(m) for m in list(_MAPS) if not m.closed) > MAPPED_KEEP:
        release_mapped()


# the .npy header ``save_npz`` writes (format 1.0, a plain dtype), read without numpy's parser of every header,
# which evaluates it as a Python literal: that was a fifth of a small model's load (its 192 arrays)
_PLAIN_HEADER = re.compile(
    rb"\x93NUMPY\x01\x00..\{'descr': '([<>|=]?[a-zA-Z][0-9]*)', 'fortran_order': (False|True), "
    rb"'shape': \((|[0-9]+,|[0-9]+(?:, [0-9]+)+)\), \} *\n",
    re.DOTALL,
)


class MappedArrays(Mapping[str, np.ndarray]):
    """The arrays of a ``save_npz`` file, mapped read-only from it (members are stored, not compressed): opening
    costs next to nothing, and a page of an array is read when something reads it, so recasing holds in memory
    the parts of a large model that its input touches. A file that is not such an archive, or an array whose
    header does not fit the file, is a RecaserError naming the file."""

    def __init__(self, path: str | os.PathLike[str], *, user_file: bool = False) -> None:
        self.path = os.fspath(path)
        fd = open_regular(self.path, user_file=user_file)
        try:
            size = os.fstat(fd).st_size
            self._map = mmap.mmap(fd, 0, access=mmap.ACCESS_READ) if size else b""
        finally:
            os.close(fd)
        self._where: dict[str, tuple[int, int]] = {}
        try:
            # the archive's directory read from the map itself: the path is not opened a second time
            with zipfile.ZipFile(self._map if size else io.BytesIO(b"")) as zf:  # type: ignore[arg-type]
                for info in zf.infolist():
                    if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
                        raise RecaserError(f"member {info.filename} is not a stored .npy array", self.path)
                    at = info.header_offset
                    name_len, extra_len = struct.unpack("<HH", self._map[at + 26 : at + 30])
                    start = at + 30 + name_len + extra_len
                    if start + info.file_size > size:
                        raise RecaserError(f"member {info.filename} runs past the end of the file", self.path)
                    self._where[info.filename[:-4]] = (start, info.file_size)
        except (zipfile.BadZipFile, struct.error, ValueError, EOFError) as exc:
            raise RecaserError(f"not a model array file ({exc})", self.path) from None
        if isinstance(self._map, mmap.mmap):
            _MAPS.add(self._map)

    def _header(self, name: str) -> tuple[int, tuple[int, ...], bool, np.dtype]:
        """Where the data of array ``name`` starts in the file, its shape, order and dtype (checked to fit)."""
        if name not in self._where:
            raise RecaserError(f"array {name!r} is missing", self.path)
        start, size = self._where[name]
        try:
            block = self._map[start : start + min(size, 1 << 16)]
            plain = _PLAIN_HEADER.match(block)
            if plain is not None and plain.end() == 10 + int.from_bytes(block[8:10], "little"):
                shape = tuple(int(n) for n in plain[3].split(b",") if n)
                fortran, dtype, end = plain[2] == b"True", np.dtype(plain[1].decode()), plain.end()
            else:
                head = io.BytesIO(block)
                version = np.lib.format.read_magic(head)
                read_header = (
                    np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                )
                (shape, fortran, dtype), end = read_header(head), head.tell()
            if dtype.hasobject:
                raise ValueError("object arrays are not read")
            count = math.prod(shape)  # (an exact int: numpy's prod of a tuple costs as much as the header)
            if end + count * dtype.itemsize > size:
                raise ValueError(f"shape {shape} of {dtype} is larger than the stored data")
        except (ValueError, TypeError, OverflowError) as exc:
            raise RecaserError(f"array {name!r} is damaged ({exc})", self.path) from None
        return start + end, shape, fortran, dtype

    def __getitem__(self, name: str) -> np.ndarray:
        offset, shape, fortran, dtype = self._header(name)
        count = math.prod(shape)
        try:
            data = np.frombuffer(self._map, dtype=dtype, count=count, offset=offset) if count else np.zeros(0, dtype)
            return data.reshape(shape, order="F" if fortran else "C")
        except (ValueError, TypeError, OverflowError) as exc:
            raise RecaserError(f"array {name!r} is damaged ({exc})", self.path) from None

    def stored(self, name: str) -> Stored:
        """A one-dimensional array of the file as a ``Stored`` column: read a block at a time, not mapped."""
        offset, shape, _, dtype = self._header(name)
        if len(shape) != 1:
            raise RecaserError(f"array {name!r} is damaged (shape {shape}, not one dimension)", self.path)
        return Stored(self.path, dtype, int(shape[0]), offset)

    def digest(self) -> str:
        """The sha256 ``save_npz(..., digest=True)`` stores of every member but DIGEST, of the bytes as they are
        now (read a block at a time with the file's reads, not its map: a large file's pages are not held)."""
        h = hashlib.sha256()
        fd = open_regular(self.path, user_file=True)
        with os.fdopen(fd, "rb") as fh:
            for name in sorted(n for n in self._where if n != DIGEST):
                start, size = self._where[name]
                h.update(name.encode("utf-8") + b"\0")
                fh.seek(start)
                while size > 0:
                    block = fh.read(min(size, 1 << 24))
                    if not block:
                        raise RecaserError(f"member {name} runs past the end of the file", self.path)
                    h.update(block)
                    size -= len(block)
        return h.hexdigest()

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


@dataclass
class Manifest:
    settings: dict[str, Any]
    signature: str
    files: dict[str, str] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)  # bytes of each file: checked before its sha256

    def to_text(self) -> str:
        """The manifest as JSON: read with the standard library at every load, where PyYAML's import and parse took
        16 ms of a recasing run's 0.8 s."""
        doc = {
            "format_version": self.format_version,
            "signature": self.signature,
            "settings": self.settings,
            **self.extra,
            "files": self.files,
            **({"sizes": self.sizes} if self.sizes else {}),
        }
        return json.dumps(doc, ensure_ascii=False, indent=1) + "\n"


def write_model(
    directory: str | os.PathLike[str],
    *,
    settings: Mapping[str, Any],
    signature: str,
    writers: Sequence[Callable[[Path], None]] = (),
    copy_files: Mapping[str, str | os.PathLike[str]] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write a model directory atomically: each of ``writers`` writes its files into the directory,
    ``copy_files`` maps names in the model to files to copy."""
    target = Path(directory)
    with atomic_directory(target) as tmp:
        for write in writers:
            write(tmp)
        for name, src in (copy_files or {}).items():
            try:
                shutil.copyfile(src, tmp / name)
            except OSError as exc:  # a full disk is the model's (copyfile names the file it read)
                if exc.errno in DISK_FAULTS:
                    raise write_error(exc, str(target)) from None
                raise
        written = [p for p in sorted(tmp.iterdir()) if p.is_file()]
        manifest = Manifest(
            settings=dict(settings),
            signature=signature,
            files={p.name: sha256(p) for p in written},
            extra=dict(extra or {}),
            sizes={p.name: p.stat().st_size for p in written},
        )
        (tmp / MANIFEST).write_text(manifest.to_text(), encoding="utf-8")
    return target


def read_manifest(directory: str | os.PathLike[str], *, verify: bool = True) -> Manifest:
    """Read and check a model's manifest: format version, and every file's presence and checksum."""
    d = Path(directory)
    path = d / MANIFEST
    if not d.is_dir():
        raise RecaserError("model directory not found", str(d))
    if not os.path.lexists(path):
        raise RecaserError(f"not a moses-recaser model: {MANIFEST} is missing", str(d))
    try:
        text = read_small(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecaserError(f"the manifest is not valid YAML: {exc}", str(path)) from None
    try:
        doc = json.loads(text)  # as ``Manifest.to_text`` writes it
    except (ValueError, RecursionError):
        doc = _yaml_doc(text, str(path))
    if not isinstance(doc, dict):
        raise RecaserError("the manifest is not a YAML mapping", str(path))
    version = doc.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RecaserError("the manifest has no integer format_version", str(path))
    if version > FORMAT_VERSION:
        raise RecaserError(
            f"model format version {version} is newer than this moses-recaser reads ({FORMAT_VERSION}); "
            "upgrade moses-recaser",
            str(path),
        )
    if version < FORMAT_VERSION:
        raise RecaserError(
            f"model format version {version} was written by an older moses-recaser; this one reads version "
            f"{FORMAT_VERSION}: train the model again",
            str(path),
        )
    files = doc.get("files")
    settings = doc.get("settings")
    if not isinstance(files, dict) or not isinstance(settings, dict):
        raise RecaserError("the manifest lacks its 'files' or 'settings' mapping", str(path))
    for name, digest in files.items():
        plain_name(name, str(path))
        if not isinstance(digest, str):
            raise RecaserError(f"manifest entry {name!r} has no sha256 string", str(path))
    sizes = _sizes(doc.get("sizes", {}), files, str(path))
    if verify:
        verify_files(d, files, sizes=sizes)
    extra = {k: v for k, v in doc.items() if k not in ("format_version", "signature", "settings", "files", "sizes")}
    return Manifest(
        settings=settings,
        signature=str(doc.get("signature", "")),
        files=files,
        format_version=version,
        extra=extra,
        sizes=sizes,
    )


def _yaml_doc(text: str, path: str) -> Any:
    """A manifest written in YAML (by hand, or by an earlier moses-recaser), with libyaml's loader when present."""
    import yaml

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, RecursionError) as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", -1) + 1
        raise RecaserError(f"the manifest is not valid YAML: {exc}", path, max(line, 0)) from None


def _sizes(doc: object, files: Mapping[str, str], where: str) -> dict[str, int]:
    """The manifest's ``sizes``: a byte count (a non-negative integer) for some of its files, none other."""
    if not isinstance(doc, dict):
        raise RecaserError("the manifest's 'sizes' is not a mapping", where)
    for name, size in doc.items():
        if name not in files:
            raise RecaserError(f"the manifest gives a size for {name!r}, which is not one of its files", where)
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise RecaserError(f"the manifest's size of {name} is not a number of bytes", where)
    return dict(doc)


def verify_files(
    directory: Path, files: Mapping[str, str], skip: Collection[str] = (), sizes: Mapping[str, int] | None = None
) -> None:
    """Every model file but ``skip`` is a regular file inside ``directory`` with its manifest size and checksum
    (``open_verified``), checked before anything parses it."""
    for name, digest in files.items():
        if name not in skip:
            os.close(open_verified(directory, name, digest, (sizes or {}).get(name)))


def open_verified(directory: Path, name: str, digest: str, size: int | None = None) -> int:
    """A read-only descriptor of the model file ``name``, at its start, once its bytes, read through that very
    descriptor, match the manifest's size (when given: a file of the wrong size is refused before a byte of it is
    read) and sha256: what is read through it later is what was checked, whatever the directory holds by then."""
    path = directory / plain_name(name, str(directory / MANIFEST))
    if not os.path.lexists(path):
        raise RecaserError(f"model file {name} is missing", str(directory))
    fd = open_regular(path)
    try:
        if size is not None and os.fstat(fd).st_size != size:
            raise RecaserError(
                f"{name} has {os.fstat(fd).st_size} bytes, not the {size} of its manifest: the model is damaged or "
                "was edited",
                str(directory),
            )
        h, block = hashlib.sha256(), bytearray(1 << 20)  # one buffer read into: no new megabyte a block
        while n := os.readv(fd, [block]):
            h.update(memoryview(block)[:n])
        if h.hexdigest() != digest:
            raise RecaserError(f"checksum mismatch for {name}: the model is damaged or was edited", str(directory))
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_small(path: Path, limit: int = 1 << 24) -> bytes:
    """A small regular file of a model (a manifest, a pointer), whole; larger than ``limit`` is an error."""
    with os.fdopen(open_regular(path), "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise RecaserError(f"larger than {limit >> 20} MiB: not a model's file", str(path))
    return data


class ModelSnapshot:
    """One model directory, as it was when this opened it, for the length of a ``with`` block: its files are
    opened through the open directory (``root``, Linux's /proc/self/fd/N), so a model replaced meanwhile (a
    training run renames a new directory into place) is either not seen at all or, if its files were removed
    before they were opened, one clear error. Errors name the directory as the user gave it."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        try:
            self.fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise RecaserError(f"cannot open the model directory: {exc.strerror}", str(directory)) from None
        proc = Path(f"/proc/self/fd/{self.fd}")
        self.root = proc if proc.is_dir() else directory

    def __enter__(self) -> ModelSnapshot:  # noqa: PYI034
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        replaced = self._replaced()
        os.close(self.fd)
        if isinstance(exc, RecaserError):
            if replaced:
                raise RecaserError("the model was replaced while it was loading; run again", str(self.directory))
            if exc.path is not None and exc.path.startswith(str(self.root)):
                raise RecaserError(exc.reason, str(self.directory) + exc.path[len(str(self.root)) :], exc.line)

    def _replaced(self) -> bool:
        try:
            now, then = os.stat(self.directory), os.fstat(self.fd)
        except OSError:
            return True
        return (now.st_dev, now.st_ino) != (then.st_dev, then.st_ino)


def resolve_model(path: str | os.PathLike[str]) -> Path:
    """A model directory, or a pointer file (``model: DIR``, as ``moses-recaser-ems train -config`` writes)."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):  # "" would be the current directory
        raise RecaserError(f"a model is a directory name, not {path!r}")
    try:
        return _model_dir_of(Path(path))
    except OSError as exc:  # a name too long, a file that cannot be read (/proc/self/mem)
        raise RecaserError(f"cannot read the model: {exc.strerror or exc}", os.fspath(path)) from None
    except ValueError:  # a NUL in the name, or in a pointer file's
        raise RecaserError("a NUL in the model's name: not a model", os.fspath(path)) from None


def _model_dir_of(path: Path) -> Path:
    p = path
    if p.is_dir():
        return p
    if not os.path.lexists(p):
        raise RecaserError("model not found", str(p))
    try:
        kind = os.stat(p).st_mode
    except FileNotFoundError:  # a symlink to nothing
        raise RecaserError("model not found", str(p)) from None
    except OSError as exc:  # a symlink loop
        raise RecaserError(f"not a model directory or a model pointer file ({exc.strerror})", str(p)) from None
    if not stat.S_ISREG(kind):
        raise RecaserError("not a model directory or a model pointer file (a file 'model: DIR')", str(p))
    try:
        # a pointer may be a symlink (EMS's own files); an editor's byte-order mark is dropped, as in any text input
        text = read_small(Path(os.path.realpath(p))).decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise RecaserError("not a moses-recaser model pointer (not UTF-8 text)", str(p)) from None
    found: Path | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.startswith("model:"):
            name = line.split(":", 1)[1].strip()
            if not name or "\0" in name:  # ("" would be the pointer's own directory)
                raise RecaserError(
                    "not a moses-recaser model pointer (its 'model:' names no directory)", str(p), lineno
                )
            if found is not None:
                raise RecaserError("a second 'model:' line: a pointer names one model", str(p), lineno)
            target = Path(name)
            found = target if target.is_absolute() else p.parent / target
        elif line.strip() and not line.startswith("#"):
            raise RecaserError("not a moses-recaser model pointer (expected 'model: DIR')", str(p), lineno)
    if found is None:
        raise RecaserError("not a moses-recaser model pointer (no 'model:' line)", str(p))
    return found
