"""Training statistics: from a cased bitext (and its alignment) to tables and a cased LM in a model store."""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from moses_recaser import __version__
from moses_recaser.errors import RecaserError
from moses_recaser.moses.bitext import read_aligned_bitext
from moses_recaser.stats.kneser_ney import count_ngrams, estimate, write_arpa
from moses_recaser.stats.tables import StatsCounts, Tables, count_triples
from moses_recaser.textio import atomic_output, split_tokens
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

    def signature(self) -> str:
        lm = f"file:{Path(self.lm).name}" if self.lm else f"kn{self.lm_order}"
        align = "file" if self.alignment not in (None, "eflomal") else f"eflomal+{self.symmetrization}"
        return f"lm:{lm}|align:{align}|tables:wb"


def aligned_triples(source: str, target: str, alignment: str | None, settings: StatsSettings,
                    priors_out: str | None = None) -> list[Triple]:
    """The bitext as triples with word links; aligns with eflomal when no alignment file is given."""
    if alignment is not None:
        return list(read_aligned_bitext(source, target, alignment))
    from moses_recaser.stats.eflomal import aligned_bitext

    triples = aligned_bitext(source, target, settings.symmetrization, priors_out=priors_out)
    settings.alignment = "eflomal"
    return triples


def estimate_lm(target_sentences: Iterator[list[str]], order: int, arpa: str, discount_fallback: bool = False) -> None:
    t0 = time.perf_counter()
    model = estimate(count_ngrams(target_sentences, order), discount_fallback)
    with atomic_output(arpa) as out:
        write_arpa(model, out)
    log.info("estimated a %d-gram modified Kneser-Ney LM in %.1f s (discounts %s)", order,
             time.perf_counter() - t0, ", ".join("/".join(f"{d:.3f}" for d in ds) for ds in model.discounts))


def build_statistics(
    source: str,
    target: str,
    alignment: str | None,
    settings: StatsSettings,
    workdir: str | os.PathLike[str],
) -> tuple[Tables, dict[str, str], StatsCounts]:
    """Count tables and make the LM; returns the tables and the files to copy into the model."""
    work = Path(workdir)
    files: dict[str, str] = {}
    priors = str(work / "aligner.priors") if alignment is None else None
    triples = aligned_triples(source, target, alignment, settings, priors)
    if priors is not None:
        files["aligner.priors"] = priors
    t0 = time.perf_counter()
    counts = count_triples(triples)
    tables = Tables.from_counts(counts)
    log.info("counted tables from %d sentences, %d target tokens in %.1f s", counts.sentences,
             counts.target_tokens, time.perf_counter() - t0)
    if settings.lm is not None:
        if not Path(settings.lm).is_file():
            raise RecaserError("LM file not found", settings.lm)
        files["lm.arpa" if is_arpa(settings.lm) else "lm.bin"] = settings.lm
    else:
        arpa = str(work / "lm.arpa")
        estimate_lm((t.target for t in triples), settings.lm_order, arpa, settings.discount_fallback)
        files["lm.arpa"] = arpa
    return tables, files, counts


def is_arpa(path: str) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(64)
    return head.lstrip().startswith(b"\\data\\")


def lm_from_text(path: str) -> Iterator[list[str]]:
    from moses_recaser.textio import read_lines

    return (split_tokens(line) for line in read_lines(path))


def version_signature(settings: StatsSettings) -> str:
    return f"moses-recaser:{__version__}|{settings.signature()}"


def tempdir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="moses-recaser.")


def write_statistics(source: str, target: str, alignment: str | None, settings: StatsSettings, model: str) -> str:
    """A statistics model (tables and LM, no weights) of a bitext, for ``train --stats``; its signature."""
    from moses_recaser.modeldir import write_model

    with tempdir() as work:
        tables, files, counts = build_statistics(source, target, alignment, settings, work)
        write_model(model, settings=vars(settings), signature=version_signature(settings), writers=[tables.save],
                    copy_files=files, extra={"corpus": {"sentences": counts.sentences,
                                                        "target_tokens": counts.target_tokens}})
    return version_signature(settings)
