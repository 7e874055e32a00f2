"""The model directory: a YAML manifest, numpy arrays, vocabularies, the LM, and checksums.

Layout::

    MODEL/manifest.yaml   format_version, settings, signature, sha256 of every other file
    MODEL/tables.npz      numpy arrays (loaded with allow_pickle=False)
    MODEL/*.vocab         one token per line, UTF-8
    MODEL/lm.arpa         the cased LM (or lm.bin: a KenLM binary given with --lm)
    MODEL/lm.npz          the LM's query arrays and their packed keys (stats.arpa_arrays.ArrayLM)
    MODEL/candidates.npz  GEN and candidate facts of every training type, and the training word types'
                          facts (candidates.py, features.FeatureExtractor.save_registry; optional)
    MODEL/...             anything else a stage adds (aligner priors, ...)

Format versions: 1, the first; 2, candidates.npz with GEN results as pool segments and the word types,
lm.npz with its hash index; 3, every optional array of version 2 always stored; 4 and 5, facts of the
decoder-output fixes (input modes and their weights, escapes read past by the casing facts); 6, keys packed
(``keyset.KeySet``) in place of int64 keys with a hash table, and the tables' pair counts in int32. This
version reads version 6 only: an older model is refused with a message to retrain it.

The directory is built under a temporary name and renamed into place, so a crash or Ctrl-C
never leaves a half-written model.
"""

from __future__ import annotations

import io
import mmap
import os
import shutil
import struct
import zipfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import yaml

from moses_recaser.errors import RecaserError
from moses_recaser.outputs import atomic_directory
from moses_recaser.textio import sha256

FORMAT_VERSION = 6
MANIFEST = "manifest.yaml"


def text_array(words: Iterable[str]) -> np.ndarray:
    """Strings as one newline-joined array (npz files take no pickled lists)."""
    return np.array("\n".join(words))


def words_of(a: np.ndarray) -> list[str]:
    """The strings of ``text_array``."""
    s = str(a)
    return s.split("\n") if s else []


def save_npz(path: str | os.PathLike[str] | IO[bytes], arrays: dict[str, np.ndarray]) -> None:
    """np.savez with fixed zip timestamps, so equal arrays give equal bytes (and equal checksums)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asarray(arrays[name]), allow_pickle=False)
            zf.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), buf.getvalue())


class MappedArrays(Mapping[str, np.ndarray]):
    """The arrays of a ``save_npz`` file, mapped read-only from it (members are stored, not compressed): opening
    costs next to nothing, and a page of an array is read when something reads it, so recasing holds in memory
    the parts of a large model that its input touches."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        with open(self.path, "rb") as fh:
            self._map = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(fh.fileno()).st_size else b""
        self._where: dict[str, tuple[int, int]] = {}
        with zipfile.ZipFile(self.path) as zf:
            for info in zf.infolist():
                if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
                    raise RecaserError(f"member {info.filename} is not a stored .npy array", self.path)
                at = info.header_offset
                name_len, extra_len = struct.unpack("<HH", self._map[at + 26:at + 30])
                self._where[info.filename[:-4]] = (at + 30 + name_len + extra_len, info.file_size)

    def __getitem__(self, name: str) -> np.ndarray:
        start, size = self._where[name]
        head = io.BytesIO(self._map[start:start + min(size, 1 << 16)])
        version = np.lib.format.read_magic(head)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(head)
        count = int(np.prod(shape, dtype=np.int64))
        data = np.frombuffer(self._map, dtype=dtype, count=count, offset=start + head.tell()) if count else \
            np.zeros(0, dtype=dtype)
        return data.reshape(shape, order="F" if fortran else "C")

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

    def to_yaml(self) -> str:
        doc = {
            "format_version": self.format_version,
            "signature": self.signature,
            "settings": self.settings,
            **self.extra,
            "files": self.files,
        }
        return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)


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
            shutil.copyfile(src, tmp / name)
        files = {p.name: sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        manifest = Manifest(settings=dict(settings), signature=signature, files=files, extra=dict(extra or {}))
        (tmp / MANIFEST).write_text(manifest.to_yaml(), encoding="utf-8")
    return target


def read_manifest(directory: str | os.PathLike[str], *, verify: bool = True) -> Manifest:
    """Read and check a model's manifest: format version, and every file's presence and checksum."""
    d = Path(directory)
    path = d / MANIFEST
    if not d.is_dir():
        raise RecaserError("model directory not found", str(d))
    if not path.is_file():
        raise RecaserError(f"not a moses-recaser model: {MANIFEST} is missing", str(d))
    try:
        # libyaml's loader when present: the manifest is read on every model load
        doc = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", -1) + 1
        raise RecaserError(f"the manifest is not valid YAML: {exc}", str(path), max(line, 0)) from None
    if not isinstance(doc, dict):
        raise RecaserError("the manifest is not a YAML mapping", str(path))
    version = doc.get("format_version")
    if not isinstance(version, int):
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
    if verify:
        verify_files(d, files)
    extra = {k: v for k, v in doc.items() if k not in ("format_version", "signature", "settings", "files")}
    return Manifest(settings=settings, signature=str(doc.get("signature", "")), files=files,
                    format_version=version, extra=extra)


def verify_files(directory: Path, files: dict[str, str], skip: Collection[str] = ()) -> None:
    """Every model file but ``skip`` is present and has its manifest checksum."""
    for name, digest in files.items():
        if name in skip:
            continue
        f = directory / str(name)
        if not f.is_file():
            raise RecaserError(f"model file {name} is missing", str(directory))
        if sha256(f) != digest:
            raise RecaserError(f"checksum mismatch for {name}: the model is damaged or was edited", str(directory))


def resolve_model(path: str | os.PathLike[str]) -> Path:
    """A model directory, or a pointer file (``model: DIR``, as ``moses-recaser-ems train -config`` writes)."""
    p = Path(path)
    if p.is_dir():
        return p
    if not p.is_file():
        raise RecaserError("model not found", str(p))
    for lineno, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("model:"):
            target = Path(line.split(":", 1)[1].strip())
            return target if target.is_absolute() else p.parent / target
        if line.strip() and not line.startswith("#"):
            raise RecaserError("not a moses-recaser model pointer (expected 'model: DIR')", str(p), lineno)
    raise RecaserError("not a moses-recaser model pointer (no 'model:' line)", str(p))
