"""Multiscale manifold alignment with diffusion wavelets (Wang, Krafft & Mahadevan 2011, section 5.3.3).

Diffusion wavelets (Coifman & Maggioni 2006) compress the dyadic powers
``T, T^2, T^4, ..., T^(2^k)`` of a diffusion operator ``T``: at each level a
rank-revealing (column-pivoted) QR at precision ``epsilon`` finds an orthonormal
basis of the numerical range of the current power (the *scaling functions*), the
operator is represented on that basis and squared. For a symmetric ``T`` with
eigenvalues ``lambda_i`` the basis of level ``k`` spans, up to ``epsilon``, the
eigenvectors with ``|lambda_i|^(2^k) >= epsilon`` -- so the hierarchy of subspaces,
and the dimension of each level, come out of the spectrum instead of being chosen.

:class:`MultiscaleAlignment` applies this to the joint manifold of section 5.2
(main algorithm of section 5.3.3, steps 1-5) and returns one
:class:`~bayesalign.data.LatentEmbedding` per level, nested
(``span(A_1) >= span(A_2) >= ...``), from fine to coarse.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from ..data import AlignmentProblem, LatentEmbedding
from ..graph import check_connected, laplacian
from ._base import (
    SpectralAlignment,
    correspondence_matrices,
    joint_adjacency,
    split_rows,
    view_offsets,
    within_view_affinity,
)

__all__ = ["MultiscaleAlignment", "diffusion_wavelets"]


def _rank_revealing_qr(A: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal basis Q [n, r] of the numerical range of A at precision epsilon, and Q' A.

    Column-pivoted QR (LAPACK geqp3) is Gram-Schmidt that always takes the column of
    largest remaining norm next, so ``|R[j, j]|`` is the largest norm of what is left of any
    column after removing the first j directions. Stopping at the first ``|R[j, j]| < epsilon``
    is Coifman & Maggioni's stopping rule: every column of A is then represented by Q to
    within epsilon.
    """
    Q, R, _ = scipy.linalg.qr(A, mode="economic", pivoting=True)
    diag = np.abs(np.diag(R))
    rank = int(np.searchsorted(-diag, -epsilon, side="right"))  # diag is non-increasing
    Q = Q[:, :rank]  # [n, r]
    return Q, Q.T @ A


def _spectral_norm(T: np.ndarray) -> float:
    if T.shape[0] <= 300:
        return float(np.linalg.norm(T, 2))
    return float(spla.svds(T, k=1, return_singular_vectors=False, random_state=0)[0])


def diffusion_wavelets(T, epsilon: float = 1e-6, max_levels: int = 12, *, min_dim: int = 1) -> dict:
    """Diffusion-wavelet scaling functions of an operator's dyadic powers (Coifman & Maggioni 2006).

    For j = 0, 1, ...::

        [Phi_{j+1}]_{Phi_j}, [T^(2^j)]_{Phi_j}^{Phi_{j+1}} = QR_epsilon([T^(2^j)]_{Phi_j}^{Phi_j})
        [T^(2^(j+1))]_{Phi_{j+1}}^{Phi_{j+1}} = ([T^(2^j)]_{Phi_j}^{Phi_{j+1}} [Phi_{j+1}]_{Phi_j})^2

    with Phi_0 the identity (the original coordinates). Level k of the output is
    ``Phi_{k+1}``: an orthonormal basis of the range of T^(2^k) at precision epsilon,
    i.e. for a symmetric T the span of the eigenvectors with
    ``|lambda|^(2^k) >= epsilon`` (section 5.3.3, "Optimal Solutions").

    This implementation is dense (one n x n pivoted QR at the first level, then
    d_k x d_k ones); the sparse QR of the original algorithm is not used.

    Parameters
    ----------
    T : array or sparse matrix (n, n)
        The diffusion operator, scaled so that its spectral radius is at most 1 (a
        random walk, ``D^{-1/2} W D^{-1/2}``, or any operator divided by its norm);
        ``epsilon`` is then an absolute precision on eigenvalues in [0, 1].
    epsilon : float
        Precision of the rank-revealing QR, in (0, 1).
    max_levels : int
        Maximum number of levels.
    min_dim : int
        Stop once a level has at most this many scaling functions.

    Returns
    -------
    dict with
        ``bases``: list of arrays (n, d_k), the scaling functions of each level in the
        original coordinates (orthonormal columns);
        ``operators``: list of arrays (d_k, d_k), T^(2^k) represented on the level's basis;
        ``dimensions``: list of d_k (non-increasing).

    Examples
    --------
    >>> T = np.diag([1.0, 0.5, 0.2, 0.001])   # level k keeps the lambda with lambda^(2^k) >= 1e-4
    >>> diffusion_wavelets(T, epsilon=1e-4)["dimensions"]
    [4, 3, 3, 2, 1]
    """
    if sp.issparse(T):
        T = T.toarray()
    T = np.array(T, dtype=np.float64, copy=True)
    if T.ndim != 2 or T.shape[0] != T.shape[1] or T.shape[0] == 0:
        raise ValueError(f"T must be a non-empty square matrix, got shape {T.shape}")
    if not np.all(np.isfinite(T)):
        raise ValueError("T has non-finite entries")
    if not 0 < epsilon < 1:
        raise ValueError(f"epsilon must be in (0, 1), got {epsilon}")
    if int(max_levels) < 1:
        raise ValueError(f"max_levels must be at least 1, got {max_levels}")
    radius = _spectral_norm(T)
    if radius > 1.0 + 1e-8:
        raise ValueError(f"T must have spectral norm at most 1 (a diffusion operator); got {radius:.6g}: "
                         "divide it by its norm")
    bases, operators, dims = [], [], []
    basis = None  # [Phi_j]_{Phi_0}; None is the identity
    Tj = T  # [T^(2^j)]_{Phi_j}^{Phi_j}  [d_j, d_j]
    for _ in range(int(max_levels)):
        Q, _ = _rank_revealing_qr(Tj, epsilon)  # [d_j, d_{j+1}]
        if Q.shape[1] == 0:
            break
        basis = Q if basis is None else basis @ Q  # [n, d_{j+1}], orthonormal columns
        compressed = Q.T @ Tj @ Q  # T^(2^j) on the new basis  [d_{j+1}, d_{j+1}]
        bases.append(basis)
        operators.append(compressed)
        dims.append(Q.shape[1])
        if Q.shape[1] <= min_dim:
            break
        Tj = compressed @ compressed  # T^(2^(j+1)) on the new basis
    return {"bases": bases, "operators": operators, "dimensions": dims}


class MultiscaleAlignment(SpectralAlignment):
    """Multiscale manifold alignment with diffusion wavelets (Wang, Krafft & Mahadevan 2011, section 5.3.3).

    Returns a hierarchy of alignments, from fine to coarse, whose dimensions are found
    from the spectrum of the joint manifold at precision ``epsilon`` instead of being
    chosen (the chapter reports 800, 91 and 2 basis functions for its LSI/LDA corpus).

    ``level="feature"`` is the chapter's main algorithm:

    1. the joint Laplacian L of section 5.2 (heat-kernel k-NN graphs within views, ``mu``
       times the anchors' W^(a,b) across them);
    2. G with G'G = X'X from the SVD of the block-diagonal, centred data X = U S V'
       (G = S V', r = rank of X);
    3. T = ((G')^+ X' L X G^+)^+ = (U' L U)^+, divided by its largest eigenvalue so that it is
       a diffusion operator with spectrum in (0, 1]. Its leading eigenvectors are the
       minimum solutions of X' L X f = lambda X' X f;
    4. the diffusion wavelets of T (:func:`diffusion_wavelets`): scaling functions
       [phi_k] (r x d_k) at every level k;
    5. mapping functions F_k = G^+ [phi_k] (sum p_v x d_k); view v's block gives its
       projection, and the coordinates are X F_k = U [phi_k].

    The chapter writes step 4 as ``DWT(T^+, epsilon)``; T^+ = (G')^+ X' L X G^+ has the
    *worst*-aligned directions as its leading eigenvectors, so we read it as the diffusion
    wavelets of the operator T itself, whose powers keep the best-aligned ones.

    ``level="instance"`` applies the same construction to the nonlinear alignment: the
    diffusion operator is the lazy walk T = (I + D^{-1/2} W D^{-1/2}) / 2 of the joint
    adjacency W (spectrum in [0, 1]), with its trivial eigenvector (D^{1/2} 1 on each connected
    component, eigenvalue 1) deflated; coordinates are D^{-1/2} [phi_k], as in Laplacian
    eigenmaps. This is dense N x N (N = all rows), refused above ``max_samples``.

    Parameters
    ----------
    epsilon : float
        Precision of the diffusion wavelets: level k spans the eigenvectors of T with
        lambda^(2^k) >= epsilon.
    max_levels : int
        Number of dyadic powers computed at most.
    level : "auto", "feature" or "instance"
        ``"auto"`` (default): ``"instance"`` when all views together have at most
        ``auto_instance_limit`` rows, else ``"feature"``. On the shipped real pairs at 10% anchors the
        instance level aligns far better than the feature level (benchmarks/RESULTS.md, "Spectral
        methods"), but it is dense in the rows (an N x N pivoted QR, cubic in N).
    n_neighbors, affinity, sigma : within-view graphs (``bayesalign.spectral._base.within_view_affinity``;
        ``affinity="local"``, local scaling, by default; ``"heat"`` is the chapter's single width)
    mu, nu : weights of the correspondence and within-view terms of the joint adjacency (``mu = 100`` by
        default, as in :class:`~bayesalign.spectral.JointLaplacianAlignment`; with ``mu = 1`` the anchors
        hardly tie the views together on the shipped real pairs).
    min_components : int
        ``embedding_`` is the coarsest level with at least this many dimensions.
    connect_components : bool
        Join disconnected within-view graphs by their shortest edges.
    max_samples : int
        Largest total number of rows for ``level="instance"``.
    auto_instance_limit : int
        Largest total number of rows for which ``level="auto"`` picks the instance level.

    Attributes
    ----------
    embeddings_ : list of LatentEmbedding
        One per distinct level, fine to coarse (levels whose dimension equals the previous
        one span the same subspace and are skipped); ``info["power"]`` is the dyadic power
        2^k of T the level represents.
    dimensions_ : list of int
    embedding_ : LatentEmbedding
        The coarsest level with at least ``min_components`` dimensions.
    wavelets_ : dict
        The raw output of :func:`diffusion_wavelets` (all levels).
    level_ : "feature" or "instance"
        The level that was fitted (what ``level="auto"`` chose).

    Examples
    --------
    >>> from bayesalign.data import AlignmentProblem, Correspondence
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 5))
    >>> Q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    >>> problem = AlignmentProblem({"a": X, "b": X @ Q},
    ...                            anchors=Correspondence.from_pairs([(i, i) for i in range(0, 80, 4)], ("a", "b")))
    >>> model = MultiscaleAlignment(epsilon=1e-3, level="feature").fit(problem)
    >>> model.dimensions_[0], model.dimensions_[-1]
    (10, 1)
    """

    def __init__(self, epsilon: float = 1e-6, max_levels: int = 12, level: str = "auto",
                 n_neighbors: int = 10, affinity: str = "local", sigma: float | None = None, mu: float = 100.0,
                 nu: float = 1.0, min_components: int = 2, connect_components: bool = False,
                 max_samples: int = 4000, auto_instance_limit: int = 1500):
        self.epsilon = epsilon
        self.max_levels = max_levels
        self.level = level
        self.n_neighbors = n_neighbors
        self.affinity = affinity
        self.sigma = sigma
        self.mu = mu
        self.nu = nu
        self.min_components = min_components
        self.connect_components = connect_components
        self.max_samples = max_samples
        self.auto_instance_limit = auto_instance_limit

    def _joint_graph(self, problem):
        views = problem.views
        names = views.names
        within = {v: within_view_affinity(views[v], self.n_neighbors, affinity=self.affinity, sigma=self.sigma,
                                          connect_components=self.connect_components, name=v)
                  for v in names}
        self._record_degrees(within)
        for v, Wv in within.items():
            check_connected(Wv, name=f"the k-NN graph of view {v!r}")
        W = joint_adjacency(within, correspondence_matrices(problem), names, mu=self.mu, nu=self.nu)  # [N, N]
        check_connected(W, name="the joint graph (views linked by anchors)")
        return W

    def _fit(self, problem: AlignmentProblem) -> LatentEmbedding:
        if self.level not in ("auto", "feature", "instance"):
            raise ValueError(f"level must be 'auto', 'feature' or 'instance', got {self.level!r}")
        views = problem.views
        names = views.names
        slices = view_offsets(views.n_samples, names)
        N = int(sum(views.n_samples.values()))
        level = self.level
        if level == "auto":
            level = "instance" if N <= self.auto_instance_limit else "feature"
        self.level_ = level
        W = self._joint_graph(problem)
        L, D = laplacian(W)
        if level == "feature":
            centers = {v: views[v].mean(axis=0) for v in names}
            feat = view_offsets(views.n_features, names)
            P_total = int(sum(views.n_features.values()))
            X = np.zeros((N, P_total))  # block-diagonal joint data  [N, P]
            for v in names:
                X[slices[v], feat[v]] = views[v] - centers[v]
            U, s, Vt = np.linalg.svd(X, full_matrices=False)
            r = int(np.sum(s > s[0] * max(N, P_total) * np.finfo(float).eps)) if s.size and s[0] > 0 else 0
            if r == 0:
                raise ValueError("every view is constant: nothing to align")
            U, s, Vt = U[:, :r], s[:r], Vt[:r]  # G = diag(s) Vt, G' G = X' X
            M = U.T @ (L @ U)  # (G')^+ X' L X G^+  [r, r]
            m, E = scipy.linalg.eigh(0.5 * (M + M.T))
            keep = m > m[-1] * 1e-12  # pseudo-inverse: drop the null space of M
            T = (E[:, keep] * (m[keep].min() / m[keep])) @ E[:, keep].T  # (M^+) / ||M^+||  [r, r]
            coordinates_of = lambda phi: U @ phi  # X F_k = U S Vt Vt' S^-1 phi   [N, d_k]
            mapping_of = lambda phi: (Vt.T / s) @ phi  # F_k = G^+ phi  [P, d_k]
        else:
            if N > self.max_samples:
                raise ValueError(f"MultiscaleAlignment(level='instance') is dense in the {N} rows of all views "
                                 f"(an {N}x{N} pivoted QR); at most max_samples={self.max_samples} are accepted. "
                                 "Use level='feature' or subsample")
            degree = D.diagonal()
            inv_sqrt = 1.0 / np.sqrt(degree)
            S = (sp.diags(inv_sqrt) @ W @ sp.diags(inv_sqrt)).toarray()  # [N, N]
            T = 0.5 * (np.eye(N) + 0.5 * (S + S.T))  # lazy walk, spectrum in [0, 1]
            trivial = np.sqrt(degree) / np.linalg.norm(np.sqrt(degree))  # eigenvalue 1 (joint graph connected)
            T -= np.outer(trivial, trivial)
            coordinates_of = lambda phi: inv_sqrt[:, None] * phi
            mapping_of = None
        wavelets = diffusion_wavelets(T, self.epsilon, self.max_levels)
        if not wavelets["dimensions"]:
            raise ValueError(f"no direction of the joint manifold survives at precision epsilon={self.epsilon}")
        self.wavelets_ = wavelets
        embeddings, dims = [], []
        for k, phi in enumerate(wavelets["bases"]):
            if dims and phi.shape[1] == dims[-1]:
                continue  # the same subspace as the previous level
            coords = coordinates_of(phi)
            info = {"power": 2**k, "epsilon": self.epsilon, "level": level}
            if mapping_of is None:
                emb = LatentEmbedding(split_rows(coords, slices), method="multiscale (instance)", info=info)
            else:
                F = mapping_of(phi)
                emb = LatentEmbedding(split_rows(coords, slices), projections={v: F[feat[v]] for v in names},
                                      centers=centers, method="multiscale (feature)", info=info)
            embeddings.append(emb)
            dims.append(phi.shape[1])
        self.embeddings_ = embeddings
        self.dimensions_ = dims
        wide = [i for i, d in enumerate(dims) if d >= self.min_components]
        return embeddings[wide[-1] if wide else 0]
