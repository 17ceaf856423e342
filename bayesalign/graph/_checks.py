"""Input checks shared by the graph builders: distance graphs, square symmetric matrices, duplicate points."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

# Relative size of the stand-in for a zero distance (duplicate points), see the package docstring.
_ZERO_DISTANCE = 1e-10


def _floor_zero_distances(dist: np.ndarray) -> np.ndarray:
    """Replace zero distances (duplicate points) by a tiny positive value (package docstring)."""
    positive = dist[dist > 0]
    floor = _ZERO_DISTANCE * (float(np.median(positive)) if positive.size else 1.0)
    return np.maximum(dist, floor)


def _check_mode(mode):
    if mode not in ("distance", "connectivity"):
        raise ValueError(f"mode must be 'distance' or 'connectivity', got {mode!r}")


def _check_distance_graph(G) -> sp.csr_matrix:
    """A float64 CSR copy of a square distance graph with non-negative edges, else a ValueError."""
    G = sp.csr_matrix(G, dtype=np.float64, copy=True)
    if G.shape[0] != G.shape[1]:
        raise ValueError(f"expected a square distance graph, got shape {G.shape}")
    if G.nnz and (G.data < 0).any():
        raise ValueError("expected non-negative distances")
    return G


def _check_square_symmetric(W, what: str) -> sp.csr_matrix:
    if not sp.issparse(W):
        W = np.asarray(W, dtype=np.float64)
        if W.ndim != 2:
            raise ValueError(f"{what} must be a 2-D matrix, got shape {W.shape}")
    W = sp.csr_matrix(W, dtype=np.float64)
    if W.shape[0] != W.shape[1]:
        raise ValueError(f"{what} must be square, got shape {W.shape}")
    if W.nnz and not np.all(np.isfinite(W.data)):
        raise ValueError(f"{what} has non-finite entries")
    asym = abs(W - W.T)
    if asym.nnz and asym.max() > 1e-10 * max(1.0, abs(W).max()):
        raise ValueError(f"{what} must be symmetric (max |W - W'| = {asym.max():.3g})")
    return W
