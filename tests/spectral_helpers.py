"""Shared helpers of the spectral tests: test data and brute-force references."""

import numpy as np
from scipy.spatial.distance import cdist
from sklearn.datasets import make_swiss_roll

from bayesalign import metrics
from bayesalign.datasets.synthetic import manifold_pair


def random_orthogonal(d, rng, det=None):
    Q, R = np.linalg.qr(rng.normal(size=(d, d)))
    Q = Q * np.sign(np.diag(R))
    if det is not None and np.sign(np.linalg.det(Q)) != det:
        Q[:, 0] *= -1
    return Q


def swiss_roll(n, seed=0):
    X, t = make_swiss_roll(n, random_state=seed)
    return X, t


def dense_heat_knn(X, k):
    dist = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    order = np.argsort(dist + np.diag(np.full(len(X), np.inf)), axis=1)[:, :k]
    A = np.zeros_like(dist, dtype=bool)
    A[np.arange(len(X))[:, None], order] = True
    A |= A.T
    sigma = np.median(dist[A])
    return np.where(A, np.exp(-dist ** 2 / (2 * sigma ** 2)), 0.0)


def dense_local_knn(X, k):
    """Local scaling (Zelnik-Manor & Perona 2004) by brute force: sigma_i = distance to the min(7, k)-th neighbour."""
    dist = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    ranked = np.sort(dist + np.diag(np.full(len(X), np.inf)), axis=1)
    order = np.argsort(dist + np.diag(np.full(len(X), np.inf)), axis=1)[:, :k]
    A = np.zeros_like(dist, dtype=bool)
    A[np.arange(len(X))[:, None], order] = True
    A |= A.T
    sigma = ranked[:, min(7, k) - 1]
    return np.where(A, np.exp(-dist ** 2 / np.outer(sigma, sigma)), 0.0)


DENSE_AFFINITY = {"heat": dense_heat_knn, "local": dense_local_knn}


def paired_foscttm(A, B):
    """FOSCTTM of two row-paired coordinate arrays (row i of A <-> row i of B)."""
    return metrics.foscttm(cdist(A, B), np.arange(len(A)))


def rotation(dim, seed):
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(dim, dim)))
    return q * np.sign(np.diag(r))


def swiss_problem(n=300, noise=0.05, dim=10, fraction=0.2, seed=0):
    """A swiss-roll pair (fully paired) and the same with a fraction of anchors."""
    problem = manifold_pair("swiss_roll", n=n, noise=noise, dim=dim, seed=seed)
    return problem, problem.split_anchors(fraction, seed=seed)
