"""The CRF (paper sections 4.1-4.2): exact forward-backward, regularized training, Viterbi.

The LM feature conditions on the two previous candidates, so the lattice is second order: its
states at position i are pairs (candidate at i-1, candidate at i), and the LM factor at i scores
the triple (c_{i-2}, c_{i-1}, c_i); position n is the end of sentence. All sums run in log space.
Sentences of equal length are stacked and processed together (numpy over the batch and the
candidate axes), which is exact: padding candidates get a score of -inf.

Training maximizes eq. 5, ``sum_n log p(E_n | F_n, A_n) - ||w||^2 / (2 sigma^2)``, with L-BFGS
(scipy) on the exact gradient ``F(gold) - E[F] - w / sigma^2``.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from moses_recaser.model.features import Lattice

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


def make_batches(lattices: Sequence[Lattice], max_batch: int = 512) -> list[Batch]:
    by_len: dict[int, list[int]] = defaultdict(list)
    for k, lat in enumerate(lattices):
        if lat.n:
            by_len[lat.n].append(k)
    out = []
    for n in sorted(by_len):
        idx = by_len[n]
        for start in range(0, len(idx), max_batch):
            members = idx[start : start + max_batch]
            lats = [lattices[k] for k in members]
            K = max(lat.unary.shape[1] for lat in lats)
            D = lats[0].unary.shape[2]
            S = len(lats)
            unary = np.zeros((S, n, K, D))
            lm = np.zeros((S, n + 1, K, K, K))
            valid = np.zeros((S, n, K), dtype=bool)
            for s, lat in enumerate(lats):
                k = lat.unary.shape[1]
                unary[s, :, :k] = lat.unary
                lm[s, :, :k, :k, :k] = lat.lm
                valid[s, :, :k] = lat.valid
            gold = None
            if all(lat.gold is not None for lat in lats):
                gold = np.stack([lat.gold for lat in lats])  # type: ignore[misc]
            out.append(Batch(unary=unary, lm=lm, valid=valid, gold=gold, members=members))
    return out


def _lse(x: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m_safe), axis=axis, keepdims=True)) + m_safe
    return np.squeeze(out, axis=axis)


def _potentials(batch: Batch, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    phi = batch.unary @ w[1:]
    phi = np.where(batch.valid, phi, NEG)
    return phi, w[0] * batch.lm


def forward(phi: np.ndarray, L: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """alpha_i[s, b, c] over states (c_{i-1} = b, c_i = c); returns the alphas and log Z per sentence."""
    S, n, K = phi.shape
    a0 = np.full((S, K, K), NEG)
    a0[:, 0, :] = L[:, 0, 0, 0, :] + phi[:, 0, :]
    alphas = [a0]
    for i in range(1, n):
        prev = alphas[-1]
        alphas.append(_lse(prev[:, :, :, None] + L[:, i], axis=1) + phi[:, i, None, :])
    log_z = _lse(alphas[-1] + L[:, n, :, :, 0], axis=(1, 2))
    return alphas, log_z


def backward(phi: np.ndarray, L: np.ndarray) -> list[np.ndarray]:
    """beta_i[s, b, c]: log sum over completions after position i, given (c_{i-1}, c_i) = (b, c)."""
    _S, n, _K = phi.shape
    betas = [L[:, n, :, :, 0]]
    for i in range(n - 1, 0, -1):
        nxt = betas[-1]
        betas.append(_lse(L[:, i] + phi[:, i, None, None, :] + nxt[:, None, :, :], axis=3))
    return betas[::-1]


def batch_objective(batch: Batch, w: np.ndarray) -> tuple[float, np.ndarray]:
    """Sum of log p(gold) over the batch, and its gradient."""
    assert batch.gold is not None
    phi, L = _potentials(batch, w)
    S, n, _K = phi.shape
    alphas, log_z = forward(phi, L)
    betas = backward(phi, L)
    grad = np.zeros_like(w)
    # expected unary features
    for i in range(n):
        mu = np.exp(_lse(alphas[i] + betas[i], axis=1) - log_z[:, None])  # (S, K)
        grad[1:] -= np.einsum("sk,skd->d", mu, batch.unary[:, i])
    # expected LM feature
    lm = batch.lm
    p0 = np.exp(alphas[0][:, 0, :] + betas[0][:, 0, :] - log_z[:, None])
    e_lm = np.sum(p0 * lm[:, 0, 0, 0, :])
    for i in range(1, n):
        xi = alphas[i - 1][:, :, :, None] + L[:, i] + phi[:, i, None, None, :] + betas[i][:, None, :, :]
        e_lm += np.sum(np.exp(xi - log_z[:, None, None, None]) * lm[:, i])
    xi_end = alphas[n - 1] + L[:, n, :, :, 0] - log_z[:, None, None]
    e_lm += np.sum(np.exp(xi_end) * lm[:, n, :, :, 0])
    grad[0] -= e_lm
    # the reference path
    g = batch.gold
    rows = np.arange(S)
    gold_unary = sum(batch.unary[rows, i, g[:, i]] for i in range(n))
    padded = np.concatenate([np.zeros((S, 2), dtype=np.int64), g, np.zeros((S, 1), dtype=np.int64)], axis=1)
    gold_lm = sum(lm[rows, i, padded[:, i], padded[:, i + 1], padded[:, i + 2]] for i in range(n + 1))
    grad[1:] += gold_unary.sum(axis=0)
    grad[0] += gold_lm.sum()
    score = float(np.sum(gold_unary @ w[1:] + w[0] * gold_lm - log_z))
    return score, grad


def log_likelihood(batches: Sequence[Batch], w: np.ndarray) -> tuple[float, np.ndarray]:
    total = 0.0
    grad = np.zeros_like(w)
    for b in batches:
        s, g = batch_objective(b, w)
        total += s
        grad += g
    return total, grad


def viterbi(batch: Batch, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Best candidate index per position (S, n), and the best path scores (S,)."""
    phi, L = _potentials(batch, w)
    return best_paths(phi, L[:, :-1], L[:, -1, :, :, 0])


def best_paths(phi: np.ndarray, L: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Second-order Viterbi from the state (<s>, <s>) = (0, 0): ``phi`` (S, n, K) unary potentials,
    ``L`` (S, n, K, K, K) transition scores, ``end`` (S, K, K) the scores of </s>; the best paths (S, n)
    and their scores (S,)."""
    S, n, K = phi.shape
    d = np.full((S, K, K), NEG)
    d[:, 0, 0] = 0.0
    back = []
    for i in range(n):
        cand = d[:, :, :, None] + L[:, i]  # (S, a, b, c)
        back.append(np.argmax(cand, axis=1))  # (S, b, c)
        d = np.max(cand, axis=1) + phi[:, i, None, :]
    final = (d + end).reshape(S, -1)
    best = np.argmax(final, axis=1)
    score = final[np.arange(S), best]
    path = np.zeros((S, n), dtype=np.int64)
    rows = np.arange(S)
    prev, cur = best // K, best % K
    path[:, n - 1] = cur
    for i in range(n - 1, 0, -1):
        path[:, i - 1] = prev
        prev, cur = back[i][rows, prev, cur], prev
    return path, score


@dataclass
class FitResult:
    weights: np.ndarray
    log: list[tuple[int, float, float]]  # iteration, objective, gradient norm
    converged: bool
    message: str


def fit(
    lattices: Sequence[Lattice],
    n_features: int,
    sigma: float = 0.5,
    max_iter: int = 200,
    init: np.ndarray | None = None,
    mask: np.ndarray | None = None,
) -> FitResult:
    """Maximize eq. 5 with L-BFGS; ``mask`` pins weights at 0 (features switched off)."""
    from scipy.optimize import minimize

    batches = make_batches([lat for lat in lattices if lat.n and lat.gold is not None])
    dim = n_features + 1
    keep = np.ones(dim, dtype=bool) if mask is None else mask.astype(bool)
    w0 = np.zeros(dim) if init is None else np.asarray(init, dtype=np.float64).copy()
    w0[0] = 1.0 if init is None else w0[0]
    w0[~keep] = 0.0
    history: list[tuple[int, float, float]] = []
    last: dict[str, object] = {}

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        w = np.zeros(dim)
        w[keep] = x
        ll, grad = log_likelihood(batches, w)
        obj = -(ll - float(w @ w) / (2 * sigma**2))
        g = -(grad - w / sigma**2)
        last.update(x=x.copy(), obj=obj, g=g[keep])
        return obj, g[keep]

    def callback(x: np.ndarray) -> None:
        if not np.array_equal(last.get("x"), x):
            objective(x)
        history.append((len(history) + 1, -float(last["obj"]), float(np.linalg.norm(last["g"]))))  # type: ignore[arg-type]
        log.info("iteration %3d  objective %.4f  gradient norm %.4g", *history[-1])

    res = minimize(objective, w0[keep], jac=True, method="L-BFGS-B", callback=callback,
                   options={"maxiter": max_iter, "gtol": 1e-4, "ftol": 1e-7})
    w = np.zeros(dim)
    w[keep] = res.x
    return FitResult(weights=w, log=history, converged=bool(res.success), message=str(res.message))
