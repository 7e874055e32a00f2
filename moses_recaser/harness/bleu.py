"""End-to-end BLEU on real MT output (WMT21 system outputs), recased from lowercase, and from its own case.

For every system: tokenize its output (Moses rules), lowercase it, align it to the tokenized source
with eflomal and the priors of the training alignment (these systems give no trace), recase with
each capitalizer, detokenize, and score cased BLEU and chrF against reference A with sacrebleu.
Beside them: the system's own cased BLEU (its native casing), and the case-insensitive BLEU of the
recased output, the upper bound a perfect capitalizer reaches.

With a CRF trained for cased input (``input_case: cased``), the system's own cased output is recased too
(``native:crf``: its case read as evidence) and set beside the same tokens with the system's case
(``native:tok``, the output tokenized and detokenized again): the two differ in case only, and the recaser
must never score below the system's own case.

The CRF also recases each lowercased output by the raw route (``crf-raw``): the raw line and the raw source, as
``moses-recaser recase --raw --source`` takes them (``Recaser.recase_file``), tokenized, aligned with the model's
table (``stats.table_align``) and recased inside, the case projected back onto the input line; nothing is
detokenized. Its output must differ from its input in case alone (``case_only``, recorded per system).
"""

from __future__ import annotations

import fnmatch
import logging
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from moses_recaser.core import casing
from moses_recaser.core.triples import Triple
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import kind_of, read_lines, whole_text
from moses_recaser.io.outputs import atomic_output, entries, make_dirs
from moses_recaser.model.recaser import Recaser

if TYPE_CHECKING:
    from moses_recaser.harness.systems import Capitalizer

log = logging.getLogger(__name__)


def sacrebleu_scores(hyps: Sequence[str], refs: Sequence[str]) -> dict:
    import sacrebleu

    bleu = sacrebleu.BLEU()
    bleu_ci = sacrebleu.BLEU(lowercase=True)
    chrf = sacrebleu.CHRF()
    b = bleu.corpus_score(list(hyps), [list(refs)])
    ci = bleu_ci.corpus_score(list(hyps), [list(refs)])
    c = chrf.corpus_score(list(hyps), [list(refs)])
    return {
        "bleu": b.score,
        "bleu_ci": ci.score,
        "chrf": c.score,
        "bleu_signature": str(bleu.get_signature()),
        "bleu_ci_signature": str(bleu_ci.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def wmt21_runs(root: Path, pair: str, systems: Sequence[str] | None = None) -> tuple[Path, Path, list[Path]]:
    d = root / "wmt-system-outputs" / "wmt21" / "txt"
    src_lang, tgt_lang = pair.split("-")
    src = d / "sources" / f"newstest2021.{pair}.src.{src_lang}"
    ref = d / "references" / f"newstest2021.{pair}.ref.A.{tgt_lang}"
    outputs = d / "system-outputs"
    try:
        names = [n for n in entries(outputs) if fnmatch.fnmatchcase(n, f"newstest2021.{pair}.hyp.*.{tgt_lang}")]
    except OSError:
        names = []
    hyps = sorted(outputs / n for n in names)
    if systems:
        hyps = [h for h in hyps if h.name.split(".hyp.")[1].rsplit(".", 1)[0] in systems]
    if kind_of(src) != "file" or kind_of(ref) != "file" or not hyps:
        raise RecaserError(f"no WMT21 {pair} source, reference or system outputs here", str(d))
    return src, ref, hyps


def run_bleu(
    pair: str,
    root: Path,
    capitalizers: dict[str, Capitalizer],
    priors: Path,
    out: Path,
    systems: Sequence[str] | None = None,
) -> dict:
    from sacremoses import MosesDetokenizer

    from moses_recaser.moses.tokenizer import tokenizer
    from moses_recaser.stats.eflomal import align

    src_lang, tgt_lang = pair.split("-")
    src_path, ref_path, hyp_paths = wmt21_runs(root, pair, systems)
    src_tok = [tokenizer(src_lang)(x) for x in read_lines(src_path)]
    refs = list(read_lines(ref_path))
    detok = MosesDetokenizer(lang=tgt_lang)
    results: dict = {"pair": pair, "systems": {}}
    crf = capitalizers.get("crf")
    crf = crf if isinstance(crf, Recaser) else None  # (the raw routes take a Recaser: it reads raw files)
    make_dirs(out)
    for hyp_path in hyp_paths:
        system = hyp_path.name.split(".hyp.")[1].rsplit(".", 1)[0]
        raw = list(read_lines(hyp_path))
        tok = [tokenizer(tgt_lang)(x) for x in raw]
        low = [[casing.lower_all(w) for w in t] for t in tok]
        links = align(src_tok, low, priors=priors)
        triples = [Triple(k, s, t, links=a) for k, (s, t, a) in enumerate(zip(src_tok, low, links))]
        row: dict = {"native": sacrebleu_scores(raw, refs)}
        lowered = [detok.detokenize(t) for t in low]
        row["lowercase"] = sacrebleu_scores(lowered, refs)
        for name, cap in capitalizers.items():
            recased = list(cap.recase_triples(triples))
            text = [detok.detokenize(t) for t in recased]
            _write(out / f"{pair}.{system}.{name}.{tgt_lang}", text)
            row[name] = sacrebleu_scores(text, refs)
        if crf is not None:
            low = _write(out / f"{pair}.{system}.lowercase.{tgt_lang}", [x.lower() for x in raw])
            row["crf-raw"] = _raw_route(crf, src_path, low, out / f"{pair}.{system}.crf-raw.{tgt_lang}", pair, refs)
        if crf is not None and crf.weights.cased:
            cased = [Triple(k, s, t, links=a) for k, (s, t, a) in enumerate(zip(src_tok, tok, links))]
            row["native:tok"] = sacrebleu_scores([detok.detokenize(t) for t in tok], refs)
            text = [detok.detokenize(t) for t in list(crf.recase_triples(cased))]
            _write(out / f"{pair}.{system}.native-crf.{tgt_lang}", text)
            row["native:crf"] = sacrebleu_scores(text, refs)
            row["native:crf-raw"] = _raw_route(
                crf, src_path, hyp_path, out / f"{pair}.{system}.native-crf-raw.{tgt_lang}", pair, refs
            )
        results["systems"][system] = row
        log.info(
            "%s %s: native %.2f, crf %.2f, upper bound %.2f",
            pair,
            system,
            row["native"]["bleu"],
            row.get("crf", row["native"])["bleu"],
            row.get("crf", row["native"])["bleu_ci"],
        )
    names = ["native"] + list(capitalizers) + (["crf-raw"] if crf is not None else [])
    results["mean_gap"] = {
        n: statistics.mean(r[n]["bleu_ci"] - r[n]["bleu"] for r in results["systems"].values()) for n in names
    }
    results["mean_bleu"] = {n: statistics.mean(r[n]["bleu"] for r in results["systems"].values()) for n in names}
    return results


def _raw_route(crf: Recaser, src: Path, hyp: Path, out: Path, pair: str, refs: Sequence[str]) -> dict:
    """The raw route's scores: the raw lines of ``hyp`` recased with their raw source into ``out``, as the command
    line does it, and whether the output differs from its input in case alone (``case_only``)."""
    src_lang, tgt_lang = pair.split("-")
    crf.recase_file(
        str(hyp), str(out), source=str(src), align=True, raw=True, source_lang=src_lang, target_lang=tgt_lang
    )
    given, got = (whole_text(p).splitlines() for p in (hyp, out))
    scores = sacrebleu_scores(got, refs)
    scores["case_only"] = casing.is_recasing_of("\n".join(got), "\n".join(given))
    return scores


def _write(path: Path, lines: Sequence[str]) -> Path:
    with atomic_output(path) as fh:
        fh.write("".join(x + "\n" for x in lines))
    return path


def cased_markdown(results: dict) -> str:
    """The table of recasing each system's own cased output against its case: tokenized (``native:crf`` against
    ``native:tok``) and raw (``native:crf-raw`` against ``native``); empty when the model was not trained for
    cased input."""
    rows = {k: r for k, r in results["systems"].items() if "native:crf" in r}
    if not rows:
        return ""
    lines = [
        f"## WMT21 {results['pair']}: the systems' own cased output, recased (its case read as evidence)",
        "",
        "| system | own case BLEU | recased BLEU | gain | raw: own case | raw: recased | raw: gain | case-insens. |",
        "|---|---|---|---|---|---|---|---|",
    ]
    pairs = {"tokenized": ("native:tok", "native:crf"), "raw": ("native", "native:crf-raw")}
    gains: dict[str, list[float]] = {k: [] for k in pairs}
    for system, r in rows.items():
        cells = []
        for route, (own, rec) in pairs.items():
            gains[route].append(r[rec]["bleu"] - r[own]["bleu"])
            cells.append(f"{r[own]['bleu']:.2f} | {r[rec]['bleu']:.2f} | {gains[route][-1]:+.2f}")
        lines.append(f"| {system} | " + " | ".join(cells) + f" | {r['native']['bleu_ci']:.2f} |")
    means = [f"{statistics.mean(g):+.2f} ({min(g):+.2f}, {max(g):+.2f})" for g in gains.values()]
    lines.append(f"| **mean** (least, most) | | | {means[0]} | | | {means[1]} | |")
    return "\n".join(lines) + "\n"


def bleu_markdown(results: dict) -> str:
    names = list(results["mean_gap"])
    lines = [
        f"## End-to-end BLEU, WMT21 {results['pair']} ({len(results['systems'])} systems)",
        "",
        "| system | " + " | ".join(f"{n} BLEU" for n in names) + " | upper bound |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for system, r in results["systems"].items():
        ub = r[names[-1]]["bleu_ci"]
        lines.append(f"| {system} | " + " | ".join(f"{r[n]['bleu']:.2f}" for n in names) + f" | {ub:.2f} |")
    lines.append(
        "| **mean gap to the upper bound** | " + " | ".join(f"{results['mean_gap'][n]:.2f}" for n in names) + " | |"
    )
    any_row = next(iter(results["systems"].values()))
    lines += [
        "",
        (
            f"sacrebleu: `{any_row['native']['bleu_signature']}`, case-insensitive "
            f"`{any_row['native']['bleu_ci_signature']}`"
        ),
    ]
    return "\n".join(lines) + "\n"
