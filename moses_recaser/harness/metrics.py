"""Evaluation: capitalization precision (eq. 9), cased-word F1, per-tag confusion, paired bootstrap.

Precision compares token by token (the recased output and the reference differ in case only).
F1 is over reference words with an upper-case letter: a hit is such a word recased exactly;
precision of F1 divides by output words with an upper-case letter.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from moses_recaser.core import casing
from moses_recaser.core.casing import TAG_NAMES, Tag
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.lines import LineReader, split_tokens, zip_readers
from moses_recaser.moses.tokenizer import check_language

# casing.tag's classes, as its docstring defines them
TAG_LEGEND = (
    "AL all lowercase (house), IU initial capital (House, I), AU all capitals (NATO), MX mixed case (iPhone), "
    "AN no cased letter (2006, %)"
)


def _has_upper(token: str) -> bool:
    return any(c.isupper() for c in token)


@dataclass
class CaseScores:
    words: int = 0
    correct: int = 0
    ref_upper: int = 0
    hyp_upper: int = 0
    upper_hits: int = 0
    confusion: np.ndarray = field(default_factory=lambda: np.zeros((len(Tag), len(Tag)), dtype=np.int64))
    per_sentence: list[tuple[int, int]] = field(default_factory=list)  # (correct, words)

    @property
    def precision(self) -> float:
        return self.correct / self.words if self.words else 0.0

    @property
    def f1(self) -> float:
        p = self.upper_hits / self.hyp_upper if self.hyp_upper else 0.0
        r = self.upper_hits / self.ref_upper if self.ref_upper else 0.0
        return 2 * p * r / (p + r) if p + r else 0.0

    def confusion_table(self) -> str:
        """Rows: reference tag; columns: output tag; then what the tags mean."""
        head = "ref\\out " + " ".join(f"{n:>7}" for n in TAG_NAMES)
        rows = [head] + [
            f"{TAG_NAMES[i]:<7} " + " ".join(f"{int(x):>7}" for x in self.confusion[i]) for i in range(len(Tag))
        ]
        return "\n".join([*rows, TAG_LEGEND])


def case_scores(hyps: Iterable[Sequence[str]], refs: Iterable[Sequence[str]], where: str | None = None) -> CaseScores:
    """Scores of recased sentences against their references (token lists that differ in case only; an error
    names ``where`` and the line where they do not)."""
    s = CaseScores()
    for k, (h, r) in enumerate(zip(hyps, refs, strict=True), 1):
        if len(h) != len(r) or any(casing.lower(a) != casing.lower(b) for a, b in zip(h, r)):
            raise RecaserError(_differ(h, r) if where else f"sentence {k}: {_differ(h, r)}", where, k)
        c = 0
        for a, b in zip(h, r):
            c += a == b
            s.confusion[casing.tag(b), casing.tag(a)] += 1
            if _has_upper(b):
                s.ref_upper += 1
                s.upper_hits += a == b
            if _has_upper(a):
                s.hyp_upper += 1
        s.correct += c
        s.words += len(r)
        s.per_sentence.append((c, len(r)))
    return s


def paired_bootstrap_precision(a: CaseScores, b: CaseScores, samples: int = 1000, seed: int = 12345) -> float:
    """p-value that system a's precision is not better than b's (paired bootstrap over sentences)."""
    ca = np.array([c for c, _ in a.per_sentence], dtype=np.float64)
    cb = np.array([c for c, _ in b.per_sentence], dtype=np.float64)
    n = np.array([w for _, w in a.per_sentence], dtype=np.float64)
    rng = np.random.default_rng(seed)
    worse = 0
    for _ in range(samples):
        idx = rng.integers(0, len(n), len(n))
        if ca[idx].sum() <= cb[idx].sum():
            worse += 1
    return (worse + 1) / (samples + 1)


def _differ(h: Sequence[str], r: Sequence[str]) -> str:
    """What differs in more than case, and the likely cause."""
    k = next((i for i, (a, b) in enumerate(zip(h, r)) if casing.lower(a) != casing.lower(b)), min(len(h), len(r)))
    got, want = (h[k] if k < len(h) else "(end)"), (r[k] if k < len(r) else "(end)")
    return (
        f"output and reference differ in more than case at word {k + 1} ({got!r} against {want!r}): "
        "both must be the same tokenized text (is the reference detokenized, or tokenized otherwise?)"
    )


def case_scores_of_files(hyp: str, ref: str) -> CaseScores:
    """``case_scores`` of a recased file against its cased reference, both tokenized the same way."""
    return evaluate_files(hyp, ref, bleu=False).case


@dataclass
class Evaluation:
    """``eval``'s result: the case scores, tokenized BLEU (cased and not; None when not asked for) and the
    signature of every setting behind them."""

    case: CaseScores
    bleu: float | None
    bleu_ci: float | None
    signature: str

    def line(self) -> str:
        s = self.case
        text = (
            f"precision {100 * s.precision:.2f}  cased-word F1 {100 * s.f1:.2f}  words {s.words}  "
            f"errors {s.words - s.correct}"
        )
        if self.bleu is not None:
            text += f"  BLEU {self.bleu:.2f}  case-insensitive BLEU {self.bleu_ci:.2f}"
        return text


def evaluate_files(
    hyp: str, ref: str, *, bleu: bool = True, raw: bool = False, target_lang: str | None = None
) -> Evaluation:
    """Precision, cased-word F1 and BLEU of a recased file against its cased reference. Tokenized files are
    scored as multi-bleu.perl scores them (sacrebleu, ``tokenize="none"``). ``raw`` files are scored as sacrebleu
    scores detokenized text: its default tokenizer for ``target_lang`` (13a; ``zh`` for Chinese, ``ja-mecab``
    and ``ko-mecab``), and precision and F1 over the same tokens."""
    from moses_recaser.core.signature import signature
    from moses_recaser.io.checks import check_files

    check_files({"hyp": hyp, "ref": ref}, {})

    if target_lang is not None and not raw:
        raise RecaserError("`target_lang` chooses how raw text is tokenized for BLEU: give `raw` too")
    check_language("target_lang", target_lang)
    # a file that ends early is named at the first line the other has more
    pairs = list(zip_readers(LineReader(hyp), LineReader(ref)))
    hyp_lines, ref_lines = [h for h, _ in pairs], [r for _, r in pairs]
    import sacrebleu

    # force: tokenized text is what this BLEU scores (sacrebleu would warn about it)
    kind = {"trg_lang": target_lang or ""} if raw else {"tokenize": "none", "force": True}
    try:
        cased, lowered = sacrebleu.BLEU(**kind), sacrebleu.BLEU(**kind, lowercase=True)
    except RuntimeError as exc:  # (a tokenizer's missing extra: its message says what to install)
        extra = " ".join(str(exc).split()[-3:])  # "pip install sacrebleu[ja]"
        raise RecaserError(f"sacrebleu cannot tokenize `target_lang` {target_lang} here: {extra}") from None
    words = (lambda line: split_tokens(cased.tokenizer(line))) if raw else split_tokens
    scores = case_scores(map(words, hyp_lines), map(words, ref_lines), where=hyp)
    if not bleu:
        return Evaluation(scores, None, None, signature(("eval", "precision+f1")))
    b = cased.corpus_score(hyp_lines, [ref_lines]).score
    ci = lowered.corpus_score(hyp_lines, [ref_lines]).score
    return Evaluation(scores, b, ci, signature(("eval", "precision+f1+bleu"), ("bleu", str(cased.get_signature()))))
