"""Assignment solvers: optimal (dense and certified sparse), myopic, and probabilistic matching.

Every solver that decides pairs returns an :class:`~bayesalign.data.Alignment`; the two
probabilistic ones return match marginals that :func:`marginal_assignment` turns into an
``Alignment`` with per-pair probabilities.

=========================  ==================================================================
``linear_assignment``      dense optimal assignment (Hungarian / Jonker-Volgenant), rectangular,
                           optional unmatched penalty ``cost_limit``
``sparse_assignment``      assignment on a sparse candidate graph (k nearest neighbours), with an
                           LP-duality certificate of optimality for the full dense problem
``assign``                 one entry point: a cost matrix or two point sets, dense or sparse
``myopic_assignment``      points of b arrive one by one and take the nearest free point of a
``sinkhorn``               entropic (soft) assignment in the log domain, optional dustbin
``perturb_and_map``        samples of assignments under Gumbel-perturbed costs
``marginal_assignment``    the matching that maximises the expected number of correct pairs
``pairwise_costs``         dense (n_a, n_b) Euclidean / squared-Euclidean costs between points
=========================  ==================================================================

The unmatched penalty is the same everywhere: with ``cost_limit = L``, leaving one point of
either view unmatched costs ``L / 2``, so a pair costlier than ``L`` is never worth making.
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from scipy.sparse.csgraph import maximum_bipartite_matching, min_weight_full_bipartite_matching
from scipy.spatial import cKDTree

from ._utils import as_rng
from .data import Alignment, check_view

__all__ = ["PerturbAndMapResult", "SinkhornResult", "assign", "linear_assignment", "marginal_assignment",
           "myopic_assignment", "pairwise_costs", "perturb_and_map", "sinkhorn", "sinkhorn_marginals",
           "sparse_assignment", "sparse_sinkhorn"]

METRICS = ("euclidean", "sqeuclidean")
DEFAULT_VIEWS = ("view0", "view1")
# Dense problems up to this many entries (8 bytes each: 200 MB) are solved densely by ``assign``.
DENSE_LIMIT = 25_000_000
_BLOCK_ENTRIES = 1 << 22  # entries of one row block of costs (32 MB): memory O(chunk * n_b)


# ------------------------------------------------------------------------------------------
# Costs
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


def _check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    return metric


def pairwise_costs(points_a, points_b, metric: str = "euclidean") -> np.ndarray:
    r"""Dense cost matrix between two point sets, :math:`C_{ij} = \|a_i - b_j\|` or its square.

    The (n_a, n_b) matrix is the output, so its memory is inherent; the sparse path of
    :func:`assign` never calls this.

    >>> pairwise_costs([[0.0, 0.0]], [[3.0, 4.0], [0.0, 1.0]]).tolist()
    [[5.0, 1.0]]
    """
    source = _PointCosts(check_view(points_a, "points_a"), check_view(points_b, "points_b"),
                         _check_metric(metric))
    return source.block(np.arange(source.shape[0]))


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
        out = self.points_a[rows] @ self.points_b.T  # [r, n_b]
        out *= -2.0
        out += self.sq_a[rows, None]
        out += self.sq_b[None, :]
        np.maximum(out, 0.0, out=out)
        if self.metric == "euclidean":
            np.sqrt(out, out=out)
        return out

    def at(self, rows, cols) -> np.ndarray:
        """Exact costs of the pairs (rows[t], cols[t]) (differences, not the expansion)."""
        diff = self.points_a[rows] - self.points_b[cols]  # [k, d]
        sq = np.einsum("ij,ij->i", diff, diff)
        return np.sqrt(sq) if self.metric == "euclidean" else sq

    def knn(self, k: int):
        """Edges (i, j) of the k nearest b of every a and the k nearest a of every b (KD-trees)."""
        edges_i, edges_j = [], []
        for src, dst, flip in ((self.points_a, self.points_b, False), (self.points_b, self.points_a, True)):
            kk = min(k, dst.shape[0])
            _, idx = cKDTree(dst).query(src, k=kk)
            idx = np.asarray(idx, dtype=np.int64).reshape(src.shape[0], kk)  # [n_src, kk]
            own = np.repeat(np.arange(src.shape[0]), kk)
            (edges_i, edges_j)[flip].append(own)
            (edges_j, edges_i)[flip].append(idx.ravel())
        return np.concatenate(edges_i), np.concatenate(edges_j)

    def suspects(self, u, v, tol, n_groups: int = 16):
        """Pairs that may have reduced cost C_ij - u_i - v_j < -tol, found without a dense scan.

        With s_j = -v_j >= 0, a violator has C_ij < u_i - s_j. Columns are grouped by s (its
        quantiles); for a group with smallest value s_lo, every violator lies in the ball
        C_ij < u_i - s_lo around a_i: one KD-tree ball query per row and group. The balls hold
        the violators and a thin shell more (removed by the exact check). If they would hold
        too many pairs (or the problem is small), use the row-block scan. At N = 20000 points
        in R^5 this takes about a third of the time of the scan.
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


class _MatrixCosts:
    """The same interface over a given dense cost matrix."""

    certifiable = True
    block_error = 0.0

    def __init__(self, cost):
        self.cost = cost
        self.shape = cost.shape

    @property
    def T(self):
        return _MatrixCosts(self.cost.T)

    def block(self, rows) -> np.ndarray:
        return np.array(self.cost[rows], dtype=np.float64)

    def at(self, rows, cols) -> np.ndarray:
        return self.cost[rows, cols]

    def knn(self, k: int):
        edges_i, edges_j = [], []
        for matrix, flip in ((self.cost, False), (self.cost.T, True)):
            kk = min(k, matrix.shape[1])
            chunk = max(1, _BLOCK_ENTRIES // matrix.shape[1])
            for start in range(0, matrix.shape[0], chunk):
                rows = np.arange(start, min(start + chunk, matrix.shape[0]))
                part = np.argpartition(matrix[rows], kk - 1, axis=1)[:, :kk]  # [r, kk]
                own = np.repeat(rows, kk)
                (edges_i, edges_j)[flip].append(own)
                (edges_j, edges_i)[flip].append(part.ravel())
        return np.concatenate(edges_i), np.concatenate(edges_j)

    def suspects(self, u, v, tol):
        yield from _block_suspects(self, u, v, tol)

    def dense(self) -> np.ndarray:
        return self.cost


class _GraphCosts:
    """Costs known only on a candidate graph; every other pair is forbidden (nothing to certify)."""

    certifiable = False
    block_error = 0.0

    def __init__(self, ei, ej, values, shape):
        values = np.asarray(values, dtype=np.float64)
        if not np.all(np.isfinite(values)):
            raise ValueError("candidates: stored costs must be finite")
        self.shape = tuple(shape)
        keys = ei * self.shape[1] + ej
        order = np.argsort(keys, kind="stable")
        self.keys, self.values = keys[order], values[order]
        if np.any(self.keys[1:] == self.keys[:-1]):
            k = self.keys[np.flatnonzero(self.keys[1:] == self.keys[:-1])[0]]
            raise ValueError(f"candidates: pair ({k // self.shape[1]}, {k % self.shape[1]}) is stored twice")
        self._edges = (ei, ej, values)

    @property
    def T(self):
        ei, ej, values = self._edges
        return _GraphCosts(ej, ei, values, self.shape[::-1])

    def at(self, rows, cols) -> np.ndarray:
        keys = np.asarray(rows) * self.shape[1] + np.asarray(cols)
        pos = np.minimum(np.searchsorted(self.keys, keys), self.keys.size - 1)
        return np.where(self.keys[pos] == keys, self.values[pos], np.inf)


def _make_alignment(rows, cols, costs, shape, views, method, probabilities=None, **info) -> Alignment:
    order = np.argsort(rows, kind="stable")
    sel = (lambda v: None if v is None else np.asarray(v)[order])
    return Alignment(tuple(views), np.asarray(rows)[order], np.asarray(cols)[order], sel(costs),
                     sel(probabilities), n_a=shape[0], n_b=shape[1], method=method, info=info)


def _objective(total_cost, n_pairs, shape, limit) -> float:
    """Sum of pair costs plus limit/2 per unmatched point of either view."""
    if limit is None:
        return float(total_cost)
    return float(total_cost + 0.5 * limit * (shape[0] + shape[1] - 2 * n_pairs))


# ------------------------------------------------------------------------------------------
# Dense optimal assignment
# ------------------------------------------------------------------------------------------
def _solve_dense(cost: np.ndarray, limit: float | None):
    """(rows, cols) minimising the cost-limited objective; ``cost`` is overwritten."""
    if limit is not None:
        np.minimum(cost, limit, out=cost)  # clipped costs: equivalent to dummy rows/cols (see below)
    rows, cols = linear_sum_assignment(cost)
    if limit is not None:
        keep = cost[rows, cols] < limit  # a pair at the limit costs as much as leaving both unmatched
        rows, cols = rows[keep], cols[keep]
    return rows, cols


def linear_assignment(cost, cost_limit=None, maximize: bool = False, views=DEFAULT_VIEWS) -> Alignment:
    r"""Optimal one-to-one assignment of a dense cost matrix (Hungarian method, Kuhn 1955).

    Without ``cost_limit`` it solves, for an (n_a, n_b) matrix with n = min(n_a, n_b),

    .. math:: \min_{\sigma} \sum_{i} C_{i\sigma(i)}

    over injective maps from the smaller view into the larger (every point of the smaller
    view is matched). This is the nonmyopic matcher of MAD (Damianou, Lawrence & Ek 2016,
    section 3), solved by ``scipy.optimize.linear_sum_assignment`` (Jonker-Volgenant).

    With ``cost_limit = L`` any point may stay unmatched at a penalty of L/2 per point:

    .. math:: \min_{M \text{ partial matching}} \sum_{(i,j)\in M} C_{ij}
              + \tfrac{L}{2}\,\bigl(n_a - |M|\bigr) + \tfrac{L}{2}\,\bigl(n_b - |M|\bigr).

    This is the assignment augmented with a dummy column per row and a dummy row per column
    (cost L/2 each, zero between dummies). It is solved exactly, without the (n_a + n_b)^2
    augmented matrix, as the full assignment of the clipped costs :math:`\min(C_{ij}, L)`
    followed by dropping the pairs with :math:`C_{ij} \ge L`: a full assignment of clipped
    costs has the same objective as the partial matching left after the drop, and any
    partial matching can be completed, pairing leftover rows with leftover columns at clipped
    cost at most L, without raising its objective; so both optima coincide.

    Parameters
    ----------
    cost : array (n_a, n_b)
        Costs; ``+inf`` forbids a pair (the problem must stay feasible).
    cost_limit : float, optional
        L above; pairs costlier than L stay unmatched (at exactly L either choice is optimal;
        the pair is dropped).
    maximize : bool
        Treat ``cost`` as a score to maximise: solves the problem for ``-cost`` and
        ``-cost_limit`` (pairs scoring below the limit stay unmatched).
    views : (str, str)
        View names stored in the returned Alignment.

    Returns
    -------
    Alignment
        Pairs with their costs; ``info`` holds ``objective`` (the minimised value above, in
        the sign of ``cost``) and ``total_cost`` (sum over the pairs).

    Examples
    --------
    >>> al = linear_assignment([[4.0, 1.0, 3.0], [2.0, 0.0, 5.0], [3.0, 2.0, 2.0]])
    >>> al.to_permutation().tolist(), al.info["objective"]
    ([1, 0, 2], 5.0)
    >>> linear_assignment([[1.0, 9.0], [9.0, 8.0]], cost_limit=5.0).pairs.tolist()
    [[0, 0]]
    """
    cost = _check_cost(cost)  # our own copy: the solver may overwrite it
    limit = _check_limit(cost_limit)
    if maximize:
        if np.isinf(cost).any():
            raise ValueError("cost: with maximize=True, entries must be finite")
        np.negative(cost, out=cost)
        limit = None if limit is None else -limit
    return _dense_alignment(cost, limit, views, sign=-1.0 if maximize else 1.0, cost_limit=cost_limit)


def _dense_alignment(cost, limit, views, sign=1.0, cost_limit=None) -> Alignment:
    """Solve a validated cost matrix that the caller hands over (it is overwritten)."""
    shape = cost.shape
    rows, cols = _solve_dense(cost, limit)
    pair_costs = cost[rows, cols]  # kept pairs are below the limit: clipping left them unchanged
    total = float(pair_costs.sum())
    return _make_alignment(rows, cols, sign * pair_costs, shape, views, "hungarian",
                           objective=sign * _objective(total, rows.size, shape, limit),
                           total_cost=sign * total, cost_limit=cost_limit if cost_limit is not None else limit)


# ------------------------------------------------------------------------------------------
# Sparse assignment with an optimality certificate
# ------------------------------------------------------------------------------------------
def _solve_graph(n_rows, n_cols, ei, ej, ec):
    """Min-cost full matching (every row matched; n_rows <= n_cols) on the edges (ei, ej, ec).

    Returns ``sigma`` (n_rows,), the column of each row. Raises ValueError when the graph has
    no full matching. LAPJVsp (scipy) needs non-zero weights: a constant shift changes every
    full matching's cost by the same amount.
    """
    if not ei.size:
        raise ValueError("empty candidate graph")
    shift = 0.0
    if ec.min() <= 0:
        shift = float(np.abs(ec).max() or 1.0) - float(ec.min())
    graph = sp.csr_matrix((ec + shift, (ei, ej)), shape=(n_rows, n_cols))
    rows, cols = min_weight_full_bipartite_matching(graph)
    sigma = np.full(n_rows, -1, dtype=np.int64)
    sigma[rows] = cols
    return sigma


def _dual_potentials(n_cols, ei, ej, ec, sigma, tol):
    r"""LP duals (u, v) of an optimal full matching ``sigma`` on the graph (ei, ej, ec).

    Dual of min sum c x s.t. each row matched once, each column at most once:
    max sum u + sum v with u_i + v_j <= c_ij on the edges and v <= 0. Complementary slackness
    fixes u_i = c_{i sigma(i)} - v_{sigma(i)}, which turns the edge constraints into the
    difference constraints v_j <= v_{sigma(i)} + c_ij - c_{i sigma(i)}. Their largest solution
    with v <= 0 is the shortest-path distance from a virtual source joined to every column at
    weight 0 (Bellman-Ford; no negative cycle because sigma is optimal). It is a dual
    optimum (it keeps v_j = 0 on unmatched columns) with the smallest |v|, which makes the
    constraints of the pairs outside the graph the easiest to satisfy.
    """
    row_of_edge_match = sigma[ei]
    matched = ej == row_of_edge_match
    cost_matched = np.empty(sigma.size)
    cost_matched[ei[matched]] = ec[matched]
    src, dst = row_of_edge_match[~matched], ej[~matched]
    weight = ec[~matched] - cost_matched[ei[~matched]]
    order = np.argsort(dst, kind="stable")
    src, dst, weight = src[order], dst[order], weight[order]
    starts = np.flatnonzero(np.r_[True, dst[1:] != dst[:-1]]) if dst.size else np.zeros(0, np.int64)
    targets = dst[starts]
    v = np.zeros(n_cols)
    for _ in range(n_cols + 1):
        if not dst.size:
            break
        best = np.minimum.reduceat(v[src] + weight, starts)  # [len(targets)]
        improve = best < v[targets] - tol
        if not improve.any():
            break
        v[targets[improve]] = best[improve]
    else:
        raise RuntimeError("negative cycle among the candidate pairs: the sparse solution is not optimal")
    u = cost_matched - v[sigma]
    return u, v


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


def _violations(source, u, v, edge_keys, tol, max_per_row):
    """Pairs (i, j) outside the graph with reduced cost c_ij - u_i - v_j < -tol (exact costs);
    at most ``max_per_row`` of the most violated pairs per row."""
    n_b = source.shape[1]
    found_i, found_j, found_r = [], [], []
    for ii, jj in source.suspects(u, v, tol):
        if edge_keys.size:
            keys = ii * n_b + jj
            pos = np.minimum(np.searchsorted(edge_keys, keys), edge_keys.size - 1)
            outside = edge_keys[pos] != keys
            ii, jj = ii[outside], jj[outside]
        exact = source.at(ii, jj) - u[ii] - v[jj]
        bad = exact < -tol
        found_i.append(ii[bad])
        found_j.append(jj[bad])
        found_r.append(exact[bad])
    if not found_i:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ii, jj, rr = np.concatenate(found_i), np.concatenate(found_j), np.concatenate(found_r)
    order = np.lexsort((rr, ii))  # per row, most violated first
    ii, jj = ii[order], jj[order]
    first = np.r_[0, np.flatnonzero(np.diff(ii)) + 1] if ii.size else np.zeros(0, np.int64)
    rank = np.arange(ii.size) - np.repeat(first, np.diff(np.r_[first, ii.size]))
    keep = rank < max_per_row
    return ii[keep], jj[keep]


def _candidate_edges(source, ei, ej):
    """Distinct candidate pairs with finite cost: (ei, ej, sorted keys i * n_b + j, costs)."""
    n_b = source.shape[1]
    keys = np.unique(ei * n_b + ej)
    ei, ej = keys // n_b, keys % n_b
    ec = source.at(ei, ej)
    finite = np.isfinite(ec)  # a forbidden (+inf) pair is no candidate
    if not finite.all():
        ei, ej, keys, ec = ei[finite], ej[finite], keys[finite], ec[finite]
    return ei, ej, keys, ec


def _has_full_matching(shape, ei, ej) -> bool:
    """Whether the graph matches every point of the smaller side (Hopcroft-Karp)."""
    graph = sp.csr_matrix((np.ones(ei.size), (ei, ej)), shape=shape)
    return int((maximum_bipartite_matching(graph, perm_type="column") >= 0).sum()) == min(shape)


def _certified_full(source, ei, ej, max_rounds, max_per_row):
    """Full assignment (rows <= cols) by column generation on the candidate graph."""
    n_a, n_b = source.shape
    ei, ej, keys, ec = _candidate_edges(source, ei, ej)
    added_feasibility = False
    for rounds in range(1, max_rounds + 1):
        try:
            sigma = _solve_graph(n_a, n_b, ei, ej, ec)
        except ValueError:
            if not source.certifiable:
                raise ValueError("the candidate pairs admit no matching of every row of the smaller view; "
                                 "add candidates, give the full costs (cost= or points=) or a cost_limit") from None
            if added_feasibility:  # still none (forbidden pairs): leave it to the dense solver
                break
            # no full matching among the candidates: the pairs (i, i) make one exist; the
            # certificate then decides whether the optimum needs other pairs
            added_feasibility = True
            diag = np.arange(n_a)
            ei, ej, keys, ec = _candidate_edges(source, np.r_[ei, diag], np.r_[ej, diag])
            continue
        if not source.certifiable:
            return np.arange(n_a), sigma, dict(certified=False, rounds=1, n_candidates=int(ei.size))
        tol = 1e-9 * (1.0 + float(np.abs(ec).max()))
        u, v = _dual_potentials(n_b, ei, ej, ec, sigma, tol * 1e-3)
        bad_i, bad_j = _violations(source, u, v, keys, tol, max_per_row)
        if not bad_i.size:
            return np.arange(n_a), sigma, dict(certified=True, rounds=rounds, n_candidates=int(ei.size))
        ei, ej, keys, ec = _candidate_edges(source, np.r_[ei, bad_i], np.r_[ej, bad_j])
    return None, None, dict(certified=False, rounds=rounds, n_candidates=int(ei.size))


def _certified_limited(source, ei, ej, limit, max_rounds, max_per_row):
    """Cost-limited assignment by column generation on the dummy-augmented candidate graph.

    Augmented square problem of size n_a + n_b: rows = a, then one dummy per b; columns = b,
    then one dummy per a. Edges: the candidates (cost c_ij), (i, dummy_i) and (dummy_j, j) at
    L/2, and dummy-dummy edges (dummy_j, dummy_i) at 0 for candidate pairs (the transpose of
    the candidate graph, enough to pair up the dummies of matched points). The dense
    augmented problem has every dummy-dummy pair at 0 and +inf between a point and another
    point's dummy, so its certificate checks the real block in row blocks and the
    dummy-dummy block through max u + max v.
    """
    n_a, n_b = source.shape
    n = n_a + n_b
    ei, ej, keys, ec = _candidate_edges(source, ei, ej)
    zb, za = ej.copy(), ei.copy()  # dummy-dummy edges (dummy of b_j, dummy of a_i)
    ar, br = np.arange(n_a), np.arange(n_b)
    for rounds in range(1, max_rounds + 1):
        aug_i = np.concatenate([ei, ar, n_a + br, n_a + zb])
        aug_j = np.concatenate([ej, n_b + ar, br, n_b + za])
        aug_c = np.concatenate([ec, np.full(n_a + n_b, 0.5 * limit), np.zeros(zb.size)])
        sigma = _solve_graph(n, n, aug_i, aug_j, aug_c)
        matched = sigma[:n_a] < n_b
        if not source.certifiable:
            return ar[matched], sigma[:n_a][matched], dict(certified=False, rounds=1, n_candidates=int(ei.size))
        tol = 1e-9 * (1.0 + float(np.abs(aug_c).max()))
        u, v = _dual_potentials(n, aug_i, aug_j, aug_c, sigma, tol * 1e-3)
        bad_i, bad_j = _violations(source, u[:n_a], v[:n_b], keys, tol, max_per_row)
        u_dummy, v_dummy = u[n_a:], v[n_b:]  # [n_b], [n_a]
        zrow = np.flatnonzero(u_dummy + v_dummy.max() > tol)
        zcol = np.flatnonzero(v_dummy + u_dummy.max() > tol)
        if not (bad_i.size or zrow.size or zcol.size):
            return ar[matched], sigma[:n_a][matched], dict(certified=True, rounds=rounds,
                                                           n_candidates=int(ei.size))
        ei, ej, keys, ec = _candidate_edges(source, np.r_[ei, bad_i], np.r_[ej, bad_j])
        zkeys = np.unique(np.r_[zb * n_a + za, zrow * n_a + np.argmax(v_dummy),
                                np.argmax(u_dummy) * n_a + zcol])
        zb, za = zkeys // n_a, zkeys % n_a
    return None, None, dict(certified=False, rounds=max_rounds, n_candidates=int(ei.size))


def _sparse_solve(source, ei, ej, limit, max_rounds, max_per_row, fallback, views, method):
    n_a, n_b = source.shape
    if limit is None and n_a > n_b:  # solve with rows <= columns, then swap back
        cols, rows, info = _certified_full(source.T, ej, ei, max_rounds, max_per_row)
    elif limit is None:
        rows, cols, info = _certified_full(source, ei, ej, max_rounds, max_per_row)
    else:
        rows, cols, info = _certified_limited(source, ei, ej, limit, max_rounds, max_per_row)
    info["fallback"] = False
    if rows is None:
        if not fallback:
            raise RuntimeError(f"sparse assignment not certified optimal after {max_rounds} rounds "
                               "and fallback=False")
        warnings.warn(f"sparse assignment not certified optimal after {max_rounds} rounds; solving the "
                      f"dense {n_a} x {n_b} problem", RuntimeWarning, stacklevel=3)
        rows, cols = _solve_dense(np.array(source.dense(), dtype=np.float64), limit)
        info.update(certified=True, fallback=True)
    pair_costs = source.at(rows, cols) if rows.size else np.zeros(0)
    total = float(pair_costs.sum())
    return _make_alignment(rows, cols, pair_costs, (n_a, n_b), views, method,
                           objective=_objective(total, rows.size, (n_a, n_b), limit), total_cost=total,
                           cost_limit=limit, **info)


def sparse_assignment(candidates, cost=None, points=None, metric: str = "euclidean", cost_limit=None,
                      max_rounds: int = 10, max_per_row: int = 8, fallback: bool = True,
                      views=DEFAULT_VIEWS) -> Alignment:
    r"""Optimal assignment from a sparse graph of candidate pairs, certified against the full problem.

    The candidate pairs (typically each point's k nearest neighbours in the other view) are
    solved with LAPJVsp (``scipy.sparse.csgraph.min_weight_full_bipartite_matching``). If the
    full costs are known (``cost`` or ``points``), the solution is then *certified* optimal for
    the dense problem by LP duality: dual potentials (u, v) of the sparse optimum are computed
    by shortest paths on the candidate graph, and every pair outside it must have a
    non-negative reduced cost

    .. math:: \bar c_{ij} = C_{ij} - u_i - v_j \ge 0,

    checked in row blocks (memory O(chunk * n_b)). Violating pairs join the candidates and the
    problem is solved again (column generation); if the candidates admit no full matching,
    the pairs (i, i) are added first. After ``max_rounds`` rounds the dense problem is solved
    instead (``fallback``). So the result is never silently suboptimal: ``info`` says
    ``certified`` (True once proven, or solved densely), ``rounds``, ``fallback`` and
    ``n_candidates``. Up to floating point: reduced costs down to -1e-9 (1 + max |C|) pass.

    The objective is that of :func:`linear_assignment` (same ``cost_limit`` semantics; with a
    limit the candidate graph is augmented with dummies).

    Parameters
    ----------
    candidates : scipy.sparse matrix (n_a, n_b)
        Stored entries are the candidate pairs. Without ``cost``/``points`` their values are the
        costs and every other pair is forbidden (then there is nothing to certify, and
        ``info["certified"]`` is False).
    cost : array (n_a, n_b), optional
        The full dense costs (the candidates' values are then ignored).
    points : (array (n_a, d), array (n_b, d)), optional
        Point sets; costs are ``metric`` distances computed on demand.
    metric : {"euclidean", "sqeuclidean"}
    cost_limit, views
        As in :func:`linear_assignment`.
    max_rounds, max_per_row : int
        Column-generation rounds, and violating pairs added per row and round.
    fallback : bool
        Solve densely when not certified in ``max_rounds`` (else raise RuntimeError).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> C = np.array([[1.0, 2.0, 9.0], [2.0, 9.0, 1.0], [9.0, 1.0, 2.0]])
    >>> al = sparse_assignment(sp.csr_matrix(C < 5), cost=C)
    >>> al.to_permutation().tolist(), al.info["objective"], al.info["certified"]
    ([0, 2, 1], 3.0, True)
    """
    if not sp.issparse(candidates):
        raise TypeError("candidates must be a scipy.sparse matrix of candidate pairs")
    coo = sp.coo_matrix(candidates)
    ei, ej = coo.row.astype(np.int64), coo.col.astype(np.int64)
    if cost is not None and points is not None:
        raise ValueError("give the full costs either as cost= or as points=, not both")
    if cost is not None:
        source = _MatrixCosts(_check_cost(cost))
    elif points is not None:
        source = _PointCosts(check_view(points[0], "points_a"), check_view(points[1], "points_b"),
                             _check_metric(metric))
    else:
        source = _GraphCosts(ei, ej, coo.data, coo.shape)
    if coo.shape != source.shape:
        raise ValueError(f"candidates have shape {coo.shape}, the costs {source.shape}")
    return _sparse_solve(source, ei, ej, _check_limit(cost_limit), max_rounds, max_per_row, fallback,
                         views, "sparse")


def assign(cost_or_points_a, points_b=None, method: str = "auto", k: int = 10, metric: str = "euclidean",
           cost_limit=None, max_rounds: int = 10, views=DEFAULT_VIEWS) -> Alignment:
    """Optimal assignment from a cost matrix, or from two point sets (costs built on demand).

    ``assign(C)`` solves the (n_a, n_b) matrix C; ``assign(A, B)`` matches the rows of A
    (n_a, d) to those of B (n_b, d) with ``metric`` costs. ``method="dense"`` is
    :func:`linear_assignment`; ``"sparse"`` is :func:`sparse_assignment` on the ``k``
    nearest neighbours in both directions, certified against the full problem (for point
    sets it never forms the dense matrix unless it must fall back); ``"auto"`` is dense up
    to ``DENSE_LIMIT`` (25 million) entries. Both give the same optimum. Without ``cost_limit``, ``k``
    is doubled until the neighbour graph has a matching of the whole smaller view.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[0.0], [1.0], [5.0]])
    >>> assign(A, A[[2, 0, 1]] + 0.1, method="sparse", k=1).to_permutation().tolist()
    [1, 2, 0]
    """
    if method not in ("auto", "dense", "sparse"):
        raise ValueError(f"method must be 'auto', 'dense' or 'sparse', got {method!r}")
    if int(k) < 1:
        raise ValueError(f"k must be a positive number of neighbours, got {k}")
    limit = _check_limit(cost_limit)
    if points_b is None:
        source = _MatrixCosts(_check_cost(cost_or_points_a))
    else:
        source = _PointCosts(check_view(cost_or_points_a, "points_a"), check_view(points_b, "points_b"),
                             _check_metric(metric))
    if method == "auto":
        method = "dense" if source.shape[0] * source.shape[1] <= DENSE_LIMIT else "sparse"
    if method == "dense":  # the matrix is ours (validated copy or just built): solve it in place
        return _dense_alignment(source.dense(), limit, views)
    k = int(k)
    ei, ej = source.knn(k)
    while limit is None and not _has_full_matching(source.shape, ei, ej) and k < max(source.shape):
        k *= 2  # too few neighbours for every point of the smaller view to find a partner
        ei, ej = source.knn(k)
    return _sparse_solve(source, ei.astype(np.int64), ej.astype(np.int64), limit, max_rounds,
                         max(8, int(k)), True, views, "sparse")


# ------------------------------------------------------------------------------------------
# Myopic matching
# ------------------------------------------------------------------------------------------
def myopic_assignment(cost_or_points_a, points_b=None, order=None, metric: str = "euclidean",
                      cost_limit=None, views=DEFAULT_VIEWS) -> Alignment:
    r"""Online (myopic) matching of MAD (Damianou, Lawrence & Ek 2016, section 3).

    The points of view b arrive one at a time, in ``order`` (default: index order); each
    takes the nearest point of view a that is still free,

    .. math:: \sigma^{-1}(j_t) = \arg\min_{i \notin \{\sigma^{-1}(j_1..j_{t-1})\}} C_{i j_t},

    ties to the lowest index. A point of b finds no partner once a is exhausted, or (with
    ``cost_limit``) when its nearest free point costs more than the limit. Time O(n_a n_b),
    memory O(n_a) beyond the inputs (costs from points are computed column by column).

    Examples
    --------
    >>> C = [[1.0, 2.0], [3.0, 1.5]]
    >>> myopic_assignment(C).pairs.tolist()             # b0 takes a0, then b1 takes a1
    [[0, 0], [1, 1]]
    >>> myopic_assignment(C, order=[1, 0]).pairs.tolist()   # b1 takes a1 first
    [[0, 0], [1, 1]]
    """
    limit = _check_limit(cost_limit)
    if points_b is None:
        cost = _check_cost(cost_or_points_a)
        column = lambda j: cost[:, j].copy()
        n_a, n_b = cost.shape
    else:
        src = _PointCosts(check_view(cost_or_points_a, "points_a"), check_view(points_b, "points_b"),
                          _check_metric(metric))
        n_a, n_b = src.shape
        all_a = np.arange(n_a)
        column = lambda j: src.at(all_a, np.full(n_a, j))
    if order is None:
        order = np.arange(n_b)
    else:
        order = np.asarray(order, dtype=np.int64)
        if order.ndim != 1 or order.size != np.unique(order).size or (order.size and (
                order.min() < 0 or order.max() >= n_b)):
            raise ValueError(f"order must list distinct rows of view b (0..{n_b - 1})")
    free = np.ones(n_a, dtype=bool)
    rows, cols, costs = [], [], []
    for j in order:
        if not free.any():
            break
        col = column(j)  # [n_a]
        col[~free] = np.inf
        i = int(np.argmin(col))
        if not np.isfinite(col[i]) or (limit is not None and col[i] > limit):
            continue
        free[i] = False
        rows.append(i)
        cols.append(int(j))
        costs.append(col[i])
    rows, cols = np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64)
    costs = np.array(costs, dtype=np.float64)
    return _make_alignment(rows, cols, costs, (n_a, n_b), views, "myopic",
                           objective=_objective(float(costs.sum()), rows.size, (n_a, n_b), limit),
                           total_cost=float(costs.sum()), order=order.copy(), cost_limit=limit)


# ------------------------------------------------------------------------------------------
# Probabilistic matching
# ------------------------------------------------------------------------------------------
class SinkhornResult(NamedTuple):
    """Output of :func:`sinkhorn`."""

    marginals: np.ndarray  # [n_a, n_b] P(i matched to j)
    unmatched_a: np.ndarray  # [n_a] P(i unmatched) = 1 - sum_j P_ij
    unmatched_b: np.ndarray  # [n_b]
    log_potentials: tuple  # (alpha [n_a (+1)], beta [n_b (+1)]), P = exp(alpha + beta - C / T)
    n_iter: int
    error: float  # largest |log(row mass / target)| at exit (columns are exact)
    converged: bool


def _logsumexp(x, axis):
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    return (top + np.log(np.sum(np.exp(x - top), axis=axis, keepdims=True))).squeeze(axis)


def sinkhorn(cost, temperature: float = 1.0, cost_limit=None, n_iter: int = 1000, tol: float = 1e-9
             ) -> SinkhornResult:
    r"""Soft assignment by entropic optimal transport, in the log domain (Cuturi 2013).

    Solves :math:`\min_P \langle C, P\rangle - T\,H(P)` over match-marginal matrices P >= 0:

    * square, no limit: rows and columns sum to 1 (doubly stochastic);
    * rectangular, no limit: the smaller view's rows sum to 1, the larger view's to at most 1
      (the relaxation of the rectangular assignment; its dual variables are clipped at 0,
      the exact block-coordinate step for an inequality constraint);
    * with ``cost_limit = L``: SuperGlue's dustbin (Sarlin et al. 2020, section 3.2): an extra
      row and column with cost L/2 (zero where they meet) and masses n_b and n_a, so every
      point is matched or left in the dustbin with total probability 1.

    Updates alternate :math:`\alpha = \log a - \operatorname{LSE}_j(\beta_j - C_{ij}/T)` and the
    same for :math:`\beta`, with :math:`P_{ij} = \exp(\alpha_i + \beta_j - C_{ij}/T)`. Computed
    with log-sum-exp, so large costs or small temperatures underflow to 0, never NaN. As
    T -> 0 the marginals tend to the optimal assignment of :func:`linear_assignment` (with
    the same ``cost_limit``). The (n_a, n_b) marginal matrix is the output, so this is dense by
    nature: O(n_a n_b) memory and time per iteration. To use a log-kernel K instead of costs,
    pass ``cost=-K, temperature=1``.

    Parameters
    ----------
    cost : array (n_a, n_b), finite
    temperature : float > 0
        T above (the entropic regularisation, in units of cost).
    cost_limit : float, optional
        L above (dustbin).
    n_iter, tol : int, float
        Maximum iterations; tolerance on the largest relative row-marginal error
        (|log(row mass / target)|; the columns are exact after each iteration).

    Returns
    -------
    SinkhornResult
        ``marginals`` (n_a, n_b), ``unmatched_a`` / ``unmatched_b`` (dustbin or leftover
        mass), ``log_potentials``, ``n_iter``, ``error``, ``converged``. A RuntimeWarning is
        issued if not converged.

    Examples
    --------
    >>> res = sinkhorn([[0.0, 1.0], [1.0, 0.0]], temperature=1.0)
    >>> round(float(res.marginals[0, 0]), 4), res.converged   # e / (1 + e)
    (0.7311, True)
    """
    cost = _check_cost(cost, allow_inf=False)
    temperature = float(temperature)
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    limit = _check_limit(cost_limit)
    n_a, n_b = cost.shape
    log_a, log_b = np.zeros(n_a), np.zeros(n_b)
    cap_a = cap_b = False  # whether a side's constraint is "at most 1" instead of "= 1"
    if limit is not None:  # dustbin row and column: cost L/2, zero where they meet
        cost = np.block([[cost, np.full((n_a, 1), 0.5 * limit)], [np.full((1, n_b), 0.5 * limit), np.zeros((1, 1))]])
        log_a, log_b = np.r_[log_a, math.log(n_b)], np.r_[log_b, math.log(n_a)]
    else:
        cap_a, cap_b = n_a > n_b, n_b > n_a
    # epsilon scaling (Schmitzer 2019, SIAM J. Sci. Comput. 41(3)): temperatures halving from the cost
    # spread down to T, each stage warm-started from the last potentials (in cost units f = T alpha);
    # the plain iteration needs O(spread / T) sweeps at low temperature
    temperatures = [temperature]
    spread = float(cost.max() - cost.min())
    while temperatures[-1] * 2 < spread:
        temperatures.append(temperatures[-1] * 2)
    f, g = np.zeros(log_a.size), np.zeros(log_b.size)
    error, n_done = np.inf, 0
    for stage, temp in enumerate(reversed(temperatures)):
        last = stage == len(temperatures) - 1
        stage_tol = tol if last else max(tol, 1e-3)
        log_kernel = cost / -temp  # [n_a (+1), n_b (+1)]
        alpha, beta = f / temp, g / temp
        error, sweeps = np.inf, 0
        while n_done < n_iter:
            n_done += 1
            sweeps += 1
            new_alpha = log_a - _logsumexp(log_kernel + beta[None, :], axis=1)
            if cap_a:
                np.minimum(new_alpha, log_a, out=new_alpha)
            # the columns met their constraints before this row update; its size measures how
            # far the rows were from theirs (|log row mass / a_i| where the constraint is "= a_i")
            error = float(np.max(np.abs(new_alpha - alpha)))
            alpha = new_alpha
            beta = log_b - _logsumexp(log_kernel + alpha[:, None], axis=0)
            if cap_b:
                np.minimum(beta, log_b, out=beta)
            if error <= stage_tol and sweeps > 1:  # the first sweep of a stage compares stale potentials
                break
        f, g = temp * alpha, temp * beta
    converged = error <= tol
    if not converged:
        warnings.warn(f"sinkhorn did not converge in {n_iter} iterations (log-marginal error {error:.2e}); "
                      "raise n_iter or the temperature", RuntimeWarning, stacklevel=2)
    plan = np.exp(log_kernel + alpha[:, None] + beta[None, :])
    marginals = plan[:n_a, :n_b]
    return SinkhornResult(marginals, np.clip(1.0 - marginals.sum(1), 0.0, 1.0),
                          np.clip(1.0 - marginals.sum(0), 0.0, 1.0), (alpha, beta), n_done, error, converged)


def _segment_logsumexp(values, segments, n_segments):
    """log sum exp of ``values`` per segment id (every segment non-empty): [n_segments]."""
    top = np.full(n_segments, -np.inf)
    np.maximum.at(top, segments, values)
    total = np.zeros(n_segments)
    np.add.at(total, segments, np.exp(values - top[segments]))
    return top + np.log(total)


def sparse_sinkhorn(ei, ej, cost, temperature, shape, cost_limit=None, tol: float = 1e-3, n_iter: int = 5000):
    """Log-domain Sinkhorn on the candidate pairs only: (csr marginals [n_a, n_b], marginal error).

    The sparse counterpart of :func:`sinkhorn` for candidate pairs (e.g. k nearest neighbours):
    the same problem, conventions and epsilon scaling (Schmitzer 2019: temperatures halving
    from the cost spread down to T, warm-started), with exp(-C/T) set to 0 outside the
    candidate pairs: rows / columns sum to 1; the larger side of a rectangular problem to at
    most 1; with ``cost_limit`` L a dustbin row and column at cost L/2 with masses n_b and n_a.
    Memory and time per sweep O(edges). Stops at ``tol`` (largest |log row mass / target|) or
    after ``n_iter`` sweeps in all; rows / columns above 1 are then scaled down, as in the
    dense path.
    """
    n_a, n_b = shape
    cost = np.asarray(cost, np.float64)  # [E]
    ei, ej = np.asarray(ei, np.int64), np.asarray(ej, np.int64)
    log_a, log_b = np.zeros(n_a), np.zeros(n_b)
    cap_a = cap_b = False
    if cost_limit is not None:  # dustbin: row n_a and column n_b
        ei = np.concatenate([ei, np.arange(n_a), np.full(n_b, n_a), [n_a]])
        ej = np.concatenate([ej, np.full(n_a, n_b), np.arange(n_b), [n_b]])
        cost = np.concatenate([cost, np.full(n_a + n_b, 0.5 * float(cost_limit)), [0.0]])
        log_a, log_b = np.r_[log_a, np.log(n_b)], np.r_[log_b, np.log(n_a)]
    else:
        cap_a, cap_b = n_a > n_b, n_b > n_a
    rows, cols = log_a.size, log_b.size
    temperatures = [float(temperature)]
    spread = float(cost.max() - cost.min())
    while temperatures[-1] * 2 < spread:
        temperatures.append(temperatures[-1] * 2)
    f, g = np.zeros(rows), np.zeros(cols)  # potentials in cost units
    error, done = np.inf, 0
    for stage, temp in enumerate(reversed(temperatures)):
        stage_tol = tol if stage == len(temperatures) - 1 else max(tol, 1e-2)
        logk = cost / -temp  # [E]
        alpha, beta = f / temp, g / temp
        sweeps = 0
        while done < n_iter:
            done += 1
            sweeps += 1
            new_alpha = log_a - _segment_logsumexp(logk + beta[ej], ei, rows)
            if cap_a:
                np.minimum(new_alpha, log_a, out=new_alpha)
            error = float(np.max(np.abs(new_alpha - alpha)))
            alpha = new_alpha
            beta = log_b - _segment_logsumexp(logk + alpha[ei], ej, cols)
            if cap_b:
                np.minimum(beta, log_b, out=beta)
            if error <= stage_tol and sweeps > 1:
                break
        f, g = temp * alpha, temp * beta
    plan = np.exp(logk + alpha[ei] + beta[ej])  # [E]
    keep = (ei < n_a) & (ej < n_b)
    P = sp.csr_matrix((plan[keep], (ei[keep], ej[keep])), shape=(n_a, n_b))
    row_sum = np.asarray(P.sum(1)).ravel()
    P = sp.diags(1.0 / np.maximum(row_sum, 1.0)) @ P
    col_sum = np.asarray(P.sum(0)).ravel()
    P = sp.csr_matrix(P @ sp.diags(1.0 / np.maximum(col_sum, 1.0)))
    return P, error


def sinkhorn_marginals(C, temperature, cost_limit=None, tol: float = 1e-3, n_iter: int = 5000):
    """Sinkhorn match marginals of exp(-C / T) (dustbin with ``cost_limit``) and the marginal error.

    Near-hard problems (tiny posterior variances, hence costs spanning thousands of units)
    make Sinkhorn converge sublinearly: on the toy data (90 x 90) the marginal error is
    6e-3 after 200 iterations, 1e-3 after 1000 and still 4e-5 after 20000. Probabilities do
    not need more than about 1e-2, so iterations stop at ``tol`` or after ``n_iter``; the
    remaining error is returned (``info["sinkhorn_error"]``) instead of warned about, and any
    row or column that still sums above 1 (by at most that error) is scaled down to 1, so the
    result is always a sub-stochastic matrix.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="sinkhorn did not converge")
        soft = sinkhorn(C, temperature=temperature, cost_limit=cost_limit, n_iter=n_iter, tol=tol)
    P = soft.marginals  # [n_a, n_b]
    P = P / np.maximum(P.sum(1, keepdims=True), 1.0)
    P = P / np.maximum(P.sum(0, keepdims=True), 1.0)
    return P, float(soft.error)


class PerturbAndMapResult(NamedTuple):
    """Output of :func:`perturb_and_map`."""

    frequencies: sp.csr_matrix  # [n_a, n_b] fraction of samples that matched i to j
    permutations: np.ndarray  # [S, n_a] column matched to each row per sample, -1 if none
    unmatched_a: np.ndarray  # [n_a] fraction of samples leaving i unmatched
    unmatched_b: np.ndarray  # [n_b]


def perturb_and_map(cost, n_samples: int = 100, temperature: float = 1.0, cost_limit=None, seed=0
                    ) -> PerturbAndMapResult:
    r"""Random assignments by perturb-and-MAP (Papandreou & Yuille 2011).

    Each sample solves the assignment of Gumbel-perturbed costs,

    .. math:: \sigma^{(s)} = \arg\min_\sigma \sum_i \bigl(C_{i\sigma(i)} - T\,G^{(s)}_{i\sigma(i)}\bigr),
              \qquad G^{(s)}_{ij} \sim \text{Gumbel}(0, 1) \text{ i.i.d.},

    with :func:`linear_assignment` (the ``cost_limit`` penalty is not perturbed). Independent
    noise on every pair does not give exactly the Gibbs distribution
    :math:`p(\sigma) \propto \exp(-\sum_i C_{i\sigma(i)}/T)` (that would need one Gumbel per
    permutation); it is the cheap low-order perturbation of the paper. Returns the empirical
    pair frequencies, an estimate of the match marginals. Cost: S dense solves (about 0.1 s
    each at N = 1000) and a dense (n_a, n_b) noise buffer.

    Examples
    --------
    >>> res = perturb_and_map([[0.0, 5.0], [5.0, 0.0]], n_samples=50, temperature=0.5, seed=0)
    >>> res.frequencies.toarray().tolist(), res.permutations.shape
    ([[1.0, 0.0], [0.0, 1.0]], (50, 2))
    """
    cost = _check_cost(cost)
    limit = _check_limit(cost_limit)
    temperature = float(temperature)
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    n_samples = int(n_samples)
    if n_samples < 1:
        raise ValueError(f"n_samples must be positive, got {n_samples}")
    rng = as_rng(seed)
    n_a, n_b = cost.shape
    permutations = np.full((n_samples, n_a), -1, dtype=np.int64)
    perturbed = np.empty_like(cost)  # [n_a, n_b], reused
    for s in range(n_samples):
        # G = -log E with E ~ Exp(1) is Gumbel(0, 1): one log per entry, no temporaries
        rng.standard_exponential(out=perturbed)
        np.log(perturbed, out=perturbed)  # = -G
        perturbed *= temperature
        perturbed += cost  # C - T G
        rows, cols = _solve_dense(perturbed, limit)
        permutations[s, rows] = cols
    hit = permutations >= 0
    rows = np.broadcast_to(np.arange(n_a), permutations.shape)[hit]
    counts = sp.csr_matrix((np.ones(rows.size), (rows, permutations[hit])), shape=(n_a, n_b))
    counts.sum_duplicates()
    frequencies = counts / n_samples
    return PerturbAndMapResult(sp.csr_matrix(frequencies), permutations, 1.0 - hit.mean(0),
                               1.0 - np.asarray(frequencies.sum(0)).ravel())


def marginal_assignment(marginals, cost=None, min_probability: float = 0.0, views=DEFAULT_VIEWS) -> Alignment:
    r"""The one-to-one matching that maximises the expected number of correct pairs.

    Given match marginals :math:`P_{ij}` (from :func:`sinkhorn` or :func:`perturb_and_map`),
    the expected number of correct pairs of a matching M is :math:`\sum_{(i,j)\in M} P_{ij}`
    (linearity of expectation), so the minimum-Bayes-risk matching under a per-pair 0-1 loss
    solves

    .. math:: \max_{M \text{ partial matching}} \sum_{(i,j) \in M} \bigl(P_{ij} - p_0\bigr),

    an assignment with ``cost_limit`` (:func:`linear_assignment` on :math:`-P` with limit
    :math:`-p_0`): a pair is made only if its probability exceeds ``min_probability`` = p_0
    (a larger p_0 trades recall for precision). Sparse marginals are solved on their
    non-zeros (a pair with P = 0 can never gain), so no dense matrix is formed.

    Returns an Alignment whose ``probabilities`` are the chosen :math:`P_{ij}` and whose
    ``costs`` are ``cost[i, j]`` if ``cost`` is given, else :math:`1 - P_{ij}`.

    Examples
    --------
    >>> P = [[0.7, 0.3, 0.0], [0.3, 0.6, 0.1], [0.0, 0.1, 0.9]]
    >>> al = marginal_assignment(P)
    >>> al.to_permutation().tolist(), al.probabilities.tolist()
    ([0, 1, 2], [0.7, 0.6, 0.9])
    """
    p0 = float(min_probability)
    if not 0.0 <= p0 < 1.0:
        raise ValueError(f"min_probability must be in [0, 1), got {min_probability}")
    if sp.issparse(marginals):
        coo = sp.coo_matrix(marginals)
        coo.sum_duplicates()
        keep = coo.data > p0
        P = sp.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=coo.shape)
        if (P.data > 1 + 1e-9).any() or (coo.data < 0).any():
            raise ValueError("marginals must lie in [0, 1]")
        shape = P.shape
        if P.nnz:
            al = sparse_assignment(-P, cost_limit=-p0, views=views)
            rows, cols = al.index_a, al.index_b
        else:
            rows = cols = np.zeros(0, np.int64)
        probs = np.asarray(P[rows, cols]).ravel() if rows.size else np.zeros(0)
    else:
        P = _check_cost(marginals, "marginals", allow_inf=False)
        if (P < 0).any() or (P > 1 + 1e-9).any():
            raise ValueError("marginals must lie in [0, 1]")
        shape = P.shape
        rows, cols = _solve_dense(-P, -p0)
        probs = P[rows, cols]
    probs = np.clip(probs, 0.0, 1.0)
    if cost is not None:
        cost = _check_cost(cost)
        if cost.shape != shape:
            raise ValueError(f"cost has shape {cost.shape}, the marginals {shape}")
        pair_costs = cost[rows, cols]
    else:
        pair_costs = 1.0 - probs
    return _make_alignment(rows, cols, pair_costs, shape, views, "marginal", probabilities=probs,
                           expected_correct=float(probs.sum()), min_probability=p0)
