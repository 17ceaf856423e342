"""Geodesic distances: shortest paths along a k-nearest-neighbour graph (Isomap's estimate)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

from .connectivity import check_connected
from .neighbours import knn_graph


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
