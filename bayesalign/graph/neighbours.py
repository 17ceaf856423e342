"""Neighbourhood graphs: k-nearest-neighbour and epsilon graphs of a view, and the entity graph across views."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.neighbors import NearestNeighbors

from ..data import check_view
from ._checks import _check_mode, _floor_zero_distances
from .connectivity import connect_components as _connect  # knn_graph's keyword argument shadows the name


def _symmetrize(G: sp.csr_matrix, symmetrize) -> sp.csr_matrix:
    if symmetrize is None:
        return G
    if symmetrize == "or":  # edge if either point is among the other's neighbours
        return G.maximum(G.T).tocsr()
    if symmetrize in ("and", "mutual"):  # edge only if each is among the other's neighbours
        return G.minimum(G.T).tocsr()
    raise ValueError(f"symmetrize must be 'or', 'and' (alias 'mutual') or None, got {symmetrize!r}")


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
