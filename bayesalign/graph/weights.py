"""Edge weights of a distance graph: the heat kernel, local scaling, and the spread of the row degrees."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from ._checks import _check_distance_graph


def median_edge_length(G) -> float:
    """Median of the stored (positive) edge values of a distance graph; 1.0 for an empty graph."""
    G = sp.csr_matrix(G)
    data = G.data[G.data > 0]
    return float(np.median(data)) if data.size else 1.0


def heat_kernel(G, sigma: float | None = None) -> sp.csr_matrix:
    """Heat-kernel weights ``W_ij = exp(-d_ij^2 / (2 sigma^2))`` on the edges of a distance graph.

    The similarity of Belkin & Niyogi's Laplacian eigenmaps (``t = 2 sigma^2`` in their
    notation) used for ``W^{(a)}`` in Wang, Krafft & Mahadevan (2011), section 5.2. Only the
    stored edges get a weight; the sparsity pattern of ``G`` is kept.

    Parameters
    ----------
    G : sparse (n, n) distance graph (from :func:`knn_graph` / :func:`epsilon_graph`)
    sigma : float, optional
        Kernel width. Default: the median edge length of ``G`` (the median k-NN distance for a
        k-NN graph), a scale-free choice that gives the typical edge weight ``exp(-1/2)``.

    >>> import numpy as np, scipy.sparse as sp
    >>> W = heat_kernel(sp.csr_matrix(np.array([[0.0, 2.0], [2.0, 0.0]])), sigma=2.0)
    >>> round(float(W[0, 1]), 6) == round(float(np.exp(-0.5)), 6)
    True
    """
    G = _check_distance_graph(G)
    sigma = median_edge_length(G) if sigma is None else float(sigma)
    if not np.isfinite(sigma) or sigma <= 0:
        raise ValueError(f"sigma must be positive and finite, got {sigma}")
    G.data = np.exp(-(G.data ** 2) / (2.0 * sigma ** 2))
    return G


def local_scales(G, k: int = 7) -> np.ndarray:
    """Per-row kernel widths ``sigma_i``: the ``k``-th shortest edge stored in row ``i`` of ``G``.

    Zelnik-Manor & Perona (2004), "Self-tuning spectral clustering", section 2: ``sigma_i`` is
    the distance from point ``i`` to its ``K``-th neighbour (they use ``K = 7``). For a
    ``k'``-NN graph symmetrised with ``"or"`` (:func:`knn_graph`'s default) and ``k <= k'`` the
    ``k``-th shortest edge of row ``i`` is exactly that distance, since every point closer to
    ``i`` than its ``k'``-th neighbour is one of its neighbours. A row with fewer than ``k``
    edges uses its longest; a row without edges gets 1 (it has no weight to scale).

    >>> import numpy as np
    >>> from bayesalign.graph import knn_graph
    >>> local_scales(knn_graph(np.array([[0.0], [1.0], [3.0], [7.0]]), 2), k=2).tolist()
    [3.0, 2.0, 3.0, 6.0]
    """
    G = _check_distance_graph(G)
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be a positive integer, got {k}")
    counts = np.diff(G.indptr)  # [n]
    rows = np.repeat(np.arange(G.shape[0]), counts)
    order = np.lexsort((G.data, rows))  # edges sorted by length within each row
    pick = G.indptr[:-1] + np.minimum(k, counts) - 1  # [n]
    scales = np.ones(G.shape[0])
    has_edges = counts > 0
    scales[has_edges] = G.data[order][pick[has_edges]]
    return scales


def local_scaling_kernel(G, k: int = 7) -> sp.csr_matrix:
    """Self-tuning affinity ``W_ij = exp(-d_ij^2 / (sigma_i sigma_j))`` on the edges of a distance graph.

    Zelnik-Manor & Perona (2004), eq. 1 with local scaling: ``sigma_i`` is the distance from
    point ``i`` to its ``k``-th neighbour (:func:`local_scales`). Every edge no longer than
    both ends' widths, ``d_ij <= min(sigma_i, sigma_j)``, weighs at least ``exp(-1)``, so a
    sparse or spread-out region keeps ordinary weights, where one global width
    (:func:`heat_kernel`) gives its rows degrees that can underflow towards ``1e-100`` (and the
    degree-normalised eigenvectors put about ``1/sqrt(degree)`` on them). A single point far
    from all others still gets ``exp(-d_ij^2 / (sigma_i sigma_j)) ~ exp(-sigma_i / sigma_j)`` to
    neighbours of much smaller width: small, but not ``exp(-(sigma_i / sigma)^2 / 2)``; such rows
    are what :func:`check_degrees` reports. Symmetric when ``G`` is. Same sparsity as ``G``.

    >>> import numpy as np, scipy.sparse as sp
    >>> from bayesalign.graph import knn_graph
    >>> G = knn_graph(np.array([[0.0], [1.0], [3.0], [7.0]]), 2)
    >>> W = local_scaling_kernel(G, k=2)
    >>> bool(np.isclose(W[2, 3], np.exp(-16.0 / (3.0 * 6.0))))
    True
    """
    G = _check_distance_graph(G)
    scales = local_scales(G, k)  # [n]
    rows = np.repeat(np.arange(G.shape[0]), np.diff(G.indptr))
    G.data = np.exp(-(G.data ** 2) / (scales[rows] * scales[G.indices]))
    return G


# Degrees spanning more than this ratio get a warning: the D-normalised eigenvectors of a graph
# scale like 1/sqrt(degree), so such a graph can put coordinates up to sqrt(1e4) = 100 times larger
# on its weakest rows than on its typical ones.
DEGREE_RATIO_LIMIT = 1e4


def degree_spread(W) -> tuple[float, np.ndarray]:
    """``(max degree / min degree, degrees)`` of a non-negative weight matrix (``inf`` with a zero degree)."""
    degrees = np.asarray(sp.csr_matrix(W).sum(axis=1), dtype=np.float64).ravel()  # [n]
    if degrees.size == 0:
        return 1.0, degrees
    low, high = float(degrees.min()), float(degrees.max())
    return (high / low if low > 0 else np.inf), degrees


def check_degrees(W, name: str = "graph", max_ratio: float = DEGREE_RATIO_LIMIT,
                  hint: str = "local scaling (local_scaling_kernel) or more neighbours may help") -> float:
    """Warn (``RuntimeWarning``) when the degrees of ``W`` span more than ``max_ratio``; return the ratio.

    The warning names ``name`` and the rows of smallest degree: they are nearly cut off from the
    graph, and spectral embeddings normalised by ``D`` place them at about ``1/sqrt(degree)``,
    far out of scale with the other rows. Local scaling (:func:`local_scaling_kernel`) or more
    neighbours is the usual cure.
    """
    ratio, degrees = degree_spread(W)
    if ratio > max_ratio:
        weakest = np.argsort(degrees)[:5]
        low = ", ".join(f"{int(i)} ({degrees[i]:.3g})" for i in weakest)
        n_low = int(np.sum(degrees * max_ratio < degrees.max()))
        warnings.warn(f"{name}: row degrees span a ratio of {ratio:.3g} (> {max_ratio:.0e}); {n_low} row(s) below "
                      f"1/{max_ratio:.0e} of the largest degree are nearly cut off from their neighbours and "
                      f"their spectral coordinates are out of scale; smallest: rows (degree) {low}; {hint}",
                      RuntimeWarning, stacklevel=3)
    return ratio
