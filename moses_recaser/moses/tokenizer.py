"""Tokenization that matches the Moses decoder's token positions.

Moses EMS tokenizes with ``scripts/tokenizer/tokenizer.perl -l LANG`` (escaping on), so trace
positions index that tokenizer's tokens. ``sacremoses`` ports it rule by rule; we call it with
``escape=True`` (``&amp; &#124; &lt; &gt; &apos; &quot; &#91; &#93;``) and without aggressive
hyphen splitting, as tokenizer.perl's defaults. Chinese has no spaces: it is segmented with
jieba (``pip install 'moses-recaser[zh]'``; default dictionary, precise mode, HMM on), then
escaped the same way, so the decoder and the recaser see the same tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from moses_recaser.io.errors import RecaserError

CJK_SEGMENTED = {"zh"}


@cache
def check_language(name: str, lang: str | None) -> None:
    """A language setting is None or an ISO 639 code (sacremoses takes any string, and tokenizes a misspelt one
    as no language at all)."""
    if lang is not None and not (isinstance(lang, str) and re.fullmatch("[a-z]{2,3}", lang)):
        raise RecaserError(f"`{name}` is {lang!r}; give a language code such as en, fr, de, zh")


def tokenizer(lang: str, aggressive_dash_splits: bool = False, caseless: bool = False) -> Callable[[str], list[str]]:
    """A function from a raw line to Moses tokens for ``lang`` (ISO 639-1). ``caseless``: for a line without
    capitals (lowercased MT output), the tokens tokenizer.perl would most likely give the line in its case
    (``Caseless``)."""
    from sacremoses import MosesTokenizer

    mt = caseless_tokenizer(lang) if caseless else MosesTokenizer(lang=lang)
    if lang in CJK_SEGMENTED:
        try:
            import jieba
        except ImportError:
            raise RecaserError("Chinese segmentation needs jieba: pip install 'moses-recaser[zh]'") from None
        jieba.setLogLevel(60)

        def segment(line: str) -> list[str]:
            words = [w for w in jieba.cut(line.strip(), HMM=True) if w.strip()]
            return mt.tokenize(" ".join(words), escape=True, aggressive_dash_splits=aggressive_dash_splits)

        return segment

    def tok(line: str) -> list[str]:
        return mt.tokenize(line, escape=True, aggressive_dash_splits=aggressive_dash_splits)

    return tok


def caseless_tokenizer(lang: str) -> Any:
    """sacremoses' tokenizer, its full-stop rule made for text without capitals. tokenizer.perl keeps ``word.``
    whole when ``word`` is a nonbreaking prefix (``Nr``, ``Dr``, listed as cased) or when a lowercase word follows
    (the sentence goes on); in lowercased text every word is lowercase, and ``nr.`` no prefix, so a sentence's
    last word kept its full stop (``werde.``, a word the model never saw) and ``Nr.`` split. Here a prefix matches
    in any case, and a full stop before any word is split off unless a prefix's."""
    from sacremoses import MosesTokenizer

    class Caseless(MosesTokenizer):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(lang=lang)
            for name in ("NONBREAKING_PREFIXES", "NUMERIC_ONLY_PREFIXES"):
                prefixes = getattr(self, name)
                setattr(self, name, set(prefixes) | {p.lower() for p in prefixes})

        def islower(self, text: str) -> bool:  # (read only by the full-stop rule: "the next word is lowercase")
            return False

    return Caseless()


def tokenize_file(raw: str, out: str, lang: str, aggressive_dash_splits: bool = False, jobs: int = 1) -> None:
    """Tokenize a file line by line (``-``: stdin/stdout), written atomically; ``jobs`` processes share the
    lines, 2,000 at a time (the same output)."""
    from moses_recaser.core.sentences import chunks
    from moses_recaser.core.workers import in_order
    from moses_recaser.io.checks import check_files
    from moses_recaser.io.lines import read_lines
    from moses_recaser.io.outputs import atomic_output

    check_files({"input": raw}, {"output": out}, rewrites=("input",))  # (in place, as the command line allows)
    check_language("lang", lang)  # (sacremoses takes a misspelt one for no language at all)
    tok = tokenizer(lang, aggressive_dash_splits)

    def tokenized(lines: list[str]) -> str:
        return "".join(" ".join(tok(line)) + "\n" for line in lines)

    with atomic_output(out, compress=True) as fh:
        fh.writelines(in_order(jobs, tokenized, chunks(read_lines(raw), 2000)))
