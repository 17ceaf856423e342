"""The parts of MAD's path whose cost must grow linearly with the rows: the graph prior's log-determinant and the
spectral start's eigensolver on large neighbourhood graphs."""

import numpy as np
import pytest
import scipy.sparse as sp

from bayesalign.gp import priors
from bayesalign.graph import knn_graph, laplacian, spectrum


def _precision(n, strength=10.0, seed=0):
    """P = I + strength L of a symmetric 10-NN connectivity graph of n points in 5 dimensions."""
    X = np.random.default_rng(seed).standard_normal((n, 5))
    W = knn_graph(X, 10, mode="connectivity")
    return (sp.identity(n, format="csr") + strength * laplacian(W)[0]).tocsr()


def test_log_det_exact_path_equals_dense_slogdet():
    P = _precision(300)
    sign, reference = np.linalg.slogdet(P.toarray())
    assert sign > 0
    # both exact; they differ by the round-off of two factorisations of a matrix with entries up to ~200
    assert priors.log_det_spd(P) == pytest.approx(reference, rel=1e-10)


def test_log_det_lanczos_estimate_agrees_with_the_exact_value(monkeypatch):
    P = _precision(1500)
    exact = priors.log_det_spd(P)
    monkeypatch.setattr(priors, "EXACT_LOG_DET_MAX", 0)  # the stochastic Lanczos quadrature on the same P
    estimate = priors.log_det_spd(P)
    # the Jacobi-scaled spectrum lies near 1: 64 Rademacher probes leave a relative standard error of a few 1e-4
    assert estimate == pytest.approx(exact, rel=3e-3)
    assert priors.log_det_spd(P, seed=0) == estimate  # the probes come from the seed: the same P, the same value


def test_graph_prior_uses_the_estimate_above_the_exact_limit(monkeypatch):
    P = _precision(400)
    L = (P - sp.identity(400)) / 10.0
    exact = priors.GraphLaplacianPrior(L, strength=10.0).log_det_precision
    monkeypatch.setattr(priors, "EXACT_LOG_DET_MAX", 100)
    estimated = priors.GraphLaplacianPrior(L, strength=10.0).log_det_precision
    assert estimated != exact  # the other path ran
    assert estimated == pytest.approx(exact, rel=3e-3)  # as above


def test_spd_lu_solves_and_has_the_log_pivots_of_the_determinant():
    P = _precision(500)
    lu = spectrum.spd_lu(P)
    b = np.random.default_rng(1).standard_normal(500)
    # a solve of a matrix with condition number ~1e3: residual at round-off times that
    assert np.linalg.norm(P @ lu.solve(b) - b) <= 1e-9 * np.linalg.norm(b)
    assert np.log(lu.U.diagonal()).sum() == pytest.approx(np.linalg.slogdet(P.toarray())[1], rel=1e-10)


def test_amg_eigensolver_matches_the_dense_one():
    pytest.importorskip("pyamg")
    X = np.random.default_rng(2).standard_normal((600, 3))
    L, D = laplacian(knn_graph(X, 10, mode="connectivity"))
    dense_values, dense_F = spectrum.smallest_generalized_eigenvectors(L, D, 4, method="dense")
    values, F = spectrum.smallest_generalized_eigenvectors(L, D, 4, method="amg")
    # LOBPCG stops at tol 1e-8 on the residual: eigenvalues agree to about its square, subspaces to about tol
    np.testing.assert_allclose(values, dense_values, rtol=1e-6, atol=1e-9)
    overlap = np.linalg.svd(dense_F.T @ D @ F, compute_uv=False)  # cosines of the principal angles (F' D F = I)
    np.testing.assert_allclose(overlap, 1.0, atol=1e-5)


def test_auto_picks_amg_above_its_limit(monkeypatch):
    pytest.importorskip("pyamg")
    X = np.random.default_rng(3).standard_normal((300, 3))
    L, D = laplacian(knn_graph(X, 8, mode="connectivity"))
    called = []
    original = spectrum.spla.lobpcg
    monkeypatch.setattr(spectrum.spla, "lobpcg", lambda *a, **k: called.append(1) or original(*a, **k))
    monkeypatch.setattr(spectrum, "DENSE_EIGEN_LIMIT", 100)
    monkeypatch.setattr(spectrum, "AMG_ABOVE", 200)
    values, _ = spectrum.smallest_generalized_eigenvectors(L, D, 3)
    assert called
    reference, _ = spectrum.smallest_generalized_eigenvectors(L, D, 3, method="dense")
    np.testing.assert_allclose(values, reference, rtol=1e-6, atol=1e-9)  # LOBPCG's tolerance, as above


def test_sparse_sinkhorn_completion_stops_at_the_candidate_cap(monkeypatch):
    # at a temperature far above the costs' spread the marginals are near uniform: every left-out pair carries
    # mass and would join (an n_a x n_b support). Under the cap each row gains only its heaviest pairs, the support
    # stays below it, and the returned error says how much mass the left-out pairs still hold
    from bayesalign.matching import entropic
    from bayesalign.matching.costs import knn_edges
    from bayesalign.matching.given_costs import _MatrixCosts

    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(120, 2)), rng.normal(size=(120, 2))
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    ei, ej = knn_edges(a, b, 3)
    full, err_full = entropic.sparse_sinkhorn(ei, ej, cost[ei, ej], 100.0, cost.shape, costs=_MatrixCosts(cost))
    assert full.nnz > 0.9 * cost.size and err_full <= 1e-3  # uncapped: (nearly) every pair joined
    cap = 20 * 120
    monkeypatch.setattr(entropic, "MAX_CANDIDATE_PAIRS", cap)
    info = {}
    capped, err = entropic.sparse_sinkhorn(ei, ej, cost[ei, ej], 100.0, cost.shape, costs=_MatrixCosts(cost),
                                           info=info)
    assert info["edges"][0].size <= cap and capped.nnz <= cap
    # 20 of 120 near-equal pairs per row: most of each row's mass is left out, and the error reports it
    assert err > 0.5
