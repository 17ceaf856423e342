"""Costs between the rows of two views: distances, posterior match likelihoods, candidate pairs.

One squared-distance helper (:func:`squared_distances`) serves every dense cost; the cost
sources (``_PointCosts``, ``_PosteriorCosts``, and those of given costs in
:mod:`bayesalign.matching.given_costs`) let the certified sparse solver evaluate costs on demand
(row blocks, single pairs, nearest neighbours) without the dense matrix.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.spatial import cKDTree

from ..data import check_view

__all__ = ["CrossViewMisfit", "fit_misfit", "knn_edges", "likelihood_cost", "mean_distance_cost", "mutual_nearest",
           "pair_costs", "pairwise_costs", "squared_distances"]

METRICS = ("euclidean", "sqeuclidean")
_BLOCK_ENTRIES = 1 << 22  # entries of one row block of costs (32 MB): memory O(chunk * n_b)
_LOG_2PI = math.log(2.0 * math.pi)


# ------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------
def _check_cost(cost, name: str = "cost", *, allow_inf: bool = True) -> np.ndarray:
    """A float64 (n_a, n_b) copy of a cost matrix; +inf (a forbidden pair) only if allowed."""
    if sp.issparse(cost):
        raise TypeError(f"{name}: expected a dense (n_a, n_b) array; use sparse_assignment for sparse costs")
    array = np.array(cost, dtype=np.float64, copy=True)
    if array.ndim != 2 or 0 in array.shape:
        raise ValueError(f"{name}: expected a non-empty 2-D (n_a, n_b) array, got shape {array.shape}")
    bad = np.isnan(array) | (array == -np.inf) | (np.isinf(array) if not allow_inf else False)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ValueError(f"{name}: invalid value {array[i, j]} at row {i}, column {j}"
                         + ("" if allow_inf else " (costs must be finite here)"))
    return array


def _check_limit(cost_limit) -> float | None:
    if cost_limit is None:
        return None
    limit = float(cost_limit)
    if not math.isfinite(limit):
        raise ValueError(f"cost_limit must be finite, got {cost_limit}")
    return limit


def _check_temperature(temperature) -> float:
    temperature = float(temperature)
    if not (temperature > 0 and math.isfinite(temperature)):  # exp(-C / T) is degenerate at T = 0 or inf
        raise ValueError(f"temperature must be positive and finite, got {temperature}")
    return temperature


def _check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    return metric


def _as_2d(array, name: str) -> np.ndarray:
    out = np.asarray(array, dtype=np.float64)
    if out.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array (n, q), got shape {out.shape}")
    if not np.all(np.isfinite(out)):
        row, col = np.argwhere(~np.isfinite(out))[0]
        raise ValueError(f"{name}: non-finite value at row {row}, dimension {col}")
    return out



# ------------------------------------------------------------------------------------------
# Dense costs
# ------------------------------------------------------------------------------------------
def squared_distances(points_a, points_b, sq_a=None, sq_b=None) -> np.ndarray:
    r"""Squared Euclidean distances :math:`D_{ij} = \|a_i\|^2 + \|b_j\|^2 - 2 a_i \cdot b_j`, clipped at 0.

    The one helper for dense squared distances in the package. ``sq_a`` / ``sq_b`` are the
    precomputed squared norms (callers that evaluate row blocks pass them); the (n_a, n_b)
    output is the only full-size array (the expansion is done in place).

    >>> squared_distances(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0], [0.0, 1.0]])).tolist()
    [[25.0, 1.0]]
    """
    a, b = np.asarray(points_a, np.float64), np.asarray(points_b, np.float64)  # [Na, Q], [Nb, Q]
    sq_a = np.einsum("ij,ij->i", a, a) if sq_a is None else sq_a  # [Na]
    sq_b = np.einsum("ij,ij->i", b, b) if sq_b is None else sq_b  # [Nb]
    out = a @ b.T  # [Na, Nb]
    out *= -2.0
    out += sq_a[:, None]
    out += sq_b[None, :]
    np.maximum(out, 0.0, out=out)  # round-off can make a distance near 0 negative
    return out


def pairwise_costs(points_a, points_b, metric: str = "euclidean") -> np.ndarray:
    r"""Dense cost matrix between two point sets, :math:`C_{ij} = \|a_i - b_j\|` or its square.

    The (n_a, n_b) matrix is the output, so its memory is inherent; the sparse path of
    :func:`bayesalign.matching.assign` never calls this.

    >>> pairwise_costs([[0.0, 0.0]], [[3.0, 4.0], [0.0, 1.0]]).tolist()
    [[5.0, 1.0]]
    """
    source = _PointCosts(check_view(points_a, "points_a"), check_view(points_b, "points_b"),
                         _check_metric(metric))
    return source.block(np.arange(source.shape[0]))


def mean_distance_cost(mean_a, mean_b) -> np.ndarray:
    """The paper's D**: squared Euclidean distance between posterior means (section 3.1).

    ``D[i, j] = ||mu_i - mu_j||^2`` for the (already restricted to shared dimensions)
    means ``mu_i`` of view a and ``mu_j`` of view b. The Hungarian assignment on it is
    the same with or without the square root only for the *myopic* matcher; the
    nonmyopic optimum of the squared distance is the MAP permutation of the
    homoscedastic Gaussian model, which is why the square is used here.

    Parameters
    ----------
    mean_a : array (n_a, q)
    mean_b : array (n_b, q)

    Returns
    -------
    array (n_a, n_b)  (dense: the assignment on it needs every entry)

    Examples
    --------
    >>> mean_distance_cost([[0.0, 0.0]], [[3.0, 4.0], [0.0, 1.0]]).tolist()
    [[25.0, 1.0]]
    """
    a = _as_2d(mean_a, "mean_a")  # [Na, Q]
    b = _as_2d(mean_b, "mean_b")  # [Nb, Q]
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"mean_a has {a.shape[1]} dimensions but mean_b has {b.shape[1]}")
    return squared_distances(a, b)


def likelihood_cost(mean_a, var_a, mean_b, var_b) -> np.ndarray:
    """Match negative log-likelihood: ``-log N(mu_i - mu_j; 0, S_i + S_j)`` with diagonal S.

    If q_a(x_i) = N(mu_i, S_i) and q_b(x_j) = N(mu_j, S_j) describe the *same*
    latent point x (with a flat prior on x), then
    ``p(mu_i, mu_j | same point) = N(mu_i - mu_j; 0, S_i + S_j)``; so

        C[i, j] = 1/2 sum_q [ log(2 pi (s_iq + s_jq)) + (mu_iq - mu_jq)^2 / (s_iq + s_jq) ]

    and the optimal assignment on C is the MAP permutation under these posteriors
    (this is the "use the uncertainty" future work of Damianou et al., 2016, section 5).
    Unlike the expected squared distance ``E||x_i - x_j||^2 = ||mu_i - mu_j||^2 +
    tr S_i + tr S_j`` -- which only adds row and column constants and therefore changes
    no assignment, so it is *not* offered as an uncertainty-aware cost -- both the
    variance-weighted distance and the log-determinant term couple i and j.

    Parameters
    ----------
    mean_a, var_a : arrays (n_a, q)
        Posterior means and diagonal variances of view a's points.
    mean_b, var_b : arrays (n_b, q)

    Returns
    -------
    array (n_a, n_b)

    Examples
    --------
    >>> c = likelihood_cost([[0.0]], [[0.5]], [[1.0], [0.0]], [[0.5], [0.5]])
    >>> np.allclose(c, 0.5 * np.log(2 * np.pi) + 0.5 * np.array([[1.0, 0.0]]))
    True
    """
    ma, va = _as_2d(mean_a, "mean_a"), _as_2d(var_a, "var_a")  # [Na, Q]
    mb, vb = _as_2d(mean_b, "mean_b"), _as_2d(var_b, "var_b")  # [Nb, Q]
    if ma.shape != va.shape or mb.shape != vb.shape or ma.shape[1] != mb.shape[1]:
        raise ValueError(f"shapes do not agree: mean_a {ma.shape}, var_a {va.shape}, mean_b {mb.shape}, "
                         f"var_b {vb.shape}")
    for name, var in (("var_a", va), ("var_b", vb)):
        if (var <= 0).any():
            row, col = np.argwhere(var <= 0)[0]
            raise ValueError(f"{name}: posterior variances must be positive, got {var[row, col]} at row {row}, "
                             f"dimension {col}")
    cost = np.zeros((ma.shape[0], mb.shape[0]))  # [Na, Nb]
    # one latent dimension at a time keeps the memory at one [Na, Nb] temporary
    for q in range(ma.shape[1]):
        total = va[:, q, None] + vb[None, :, q]  # [Na, Nb]
        diff = ma[:, q, None] - mb[None, :, q]  # [Na, Nb]
        cost += 0.5 * (_LOG_2PI + np.log(total) + diff * diff / total)
    return cost


@dataclass(frozen=True)
class CrossViewMisfit:
    r"""How far two views put the same point beyond their posterior variances (:func:`fit_misfit`).

    The model: for a pair (i, t) of rows that are the same point, the posterior means differ by
    :math:`\mu^a_i - \mu^b_t \sim N(0, \operatorname{diag}(s^a_i + s^b_t) + \Sigma_\tau)`, where
    :math:`\Sigma_\tau` (``covariance``, [q, q]) is the misfit of the two views' latent spaces (their
    mappings, learned from finitely many rows, do not invert to exactly the same point). ``basis`` (V,
    orthonormal columns) diagonalises the average pair's covariance :math:`\Sigma_\tau +
    \operatorname{diag}(\bar s)`, :math:`\bar s` the known pairs' mean :math:`s^a + s^b`; ``added`` is
    :math:`\operatorname{diag}(V^\top \Sigma_\tau V)`. ``shrinkage`` is the weight of the diagonal
    target in the estimate, ``pairs`` the pairs it came from.
    """

    covariance: np.ndarray
    basis: np.ndarray
    added: np.ndarray
    shrinkage: float
    pairs: int

    def apply(self, mean, var) -> tuple[np.ndarray, np.ndarray]:
        r"""Posteriors (mean [n, q], diagonal var [n, q]) in ``basis``, half the misfit added to each side.

        :math:`\mu \mapsto V^\top \mu`, :math:`s \mapsto \operatorname{diag}(V^\top \operatorname{diag}(s)
        V) + \tfrac12 \operatorname{diag}(V^\top \Sigma_\tau V)`, so that :func:`likelihood_cost` of two
        transformed posteriors is :math:`-\log N(\mu^a_i - \mu^b_t; 0, C_{it})` with :math:`C_{it}` the
        diagonal of :math:`V^\top(\operatorname{diag}(s^a_i + s^b_t) + \Sigma_\tau)V`. What that drops,
        the off-diagonal part, is :math:`V^\top \operatorname{diag}(s^a_i + s^b_t - \bar s) V`'s: the cost is
        exact for a pair with the average variances, and whenever :math:`\Sigma_\tau = 0` (then V = I and this
        is the plain likelihood cost) or a pair's variances are equal across the q dimensions.
        """
        mean, var = _as_2d(mean, "mean"), _as_2d(var, "var")
        q = self.added.shape[0]
        if mean.shape[1] != q or var.shape != mean.shape:
            raise ValueError(f"the misfit is over {q} dimensions; got mean {mean.shape}, var {var.shape}")
        return mean @ self.basis, var @ self.basis ** 2 + 0.5 * self.added


def fit_misfit(mean_a, var_a, mean_b, var_b, shrinkage: float = 0.0) -> CrossViewMisfit:
    r"""The cross-view misfit :math:`\Sigma_\tau` estimated from the posteriors of known pairs.

    Row k of (mean_a, var_a) and row k of (mean_b, var_b) are one point's posteriors, each inferred
    from one view alone. Under :class:`CrossViewMisfit`'s model :math:`E[d_k d_k^\top] =
    \operatorname{diag}(s^a_k + s^b_k) + \Sigma_\tau` with :math:`d_k = \mu^a_k - \mu^b_k`, so by the
    method of moments

    .. math:: \hat\Sigma_\tau = \Bigl[(1 - \lambda) M + \lambda \operatorname{diag}(M)
              - \operatorname{diag}\bigl(\tfrac1n \textstyle\sum_k s^a_k + s^b_k\bigr)\Bigr]_+,
              \qquad M = \tfrac1n \textstyle\sum_k d_k d_k^\top,

    :math:`[\cdot]_+` the nearest positive semi-definite matrix (negative eigenvalues set to 0) and
    :math:`\lambda` = ``shrinkage`` the weight of the diagonal target (0: the plain moments; 1: no
    correlations between dimensions). The total :math:`\operatorname{diag}(s^a_i + s^b_t) +
    \Sigma_\tau` stays positive definite with fewer pairs than dimensions (the posterior variances are).
    MAD uses 0, which ranked the true partners of the shipped real pairs best (benchmarks/RESULTS.md,
    "Cross-view misfit"). Needs at least 2 pairs.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(4000, 2))
    >>> shift = rng.multivariate_normal([0, 0], [[0.5, 0.3], [0.3, 0.5]], size=4000)
    >>> var = np.full((4000, 2), 0.01)
    >>> mis = fit_misfit(x + shift + rng.normal(scale=0.1, size=x.shape), var, x, var)
    >>> np.allclose(mis.covariance, [[0.5, 0.3], [0.3, 0.5]], atol=0.05)
    True
    """
    ma, va = _as_2d(mean_a, "mean_a"), _as_2d(var_a, "var_a")
    mb, vb = _as_2d(mean_b, "mean_b"), _as_2d(var_b, "var_b")
    if not (ma.shape == va.shape == mb.shape == vb.shape):
        raise ValueError(f"shapes do not agree: mean_a {ma.shape}, var_a {va.shape}, mean_b {mb.shape}, "
                         f"var_b {vb.shape} (row k of each is one known pair)")
    n = ma.shape[0]
    if n < 2:
        raise ValueError(f"fit_misfit needs at least 2 known pairs, got {n}")
    shrinkage = float(shrinkage)
    if not 0.0 <= shrinkage <= 1.0:
        raise ValueError(f"shrinkage must be in [0, 1], got {shrinkage!r}")
    d = ma - mb  # [n, q]
    moment = d.T @ d / n  # [q, q]
    shrunk = (1.0 - shrinkage) * moment + shrinkage * np.diag(np.diag(moment))
    average = (va + vb).mean(0)  # [q]: the known pairs' mean posterior variance
    values, vectors = np.linalg.eigh(shrunk - np.diag(average))
    covariance = (vectors * np.maximum(values, 0.0)) @ vectors.T  # the nearest PSD matrix (Frobenius)
    covariance = 0.5 * (covariance + covariance.T)
    _, basis = np.linalg.eigh(covariance + np.diag(average))
    added = np.maximum(np.einsum("qk,qr,rk->k", basis, covariance, basis), 0.0)  # diag(V^T Sigma V)
    return CrossViewMisfit(covariance, basis, added, shrinkage, n)


def pair_costs(kind: str, mean_a, var_a, mean_b, var_b, index_a, index_b) -> np.ndarray:
    """The cost of the listed pairs only (``kind`` "mean" or "likelihood"): the sparse path's costs.

    ``out[t] = C[index_a[t], index_b[t]]`` for C = ``mean_distance_cost`` or
    ``likelihood_cost``, without forming the (n_a, n_b) matrix.

    >>> pair_costs("mean", [[0.0], [1.0]], None, [[3.0]], None, [0, 1], [0, 0]).tolist()
    [9.0, 4.0]
    """
    ia, ib = np.asarray(index_a, np.int64), np.asarray(index_b, np.int64)
    ma, mb = np.asarray(mean_a, np.float64)[ia], np.asarray(mean_b, np.float64)[ib]  # [K, Q]
    diff2 = (ma - mb) ** 2  # [K, Q]
    if kind == "mean":
        return diff2.sum(1)
    if kind == "likelihood":
        total = np.asarray(var_a, np.float64)[ia] + np.asarray(var_b, np.float64)[ib]  # [K, Q]
        return 0.5 * (_LOG_2PI + np.log(total) + diff2 / total).sum(1)
    raise ValueError(f"cost must be 'mean' or 'likelihood', got {kind!r}")


def mutual_nearest(cost) -> np.ndarray:
    """Boolean (n_a, n_b) mask of mutual nearest neighbours: row i's argmin is j and column j's is i.

    >>> mutual_nearest([[0.0, 1.0], [0.5, 2.0]]).astype(int).tolist()
    [[1, 0], [0, 0]]
    """
    cost = np.asarray(cost, dtype=np.float64)
    mask = np.zeros(cost.shape, dtype=bool)
    if cost.size == 0:
        return mask
    best_b = cost.argmin(1)  # [Na]
    best_a = cost.argmin(0)  # [Nb]
    rows = np.arange(cost.shape[0])
    keep = best_a[best_b] == rows
    mask[rows[keep], best_b[keep]] = True
    return mask


def knn_edges(points_a, points_b, k: int):
    """Candidate pairs (ei, ej): each row's ``k`` nearest rows of the other view, both directions, deduplicated.

    KD-tree queries (``scipy.spatial.cKDTree``); the pairs are sorted by ``ei * n_b + ej``.

    >>> ei, ej = knn_edges(np.array([[0.0], [10.0]]), np.array([[9.0], [1.0], [20.0]]), 1)
    >>> list(zip(ei.tolist(), ej.tolist()))
    [(0, 1), (1, 0), (1, 2)]
    """
    points_a, points_b = np.asarray(points_a, np.float64), np.asarray(points_b, np.float64)
    n_b = points_b.shape[0]
    keys = []
    for src, dst, flip in ((points_a, points_b, False), (points_b, points_a, True)):
        kk = min(int(k), dst.shape[0])
        _, idx = cKDTree(dst).query(src, k=kk)
        idx = np.asarray(idx, dtype=np.int64).reshape(src.shape[0], kk)  # [n_src, kk]
        own = np.repeat(np.arange(src.shape[0]), kk)
        ei, ej = (idx.ravel(), own) if flip else (own, idx.ravel())
        keys.append(ei * n_b + ej)
    keys = np.unique(np.concatenate(keys))
    return keys // n_b, keys % n_b


# ------------------------------------------------------------------------------------------
# Cost sources of the certified sparse solver (costs on demand)
# ------------------------------------------------------------------------------------------
class _PointCosts:
    """Costs between two point sets, evaluated on demand (never the whole matrix at once)."""

    certifiable = True

    def __init__(self, points_a, points_b, metric):
        if points_a.shape[1] != points_b.shape[1]:
            raise ValueError(f"points_a has {points_a.shape[1]} dimensions, points_b {points_b.shape[1]}")
        self.points_a, self.points_b, self.metric = points_a, points_b, metric
        self.shape = (points_a.shape[0], points_b.shape[0])
        self.sq_a = np.einsum("ij,ij->i", points_a, points_a)  # [n_a]
        self.sq_b = np.einsum("ij,ij->i", points_b, points_b)  # [n_b]
        # |block - exact| for |a|^2 + |b|^2 - 2 a.b in float64; a square root turns an
        # absolute error e on a squared distance near 0 into at most sqrt(e)
        err = 64 * np.finfo(np.float64).eps * (self.sq_a.max() + self.sq_b.max() + 1.0)
        self.block_error = math.sqrt(err) if metric == "euclidean" else err

    @property
    def T(self):
        return _PointCosts(self.points_b, self.points_a, self.metric)

    def block(self, rows) -> np.ndarray:
        """Costs of rows ``rows`` of a to every point of b: [len(rows), n_b]."""
        out = squared_distances(self.points_a[rows], self.points_b, self.sq_a[rows], self.sq_b)  # [r, n_b]
        if self.metric == "euclidean":
            np.sqrt(out, out=out)
        return out

    def at(self, rows, cols) -> np.ndarray:
        """Exact costs of the pairs (rows[t], cols[t]) (differences, not the expansion)."""
        sq = pair_costs("mean", self.points_a, None, self.points_b, None, rows, cols)  # [k]
        return np.sqrt(sq) if self.metric == "euclidean" else sq

    def knn(self, k: int):
        """Edges (i, j) of the k nearest b of every a and the k nearest a of every b."""
        return knn_edges(self.points_a, self.points_b, k)

    def suspects(self, u, v, tol, n_groups: int = 16):
        """Pairs that may have reduced cost C_ij - u_i - v_j < -tol, found without a dense scan.

        With s_j = -v_j >= 0, a violator has C_ij < u_i - s_j. Columns are grouped by s (its
        quantiles); for a group with smallest value s_lo, every violator lies in the ball
        C_ij < u_i - s_lo around a_i: one KD-tree ball query per row and group. The balls hold
        the violators and a thin shell more (removed by the exact check). If they would hold
        too many pairs (or the problem is small), use the row-block scan (the speed-up is measured
        in benchmarks/RESULTS.md).
        """
        if self.shape[0] * self.shape[1] <= 4 * _BLOCK_ENTRIES:  # a dense scan is cheaper when small
            yield from _block_suspects(self, u, v, tol)
            return
        s = np.maximum(-v, 0.0)
        n_groups = int(min(n_groups, max(1, self.shape[1] // 64)))
        cuts = np.quantile(s, np.linspace(0.0, 1.0, n_groups + 1)[1:-1])
        group = np.searchsorted(cuts, s, side="right")
        queries, total = [], 0
        for g in range(n_groups):
            cols = np.flatnonzero(group == g)
            reach = u - s[cols].min() - tol if cols.size else np.zeros(0)
            rows = np.flatnonzero(reach > 0)
            if not rows.size:
                continue
            radius = (np.sqrt(reach[rows]) if self.metric == "sqeuclidean" else reach[rows]) * (1 + 1e-9)
            tree = cKDTree(self.points_b[cols])
            counts = tree.query_ball_point(self.points_a[rows], radius, return_length=True)
            total += int(counts.sum())
            queries.append((tree, cols, rows, radius, counts))
        if total > 4 * _BLOCK_ENTRIES:
            yield from _block_suspects(self, u, v, tol)
            return
        for tree, cols, rows, radius, counts in queries:
            hits = tree.query_ball_point(self.points_a[rows], radius, return_sorted=False)
            found = np.fromiter(itertools.chain.from_iterable(hits), dtype=np.int64, count=int(counts.sum()))
            yield np.repeat(rows, counts), cols[found]

    def dense(self) -> np.ndarray:
        return self.block(np.arange(self.shape[0]))


class _PosteriorCosts:
    """The likelihood cost between two sets of Gaussian posteriors, in row blocks (``block`` only)."""

    def __init__(self, mean_a, var_a, mean_b, var_b):
        self.mean_a, self.var_a, self.mean_b, self.var_b = mean_a, var_a, mean_b, var_b
        self.shape = (mean_a.shape[0], mean_b.shape[0])

    @property
    def T(self):
        return _PosteriorCosts(self.mean_b, self.var_b, self.mean_a, self.var_a)  # the cost is symmetric

    def block(self, rows) -> np.ndarray:
        return likelihood_cost(self.mean_a[rows], self.var_a[rows], self.mean_b, self.var_b)  # [r, n_b]


def cost_source(kind: str, mean_a, var_a, mean_b, var_b):
    """Row blocks of the ``kind`` ("mean" or "likelihood") costs, never the whole matrix at once."""
    if kind == "mean":
        return _PointCosts(np.asarray(mean_a, np.float64), np.asarray(mean_b, np.float64), "sqeuclidean")
    return _PosteriorCosts(np.asarray(mean_a, np.float64), np.asarray(var_a, np.float64),
                           np.asarray(mean_b, np.float64), np.asarray(var_b, np.float64))


def _block_suspects(source, u, v, tol):
    """Pairs whose reduced cost, evaluated in row blocks of the cost matrix, is below -tol
    (up to the blocks' rounding error). Memory O(chunk * n_b), never n_a x n_b."""
    n_a, n_b = source.shape
    chunk = max(1, _BLOCK_ENTRIES // n_b)
    for start in range(0, n_a, chunk):
        rows = np.arange(start, min(start + chunk, n_a))
        reduced = source.block(rows)  # [r, n_b]
        reduced -= v[None, :]
        reduced -= u[rows, None]
        hit_r, hit_c = np.nonzero(reduced < -tol + source.block_error)
        yield rows[hit_r], hit_c


