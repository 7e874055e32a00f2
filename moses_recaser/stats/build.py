"""Training statistics: from a cased bitext (and its alignment) to tables and a cased LM.

``statistics`` counts a corpus (``parallel.count_corpus``), writes its tables (``tables.npz``) and makes the LM:
modified Kneser-Ney estimated here from the counted n-grams, or by KenLM's lmplz (``lmplz``), or an existing LM;
with the LM's query arrays (``lm.npz``) when it is an ARPA file. Everything is done within the memory setting
(``memory.Memory``): counts spill to sorted runs in a scratch directory of the work directory, removed at the
end (also on failure). ``write_statistics`` keeps them as a statistics model (``train --stats``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from moses_recaser.core.memory import Memory, map_large_blocks
from moses_recaser.core.sentences import chunks
from moses_recaser.core.signature import signature
from moses_recaser.core.triples import Triple
from moses_recaser.core.workers import in_child
from moses_recaser.io.corpus import pieces, read_piece
from moses_recaser.io.diskarrays import Scratch
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import BOM, compressed, kind_of, open_binary, read_lines, split_tokens
from moses_recaser.io.modeldir import save_npz
from moses_recaser.io.outputs import atomic_output, copy_file, make_dirs, model_target, work_dir
from moses_recaser.stats.arpa_arrays import ArrayLMWriter, check_arpa, write_arrays
from moses_recaser.stats.counter import check_lm_order
from moses_recaser.stats.kneser_ney import estimate, log_discounts
from moses_recaser.stats.merge import Counts
from moses_recaser.stats.parallel import count_corpus
from moses_recaser.stats.runs import remove
from moses_recaser.stats.tables import Tables, write_tables

log = logging.getLogger(__name__)


@dataclass
class StatsSettings:
    """Every setting that changes the statistics; recorded in the model and its signature."""

    lm_order: int = 3
    discount_fallback: bool = True  # small corpora: lmplz's fallback discounts instead of an error
    lm: str | None = None  # an existing KenLM model (ARPA or binary) instead of estimating one
    symmetrization: str = "grow-diag-final-and"
    alignment: str | None = None  # the alignment file given, if any ("eflomal" when we aligned)
    lm_prune: int = 0  # highest-order n-grams seen at most this often are left out of the LM (lmplz --prune)

    def __post_init__(self) -> None:
        check_lm_order(self.lm_order)
        check_prune(self.lm_prune)

    def signature(self) -> str:
        lm = f"file:{Path(self.lm).name}" if self.lm else f"kn{self.lm_order}"
        align = "file" if self.alignment not in (None, "eflomal") else f"eflomal+{self.symmetrization}"
        prune = [("prune", str(self.lm_prune))] if self.lm_prune else []
        return signature(("lm", lm), ("align", align), ("tables", "wb"), *prune)


def check_prune(threshold: int) -> None:
    """A pruning threshold is 0 (none) or a count."""
    if threshold < 0:
        raise RecaserError(f"`lm_prune` must be 0 (no pruning) or a count, not {threshold}")


@dataclass
class Corpus:
    """What statistics are counted from: a word-aligned bitext as files (source, target, alignment; lines
    [start, end) of them) or as triples in memory, and target-language text without a source."""

    files: tuple[str, str, str] | None = None
    lines: tuple[int, int] | None = None
    triples: Sequence[Triple] | None = None
    triples_target: str | None = None  # the file the triples' targets come from, each triple's id its line - 1
    mono: Sequence[str] = field(default_factory=tuple)
    # lines of ``mono`` left out (tokens joined by spaces): the dev reference, which the LM must not have seen
    exclude: frozenset[str] = frozenset()

    def targets(self) -> Iterator[list[str]]:
        """The LM's text: the bitext's target sentences, then the target-language text's (empty lines left
        out, as ever for that text)."""
        if self.triples is not None:
            yield from (t.target for t in self.triples)
        elif self.files is not None:
            for piece in pieces(self.files[1:2], 1, self.lines):
                yield from (split_tokens(x) for _, x in read_piece(piece))
        for path in self.mono:
            yield from (
                toks for toks in map(split_tokens, read_lines(path)) if toks and " ".join(toks) not in self.exclude
            )


@dataclass
class LMSettings:
    order: int = 3
    discount_fallback: bool = True
    lm: str | None = None  # an existing LM: nothing to estimate
    lmplz: str | None = None  # KenLM's lmplz: it estimates instead of this package
    lmplz_options: str = ""
    prune: int = 0  # lmplz's --prune 0 ... 0 T for the highest order


@dataclass(frozen=True)
class Statistics:
    """What ``statistics`` made: the tables (mapped from ``tables.npz`` in the work directory), the LM file
    (ARPA or binary), its query arrays (None for a binary LM: kenlm answers), and the corpus' totals."""

    tables: Tables
    tables_file: Path
    lm: Path
    lm_arrays: Path | None
    sentences: int
    target_tokens: int


def statistics(
    corpus: Corpus,
    lm: LMSettings,
    work: Path,
    tag: str = "all",
    jobs: int = 1,
    quiet: bool = False,
    memory: Memory | None = None,
    lm_arrays: bool = True,
) -> Statistics:
    """The tables and the LM of a corpus, counted in ``jobs`` processes, within ``memory`` (default: the default
    setting), with the LM's query arrays unless not ``lm_arrays``; their files go to ``work``/stats.``tag``. The
    work is done in a process of its own (``workers.in_child``), so that the memory it took is given back."""
    memory = memory or Memory.from_setting(None)
    map_large_blocks()
    out = work / f"stats.{tag}"
    make_dirs(out)
    arpa, arrays, totals = in_child(_statistics_files, corpus, lm, work, out, jobs, quiet, memory.left(), lm_arrays)
    return Statistics(Tables.load(out), out / "tables.npz", arpa, arrays, *totals)


def _statistics_files(
    corpus: Corpus,
    lm: LMSettings,
    work: Path,
    out: Path,
    jobs: int,
    quiet: bool,
    memory: Memory,
    lm_arrays: bool,
) -> tuple[Path, Path | None, tuple[int, int]]:
    """``statistics``' files in ``out``: the LM file, its query arrays, and the sentences and target tokens."""
    t0 = time.perf_counter()
    order = 0 if lm.lm is not None or lm.lmplz is not None else lm.order  # n-grams counted only to estimate here
    with work_dir("moses-recaser-counts", work) as tmp:
        scratch = Scratch(tmp)
        counts = count_corpus(
            list(corpus.files) if corpus.files else None,
            corpus.mono,
            order,
            jobs,
            corpus.lines,
            corpus.triples,
            scratch,
            quiet,
            corpus.exclude,
            memory,
            corpus.triples_target,
        )
        log.info(
            "counted %d sentences, %d target tokens in %.1f s",
            counts.sentences,
            counts.target_tokens,
            time.perf_counter() - t0,
        )
        t0 = time.perf_counter()
        write_tables(counts, out / "tables.npz", scratch, memory.working())
        log.info("wrote the tables in %.1f s", time.perf_counter() - t0)
        remove([counts.lower_pairs, counts.cased_pairs])  # their files; the n-grams' are read last
        arpa, arrays = _language_model(counts, corpus, lm, out, scratch, memory, lm_arrays)
    return arpa, arrays, (counts.sentences, counts.target_tokens)


def _language_model(
    counts: Counts, corpus: Corpus, lm: LMSettings, out: Path, scratch: Scratch, memory: Memory, with_arrays: bool
) -> tuple[Path, Path | None]:
    """The LM (given, made by lmplz, or estimated from ``counts``) and its query arrays when it is an ARPA file
    and ``with_arrays``."""
    arrays = out / "lm.npz"
    if lm.lm is not None:
        if not lm_is_arpa(lm.lm):
            return Path(lm.lm), None
        if not with_arrays:
            check_arpa(lm.lm)  # checked whole now, not when a later train reads it
            return Path(lm.lm), None
        write_arrays(lm.lm, arrays, scratch, memory.working())
        return Path(lm.lm), arrays
    arpa = out / "lm.arpa"
    if lm.lmplz is not None:
        options = lm.lmplz_options + (
            f" --prune 0 0 {lm.prune}" if lm.prune and "--prune" not in lm.lmplz_options else ""
        )
        run_lmplz(lm.lmplz, corpus.targets(), lm.order, str(arpa), out, options, lm.discount_fallback, memory)
        if with_arrays:
            write_arrays(arpa, arrays, scratch, memory.working())
    else:
        estimate_lm(
            counts, str(arpa), lm.discount_fallback, lm.prune, str(arrays) if with_arrays else None, scratch, memory
        )
    return arpa, arrays if with_arrays else None


def estimate_lm(
    counts: Counts,
    arpa: str,
    discount_fallback: bool = False,
    prune: int = 0,
    arrays: str | None = None,
    scratch: Scratch | None = None,
    memory: Memory | None = None,
) -> None:
    """The modified Kneser-Ney LM of counted n-grams, as an ARPA file (pruned as lmplz --prune 0 ... 0
    ``prune``), and its query arrays (``arrays``: lm.npz) made as it is written."""
    if counts.order < 1:
        raise RecaserError("the LM order must be at least 1")
    memory = memory or Memory.unbounded()
    scratch = scratch or Scratch(None)
    t0 = time.perf_counter()
    sink = ArrayLMWriter(scratch, memory.working(), counts.lm_vocab()) if arrays is not None else None
    with atomic_output(arpa, compress=True) as out:
        report = estimate(counts, out, discount_fallback, prune, sink, memory.left())
    if sink is not None and arrays is not None:
        save_npz(arrays, sink.arrays())
    log.info(
        "estimated a %d-gram modified Kneser-Ney LM in %.1f s (discounts %s%s)",
        counts.order,
        time.perf_counter() - t0,
        log_discounts(report),
        f"; {report.written[-1]:,} {counts.order}-grams kept of {len(counts.ngrams[-1]):,}" if prune else "",
    )


def run_lmplz(
    lmplz: str,
    sentences: Iterable[list[str]],
    order: int,
    arpa: str,
    work: Path,
    options: str = "",
    discount_fallback: bool = False,
    memory: Memory | None = None,
) -> None:
    """KenLM's lmplz on tokenized sentences (fed to its standard input): the ARPA file. lmplz sorts on disk
    (``-T``, the work directory) in the memory ``-S`` gives it (what is left of ``memory``, at most 1G, unless
    ``options`` say otherwise)."""
    args = shlex.split(options)
    cmd = [lmplz, "-o", str(order), "-T", str(work), "--arpa", arpa]
    if "-S" not in args and "--memory" not in args:
        left = (memory or Memory.from_setting(None)).left().bytes
        cmd += ["-S", f"{min(left, 1 << 30) >> 20}M"]
    if discount_fallback:
        cmd.append("--discount_fallback")
    t0 = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd + args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError as exc:
        raise RecaserError(f"cannot run lmplz: {exc.strerror}", lmplz) from None
    stdin, stderr = proc.stdin, proc.stderr
    assert stdin is not None and stderr is not None
    err: list[bytes] = []
    reader = threading.Thread(target=lambda: err.append(stderr.read()), daemon=True)
    reader.start()
    try:
        for chunk in chunks(sentences, 10_000):
            stdin.write("".join(" ".join(s) + "\n" for s in chunk).encode("utf-8"))
        stdin.close()
    except BrokenPipeError:  # lmplz stopped early: its exit code and message say why
        pass
    code = proc.wait()
    reader.join()
    if code != 0:
        tail = b"".join(err).decode("utf-8", "replace").strip().splitlines()[-1:]
        raise RecaserError(f"lmplz failed with exit code {code} ({' '.join(tail)})", lmplz)
    log.info("estimated a %d-gram LM with lmplz in %.1f s", order, time.perf_counter() - t0)


def build_statistics(
    source: str,
    target: str,
    alignment: str | None,
    settings: StatsSettings,
    workdir: str | os.PathLike[str],
    jobs: int = 1,
    memory: Memory | None = None,
) -> tuple[Statistics, dict[str, str]]:
    """Tables and LM of a bitext (aligned with eflomal when no alignment is given), counted in ``jobs``
    processes within ``memory``; them, and the files to copy into the model."""
    work = Path(workdir)
    files: dict[str, str] = {}
    corpus = Corpus(files=(source, target, alignment)) if alignment is not None else None
    if corpus is None:
        from moses_recaser.stats.eflomal import aligned_bitext

        corpus = Corpus(triples=aligned_bitext(source, target, settings.symmetrization), triples_target=target)
        settings.alignment = "eflomal"
    lm = LMSettings(
        order=settings.lm_order, discount_fallback=settings.discount_fallback, lm=settings.lm, prune=settings.lm_prune
    )
    stats = statistics(corpus, lm, work, jobs=jobs, memory=memory, lm_arrays=False)
    files["tables.npz"] = str(stats.tables_file)
    name, copy = model_lm_file(stats.lm, work)
    files[name] = copy
    return stats, files


def model_lm_file(lm: Path, work: Path) -> tuple[str, str]:
    """The LM's name in a model (``lm.arpa`` or, a KenLM binary, ``lm.bin``) and the file to copy there: a
    compressed one (gzip or xz, whatever its name) decompressed into ``work`` first, as the model's readers and
    KenLM take it."""
    name = "lm.arpa" if is_arpa(str(lm)) else "lm.bin"
    if not compressed(str(lm)):
        return name, str(lm)
    plain = work / f"given.{name}"
    copy_file(lm, plain)
    return name, str(plain)


def is_arpa(path: str | os.PathLike[str]) -> bool:
    """Whether the file (gzip and xz decompressed, known by their first bytes as KenLM knows them) starts as an
    ARPA file does."""
    with open_binary(os.fspath(path)) as fh:
        head = fh.read(64)
    return head.removeprefix(BOM).lstrip().startswith(b"\\data\\")


def lm_is_arpa(path: str) -> bool:
    """Whether a given LM file is an ARPA file (else a KenLM binary), from its first bytes; anything else is a
    RecaserError (a cheap check, made before any work; an ARPA file's counts are checked when it is read)."""
    kind = kind_of(path)
    if kind != "file":
        raise RecaserError("is a directory, not an LM file" if kind == "dir" else "LM file not found", path)
    if is_arpa(path):
        return True
    if not is_kenlm_binary(path):
        raise RecaserError("neither an ARPA file nor a KenLM binary (build_binary): not an LM", path)
    return False


KENLM_MAGIC = b"mmap lm http://kheafield.com/code"  # the start of every build_binary file (lm/binary_format.cc)


def is_kenlm_binary(path: str | os.PathLike[str]) -> bool:
    """Whether the file starts as KenLM's build_binary writes its files."""
    with open_binary(os.fspath(path)) as fh:
        return fh.read(len(KENLM_MAGIC)) == KENLM_MAGIC


def lm_from_text(path: str) -> Iterator[list[str]]:
    return (split_tokens(line) for line in read_lines(path))


def tempdir() -> contextlib.AbstractContextManager[str]:
    """A scratch directory for a training run: removed at the end, and by the next run if this one is killed."""
    return work_dir("moses-recaser")


def write_statistics(
    source: str,
    target: str,
    alignment: str | None,
    settings: StatsSettings,
    model: str,
    jobs: int = 1,
    memory: Memory | None = None,
) -> str:
    """A statistics model (tables and LM, no weights) of a bitext, for ``train --stats``, counted in ``jobs``
    processes within ``memory`` (the same model for every number and memory); its signature."""
    from moses_recaser.io.modeldir import write_model

    model_target(model)
    with tempdir() as work:
        stats, files = build_statistics(source, target, alignment, settings, work, jobs, memory)
        write_model(
            model,
            settings=vars(settings),
            signature=settings.signature(),
            copy_files=files,
            extra={"corpus": {"sentences": stats.sentences, "target_tokens": stats.target_tokens}},
        )
    return settings.signature()
