"""The naive phrase aligner (paper section 5): one phrase segmentation per word-aligned sentence pair.

Walking the source left to right, it draws a source phrase length from a distribution and takes
the smallest phrase pair that contains that source span and is consistent with the word
alignment (Och & Ney: no word inside either phrase is linked to a word outside the other).
When that pair would reach back into phrases already made, it retries with other lengths; if
none fits, it merges the conflicting phrases into one (the heuristic that guarantees an end: at
worst the whole sentence is one phrase pair). Source spans with no links become gaps, as
``-drop-unknown`` leaves them in a Moses trace; unaligned target words join the phrase on their
left (the first phrase when they open the sentence). The random draw is seeded per sentence
(``seed``, sentence id), so the result does not depend on how a corpus is split up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np

from moses_recaser.core.triples import Link, Phrase, Triple
from moses_recaser.io.errors import RecaserError

# Documented default when no decoder trace is given: roughly the source phrase lengths of a
# Moses system with the default max-phrase-length 7 on news text (short phrases dominate).
DEFAULT_LENGTHS: dict[int, float] = {1: 0.50, 2: 0.25, 3: 0.12, 4: 0.07, 5: 0.03, 6: 0.02, 7: 0.01}
RETRIES = 8


def length_distribution(triples: Iterable[Triple], max_length: int = 20) -> dict[int, float]:
    """Source phrase lengths of the phrases in decoder traces (``-t``), normalized."""
    counts: Counter[int] = Counter()
    for t in triples:
        for s0, s1, _, _ in t.phrases:
            counts[min(s1 - s0 + 1, max_length)] += 1
    total = sum(counts.values())
    if not total:
        raise RecaserError("the trace has no phrase segmentation (-t markers) to estimate phrase lengths from")
    return {k: v / total for k, v in sorted(counts.items())}


def _closure(s0: int, s1: int, src_links: list[list[int]], tgt_links: list[list[int]]) -> tuple[int, int, int, int]:
    """The smallest consistent phrase pair whose source span contains [s0, s1]; (t0 > t1) if unlinked."""
    t0, t1 = len(tgt_links), -1
    while True:
        for s in range(s0, s1 + 1):
            for t in src_links[s]:
                t0, t1 = min(t0, t), max(t1, t)
        if t1 < 0:
            return s0, s1, t0, t1
        n0, n1 = s0, s1
        for t in range(t0, t1 + 1):
            for s in tgt_links[t]:
                n0, n1 = min(n0, s), max(n1, s)
        if (n0, n1) == (s0, s1):
            return s0, s1, t0, t1
        s0, s1 = n0, n1


def phrase_align(
    n_source: int,
    n_target: int,
    links: Iterable[Link],
    lengths: Mapping[int, float] | None = None,
    rng: np.random.Generator | None = None,
) -> list[Phrase]:
    """One consistent phrase segmentation, phrases in target order (see the module docstring); none where a side
    is empty (an uncleaned corpus' pair with an empty source: its target words are unaligned, as recasing reads
    such a pair)."""
    if n_target == 0 or n_source == 0:
        return []
    lengths = lengths or DEFAULT_LENGTHS
    rng = rng or np.random.default_rng(0)
    src_links: list[list[int]] = [[] for _ in range(n_source)]
    tgt_links: list[list[int]] = [[] for _ in range(n_target)]
    for s, t in links:
        src_links[s].append(t)
        tgt_links[t].append(s)
    sizes = np.array(sorted(lengths), dtype=np.int64)
    probs = np.array([lengths[k] for k in sorted(lengths)], dtype=np.float64)
    probs = probs / probs.sum()

    made: list[list[int]] = []  # [s0, s1, t0, t1] of phrases made so far (source order)
    s = 0
    while s < n_source:
        draws = [int(x) for x in rng.choice(sizes, size=RETRIES, p=probs)]
        chosen = None
        for length in draws + list(range(1, n_source - s + 1)):
            pair = _closure(s, min(s + length, n_source) - 1, src_links, tgt_links)
            if pair[0] >= s:
                chosen = pair
                break
        if chosen is None:
            # every length reaches back into earlier phrases: merge them into this one
            s0, s1, t0, t1 = _closure(s, s, src_links, tgt_links)
            while made and made[-1][1] >= s0:
                s0 = min(s0, made.pop()[0])
                s0, s1, t0, t1 = _closure(s0, s1, src_links, tgt_links)
            chosen = (s0, s1, t0, t1)
        made.append(list(chosen))
        s = chosen[1] + 1

    phrases = sorted((p for p in made if p[3] >= p[2]), key=lambda p: p[2])
    if not phrases:  # nothing is linked: the whole sentence is one phrase pair
        return [(0, n_source - 1, 0, n_target - 1)]
    # unaligned target words: extend the phrase on their left; the first phrase takes any before it
    phrases[0][2] = 0
    for k in range(len(phrases) - 1):
        phrases[k][3] = phrases[k + 1][2] - 1
    phrases[-1][3] = n_target - 1
    return [(p[0], p[1], p[2], p[3]) for p in phrases]


def phrase_align_triple(triple: Triple, lengths: Mapping[int, float] | None = None, seed: int = 0) -> Triple:
    """The triple with phrases from its word links (links kept)."""
    if triple.links is None:
        raise RecaserError("the naive phrase aligner needs word links")
    if seed < 0:
        raise RecaserError(f"the naive phrase aligner's seed must be 0 or more, not {seed}")
    rng = np.random.default_rng([seed, triple.id])
    phrases = phrase_align(len(triple.source), len(triple.target), triple.links, lengths, rng)
    out = Triple(
        id=triple.id,
        source=triple.source,
        target=triple.target,
        phrases=phrases,
        links=triple.links,
        rank=triple.rank,
        nbest=triple.nbest,
        unknown=triple.unknown,
        factors=triple.factors,
        passthrough=triple.passthrough,
    )
    out.validate()
    return out


def lengths_from_trace(source: str | None, trace: str) -> dict[int, float]:
    """The source phrase lengths of a Moses ``-t`` output (``source``: the input the decoder translated)."""
    import logging

    from moses_recaser.moses.trace import read_trace

    if source is None:
        raise RecaserError("`lengths_trace` needs `lengths_source` (the input the decoder translated)")
    lengths = length_distribution(read_trace(source, trace))
    logging.getLogger(__name__).info(
        "source phrase lengths from the trace: %s", " ".join(f"{k}:{v:.3f}" for k, v in lengths.items())
    )
    return lengths
