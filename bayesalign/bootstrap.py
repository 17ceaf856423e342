"""Unsupervised correspondences between two views: where MAD starts when no anchor is given.

``"gromov_wasserstein"``: the entropic Gromov-Wasserstein coupling T (Peyre, Cuturi & Solomon 2016;
:func:`bayesalign.matching.gromov_wasserstein_coupling`) of the views' within-view Euclidean
distances (standardised columns, each matrix divided by its largest entry); the pairs (i, j) that
are each other's argmax, scored n T_ij in (0, 1]. ``"local_patterns"``: the local-pattern
correspondence of Wang, Krafft & Mahadevan (2011, section 5.3.4), scored by its weights.

Within-view distances do not change when a view is reflected, so Gromov-Wasserstein cannot tell a
correspondence from its mirror images and ends in whichever its start leads to.
:func:`reflection_starts` gives one start per reflection of the leading principal axes; MAD fits
its model on the pairs of each and keeps the one its bound prefers (``MAD.fit``).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from .matching import gromov_wasserstein_coupling, sinkhorn

__all__ = ["BOOTSTRAPS", "reflection_starts", "unsupervised_pairs"]

BOOTSTRAPS = ("gromov_wasserstein", "local_patterns")


def _standardised(view) -> np.ndarray:
    Y = np.asarray(view, np.float64)
    return (Y - Y.mean(0)) / np.where(Y.std(0) > 0, Y.std(0), 1.0)


def reflection_starts(view_a, view_b, n_axes: int = 2, temperature: float = 0.05):
    """One starting coupling per reflection of view b's ``n_axes`` leading principal axes: list of
    ``(signs, coupling (n_a, n_b))``, ``2 ** n_axes`` of them, signs (+1, +1, ...) first.

    Each view's standardised rows are projected on their leading principal axes (unit variance
    per axis); the start for the signs s is the entropic transport plan (:func:`sinkhorn` at
    ``temperature`` times the largest cost, rows summing to 1) of the squared distances between
    the projections of a and those of b with each axis multiplied by its sign. The axes' order and
    signs are arbitrary per view, which is why every sign pattern is tried.

    >>> t = np.linspace(0.0, 1.0, 6)[:, None]
    >>> starts = reflection_starts(np.hstack([t, t ** 2]), np.hstack([-t, t ** 2]), n_axes=1)
    >>> [signs for signs, _ in starts]
    [(1,), (-1,)]
    >>> sorted(start.argmax(1).tolist() for _, start in starts)   # the right order and its mirror image
    [[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]]
    """
    from itertools import product

    projections = []
    for view in (view_a, view_b):
        Z = _standardised(view)
        k = min(int(n_axes), *Z.shape)
        U, s, _ = np.linalg.svd(Z - Z.mean(0), full_matrices=False)
        P = U[:, :k] * s[:k]  # [n, k] principal scores
        projections.append(P / np.where(P.std(0) > 0, P.std(0), 1.0))
    k = min(projections[0].shape[1], projections[1].shape[1])
    starts = []
    for signs in product((1, -1), repeat=k):
        C = cdist(projections[0][:, :k], projections[1][:, :k] * np.array(signs), "sqeuclidean")  # [n_a, n_b]
        starts.append((signs, sinkhorn(C, temperature=temperature * max(float(C.max()), 1e-12)).marginals))
    return starts


def unsupervised_pairs(view_a, view_b, method: str = "gromov_wasserstein", views=("a", "b"), init=None):
    """(pairs (m, 2), scores (m,)): candidate correspondences of two views found without any anchor.

    Dense (n, n) within-view distances: meant for a few hundred rows. ``init``: the coupling
    Gromov-Wasserstein starts from (e.g. one of :func:`reflection_starts`).

    >>> x = np.array([0.0, 1.0, 3.0, 7.0])[:, None]
    >>> pairs, scores = unsupervised_pairs(x, -x[::-1])   # b is a mirrored, reversed copy of a
    >>> sorted(map(tuple, pairs.tolist()))
    [(0, 3), (1, 2), (2, 1), (3, 0)]
    """
    if method == "gromov_wasserstein":
        dist = []
        for view in (view_a, view_b):
            Z = _standardised(view)
            D = cdist(Z, Z)  # [n, n]: GW compares within-view distances
            dist.append(D / max(float(D.max()), np.finfo(float).tiny))
        T = gromov_wasserstein_coupling(*dist, init=init)  # [n_a, n_b]
        best_b, best_a = T.argmax(1), T.argmax(0)
        rows = np.flatnonzero(best_a[best_b] == np.arange(T.shape[0]))
        return np.column_stack([rows, best_b[rows]]), T[rows, best_b[rows]] * min(T.shape)
    if method == "local_patterns":
        if init is not None:
            raise ValueError("init (a starting coupling) is for bootstrap='gromov_wasserstein' only")
        from .spectral import local_pattern_correspondence

        corr = local_pattern_correspondence(view_a, view_b, views=tuple(views))
        return corr.pairs, corr.weights_or_ones()
    raise ValueError(f"bootstrap must be one of {BOOTSTRAPS}, got {method!r}")
