"""Statistics in map/reduce shape: count shards apart, merge the counts into one model.

``moses-recaser count --shard i/N`` counts the i-th of N contiguous line blocks of the bitext (LM
n-grams of the target, translation/tag pairs, forms) into one ``.npz`` file; ``moses-recaser merge``
sums the shard files and writes the same model a single pass (``stats``) writes: n-gram counts add up
because no sentence crosses a shard, and the vocabulary order (first appearance) is rebuilt by
taking the shards in order. Each shard needs memory for its own counts only, and shards can run as
separate processes on one machine or as jobs on a cluster (a Slurm array, EMS's qsub), their files
collected for the merge.
"""

from __future__ import annotations

import re
import zipfile
from collections import Counter
from collections.abc import Sequence
from typing import IO

import numpy as np

from moses_recaser.errors import RecaserError
from moses_recaser.modeldir import save_npz, text_array, words_of
from moses_recaser.moses.bitext import read_aligned_bitext
from moses_recaser.stats.kneser_ney import NGramCounts, count_ngrams
from moses_recaser.stats.tables import PairCounts, StatsCounts, count_triples
from moses_recaser.textio import LineReader

_SHARD = re.compile(r"([0-9]+)/([0-9]+)")
FORMAT = 2  # 2: punctuation counts


def parse_shard(text: str) -> tuple[int, int]:
    m = _SHARD.fullmatch(text)
    if m is None or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise RecaserError(f"--shard must be i/N with 1 <= i <= N, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def shard_range(n_lines: int, i: int, n: int) -> tuple[int, int]:
    """Lines [start, end) of shard i (1-based) of n contiguous blocks."""
    return (i - 1) * n_lines // n, i * n_lines // n


def _pairs_to_arrays(prefix: str, pc: PairCounts) -> dict[str, np.ndarray]:
    items = list(pc.pairs.items())
    return {f"{prefix}_src": text_array([f for (f, _), _ in items]),
            f"{prefix}_tgt": text_array([e for (_, e), _ in items]),
            f"{prefix}_n": np.array([c for _, c in items], dtype=np.int64)}


def _pairs_from_arrays(prefix: str, z: dict[str, np.ndarray]) -> PairCounts:
    src, tgt, n = words_of(z[f"{prefix}_src"]), words_of(z[f"{prefix}_tgt"]), z[f"{prefix}_n"].tolist()
    return PairCounts(Counter({(f, e): c for f, e, c in zip(src, tgt, n)}))


def count_shard(src: str, tgt: str, alignment: str, i: int, n: int, order: int, out: str | IO[bytes]) -> None:
    n_lines = sum(1 for _ in LineReader(tgt))
    start, end = shard_range(n_lines, i, n)
    triples = [t for t in read_aligned_bitext(src, tgt, alignment) if start <= t.id < end]
    stats = count_triples(triples)
    lm = count_ngrams((t.target for t in triples), order)
    arrays: dict[str, np.ndarray] = {
        "format": np.array(FORMAT), "shard": np.array([i, n, start, end]), "order": np.array(order),
        "vocab": text_array(lm.vocab), "tags": stats.tags,
        "forms": text_array(list(stats.forms)), "forms_n": np.array(list(stats.forms.values()), dtype=np.int64),
        "initial": text_array(list(stats.initial)), "initial_n": np.array(list(stats.initial.values()), dtype=np.int64),
        "punct": text_array(list(stats.punct)), "punct_n": np.array(list(stats.punct.values()), dtype=np.int64),
        "totals": np.array([stats.sentences, stats.target_tokens], dtype=np.int64),
    }
    arrays.update(_pairs_to_arrays("cased", stats.cased))
    arrays.update(_pairs_to_arrays("lower", stats.lower))
    for k in range(1, order + 1):
        arrays[f"ngrams{k}"] = lm.words(k, np.arange(len(lm.keys[k - 1]))).astype(np.int64)
        arrays[f"counts{k}"] = lm.counts[k - 1]
    save_npz(out, arrays)


def merge_shards(paths: Sequence[str]) -> tuple[StatsCounts, NGramCounts]:
    """Summed statistics and LM counts of shard files (taken in shard order)."""
    loaded = []
    for p in paths:
        try:
            with np.load(p, allow_pickle=False) as z:
                loaded.append({k: z[k] for k in z.files})
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise RecaserError(f"not a shard count file ({exc})", p) from None
        if int(loaded[-1].get("format", -1)) != FORMAT:
            raise RecaserError("shard count file of an unknown format", p)
    loaded.sort(key=lambda z: int(z["shard"][0]))
    ns = {int(z["shard"][1]) for z in loaded}
    got = [int(z["shard"][0]) for z in loaded]
    if len(ns) != 1 or got != list(range(1, ns.pop() + 1)):
        raise RecaserError(f"the shard files must be shards 1..N of one split; got {got}")
    orders = {int(z["order"]) for z in loaded}
    if len(orders) != 1:
        raise RecaserError(f"the shards were counted with different LM orders: {sorted(orders)}")
    order = orders.pop()

    stats = StatsCounts()
    for z in loaded:
        part = StatsCounts(cased=_pairs_from_arrays("cased", z), lower=_pairs_from_arrays("lower", z),
                           tags=z["tags"].astype(np.int64),
                           forms=Counter(dict(zip(words_of(z["forms"]), z["forms_n"].tolist()))),
                           initial=Counter(dict(zip(words_of(z["initial"]), z["initial_n"].tolist()))),
                           punct=Counter(dict(zip(words_of(z["punct"]), z["punct_n"].tolist()))),
                           sentences=int(z["totals"][0]), target_tokens=int(z["totals"][1]))
        stats.merge(part)

    # global vocabulary in first-appearance order: shard 1's, then each later shard's new words
    vocab: list[str] = []
    index: dict[str, int] = {}
    remaps = []
    for z in loaded:
        words = words_of(z["vocab"])
        for w in words:
            if w not in index:
                index[w] = len(vocab)
                vocab.append(w)
        remaps.append(np.array([index[w] for w in words], dtype=np.int64))
    per_order = []
    for k in range(1, order + 1):
        grams = np.concatenate([remap[z[f"ngrams{k}"]] for z, remap in zip(loaded, remaps)]).reshape(-1, k)
        counts = np.concatenate([z[f"counts{k}"] for z in loaded])
        per_order.append((grams, counts))
    return stats, counts_from_ngrams(vocab, per_order, order)


def counts_from_ngrams(vocab: list[str], per_order: list[tuple[np.ndarray, np.ndarray]], order: int) -> NGramCounts:
    """NGramCounts (hierarchical keys, suffix ids) from word-id tuples and counts of every order."""
    V = len(vocab)
    out = NGramCounts(order=order, vocab=vocab)
    grams1, counts1 = per_order[0]
    out.keys.append(np.arange(V, dtype=np.int64))
    out.counts.append(np.bincount(grams1[:, 0], weights=counts1, minlength=V).astype(np.int64))
    out.suffix.append(np.zeros(V, dtype=np.int64))

    def ids_of(tuples: np.ndarray) -> np.ndarray:
        """Table index of each m-gram (rows of ``tuples``) in the order-m table."""
        idx = tuples[:, 0].copy()
        for m in range(2, tuples.shape[1] + 1):
            key = idx * V + tuples[:, m - 1]
            idx = np.searchsorted(out.keys[m - 1], key)
        return idx

    for n in range(2, order + 1):
        grams, counts = per_order[n - 1]
        keys = ids_of(grams[:, : n - 1]) * V + grams[:, n - 1]
        uniq, inverse = np.unique(keys, return_inverse=True)
        summed = np.bincount(inverse, weights=counts, minlength=len(uniq)).astype(np.int64)
        out.keys.append(uniq)
        out.counts.append(summed)
        suffix = np.empty(len(uniq), dtype=np.int64)
        suffix[inverse] = ids_of(grams[:, 1:])
        out.suffix.append(suffix)
    return out


def merge_into_model(paths: Sequence[str], model: str, discount_fallback: bool = True) -> str:
    """The statistics model of shard count files (what ``build.write_statistics`` makes of the whole
    bitext); its signature."""
    from pathlib import Path

    from moses_recaser.modeldir import write_model
    from moses_recaser.stats.build import StatsSettings, tempdir, version_signature
    from moses_recaser.stats.kneser_ney import estimate, write_arpa
    from moses_recaser.stats.tables import Tables
    from moses_recaser.textio import atomic_output

    stats, ngrams = merge_shards(paths)
    settings = StatsSettings(lm_order=ngrams.order, alignment="file", discount_fallback=discount_fallback)
    with tempdir() as work:
        arpa = Path(work) / "lm.arpa"
        with atomic_output(arpa) as out:
            write_arpa(estimate(ngrams, settings.discount_fallback), out)
        write_model(model, settings=vars(settings), signature=version_signature(settings),
                    writers=[Tables.from_counts(stats).save], copy_files={"lm.arpa": str(arpa)},
                    extra={"corpus": {"sentences": stats.sentences, "target_tokens": stats.target_tokens}})
    return version_signature(settings)
