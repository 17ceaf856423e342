"""Instance-level manifold alignment by embedding the joint graph Laplacian.

Wang, Krafft & Mahadevan (2011), "Manifold Alignment", sections 5.2 (joint Laplacian) and
5.3.2 (hard constraints); the semi-supervised alignment of Ham, Lee & Saul (2005).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.csgraph as csgraph

from ..data import AlignmentProblem, LatentEmbedding
from ..graph import check_connected, laplacian, smallest_generalized_eigenvectors
from ._base import (
    SpectralAlignment,
    check_n_components,
    correspondence_matrices,
    joint_adjacency,
    split_rows,
    view_offsets,
    within_view_affinity,
)

__all__ = ["JointLaplacianAlignment"]


class JointLaplacianAlignment(SpectralAlignment):
    """Laplacian eigenmaps of the joint graph of all views (Wang, Krafft & Mahadevan 2011, 5.2).

    The joint adjacency (section 5.2, figure 5.4) stacks the within-view similarities
    ``W^{(a)}`` (heat kernel on a k-NN graph) on the diagonal and the anchor correspondences
    ``W^{(a,b)}`` off it::

        W = [[nu W^(1),   mu W^(1,2), ...],
             [mu W^(2,1), nu W^(2),   ...], ...],    L = D - W,  D = diag(W 1)

    and the embedding minimises ``tr(F' L F)`` subject to ``F' D F = I``: the ``n_components``
    smallest non-trivial solutions of ``L f = lambda D f`` (section 5.2.2). Rows of ``F`` that
    belong to view ``g`` are its coordinates (section 5.2.3, step 4). Any number of views.

    Scale: the coordinates are the D-normalised eigenvectors, ``F' D F = I`` (Laplacian
    eigenmaps' normalisation), so a column has a root-mean-square of about
    ``1 / sqrt(sum of all degrees)`` and a row of degree ``d_i`` gets coordinates of order
    ``1 / sqrt(d_i)`` relative to that. A row nearly cut off from its neighbours (tiny degree)
    would therefore be placed far out of scale; the default local-scaling affinity avoids such
    rows, and a degree spread above ``bayesalign.graph.DEGREE_RATIO_LIMIT`` is warned about.

    With ``hard_constraints=True`` (section 5.3.2) corresponding instances are merged into one
    node instead of being tied by ``mu``-weighted edges: every group of rows linked by anchors
    (transitively, across all views) becomes one row of the joint graph whose edges are the sum
    of its members' within-view edges; its embedding is copied back to every member, which
    therefore coincide exactly. ``mu`` and the anchor weights are not used then.

    Parameters
    ----------
    n_components : int
        Latent dimension ``d``.
    n_neighbors : int
        k of the within-view k-NN graphs.
    mu : float
        Weight of the correspondence term (``mu`` of section 5.2). The chapter gives no value; over
        the comparison suite's 11 datasets (quick sizes, 10% and 25% anchors, 2 seeds) the mean
        accuracy was 0.12 with mu = 1, 0.24 with 10, 0.28 with 100 (the default) and 0.28 with 1000
        (with unit heat-kernel weights and k-NN degrees of about ``n_neighbors``, mu = 100 lets
        each anchor edge outweigh a point's whole neighbourhood).
    nu : float
        Weight of the within-view term (``nu`` of section 5.2).
    hard_constraints : bool
        Merge corresponding instances (section 5.3.2) instead of soft ``mu`` edges.
    affinity : "local", "heat" or "connectivity"
        Within-view weights (:func:`~bayesalign.spectral._base.within_view_affinity`): local
        scaling ``exp(-d_ij^2 / (sigma_i sigma_j))``, ``sigma_i`` the distance to row i's 7th
        neighbour (Zelnik-Manor & Perona 2004; the default, which does not leave a row far from
        the others with a vanishing degree), one global heat-kernel width
        ``exp(-d^2 / (2 sigma^2))`` (the chapter's), or 0/1.
    sigma : float, optional
        Width of ``affinity="heat"``; default the median k-NN distance of each view.
    connect_components : bool
        Join disconnected within-view graphs by their shortest edges. Otherwise a joint graph
        that is disconnected raises a ``ValueError`` naming its components: a component with no
        anchor would float freely in the embedding.
    eigen_solver : "auto", "dense", "arpack" or "lobpcg"
        See :func:`bayesalign.graph.smallest_generalized_eigenvectors`.
    seed : int
        Starting vector of the iterative eigen-solvers.

    Attributes
    ----------
    embedding_ : LatentEmbedding
        ``info["eigenvalues"]`` holds the ``n_components`` eigenvalues (the cost of section 5.2.2).
    eigenvalues_ : ndarray (n_components,)

    Notes
    -----
    Fitting needs anchors (``problem.anchors`` or ``fit(problem, anchors=...)``, e.g. a
    correspondence found by :mod:`bayesalign.spectral.local_patterns`).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesalign.data import AlignmentProblem
    >>> t = np.linspace(0, 3, 60)[:, None]
    >>> problem = AlignmentProblem.paired({"a": np.hstack([t, t ** 2]), "b": np.hstack([-t, np.sin(t)])})
    >>> problem = problem.split_anchors(0.2, seed=0)
    >>> emb = JointLaplacianAlignment(n_components=1, n_neighbors=4).fit(problem).embedding_
    >>> bool(np.corrcoef(emb["a"][:, 0], emb["b"][:, 0])[0, 1] > 0.99)
    True
    """

    def __init__(self, n_components: int = 2, n_neighbors: int = 10, *, mu: float = 100.0, nu: float = 1.0,
                 hard_constraints: bool = False, affinity: str = "local", sigma: float | None = None,
                 connect_components: bool = False, eigen_solver: str = "auto", seed=0):
        self.n_components = n_components
        self.n_neighbors = n_neighbors
        self.mu = mu
        self.nu = nu
        self.hard_constraints = hard_constraints
        self.affinity = affinity
        self.sigma = sigma
        self.connect_components = connect_components
        self.eigen_solver = eigen_solver
        self.seed = seed

    def _fit(self, problem: AlignmentProblem) -> LatentEmbedding:
        views = problem.views
        names = views.names
        if not problem.anchors or all(len(c) == 0 for c in problem.anchors.values()):
            raise ValueError("JointLaplacianAlignment needs anchor pairs between the views; pass "
                             "fit(problem, anchors=...) (e.g. a Correspondence from local pattern matching)")
        if self.mu <= 0 or self.nu <= 0:
            raise ValueError(f"mu and nu must be positive, got mu={self.mu}, nu={self.nu}")
        within = {v: within_view_affinity(views[v], self.n_neighbors, affinity=self.affinity, sigma=self.sigma,
                                          connect_components=self.connect_components, name=v)
                  for v in names}  # [n_v, n_v] each
        self._record_degrees(within)
        slices = view_offsets(views.n_samples, names)
        n_total = sum(views.n_samples.values())
        if self.hard_constraints:
            W_within = joint_adjacency(within, {}, names, nu=self.nu)
            merge = self._merge_matrix(problem, slices, n_total)  # [N, N_merged], 0/1
            W = (merge.T @ W_within @ merge).tocsr()  # [N_merged, N_merged]: summed adjacencies
            W.setdiag(0)  # edges inside a merged group are self-loops: they do not constrain F
            W.eliminate_zeros()
            size = W.shape[0]
        else:
            W = joint_adjacency(within, correspondence_matrices(problem), names, mu=self.mu, nu=self.nu)
            merge, size = None, n_total
        check_n_components(self.n_components, size - 1,
                           f"the joint graph of {size} nodes (minus the constant eigenvector)")
        check_connected(W, name="the joint graph of the views (within-view k-NN graphs plus anchors)")
        L, D = laplacian(W)
        values, F = smallest_generalized_eigenvectors(L, D, self.n_components, method=self.eigen_solver,
                                                      seed=self.seed)  # [size, d]
        if merge is not None:
            F = merge @ F  # copy each merged row back to every member (section 5.3.2)
        self.eigenvalues_ = values
        return LatentEmbedding(split_rows(F, slices), method="joint_laplacian",
                               info={"eigenvalues": values, "hard_constraints": bool(self.hard_constraints),
                                     "mu": self.mu, "nu": self.nu})

    @staticmethod
    def _merge_matrix(problem, slices, n_total) -> sp.csr_matrix:
        """0/1 matrix [N, N_merged]: row r of the joint data -> its group of anchored rows."""
        rows, cols = [], []
        for (a, b), corr in problem.anchors.items():
            rows.append(corr.index_a + slices[a].start)
            cols.append(corr.index_b + slices[b].start)
        rows, cols = np.concatenate(rows), np.concatenate(cols)
        links = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_total, n_total))
        n_groups, group = csgraph.connected_components(links, directed=False)  # transitive closure
        return sp.csr_matrix((np.ones(n_total), (np.arange(n_total), group)), shape=(n_total, n_groups))
