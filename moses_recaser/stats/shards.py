"""Statistics in map/reduce shape, for a cluster: count shards apart, merge the counts into one model.

``moses-recaser count --shard i/N`` counts the i-th of N contiguous line blocks of the word-aligned bitext
(``counter.Counter``: tables, punctuation and LM n-gram counts) into one ``.npz`` file, its key tables sorted
(spilled to sorted runs and merged when they pass ``--memory``); ``moses-recaser merge`` sums the shard files
and writes the model a single pass (``stats``) writes: counts add up because no sentence crosses a shard, and
the forms come out in order of first appearance because the shards are merged in order. The merge reads the
shard files' tables a block at a time (``merge.merge``), within ``--memory``. ``train --jobs N`` and
``moses-recaser-ems train -cores N`` do the same on one machine (``parallel.count_corpus``); this is for shards
that run as jobs of their own (a Slurm array, GNU parallel, EMS's qsub), their files collected for the merge
(docs/cluster.md).
"""

from __future__ import annotations

import collections
import re
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np

from moses_recaser.core.memory import Memory
from moses_recaser.io.corpus import corpus_digest, corpus_lines, pieces
from moses_recaser.io.diskarrays import Scratch
from moses_recaser.io.errors import RecaserError
from moses_recaser.io.outputs import model_target, work_dir
from moses_recaser.stats.counter import Counter, Shard, check_lm_order, count_piece, load_shard, save_shard
from moses_recaser.stats.merge import merge

_SHARD = re.compile(r"([0-9]+)/([0-9]+)")


def parse_shard(text: str) -> tuple[int, int]:
    m = _SHARD.fullmatch(text)
    if m is None or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise RecaserError(f"`shard` must be i/N with 1 <= i <= N, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def shard_range(n_lines: int, i: int, n: int) -> tuple[int, int]:
    """Lines [start, end) of shard i (1-based) of n contiguous blocks."""
    return (i - 1) * n_lines // n, i * n_lines // n


def count_shard(
    src: str,
    tgt: str,
    alignment: str,
    i: int,
    n: int,
    order: int,
    out: str | IO[bytes],
    memory: Memory | None = None,
    work: str | None = None,
) -> None:
    """The counts of shard i of n into a shard file (with its place, for the merge), within ``memory`` (runs in a
    scratch directory of ``work``, default the system's temporary directory)."""
    check_lm_order(order)  # (a Counter of order 0 counts tables only: merge would refuse it, after the work)
    memory = memory or Memory.from_setting(None)
    files = [src, tgt, alignment]
    start, end = shard_range(corpus_lines(files), i, n)
    part = pieces(files, 1, (start, end))
    with work_dir("moses-recaser-count", work) as tmp:
        scratch = Scratch(tmp)
        shard = count_piece(part[0], order, None, (), memory.left(), scratch) if part else Counter(order).shard()
        shard.owned = True
        shard.arrays["shard"] = np.array([i, n, start, end])
        shard.arrays["corpus"] = np.array(corpus_digest(files))
        save_shard(out, shard, scratch, memory.working())


def _one_split(paths: Sequence[str], shards: list[Shard]) -> list[Shard]:
    """The shards in the order of their lines, checked to be shards 1..N of one split of one corpus: counted from
    files of the same text (``corpus_digest``), each holding the lines ``shard_range`` gives it in a corpus of the
    last one's end (shards counted from a corpus that grew or changed between them would leave lines out, count
    them twice, or mix two corpora)."""
    for p, z in zip(paths, shards):
        if "shard" not in z or "corpus" not in z:
            raise RecaserError("not a file of 'moses-recaser count --shard'", p)
    placed = sorted(zip(paths, shards), key=lambda pz: int(pz[1]["shard"][0]))
    # the split of most files (of the lowest shard, on a tie) is the one meant; a file of another is named
    n = collections.Counter(int(z["shard"][1]) for _, z in placed).most_common(1)[0][0]
    odd = [(p, int(z["shard"][0]), int(z["shard"][1])) for p, z in placed if int(z["shard"][1]) != n]
    if odd:
        p, i, m = odd[0]
        others = "the others are" if len(odd) == 1 else f"{len(placed) - len(odd)} others are"
        raise RecaserError(f"shard {i} of {m}, {others} of {n}: give the shards of one split", p)
    seen: dict[int, str] = {}
    for p, z in placed:
        i = int(z["shard"][0])
        if i in seen:
            raise RecaserError(f"shard {i} of {n} again ({seen[i]} is that shard too): give each shard once", p)
        seen[i] = p
    missing = [str(i) for i in range(1, n + 1) if i not in seen]
    if missing:
        what = f"shard {missing[0]} of {n} is" if len(missing) == 1 else f"shards {', '.join(missing)} of {n} are"
        raise RecaserError(f"{what} missing: merge takes the count files of shards 1 to {n}")
    total = int(placed[-1][1]["shard"][3])
    for p, z in placed:
        i, n, start, end = (int(v) for v in z["shard"])
        a, b = shard_range(total, i, n)
        if (start, end) != (a, b):
            raise RecaserError(
                f"shard {i}/{n} holds lines {start + 1}-{end}, but shard {n}/{n} ends at line {total}, in whose "
                f"split shard {i}/{n} holds lines {a + 1}-{b}: the shards were counted from different corpora",
                p,
            )
    corpus = str(placed[0][1]["corpus"])
    for p, z in placed:
        if str(z["corpus"]) != corpus:
            i, n = (int(v) for v in z["shard"][:2])
            raise RecaserError(
                f"shard {i}/{n} was counted from another corpus than shard 1/{n} (its files' text differs): count "
                "every shard from the same files",
                p,
            )
    return [z for _, z in placed]


def merge_into_model(
    paths: Sequence[str],
    model: str,
    discount_fallback: bool = True,
    memory: Memory | None = None,
    prune: int = 0,
    work: str | None = None,
) -> str:
    """The statistics model of shard count files (what ``build.write_statistics`` makes of the whole bitext),
    merged within ``memory``; its signature."""
    from moses_recaser.io.modeldir import write_model
    from moses_recaser.stats.build import StatsSettings, estimate_lm
    from moses_recaser.stats.tables import write_tables

    model_target(model)
    memory = memory or Memory.from_setting(None)
    shards = _one_split(paths, [load_shard(p) for p in paths])
    orders = {int(z["order"]) for z in shards}
    if len(orders) != 1:
        raise RecaserError(f"the shards were counted with different LM orders: {sorted(orders)}")
    order = orders.pop()
    settings = StatsSettings(lm_order=order, alignment="file", discount_fallback=discount_fallback, lm_prune=prune)
    with work_dir("moses-recaser", work) as tmp:
        scratch = Scratch(tmp)
        counts = merge(shards, order, scratch, memory.working())
        out = Path(tmp)
        write_tables(counts, out / "tables.npz", scratch, memory.working())
        estimate_lm(counts, str(out / "lm.arpa"), settings.discount_fallback, prune, None, scratch, memory)
        write_model(
            model,
            settings=vars(settings),
            signature=settings.signature(),
            copy_files={"tables.npz": str(out / "tables.npz"), "lm.arpa": str(out / "lm.arpa")},
            extra={"corpus": {"sentences": counts.sentences, "target_tokens": counts.target_tokens}},
        )
    return settings.signature()
