"""The CRF (paper sections 4.1-4.2): exact forward-backward and regularized training.

The LM feature conditions on the two previous candidates, so the lattice is second order: its
states at position i are pairs (candidate at i-1, candidate at i), and the LM factor at i scores
the triple (c_{i-2}, c_{i-1}, c_i); position n is the end of sentence. Forward-backward runs in probability
space, each position's messages rescaled to sum to one (their logs summed give log Z).
Sentences of equal length are stacked and processed together (numpy over the batch and the
candidate axes), which is exact: padding candidates get a score of -inf.

Training maximizes eq. 5, ``sum_n log p(E_n | F_n, A_n) - ||w||^2 / (2 sigma^2)``, with L-BFGS (scipy)
on the exact gradient ``F(gold) - E[F] - w / sigma^2``. Decoding is ``viterbi``'s, on the flat lattice.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cached_property
from itertools import chain
from typing import Any

import numpy as np

from moses_recaser.core.workers import worker_signals
from moses_recaser.model import viterbi
from moses_recaser.model.lattice import Flat

log = logging.getLogger(__name__)
NEG = -np.inf


@dataclass
class Batch:
    """Sentences of one length n, padded to K candidates: arrays with a leading batch axis."""

    unary: np.ndarray  # (S, n, K, D)
    lm: np.ndarray  # (S, n + 1, K, K, K)
    valid: np.ndarray  # (S, n, K)
    gold: np.ndarray | None  # (S, n)
    members: list[int]  # indices of the sentences in the input list

    @property
    def n(self) -> int:
        return self.unary.shape[1]

    @cached_property
    def gold_features(self) -> tuple[np.ndarray, float] | None:
        """The unary features (D,) and the LM feature of the reference paths, summed over the batch; None when
        a position is unlabeled (the reference side is then an expectation)."""
        g = self.gold
        if g is None or (g < 0).any():
            return None
        S, n = g.shape
        rows, cols = np.arange(S)[:, None], np.arange(n)[None, :]
        unary = self.unary[rows, cols, g].sum(axis=(0, 1))
        path = np.concatenate([np.zeros((S, 2), dtype=np.int64), g, np.zeros((S, 1), dtype=np.int64)], axis=1)
        steps = np.arange(n + 1)[None, :]
        lm = self.lm[rows, steps, path[:, :-2], path[:, 1:-1], path[:, 2:]].sum()
        return unary, float(lm)

    @cached_property
    def lm_range(self) -> tuple[np.ndarray, np.ndarray]:
        """The least and the largest LM value per sentence and position (S, n + 1), padding included."""
        return self.lm.min(axis=(2, 3, 4)), self.lm.max(axis=(2, 3, 4))


def make_batches(flats: Sequence[Flat], max_batch: int = 512) -> list[Batch]:
    """The flats' sentences (those with words) grouped by length, in order, and padded to the most
    candidates at a position in their batch; ``gold`` is set when every sentence of a batch has one."""
    by_len: dict[int, list[_Dense]] = defaultdict(list)
    k = 0
    for flat in flats:
        for dense in _dense_sentences(flat):
            if dense.n:
                dense.index = k
                by_len[dense.n].append(dense)
            k += 1
    out = []
    for n in sorted(by_len):
        group = by_len[n]
        for start in range(0, len(group), max_batch):
            members = group[start : start + max_batch]
            K = max(d.unary.shape[1] for d in members)
            D = members[0].unary.shape[2]
            S = len(members)
            unary = np.zeros((S, n, K, D))
            lm = np.zeros((S, n + 1, K, K, K))
            valid = np.zeros((S, n, K), dtype=bool)
            for s, d in enumerate(members):
                k = d.unary.shape[1]
                unary[s, :, :k] = d.unary
                lm[s, :, :k, :k, :k] = d.lm
                valid[s, :, :k] = d.valid
            gold = None
            if all(d.gold is not None for d in members):
                gold = np.stack([d.gold for d in members])  # type: ignore[misc]
            out.append(Batch(unary=unary, lm=lm, valid=valid, gold=gold, members=[d.index for d in members]))
    return out


@dataclass
class _Dense:
    """One sentence's lattice as dense arrays: unary (n, K, D), lm (n + 1, K, K, K) with
    lm[i, a, b, c] = log10 p(c_i | a, b) (i = n: </s>), valid (n, K); K its most candidates at a position."""

    unary: np.ndarray
    lm: np.ndarray
    valid: np.ndarray
    gold: np.ndarray | None
    index: int = -1  # the sentence's number among all the flats' sentences

    @property
    def n(self) -> int:
        return self.unary.shape[0]


def _dense_sentences(flat: Flat) -> list[_Dense]:
    lm = viterbi.dense(flat.cells, flat.lm, flat.per_pos, flat.n_pos)
    per_pos = flat.per_pos.tolist()
    # each candidate's (position in its sentence, index at its position)
    P = np.repeat(
        np.arange(len(flat.per_pos)) - np.repeat(np.cumsum(flat.n_pos) - flat.n_pos, flat.n_pos), flat.per_pos
    )
    J = np.arange(len(flat.ids)) - np.repeat(np.cumsum(flat.per_pos) - flat.per_pos, flat.per_pos)
    out = []
    c0 = p0 = 0
    for s, n in enumerate(flat.n_pos.tolist()):
        sizes = per_pos[p0 : p0 + n]
        K = max(sizes, default=1)
        sl = slice(c0, c0 + sum(sizes))
        unary = np.zeros((n, K, flat.unary.shape[1]))
        valid = np.zeros((n, K), dtype=bool)
        unary[P[sl], J[sl]] = flat.unary[sl]
        valid[P[sl], J[sl]] = True
        c0 += sum(sizes)
        p0 += n
        out.append(_Dense(unary=unary, lm=lm[s], valid=valid, gold=flat.gold[s]))
    return out


@dataclass
class Marginals:
    """One forward-backward pass in probability space. Each factor is exponentiated once, shifted by its
    largest value at its sentence and position so that nothing overflows; alpha and beta are rescaled at every
    position (``scale``), so that ``alpha[:, i] * beta[:, i]`` is the marginal of the states at i and
    log Z = sum(log scale) + the shifts."""

    alpha: np.ndarray  # (S, n, K, K): states (c_{i-1}, c_i), rescaled to sum 1
    beta: np.ndarray  # (S, n, K, K)
    scale: np.ndarray  # (S, n + 1): the rescaling at each position, then the end of sentence
    log_z: np.ndarray  # (S,); -inf where every path underflows (weights far outside any fitted range)


def _factors(batch: Batch, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """exp(unary score) (S, n, K) and exp(LM factor) (S, n + 1, K, K, K), each divided by its largest value per
    sentence and position (so every entry is at most 1), and the log of those divisors summed per sentence."""
    phi = np.einsum("snkd,d->snk", batch.unary, w[1:])  # not @: see ``Flat.scores``
    phi[~batch.valid] = NEG
    top = phi.max(axis=2)
    top[~np.isfinite(top)] = 0.0
    phi -= top[:, :, None]
    low, high = batch.lm_range  # padding holds 0, so the largest is at least that of the real entries
    lm_top = np.maximum(w[0] * low, w[0] * high)
    lm = w[0] * batch.lm
    lm -= lm_top[:, :, None, None, None]
    return np.exp(phi, out=phi), np.exp(lm, out=lm), top.sum(axis=1) + lm_top.sum(axis=1)


def forward_backward(unary: np.ndarray, lm: np.ndarray, shift: np.ndarray) -> Marginals:
    """The rescaled forward and backward passes over factors from ``_factors`` (``unary`` may have entries
    zeroed to clamp positions to some candidates)."""
    S, n, K = unary.shape
    alpha = np.zeros((S, n, K, K))
    beta = np.empty((S, n, K, K))
    scale = np.empty((S, n + 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha[:, 0, 0, :] = lm[:, 0, 0, 0, :] * unary[:, 0, :]
        for i in range(n):
            if i:
                alpha[:, i] = np.einsum("sbc,sbcd->scd", alpha[:, i - 1], lm[:, i]) * unary[:, i, None, :]
            scale[:, i] = alpha[:, i].sum(axis=(1, 2))
            alpha[:, i] /= scale[:, i, None, None]
        end = lm[:, n, :, :, 0]
        scale[:, n] = np.einsum("scd,scd->s", alpha[:, n - 1], end)
        beta[:, n - 1] = end / scale[:, n, None, None]
        for i in range(n - 1, 0, -1):
            nxt = unary[:, i, None, :] * beta[:, i]
            beta[:, i - 1] = np.einsum("sbcd,scd->sbc", lm[:, i], nxt) / scale[:, i, None, None]
        log_z = np.log(scale).sum(axis=1) + shift
    dead = ~(scale > 0).all(axis=1)
    if dead.any():
        log_z[dead] = NEG
    return Marginals(alpha=alpha, beta=beta, scale=scale, log_z=log_z)


def log_partition(batch: Batch, w: np.ndarray) -> np.ndarray:
    """log Z per sentence of the batch."""
    return forward_backward(*_factors(batch, w)).log_z


def expectations(
    batch: Batch, unary: np.ndarray, lm: np.ndarray, shift: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """log Z per sentence, and the expected unary features (D,) and LM feature summed over the batch, from the
    factors of ``_factors``. Sentences whose every path underflows add nothing (their log Z is -inf)."""
    m = forward_backward(unary, lm, shift)
    n = unary.shape[1]
    live = np.isfinite(m.log_z)
    if not live.all():
        m.alpha[~live], m.beta[~live], m.scale[~live] = 0.0, 0.0, 1.0
    mu = (m.alpha * m.beta).sum(axis=2)  # (S, n, K): marginal of each candidate
    e_unary = np.einsum("c,cd->d", mu.reshape(-1), batch.unary.reshape(mu.size, -1))
    raw = batch.lm
    e_lm = float(np.sum(mu[:, 0] * raw[:, 0, 0, 0, :]))
    if n > 1:
        # the marginal of the trigram (c_{i-2}, c_{i-1}, c_i) at positions 1..n-1, against the LM's value there
        ahead = unary[:, 1:, None, :] * m.beta[:, 1:] / m.scale[:, 1:n, None, None]
        weighted = lm[:, 1:n] * raw[:, 1:n]
        e_lm += float(np.sum(m.alpha[:, :-1] * np.sum(weighted * ahead[:, :, None], axis=-1)))
    last = m.alpha[:, n - 1] / m.scale[:, n, None, None]
    e_lm += float(np.sum(last * lm[:, n, :, :, 0] * raw[:, n, :, :, 0]))
    return m.log_z, e_unary, e_lm


def batch_objective(batch: Batch, w: np.ndarray) -> tuple[float, np.ndarray]:
    """Sum of log p(gold) over the batch, and its gradient. A gold index of -1 leaves a position unlabeled
    (decoder output whose word the reference lacks): the likelihood is then of the labeled positions, summed
    over every path through the others, and the reference side of the gradient an expectation too."""
    assert batch.gold is not None
    unary, lm, shift = _factors(batch, w)
    log_z, e_unary, e_lm = expectations(batch, unary, lm, shift)
    if not np.isfinite(log_z).all():  # the line search went far out: tell it so, and it steps back
        return NEG, np.zeros_like(w)
    g = batch.gold
    grad = np.empty_like(w)
    if (g < 0).any():
        K = unary.shape[2]
        clamp = (g[:, :, None] < 0) | (np.arange(K)[None, None, :] == g[:, :, None])
        log_zc, ec_unary, ec_lm = expectations(batch, np.where(clamp, unary, 0.0), lm, shift)
        grad[1:], grad[0] = ec_unary - e_unary, ec_lm - e_lm
        return float(np.sum(log_zc - log_z)), grad
    gold_unary, gold_lm = batch.gold_features  # type: ignore[misc]  # fully labeled: not None
    grad[1:] = gold_unary - e_unary
    grad[0] = gold_lm - e_lm
    return float(gold_unary @ w[1:] + w[0] * gold_lm - log_z.sum()), grad


def log_likelihood(batches: Sequence[Batch], w: np.ndarray) -> tuple[float, np.ndarray]:
    return _sum_in_order([batch_objective(b, w) for b in batches], len(w))


def _sum_in_order(parts: Sequence[tuple[float, np.ndarray]], dim: int) -> tuple[float, np.ndarray]:
    """The batches' log-likelihoods and gradients added up in batch order, so the sum is the same bits
    however the batches were shared out."""
    total = 0.0
    grad = np.zeros(dim)
    for s, g in parts:
        total += s
        grad += g
    return total, grad


def serve() -> None:
    """A worker process (``likelihood``): reads its batches, then weight vectors, pickled from stdin, and writes
    the objective of each of its batches at each, until it reads None (an error is written back, for the parent
    to raise)."""
    import pickle
    import sys

    worker_signals()
    into, out = sys.stdin.buffer, sys.stdout.buffer
    try:
        batches = pickle.load(into)
        while (w := pickle.load(into)) is not None:
            try:
                reply: object = [batch_objective(b, w) for b in batches]
            except Exception as exc:  # noqa: BLE001 (the parent raises it)
                reply = exc
            pickle.dump(reply, out, protocol=pickle.HIGHEST_PROTOCOL)
            out.flush()
    except (EOFError, pickle.UnpicklingError, OSError):
        return  # the parent is gone, maybe in the middle of a message: no one to answer, nothing to report


# a worker's environment: one BLAS thread, as every command has (``workers.single_threaded_blas``), also when the
# library is called from a process whose numpy has more: the workers are the parallelism, a pool of BLAS threads
# in each spins on the cores the others need (twice the fit's CPU time on 2 cores), and the thread count changes
# the sums' rounding. glibc's malloc keeps the pages of freed arrays up to 32 MiB (what a forked worker inherits
# from a process that has freed large ones): a fresh process maps and unmaps each evaluation's temporaries anew,
# measured at 6 times the page faults of the forked workers and 10% more time in the quick start's fit.
_WORKER_ENV = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "MALLOC_TRIM_THRESHOLD_": str(128 << 20),
}


class _Worker:
    """A process of a fresh interpreter that holds some batches and answers ``serve``'s requests: started, not
    forked, so that it holds its batches only (a forked copy of a training process holds, and counts in the
    run's memory, everything the process holds). It imports this package from where this process did."""

    def __init__(self, batches: Sequence[Batch]) -> None:
        import os
        import pickle
        import subprocess
        import sys
        from pathlib import Path

        root = str(Path(__file__).resolve().parents[2])  # the directory this package was imported from
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, **_WORKER_ENV, "PYTHONPATH": path}
        code = "from moses_recaser.model.crf import serve; serve()"
        # a session of its own: a Ctrl-C at the terminal reaches this process, which ends the worker, and not the
        # worker, which would print a KeyboardInterrupt traceback while it imports; with this process gone, it
        # reads the end of its input and leaves
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        self._pickle = pickle
        try:
            self.send(list(batches))
        except BaseException:  # interrupted while it was being given its batches: it is nobody's to stop
            self.kill()
            raise

    def send(self, obj: object) -> None:
        assert self.proc.stdin is not None
        self._pickle.dump(obj, self.proc.stdin, protocol=self._pickle.HIGHEST_PROTOCOL)
        self.proc.stdin.flush()

    def receive(self) -> list[tuple[float, np.ndarray]]:
        assert self.proc.stdout is not None
        try:
            reply = self._pickle.load(self.proc.stdout)
        except EOFError:
            raise RuntimeError(f"a CRF worker ended (exit code {self.proc.wait()})") from None
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def kill(self) -> None:
        """End the worker at once (an interrupted fit: a message to it may be cut off) and reap it."""
        self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                with suppress(OSError):
                    pipe.close()

    def stop(self) -> None:
        """Tell the worker to end, and end it if it does not."""
        try:
            self.send(None)
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 (a worker that hangs is ended)
            self.proc.kill()
            self.proc.wait()


def _shares(batches: Sequence[Batch], jobs: int) -> list[list[int]]:
    """Batch numbers in ``jobs`` groups of about equal work (the largest batches first, each to the group
    with the least so far)."""
    cost = [b.lm.size + b.unary.size for b in batches]
    load = [0] * jobs
    out: list[list[int]] = [[] for _ in range(jobs)]
    for k in sorted(range(len(batches)), key=lambda k: -cost[k]):
        j = load.index(min(load))
        out[j].append(k)
        load[j] += cost[k]
    return [sorted(share) for share in out if share]


@contextmanager
def likelihood(batches: Sequence[Batch], jobs: int = 1) -> Iterator[Callable[[np.ndarray], tuple[float, np.ndarray]]]:
    """``log_likelihood`` over ``batches`` as a function of the weights, its batches shared among ``jobs``
    processes (``_Worker``) for as long as the context lasts; the value is the same for any ``jobs``."""
    shares = _shares(batches, jobs) if jobs > 1 else []
    if len(shares) <= 1:
        yield lambda w: log_likelihood(batches, w)
        return
    workers: list[_Worker] = []
    ended = False
    try:
        for share in shares:
            workers.append(_Worker([batches[k] for k in share]))

        def evaluate(w: np.ndarray) -> tuple[float, np.ndarray]:
            for worker in workers:
                worker.send(w)
            parts = [worker.receive() for worker in workers]
            by_batch = dict(zip(chain.from_iterable(shares), chain.from_iterable(parts)))
            return _sum_in_order([by_batch[k] for k in range(len(batches))], len(w))

        yield evaluate
        ended = True
    finally:
        for worker in workers:
            if ended:
                worker.stop()
            else:  # interrupted, perhaps in the middle of a message to it
                worker.kill()


@dataclass
class FitResult:
    weights: np.ndarray
    log: list[tuple[int, float, float]]  # iteration, objective, gradient norm
    converged: bool
    message: str


def feature_scale(flats: Sequence[Flat]) -> np.ndarray:
    """Per weight, the typical size of its feature: the mean |value| where it is not 0 over the lattices'
    candidates (1 for a 0/1 feature, and for the LM)."""
    D = flats[0].unary.shape[1] if flats else 0
    total, count = np.zeros(D), np.zeros(D)
    for f in flats:
        total += np.abs(f.unary).sum(axis=0)
        count += (f.unary != 0).sum(axis=0)
    return np.concatenate([[1.0], np.where(count > 0, total / np.maximum(count, 1), 1.0)])


def fit(
    batches: Sequence[Batch],
    n_features: int,
    sigma: float = 0.5,
    max_iter: int = 200,
    init: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    scale: np.ndarray | None = None,
    jobs: int = 1,
) -> FitResult:
    """Maximize eq. 5 with L-BFGS over the batches with a reference; ``init`` the weights to start from (a
    warm start: the optimum is the same, within the optimizer's tolerance); ``mask`` pins weights at 0
    (features switched off); ``scale`` (per weight) makes the prior on weight k a Gaussian of deviation
    sigma / scale_k, as if feature k were divided by scale_k; ``jobs`` processes share the batches."""
    from scipy.optimize import minimize

    batches = [b for b in batches if b.gold is not None]
    dim = n_features + 1
    keep = np.ones(dim, dtype=bool) if mask is None else mask.astype(bool)
    w0 = np.zeros(dim) if init is None else np.asarray(init, dtype=np.float64).copy()
    w0[0] = 1.0 if init is None else w0[0]
    w0[~keep] = 0.0
    history: list[tuple[int, float, float]] = []
    last: dict[str, Any] = {}
    s2 = np.ones(dim) if scale is None else np.asarray(scale, dtype=np.float64) ** 2

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        w = np.zeros(dim)
        w[keep] = x
        ll, grad = evaluate(w)
        obj = -(ll - float(w @ (s2 * w)) / (2 * sigma**2))
        g = -(grad - s2 * w / sigma**2)
        last.update(x=x.copy(), obj=obj, g=g[keep])
        return obj, g[keep]

    from tqdm import tqdm

    # a bar on a terminal (tqdm's disable=None: none when stderr is not one), the lines themselves with -v
    bar = tqdm(
        total=max_iter, desc="L-BFGS", unit=" it", leave=False, disable=None if log.isEnabledFor(logging.INFO) else True
    )

    def callback(x: np.ndarray) -> None:
        if "x" not in last or not np.array_equal(last["x"], x):
            objective(x)
        history.append((len(history) + 1, -float(last["obj"]), float(np.linalg.norm(last["g"]))))
        log.debug("iteration %3d  objective %.4f  gradient norm %.4g", *history[-1])
        bar.update()
        bar.set_postfix_str(f"objective {history[-1][1]:.4f}", refresh=False)

    with bar, likelihood(batches, jobs) as evaluate:
        res = minimize(
            objective,
            w0[keep],
            jac=True,
            method="L-BFGS-B",
            callback=callback,
            options={"maxiter": max_iter, "gtol": 1e-4, "ftol": 1e-7},
        )
    if history:
        log.info("L-BFGS: %d iterations, objective %.4f, gradient norm %.4g", *history[-1])
    w = np.zeros(dim)
    w[keep] = res.x
    return FitResult(weights=w, log=history, converged=bool(res.success), message=str(res.message))
