"""Feature-level (linear) manifold alignment: manifold projections.

Wang, Krafft & Mahadevan (2011), "Manifold Alignment", section 5.3.1 ("Linear Restriction"):
locality preserving projections of the joint Laplacian.
"""

from __future__ import annotations

import numpy as np

from ..data import AlignmentProblem, LatentEmbedding
from ..graph import laplacian
from ._base import (
    SpectralAlignment,
    correspondence_matrices,
    joint_adjacency,
    locality_preserving_projections,
    view_offsets,
    within_view_affinity,
)

__all__ = ["LinearAlignment"]


class LinearAlignment(SpectralAlignment):
    """Manifold projections: linear maps of every view into one space (section 5.3.1).

    With the joint adjacency ``W``, Laplacian ``L = D - W`` (as in
    :class:`~bayesalign.spectral.JointLaplacianAlignment`) and the block-diagonal data matrix
    ``X = diag(X^(1), ..., X^(c))`` (each view centred), the projections ``F`` minimise
    ``tr(F' X' L X F)`` subject to ``F' X' D X F = I``: the smallest solutions of

        X' L X f = lambda (X' D X + gamma I) f,

    locality preserving projections on the joint graph. View ``a``'s coordinates are
    ``(X^(a) - center_a) F^(a)``, so new rows can be transformed (``embedding_.transform``),
    and ``F^(a) (F^(b))^+`` maps view a's features to view b's (:meth:`cross_view_map`).

    Regularisation. ``X' D X`` is singular when a view has p >= n or collinear features, and a
    ridge on that side alone does not fix it: any ``f`` with ``X f = 0`` has cost 0 and would be
    returned first, as an all-zero embedding. So the ridge ``gamma_v = reg * mean eigenvalue of
    X_v' D_v X_v`` is added to ``X' D X`` and ``2 gamma_v`` to ``X' L X``, which sends directions
    without data to the eigenvalue 2, the top of the spectrum (details in
    :func:`~bayesalign.spectral._base.locality_preserving_projections`).

    Cost. A view with p > n is first reduced exactly to its row space (an n x n Gram
    eigen-decomposition), so the problem has ``R = sum_v min(p_v, n_v)`` unknowns; it is dense
    ``R x R`` (200 MB for R = 5000, e.g. two views of 2,500 features), assembled block by block
    (the off-diagonal blocks from the anchored rows only) and solved by LAPACK for
    ``R <= 1500``, otherwise by shift-invert Lanczos on one Cholesky factorisation (``R^3 / 3``).

    Parameters
    ----------
    n_components : int
    n_neighbors : int
        k of the within-view k-NN graphs.
    mu, nu : float
        Weights of the correspondence and within-view terms (section 5.2). The chapter gives no
        value for ``mu``; with ``mu = 1`` an anchor edge weighs less than a point's neighbourhood and
        the projections hardly align the views (FOSCTTM near 0.45 on the shipped mfeat pairs at 10%
        anchors, about 0.13 with the default ``mu = 100``; benchmarks/RESULTS.md, "Spectral methods").
    affinity : "local", "heat" or "connectivity"
        Within-view weights (:func:`~bayesalign.spectral._base.within_view_affinity`): local
        scaling ``exp(-d_ij^2 / (sigma_i sigma_j))``, ``sigma_i`` the distance to row i's 7th
        neighbour (Zelnik-Manor & Perona 2004; the default, which does not leave a row far from
        the others with a vanishing degree), one global heat-kernel width
        ``exp(-d^2 / (2 sigma^2))`` (the chapter's), or 0/1.
    sigma : float, optional
        Width of ``affinity="heat"``; default the median k-NN distance of each view.
    reg : float
        Relative ridge (see above); keep it > 0 unless every view has independent features.
    connect_components : bool
        Join disconnected within-view graphs by their shortest edges.
    eigen_solver : "auto", "dense" or "arpack"
    seed : int
        Starting vector of Lanczos.

    Attributes
    ----------
    embedding_ : LatentEmbedding with ``projections`` (p_v, d) and ``centers`` (p_v,)
    eigenvalues_ : ndarray (n_components,)

    Examples
    --------
    >>> import numpy as np
    >>> from bayesalign.data import AlignmentProblem
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 3)) * [3.0, 2.0, 1.0]
    >>> Q = np.linalg.qr(rng.normal(size=(3, 3)))[0]  # view b is a rotation of view a
    >>> problem = AlignmentProblem.paired({"a": X, "b": X @ Q}).split_anchors(0.3, seed=0)
    >>> model = LinearAlignment(n_components=3, n_neighbors=5, mu=10.0).fit(problem)
    >>> emb = model.embedding_
    >>> bool(np.allclose(emb.transform("a", X), emb["a"])), bool(np.allclose(emb["a"], emb["b"]))
    (True, True)
    >>> bool(np.allclose(model.cross_view_map("a", "b"), Q))  # the rotation, recovered
    True
    """

    def __init__(self, n_components: int = 2, n_neighbors: int = 10, *, mu: float = 100.0, nu: float = 1.0,
                 affinity: str = "local", sigma: float | None = None, reg: float = 1e-6,
                 connect_components: bool = False, eigen_solver: str = "auto", seed=0):
        self.n_components = n_components
        self.n_neighbors = n_neighbors
        self.mu = mu
        self.nu = nu
        self.affinity = affinity
        self.sigma = sigma
        self.reg = reg
        self.connect_components = connect_components
        self.eigen_solver = eigen_solver
        self.seed = seed

    def _fit(self, problem: AlignmentProblem) -> LatentEmbedding:
        views = problem.views
        names = views.names
        if not (self.mu >= 0 and self.nu > 0 and self.reg >= 0):  # NaN too
            raise ValueError(f"need mu >= 0, nu > 0, reg >= 0; got mu={self.mu}, nu={self.nu}, reg={self.reg}")
        within = {v: within_view_affinity(views[v], self.n_neighbors, affinity=self.affinity, sigma=self.sigma,
                                          connect_components=self.connect_components, name=v)
                  for v in names}
        self._record_degrees(within)
        W = joint_adjacency(within, correspondence_matrices(problem), names, mu=self.mu, nu=self.nu)
        L, D = laplacian(W)  # [N, N] sparse
        slices = view_offsets(views.n_samples, names)
        centers = {v: views[v].mean(axis=0) for v in names}
        values, projections = locality_preserving_projections(
            L, D, {v: views[v] - centers[v] for v in names}, slices, self.n_components, reg=self.reg,
            eigen_solver=self.eigen_solver, seed=self.seed)  # F^(v): [p_v, d]
        means = {v: (views[v] - centers[v]) @ projections[v] for v in names}
        self.eigenvalues_ = values
        return LatentEmbedding(means, projections=projections, centers=centers, method="linear_alignment",
                               info={"eigenvalues": values, "mu": self.mu, "nu": self.nu})

    def cross_view_map(self, a: str, b: str) -> np.ndarray:
        """``F^(a) (F^(b))^+`` (p_a, p_b): view a's features expressed in view b's (section 5.3.1).

        A centred row ``x - center_a`` of view a maps to ``(x - center_a) @ M + center_b`` in
        view b's coordinates ("Comparison to Nonlinear Alignment"); when view b is a rotation of
        view a and the latent space is as large as the views, ``M`` is that rotation.
        """
        self._check_fitted()
        P = self.embedding_.projections
        for v in (a, b):
            if v not in P:
                raise KeyError(f"no view named {v!r}; views are {list(P)}")
        return P[a] @ np.linalg.pinv(P[b])
