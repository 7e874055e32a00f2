"""Word alignment with eflomal (both directions, on lowercased text), then symmetrization.

eflomal is an optional dependency (``pip install moses-recaser[align]``); users with an EMS
alignment (``model/aligned.grow-diag-final-and``) never need it. eflomal seeds its sampler
from /dev/urandom, so two runs give slightly different alignments; everything after the
alignment file is deterministic.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from moses_recaser.core import casing
from moses_recaser.core.triples import Triple
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import open_binary, split_tokens, whole_text
from moses_recaser.io.outputs import atomic_output, work_dir
from moses_recaser.moses.bitext import read_aligned_bitext
from moses_recaser.moses.pharaoh import parse_links
from moses_recaser.stats.symal import symmetrize

log = logging.getLogger(__name__)


def _eflomal() -> Any:
    try:
        import eflomal
    except ImportError:
        raise RecaserError(
            "word alignment needs eflomal: pip install 'moses-recaser[align]' "
            "(or pass an existing alignment file with `alignment`)"
        ) from None
    return eflomal


def _safe(tokens: Sequence[str]) -> str:
    # eflomal splits on any white space (str.split); keep positions equal to ours
    return " ".join("".join("_" if c.isspace() else c for c in casing.lower(t)) for t in tokens) + "\n"


# eflomal gives no links to a pair with this many tokens or more on a side (its sentence length limit)
EFLOMAL_MAX_TOKENS = 1024


def align(
    source: Sequence[Sequence[str]],
    target: Sequence[Sequence[str]],
    method: str = "grow-diag-final-and",
    priors: str | os.PathLike[str] | None = None,
    priors_out: str | os.PathLike[str] | None = None,
    where: Callable[[int], str] | None = None,
) -> list[list[tuple[int, int]]]:
    """Align tokenized sentence pairs; returns symmetrized (source, target) links per sentence.

    ``priors`` reads eflomal priors (as written by ``eflomal-makepriors``); ``priors_out`` writes
    priors computed from this alignment, for aligning new sentences later. A pair too long for eflomal
    (EFLOMAL_MAX_TOKENS) gets no links, with a warning that names the first such pair (``where``: its file and
    line, from its index).
    """
    if len(source) != len(target):
        raise RecaserError(f"cannot align {len(source)} source sentences to {len(target)} target sentences")
    if priors:
        check_priors(priors)
    _warn_too_long(source, target, where or (lambda k: f"sentence pair {k + 1}"))
    eflomal = _eflomal()
    with work_dir("moses-recaser-align") as tmp:
        d = Path(tmp)
        src_lines = [_safe(s) for s in source]
        tgt_lines = [_safe(t) for t in target]
        aligner = eflomal.Aligner()
        log.info("aligning %d sentence pairs with eflomal", len(source))
        # (priors written to a .gz or .xz name are compressed: read as every input is)
        given = io.TextIOWrapper(open_binary(os.fspath(priors)), encoding="utf-8") if priors else None
        with given if given is not None else contextlib.nullcontext() as pri:
            aligner.align(
                src_lines,
                tgt_lines,
                links_filename_fwd=str(d / "fwd"),
                links_filename_rev=str(d / "rev"),
                priors_input=pri,
                quiet=True,
            )
        fwd = whole_text(d / "fwd").split("\n")[: len(source)]
        rev = whole_text(d / "rev").split("\n")[: len(source)]
        if priors_out is not None:
            stats = eflomal.calculate_priors(src_lines, tgt_lines, fwd, rev)
            with atomic_output(priors_out, compress=True) as fh:
                eflomal.write_priors(fh, *stats)
    out = []
    for f_line, r_line in zip(fwd, rev):
        # eflomal's forward links give each target word one source (symal's b), reverse the other way
        out.append(symmetrize(parse_links(r_line), parse_links(f_line), method))
    return out


# eflomal's priors lines (``eflomal.read_priors``): kind -> (fields, the integer ones); the last is a number
PRIORS_LINES = {"LEX": (4, ()), "HMMF": (3, (1,)), "HMMR": (3, (1,)), "FERF": (4, (2,)), "FERR": (4, (2,))}


def check_priors(path: str | os.PathLike[str]) -> None:
    """The lines of an eflomal priors file are what ``eflomal.read_priors`` takes (tab-separated, ``PRIORS_LINES``),
    else a RecaserError at the first line that is not (eflomal's reader fails with an IndexError or a ValueError
    and no line)."""
    name = os.fspath(path)
    if name == "-":  # read once, by eflomal
        return
    with open_binary(name) as fh:
        for n, raw in enumerate(fh, 1):
            if not _priors_line(raw):
                raise RecaserError(
                    "not eflomal priors: expected UTF-8 lines of tab-separated fields, LEX, HMMF, HMMR, FERF or FERR "
                    "first and a number last",
                    name,
                    n,
                )


def _priors_line(raw: bytes) -> bool:
    try:
        fields = raw.decode("utf-8").rstrip("\n").split("\t")
        shape = PRIORS_LINES.get(fields[0])
        if shape is None or len(fields) != shape[0]:
            return False
        float(fields[-1])
        for i in shape[1]:
            int(fields[i])
    except ValueError:  # not a number, or (UnicodeDecodeError) not UTF-8
        return False
    return True


def _warn_too_long(
    source: Sequence[Sequence[str]], target: Sequence[Sequence[str]], where: Callable[[int], str]
) -> None:
    too_long = [k for k, (s, t) in enumerate(zip(source, target)) if max(len(s), len(t)) >= EFLOMAL_MAX_TOKENS]
    if too_long:
        k = too_long[0]
        log.warning(
            "%s: %d source and %d target tokens: eflomal aligns no pair with %d tokens or more on a side, so it "
            "gets no word links (%d such pair%s in all)",
            where(k),
            len(source[k]),
            len(target[k]),
            EFLOMAL_MAX_TOKENS,
            len(too_long),
            "" if len(too_long) == 1 else "s",
        )


# training lines whose links make the priors for aligning new text (more take longer and add little)
PRIOR_LINES = 100_000


def priors_of_alignment(
    source: str,
    target: str,
    alignment: str,
    out: str | os.PathLike[str],
    lines: tuple[int, int] | None = None,
    max_lines: int = PRIOR_LINES,
) -> None:
    """eflomal priors (``eflomal.calculate_priors``) from an existing word alignment of a tokenized bitext (its
    first ``max_lines`` lines of ``lines``), to align new sentences as that alignment aligns: the symmetrized
    links stand for both of eflomal's directions."""
    from itertools import islice

    from moses_recaser.io.corpus import pieces, read_piece

    eflomal = _eflomal()
    src, tgt, links = [], [], []
    for piece in pieces([source, target, alignment], 1, lines):
        rows = zip(*(read_piece(piece, k) for k in range(3)))
        for (_, f), (_, e), (k, a) in islice(rows, max_lines):
            try:
                fs, es, pairs = split_tokens(f), split_tokens(e), parse_links(a)
            except RecaserError as exc:
                raise exc.at(alignment, k) from None
            if any(i >= len(fs) or j >= len(es) for i, j in pairs):
                raise RecaserError("alignment link outside the sentence", alignment, k)
            src.append(_safe(fs))
            tgt.append(_safe(es))
            links.append(" ".join(f"{i}-{j}" for i, j in pairs))
    with atomic_output(out) as fh:
        eflomal.write_priors(fh, *eflomal.calculate_priors(src, tgt, links, links))


def aligned_bitext(
    source: str,
    target: str,
    method: str = "grow-diag-final-and",
    priors: str | os.PathLike[str] | None = None,
    priors_out: str | os.PathLike[str] | None = None,
) -> list[Triple]:
    """The sentence pairs of two tokenized files, with the links ``align`` gives them."""
    triples = list(read_aligned_bitext(source, target))
    links = align(
        [t.source for t in triples],
        [t.target for t in triples],
        method,
        priors=priors,
        priors_out=priors_out,
        where=lambda k: f"{source}:{k + 1}",
    )
    for t, a in zip(triples, links):
        t.links = a
    return triples
