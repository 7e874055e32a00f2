"""Tokenization that matches the Moses decoder's token positions.

Moses EMS tokenizes with ``scripts/tokenizer/tokenizer.perl -l LANG`` (escaping on), so trace
positions index that tokenizer's tokens. ``sacremoses`` ports it rule by rule; we call it with
``escape=True`` (``&amp; &#124; &lt; &gt; &apos; &quot; &#91; &#93;``) and without aggressive
hyphen splitting, as tokenizer.perl's defaults. Chinese has no spaces: it is segmented with
jieba (``pip install 'moses-recaser[zh]'``; default dictionary, precise mode, HMM on), then
escaped the same way, so the decoder and the recaser see the same tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from moses_recaser.io.errors import RecaserError

CJK_SEGMENTED = {"zh"}


@cache
def tokenizer(lang: str, aggressive_dash_splits: bool = False) -> Callable[[str], list[str]]:
    """A function from a raw line to Moses tokens for ``lang`` (ISO 639-1)."""
    from sacremoses import MosesTokenizer

    mt = MosesTokenizer(lang=lang)
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


def tokenize_file(raw: str, out: str, lang: str, aggressive_dash_splits: bool = False) -> None:
    """Tokenize a file line by line (``-``: stdin/stdout), written atomically."""
    from moses_recaser.io.lines import read_lines
    from moses_recaser.io.outputs import atomic_output

    tok = tokenizer(lang, aggressive_dash_splits)
    with atomic_output(out, compress=True) as fh:
        for line in read_lines(raw):
            fh.write(" ".join(tok(line)) + "\n")
