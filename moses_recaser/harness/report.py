"""An experiment's report: results.md from results.json's contents, and the learning-curve plots."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from moses_recaser.io.outputs import atomic_output

log = logging.getLogger(__name__)


def split_curve(bleu: dict, curve: list[dict], tags: list[str]) -> list[dict]:
    """Moves the learning curve's capitalizers out of ``bleu`` into points of mean gap per training size
    (the last point: the full model's)."""
    gaps = []
    for point, tag in zip(curve, tags + [""]):
        gaps.append(
            {
                "words": point["words"],
                "monolingual_words": point["monolingual_words"],
                "crf": bleu["mean_gap"]["crf" + tag],
                "trigram": bleu["mean_gap"]["trigram" + tag],
            }
        )
    for name in [s + tag for tag in tags for s in ("crf", "trigram")]:
        for row in bleu["systems"].values():
            row.pop(name)
        bleu["mean_gap"].pop(name)
        bleu["mean_bleu"].pop(name)
    return gaps


def results_markdown(results: dict[str, Any]) -> str:
    """results.md: the test table, the CRF-trigram comparison, the learning curve, signatures and BLEU (from a
    results.json's contents)."""
    full = results["full"]
    lines = [
        f"# {results['name']}",
        "",
        (
            f"Test: {full['test_sentences']} sentences, {full['test_words']} words, "
            f"{full['headline_lines']} title-cased headline lines."
        ),
        "",
        "| capitalizer | precision (%) | cased-word F1 (%) | headline precision (%) | errors |",
        "|---|---|---|---|---|",
    ]
    for name, r in full["systems"].items():
        hl = f"{100 * r['headline_precision']:.2f}" if full["headline_lines"] else "–"
        lines.append(f"| {name} | {100 * r['precision']:.2f} | {100 * r['f1']:.2f} | {hl} | {r['errors']} |")
    if full.get("crf_vs_trigram"):
        c = full["crf_vs_trigram"]
        lines += [
            "",
            (
                f"CRF vs trigram: relative error reduction {100 * c['relative_error_reduction']:.1f}%, "
                f"paired bootstrap p = {c['paired_bootstrap_p']:.4f}."
            ),
        ]
    if results.get("learning_curve"):
        lines += ["", "| training words (bitext + monolingual) | trigram (%) | CRF (%) |", "|---|---|---|"]
        for p in results["learning_curve"]:
            lines.append(f"| {size_label(p)} | {100 * p['trigram']:.2f} | {100 * p['crf']:.2f} |")
    lines += ["", "Signatures:", ""] + [f"- {n}: `{r['signature']}`" for n, r in full["systems"].items()]
    if results.get("bleu"):
        from moses_recaser.harness.bleu import bleu_markdown, cased_markdown

        lines += ["", bleu_markdown(results["bleu"]), cased_markdown(results["bleu"])]
    if results.get("wmt21_curve"):
        lines += [
            "Mean gap to the case-insensitive upper bound by training size (the same aligned outputs):",
            "",
            "| training words (bitext + monolingual) | trigram gap | CRF gap |",
            "|---|---|---|",
        ]
        lines += [f"| {size_label(p)} | {p['trigram']:.2f} | {p['crf']:.2f} |" for p in results["wmt21_curve"]]
        lines.append("")
    return "\n".join(lines) + "\n"


def size_label(point: dict) -> str:
    """A learning-curve point's training size: bitext target words (+ monolingual words)."""
    mono = point.get("monolingual_words", 0)
    return f"{point['words']:,}" + (f" + {mono:,}" if mono else "")


def plot_curve(
    curve: list[dict],
    path: Path,
    title: str,
    ylabel: str = "precision (%)",
    scale: float = 100.0,
    level: tuple[str, float] | None = None,
) -> None:
    """Precision (or gap) against training size, CRF vs trigram; ``level``: a labelled horizontal line."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        log.warning("matplotlib is not installed (pip install 'moses-recaser[plot]'); no learning-curve plot")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = [p["words"] for p in curve]
    ax.plot(xs, [scale * p["crf"] for p in curve], "o-", label="CRF-based capitalizer")
    ax.plot(xs, [scale * p["trigram"] for p in curve], "s--", label="LM-based (trigram) capitalizer")
    if level is not None:
        ax.axhline(level[1], color="grey", linestyle=":", label=level[0])
    ax.set_xscale("log")
    ticks: list[float] = []
    for x in sorted(xs, reverse=True):  # the sizes themselves, but none crowding a larger one
        if not ticks or x * 1.5 <= ticks[-1]:
            ticks.append(x)
    ax.set_xticks(ticks, [f"{x / 1000:,.0f}k" for x in ticks])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    mono = any(p.get("monolingual_words") for p in curve)
    ax.set_xlabel("training bitext size (target words)" + ("; monolingual text in proportion" if mono else ""))
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    try:
        with atomic_output(path, binary=True) as fh:
            fig.savefig(fh, format="png", dpi=120)
    finally:
        plt.close(fig)
