"""Neighbourhood graphs, heat kernels, graph Laplacians, geodesic distances and the
generalized eigen-solver behind the spectral alignment methods.

Everything here is ``scipy.sparse`` (CSR) and linear in the number of points, except
:func:`geodesic_distances`, whose output is dense by nature (one row per source point).

Modules, one job each: :mod:`~bayesalign.graph.neighbours` (k-NN, epsilon and entity graphs),
:mod:`~bayesalign.graph.weights` (heat kernel, local scaling, degree checks),
:mod:`~bayesalign.graph.connectivity` (components), :mod:`~bayesalign.graph.geodesic` (shortest
paths), :mod:`~bayesalign.graph.spectrum` (Laplacians and the generalized eigen-solver).

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


from .connectivity import check_connected, connect_components, connected_component_labels
from .geodesic import geodesic_distances
from .neighbours import entity_graph, epsilon_graph, knn_graph
from .spectrum import laplacian, smallest_generalized_eigenvectors
from .weights import (
    DEGREE_RATIO_LIMIT,
    check_degrees,
    degree_spread,
    heat_kernel,
    local_scales,
    local_scaling_kernel,
    median_edge_length,
)

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
