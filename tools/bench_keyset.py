#!/usr/bin/env python3
"""Benchmark: packed key sets (``keyset.KeySet``) against their peer, binary search over sorted int64 keys.

For n-gram-like keys ((a * V + b) * V + c, leading words drawn from a Zipf law as in text, so that keys crowd
around frequent contexts) of several sizes: bytes a key of the lookup structure (``starts`` and ``low``; the
peer: its int64 keys), and the best of --rounds lookups of a million queries, half present and half absent,
with their ratio to the peer's in the same run.

    python tools/bench_keyset.py [--sizes 1000000,6000000,18000000] [--vocab 340000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from moses_recaser.core.keyset import KeySet


def ngram_keys(n: int, vocab: int, rng: np.random.Generator) -> np.ndarray:
    a = rng.zipf(1.2, n) % vocab
    return np.unique((a * vocab + rng.integers(0, 200, n)) * vocab + rng.integers(0, vocab, n))


def best(fn, rounds: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000000,6000000,18000000")
    ap.add_argument("--vocab", type=int, default=340_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(
        "| keys | packed B/key | sorted int64 B/key | packed lookup s | binary search s | ratio |\n"
        "|---|---|---|---|---|---|"
    )
    for n in (int(x) for x in args.sizes.split(",")):
        keys = ngram_keys(n, args.vocab, rng)
        packed, order = KeySet.pack(keys)
        query = np.concatenate([rng.choice(keys, 500_000), rng.integers(0, args.vocab**3, 500_000)])
        rng.shuffle(query)
        pos, found = packed.find(query)
        at = np.minimum(np.searchsorted(keys, query), len(keys) - 1)
        assert (found == (keys[at] == query)).all() and (keys[order[pos[found]]] == query[found]).all()
        t_packed = best(lambda: packed.find(query), args.rounds)
        t_sorted = best(lambda: keys[np.minimum(np.searchsorted(keys, query), len(keys) - 1)] == query, args.rounds)
        size = (packed.starts.nbytes + packed.low.nbytes) / len(keys)
        print(f"| {len(keys):,} | {size:.1f} | 8.0 | {t_packed:.3f} | {t_sorted:.3f} | {t_packed / t_sorted:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
