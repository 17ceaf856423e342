"""Neighbourhood graphs, heat kernels, graph Laplacians, geodesic distances and the
generalized eigen-solver behind the spectral alignment methods.

Everything here is ``scipy.sparse`` (CSR) and linear in the number of points, except
:func:`geodesic_distances`, whose output is dense by nature (one row per source point).
(Over 600 lines, one file: every function builds on the same sparse-graph checks and the
estimators use them together; split by job it would be several files importing each other.)

API summary (stable; used by ``bayesalign.spectral``)
-----------------------------------------------------
``knn_graph(X, n_neighbors=10, *, mode="distance", symmetrize="or", connect_components=False, name="X")``
    Sparse symmetric (n, n) k-nearest-neighbour graph; edge values are Euclidean distances
    (``mode="distance"``) or 1 (``"connectivity"``). Duplicate points keep their edge (see below).
``epsilon_graph(X, radius, *, mode="distance", connect_components=False, name="X")``
    All pairs closer than ``radius``.
``heat_kernel(G, sigma=None)``
    Same sparsity as the distance graph ``G``, values ``exp(-d^2 / (2 sigma^2))``; ``sigma``
    defaults to the median edge length of ``G`` (:func:`median_edge_length`).
``local_scales(G, k=7)``; ``local_scaling_kernel(G, k=7)``
    Per-row widths ``sigma_i`` (the k-th shortest edge of row i) and the self-tuning affinity
    ``exp(-d_ij^2 / (sigma_i sigma_j))`` of Zelnik-Manor & Perona (2004), same sparsity as ``G``.
``degree_spread(W) -> (ratio, degrees)``; ``check_degrees(W, name, max_ratio=DEGREE_RATIO_LIMIT)``
    Warn (naming the rows) when the largest degree exceeds the smallest by more than ``max_ratio``.
``laplacian(W, normalized=False | "sym" | "rw") -> (L, D)``
    Graph Laplacian and the diagonal degree matrix, both sparse.
``connected_component_labels(G) -> (n_components, labels)``; ``check_connected(G, name=...)``
    raises a ``ValueError`` that names the number of components and their sizes;
    ``connect_components(G, X, mode=...)`` adds the shortest edge between components until connected.
``geodesic_distances(X_or_G, n_neighbors=10, *, sources=None, connect_components=False)``
    Shortest-path (Isomap) distances, dense ``(len(sources), n)``.
``smallest_generalized_eigenvectors(L, D, k, *, skip_trivial=True, method="auto", seed=0)``
    ``(eigenvalues (k,), F (n, k))``: the ``k`` smallest non-trivial solutions of
    ``L f = lambda D f`` with ``F' D F = I``; the constant vector of every connected
    component (eigenvalue 0) is excluded exactly.

Duplicate points: a distance graph stores the distance between two identical points as
``1e-10`` times the median positive distance of the graph (or ``1e-10`` if there is none)
instead of 0, so the edge is not dropped by sparse arithmetic, which treats a stored 0 as
"no edge"; the heat kernel of that edge is 1 to machine precision.

>>> import numpy as np
>>> X = np.random.default_rng(0).normal(size=(50, 3))
>>> W = heat_kernel(knn_graph(X, n_neighbors=5))
>>> L, D = laplacian(W)
>>> values, F = smallest_generalized_eigenvectors(L, D, 2)
>>> bool(np.allclose(F.T @ (D @ F), np.eye(2)))
True
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
import scipy.sparse.linalg as spla
from sklearn.neighbors import NearestNeighbors

from ._utils import as_rng
from .data import check_view

__all__ = [
    "check_connected",
    "connect_components",
    "connected_component_labels",
    "entity_graph",
    "epsilon_graph",
    "geodesic_distances",
    "DEGREE_RATIO_LIMIT",
    "check_degrees",
    "degree_spread",
    "heat_kernel",
    "knn_graph",
    "laplacian",
    "local_scales",
    "local_scaling_kernel",
    "median_edge_length",
    "smallest_generalized_eigenvectors",
]

# Relative size of the stand-in for a zero distance (duplicate points), see the module docstring.
_ZERO_DISTANCE = 1e-10
# Below this many nodes the eigen-solver uses dense LAPACK (faster and exact at that size).
DENSE_EIGEN_LIMIT = 1500


# ---------------------------------------------------------------------------------------------
# Graphs
# ---------------------------------------------------------------------------------------------
def _floor_zero_distances(dist: np.ndarray) -> np.ndarray:
    """Replace zero distances (duplicate points) by a tiny positive value (module docstring)."""
    positive = dist[dist > 0]
    floor = _ZERO_DISTANCE * (float(np.median(positive)) if positive.size else 1.0)
    return np.maximum(dist, floor)


def _symmetrize(G: sp.csr_matrix, symmetrize) -> sp.csr_matrix:
    if symmetrize is None:
        return G
    if symmetrize == "or":  # edge if either point is among the other's neighbours
        return G.maximum(G.T).tocsr()
    if symmetrize in ("and", "mutual"):  # edge only if each is among the other's neighbours
        return G.minimum(G.T).tocsr()
    raise ValueError(f"symmetrize must be 'or', 'and' (alias 'mutual') or None, got {symmetrize!r}")


def _check_mode(mode):
    if mode not in ("distance", "connectivity"):
        raise ValueError(f"mode must be 'distance' or 'connectivity', got {mode!r}")


def knn_graph(X, n_neighbors: int = 10, *, mode: str = "distance", symmetrize="or",
              connect_components: bool = False, name: str = "X") -> sp.csr_matrix:
    """Symmetric k-nearest-neighbour graph of the rows of ``X`` (sparse CSR, no self loops).

    Step 1 of the joint-Laplacian algorithm (Wang, Krafft & Mahadevan 2011, section 5.2.3):
    "a weight between two instances only if one is in the k-nearest neighbours of the other".

    Parameters
    ----------
    X : array (n, p)
    n_neighbors : int
        Neighbours per point, not counting the point itself; at most ``n - 1``.
    mode : "distance" or "connectivity"
        Edge values: Euclidean distances, or 1.
    symmetrize : "or", "and" / "mutual", or None
        ``"or"``: i~j if either is a neighbour of the other (``max(G, G')``, the usual choice);
        ``"and"`` (alias ``"mutual"``): only mutual neighbours (``min(G, G')``); ``None``:
        the directed graph (row i holds the neighbours of i).
    connect_components : bool
        If the graph is disconnected, add the shortest edge between components until it is
        connected (:func:`connect_components`). Default: leave it as it is.
    name : str
        Used in error messages (e.g. the view name).

    Returns
    -------
    scipy.sparse.csr_matrix (n, n)

    Examples
    --------
    >>> import numpy as np
    >>> G = knn_graph(np.array([[0.0], [1.0], [3.0]]), n_neighbors=1)
    >>> G.toarray()
    array([[0., 1., 0.],
           [1., 0., 2.],
           [0., 2., 0.]])
    """
    _check_mode(mode)
    X = check_view(X, name)
    n = X.shape[0]
    if isinstance(n_neighbors, (bool, np.bool_)) or not isinstance(n_neighbors, (int, np.integer)):
        raise TypeError(f"{name}: n_neighbors must be an int, got {n_neighbors!r}")
    n_neighbors = int(n_neighbors)
    if not 1 <= n_neighbors <= n - 1:
        raise ValueError(f"{name}: n_neighbors must be between 1 and n - 1 = {n - 1}, got {n_neighbors}")
    # X=None: sklearn excludes each query point itself (by index, so a duplicate point is kept)
    dist, ind = NearestNeighbors(n_neighbors=n_neighbors).fit(X).kneighbors()  # [n, k] each
    values = _floor_zero_distances(dist) if mode == "distance" else np.ones_like(dist)
    rows = np.repeat(np.arange(n), n_neighbors)
    G = sp.csr_matrix((values.ravel(), (rows, ind.ravel())), shape=(n, n))
    G = _symmetrize(G, symmetrize)
    if connect_components:
        G = _connect(G, X, mode=mode)
    return G


def epsilon_graph(X, radius: float, *, mode: str = "distance", connect_components: bool = False,
                  name: str = "X") -> sp.csr_matrix:
    """Graph joining every pair of rows of ``X`` closer than ``radius`` (sparse CSR, symmetric).

    >>> import numpy as np
    >>> epsilon_graph(np.array([[0.0], [1.0], [3.0]]), radius=1.5, mode="connectivity").toarray()
    array([[0., 1., 0.],
           [1., 0., 0.],
           [0., 0., 0.]])
    """
    _check_mode(mode)
    X = check_view(X, name)
    if not np.isfinite(radius) or radius <= 0:
        raise ValueError(f"radius must be positive and finite, got {radius}")
    n = X.shape[0]
    dist, ind = NearestNeighbors(radius=float(radius)).fit(X).radius_neighbors()  # ragged, self excluded
    counts = np.fromiter((len(i) for i in ind), dtype=np.int64, count=n)
    cols = np.concatenate(ind) if n else np.zeros(0, np.int64)
    dist = np.concatenate(dist) if counts.sum() else np.zeros(0)
    values = _floor_zero_distances(dist) if mode == "distance" else np.ones_like(dist)
    G = sp.csr_matrix((values, (np.repeat(np.arange(n), counts), cols.astype(np.int64))), shape=(n, n))
    G = _symmetrize(G, "or")  # exact symmetry despite floating-point ties at the radius
    if connect_components:
        G = _connect(G, X, mode=mode)
    return G


def median_edge_length(G) -> float:
    """Median of the stored (positive) edge values of a distance graph; 1.0 for an empty graph."""
    G = sp.csr_matrix(G)
    data = G.data[G.data > 0]
    return float(np.median(data)) if data.size else 1.0


def _check_distance_graph(G) -> sp.csr_matrix:
    """A float64 CSR copy of a square distance graph with non-negative edges, else a ValueError."""
    G = sp.csr_matrix(G, dtype=np.float64, copy=True)
    if G.shape[0] != G.shape[1]:
        raise ValueError(f"expected a square distance graph, got shape {G.shape}")
    if G.nnz and (G.data < 0).any():
        raise ValueError("expected non-negative distances")
    return G


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
# on its weakest rows than on its typical ones. With local scaling the shipped real views' 10-NN
# graphs span ratios of about 10, with the single-width heat kernel up to 1e65 (mfeat "mor");
# benchmarks/RESULTS.md, "Spectral methods".
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


def _check_square_symmetric(W, what: str) -> sp.csr_matrix:
    if not sp.issparse(W):
        W = np.asarray(W, dtype=np.float64)
        if W.ndim != 2:
            raise ValueError(f"{what} must be a 2-D matrix, got shape {W.shape}")
    W = sp.csr_matrix(W, dtype=np.float64)
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"{what} must be square, got shape {W.shape}")
    if W.nnz and not np.all(np.isfinite(W.data)):
        raise ValueError(f"{what} has non-finite entries")
    asym = abs(W - W.T)
    if asym.nnz and asym.max() > 1e-10 * max(1.0, abs(W).max()):
        raise ValueError(f"{what} must be symmetric (max |W - W'| = {asym.max():.3g})")
    return W


def laplacian(W, normalized=False) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Graph Laplacian of a symmetric non-negative weight matrix, with its degree matrix.

    ``D = diag(W 1)`` and, by ``normalized``:

    - ``False``: ``L = D - W`` (section 5.2 of Wang, Krafft & Mahadevan 2011);
    - ``"sym"``: ``L = I - D^{-1/2} W D^{-1/2}`` (the normalized Laplacian of the Procrustes
      paper, Wang & Mahadevan 2008, step 1);
    - ``"rw"``: ``L = I - D^{-1} W`` (random walk).

    An isolated vertex (degree 0) gets an all-zero row and column in the normalized variants.

    Returns
    -------
    L, D : scipy.sparse.csr_matrix (n, n)

    >>> import numpy as np
    >>> L, D = laplacian(np.array([[0.0, 2.0], [2.0, 0.0]]))
    >>> L.toarray(), D.diagonal()
    (array([[ 2., -2.],
           [-2.,  2.]]), array([2., 2.]))
    """
    W = _check_square_symmetric(W, "W")
    if W.nnz and (W.data < 0).any():
        raise ValueError("W must be non-negative (similarities, not distances)")
    degree = np.asarray(W.sum(axis=1)).ravel()  # [n]
    D = sp.diags(degree, format="csr")
    if normalized is False or normalized is None:
        return (D - W).tocsr(), D
    nonisolated = (degree > 0).astype(np.float64)
    with np.errstate(divide="ignore"):
        if normalized == "sym":
            scale = np.where(degree > 0, 1.0 / np.sqrt(degree), 0.0)
            S = sp.diags(scale) @ W @ sp.diags(scale)
        elif normalized == "rw":
            S = sp.diags(np.where(degree > 0, 1.0 / degree, 0.0)) @ W
        else:
            raise ValueError(f"normalized must be False, 'sym' or 'rw', got {normalized!r}")
    return (sp.diags(nonisolated) - S).tocsr(), D


def entity_graph(views, entity_rows, n_entities: int, n_neighbors: int = 10) -> sp.csr_matrix:
    """Unweighted kNN graph over entities: the union of every view's kNN graph, its rows mapped to entities.

    Entities are the latent points of a partially observed model (``AlignmentProblem.entities``):
    rows of different views joined by anchors are one entity, so the views' neighbourhood graphs
    meet at the anchors, as in the joint graph of the instance-level alignment (Wang, Krafft &
    Mahadevan 2011, section 5.2.3, with the anchors merged). Edge weights are 1 (an edge in
    several views still counts once), so the Laplacian ``D - W`` does not depend on the views' units.

    Parameters
    ----------
    views : sequence of arrays (n_v, p_v)
    entity_rows : sequence of int arrays (n_v,)
        The entity of each row of each view.
    n_entities : int
    n_neighbors : int
        Neighbours per row within its view (capped at ``n_v - 1``).

    Returns
    -------
    scipy.sparse.csr_matrix (n_entities, n_entities), symmetric, 0/1, no self loops.

    Examples
    --------
    >>> import numpy as np
    >>> a, b = np.array([[0.0], [1.0], [5.0]]), np.array([[0.0], [9.0]])
    >>> W = entity_graph([a, b], [np.array([0, 1, 2]), np.array([2, 3])], 4, n_neighbors=1)
    >>> W.toarray().astype(int)   # a: 0-1, 1-2; b: its two rows are entities 2 and 3
    array([[0, 1, 0, 0],
           [1, 0, 1, 0],
           [0, 1, 0, 1],
           [0, 0, 1, 0]])
    """
    heads, tails = [], []
    for X, rows in zip(views, entity_rows):
        rows = np.asarray(rows, dtype=np.int64)
        if rows.shape != (len(X),):
            raise ValueError(f"entity_rows must hold one entity per row: {rows.shape} for {len(X)} rows")
        if len(X) < 2:
            continue
        G = knn_graph(X, min(int(n_neighbors), len(X) - 1), mode="connectivity", symmetrize=None).tocoo()
        heads.append(rows[G.row])
        tails.append(rows[G.col])
    if not heads:
        return sp.csr_matrix((n_entities, n_entities))
    heads, tails = np.concatenate(heads), np.concatenate(tails)
    keep = heads != tails  # two rows of one entity in one view (not possible for anchors) make no loop
    W = sp.csr_matrix((np.ones(int(keep.sum())), (heads[keep], tails[keep])), shape=(n_entities, n_entities))
    W = W.maximum(W.T)
    W.data[:] = 1.0
    return W


# ---------------------------------------------------------------------------------------------
# Connectivity
# ---------------------------------------------------------------------------------------------
def connected_component_labels(G) -> tuple[int, np.ndarray]:
    """``(n_components, labels)`` of the undirected graph with an edge wherever ``G`` is non-zero."""
    return csgraph.connected_components(sp.csr_matrix(G), directed=False)


def _describe_components(labels: np.ndarray, n_components: int) -> str:
    sizes = np.sort(np.bincount(labels, minlength=n_components))[::-1]
    shown = ", ".join(map(str, sizes[:10])) + (", ..." if sizes.size > 10 else "")
    return f"{n_components} connected components of sizes {shown}"


def check_connected(G, name: str = "graph") -> None:
    """Raise a ``ValueError`` naming the number of components and their sizes if ``G`` is disconnected.

    >>> import numpy as np
    >>> check_connected(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]]), name="view 'a'")
    Traceback (most recent call last):
    ...
    ValueError: view 'a' is disconnected: 2 connected components of sizes 2, 1; increase n_neighbors \
or pass connect_components=True
    """
    n_components, labels = connected_component_labels(G)
    if n_components > 1:
        raise ValueError(f"{name} is disconnected: {_describe_components(labels, n_components)}; "
                         "increase n_neighbors or pass connect_components=True")


def connect_components(G, X, *, mode: str = "distance") -> sp.csr_matrix:
    """Make a graph connected by adding, for each component, its shortest edge to another one.

    Borůvka's rule, repeated until one component is left (at most ``log2(#components)``
    rounds): in every round each component is joined to its nearest point (Euclidean, in
    ``X``) outside it. The added edges are symmetric, with the distance as value
    (``mode="distance"``) or 1 (``"connectivity"``). Apply it to the distance graph, before
    :func:`heat_kernel`, so the new edges get heat-kernel weights like the others.

    Nearest outside points are found with a k-NN query whose ``k`` doubles only for points
    that cannot yet rule out a closer outside point, so no dense distance matrix is formed.

    >>> import numpy as np
    >>> X = np.array([[0.0], [1.0], [10.0], [11.0]])
    >>> float(connect_components(knn_graph(X, 1), X)[1, 2])
    9.0
    """
    _check_mode(mode)
    X = check_view(X, "X")
    G = sp.csr_matrix(G, dtype=np.float64, copy=True)
    n = X.shape[0]
    if G.shape != (n, n):
        raise ValueError(f"graph of shape {G.shape} does not match X with {n} rows")
    tree = NearestNeighbors().fit(X)
    while True:
        n_components, labels = connected_component_labels(G)
        if n_components == 1:
            return G
        best_dist = np.full(n_components, np.inf)  # per component: shortest edge leaving it
        best_pair = np.zeros((n_components, 2), dtype=np.int64)
        pending = np.arange(n)  # points that may still hold their component's shortest outgoing edge
        k = min(n, 8)
        while pending.size:
            dist, ind = tree.kneighbors(X[pending], n_neighbors=k)  # [m, k]
            outside = labels[ind] != labels[pending][:, None]
            found = outside.any(axis=1)
            first = np.argmax(outside, axis=1)
            for row in np.flatnonzero(found):
                point, comp = pending[row], labels[pending[row]]
                d = dist[row, first[row]]
                if d < best_dist[comp]:
                    best_dist[comp] = d
                    best_pair[comp] = (point, ind[row, first[row]])
            # a point with no outside neighbour among its k nearest has every outside point
            # farther than its k-th neighbour; it matters only if that bound beats its component
            rest = ~found & (dist[:, -1] < best_dist[labels[pending]])
            pending = pending[rest]
            if k == n:
                break
            k = min(n, 2 * k)
        i, j = best_pair[:, 0], best_pair[:, 1]
        values = _floor_zero_distances(best_dist) if mode == "distance" else np.ones(n_components)
        added = sp.csr_matrix((values, (i, j)), shape=(n, n))
        added = added.maximum(added.T)
        G = G.maximum(added).tocsr()


_connect = connect_components  # knn_graph's keyword argument shadows the function's name


# ---------------------------------------------------------------------------------------------
# Geodesic distances
# ---------------------------------------------------------------------------------------------
def geodesic_distances(data, n_neighbors: int = 10, *, sources=None, connect_components: bool = False,
                       name: str = "X") -> np.ndarray:
    """Shortest-path distances along a k-NN graph (Isomap's geodesic estimate).

    This output is inherently dense: ``len(sources) x n`` floats (all ``n x n`` when
    ``sources`` is None); pass ``sources`` to compute only the rows you need.

    Parameters
    ----------
    data : array (n, p), or sparse (n, n) distance graph
        Points (a k-NN distance graph is built with ``n_neighbors``), or a ready graph whose
        stored values are edge lengths.
    n_neighbors : int
        Used only when ``data`` are points.
    sources : array of int, optional
        Row indices to compute distances from (Dijkstra from each).
    connect_components : bool
        Join the components of a disconnected graph (:func:`connect_components`; needs points).
        Otherwise a disconnected graph raises a ``ValueError`` naming its components.

    Returns
    -------
    ndarray (len(sources), n) or (n, n)

    >>> import numpy as np
    >>> geodesic_distances(np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]), n_neighbors=1)
    array([[0., 1., 2.],
           [1., 0., 1.],
           [2., 1., 0.]])
    """
    if sp.issparse(data):
        G = sp.csr_matrix(data, dtype=np.float64)
        if G.shape[0] != G.shape[1]:
            raise ValueError(f"a distance graph must be square, got shape {G.shape}")
        if connect_components:
            raise ValueError("connect_components=True needs the points, not a graph")
        G = G.maximum(G.T).tocsr()
    else:
        G = knn_graph(data, n_neighbors, mode="distance", connect_components=connect_components, name=name)
    check_connected(G, name=name)
    n = G.shape[0]
    if sources is not None:
        sources = np.atleast_1d(np.asarray(sources, dtype=np.int64))
        if sources.size and (sources.min() < -n or sources.max() >= n):
            raise ValueError(f"sources must be row indices in [0, {n}), got range "
                             f"[{sources.min()}, {sources.max()}]")
        sources = np.where(sources < 0, sources + n, sources)
    return csgraph.dijkstra(G, directed=False, indices=sources)


# ---------------------------------------------------------------------------------------------
# Generalized eigenproblem L f = lambda D f
# ---------------------------------------------------------------------------------------------
def _trivial_basis(L: sp.csr_matrix, sqrt_degree: np.ndarray) -> tuple[np.ndarray, int]:
    """Orthonormal basis [n, c] of the null space of D^{-1/2} L D^{-1/2}: D^{1/2} 1_component."""
    n_components, labels = connected_component_labels(L)
    N = np.zeros((L.shape[0], n_components))
    N[np.arange(L.shape[0]), labels] = sqrt_degree
    N /= np.linalg.norm(N, axis=0)
    return N, n_components


def _fix_signs(F: np.ndarray) -> np.ndarray:
    """Deterministic signs: the entry of largest magnitude of every column is positive."""
    rows = np.argmax(np.abs(F), axis=0)
    signs = np.sign(F[rows, np.arange(F.shape[1])])
    signs[signs == 0] = 1.0
    return F * signs


def smallest_generalized_eigenvectors(L, D, k: int, *, skip_trivial: bool = True, method: str = "auto",
                                      tol: float = 1e-10, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` smallest solutions of ``L f = lambda D f`` with ``F' D F = I``.

    The eigenproblem of Laplacian eigenmaps and of joint-Laplacian manifold alignment (Wang,
    Krafft & Mahadevan 2011, section 5.2.2: "the d smallest nonzero eigenvectors"). ``L`` is a
    symmetric graph Laplacian and ``D`` its positive diagonal degree matrix. It is solved in
    the symmetric form ``S g = lambda g`` with ``S = D^{-1/2} L D^{-1/2}`` and ``f = D^{-1/2} g``,
    so orthonormal ``g`` give ``F' D F = I``.

    With ``skip_trivial`` the null space of ``L`` (the constant vector of each connected
    component, eigenvalue 0) is removed exactly, by deflation with its known basis
    ``D^{1/2} 1_component``, rather than by dropping the first computed eigenvalues; so a
    graph with c components returns its ``k`` smallest eigenpairs orthogonal to those c.

    Parameters
    ----------
    L, D : sparse or dense (n, n)
        Symmetric Laplacian (rows summing to zero if ``skip_trivial``) and diagonal ``D > 0``.
    k : int
        Number of eigenpairs; at most ``n - c`` (``c`` components) with ``skip_trivial``.
    skip_trivial : bool
        Exclude the trivial constant eigenvector(s), one per connected component.
    method : "auto", "dense", "arpack" or "lobpcg"
        ``"dense"``: ``scipy.linalg.eigh`` (O(n^3), forms dense n x n; used by ``"auto"`` for
        ``n <= 1500``). ``"arpack"``: ``eigsh`` in shift-invert mode on
        ``(S - sigma I)^{-1}`` with ``sigma = -1e-6``: ``S - sigma I`` is positive definite, so its
        sparse LU factorization exists, and the smallest eigenvalues of ``S`` become the best
        separated largest ones of the inverse (``"auto"`` for larger n). ``"lobpcg"``: matrix-free
        LOBPCG preconditioned by an incomplete LU of ``S - sigma I``, for graphs whose full
        factorization does not fit in memory (slower; convergence is not guaranteed).
    tol : float
        Convergence tolerance of the iterative solvers.
    seed : int or Generator
        Starting vector of the iterative solvers (results are deterministic for a given seed).

    Returns
    -------
    eigenvalues : ndarray (k,), ascending
    F : ndarray (n, k), ``F' D F = I``; each column's largest-magnitude entry is positive.

    Raises
    ------
    ValueError
        ``k`` too large, ``D`` not diagonal positive, shapes that do not match, or (with
        ``skip_trivial``) ``L`` whose rows do not sum to zero.

    >>> import numpy as np
    >>> W = np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]], dtype=float)  # a path
    >>> values, F = smallest_generalized_eigenvectors(*laplacian(W), 1)
    >>> round(float(values[0]), 6)
    0.5
    """
    L = _check_square_symmetric(L, "L")
    n = L.shape[0]
    D = sp.csr_matrix(D, dtype=np.float64)
    if D.shape != (n, n):
        raise ValueError(f"D has shape {D.shape}, L has shape {L.shape}")
    degree = D.diagonal()
    if (D - sp.diags(degree)).count_nonzero():
        raise ValueError("D must be diagonal (the degree matrix)")
    if not np.all(degree > 0):
        bad = int(np.flatnonzero(~(degree > 0))[0])
        raise ValueError(f"D must be positive on the diagonal; node {bad} has degree {degree[bad]} "
                         "(an isolated vertex: connect it or remove it)")
    k = int(k)
    if skip_trivial:
        row_sums = np.abs(np.asarray(L.sum(axis=1)).ravel())
        if row_sums.max() > 1e-8 * max(1.0, abs(L).max()):
            raise ValueError("skip_trivial=True needs a graph Laplacian L = D - W (rows summing to zero); "
                             f"row {int(np.argmax(row_sums))} sums to {row_sums.max():.3g}")
    inv_sqrt = 1.0 / np.sqrt(degree)
    S = (sp.diags(inv_sqrt) @ L @ sp.diags(inv_sqrt)).tocsr()  # [n, n], symmetric
    S = ((S + S.T) * 0.5).tocsr()
    if skip_trivial:
        N, n_trivial = _trivial_basis(L, np.sqrt(degree))  # [n, c]
    else:
        N, n_trivial = np.zeros((n, 0)), 0
    available = n - n_trivial
    if not 1 <= k <= available:
        extra = f" minus {n_trivial} trivial eigenvector(s), one per connected component" if n_trivial else ""
        raise ValueError(f"k must be between 1 and {available} ({n} nodes{extra}), got {k}")
    if method == "auto":
        method = "dense" if n <= DENSE_EIGEN_LIMIT else "arpack"
    if method == "arpack" and k >= available - 1:
        method = "dense"  # ARPACK needs k < (size of the problem) - 1
    rng = as_rng(seed)

    def deflate(V):  # project out the trivial eigenvectors
        return V - N @ (N.T @ V) if n_trivial else V

    if method == "dense":
        A = S.toarray()
        if n_trivial:
            A += 3.0 * (N @ N.T)  # trivial eigenvalues 0 -> 3 > 2 >= spectrum of S: out of the way
        values, G = scipy.linalg.eigh(A, subset_by_index=[0, k - 1])
    elif method == "arpack":
        sigma = -1e-6
        lu = spla.splu((S - sigma * sp.identity(n, format="csr")).tocsc())  # COLAMD: fast ordering
        operator = spla.LinearOperator((n, n), matvec=lambda v: deflate(lu.solve(deflate(v))),
                                       dtype=np.float64)
        v0 = deflate(rng.standard_normal(n))
        nu, G = spla.eigsh(operator, k=k, which="LA", v0=v0, tol=tol,
                           ncv=min(available, max(2 * k + 1, k + 20)))
        values = sigma + 1.0 / nu
    elif method == "lobpcg":
        sigma = -1e-6
        ilu = spla.spilu((S - sigma * sp.identity(n, format="csr")).tocsc(), drop_tol=1e-4, fill_factor=20)
        precond = spla.LinearOperator((n, n), matvec=ilu.solve, dtype=np.float64)
        X0 = deflate(rng.standard_normal((n, k)))
        values, G = spla.lobpcg(S, X0, M=precond, Y=N if n_trivial else None, tol=max(tol, 1e-8),
                                maxiter=max(200, 20 * k), largest=False)
    else:
        raise ValueError(f"method must be 'auto', 'dense', 'arpack' or 'lobpcg', got {method!r}")
    order = np.argsort(values)
    values, G = values[order], G[:, order]
    # The shift-invert operator multiplies round-off along the trivial vectors (eigenvalue 0) by 1 / |sigma| = 1e6:
    # project them out of the result again, then exact orthonormality (iterative solvers stop at tol).
    G, _ = np.linalg.qr(deflate(G))
    F = _fix_signs(inv_sqrt[:, None] * G)  # [n, k]
    values = np.einsum("ij,ij->j", F, L @ F)  # Rayleigh quotients, F' D F = I
    return values, F
