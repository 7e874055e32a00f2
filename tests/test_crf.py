"""The CRF against brute force on tiny lattices: log Z, feature expectations, gradient, and the oracle
Viterbi (tests/oracles.py) that the split Viterbi is checked against."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from oracles import Lattice, batch_of, dense_viterbi
from scipy.special import logsumexp

from moses_recaser.model.crf import batch_objective, fit, likelihood, log_partition


def random_lattice(rng: np.random.Generator, n: int, D: int = 3, gold: bool = True) -> Lattice:
    sizes = [int(rng.integers(1, 4)) for _ in range(n)]
    K = max(sizes)
    unary = np.zeros((n, K, D))
    valid = np.zeros((n, K), dtype=bool)
    for i, k in enumerate(sizes):
        unary[i, :k] = rng.normal(size=(k, D))
        valid[i, :k] = True
    lm = np.zeros((n + 1, K, K, K))
    padded = [1, 1] + sizes + [1]
    for i in range(n + 1):
        a, b, c = padded[i], padded[i + 1], padded[i + 2]
        lm[i, :a, :b, :c] = -rng.uniform(0.1, 3.0, size=(a, b, c))
    g = np.array([int(rng.integers(0, k)) for k in sizes]) if gold else None
    return Lattice(
        cands=[[f"w{i}_{j}" for j in range(k)] for i, k in enumerate(sizes)], unary=unary, lm=lm, valid=valid, gold=g
    )


def paths(lat: Lattice):
    return itertools.product(*[range(len(c)) for c in lat.cands])


def path_features(lat: Lattice, path) -> np.ndarray:
    """[lm total, unary features...] of one path."""
    n = lat.n
    p = [0, 0] + list(path) + [0]
    lm = sum(lat.lm[i, p[i], p[i + 1], p[i + 2]] for i in range(n + 1))
    unary = sum(lat.unary[i, path[i]] for i in range(n))
    return np.concatenate([[lm], unary])


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_log_z_and_expectations_match_brute_force(seed, n):
    rng = np.random.default_rng(seed * 10 + n)
    lat = random_lattice(rng, n)
    w = rng.normal(size=4)
    feats = np.array([path_features(lat, p) for p in paths(lat)])
    scores = feats @ w
    log_z = logsumexp(scores)
    (batch,) = batch_of([lat])
    got_z = log_partition(batch, w)
    assert got_z[0] == pytest.approx(log_z, abs=1e-9)
    probs = np.exp(scores - log_z)
    expected = probs @ feats
    gold = path_features(lat, list(lat.gold))
    ll, grad = batch_objective(batch, w)
    assert ll == pytest.approx(float(gold @ w - log_z), abs=1e-9)
    assert grad == pytest.approx(gold - expected, abs=1e-9)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("n", [1, 3, 5])
def test_partly_labeled_sentences_sum_over_their_unlabeled_positions(seed, n):
    """Gold -1 leaves a position unlabeled: log p(labels) = log sum over the paths that agree with them - log Z,
    and the gradient is E[F | labels] - E[F]."""
    rng = np.random.default_rng(seed * 10 + n + 500)
    lats = [random_lattice(rng, n) for _ in range(2)]
    for lat in lats:
        lat.gold[rng.random(n) < 0.5] = -1
    w = rng.normal(size=4)
    want_ll, want_grad = 0.0, np.zeros(4)
    for lat in lats:
        feats = np.array([path_features(lat, p) for p in paths(lat)])
        agree = np.array([all(g < 0 or g == c for g, c in zip(lat.gold, p)) for p in paths(lat)])
        scores = feats @ w
        log_z, log_zc = logsumexp(scores), logsumexp(scores[agree])
        want_ll += log_zc - log_z
        want_grad += np.exp(scores[agree] - log_zc) @ feats[agree] - np.exp(scores - log_z) @ feats
    (batch,) = batch_of(lats)
    ll, grad = batch_objective(batch, w)
    assert ll == pytest.approx(want_ll, abs=1e-9)
    assert grad == pytest.approx(want_grad, abs=1e-9)


@pytest.mark.parametrize("seed", range(10))
def test_viterbi_matches_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    lats = [random_lattice(rng, n, gold=False) for n in (1, 2, 3, 4, 4, 6)]
    w = rng.normal(size=4)
    for batch in batch_of(lats):
        got, score = dense_viterbi(batch, w)
        for row, k in enumerate(batch.members):
            lat = lats[k]
            best = max(paths(lat), key=lambda p: path_features(lat, p) @ w)
            assert score[row] == pytest.approx(path_features(lat, best) @ w)
            assert tuple(got[row]) == best


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(7)
    lats = [random_lattice(rng, n) for n in (2, 3, 3, 5)]
    batches = batch_of(lats)
    w = rng.normal(size=4)
    sigma = 0.7

    def obj(x):
        ll = sum(batch_objective(b, x)[0] for b in batches)
        return ll - x @ x / (2 * sigma**2)

    grad = sum(batch_objective(b, w)[1] for b in batches) - w / sigma**2
    eps = 1e-6
    numeric = np.array([(obj(w + eps * e) - obj(w - eps * e)) / (2 * eps) for e in np.eye(4)])
    assert grad == pytest.approx(numeric, rel=1e-5, abs=1e-6)


def test_fit_recovers_a_preference():
    # feature 0 marks the reference candidate everywhere: training must give it a positive weight
    rng = np.random.default_rng(3)
    lats = []
    for _ in range(30):
        lat = random_lattice(rng, 4, D=2)
        lat.unary[:, :, 0] = 0.0
        for i, g in enumerate(lat.gold):
            lat.unary[i, g, 0] = 1.0
        lats.append(lat)
    res = fit(batch_of(lats), 2, sigma=1.0)
    assert res.weights[1] > 1.0
    assert res.log and res.log[-1][1] > res.log[0][1] - 1e-9


def test_a_scaled_prior_is_the_fit_on_scaled_features():
    """fit(scale=s) on features x finds w with w_k * s_k = the weights of a plain fit on x_k / s_k: the prior
    then treats every feature as if it had the typical size 1 (TrainSettings.feature_scaling)."""
    rng = np.random.default_rng(5)
    lats = [random_lattice(rng, n, D=2) for n in (2, 3, 4, 4, 5, 3)]
    for lat in lats:
        lat.unary[..., 1] *= 40.0  # a feature on another scale, as log-probabilities are beside 0/1 flags
    scale = np.array([1.0, 1.0, 40.0])
    scaled = fit(batch_of(lats), 2, sigma=0.5, max_iter=500, scale=scale)
    for lat in lats:
        lat.unary[..., 1] /= 40.0
    plain = fit(batch_of(lats), 2, sigma=0.5, max_iter=500)
    assert scaled.weights * scale == pytest.approx(plain.weights, rel=1e-3, abs=1e-4)


@pytest.mark.parametrize("size", [10.0, 60.0])
def test_large_weights_give_the_brute_force_log_z(size):
    """The factors are shifted by their largest value per position, so large weights neither overflow nor lose
    the partition function (``crf._factors``)."""
    rng = np.random.default_rng(11)
    lat = random_lattice(rng, 4)
    w = rng.normal(size=4) * size
    scores = np.array([path_features(lat, p) for p in paths(lat)]) @ w
    (batch,) = batch_of([lat])
    assert log_partition(batch, w)[0] == pytest.approx(logsumexp(scores), rel=1e-12)


def test_weights_beyond_any_range_give_minus_infinity_not_nan():
    """Weights so large that every path underflows: the line search gets -inf and steps back."""
    rng = np.random.default_rng(12)
    lat = random_lattice(rng, 3)
    lat.lm[1] = -rng.uniform(1, 300, size=lat.lm[1].shape)
    (batch,) = batch_of([lat])
    ll, grad = batch_objective(batch, np.array([1e4, 0.0, 0.0, 0.0]))
    assert ll == -np.inf and np.isfinite(grad).all()


def test_jobs_share_the_batches_and_give_the_same_bits():
    """The likelihood summed across worker processes equals the one-process sum bit for bit, and so do the
    fitted weights."""
    rng = np.random.default_rng(13)
    lats = [random_lattice(rng, n) for n in (1, 2, 2, 3, 4, 5, 5, 6) for _ in range(3)]
    batches = batch_of(lats, max_batch=2)
    w = rng.normal(size=4)
    with likelihood(batches, 1) as one, likelihood(batches, 3) as three:
        a, b = one(w), three(w)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    assert np.array_equal(fit(batches, 3, jobs=1).weights, fit(batches, 3, jobs=2).weights)


def test_a_warm_start_reaches_the_same_optimum_in_fewer_iterations():
    rng = np.random.default_rng(14)
    batches = batch_of([random_lattice(rng, n) for n in (2, 3, 4, 5) for _ in range(10)])
    cold = fit(batches, 3, sigma=1.0)
    warm = fit(batches, 3, sigma=1.0, init=cold.weights + 0.01)
    assert warm.weights == pytest.approx(cold.weights, abs=1e-3)
    assert len(warm.log) < len(cold.log)


def _fit_workers() -> list[int]:
    """The pids of this process's CRF workers (children running ``crf.serve``)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    serving = b"crf import serve" in fh.read()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if ppid == os.getpid() and serving:
                pids.append(int(entry))
    return pids


def test_fit_workers_are_out_of_reach_of_the_terminals_ctrl_c():
    """A Ctrl-C goes to the terminal's foreground process group: a CRF worker (a fresh interpreter) that got it
    while still importing printed a KeyboardInterrupt traceback. In a session of its own it does not get it; the
    training process that does ends it."""
    rng = np.random.default_rng(15)
    batches = batch_of([random_lattice(rng, n) for n in (2, 3, 4, 5)], max_batch=2)
    with likelihood(batches, 2) as objective:
        objective(rng.normal(size=4))
        pids = _fit_workers()
        assert len(pids) == 2
        for pid in pids:
            assert os.getpgid(pid) != os.getpgid(0) and os.getsid(pid) == pid
    assert _fit_workers() == []


def test_a_fit_worker_whose_parent_is_gone_ends_quietly():
    """A CRF worker whose parent was interrupted in the middle of a message (its batches, a weight vector) reads
    a cut-off pickle, or nothing: it ends with no traceback on the stderr it shares with the user's run."""
    import pickle
    import subprocess
    import sys

    whole = pickle.dumps([np.arange(1000.0)], protocol=pickle.HIGHEST_PROTOCOL)
    code = "from moses_recaser.model.crf import serve; serve()"
    for data in (b"", whole[: len(whole) // 2], whole + pickle.dumps(np.zeros(3))[:5]):
        proc = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, timeout=60)
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr.decode()[-2000:]
