"""The CRF (paper sections 4.1-4.2): exact forward-backward and regularized training.

The LM feature conditions on the two previous candidates, so the lattice is second order: its
states at position i are pairs (candidate at i-1, candidate at i), and the LM factor at i scores
the triple (c_{i-2}, c_{i-1}, c_i); position n is the end of sentence. All sums run in log space.
Sentences of equal length are stacked and processed together (numpy over the batch and the
candidate axes), which is exact: padding candidates get a score of -inf.

Training maximizes eq. 5, ``sum_n log p(E_n | F_n, A_n) - ||w||^2 / (2 sigma^2)``, with L-BFGS (scipy)
on the exact gradient ``F(gold) - E[F] - w / sigma^2``. Decoding is ``viterbi``'s, on the flat lattice.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

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


def _lse(x: np.ndarray, axis: int | tuple[int, ...]) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - m_safe), axis=axis, keepdims=True)) + m_safe
    return np.squeeze(out, axis=axis)


def potentials(batch: Batch, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def expectations(batch: Batch, phi: np.ndarray, L: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """log Z per sentence, and the expected unary features (D,) and LM feature summed over the batch."""
    S, n, _K = phi.shape
    alphas, log_z = forward(phi, L)
    betas = backward(phi, L)
    e_unary = np.zeros(batch.unary.shape[-1])
    for i in range(n):
        mu = np.exp(_lse(alphas[i] + betas[i], axis=1) - log_z[:, None])  # (S, K)
        e_unary += np.einsum("sk,skd->d", mu, batch.unary[:, i])
    lm = batch.lm
    p0 = np.exp(alphas[0][:, 0, :] + betas[0][:, 0, :] - log_z[:, None])
    e_lm = np.sum(p0 * lm[:, 0, 0, 0, :])
    for i in range(1, n):
        xi = alphas[i - 1][:, :, :, None] + L[:, i] + phi[:, i, None, None, :] + betas[i][:, None, :, :]
        e_lm += np.sum(np.exp(xi - log_z[:, None, None, None]) * lm[:, i])
    xi_end = alphas[n - 1] + L[:, n, :, :, 0] - log_z[:, None, None]
    e_lm += np.sum(np.exp(xi_end) * lm[:, n, :, :, 0])
    return log_z, e_unary, float(e_lm)


def batch_objective(batch: Batch, w: np.ndarray) -> tuple[float, np.ndarray]:
    """Sum of log p(gold) over the batch, and its gradient. A gold index of -1 leaves a position unlabeled
    (decoder output whose word the reference lacks): the likelihood is then of the labeled positions, summed
    over every path through the others, and the reference side of the gradient an expectation too."""
    assert batch.gold is not None
    phi, L = potentials(batch, w)
    log_z, e_unary, e_lm = expectations(batch, phi, L)
    g = batch.gold
    grad = np.empty_like(w)
    if (g < 0).any():
        K = phi.shape[2]
        clamp = (g[:, :, None] < 0) | (np.arange(K)[None, None, :] == g[:, :, None])
        log_zc, ec_unary, ec_lm = expectations(batch, np.where(clamp, phi, NEG), L)
        grad[1:], grad[0] = ec_unary - e_unary, ec_lm - e_lm
        return float(np.sum(log_zc - log_z)), grad
    S, n = g.shape
    rows = np.arange(S)
    lm = batch.lm
    gold_unary = sum(batch.unary[rows, i, g[:, i]] for i in range(n))
    padded = np.concatenate([np.zeros((S, 2), dtype=np.int64), g, np.zeros((S, 1), dtype=np.int64)], axis=1)
    gold_lm = sum(lm[rows, i, padded[:, i], padded[:, i + 1], padded[:, i + 2]] for i in range(n + 1))
    grad[1:] = gold_unary.sum(axis=0) - e_unary
    grad[0] = gold_lm.sum() - e_lm
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
) -> FitResult:
    """Maximize eq. 5 with L-BFGS over the batches with a reference; ``mask`` pins weights at 0 (features
    switched off); ``scale`` (per weight) makes the prior on weight k a Gaussian of deviation sigma / scale_k,
    as if feature k were divided by scale_k."""
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
        ll, grad = log_likelihood(batches, w)
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

    with bar:
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
