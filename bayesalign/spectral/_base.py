"""Shared machinery of the spectral alignment estimators.

The base estimator and its one validation boundary live here; the per-view graph and embedding
helpers every spectral method calls are in :mod:`~bayesalign.spectral._graphs`,
:mod:`~bayesalign.spectral._embedding`, :mod:`~bayesalign.spectral._linalg` and
:mod:`~bayesalign.spectral._checks`, and are importable from here under the names below.

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
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator

from ..data import AlignmentProblem, Correspondence, LatentEmbedding, Views
from ..graph import degree_spread
from ._checks import check_n_components, check_scale
from ._embedding import ViewEmbedding, embed_view
from ._graphs import (
    anchor_tuples,
    correspondence_matrices,
    joint_adjacency,
    split_rows,
    view_offsets,
    within_view_affinity,
)
from ._linalg import locality_preserving_projections, row_space_basis, whitening_basis

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
