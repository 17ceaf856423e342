"""Optimal one-to-one assignment: dense (Hungarian) and certified sparse.

The unmatched penalty is the same everywhere: with ``cost_limit = L``, leaving one point of
either view unmatched costs ``L / 2``, so a pair costlier than ``L`` is never worth making.
The certified sparse solver (LP-duality certificate, column generation on a kNN candidate
graph) is our own: no library certifies a sparse assignment against the full problem.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_bipartite_matching, min_weight_full_bipartite_matching

from ..data import Alignment, check_view
from .costs import _check_cost, _check_limit, _check_metric, _PointCosts
from .given_costs import _GraphCosts, _MatrixCosts

__all__ = ["assign", "linear_assignment", "sparse_assignment"]

DEFAULT_VIEWS = ("view0", "view1")
# Dense problems up to this many entries (8 bytes each: 200 MB) are solved densely by ``assign``.
DENSE_LIMIT = 25_000_000


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
    from scipy.optimize import linear_sum_assignment  # on first use: scipy.optimize is slow to import

    if limit is not None:
        np.minimum(cost, limit, out=cost)  # clipped costs: equivalent to dummy rows/cols (see below)
    try:
        rows, cols = linear_sum_assignment(cost)
    except ValueError as error:  # scipy says only "infeasible": name a point of the smaller view left no pair
        forbidden = np.isinf(cost)
        empty = [f"row {i}" for i in np.flatnonzero(forbidden.all(1))] if cost.shape[0] <= cost.shape[1] else []
        empty += [f"column {j}" for j in np.flatnonzero(forbidden.all(0))] if cost.shape[1] <= cost.shape[0] else []
        raise ValueError("cost: the forbidden (+inf) pairs leave no assignment of every point of the smaller view"
                         + (f" ({empty[0]} has no allowed pair)" if empty else "")
                         + "; a cost_limit lets points stay unmatched") from error
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


def with_full_matching(source, ei, ej) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs (ei, ej) with pairs added where needed so that they match every row of the smaller side.

    A maximum matching of the candidate graph (Hopcroft-Karp, scipy's ``maximum_bipartite_matching``); each
    row of the smaller side it leaves unmatched then takes, in turn, the cheapest pair under ``source`` (a
    cost source with ``at``) to a row of the other side that neither the matching nor an earlier added pair
    holds. The result admits a full matching; the added pairs are real pairs with their own costs, and a
    solver that must reach the optimum still adds what it needs (the certified sparse assignment). Memory:
    one row of costs over the free rows of the other side at a time. Returned sorted by ``ei * n_b + ej``.
    """
    n_a, n_b = source.shape
    graph = sp.csr_matrix((np.ones(ei.size), (ei, ej)), shape=(n_a, n_b))
    rows_side = n_a <= n_b  # the smaller side's rows are source's rows
    partner = maximum_bipartite_matching(graph, perm_type="column" if rows_side else "row")  # -1: unmatched
    free = np.flatnonzero(partner < 0)
    if free.size == 0:
        return ei, ej
    taken = np.zeros(n_b if rows_side else n_a, dtype=bool)
    taken[partner[partner >= 0]] = True
    added = np.empty(free.size, dtype=np.int64)
    for t, i in enumerate(free):
        other = np.flatnonzero(~taken)
        mine = np.full(other.size, i)
        costs = source.at(mine, other) if rows_side else source.at(other, mine)
        added[t] = other[int(np.argmin(costs))]
        taken[added[t]] = True
    add_i, add_j = (free, added) if rows_side else (added, free)
    keys = np.unique(np.r_[ei * n_b + ej, add_i * n_b + add_j])
    return keys // n_b, keys % n_b


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
    if limit is not None:  # a pair at the limit costs as much as leaving both unmatched: dropped, as in _solve_dense
        keep = pair_costs < limit
        rows, cols, pair_costs = rows[keep], cols[keep], pair_costs[keep]
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
    ``n_candidates``. Up to floating point: reduced costs down to -1e-9 (1 + max ``|C|``) pass.

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
    to ``DENSE_LIMIT`` (25 million) entries. Both give the same optimum. Without ``cost_limit``, the
    neighbour graph is completed to one with a matching of the whole smaller view (:func:`with_full_matching`).

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
    if limit is None:  # every point of the smaller view needs a partner among the candidates
        ei, ej = with_full_matching(source, ei, ej)
    return _sparse_solve(source, ei.astype(np.int64), ej.astype(np.int64), limit, max_rounds,
                         max(8, int(k)), True, views, "sparse")

