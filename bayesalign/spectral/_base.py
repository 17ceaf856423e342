"""Shared machinery of the spectral alignment estimators.

(Over 600 lines, one file: the base estimator, its one validation boundary and the per-view
graph / embedding helpers every spectral method calls are one contract; each method's own
module stays small because of it.)

API summary (stable; used by every module of ``bayesalign.spectral``)
--------------------------------------------------------------------
``SpectralAlignment``
    Base estimator (scikit-learn contract). Subclasses implement ``_fit(problem) -> LatentEmbedding``;
    the base provides ``fit(problem, anchors=None) -> self`` (sets ``embedding_``),
    ``fit_transform(...) -> LatentEmbedding`` and ``get_params`` / ``set_params``.
``as_problem(problem, anchors=None) -> AlignmentProblem``
    The single validation boundary: an AlignmentProblem, or Views / dict / list of arrays plus
    anchors (Correspondence, list or dict); ``anchors`` given with a problem replace its anchors.
``correspondence_matrices(problem) -> {(a, b): sparse (n_a, n_b)}``
    The weighted W^{(a,b)} of Wang, Krafft & Mahadevan (2011) section 5.2, for every pair of views
    a before b in view order (all-zero when a pair has no anchors).
``anchor_tuples(problem, names=None) -> {view: rows (m,)}``
    Rows that are the same thing in every view (row k of each array), from the first view's anchors.
``within_view_affinity(X, n_neighbors, *, affinity="local", sigma=None, connect_components=False, name)``
    The within-view similarity W^{(a)}: local-scaling, heat-kernel or 0/1 weights on a symmetric
    k-NN graph; warns when its degrees span more than ``graph.DEGREE_RATIO_LIMIT``.
``joint_adjacency(within, correspondences, names, *, mu=1.0, nu=1.0) -> sparse (N, N)``
    The block joint adjacency of section 5.2 (nu W^{(a)} on the diagonal, mu W^{(a,b)} off it).
``view_offsets(sizes, names) -> {view: slice}``; ``split_rows(F, slices) -> {view: F[slice]}``
    Rows of each view in the stacked (joint) matrices.
``check_scale(X, name)``
    A ValueError naming a view whose values are so small that squared distances underflow.
``embedding_degeneracy(coordinates, X) -> str | None``
    Why an embedding of a view is degenerate (rank deficient, or few distinct rows), or None.
``check_n_components(n_components, limit, what) -> int``
    A clear error when too many components are asked for.
``embed_view(X, n_components, method, n_neighbors=10, ...) -> ViewEmbedding``
    One view on its own: Laplacian eigenmaps, diffusion maps, LPP, PCA, or the raw features.
``whitening_basis(Xc, weights=None, reg=0.0) -> T (p, r)``
    Row-space basis of a centred view with ``T' (Xc' diag(weights) Xc + gamma I) T = I``.
``locality_preserving_projections(L, D, centred, slices, n_components, *, reg, eigen_solver, seed)``
    ``(eigenvalues, {view: F (p_v, d)})``: the smallest solutions of ``X' L X f = lambda X' D X f``
    (regularised) for block-diagonal centred views (linear alignment; LPP for one view).
``row_space_basis(Xc) -> E (p, r)``
    Orthonormal basis of a centred view's row space (for p > n).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from sklearn.base import BaseEstimator

from .._utils import as_rng
from ..data import AlignmentProblem, Correspondence, LatentEmbedding, Views
from ..graph import (
    DEGREE_RATIO_LIMIT,
    check_degrees,
    degree_spread,
    heat_kernel,
    knn_graph,
    laplacian,
    local_scaling_kernel,
    smallest_generalized_eigenvectors,
)

__all__ = [
    "SpectralAlignment",
    "ViewEmbedding",
    "anchor_tuples",
    "as_problem",
    "check_n_components",
    "check_scale",
    "embedding_degeneracy",
    "correspondence_matrices",
    "embed_view",
    "joint_adjacency",
    "locality_preserving_projections",
    "row_space_basis",
    "split_rows",
    "view_offsets",
    "whitening_basis",
    "within_view_affinity",
]


# ---------------------------------------------------------------------------------------------
# Input boundary
# ---------------------------------------------------------------------------------------------
def as_problem(problem, anchors=None) -> AlignmentProblem:
    """Validate the input of ``fit`` once and return an ``AlignmentProblem``.

    Parameters
    ----------
    problem : AlignmentProblem, Views, or a dict / list of 2-D arrays
    anchors : Correspondence, list or dict of them, optional
        Anchor pairs (weights allowed). Given with an AlignmentProblem they replace its
        anchors, e.g. a correspondence inferred by an unsupervised matcher.

    >>> import numpy as np
    >>> p = as_problem({"a": np.zeros((3, 2)), "b": np.ones((3, 2))},
    ...                Correspondence.from_pairs([(0, 1)], views=("a", "b")))
    >>> len(p.anchors_between("b", "a"))
    1
    """
    if isinstance(problem, AlignmentProblem):
        problem = problem if anchors is None else problem.replace(anchors=anchors)
    elif isinstance(problem, (Views, Mapping, list, tuple)):
        problem = AlignmentProblem(problem, anchors=anchors)
    else:
        raise TypeError("fit expects an AlignmentProblem, Views, or a dict/list of 2-D arrays, got "
                        f"{type(problem).__name__}")
    for v in problem.views.names:
        check_scale(problem.views[v], v)
    return problem


# The smallest largest-magnitude accepted: squares of values below ~1e-154 underflow float64 (1e-308).
_SMALLEST_MAGNITUDE = 1e-145


def check_scale(X: np.ndarray, name: str) -> None:
    """Refuse a view whose values are so small that squared distances underflow float64, naming it.

    The spectral methods square differences of features (k-NN distances, kernels, ``X' X``).
    With every value below about 1e-154 the squares underflow to 0 and every row looks like a
    duplicate of every other. (Values so large that the squares overflow are refused when the
    ``Views`` are built.) Standardising the view fixes it.

    >>> check_scale(np.full((3, 2), 1e-160), "a")
    Traceback (most recent call last):
    ...
    ValueError: view 'a' is badly scaled: its largest magnitude is 1e-160, so squared distances underflow \
to 0 in float64; standardise the view (e.g. divide each column by its standard deviation)
    """
    largest = float(np.max(np.abs(X))) if X.size else 0.0
    if 0.0 < largest < _SMALLEST_MAGNITUDE:
        raise ValueError(f"view {name!r} is badly scaled: its largest magnitude is {largest:.3g}, so squared "
                         "distances underflow to 0 in float64; standardise the view (e.g. divide each column by "
                         "its standard deviation)")


def check_n_components(n_components, limit: int, what: str) -> int:
    """``n_components`` as an int in ``[1, limit]``, else a ValueError saying why ``limit``."""
    if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)):
        raise TypeError(f"n_components must be an int, got {n_components!r}")
    n_components = int(n_components)
    if not 1 <= n_components <= limit:
        raise ValueError(f"n_components={n_components} is out of range: {what} allows 1 to {limit}")
    return n_components


def view_offsets(sizes: Mapping[str, int], names: Sequence[str]) -> dict[str, slice]:
    """Rows of each view in the stacked matrices (views in the order of ``names``)."""
    bounds = np.concatenate([[0], np.cumsum([sizes[v] for v in names])])
    return {v: slice(int(bounds[i]), int(bounds[i + 1])) for i, v in enumerate(names)}


def split_rows(F: np.ndarray, slices: Mapping[str, slice]) -> dict[str, np.ndarray]:
    """The rows of a stacked matrix that belong to each view."""
    return {v: F[s] for v, s in slices.items()}


# ---------------------------------------------------------------------------------------------
# Graphs of the alignment
# ---------------------------------------------------------------------------------------------
def correspondence_matrices(problem: AlignmentProblem) -> dict[tuple[str, str], sp.csr_matrix]:
    """W^{(a,b)} for every pair of views (a before b in view order), weighted by the anchors' weights.

    Section 5.2 of Wang, Krafft & Mahadevan (2011): W^{(a,b)}(i, j) is the strength of the
    correspondence between row i of view a and row j of view b (1 for a plain anchor pair).

    >>> import numpy as np
    >>> p = AlignmentProblem({"a": np.zeros((2, 1)), "b": np.zeros((3, 1))},
    ...                      anchors=Correspondence.from_pairs([(1, 2)], ("a", "b"), weights=[0.5]))
    >>> correspondence_matrices(p)[("a", "b")].toarray()
    array([[0. , 0. , 0. ],
           [0. , 0. , 0.5]])
    """
    names = problem.views.names
    sizes = problem.views.n_samples
    out = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            out[(a, b)] = problem.anchors_between(a, b).to_matrix((sizes[a], sizes[b]))
    return out


def anchor_tuples(problem: AlignmentProblem, names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Rows that are one and the same thing in every view: ``{view: indices (m,)}``, row k aligned.

    Built from the anchors of the first view of ``names`` to each other view: row i of the first
    view is kept if it has an anchor in every other view (its first listed one when it has
    several). The baselines that represent a point through "the k-th anchor" (CCA, least
    squares, anchor similarities) need this ordering. Anchor weights are not used.

    >>> import numpy as np
    >>> p = AlignmentProblem({"a": np.zeros((3, 1)), "b": np.zeros((3, 1))},
    ...                      anchors=Correspondence.from_pairs([(2, 0), (0, 1)], ("a", "b")))
    >>> {v: idx.tolist() for v, idx in anchor_tuples(p).items()}
    {'a': [0, 2], 'b': [1, 0]}
    """
    names = list(problem.views.names if names is None else names)
    first = names[0]
    keep = np.ones(problem.views.n_samples[first], dtype=bool)
    partner = {}
    for v in names[1:]:
        corr = problem.anchors_between(first, v)
        rows, where = np.unique(corr.index_a, return_index=True)  # first pair of each row of `first`
        lookup = np.full(problem.views.n_samples[first], -1, dtype=np.int64)
        lookup[rows] = corr.index_b[where]
        keep &= lookup >= 0
        partner[v] = lookup
    rows = np.flatnonzero(keep)
    return {first: rows, **{v: partner[v][rows] for v in names[1:]}}


AFFINITIES = ("local", "heat", "auto", "connectivity")
# K of Zelnik-Manor & Perona (2004): sigma_i is the distance to the 7th neighbour (fewer if n_neighbors < 7)
LOCAL_SCALE_NEIGHBOR = 7


def within_view_affinity(X, n_neighbors: int, *, affinity: str = "local", sigma: float | None = None,
                         connect_components: bool = False, name: str = "X") -> sp.csr_matrix:
    """W^{(a)}: similarities on the symmetric k-NN graph of one view (sparse, same pattern as the graph).

    ``affinity``:

    - ``"local"`` (default): local scaling, ``exp(-d_ij^2 / (sigma_i sigma_j))`` with ``sigma_i``
      the distance from row i to its ``min(7, n_neighbors)``-th neighbour (Zelnik-Manor & Perona
      2004; :func:`bayesalign.graph.local_scaling_kernel`). No row is left with a vanishing degree
      because it lies far from the others.
    - ``"heat"``: one global width, ``exp(-d^2 / (2 sigma^2))``, ``sigma`` the median k-NN distance
      of the view unless given (:func:`bayesalign.graph.heat_kernel`; Belkin & Niyogi 2003).
    - ``"auto"``: the heat kernel, unless its degrees span more than
      :data:`bayesalign.graph.DEGREE_RATIO_LIMIT` (a row nearly cut off from the graph); then local
      scaling for this view: the global width where it serves, local widths where it would strand
      rows (then only local scaling's own degree check can warn; ``degree_ratios_`` of the estimators
      is that of the weights used).
    - ``"connectivity"``: 0/1 weights.

    Warns (naming the view and the rows) when the degrees of ``W^{(a)}`` span more than
    :data:`bayesalign.graph.DEGREE_RATIO_LIMIT` (:func:`bayesalign.graph.check_degrees`).
    """
    if affinity not in AFFINITIES:
        raise ValueError(f"affinity must be one of {AFFINITIES}, got {affinity!r}")
    if sigma is not None and affinity not in ("heat", "auto"):
        raise ValueError(f"sigma is the width of affinity='heat'; got sigma={sigma} with affinity={affinity!r}")
    mode = "connectivity" if affinity == "connectivity" else "distance"
    G = knn_graph(X, n_neighbors, mode=mode, connect_components=connect_components, name=name)
    if affinity in ("heat", "auto"):
        W = heat_kernel(G, sigma)
        if affinity == "auto":
            affinity = "heat" if degree_spread(W)[0] <= DEGREE_RATIO_LIMIT else "local"
    if affinity == "local":
        W = local_scaling_kernel(G, min(LOCAL_SCALE_NEIGHBOR, int(n_neighbors)))
    elif affinity == "connectivity":
        W = G
    hint = ("these rows lie far from all others: more neighbours, or removing them, may help" if affinity == "local"
            else "affinity='local' (local scaling) or more neighbours may help")
    check_degrees(W, name=f"the k-NN graph of view {name!r}", hint=hint)
    return W


def joint_adjacency(within: Mapping[str, sp.spmatrix], correspondences: Mapping[tuple[str, str], sp.spmatrix],
                    names: Sequence[str], *, mu: float = 1.0, nu: float = 1.0) -> sp.csr_matrix:
    """The joint adjacency matrix of Wang, Krafft & Mahadevan (2011), section 5.2::

        W = [[nu W^(1),   mu W^(1,2), ..., mu W^(1,c)],
             ...
             [mu W^(c,1), mu W^(c,2), ..., nu W^(c)  ]],   W^(b,a) = W^(a,b)'

    Parameters
    ----------
    within : dict view -> sparse (n_v, n_v)
    correspondences : dict (a, b) -> sparse (n_a, n_b); either orientation, a missing pair is zero
    names : order of the views (rows of the joint matrix)
    mu, nu : weights of the correspondence and within-view terms

    Returns
    -------
    scipy.sparse.csr_matrix (sum n_v, sum n_v), symmetric

    >>> import numpy as np, scipy.sparse as sp
    >>> W = joint_adjacency({"a": sp.csr_matrix([[0, 1], [1, 0]]), "b": sp.csr_matrix([[0.0]])},
    ...                     {("b", "a"): sp.csr_matrix([[0, 1]])}, ["a", "b"], mu=2.0)
    >>> W.toarray()
    array([[0., 1., 0.],
           [1., 0., 2.],
           [0., 2., 0.]])
    """
    if mu < 0 or nu < 0:
        raise ValueError(f"mu and nu must be non-negative, got mu={mu}, nu={nu}")
    index = {v: i for i, v in enumerate(names)}
    blocks = [[None] * len(names) for _ in names]
    for v in names:
        blocks[index[v]][index[v]] = nu * sp.csr_matrix(within[v], dtype=np.float64)
    for (a, b), W_ab in correspondences.items():
        W_ab = mu * sp.csr_matrix(W_ab, dtype=np.float64)
        i, j = index[a], index[b]
        blocks[i][j] = W_ab if blocks[i][j] is None else blocks[i][j] + W_ab
        blocks[j][i] = W_ab.T if blocks[j][i] is None else blocks[j][i] + W_ab.T
    return sp.bmat(blocks, format="csr")


# ---------------------------------------------------------------------------------------------
# Linear algebra
# ---------------------------------------------------------------------------------------------
def whitening_basis(Xc: np.ndarray, weights: np.ndarray | None = None, reg: float = 0.0) -> np.ndarray:
    """T (p, r): a basis of the row space of ``Xc`` with ``T' (Xc' D Xc + gamma I) T = I``, ``D = diag(weights)``.

    Used by CCA to restrict the projections to the row space of a view and whiten its
    constraint matrix there, so a view with more features than rows costs ``O(n p min(n, p))``
    and never a dense ``p x p`` eigen-problem.
    ``H = D^{1/2} Xc`` (``D = I`` when ``weights`` is None) has right singular vectors ``E`` and
    squared singular values ``lam`` (from the eigen-decomposition of the smaller Gram matrix, ``H'H`` or ``HH'``); the
    directions with ``lam = 0`` (the null space of ``Xc``, non-empty when p >= n) are dropped
    and ``T = E (lam + gamma)^{-1/2}``, ``gamma = reg * mean(lam)``.
    """
    n, p = Xc.shape
    H = Xc if weights is None else np.sqrt(weights)[:, None] * Xc  # [n, p]
    if p <= n:
        lam, E = np.linalg.eigh(H.T @ H)  # [p], [p, p]
    else:
        lam, U = np.linalg.eigh(H @ H.T)  # [n], [n, n]
        E = H.T @ U  # [p, n]: right singular vectors times sqrt(lam)
    lam = np.clip(lam, 0.0, None)
    keep = lam > max(n, p) * np.finfo(float).eps * max(float(lam.max()), np.finfo(float).tiny)
    lam, E = lam[keep], E[:, keep]
    if p > n:
        E = E / np.sqrt(lam)  # unit columns
    gamma = reg * float(lam.mean()) if lam.size else 0.0
    return E / np.sqrt(lam + gamma)  # [p, r]


# Above this many coordinates the linear eigenproblem is solved by shift-invert Lanczos.
LPP_DENSE_LIMIT = 1500


def row_space_basis(Xc: np.ndarray) -> np.ndarray:
    """E (p, r): orthonormal basis of the row space of ``Xc`` (n, p), from the n x n Gram matrix.

    ``O(n^2 p + n^3)``; meant for p > n, where it replaces p coordinates by r <= n.
    """
    n, p = Xc.shape
    lam, U = np.linalg.eigh(Xc @ Xc.T)  # [n], [n, n]
    keep = lam > max(n, p) * np.finfo(float).eps * max(float(lam.max()), np.finfo(float).tiny)
    return (Xc.T @ U[:, keep]) / np.sqrt(lam[keep])  # [p, r]


def locality_preserving_projections(L, D, centred: Mapping[str, np.ndarray], slices: Mapping[str, slice],
                                    n_components: int, *, reg: float = 1e-6, eigen_solver: str = "auto",
                                    seed=0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Smallest solutions of ``X' L X f = lambda X' D X f`` with ``X = diag(X_v)`` block-diagonal, regularised.

    Locality preserving projections (He & Niyogi 2003) of one view, or of the joint graph of
    several (manifold projections, Wang, Krafft & Mahadevan 2011, section 5.3.1).

    Regularisation: ``X' D X`` is singular when a view has p >= n (centring alone removes one
    rank) or collinear features, and a ridge on that side alone does not help: any ``f`` with
    ``X f = 0`` has cost 0 and would come out first, as an all-zero embedding. So the ridge
    ``gamma_v = reg * mean eigenvalue of X_v' D_v X_v`` is added to ``X' D X`` and ``2 gamma_v``
    to ``X' L X``: directions without data get the eigenvalue 2, the top of the spectrum of a
    normalised Laplacian (all eigenvalues of the unregularised problem lie in [0, 2]), and the
    others move by ``O(gamma)``.

    Size: a view with p_v > n_v is first reduced, exactly, to its row space
    (:func:`row_space_basis`; null-space directions change no coordinate), so the problem has
    ``R = sum_v min(p_v, rank_v)`` unknowns. ``X' L X`` is assembled block by block, using only the
    anchored rows for the sparse off-diagonal blocks. The dense ``R x R`` problem is solved by
    LAPACK when ``R <= 1500`` and otherwise by Lanczos in shift-invert mode around a point just
    below 0 (one dense Cholesky factorisation, ``R^3 / 3`` flops, then a few dozen solves).

    Parameters
    ----------
    L, D : sparse (N, N) joint Laplacian and degree matrix
    centred : dict view -> (n_v, p_v) centred data, in the row order of ``L``
    slices : dict view -> rows of that view in ``L``
    n_components : int
    reg : float
        Relative ridge (> 0 whenever some ``X_v' D_v X_v`` may be singular).
    eigen_solver : "auto", "dense" or "arpack"
    seed : int
        Starting vector of Lanczos.

    Returns
    -------
    eigenvalues : (d,) ascending
    projections : dict view -> F_v (p_v, d), with ``sum_v F_v' (X_v' D_v X_v + gamma_v I) F_v = I``
    """
    names = list(centred)
    degree = D.diagonal()
    bases, coords = {}, {}
    for v in names:
        n_v, p_v = centred[v].shape
        if not np.any(centred[v]):  # its block of X' D X would be 0 however large reg is
            raise ValueError(f"view {v!r} is constant (every column holds one value): nothing in it to project")
        bases[v] = row_space_basis(centred[v]) if p_v > n_v else None  # E_v: [p_v, r_v]
        coords[v] = centred[v] if bases[v] is None else centred[v] @ bases[v]  # Z_v: [n_v, r_v]
    sizes = [coords[v].shape[1] for v in names]
    R = int(sum(sizes))
    d = check_n_components(n_components, R, f"the features of the views ({R} after row-space reduction)")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    blocks = {v: slice(int(bounds[i]), int(bounds[i + 1])) for i, v in enumerate(names)}
    A = np.zeros((R, R))  # Z' L Z, assembled in place (R x R is the largest object here)
    B = np.zeros((R, R))  # Z' D Z, block-diagonal
    diagonal = np.diag_indices(R)
    for i, a in enumerate(names):
        Za = coords[a]
        B_aa = Za.T @ (degree[slices[a], None] * Za)
        B[blocks[a], blocks[a]] = 0.5 * (B_aa + B_aa.T)
        for b in names[i:]:
            L_ab = L[slices[a], slices[b]].tocsr()
            rows = np.flatnonzero(np.diff(L_ab.indptr))  # only rows with entries (anchors, off the diagonal)
            if rows.size:
                A_ab = Za[rows].T @ (L_ab[rows] @ coords[b])
                if a == b:
                    A[blocks[a], blocks[a]] = 0.5 * (A_ab + A_ab.T)
                else:  # L is symmetric: the (b, a) block is the transpose
                    A[blocks[a], blocks[b]] = A_ab
                    A[blocks[b], blocks[a]] = A_ab.T
                del A_ab
        del B_aa
    ridge = np.concatenate([np.full(sizes[i], reg * np.trace(B[blocks[v], blocks[v]]) / max(sizes[i], 1))
                            for i, v in enumerate(names)])  # [R]: gamma_v per coordinate
    A[diagonal] += 2.0 * ridge
    B[diagonal] += ridge
    method = eigen_solver
    if method == "auto":
        method = "dense" if R <= LPP_DENSE_LIMIT or d >= R - 1 else "arpack"
    try:
        if method == "dense":
            values, beta = scipy.linalg.eigh(A, B, subset_by_index=[0, d - 1])
        elif method == "arpack":
            sigma = -1e-6 * float(np.mean(np.diag(A)) / np.mean(np.diag(B)))
            for v in names:  # A -= sigma B in place, block by block (B is block-diagonal): no R x R temporary
                A[blocks[v], blocks[v]] -= sigma * B[blocks[v], blocks[v]]
            # A's memory becomes the Cholesky factor of A - sigma B (positive definite for sigma < 0)
            factor = scipy.linalg.cho_factor(A, overwrite_a=True, check_finite=False)
            inverse = spla.LinearOperator((R, R), dtype=np.float64,
                                          matvec=lambda x: scipy.linalg.cho_solve(factor, x, check_finite=False))
            unused = spla.LinearOperator((R, R), dtype=np.float64, matvec=None)  # mode 3 needs only OPinv and M
            v0 = as_rng(seed).standard_normal(R)
            values, beta = spla.eigsh(unused, k=d, M=B, sigma=sigma, OPinv=inverse, which="LM", v0=v0)
            order = np.argsort(values)
            values, beta = values[order], beta[:, order]
            beta = beta @ np.linalg.inv(np.linalg.cholesky(beta.T @ B @ beta)).T  # exactly B-orthonormal
        else:
            raise ValueError(f"eigen_solver must be 'auto', 'dense' or 'arpack', got {method!r}")
    except np.linalg.LinAlgError as exc:
        raise ValueError(f"X' D X is singular ({exc}); use reg > 0") from None
    rows = np.argmax(np.abs(beta), axis=0)  # deterministic signs
    beta = beta * np.sign(beta[rows, np.arange(d)])
    return values, {v: beta[blocks[v]] if bases[v] is None else bases[v] @ beta[blocks[v]] for v in names}


@dataclass(frozen=True)
class ViewEmbedding:
    """One view embedded on its own: ``coordinates`` (n, d); for linear methods also
    ``projection`` (p, d) and ``center`` (p,) with ``coordinates = (X - center) @ projection``;
    for graph embeddings ``degree_ratio``, the largest over the smallest degree of its graph."""

    coordinates: np.ndarray
    projection: np.ndarray | None = None
    center: np.ndarray | None = None
    degree_ratio: float | None = None


EMBEDDINGS = ("laplacian", "diffusion", "lpp", "pca", "none")


def embed_view(X, n_components: int, method: str = "laplacian", *, n_neighbors: int = 10,
               affinity: str = "local", diffusion_time: float = 1.0, reg: float = 1e-6,
               connect_components: bool = False, name: str = "X") -> ViewEmbedding:
    """Embed one view on its own (the first step of Procrustes and affine alignment).

    Methods
    -------
    ``"laplacian"``
        Laplacian eigenmaps: the ``n_components`` smallest non-trivial solutions of
        ``L f = lambda D f`` with ``F' D F = I`` (Belkin & Niyogi 2003). These are the
        eigenvectors of the normalized Laplacian used by Wang & Mahadevan (2008), step 2,
        rescaled by ``D^{-1/2}``: that normalisation is the coordinates' scale (a row of degree
        ``d_i`` sits at about ``1/sqrt(d_i)`` times the typical magnitude).
    ``"diffusion"``
        Diffusion maps (Coifman & Lafon 2006; used by Lafon, Keller & Coifman 2006): the same
        eigenvectors scaled by ``(1 - lambda)^t``, the eigenvalues of the random walk
        ``D^{-1} W`` raised to the diffusion time ``t``.
    ``"lpp"``
        Locality preserving projections (He & Niyogi 2003): ``X' L X a = lambda X' D X a`` on the
        centred view, over the graph of all its points (:func:`locality_preserving_projections`,
        with the relative ridge ``reg``; well posed for ``p >= n``). Linear.
    ``"pca"``
        Principal components of the centred view. Linear.
    ``"none"``
        The centred features themselves (``n_components`` must equal the number of features).

    ``affinity`` is the within-view graph's weighting (:func:`within_view_affinity`; local
    scaling by default).
    """
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    if method not in EMBEDDINGS:
        raise ValueError(f"embedding must be one of {EMBEDDINGS}, got {method!r}")
    if method in ("laplacian", "diffusion"):
        check_n_components(n_components, n - 1, f"a spectral embedding of view {name!r} with {n} rows")
        W = within_view_affinity(X, n_neighbors, affinity=affinity, connect_components=connect_components,
                                 name=name)
        L, D = laplacian(W)
        values, F = smallest_generalized_eigenvectors(L, D, n_components)  # [n, d]
        if method == "diffusion":
            F = F * np.clip(1.0 - values, 0.0, None) ** diffusion_time
        return ViewEmbedding(F, degree_ratio=degree_spread(W)[0])
    center = X.mean(axis=0)
    Xc = X - center  # [n, p]
    if method == "none":
        if n_components != p:
            raise ValueError(f"embedding='none' keeps the {p} features of view {name!r}; "
                             f"n_components must be {p}, got {n_components}")
        return ViewEmbedding(Xc, np.eye(p), center)
    check_n_components(n_components, min(n - 1, p), f"a linear embedding of view {name!r} ({n} x {p})")
    if method == "pca":
        _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
        P = Vt[:n_components].T  # [p, d]
        rows = np.argmax(np.abs(P), axis=0)
        P = P * np.sign(P[rows, np.arange(n_components)])
        return ViewEmbedding(Xc @ P, P, center)
    W = within_view_affinity(X, n_neighbors, affinity=affinity, connect_components=connect_components,
                             name=name)
    L, D = laplacian(W)
    _, projections = locality_preserving_projections(L, D, {name: Xc}, {name: slice(0, n)}, n_components, reg=reg)
    return ViewEmbedding(Xc @ projections[name], projections[name], center, degree_spread(W)[0])


# An embedding whose singular values fall below this fraction of the largest is rank deficient.
_RANK_RTOL = 1e-8
# Coordinates equal up to this fraction of the embedding's largest magnitude count as one point.
_DISTINCT_RTOL = 1e-6


def _numerical_rank(A: np.ndarray) -> int:
    """Number of singular values of the column-centred ``A`` above ``1e-8`` times the largest."""
    singular = np.linalg.svd(A - A.mean(axis=0), compute_uv=False)
    return int(np.sum(singular > _RANK_RTOL * singular[0])) if singular.size and singular[0] > 0 else 0


def embedding_degeneracy(coordinates: np.ndarray, X: np.ndarray) -> str | None:
    """Why the embedding ``coordinates`` (n, d) of a view ``X`` (n, p) is degenerate, or None.

    Two failures that leave a spectral embedding useless while every number in it is finite:

    - rank deficiency: fewer than ``d`` singular values above ``1e-8`` times the largest (a
      latent dimension that is a copy or a multiple of another, or zero), unless the view itself
      has no higher rank (a linear map of 6 features fills at most 6 latent dimensions);
    - collapse: fewer distinct rows than half the view's distinct input rows, rows being equal when
      they agree to ``1e-6`` times the largest coordinate. A few rows with coordinates many orders
      of magnitude above the rest (a row cut off from its neighbours) collapse the rest this way.

    >>> X = np.arange(20.0).reshape(10, 2)
    >>> embedding_degeneracy(np.c_[np.r_[1e9, np.zeros(9)], np.r_[0, 1e9, np.ones(8)]], X)
    '3 distinct rows (to 1e-06 of the largest coordinate, 1e+09) for 10 distinct input rows'
    """
    n, d = coordinates.shape
    if not np.all(np.isfinite(coordinates)):
        bad = np.flatnonzero(~np.all(np.isfinite(coordinates), axis=1))
        return f"non-finite coordinates in rows {bad[:5].tolist()}"
    largest = float(np.max(np.abs(coordinates))) if coordinates.size else 0.0
    if largest == 0.0:
        return "all coordinates are zero"
    rank = _numerical_rank(coordinates)
    if rank < min(d, n - 1) and rank < _numerical_rank(X):  # a view of rank r cannot fill more than r
        return f"rank {rank} < {d} dimensions"
    distinct = np.unique(np.round(coordinates / (_DISTINCT_RTOL * largest)), axis=0).shape[0]
    if distinct >= 0.5 * n:  # at least half of all rows: enough whatever the input's duplicates
        return None
    distinct_input = np.unique(X, axis=0).shape[0]
    if distinct < 0.5 * distinct_input:
        return (f"{distinct} distinct rows (to {_DISTINCT_RTOL:.0e} of the largest coordinate, {largest:.3g}) "
                f"for {distinct_input} distinct input rows")
    return None


# ---------------------------------------------------------------------------------------------
# Estimator base
# ---------------------------------------------------------------------------------------------
class SpectralAlignment(BaseEstimator):
    """Base class of the spectral alignment estimators (scikit-learn contract).

    ``__init__`` of a subclass only stores its arguments; ``fit`` validates the input once
    (:func:`as_problem`), calls the subclass's ``_fit(problem) -> LatentEmbedding`` and stores
    the result as ``embedding_``. After fitting, every view's embedding is checked
    (:func:`embedding_degeneracy`): a degenerate one (rank deficient, or collapsed to few distinct
    rows) gives a ``RuntimeWarning`` and an entry in ``degenerate_views_`` (view -> reason; empty
    when all is well); non-finite coordinates raise a ``ValueError``. Methods built on within-view
    graphs also set ``degree_ratios_`` (view -> largest over smallest degree of its graph); above
    :data:`bayesalign.graph.DEGREE_RATIO_LIMIT` a warning has named the rows of smallest degree.
    """

    def fit(self, problem, anchors=None):
        """Fit on an AlignmentProblem (or views + ``anchors``); returns self.

        Parameters
        ----------
        problem : AlignmentProblem, Views, or dict / list of arrays
        anchors : Correspondence, list or dict, optional
            Replace (or, with raw views, provide) the anchor pairs.
        """
        problem = as_problem(problem, anchors)
        problem.views.check_complete(type(self).__name__)
        self.embedding_ = self._fit(problem)
        self.n_components_ = self.embedding_.n_components
        self.view_names_ = problem.views.names
        self._check_degenerate(problem)
        return self

    def _check_degenerate(self, problem: AlignmentProblem) -> None:
        """Set ``degenerate_views_`` (view -> reason) and warn for each degenerate view embedding."""
        self.degenerate_views_ = {}
        for v in problem.views.names:
            coordinates = np.asarray(self.embedding_[v])
            if not np.all(np.isfinite(coordinates)):
                raise ValueError(f"{type(self).__name__}: the embedding of view {v!r} has non-finite coordinates "
                                 f"(numerical trouble; {embedding_degeneracy(coordinates, problem.views[v])})")
            reason = embedding_degeneracy(coordinates, problem.views[v])
            if reason is not None:
                self.degenerate_views_[v] = reason
                warnings.warn(f"{type(self).__name__}: the embedding of view {v!r} is degenerate: {reason}",
                              RuntimeWarning, stacklevel=3)

    def fit_transform(self, problem, anchors=None) -> LatentEmbedding:
        """``fit(problem, anchors).embedding_``."""
        return self.fit(problem, anchors).embedding_

    def _fit(self, problem: AlignmentProblem) -> LatentEmbedding:  # pragma: no cover - abstract
        raise NotImplementedError

    def _record_degrees(self, graphs: Mapping[str, sp.spmatrix]) -> None:
        """``degree_ratios_``: per view, the largest over the smallest degree of its within-view graph."""
        self.degree_ratios_ = {v: degree_spread(W)[0] for v, W in graphs.items()}

    def _check_fitted(self):
        if not hasattr(self, "embedding_"):
            raise ValueError(f"this {type(self).__name__} is not fitted yet; call fit first")

    @staticmethod
    def _anchor_pairs(problem: AlignmentProblem, a: str, b: str, minimum: int, why: str) -> Correspondence:
        """The anchors between views a and b, oriented (a, b), with at least ``minimum`` pairs."""
        corr = problem.anchors_between(a, b)
        if len(corr) < minimum:
            raise ValueError(f"{len(corr)} anchor pair(s) between views {a!r} and {b!r}; {why} needs at "
                             f"least {minimum}")
        return corr
