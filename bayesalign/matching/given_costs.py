"""Costs the caller gives, a dense matrix or a candidate graph, as cost sources of the certified sparse solver.

The same interface as the point-set source of :mod:`bayesalign.matching.costs` (``shape``, ``T``,
``at``; a dense matrix also ``block``, ``knn``, ``suspects``, ``dense``), so the solver needs no
case of its own for either.
"""

from __future__ import annotations

import numpy as np

from .costs import _BLOCK_ENTRIES, _block_suspects


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
