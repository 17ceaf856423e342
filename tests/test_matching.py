"""Tests of bayesalign.matching: optimal values against brute force, certified sparse solutions,
myopic matching by hand, Sinkhorn marginals, perturb-and-MAP against a closed form."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.integrate import quad
from scipy.special import expit

from bayesalign import matching as m
from bayesalign.data import Alignment
from bayesalign.matching import costs as costs_module
from bayesalign.matching.assignment import _dual_potentials, _solve_graph
from bayesalign.matching.costs import _PointCosts


# ----------------------------------------------------------------------------------------
# Brute force references
# ----------------------------------------------------------------------------------------
def brute_full(C):
    """Minimum over injective maps from the smaller side into the larger."""
    n_a, n_b = C.shape
    if n_a <= n_b:
        return min(C[np.arange(n_a), list(p)].sum() for p in itertools.permutations(range(n_b), n_a))
    return brute_full(C.T)


def brute_limited(C, L):
    """Minimum over partial matchings of sum of pair costs + L/2 per unmatched point."""
    n_a, n_b = C.shape
    best = np.inf
    for size in range(min(n_a, n_b) + 1):
        for rows in itertools.combinations(range(n_a), size):
            for cols in itertools.permutations(range(n_b), size):
                value = C[list(rows), list(cols)].sum() + 0.5 * L * (n_a + n_b - 2 * size)
                best = min(best, value)
    return best


def objective_of(al: Alignment, C, L=None):
    value = C[al.index_a, al.index_b].sum()
    if L is not None:
        value += 0.5 * L * (C.shape[0] + C.shape[1] - 2 * len(al))
    return value


def is_matching(al: Alignment):
    return np.unique(al.index_a).size == len(al) and np.unique(al.index_b).size == len(al)


# ----------------------------------------------------------------------------------------
# Dense assignment
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1, 1), (3, 3), (5, 5), (7, 7), (3, 6), (6, 4), (2, 7)])
def test_linear_assignment_equals_brute_force(shape):
    rng = np.random.default_rng(sum(shape))
    for _ in range(3):
        C = rng.exponential(size=shape)
        al = m.linear_assignment(C)
        assert is_matching(al) and len(al) == min(shape)
        assert al.info["objective"] == pytest.approx(brute_full(C), rel=1e-12)
        assert al.info["objective"] == pytest.approx(objective_of(al, C), rel=1e-12)
        np.testing.assert_allclose(al.costs, C[al.index_a, al.index_b])


@pytest.mark.parametrize("shape", [(3, 3), (4, 5), (5, 3), (5, 5), (1, 4)])
def test_cost_limited_assignment_equals_brute_force_over_partial_matchings(shape):
    rng = np.random.default_rng(10 + sum(shape))
    for _ in range(4):
        C = rng.exponential(size=shape)
        L = rng.uniform(0.3, 2.5)
        al = m.linear_assignment(C, cost_limit=L)
        assert is_matching(al)
        assert np.all(al.costs < L)
        assert al.info["objective"] == pytest.approx(brute_limited(C, L), rel=1e-12)
        assert al.info["objective"] == pytest.approx(objective_of(al, C, L), rel=1e-12)


def test_cost_limit_is_not_post_filtering():
    # The full assignment is the anti-diagonal (3 + 3 = 6 < 1 + 10), both pairs under the limit,
    # so post-filtering keeps it (objective 6); leaving a1, b1 unmatched costs 1 + 4/2 + 4/2 = 5.
    C = np.array([[1.0, 3.0], [3.0, 10.0]])
    al = m.linear_assignment(C, cost_limit=4.0)
    assert al.pairs.tolist() == [[0, 0]]
    assert al.info["objective"] == 5.0
    assert al.unmatched_a.tolist() == [1] and al.unmatched_b.tolist() == [1]


def test_maximize_and_forbidden_pairs():
    S = np.array([[1.0, 5.0, 2.0], [4.0, 1.0, 1.0], [2.0, 2.0, 6.0]])
    al = m.linear_assignment(S, maximize=True, views=("x", "y"))
    assert al.to_permutation().tolist() == [1, 0, 2] and al.info["objective"] == 15.0
    assert al.views == ("x", "y")
    C = np.array([[np.inf, 1.0], [1.0, 5.0]])
    assert m.linear_assignment(C).to_permutation().tolist() == [1, 0]


def test_bad_costs_raise():
    with pytest.raises(ValueError, match="row 0, column 1"):
        m.linear_assignment([[1.0, np.nan]])
    with pytest.raises(ValueError, match="2-D"):
        m.linear_assignment([1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        m.sinkhorn([[1.0, np.inf]])
    C = np.ones((2, 2))
    before = C.copy()
    m.linear_assignment(C, cost_limit=0.5)
    np.testing.assert_array_equal(C, before)  # never mutates the caller's array


# ----------------------------------------------------------------------------------------
# Sparse assignment with certificate
# ----------------------------------------------------------------------------------------
def noisy_permutation(n_a, n_b, d, noise, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(n_a, d))
    B = rng.normal(size=(n_b, d))
    common = min(n_a, n_b)
    B[:common] = A[rng.permutation(n_a)[:common]] + noise * rng.normal(size=(common, d))
    return A, B[rng.permutation(n_b)]


@pytest.mark.parametrize("certificate", ["block scan", "ball queries"])
@pytest.mark.parametrize("metric", ["euclidean", "sqeuclidean"])
@pytest.mark.parametrize("shape", [(300, 300), (250, 320), (320, 250)])
def test_sparse_equals_dense_on_point_sets(metric, shape, certificate, monkeypatch):
    A, B = noisy_permutation(*shape, d=3, noise=0.3, seed=shape[0] + shape[1])
    dense = m.assign(A, B, method="dense", metric=metric)
    if certificate == "ball queries":  # blocks so small that the KD-tree path is taken
        monkeypatch.setattr(costs_module, "_BLOCK_ENTRIES", 1 << 13)
        monkeypatch.setattr(costs_module, "_block_suspects", lambda *args: pytest.fail("used the block scan"))
    sparse = m.assign(A, B, method="sparse", k=3, metric=metric)
    assert sparse.info["certified"] and not sparse.info["fallback"]
    assert is_matching(sparse) and len(sparse) == min(shape)
    assert sparse.info["objective"] == pytest.approx(dense.info["objective"], rel=1e-10)
    assert sparse.info["objective"] == pytest.approx(
        objective_of(sparse, m.pairwise_costs(A, B, metric)), rel=1e-10)


def test_sparse_with_cost_limit_equals_dense():
    A, B = noisy_permutation(200, 240, d=2, noise=0.4, seed=3)
    C = m.pairwise_costs(A, B)
    for L in (0.2, 0.6, 2.0):
        dense = m.linear_assignment(C, cost_limit=L)
        sparse = m.assign(A, B, method="sparse", k=3, cost_limit=L)
        assert sparse.info["certified"] and is_matching(sparse)
        assert sparse.info["objective"] == pytest.approx(dense.info["objective"], rel=1e-10)
        assert sparse.info["objective"] == pytest.approx(objective_of(sparse, C, L), rel=1e-10)
        assert np.all(sparse.costs <= L)


def test_sparse_small_random_problems_equal_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(15):
        shape = tuple(rng.integers(1, 6, size=2))
        C = rng.exponential(size=shape)
        L = rng.uniform(0.3, 2.5)
        mask = sp.csr_matrix(rng.random(shape) < 0.3)
        assert m.sparse_assignment(mask, cost=C).info["objective"] == pytest.approx(brute_full(C))
        assert m.sparse_assignment(mask, cost=C, cost_limit=L).info["objective"] == pytest.approx(
            brute_limited(C, L))


def test_sparse_on_a_cost_matrix_with_forbidden_pairs():
    rng = np.random.default_rng(17)
    for _ in range(5):
        C = rng.exponential(size=(12, 15))
        C[rng.random(C.shape) < 0.4] = np.inf
        C[np.arange(12), rng.permutation(15)[:12]] = rng.exponential(size=12)  # keep it feasible
        dense = m.linear_assignment(C)
        sparse = m.assign(C, method="sparse", k=2)
        assert sparse.info["certified"] and np.all(np.isfinite(sparse.costs))
        assert sparse.info["objective"] == pytest.approx(dense.info["objective"], rel=1e-12)


def test_sparse_recovers_optimum_outside_the_nearest_neighbours():
    # Three points of a sit in a cluster with two points of b; b also has points at 6 and 20
    # and a has one at 10. The nearest-neighbour graph (k=1) links the cluster only to the
    # cluster, yet the optimum sends one cluster point of a to b=6 (cost ~36) so that a=10 can
    # take b=20 (100): 136 against 16 + 400 the other way.
    A = np.array([[0.0], [0.01], [0.02], [10.0]])
    B = np.array([[0.005], [0.015], [6.0], [20.0]])
    C = m.pairwise_costs(A, B, "sqeuclidean")
    ei, ej = _PointCosts(A, B, "sqeuclidean").knn(1)
    dense = m.linear_assignment(C)
    optimum_pairs = {tuple(p) for p in dense.pairs}
    assert not optimum_pairs <= set(zip(ei.tolist(), ej.tolist()))  # the optimum is not among the candidates
    sparse = m.sparse_assignment(sp.csr_matrix((np.ones(ei.size), (ei, ej)), shape=C.shape),
                                 points=(A, B), metric="sqeuclidean")
    assert sparse.info["certified"] and sparse.info["rounds"] > 1
    assert sparse.info["objective"] == pytest.approx(dense.info["objective"], rel=1e-12)
    assert {tuple(p) for p in sparse.pairs} == optimum_pairs


@pytest.mark.parametrize("shape", [(30, 30), (20, 35), (35, 20)])
def test_candidates_completed_to_a_full_matching_add_only_what_the_maximum_matching_lacks(shape):
    # Every point's 1-NN in a tight cluster of the other view: the graph matches few rows. The completion keeps
    # every candidate, adds exactly (smaller side - maximum matching) pairs, each from a free row of the smaller
    # side to a distinct free row of the other, and the result matches the whole smaller side (Hopcroft-Karp).
    from scipy.sparse.csgraph import maximum_bipartite_matching

    from bayesalign.matching.assignment import with_full_matching

    rng = np.random.default_rng(0)
    A = rng.normal(size=(shape[0], 2))
    B = np.r_[rng.normal(size=(3, 2)) * 0.01, rng.normal(size=(shape[1] - 3, 2)) + 8.0]  # 3 near a, the rest far
    source = _PointCosts(A, B, "sqeuclidean")
    ei, ej = source.knn(1)

    def matched(i, j):
        return int((maximum_bipartite_matching(sp.csr_matrix((np.ones(i.size), (i, j)), shape=shape)) >= 0).sum())

    before = matched(ei, ej)
    assert before < min(shape)
    fi, fj = with_full_matching(source, ei, ej)
    assert matched(fi, fj) == min(shape)
    keys, new = set(zip(ei.tolist(), ej.tolist())), set(zip(fi.tolist(), fj.tolist()))
    assert keys <= new and len(new - keys) == min(shape) - before
    added = np.array(sorted(new - keys))
    side = 0 if shape[0] <= shape[1] else 1
    assert len(set(added[:, side])) == len(added) and len(set(added[:, 1 - side])) == len(added)
    assert np.all(np.diff(fi * shape[1] + fj) > 0)  # sorted and distinct, as knn_edges returns them
    # and the certified sparse assignment on the completed graph is the dense optimum
    sparse = m.assign(A, B, method="sparse", k=1, metric="sqeuclidean")
    dense = m.linear_assignment(m.pairwise_costs(A, B, "sqeuclidean"))
    assert sparse.info["objective"] == pytest.approx(dense.info["objective"], rel=1e-12)


def test_certificate_catches_a_feasible_but_suboptimal_candidate_graph():
    # Candidates = the identity only: a full matching exists among them, but it is not optimal.
    rng = np.random.default_rng(11)
    C = rng.exponential(size=(40, 40))
    dense = m.linear_assignment(C)
    identity = sp.identity(40, format="csr")
    with pytest.raises(RuntimeError, match="not certified"):
        m.sparse_assignment(identity, cost=C, max_rounds=1, fallback=False)
    with pytest.warns(RuntimeWarning, match="dense"):
        forced = m.sparse_assignment(identity, cost=C, max_rounds=1)
    assert forced.info["fallback"] and forced.info["objective"] == pytest.approx(dense.info["objective"])
    grown = m.sparse_assignment(identity, cost=C, max_per_row=40)
    assert grown.info["certified"] and not grown.info["fallback"] and grown.info["rounds"] > 1
    assert grown.info["objective"] == pytest.approx(dense.info["objective"], rel=1e-12)
    assert grown.info["objective"] < C.trace()


def test_k_too_small_still_optimal_via_escalation():
    A, B = noisy_permutation(200, 200, d=2, noise=0.5, seed=5)
    dense = m.assign(A, B, method="dense")
    for k in (1, 2):
        sparse = m.assign(A, B, method="sparse", k=k)
        assert sparse.info["certified"]
        assert sparse.info["objective"] == pytest.approx(dense.info["objective"], rel=1e-10)


def test_dual_potentials_prove_optimality():
    # Strong duality on the candidate graph: sum u + sum v equals the matching's cost,
    # u_i + v_j <= c_ij on every edge, with equality on the matched ones, and v <= 0.
    rng = np.random.default_rng(2)
    n_a, n_b = 30, 45
    C = rng.exponential(size=(n_a, n_b))
    mask = rng.random((n_a, n_b)) < 0.3
    mask[np.arange(n_a), rng.permutation(n_b)[:n_a]] = True
    ei, ej = np.nonzero(mask)
    ec = C[ei, ej]
    sigma = _solve_graph(n_a, n_b, ei, ej, ec)
    u, v = _dual_potentials(n_b, ei, ej, ec, sigma, 1e-12)
    primal = C[np.arange(n_a), sigma].sum()
    assert u.sum() + v.sum() == pytest.approx(primal, rel=1e-10)
    assert np.all(ec - u[ei] - v[ej] >= -1e-10)
    np.testing.assert_allclose(u + v[sigma], C[np.arange(n_a), sigma], atol=1e-12)
    assert v.max() <= 0 and np.all(v[np.setdiff1d(np.arange(n_b), sigma)] == 0)


def test_sparse_path_memory_is_blockwise(monkeypatch):
    import tracemalloc

    monkeypatch.setattr(costs_module, "_BLOCK_ENTRIES", 1 << 14)
    monkeypatch.setattr(_PointCosts, "dense", lambda self: pytest.fail("formed the dense matrix"))
    A, B = noisy_permutation(1500, 1500, d=3, noise=0.3, seed=9)
    tracemalloc.start()
    al = m.assign(A, B, method="sparse", k=5)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert al.info["certified"]
    assert peak < 1500 * 1500 * 8 / 4  # a quarter of one dense matrix
    dense = m.linear_assignment(m.pairwise_costs(A, B))
    assert al.info["objective"] == pytest.approx(dense.info["objective"], rel=1e-10)


def test_sparse_candidates_only():
    C = np.array([[1.0, 2.0, 0.0], [2.0, 0.0, 1.0], [0.0, 3.0, 0.0]])
    graph = sp.csr_matrix(([1.0, 2.0, 2.0, 1.0, 3.0], ([0, 0, 1, 1, 2], [0, 1, 0, 2, 1])), shape=(3, 3))
    al = m.sparse_assignment(graph)
    assert al.to_permutation().tolist() == [0, 2, 1] and al.info["objective"] == 5.0
    assert not al.info["certified"]
    del C
    with pytest.raises(ValueError, match="no matching"):
        m.sparse_assignment(sp.csr_matrix(([1.0, 1.0], ([0, 1], [0, 0])), shape=(2, 2)))
    limited = m.sparse_assignment(graph, cost_limit=2.5)  # pairs (0,0) and (1,2) at 1 each; row 2 -> 3 > 2.5
    assert limited.pairs.tolist() == [[0, 0], [1, 2]]
    assert limited.info["objective"] == pytest.approx(2.0 + 2.5)


# ----------------------------------------------------------------------------------------
# Myopic matching
# ----------------------------------------------------------------------------------------
def test_myopic_hand_example():
    C = np.array([[1.0, 2.0, 3.0], [0.5, 4.0, 1.0], [2.0, 0.1, 5.0]])
    # b0 takes a1 (0.5), b1 takes a2 (0.1), b2 is left with a0 (3.0): 3.6 > the optimum 2.1
    al = m.myopic_assignment(C)
    assert al.pairs.tolist() == [[0, 2], [1, 0], [2, 1]] and al.info["total_cost"] == pytest.approx(3.6)
    assert m.linear_assignment(C).info["objective"] == pytest.approx(2.1)
    # arriving in the order b2, b1, b0: b2 takes a1 (1.0), b1 a2 (0.1), b0 a0 (1.0)
    al = m.myopic_assignment(C, order=[2, 1, 0])
    assert al.pairs.tolist() == [[0, 0], [1, 2], [2, 1]] and al.info["total_cost"] == pytest.approx(2.1)


def test_myopic_from_points_with_limit():
    A = np.array([[0.0], [1.0], [3.0]])
    B = np.array([[0.9], [2.9], [0.2]])
    al = m.myopic_assignment(A, B)  # b0 -> a1 (0.1), b1 -> a2 (0.1), b2 -> a0 (0.2)
    assert al.pairs.tolist() == [[0, 2], [1, 0], [2, 1]]
    np.testing.assert_allclose(al.costs, [0.2, 0.1, 0.1])
    al = m.myopic_assignment(A, B, cost_limit=0.15)  # b2's nearest free point costs 0.2
    assert al.pairs.tolist() == [[1, 0], [2, 1]] and al.unmatched_b.tolist() == [2]
    assert m.myopic_assignment(A[:2], B).unmatched_b.tolist() == [2]  # b1 -> a0 (1.9); then a is exhausted


# ----------------------------------------------------------------------------------------
# Sinkhorn
# ----------------------------------------------------------------------------------------
def plain_sinkhorn(K, a, b, n_iter=5000):
    """Textbook scaling iterations u = a / K v, v = b / K^T u (no logs), as an independent reference."""
    u, v = np.ones(K.shape[0]), np.ones(K.shape[1])
    for _ in range(n_iter):
        u = a / (K @ v)
        v = b / (K.T @ u)
    return u[:, None] * K * v[None, :]


def test_sinkhorn_matches_plain_scaling_square_and_dustbin():
    rng = np.random.default_rng(4)
    C = rng.exponential(size=(6, 6))
    res = m.sinkhorn(C, temperature=0.5, tol=1e-12, n_iter=5000)
    np.testing.assert_allclose(res.marginals, plain_sinkhorn(np.exp(-C / 0.5), np.ones(6), np.ones(6)),
                               atol=1e-9)
    np.testing.assert_allclose(res.marginals.sum(1), 1, atol=1e-9)
    np.testing.assert_allclose(res.marginals.sum(0), 1, atol=1e-12)
    # dustbin: augmented kernel with cost L/2 to the dustbins, 0 between them; masses n_b, n_a
    C = rng.exponential(size=(4, 7))
    L, T = 1.2, 0.3
    res = m.sinkhorn(C, temperature=T, cost_limit=L, tol=1e-12, n_iter=5000)
    aug = np.block([[C, np.full((4, 1), L / 2)], [np.full((1, 7), L / 2), np.zeros((1, 1))]])
    ref = plain_sinkhorn(np.exp(-aug / T), np.r_[np.ones(4), 7.0], np.r_[np.ones(7), 4.0])
    np.testing.assert_allclose(res.marginals, ref[:4, :7], atol=1e-9)
    np.testing.assert_allclose(res.unmatched_a, ref[:4, 7], atol=1e-9)
    np.testing.assert_allclose(res.marginals.sum(1) + res.unmatched_a, 1, atol=1e-9)
    np.testing.assert_allclose(res.marginals.sum(0) + res.unmatched_b, 1, atol=1e-9)
    alpha, beta = res.log_potentials
    both_dustbins = np.exp(alpha[-1] + beta[-1])  # P(dustbin, dustbin): cost 0
    assert res.unmatched_b.sum() + both_dustbins == pytest.approx(7.0, rel=1e-9)
    assert res.unmatched_a.sum() + both_dustbins == pytest.approx(4.0, rel=1e-9)


def test_sinkhorn_rectangular_marginals():
    rng = np.random.default_rng(5)
    for shape in [(4, 9), (9, 4)]:
        C = rng.exponential(size=shape)
        res = m.sinkhorn(C, temperature=0.2, tol=1e-11, n_iter=20000)
        small = 1 if shape[0] < shape[1] else 0
        np.testing.assert_allclose(res.marginals.sum(small), 1, atol=1e-9)  # the smaller view: = 1
        assert res.marginals.sum(1 - small).max() <= 1 + 1e-9  # the larger view: <= 1
        assert res.converged


@pytest.mark.parametrize("cost_limit", [None, 0.8])
def test_sinkhorn_low_temperature_gives_hungarian(cost_limit):
    rng = np.random.default_rng(6)
    C = rng.exponential(size=(8, 8))
    hungarian = m.linear_assignment(C, cost_limit=cost_limit)
    target = np.zeros_like(C)
    target[hungarian.index_a, hungarian.index_b] = 1
    res = m.sinkhorn(C, temperature=1e-3, cost_limit=cost_limit, n_iter=5000)
    assert res.converged
    np.testing.assert_allclose(res.marginals, target, atol=1e-6)
    assert m.marginal_assignment(res.marginals).pairs.tolist() == hungarian.pairs.tolist()


def test_sinkhorn_large_costs_no_nan():
    rng = np.random.default_rng(8)
    C = rng.normal(size=(30, 20)) * 1e8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = m.sinkhorn(C, temperature=1e-4, n_iter=30)
        res_dust = m.sinkhorn(C, temperature=1e-4, cost_limit=1e9, n_iter=30)
    for r in (res, res_dust):
        assert np.all(np.isfinite(r.marginals)) and np.all(np.isfinite(r.unmatched_a))
        assert np.all((r.marginals >= 0) & (r.marginals <= 1 + 1e-9))


def test_sinkhorn_two_by_two_closed_form():
    # symmetric 2x2: P11 / P12 = exp(1 / T), rows sum to 1
    for T in (0.5, 1.0, 3.0):
        res = m.sinkhorn([[0.0, 1.0], [1.0, 0.0]], temperature=T)
        assert res.marginals[0, 0] == pytest.approx(1 / (1 + np.exp(-1 / T)), rel=1e-9)


# ----------------------------------------------------------------------------------------
# Perturb-and-MAP and decoding marginals
# ----------------------------------------------------------------------------------------
def test_perturb_and_map_two_by_two_closed_form():
    # P(identity) = P(g11 + g22 - g12 - g21 > delta / T), delta = c11 + c22 - c12 - c21. Each
    # g11 - g12 is logistic, so it is P(X + Y > delta / T) for two independent logistics:
    # integral of f(x) sigmoid(x - delta / T). (The Gibbs answer would be sigmoid(-delta / T).)
    C = np.array([[1.0, 0.5], [0.0, 0.5]])  # delta = 1.5 - 0.5 = 1.0
    T = 0.5
    x = 1.0 / T
    exact = quad(lambda t: expit(t) * expit(-t) * expit(t - x), -np.inf, np.inf)[0]
    S = 4000
    res = m.perturb_and_map(C, n_samples=S, temperature=T, seed=1)
    freq = res.frequencies.toarray()
    se = np.sqrt(exact * (1 - exact) / S)
    assert abs(freq[0, 0] - exact) < 3 * se
    assert abs(expit(-x) - exact) > 10 * se  # the test can tell it from the Gibbs probability
    np.testing.assert_allclose(freq.sum(1), 1)
    np.testing.assert_allclose(freq.sum(0), 1)
    assert freq[0, 0] == pytest.approx(np.mean(res.permutations[:, 0] == 0), rel=1e-12)


def test_perturb_and_map_samples_and_seed():
    rng = np.random.default_rng(12)
    C = rng.exponential(size=(5, 7))
    r1 = m.perturb_and_map(C, n_samples=40, temperature=0.3, seed=3)
    r2 = m.perturb_and_map(C, n_samples=40, temperature=0.3, seed=3)
    assert np.array_equal(r1.permutations, r2.permutations)
    for perm in r1.permutations:  # each sample is an optimal assignment of some costs: injective
        assert np.unique(perm).size == 5 and perm.min() >= 0
    np.testing.assert_allclose(r1.frequencies.sum(1), 1)
    np.testing.assert_allclose(r1.unmatched_b, 1 - r1.frequencies.toarray().sum(0))
    cold = m.perturb_and_map(C, n_samples=10, temperature=1e-9, seed=0)  # no noise: the MAP every time
    assert np.all(cold.permutations == m.linear_assignment(C).to_permutation())
    limited = m.perturb_and_map(C, n_samples=30, temperature=0.2, cost_limit=0.5, seed=0)
    np.testing.assert_allclose(limited.frequencies.toarray().sum(1) + limited.unmatched_a, 1)
    assert limited.unmatched_a.max() > 0


def brute_marginal(P, p0=0.0):
    n_a, n_b = P.shape
    best = 0.0
    for size in range(min(n_a, n_b) + 1):
        for rows in itertools.combinations(range(n_a), size):
            for cols in itertools.permutations(range(n_b), size):
                best = max(best, (P[list(rows), list(cols)] - p0).sum())
    return best


def test_marginal_assignment_maximises_expected_correct_pairs():
    rng = np.random.default_rng(13)
    for shape in [(4, 4), (3, 5), (5, 3)]:
        P = rng.dirichlet(np.ones(shape[1]), size=shape[0]) * (rng.random(shape) < 0.6)
        for p0 in (0.0, 0.3):
            dense = m.marginal_assignment(P, min_probability=p0)
            sparse = m.marginal_assignment(sp.csr_matrix(P), min_probability=p0)
            best = brute_marginal(P, p0)
            for al in (dense, sparse):
                assert is_matching(al) and np.all(al.probabilities > p0)
                assert (al.probabilities - p0).sum() == pytest.approx(best, abs=1e-12)
                np.testing.assert_allclose(al.probabilities, P[al.index_a, al.index_b])
                np.testing.assert_allclose(al.costs, 1 - al.probabilities)
    C = rng.exponential(size=(4, 4))
    al = m.marginal_assignment(np.eye(4) * 0.9, cost=C)
    np.testing.assert_allclose(al.costs, np.diag(C))


@pytest.mark.parametrize("cost_limit", [None, 1.5])
@pytest.mark.parametrize("shape", [(6, 6), (5, 8)])
def test_sparse_sinkhorn_on_all_pairs_equals_the_dense_marginals(shape, cost_limit):
    rng = np.random.default_rng(11)
    cost = rng.random(shape) * 3.0
    ei, ej = np.nonzero(np.ones(shape))
    sparse, err_sparse = m.sparse_sinkhorn(ei, ej, cost[ei, ej], 0.5, shape, cost_limit, tol=1e-10,
                                                  n_iter=20000)
    dense, err_dense = m.sinkhorn_marginals(cost, 0.5, cost_limit, tol=1e-10, n_iter=20000)
    assert max(err_sparse, err_dense) < 1e-8
    np.testing.assert_allclose(sparse.toarray(), dense, atol=1e-7)
    # the smaller view's rows (or, with a dustbin, every row with its dustbin share) sum to at most 1
    assert dense.sum(axis=1).max() <= 1 + 1e-9 and dense.sum(axis=0).max() <= 1 + 1e-9



@pytest.mark.parametrize("cost_limit", [None, 1.5])
def test_sparse_scaling_sweeps_equal_the_log_domain_sweeps_also_where_the_kernel_underflows(cost_limit):
    # the stabilised scaling sweeps and the log-domain ones are the same iteration: the same potentials to the
    # tolerance from a cold start; from a warm start whose potentials underflow a whole column of the kernel
    # (g_0 = -1e5 at T = 0.5: exp(-2e5) = 0) the scaling form cannot divide and hands the stage to the log domain,
    # which still reaches the dense marginals
    from bayesalign.matching.entropic import _SparseSinkhorn

    rng = np.random.default_rng(12)
    shape = (7, 9)
    cost = rng.random(shape) * 3.0
    ei, ej = np.nonzero(np.ones(shape))
    state = _SparseSinkhorn(*shape, cost_limit)
    state.set_edges(ei, ej, cost[ei, ej])
    f1, g1, _ = state.solve(0.5, None, None, 1e-12, 20000)
    f2, g2, _ = state.solve_log(0.5, None, None, 1e-12, 20000)
    # potentials are defined up to f + c, g - c: compare the plans they give
    np.testing.assert_allclose(state.plan(f1, g1, 0.5)[0], state.plan(f2, g2, 0.5)[0], atol=1e-10)
    dense, _ = m.sinkhorn_marginals(cost, 0.5, cost_limit, tol=1e-10, n_iter=20000)
    for low in (-1e5, -356.0):  # a column's kernel at 0, or subnormal (about 1e-309: its scaling overflows)
        g0 = np.zeros(state.b.size)
        g0[0] = low
        sparse, error = m.sparse_sinkhorn(ei, ej, cost[ei, ej], 0.5, shape, cost_limit, tol=1e-10, n_iter=20000,
                                          warm_start=(np.zeros(state.a.size), g0, 0.5))
        assert error < 1e-8
        np.testing.assert_allclose(sparse.toarray(), dense, atol=1e-7)

# ----------------------------------------------------------------------------------------
# Matching an embedding (matching.match)
# ----------------------------------------------------------------------------------------
def test_marginal_assignment_match_all_uses_pairs_of_zero_probability():
    P = np.array([[0.9, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])  # rows 1, 2: probabilities underflowed
    assert m.marginal_assignment(P).pairs.tolist() == [[0, 0]]  # a pair with P = 0 never gains
    full = m.marginal_assignment(P, match_all=True)
    assert len(full) == 3 and full.pairs[0].tolist() == [0, 0]
    sparse_full = m.marginal_assignment(sp.csr_matrix((np.r_[0.9, 0.0, 0.0], ([0, 1, 2], [0, 2, 1])), shape=(3, 3)),
                                        match_all=True)
    assert sparse_full.pairs.tolist() == [[0, 0], [1, 2], [2, 1]]  # explicit zeros are candidate pairs


def test_match_sinkhorn_matcher_matches_every_row_without_cost_limit(monkeypatch):
    # above DENSE_SINKHORN_MAX pairs (lowered here to keep the test small) the probabilities live
    # on kNN candidates; half of view b sits far away, so its rows' nearest rows of a are the same few: a
    # full matching needs more candidates, and the matching must use pairs whose probability underflowed to 0
    from bayesalign.data import AlignmentProblem, LatentEmbedding
    from bayesalign.matching import matcher as match_module

    monkeypatch.setattr(match_module, "DENSE_SINKHORN_MAX", 100)
    rng = np.random.default_rng(3)
    a = rng.normal(size=(40, 2))
    b = a + 0.01 * rng.normal(size=a.shape)
    b[20:] += 5.0
    problem = AlignmentProblem({"a": a, "b": b})
    al = m.match(LatentEmbedding({"a": a, "b": b}), problem, matcher="sinkhorn")
    assert "kNN candidate" in al.info["probability"]
    assert len(al) == 40 and np.unique(al.index_b).size == 40
    # it is the full matching with the most expected correct pairs: at least the Hungarian matching's
    hungarian = m.match(LatentEmbedding({"a": a, "b": b}), problem, matcher="hungarian")
    assert al.probabilities.sum() >= hungarian.probabilities.sum() - 1e-9


def test_match_probabilities_for_many_rows_use_the_sparse_path():
    # the kNN Sinkhorn path: a noisy permutation of 3000 rows; the probabilities of the right pairs are high
    from bayesalign.data import AlignmentProblem, LatentEmbedding

    rng = np.random.default_rng(4)
    a = rng.normal(size=(3000, 3))
    perm = rng.permutation(3000)
    b = np.empty_like(a)
    b[perm] = a + 0.01 * rng.normal(size=a.shape)
    problem = AlignmentProblem({"a": a, "b": b})
    al = m.match(LatentEmbedding({"a": a, "b": b}), problem, sparse=True)
    assert (al.index_b == perm[al.index_a]).mean() > 0.95
    assert al.info["certified"] and "kNN candidate" in al.info["probability"]
    assert al.probabilities[al.index_b == perm[al.index_a]].mean() > 0.9


@pytest.mark.parametrize("spread", [1e-4, 30.0])
def test_probabilities_on_candidates_alone_measure_the_mass_they_leave_out(spread, monkeypatch):
    # Above SINKHORN_CHECK_MAX pairs (lowered here) the probabilities are not completed. The mass a sampled row leaves
    # outside its candidates under the solved potentials is then measured: against a brute force over every pair of
    # those rows, and with a warning only where the posteriors are diffuse (variances far above the rows' spacing)
    from bayesalign.data import AlignmentProblem, LatentEmbedding
    from bayesalign.matching import matcher as matcher_module

    monkeypatch.setattr(matcher_module, "SINKHORN_CHECK_MAX", 0)
    rng = np.random.default_rng(1)
    a = rng.normal(size=(400, 2))
    perm = rng.permutation(400)
    b = np.empty_like(a)
    b[perm] = a + 0.01 * rng.normal(size=a.shape)
    var = {"a": np.full_like(a, spread), "b": np.full_like(b, spread)}
    emb = LatentEmbedding({"a": a, "b": b}, variances=var)
    problem = AlignmentProblem({"a": a, "b": b})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        al = m.match(emb, problem, cost="likelihood", sparse=True)
    left_out = al.info["left_out_mass"]
    said = [w for w in caught if "candidate pairs only" in str(w.message)]
    # brute force over the same rows: every pair's mass under the same solve's potentials, the candidates' taken out
    info = {}
    _, ei, ej, _, _ = matcher_module._sparse_marginals("likelihood", (a, var["a"], b, var["b"]), 1.0, None, 10, info)
    assert info["left_out_mass"] == pytest.approx(left_out, rel=1e-9)
    f, g, T = info["potentials"]
    rows = np.sort(np.random.default_rng(0).choice(400, size=256, replace=False))
    C = m.likelihood_cost(a[rows], var["a"][rows], b, var["b"])
    mass = np.exp(np.minimum((f[rows, None] + g[None, :400] - C) / T, 0.0))
    candidates = set(zip(ei.tolist(), ej.tolist()))
    outside = sum(mass[r, j] for r, i in enumerate(rows) for j in range(400) if (i, j) not in candidates)
    assert left_out == pytest.approx(outside / rows.size, rel=1e-9, abs=1e-12)
    if spread < 1:
        assert left_out < matcher_module.LEFT_OUT_WARN and not said
    else:
        assert left_out > 1.0 and len(said) == 1 and "overstated" in str(said[0].message)


def test_match_posterior_temperature_and_likelihood_cost():
    # with variances, T follows the posterior rule: 1 for the likelihood cost, 2 (s_a + s_b) for the mean cost
    from bayesalign.data import AlignmentProblem, LatentEmbedding

    x = np.arange(5.0)[:, None]
    var = np.full_like(x, 0.1)
    emb = LatentEmbedding({"a": x, "b": x[::-1]}, variances={"a": var, "b": var})
    problem = AlignmentProblem({"a": x, "b": x})
    lik = m.match(emb, problem, cost="likelihood")
    mean = m.match(emb, problem, cost="mean")
    assert lik.info["temperature"] == 1.0 and mean.info["temperature"] == pytest.approx(0.4)
    assert lik.to_permutation().tolist() == mean.to_permutation().tolist() == [4, 3, 2, 1, 0]
    np.testing.assert_allclose(lik.costs, 0.5 * np.log(2 * np.pi * 0.2))  # -log N(0; 0, 0.2) per pair
    assert not {"log_potentials", "potentials"} & set(lik.info)  # the solver's internals stay out of the result
    with pytest.raises(ValueError, match="needs posterior variances"):
        m.match(LatentEmbedding({"a": x, "b": x}), problem, cost="likelihood")


def test_dense_sinkhorn_stabilised_equals_log_domain():
    # the dense path runs on POT's stabilised (kernel-domain, absorbing) solver; POT's log-domain solver on the same
    # problem, run twice as long at most, is the reference. Costs spanning ~450 temperatures (exp(-C/T) alone would
    # underflow); such near-hard problems converge sublinearly, so both stop at small but nonzero marginal errors
    # (about 1e-4 and 2e-5) and agree within their sum.
    import ot

    from bayesalign.matching import sinkhorn

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    Y = X[rng.permutation(30)] + 0.3 * rng.normal(size=(30, 3))
    C = ((X[:, None] - Y[None]) ** 2).sum(-1) / 0.01
    result = sinkhorn(C, temperature=5.0, n_iter=20000, tol=1e-4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # POT: not converged to its 1e-11
        reference = ot.bregman.sinkhorn_log(np.ones(30), np.ones(30), C, 5.0, numItermax=40000, stopThr=1e-11)
    assert result.converged and result.error <= 1e-4
    np.testing.assert_allclose(result.marginals, reference, atol=2e-4)


@pytest.mark.parametrize("cost_limit", [None, 4.0])
@pytest.mark.parametrize("shape", [(60, 60), (50, 70)])
def test_sparse_sinkhorn_completed_candidates_equal_the_dense_marginals(shape, cost_limit):
    # kNN candidates alone: every row must put its mass on its few candidates, so at a temperature where
    # the mass spreads beyond them the probabilities are too confident; with ``costs`` the left-out pairs
    # that carry mass join until no row or column leaves out more than tol, and the marginals are those
    # of the full problem (dense POT at the same temperature) to that tolerance
    from bayesalign.matching.costs import knn_edges
    from bayesalign.matching.given_costs import _MatrixCosts

    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(shape[0], 2)), rng.normal(size=(shape[1], 2))
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    ei, ej = knn_edges(a, b, 3)
    dense, err_dense = m.sinkhorn_marginals(cost, 0.5, cost_limit, tol=1e-9, n_iter=20000)
    truncated, _ = m.sparse_sinkhorn(ei, ej, cost[ei, ej], 0.5, shape, cost_limit, tol=1e-9, n_iter=20000)
    completed, err = m.sparse_sinkhorn(ei, ej, cost[ei, ej], 0.5, shape, cost_limit, tol=1e-6, n_iter=20000,
                                       costs=_MatrixCosts(cost))
    assert err_dense < 1e-8 and err <= 1e-6
    assert np.abs(truncated.toarray() - dense).max() > 0.05  # the candidates alone are wrong here
    assert completed.nnz > ei.size
    # each entry is off by at most what its row leaves out plus the marginal error (both <= tol)
    np.testing.assert_allclose(completed.toarray(), dense, atol=1e-5)


def test_sparse_sinkhorn_completion_keeps_near_hard_problems_sparse():
    # at a low temperature the candidates already hold the mass: nothing (or little) joins
    from bayesalign.matching.costs import knn_edges
    from bayesalign.matching.given_costs import _MatrixCosts

    rng = np.random.default_rng(6)
    a = rng.normal(size=(200, 3))
    b = a[rng.permutation(200)] + 0.01 * rng.normal(size=a.shape)
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    ei, ej = knn_edges(a, b, 5)
    P, err = m.sparse_sinkhorn(ei, ej, cost[ei, ej], 1e-3, cost.shape, costs=_MatrixCosts(cost))
    assert err <= 1e-3 and P.nnz < 3 * ei.size


@pytest.mark.parametrize("cost_limit", [None, 4.0])
def test_log_potentials_give_the_log_marginal_of_every_pair_also_below_the_candidates(cost_limit):
    # info["log_potentials"] (alpha, beta): log P_ij = alpha_i + beta_j - C_ij / T for every pair, in the dense
    # solver and in the completed sparse one, where pairs below the tolerance are left out (P = 0 there). The
    # reference is POT's log-domain Sinkhorn converged to 1e-11 on the same (augmented) problem
    import ot

    from bayesalign.matching.costs import knn_edges
    from bayesalign.matching.given_costs import _MatrixCosts

    rng = np.random.default_rng(7)
    a, b = rng.normal(size=(40, 2)), rng.normal(size=(40, 2))
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
    T = 0.2
    weights_a, weights_b, augmented = np.ones(40), np.ones(40), cost
    if cost_limit is not None:  # the dustbins of sinkhorn(): a row and a column at cost L / 2, masses 40
        augmented = np.block([[cost, np.full((40, 1), cost_limit / 2)], [np.full((1, 40), cost_limit / 2), 0.0]])
        weights_a, weights_b = np.r_[weights_a, 40.0], np.r_[weights_b, 40.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        _, log = ot.bregman.sinkhorn_log(weights_a, weights_b, augmented, T, numItermax=20000, stopThr=1e-11,
                                         log=True)
    exact = (log["log_u"][:, None] + log["log_v"][None, :] - augmented / T)[:40, :40]  # log P [40, 40]
    ei, ej = knn_edges(a, b, 3)
    assert exact.min() < -60  # pairs far below any candidate threshold (tol / n)
    for sparse, solve in (
            (False, lambda info: m.sinkhorn_marginals(cost, T, cost_limit, tol=1e-9, n_iter=50000, info=info)[0]),
            (True, lambda info: m.sparse_sinkhorn(ei, ej, cost[ei, ej], T, cost.shape, cost_limit, tol=1e-7,
                                                  n_iter=50000, costs=_MatrixCosts(cost), info=info)[0])):
        info = {}
        P = solve(info)
        P = P.toarray() if sparse else P
        alpha, beta = info["log_potentials"]
        log_p = alpha[:, None] + beta[None, :] - cost / T
        # the log marginal of every pair to the solver's tolerance, also where the sparse P left the pair out
        np.testing.assert_allclose(log_p, exact, atol=1e-4)
        np.testing.assert_allclose(P, np.exp(exact), atol=1e-6)
        assert not sparse or (P[exact < -60] == 0).mean() > 0.5  # most such pairs were never candidates


def test_sinkhorn_probabilities_warm_started_from_another_temperature_are_the_same():
    # on the sparse path (kNN candidates completed from the dense costs) the potentials of a solve at a lower or
    # a higher temperature, given as warm_start, change nothing: the marginals are those of the full problem
    # either way, to the tolerance
    from bayesalign.matching.matcher import sinkhorn_probabilities

    rng = np.random.default_rng(8)
    a = rng.normal(size=(600, 3))
    b = a[rng.permutation(600)] + 0.3 * rng.normal(size=a.shape)
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) / 0.05  # 360,000 pairs: the sparse path
    plain = sinkhorn_probabilities(cost, 4.0, mean_a=a, mean_b=b)
    for other in (2.0, 8.0):
        solved = {}
        sinkhorn_probabilities(cost, other, mean_a=a, mean_b=b, info=solved)
        info = {}
        warm = sinkhorn_probabilities(cost, 4.0, mean_a=a, mean_b=b, info=info, warm_start=solved["potentials"])
        assert info["sinkhorn_error"] <= 1e-3
        np.testing.assert_allclose(warm, plain, atol=2e-3)  # each within the 1e-3 tolerance of the exact marginals


@pytest.mark.parametrize("cost_limit", [None, 4.0])
@pytest.mark.parametrize("shape", [(60, 60), (50, 70)])
def test_warm_started_sinkhorn_gives_the_same_marginals_in_fewer_sweeps(shape, cost_limit):
    # info["potentials"] of a solve at T0 started at a nearby T (above or below it): the same marginals as a
    # cold solve, to the tolerance, in fewer sweeps (the dense solver counts them); the sparse solver, which
    # takes them too, gives the dense one's marginals
    from bayesalign.matching.costs import knn_edges
    from bayesalign.matching.given_costs import _MatrixCosts

    rng = np.random.default_rng(9)
    a, b = rng.normal(size=(shape[0], 2)), rng.normal(size=(shape[1], 2))
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) / 0.1  # spread ~ 30 T: several scaling stages
    ei, ej = knn_edges(a, b, 3)
    hard = m.linear_assignment(cost)  # with it the candidates admit a full matching (as sinkhorn_probabilities')
    ei, ej = np.nonzero(sp.coo_matrix((np.ones(ei.size + hard.index_a.size), (np.r_[ei, hard.index_a],
                                                                            np.r_[ej, hard.index_b])),
                                      shape=shape).toarray())  # each pair once
    for t0, t in ((2.0, 2.4), (2.4, 2.0)):
        info = {}
        m.sinkhorn_marginals(cost, t0, cost_limit, tol=1e-6, n_iter=50000, info=info)
        f, g, used = info["potentials"]
        augmented = cost_limit is not None or shape[1] > shape[0]  # a dustbin or a slack row
        assert used == t0 and f.shape == (shape[0] + augmented,)
        cold = m.sinkhorn(cost, t, cost_limit, n_iter=50000, tol=1e-6)
        warm = m.sinkhorn(cost, t, cost_limit, n_iter=50000, tol=1e-6, warm_start=info["potentials"])
        assert cold.converged and warm.converged and warm.n_iter < cold.n_iter
        np.testing.assert_allclose(warm.marginals, cold.marginals, atol=1e-5)  # both within 1e-6 of the exact
        sparse, err = m.sparse_sinkhorn(ei, ej, cost[ei, ej], t, shape, cost_limit, tol=1e-6, n_iter=50000,
                                        costs=_MatrixCosts(cost), warm_start=info["potentials"])
        assert err <= 1e-6
        np.testing.assert_allclose(sparse.toarray(), cold.marginals, atol=1e-5)  # each within 1e-6 (+ 1e-6 left out)


@pytest.mark.parametrize("shape", [(80, 80), (70, 90)])
def test_sinkhorn_started_from_the_candidates_a_nearby_solve_ended_on_gives_the_same_marginals(shape, monkeypatch):
    # a temperature search passes each solve the potentials and the candidate pairs (info["edges"]) of the nearest
    # solved temperature: the marginals must be the default start's (kNN pairs and the optimal assignment's), each
    # within the tolerance of the exact ones, which a dense solve to 1e-9 gives
    from bayesalign.matching import matcher as match_module

    monkeypatch.setattr(match_module, "DENSE_SINKHORN_MAX", 100)  # the sparse path, as above it
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(shape[0], 2)), rng.normal(size=(shape[1], 2))
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1) / 0.3  # soft enough for Sinkhorn to reach 1e-6
    for t0, t in ((1.0, 1.6), (1.6, 1.0)):
        info = {}
        m.sinkhorn_probabilities(cost, t0, None, a, b, info=info, tol=1e-6)
        ei, ej = info["edges"]
        assert ei.size == np.unique(ei * shape[1] + ej).size < cost.size  # each pair once, not all of them
        started = {}
        P = m.sinkhorn_probabilities(cost, t, None, a, b, info=started, tol=1e-6, warm_start=info["potentials"],
                                     candidates=info["edges"])
        assert "given candidate pairs" in started["probability"] and started["sinkhorn_error"] <= 1e-6
        exact = m.sinkhorn(cost, t, n_iter=100000, tol=1e-9).marginals
        np.testing.assert_allclose(P, exact, atol=3e-6)  # 1e-6 of marginal error and 1e-6 left out, with round-off
        np.testing.assert_allclose(m.sinkhorn_probabilities(cost, t, None, a, b, tol=1e-6), exact, atol=3e-6)


def test_warm_start_of_another_problem_is_refused_by_name():
    cost = np.random.default_rng(0).random((5, 6))
    with pytest.raises(ValueError, match="warm_start potentials have shapes"):
        m.sinkhorn(cost, 1.0, warm_start=(np.zeros(5), np.zeros(6), 1.0))  # the slack row is missing
    with pytest.raises(ValueError, match="warm_start must be"):
        m.sinkhorn(cost, 1.0, warm_start=(np.zeros(6), np.zeros(6)))
    with pytest.raises(ValueError, match="finite potentials and a positive temperature"):
        m.sinkhorn(cost, 1.0, warm_start=(np.zeros(6), np.zeros(6), -1.0))


# ------------------------------------------------------------------------------------------
# The cross-view misfit added to the likelihood cost
# ------------------------------------------------------------------------------------------
def _misfit_pairs(n, covariance, seed=0):
    """n known pairs: posterior means of one point from two views, differing by N(0, diag(s_a + s_b) + covariance)
    with per-row variances s drawn in [0.01, 0.1]."""
    rng = np.random.default_rng(seed)
    q = len(covariance)
    x = rng.normal(size=(n, q))
    var_a, var_b = rng.uniform(0.01, 0.1, size=(n, q)), rng.uniform(0.01, 0.1, size=(n, q))
    shift = rng.multivariate_normal(np.zeros(q), covariance, size=n) if np.any(covariance) else 0.0
    mean_a = x + shift + rng.normal(size=(n, q)) * np.sqrt(var_a)
    mean_b = x + rng.normal(size=(n, q)) * np.sqrt(var_b)
    return mean_a, var_a, mean_b, var_b


def test_fit_misfit_recovers_the_excess_covariance_by_monte_carlo():
    # 20,000 pairs: each moment's Monte Carlo sd is about sqrt(2 / n) * 0.5 = 0.005, so 0.03 is six of them
    truth = np.array([[0.5, 0.2, 0.0], [0.2, 0.3, -0.1], [0.0, -0.1, 0.2]])
    mis = m.fit_misfit(*_misfit_pairs(20_000, truth))
    np.testing.assert_allclose(mis.covariance, truth, atol=0.03)
    assert mis.shrinkage == 0.0 and mis.pairs == 20_000
    V = mis.basis  # orthonormal, diagonalising the average pair's covariance; `added` is the misfit's diagonal there
    np.testing.assert_allclose(V.T @ V, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(mis.added, np.diag(V.T @ mis.covariance @ V), atol=1e-12)


def test_fit_misfit_of_agreeing_views_is_about_zero():
    # well specified (the means differ by their posterior noise alone): what is left is Monte Carlo error
    # (the variances are 0.02-0.2 per pair, 20,000 pairs: a moment's sd about 0.002)
    ma, va, mb, vb = _misfit_pairs(20_000, np.zeros((3, 3)))
    mis = m.fit_misfit(ma, va, mb, vb)
    assert np.abs(mis.covariance).max() < 0.01
    # with no misfit the basis is the coordinate axes and the cost is the plain likelihood cost
    exact = m.fit_misfit(ma, va, ma + 1e-3 * np.sqrt(va + va), va)  # the pairs agree to within their variances
    np.testing.assert_allclose(exact.covariance, 0.0, atol=1e-12)
    assert sorted(np.argmax(np.abs(exact.basis), 0).tolist()) == [0, 1, 2]  # the axes, up to order and sign
    np.testing.assert_allclose(np.abs(exact.basis).max(0), 1.0, atol=1e-12)
    a, sa, b, sb = _misfit_pairs(20, np.zeros((3, 3)), seed=1)
    np.testing.assert_allclose(m.likelihood_cost(*exact.apply(a, sa), *exact.apply(b, sb)),
                               m.likelihood_cost(a, sa, b, sb), rtol=1e-12)


def test_the_cost_with_misfit_is_the_gaussian_likelihood_of_the_difference():
    # brute force with scipy, where the diagonal form is exact: -log N(mu_i - mu_j; 0, diag(s_i + s_j) + Sigma_tau)
    # for every pair (1) whose variances are the known pairs' average (anisotropic), and (2) whose variances are
    # equal across dimensions, when the known pairs' are too
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(3)
    truth = np.array([[0.4, 0.25], [0.25, 0.3]])
    a, b = rng.normal(size=(6, 2)), rng.normal(size=(5, 2))

    def brute(sa, sb, covariance):
        return np.array([[-multivariate_normal(np.zeros(2), np.diag(sa[i] + sb[j]) + covariance).logpdf(a[i] - b[j])
                          for j in range(5)] for i in range(6)])

    pairs = _misfit_pairs(500, truth)
    mis = m.fit_misfit(*pairs)
    half = 0.5 * (pairs[1] + pairs[3]).mean(0)  # each side half the average pair's variances
    sa, sb = np.tile(half, (6, 1)), np.tile(half, (5, 1))
    np.testing.assert_allclose(m.likelihood_cost(*mis.apply(a, sa), *mis.apply(b, sb)),
                               brute(sa, sb, mis.covariance), rtol=1e-10)
    iso = m.fit_misfit(pairs[0], np.full_like(pairs[1], 0.05), pairs[2], np.full_like(pairs[3], 0.03))
    sa, sb = np.repeat(rng.uniform(0.01, 0.2, (6, 1)), 2, 1), np.repeat(rng.uniform(0.01, 0.2, (5, 1)), 2, 1)
    np.testing.assert_allclose(m.likelihood_cost(*iso.apply(a, sa), *iso.apply(b, sb)),
                               brute(sa, sb, iso.covariance), rtol=1e-10)


def test_fit_misfit_shrinkage_moves_the_moments_toward_their_diagonal():
    pairs = _misfit_pairs(300, np.full((3, 3), 0.3) + np.diag([0.2, 0.1, 0.3]))
    plain, diagonal, half = (m.fit_misfit(*pairs, shrinkage=lam) for lam in (0.0, 1.0, 0.5))
    d = pairs[0] - pairs[2]
    excess = d.T @ d / len(d) - np.diag((pairs[1] + pairs[3]).mean(0))
    w, V = np.linalg.eigh(excess)  # the plain moments' excess, projected onto the PSD cone by hand
    np.testing.assert_allclose(plain.covariance, (V * np.maximum(w, 0)) @ V.T, atol=1e-12)
    np.testing.assert_allclose(diagonal.covariance, np.diag(np.maximum(np.diag(excess), 0)), atol=1e-12)
    off = ~np.eye(3, dtype=bool)
    np.testing.assert_allclose(half.covariance[off], 0.5 * excess[off], atol=1e-12)  # PSD here: no projection
    assert np.linalg.eigvalsh(plain.covariance).min() > -1e-12 and plain.shrinkage == 0.0


def test_fit_misfit_refuses_bad_input():
    ma, va, mb, vb = _misfit_pairs(10, np.eye(2))
    with pytest.raises(ValueError, match="shapes do not agree"):
        m.fit_misfit(ma, va, mb[:9], vb[:9])
    with pytest.raises(ValueError, match="at least 2"):
        m.fit_misfit(ma[:1], va[:1], mb[:1], vb[:1])
    with pytest.raises(ValueError, match="non-finite"):
        m.fit_misfit(np.where(np.eye(10, 2) > 0, np.nan, ma), va, mb, vb)
    with pytest.raises(ValueError, match="shrinkage"):
        m.fit_misfit(ma, va, mb, vb, shrinkage=1.5)
    mis = m.fit_misfit(ma, va, mb, vb)
    with pytest.raises(ValueError, match="over 2 dimensions"):
        mis.apply(ma[:, :1], va[:, :1])
