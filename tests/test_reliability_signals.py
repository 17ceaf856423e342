"""Warnings, interrupts and resources that a run must not leak: numeric overflow in the sparse Sinkhorn."""

import warnings

import numpy as np
import pytest

from bayesalign.matching import matcher, mean_distance_cost, sinkhorn


def _packed_beside_spread(seed: int, n: int = 100):
    """Half of a's rows packed near the origin beside b's spread rows: many of b's rows are in few rows' nearest
    neighbours, so the potentials of the candidates-only solve give left-out pairs masses far above 1."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, 3)) * np.r_[np.ones(n // 2), np.full(n - n // 2, 0.05)][:, None]
    return a, rng.standard_normal((n, 3))


@pytest.mark.parametrize("seed", [0, 1])
def test_sparse_sinkhorn_completion_overflows_nothing_and_matches_the_dense_marginals(monkeypatch, seed):
    # the candidate path that sinkhorn_probabilities takes above DENSE_SINKHORN_MAX pairs, on a small problem
    monkeypatch.setattr(matcher, "DENSE_SINKHORN_MAX", 0)
    a, b = _packed_beside_spread(seed)
    T = 0.1
    C = mean_distance_cost(a, b)
    info = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        P = matcher.sinkhorn_probabilities(C, T, None, a, b, info=info)
    assert info["sinkhorn_error"] <= 1e-3
    dense = sinkhorn(C, temperature=T, tol=1e-3, n_iter=20_000).marginals
    # 5e-3: both solves stop at a column error of 1e-3 (the sparse one with at most 1e-3 of mass left out per
    # row), which moves a marginal by a few times that
    np.testing.assert_allclose(P, dense, atol=5e-3)
