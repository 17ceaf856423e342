"""Manifold alignment preserving global geometry (Wang & Mahadevan, IJCAI 2013).

Local methods (the joint Laplacian) only ask neighbours to stay neighbours; this one
asks the latent space to reproduce *all* pairwise (geodesic) distances, within each
view and across views, the latter measured through the anchor pairs used as
zero-length "bridges":

1. rescale factor (eq. 3): ``eta = tr(D_b' D_a) / tr(D_b' D_b)`` from the distance
   matrices among the anchors of each view; view b's distances are multiplied by eta;
2. joint distance matrix (eqs. 4-5):
   ``D_xy(i, j) = min_u D_xx(i, a_u) + D_yy(j, b_u)``,
   ``D = [[D_xx, D_xy], [D_yx, D_yy]]``;
3. ``tau(D) = -H S H / 2`` with ``S = D**2`` (elementwise) and ``H = I - 11'/N`` (section
   2.3), projected onto the positive semidefinite cone;
4. feature level (Theorem 1): the ``d`` largest solutions of
   ``Z tau(D) Z' gamma = lambda Z Z' gamma``, ``Z = blockdiag(X, Y)`` (features x instances);
   instance level (section 3.2): the ``d`` leading eigenvectors of ``tau(D)``.

The method is inherently dense: the global distance matrix and ``tau(D)`` are
``N x N`` with ``N`` the total number of rows of all views, and the feature-level
solution needs the full eigendecomposition of ``tau(D)`` (O(N^3)). Sizes above
``max_samples`` are refused with a clear error.
"""

from __future__ import annotations

import warnings
from collections import deque

import numpy as np
import scipy.linalg
from scipy.spatial.distance import cdist

from ..data import AlignmentProblem, LatentEmbedding
from ..graph import geodesic_distances
from ._base import SpectralAlignment, check_n_components, split_rows, view_offsets

__all__ = [
    "GlobalGeometryAlignment",
    "bridge_distances",
    "double_centering",
    "project_psd",
    "rescale_factor",
]

# Above this many rows in all views, fit warns that the dense N x N computation will be slow.
WARN_SAMPLES = 3000


def rescale_factor(D_a, D_b) -> float:
    """The eta minimising ``||D_a - eta D_b||_F^2`` (Wang & Mahadevan 2013, eq. 3).

    ``eta = tr(D_b' D_a) / tr(D_b' D_b)``: the factor that brings distances measured
    in view b to the unit of view a.

    Parameters
    ----------
    D_a, D_b : arrays (l, l)
        Distances among the l anchors in view a and among their counterparts in view b.

    Examples
    --------
    >>> D = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> rescale_factor(4.0 * D, D)
    4.0
    """
    D_a = np.asarray(D_a, dtype=np.float64)
    D_b = np.asarray(D_b, dtype=np.float64)
    if D_a.shape != D_b.shape or D_a.ndim != 2:
        raise ValueError(f"D_a and D_b must be matrices of one shape, got {D_a.shape} and {D_b.shape}")
    denominator = float(np.sum(D_b * D_b))  # tr(D_b' D_b)
    if denominator == 0.0:
        raise ValueError("the anchors of view b are all at distance 0 from each other (fewer than two "
                         "distinct anchor points): the rescale factor is undefined")
    return float(np.sum(D_b * D_a)) / denominator  # tr(D_b' D_a) / tr(D_b' D_b)


def double_centering(D) -> np.ndarray:
    """The tau operator of Tenenbaum et al. (2000): ``tau(D) = -H S H / 2``, ``S = D**2``, ``H = I - 11'/N``.

    For a Euclidean distance matrix of points ``x_i`` this is exactly the Gram matrix of the
    centred points, ``(x_i - mean)' (x_j - mean)`` (Wang & Mahadevan 2013, section 2.3).
    Dense (N, N) in and out.

    Examples
    --------
    >>> X = np.array([[0.0, 0.0], [2.0, 0.0], [0.0, 4.0]])
    >>> D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    >>> Xc = X - X.mean(0)
    >>> bool(np.allclose(double_centering(D), Xc @ Xc.T))
    True
    """
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"a distance matrix must be square, got shape {D.shape}")
    S = D * D  # [N, N]
    # -H S H / 2 without forming H: subtract row and column means, add back the grand mean
    row_mean = S.mean(axis=1, keepdims=True)
    col_mean = S.mean(axis=0, keepdims=True)
    G = -0.5 * (S - row_mean - col_mean + S.mean())
    return 0.5 * (G + G.T)


def project_psd(G, *, return_eigen: bool = False):
    """Nearest positive semidefinite matrix to the symmetric ``G``: negative eigenvalues set to 0.

    Section 2.3 of Wang & Mahadevan (2013): a non-Euclidean distance matrix gives a
    ``tau(D)`` with negative eigenvalues; projecting onto the PSD cone makes it a Gram matrix.
    With ``return_eigen`` also returns the clipped eigenvalues (ascending) and eigenvectors.

    >>> project_psd(np.array([[1.0, 2.0], [2.0, 1.0]])).round(6).tolist()   # eigenvalues 3, -1
    [[1.5, 1.5], [1.5, 1.5]]
    """
    G = np.asarray(G, dtype=np.float64)
    values, vectors = scipy.linalg.eigh(0.5 * (G + G.T))
    values = np.clip(values, 0.0, None)
    P = (vectors * values) @ vectors.T
    P = 0.5 * (P + P.T)
    return (P, values, vectors) if return_eigen else P


def bridge_distances(D_a_to_anchors, D_b_to_anchors, *, block: int = 2**22) -> np.ndarray:
    """Cross-view distances through the anchor "bridges" (Wang & Mahadevan 2013, eq. 4).

    ``D_ab(i, j) = min_u D_aa(i, a_u) + D_bb(j, b_u)``: the shortest way from point i of
    view a to point j of view b that crosses from one view to the other over one anchor
    pair (a_u, b_u), whose own length is 0.

    Parameters
    ----------
    D_a_to_anchors : array (n_a, l)
        Distances from every point of view a to the anchor a_u, u = 1..l.
    D_b_to_anchors : array (n_b, l)
        Distances from every point of view b to its anchor b_u (same order, already rescaled).
    block : int
        Bound on the number of floats of the (rows, n_b, l) temporary.

    Returns
    -------
    array (n_a, n_b)

    >>> bridge_distances(np.array([[0.0, 2.0]]), np.array([[3.0, 0.0], [1.0, 1.0]])).tolist()
    [[2.0, 1.0]]
    """
    Da = np.asarray(D_a_to_anchors, dtype=np.float64)
    Db = np.asarray(D_b_to_anchors, dtype=np.float64)
    if Da.ndim != 2 or Db.ndim != 2 or Da.shape[1] != Db.shape[1] or Da.shape[1] == 0:
        raise ValueError(f"need (n_a, l) and (n_b, l) distances to the same l >= 1 anchors, got {Da.shape} "
                         f"and {Db.shape}")
    n_a, n_anchors = Da.shape
    n_b = Db.shape[0]
    out = np.empty((n_a, n_b))
    rows = max(1, block // max(1, n_b * n_anchors))
    for i0 in range(0, n_a, rows):
        i1 = min(n_a, i0 + rows)
        out[i0:i1] = (Da[i0:i1, None, :] + Db[None, :, :]).min(axis=-1)  # min-plus product [rows, n_b]
    return out


def _min_plus(D_ac: np.ndarray, D_cb: np.ndarray) -> np.ndarray:
    """min_k D_ac(i, k) + D_cb(k, j): the shortest route from a to b through the points of view c."""
    return bridge_distances(D_ac, D_cb.T)


class GlobalGeometryAlignment(SpectralAlignment):
    """Manifold alignment preserving global geometry (Wang & Mahadevan, IJCAI 2013).

    Maps all views into one ``n_components``-dimensional space in which the corresponding
    rows coincide and the (geodesic) distances within each view are kept, by matching the
    Gram matrix ``tau(D)`` of the joint distance matrix ``D`` (eqs. 2-5, Theorem 1). Unlike
    the joint-Laplacian methods it has no weight ``mu`` between matching and preserving:
    anchors are at distance 0 by construction (section 3.2).

    **Dense:** builds the N x N joint distance matrix (N = all rows of all views) and, at the
    feature level, the full eigendecomposition of ``tau(D)``: memory O(N^2), time O(N^3).
    Fitting warns above ``3000`` rows and refuses more than ``max_samples``.

    Parameters
    ----------
    n_components : int
        d, the latent dimension.
    level : "feature" or "instance"
        ``"feature"`` (the paper's algorithm, section 3.1): linear maps alpha, beta from the
        centred features, the ``d`` largest solutions of ``Z tau(D) Z' g = lambda Z Z' g``
        (Theorem 1); new rows can be transformed. ``"instance"`` (section 3.2): coordinates
        are free, the ``d`` leading eigenvectors of ``tau(D)`` scaled by the square roots of
        their eigenvalues (classical MDS of ``D``). The paper writes "the minimum eigenvalue
        solution" there; minimising ``||tau(D) - A A'||`` over A needs the *largest*
        eigenvalues (Eckart-Young), which is what is computed.
    n_neighbors : int
        k of the k-NN graph whose shortest paths are the within-view geodesic distances.
    metric : "geodesic" or "euclidean"
        Within-view distances D_xx: shortest paths on the k-NN graph (the paper's choice) or
        straight-line distances ("Depending on the application, we can also use ... Euclidean").
    rescale : bool
        Rescale every view's distances to the unit of the first view with eq. 3 (step 1).
        With more than two views, the factors are chained along the anchored pairs
        (breadth-first from the first view).
    reg : float
        Ridge added to ``Z Z'`` (feature level), one per view in that view's units,
        ``reg * mean(diag(X_v' X_v))`` on view v's block, so that collinear features or more
        features than rows stay well posed; with ``rescale=True`` the fit is then invariant to
        the units of each view (scaling a view scales its projection inversely).
    connect_components : bool
        Join a view's disconnected k-NN graph by its shortest edges
        (:func:`bayesalign.graph.connect_components`); otherwise a disconnected view is an error
        (its geodesic distances would be infinite).
    max_samples : int
        Largest total number of rows accepted.

    Attributes
    ----------
    embedding_ : LatentEmbedding
        ``info`` holds ``rescale_factors`` (per view, relative to the first view),
        ``eigenvalues`` and ``k`` (the paper's optimal rescaling of the latent Gram matrix).
    rescale_factors_ : dict view -> float
    distances_ : array (N, N)
        The joint distance matrix D (after rescaling), views stacked in view order.

    Notes
    -----
    Cross-view distances (eq. 4) are computed for every pair of views that share anchors;
    for a pair without anchors they are composed through a third view,
    ``D_ab = min_k D_ac(., k) + D_cb(k, .)`` (shortest route over the joint graph of blocks),
    so all views must be linked by anchors, directly or not. Anchor weights are ignored:
    every anchor is a zero-length bridge.

    Because eq. 4 takes the *minimum* over bridges, one wrong anchor pair is a shortcut
    between distant parts of the two views and distorts every cross-view distance near it.
    The method therefore needs reliable anchors: with inferred correspondences (local
    pattern matching, ~10% of them wrong) the joint Laplacian, which only adds weighted
    edges, degrades far less (see ``tests/test_spectral_b.py``).

    Examples
    --------
    >>> from bayesalign.data import AlignmentProblem, Correspondence
    >>> rng = np.random.default_rng(0)
    >>> t = np.sort(rng.uniform(0, 3, 60))
    >>> X = np.c_[t, np.sin(t)]
    >>> problem = AlignmentProblem({"a": X, "b": 3 * X[:, ::-1]},
    ...                            anchors=Correspondence.from_pairs([(i, i) for i in range(0, 60, 6)], ("a", "b")))
    >>> model = GlobalGeometryAlignment(n_components=1, n_neighbors=5).fit(problem)
    >>> round(model.rescale_factors_["b"], 3)        # distances of b are 3 times those of a
    0.333
    """

    def __init__(self, n_components: int = 2, level: str = "feature", n_neighbors: int = 10,
                 metric: str = "geodesic", rescale: bool = True, reg: float = 1e-8,
                 connect_components: bool = False, max_samples: int = 6000):
        self.n_components = n_components
        self.level = level
        self.n_neighbors = n_neighbors
        self.metric = metric
        self.rescale = rescale
        self.reg = reg
        self.connect_components = connect_components
        self.max_samples = max_samples

    # -- steps 1-2 --------------------------------------------------------------------------
    def _within_distances(self, X: np.ndarray, view: str) -> np.ndarray:
        if self.metric == "geodesic":
            return geodesic_distances(X, self.n_neighbors, connect_components=self.connect_components,
                                      name=f"view {view!r}")  # [n_v, n_v]
        return cdist(X, X)

    def joint_distance_matrix(self, problem: AlignmentProblem) -> tuple[np.ndarray, dict]:
        """Steps 1-2: the rescaled joint distance matrix D (eq. 5) and the rescale factors."""
        views = problem.views
        names = views.names
        within = {v: self._within_distances(views[v], v) for v in names}
        anchored = {}
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                corr = problem.anchors_between(a, b)
                if len(corr):
                    anchored[(a, b)] = corr
        # rescale factors: breadth-first over the graph of anchored view pairs, from the first view
        factors = {names[0]: 1.0}
        queue = deque([names[0]])
        while queue:
            a = queue.popleft()
            for b in names:
                if b in factors:
                    continue
                corr = problem.anchors_between(a, b)
                if not len(corr):
                    continue
                ia, ib = corr.index_a, corr.index_b
                if self.rescale:
                    if len(corr) < 2:
                        raise ValueError(f"the rescale factor between views {a!r} and {b!r} needs at least "
                                         f"2 anchor pairs, got {len(corr)}; or pass rescale=False")
                    eta = rescale_factor(within[a][np.ix_(ia, ia)], within[b][np.ix_(ib, ib)])
                    if not eta > 0:
                        raise ValueError(f"rescale factor between views {a!r} and {b!r} is {eta}: the anchors "
                                         f"of view {b!r} coincide")
                else:
                    eta = 1.0
                factors[b] = factors[a] * eta
                queue.append(b)
        missing = [v for v in names if v not in factors]
        if missing:
            raise ValueError(f"views {missing} are not linked to view {names[0]!r} by any anchors: global "
                             "geometry alignment needs anchors to build cross-view distances (eq. 4)")
        within = {v: factors[v] * within[v] for v in names}
        # eq. 4 for the anchored pairs, then compose the others through intermediate views
        blocks = {(v, v): within[v] for v in names}
        for (a, b), corr in anchored.items():
            blocks[(a, b)] = bridge_distances(within[a][:, corr.index_a], within[b][:, corr.index_b])
            blocks[(b, a)] = blocks[(a, b)].T
        changed = True
        while changed and len(blocks) < len(names) ** 2:
            changed = False
            for a in names:
                for b in names:
                    if (a, b) in blocks:
                        continue
                    routes = [_min_plus(blocks[(a, c)], blocks[(c, b)]) for c in names
                              if c not in (a, b) and (a, c) in blocks and (c, b) in blocks]
                    if routes:
                        blocks[(a, b)] = np.minimum.reduce(routes)
                        blocks[(b, a)] = blocks[(a, b)].T
                        changed = True
        D = np.block([[blocks[(a, b)] for b in names] for a in names])  # [N, N]
        return 0.5 * (D + D.T), factors

    # -- steps 3-4 --------------------------------------------------------------------------
    def _fit(self, problem: AlignmentProblem) -> LatentEmbedding:
        if self.level not in ("feature", "instance"):
            raise ValueError(f"level must be 'feature' or 'instance', got {self.level!r}")
        if self.metric not in ("geodesic", "euclidean"):
            raise ValueError(f"metric must be 'geodesic' or 'euclidean', got {self.metric!r}")
        views = problem.views
        names = views.names
        sizes = views.n_samples
        N = int(sum(sizes.values()))
        if N > self.max_samples:
            raise ValueError(f"GlobalGeometryAlignment is dense: {N} rows in all views need {N}x{N} distance "
                             f"and Gram matrices (~{8 * N * N * 3 / 1e9:.1f} GB) and an O(N^3) "
                             f"eigendecomposition; at most max_samples={self.max_samples} rows are accepted. "
                             "Subsample the views or raise max_samples")
        if N > WARN_SAMPLES:
            warnings.warn(f"GlobalGeometryAlignment on {N} rows: dense N x N matrices and an O(N^3) "
                          "eigendecomposition; this may take minutes", RuntimeWarning, stacklevel=3)
        slices = view_offsets(sizes, names)
        D, factors = self.joint_distance_matrix(problem)
        self.distances_ = D
        self.rescale_factors_ = factors
        gram = double_centering(D)  # tau(D)  [N, N]
        info = {"rescale_factors": dict(factors), "metric": self.metric, "n_neighbors": self.n_neighbors}
        if self.level == "instance":
            d = check_n_components(self.n_components, N - 1, f"instance-level alignment of {N} rows")
            values, vectors = scipy.linalg.eigh(gram, subset_by_index=[N - d, N - 1])
            values, vectors = values[::-1], vectors[:, ::-1]  # largest first
            positive = int(np.sum(values > 1e-12 * max(values[0], 1e-300)))
            if positive < d:
                raise ValueError(f"tau(D) has only {positive} positive eigenvalue(s); n_components={d} is too "
                                 "large for this distance matrix")
            coords = vectors * np.sqrt(values)  # classical MDS: the PSD projection leaves these intact
            coords = coords * np.sign(coords[np.argmax(np.abs(coords), axis=0), np.arange(d)])
            info.update(eigenvalues=values, k=1.0, level="instance")
            return LatentEmbedding(split_rows(coords, slices), method="global geometry (instance)", info=info)

        # feature level (Theorem 1): Z tau(D)_+ Z' g = lambda Z Z' g with Z' = blockdiag of centred views
        P_total = int(sum(views.n_features.values()))
        d = check_n_components(self.n_components, min(P_total, N - 1),
                               f"feature-level alignment with {P_total} features in all views and {N} rows")
        gram_psd = project_psd(gram)
        centers = {v: views[v].mean(axis=0) for v in names}
        feat = view_offsets(views.n_features, names)
        ZZt = np.zeros((P_total, P_total))  # Z Z' is block diagonal  [P, P]
        ZGZt = np.zeros((P_total, P_total))  # Z tau Z'  [P, P]
        centred = {v: views[v] - centers[v] for v in names}  # [n_v, p_v]
        for a in names:
            Xa = centred[a]
            ZZt[feat[a], feat[a]] = Xa.T @ Xa
            for b in names:
                ZGZt[feat[a], feat[b]] = Xa.T @ gram_psd[slices[a], slices[b]] @ centred[b]
        # one ridge per view, in that view's units (reg times the mean of diag(X_v' X_v)): a ridge shared by
        # all views would take the unit of the largest view and swamp the others' blocks
        ridge = np.concatenate([np.full(views.n_features[v], self.reg * max(float(np.mean(np.diag(
            ZZt[feat[v], feat[v]]))), np.finfo(float).tiny)) for v in names])  # [P]
        try:
            values, gamma = scipy.linalg.eigh(0.5 * (ZGZt + ZGZt.T), ZZt + np.diag(ridge),
                                              subset_by_index=[P_total - d, P_total - 1])
        except np.linalg.LinAlgError as exc:
            raise ValueError(f"Z Z' is not positive definite ({exc}); a view has constant or collinear "
                             "features: increase reg") from None
        values, gamma = values[::-1], gamma[:, ::-1]  # largest first  [d], [P, d]
        # the paper's optimal scale of the latent Gram matrix: k = tr(f' Z tau Z' f) / d
        k = float(np.mean(values))
        if not k > 0:
            raise ValueError("the leading generalized eigenvalues are not positive: the views carry no "
                             "variance that matches tau(D)")
        gamma = gamma * np.sqrt(k)
        stacked = np.vstack([centred[v] @ gamma[feat[v]] for v in names])  # [N, d]
        # signs from the coordinates (unit-free), not from the projections (in each view's units)
        gamma = gamma * np.sign(stacked[np.argmax(np.abs(stacked), axis=0), np.arange(d)])
        projections = {v: gamma[feat[v]] for v in names}  # alpha, beta  [p_v, d]
        means = {v: centred[v] @ projections[v] for v in names}
        info.update(eigenvalues=values, k=k, level="feature")
        return LatentEmbedding(means, projections=projections, centers=centers,
                               method="global geometry (feature)", info=info)
