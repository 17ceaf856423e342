"""Unsupervised correspondences between two views: where MAD starts when no anchor is given.

``"gromov_wasserstein"``: the entropic Gromov-Wasserstein coupling T (Peyre, Cuturi & Solomon 2016;
:func:`bayesalign.matching.gromov_wasserstein_coupling`) of the views' within-view Euclidean
distances (standardised columns, each matrix divided by its largest entry); the pairs (i, j) that
are each other's argmax, scored n T_ij in (0, 1]. ``"local_patterns"``: the local-pattern
correspondence of Wang, Krafft & Mahadevan (2011, section 5.3.4), scored by its weights.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from .matching import gromov_wasserstein_coupling

__all__ = ["BOOTSTRAPS", "unsupervised_pairs"]

BOOTSTRAPS = ("gromov_wasserstein", "local_patterns")


def unsupervised_pairs(view_a, view_b, method: str = "gromov_wasserstein", views=("a", "b")):
    """(pairs (m, 2), scores (m,)): candidate correspondences of two views found without any anchor.

    Dense (n, n) within-view distances: meant for a few hundred rows.

    >>> x = np.array([0.0, 1.0, 3.0, 7.0])[:, None]
    >>> pairs, scores = unsupervised_pairs(x, -x[::-1])   # b is a mirrored, reversed copy of a
    >>> sorted(map(tuple, pairs.tolist()))
    [(0, 3), (1, 2), (2, 1), (3, 0)]
    """
    if method == "gromov_wasserstein":
        dist = []
        for Y in (np.asarray(view_a, np.float64), np.asarray(view_b, np.float64)):
            Z = (Y - Y.mean(0)) / np.where(Y.std(0) > 0, Y.std(0), 1.0)
            D = cdist(Z, Z)  # [n, n]: GW compares within-view distances
            dist.append(D / max(float(D.max()), np.finfo(float).tiny))
        T = gromov_wasserstein_coupling(*dist)  # [n_a, n_b]
        best_b, best_a = T.argmax(1), T.argmax(0)
        rows = np.flatnonzero(best_a[best_b] == np.arange(T.shape[0]))
        return np.column_stack([rows, best_b[rows]]), T[rows, best_b[rows]] * min(T.shape)
    if method == "local_patterns":
        from .spectral import local_pattern_correspondence

        corr = local_pattern_correspondence(view_a, view_b, views=tuple(views))
        return corr.pairs, corr.weights_or_ones()
    raise ValueError(f"bootstrap must be one of {BOOTSTRAPS}, got {method!r}")
