"""Myopic (online) one-to-one matching: the points of one view arrive one by one and take the nearest free point."""

from __future__ import annotations

import numpy as np

from ..data import Alignment, check_view
from ..data.views import _index_array
from .assignment import DEFAULT_VIEWS, _make_alignment, _objective
from .costs import _check_cost, _check_limit, _check_metric, _PointCosts

__all__ = ["myopic_assignment"]


def myopic_assignment(cost_or_points_a, points_b=None, order=None, metric: str = "euclidean",
                      cost_limit=None, views=DEFAULT_VIEWS) -> Alignment:
    r"""Online (myopic) matching of MAD (Damianou, Lawrence & Ek 2016, section 3).

    The points of view b arrive one at a time, in ``order`` (default: index order); each
    takes the nearest point of view a that is still free,

    .. math:: \sigma^{-1}(j_t) = \arg\min_{i \notin \{\sigma^{-1}(j_1..j_{t-1})\}} C_{i j_t},

    ties to the lowest index. A point of b finds no partner once a is exhausted, or (with
    ``cost_limit``) when its nearest free point costs the limit or more (leaving both unmatched costs as
    much, and :func:`linear_assignment` drops such a pair too). Time O(n_a n_b),
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
        order = _index_array(order, "order")
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
        if not np.isfinite(col[i]) or (limit is not None and col[i] >= limit):
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
