"""Training statistics: from a cased bitext (and its alignment) to tables and a cased LM.

``statistics`` counts a corpus (``parallel.count_corpus``) and makes the LM: modified Kneser-Ney estimated here
from the counted n-grams, or by KenLM's lmplz (``lmplz``, which sorts on disk: the choice for large corpora), or
an existing LM. ``write_statistics`` keeps them as a statistics model (``train --stats``).
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

from moses_recaser.errors import RecaserError
from moses_recaser.outputs import atomic_output, model_target, work_dir
from moses_recaser.sentences import chunks
from moses_recaser.signature import signature
from moses_recaser.stats.counter import check_lm_order
from moses_recaser.stats.kneser_ney import estimate, write_arpa
from moses_recaser.stats.merge import Counts
from moses_recaser.stats.parallel import count_corpus
from moses_recaser.stats.pieces import pieces, read_piece
from moses_recaser.stats.tables import Tables
from moses_recaser.textio import read_lines, split_tokens
from moses_recaser.triples import Triple

log = logging.getLogger(__name__)


@dataclass
class StatsSettings:
    """Every setting that changes the statistics; recorded in the model and its signature."""

    lm_order: int = 3
    discount_fallback: bool = True  # small corpora: lmplz's fallback discounts instead of an error
    lm: str | None = None  # an existing KenLM model (ARPA or binary) instead of estimating one
    symmetrization: str = "grow-diag-final-and"
    alignment: str | None = None  # the alignment file given, if any ("eflomal" when we aligned)

    def __post_init__(self) -> None:
        check_lm_order(self.lm_order)

    def signature(self) -> str:
        lm = f"file:{Path(self.lm).name}" if self.lm else f"kn{self.lm_order}"
        align = "file" if self.alignment not in (None, "eflomal") else f"eflomal+{self.symmetrization}"
        return signature(("lm", lm), ("align", align), ("tables", "wb"))


@dataclass
class Corpus:
    """What statistics are counted from: a word-aligned bitext as files (source, target, alignment; lines
    [start, end) of them) or as triples in memory, and target-language text without a source."""

    files: tuple[str, str, str] | None = None
    lines: tuple[int, int] | None = None
    triples: Sequence[Triple] | None = None
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


def statistics(
    corpus: Corpus, lm: LMSettings, work: Path, tag: str = "all", jobs: int = 1, quiet: bool = False
) -> tuple[Tables, Path, Counts]:
    """The tables and the LM of a corpus, counted in ``jobs`` processes."""
    t0 = time.perf_counter()
    order = 0 if lm.lm is not None or lm.lmplz is not None else lm.order  # n-grams counted only to estimate here
    counts = count_corpus(
        list(corpus.files) if corpus.files else None,
        corpus.mono,
        order,
        jobs,
        corpus.lines,
        corpus.triples,
        work,
        quiet,
        corpus.exclude,
    )
    tables = Tables.from_counts(counts)
    log.info(
        "counted %d sentences, %d target tokens in %.1f s",
        counts.sentences,
        counts.target_tokens,
        time.perf_counter() - t0,
    )
    if lm.lm is not None:
        if not Path(lm.lm).is_file():
            raise RecaserError("LM file not found", lm.lm)
        return tables, Path(lm.lm), counts
    arpa = work / f"lm.{tag}.arpa"
    if lm.lmplz is not None:
        run_lmplz(lm.lmplz, corpus.targets(), lm.order, str(arpa), work, lm.lmplz_options, lm.discount_fallback)
    else:
        estimate_lm(counts, str(arpa), lm.discount_fallback)
    return tables, arpa, counts


def estimate_lm(counts: Counts, arpa: str, discount_fallback: bool = False) -> None:
    """The modified Kneser-Ney LM of counted n-grams, as an ARPA file."""
    if counts.order < 1:
        raise RecaserError("the LM order must be at least 1")
    t0 = time.perf_counter()
    model = estimate(counts.ngram_counts(), discount_fallback)
    with atomic_output(arpa) as out:
        write_arpa(model, out)
    log.info(
        "estimated a %d-gram modified Kneser-Ney LM in %.1f s (discounts %s)",
        counts.order,
        time.perf_counter() - t0,
        ", ".join("/".join(f"{d:.3f}" for d in ds) for ds in model.discounts),
    )


def run_lmplz(
    lmplz: str,
    sentences: Iterable[list[str]],
    order: int,
    arpa: str,
    work: Path,
    options: str = "",
    discount_fallback: bool = False,
) -> None:
    """KenLM's lmplz on tokenized sentences (fed to its standard input): the ARPA file. lmplz sorts on disk
    (``-T``, the work directory) in the memory ``-S`` gives it (1G unless ``options`` say otherwise)."""
    args = shlex.split(options)
    cmd = [lmplz, "-o", str(order), "-T", str(work), "--arpa", arpa]
    if "-S" not in args and "--memory" not in args:
        cmd += ["-S", "1G"]
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
) -> tuple[Tables, dict[str, str], Counts]:
    """Tables and LM of a bitext (aligned with eflomal when no alignment is given), counted in ``jobs``
    processes; the tables, the files to copy into the model and the counts."""
    work = Path(workdir)
    files: dict[str, str] = {}
    corpus = Corpus(files=(source, target, alignment)) if alignment is not None else None
    if corpus is None:
        from moses_recaser.stats.eflomal import aligned_bitext

        priors = work / "aligner.priors"
        corpus = Corpus(triples=aligned_bitext(source, target, settings.symmetrization, priors_out=priors))
        settings.alignment = "eflomal"
        files["aligner.priors"] = str(priors)
    lm = LMSettings(order=settings.lm_order, discount_fallback=settings.discount_fallback, lm=settings.lm)
    tables, lm_path, counts = statistics(corpus, lm, work, jobs=jobs)
    files["lm.arpa" if is_arpa(str(lm_path)) else "lm.bin"] = str(lm_path)
    return tables, files, counts


def is_arpa(path: str) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(64)
    return head.lstrip().startswith(b"\\data\\")


def lm_from_text(path: str) -> Iterator[list[str]]:
    return (split_tokens(line) for line in read_lines(path))


def tempdir() -> contextlib.AbstractContextManager[str]:
    """A scratch directory for a training run: removed at the end, and by the next run if this one is killed."""
    return work_dir("moses-recaser")


def write_statistics(
    source: str, target: str, alignment: str | None, settings: StatsSettings, model: str, jobs: int = 1
) -> str:
    """A statistics model (tables and LM, no weights) of a bitext, for ``train --stats``, counted in ``jobs``
    processes (the same model for every number); its signature."""
    from moses_recaser.modeldir import write_model

    model_target(model)
    with tempdir() as work:
        tables, files, counts = build_statistics(source, target, alignment, settings, work, jobs)
        write_model(
            model,
            settings=vars(settings),
            signature=settings.signature(),
            writers=[tables.save],
            copy_files=files,
            extra={"corpus": {"sentences": counts.sentences, "target_tokens": counts.target_tokens}},
        )
    return settings.signature()
