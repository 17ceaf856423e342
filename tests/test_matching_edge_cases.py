"""Edge cases of the matching API: stopped iterations, bad temperatures, ties at the cost limit, bad input named."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import bayesalign.matching as m


def test_sinkhorn_stopped_by_n_iter_still_gives_the_marginals_at_its_temperature():
    # costs spanning 100 temperatures need ~7 epsilon-scaling stages; n_iter=20 runs out before the last one.
    # The marginals must still be those of T (rows exact after each sweep, the reported error the columns'),
    # not the potentials of a hotter stage read at T (rows summing to 1e-11 before the fix)
    C = np.random.default_rng(0).random((4, 4)) * 100.0
    with pytest.warns(RuntimeWarning, match="did not converge"):
        dense = m.sinkhorn(C, temperature=1.0, n_iter=20)
    np.testing.assert_allclose(dense.marginals.sum(1), 1.0, rtol=1e-9)  # one row update: exact up to round-off
    col_error = np.abs(dense.marginals.sum(0) - 1.0).max()
    assert col_error == pytest.approx(dense.error, rel=1e-6, abs=1e-12)
    ei, ej = np.nonzero(np.ones(C.shape))
    P, error = m.sparse_sinkhorn(ei, ej, C[ei, ej], 1.0, C.shape, n_iter=5)
    rows = np.asarray(P.sum(1)).ravel()  # exact after the sweep, then columns above 1 scaled down by <= error
    assert error < 0.5  # before the fix: 1.0, the mass of every column lost
    assert np.all(rows <= 1.0 + 1e-12) and np.all(rows >= 1.0 - error - 1e-12)


def test_sinkhorn_rows_are_exact_when_the_costs_span_1e13_temperatures():
    # the docstring's "rows are exact": before the fix the plan was rebuilt from POT's potentials, which round
    # to ulps of spread / T = 1e13, and rows (and so single marginals) came out up to 0.4% above 1
    C = np.random.default_rng(8).normal(size=(30, 20)) * 1e8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # not converged to tol=1e-9 at this ratio: expected
        res = m.sinkhorn(C, temperature=1e-4, cost_limit=1e9)
    np.testing.assert_allclose(res.marginals.sum(1) + res.unmatched_a, 1.0, rtol=1e-12)
    assert res.marginals.max() <= 1.0 + 1e-12  # a row sums to 1 and its entries are >= 0


@pytest.mark.parametrize("temperature", [0.0, -1.0, np.nan, np.inf])
def test_a_temperature_that_is_not_finite_and_positive_is_refused_by_name(temperature):
    # before the fix sparse_sinkhorn looped forever at T <= 0 (epsilon scaling never reached T) and returned
    # NaN marginals without a word at T = nan; T = inf gave NaN marginals (sinkhorn) or a solver error
    C = np.array([[0.0, 1.0], [1.0, 0.0]])
    ei, ej = np.nonzero(np.ones(C.shape))
    with pytest.raises(ValueError, match="temperature"):
        m.sparse_sinkhorn(ei, ej, C[ei, ej], temperature, C.shape)
    with pytest.raises(ValueError, match="temperature"):
        m.sinkhorn(C, temperature=temperature)
    with pytest.raises(ValueError, match="temperature"):
        m.perturb_and_map(C, n_samples=2, temperature=temperature)


def test_sparse_assignment_drops_a_pair_at_exactly_the_cost_limit_as_the_dense_solver_does():
    # pair (0, 0) costs exactly L: making it or not has the same objective, and linear_assignment documents
    # that it is dropped; the sparse solver (and so assign(method="sparse"), match(sparse=True)) kept it
    C = np.array([[2.0, 9.0], [9.0, 1.0]])
    dense = m.linear_assignment(C, cost_limit=2.0)
    assert dense.pairs.tolist() == [[1, 1]]
    for sparse in (m.sparse_assignment(sp.csr_matrix(C), cost_limit=2.0),
                   m.sparse_assignment(sp.csr_matrix(np.ones(C.shape)), cost=C, cost_limit=2.0),
                   m.assign(C, method="sparse", cost_limit=2.0)):
        assert sparse.pairs.tolist() == [[1, 1]]
        assert sparse.info["objective"] == pytest.approx(dense.info["objective"])  # 1 + 4 * L/2 - 2 * L/2 = 3


def test_sparse_marginals_with_nan_are_refused_as_the_dense_ones():
    # a NaN fails every comparison, so the sparse path's filter silently dropped it
    P = np.array([[np.nan, 0.2], [0.3, 0.6]])
    with pytest.raises(ValueError, match="marginals"):
        m.marginal_assignment(P)
    with pytest.raises(ValueError, match="marginals"):
        m.marginal_assignment(sp.csr_matrix(P))


def test_an_assignment_without_a_partner_for_a_point_names_it():
    # the smaller view's row 1 (or column 1) has every pair forbidden: scipy says only "infeasible"
    C = np.array([[1.0, 2.0, 3.0], [np.inf, np.inf, np.inf], [2.0, 1.0, 0.0]])
    with pytest.raises(ValueError, match="row 1"):
        m.linear_assignment(C)
    with pytest.raises(ValueError, match="column 1"):
        m.linear_assignment(C.T)
    with pytest.raises(ValueError, match="row 1"):
        m.perturb_and_map(C, n_samples=2)
    # a forbidden row of the larger view is no obstacle, nor any with a cost_limit (the point stays unmatched)
    assert m.linear_assignment(C[:, :2]).pairs.tolist() == [[0, 0], [2, 1]]  # 3 x 2: row 1 may stay unmatched
    assert m.linear_assignment(C, cost_limit=5.0).pairs.tolist() == [[0, 0], [2, 2]]


def test_likelihood_cost_names_the_variance_that_is_not_positive():
    mean = np.zeros((3, 2))
    var = np.ones((3, 2))
    bad = var.copy()
    bad[2, 1] = 0.0
    with pytest.raises(ValueError, match=r"var_b.*row 2"):
        m.likelihood_cost(mean, var, mean, bad)


def test_myopic_drops_a_pair_at_exactly_the_cost_limit_as_linear_assignment_does():
    C = np.array([[1.0, 5.0], [5.0, 2.0]])
    assert m.linear_assignment(C, cost_limit=2.0).pairs.tolist() == [[0, 0]]
    assert m.myopic_assignment(C, cost_limit=2.0).pairs.tolist() == [[0, 0]]


def test_myopic_refuses_a_fractional_order():
    with pytest.raises(TypeError, match="order: row indices must be integers"):
        m.myopic_assignment(np.eye(3), order=[0.5, 1, 2])
