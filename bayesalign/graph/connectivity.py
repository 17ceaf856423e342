"""Connected components of a graph: their labels, a clear error for a disconnected graph, and joining them."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph
from sklearn.neighbors import NearestNeighbors

from ..data import check_view
from ._checks import _check_mode, _floor_zero_distances


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
    >>> from bayesalign.graph import knn_graph
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
