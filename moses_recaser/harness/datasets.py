"""Public corpora for experiments and benchmarks: where they are, and tokenized copies in a cache.

The data root defaults to the ``corpora`` folder of the shared data beside the project; the variable
``MOSES_RECASER_DATA`` (or an explicit argument) moves it. Nothing in the library or the tests
needs it: only experiments and benchmarks read it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import kind_of, read_lines, sha256, whole_text
from moses_recaser.io.outputs import atomic_output, make_dirs

log = logging.getLogger(__name__)

ENV_DATA = "MOSES_RECASER_DATA"
ENV_CACHE = "MOSES_RECASER_CACHE"


PROJECT = Path(__file__).resolve().parents[2]
DEFAULT_DATA = PROJECT.parent / "shared" / "corpora"  # the corpora folder beside the project


def _choose(explicit: str | os.PathLike[str] | None, env: str, default: Path) -> Path:
    """An explicit path, else the environment variable, else the default."""
    if explicit is not None:
        return Path(explicit)
    return Path(os.environ[env]) if os.environ.get(env) else default


def data_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    root = _choose(explicit, ENV_DATA, DEFAULT_DATA)
    if kind_of(root) != "dir":
        raise RecaserError(f"data root not found; set {ENV_DATA} or pass --data-root", str(root))
    return root


def cache_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The cache directory: ``explicit``, else $MOSES_RECASER_CACHE, else runs/cache of the project."""
    return _choose(explicit, ENV_CACHE, PROJECT / "runs" / "cache")


def cache_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``cache_path``, made if missing."""
    return make_dirs(cache_path(explicit))


def tokenized(raw: Path, lang: str, cache: Path) -> Path:
    """A Moses-tokenized copy of a raw corpus file, made once and kept in the cache. It is made anew
    when the raw file's contents change (a sha256 beside it), not when a fresh copy of the corpora only
    has newer times: the later stages are keyed by their input files' times, so a needless rewrite
    would realign and retrain every experiment."""
    from moses_recaser.moses.tokenizer import tokenize_file

    out = cache / "tok" / raw.parent.name / f"{raw.name}.tok.{lang}"
    stamp = out.with_name(out.name + ".sha256")
    digest = sha256(raw)
    if kind_of(out) == kind_of(stamp) == "file" and whole_text(stamp).strip() == digest:
        return out
    make_dirs(out.parent)
    log.info("tokenizing %s (%s)", raw, lang)
    tokenize_file(str(raw), str(out), lang)
    _write_stamp(stamp, digest)
    return out


def concatenate(parts: Sequence[Path | tuple[Path, int | None, int | None]], out: Path) -> Path:
    """Concatenate files (e.g. several newstest years), or line slices [start, end) of them, into one.
    Kept while its contents are those of the parts (a sha256 beside it): a changed split list or slice
    makes it anew, newer copies of the same parts do not (the later stages are keyed by its time)."""
    spans = [p if isinstance(p, tuple) else (p, None, None) for p in parts]

    def lines() -> Iterator[str]:
        for p, start, end in spans:
            for k, line in enumerate(read_lines(p)):
                if (start is None or k >= start) and (end is None or k < end):
                    yield line + "\n"

    h = hashlib.sha256()
    for line in lines():
        h.update(line.encode("utf-8"))
    digest = h.hexdigest()
    stamp = out.with_name(out.name + ".sha256")
    if kind_of(out) == "file":
        stamped = kind_of(stamp) == "file"
        if (whole_text(stamp).strip() if stamped else sha256(out)) == digest:
            if not stamped:  # made before the stamps: adopted, its time kept
                _write_stamp(stamp, digest)
            return out
    make_dirs(out.parent)
    with atomic_output(out) as fh:
        fh.writelines(lines())
    _write_stamp(stamp, digest)
    return out


def _write_stamp(path: Path, digest: str) -> None:
    with atomic_output(path) as fh:
        fh.write(digest + "\n")


def newstest_pair(
    root: Path, pair: str, names: Sequence[str], src: str, tgt: str, cache: Path, tag: str
) -> tuple[Path, Path]:
    """Tokenized, concatenated source and target sides of newstest sets of a pair directory."""
    d = root / "wmt-newstest" / pair
    srcs = [tokenized(d / f"{n}.{src}", src, cache) for n in names]
    tgts = [tokenized(d / f"{n}.{tgt}", tgt, cache) for n in names]
    return (concatenate(srcs, cache / "sets" / f"{tag}.{src}"), concatenate(tgts, cache / "sets" / f"{tag}.{tgt}"))
