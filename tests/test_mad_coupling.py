"""q(P), the posterior over the unaligned rows' matching (bayesalign.mad.coupling), and the rounds that alternate it
with q(X) (bayesalign.mad.refinement)."""

from __future__ import annotations

import numpy as np
import ot
import pytest

import bayesalign as ba
from bayesalign.mad import refinement
from bayesalign.mad.coupling import coupling_edges, coupling_posterior
from bayesalign.mad.posteriors import anchor_foscttm
from bayesalign.transport import structure_matrix

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def small():
    """Two views of 24 points on a noisy curve (the second a rotation of the first), a random latent cost and
    unequal masses."""
    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 3, 24))
    X = np.c_[t, np.sin(2 * t)] + 0.02 * rng.normal(size=(24, 2))
    Y = X @ np.array([[0.0, -1.0], [1.0, 0.0]])
    C = 4.0 * rng.random((24, 24))
    mass_a = rng.uniform(0.5, 1.5, 24)
    mass_b = rng.uniform(0.5, 1.5, 24)
    return C, structure_matrix(X, 4), structure_matrix(Y, 4), mass_a / mass_a.sum(), mass_b / mass_b.sum()


def test_the_coupling_s_marginals_are_the_row_and_column_masses(small):
    C, A, B, mass_a, mass_b = small
    P, converged = coupling_posterior(C, A, B, geometry=20.0, mass_a=mass_a, mass_b=mass_b, n_outer=200, tol=1e-9)
    assert converged
    # each step ends on a Sinkhorn projection onto the two marginals, solved to 1e-12 (stopThr = 1e-3 tol)
    np.testing.assert_allclose(P.sum(axis=1), mass_a, rtol=0, atol=1e-9)
    np.testing.assert_allclose(P.sum(axis=0), mass_b, rtol=0, atol=1e-9)


def test_without_geometry_the_coupling_is_the_sinkhorn_coupling_of_the_latent_cost(small):
    C, _, _, mass_a, mass_b = small
    P, _ = coupling_posterior(C, geometry=0.0, mass_a=mass_a, mass_b=mass_b, tol=1e-9)
    reference = ot.sinkhorn(mass_a, mass_b, C, 1.0, numItermax=100_000, stopThr=1e-13)
    # both solve the same strictly convex problem to far below the entries' size (1e-3 and up)
    np.testing.assert_allclose(P, reference, rtol=0, atol=1e-10)


def test_with_geometry_the_coupling_is_pot_s_entropic_fused_gromov_wasserstein(small):
    # <C, P> + g GW(P) - H(P) is POT's (1 - alpha) <M, P> + alpha GW(P) - eps H(P) with M = C, divided by eps:
    # alpha = g / (1 + g), eps = 1 / (1 + g); the same mirror descent from the same start reaches the same point
    C, A, B, mass_a, mass_b = small
    g = 20.0
    P, converged = coupling_posterior(C, A, B, geometry=g, mass_a=mass_a, mass_b=mass_b, n_outer=300, tol=1e-10)
    reference = ot.gromov.entropic_fused_gromov_wasserstein(C, A, B, mass_a, mass_b, alpha=g / (1 + g),
                                                             epsilon=1 / (1 + g), max_iter=300, tol=1e-12,
                                                             numItermax=10_000, stopThr=1e-13)
    assert converged
    # the two stop at slightly different steps (tolerances 1e-10 and 1e-12 on the change of P)
    np.testing.assert_allclose(P, reference, rtol=0, atol=1e-8)
    # and the structure term matters: the coupling is not the latent cost's alone
    plain, _ = coupling_posterior(C, geometry=0.0, mass_a=mass_a, mass_b=mass_b)
    assert np.abs(P - plain).max() > 1e-3


def test_pinned_anchors_keep_their_mass_on_their_partners(small):
    C, A, B, _, _ = small
    pinned_a, pinned_b = np.array([0, 5, 11, 17]), np.array([3, 5, 20, 9])
    C = C.copy()
    C[pinned_a] = np.nan  # never read: a pinned row's cost
    P, _ = coupling_posterior(C, A, B, geometry=50.0, pinned=(pinned_a, pinned_b))
    # the pinned entries hold the row's whole mass 1/24 but for exp(-50) of each other entry's (the margin of the
    # pinned cost over what any other entry can reach)
    np.testing.assert_allclose(P[pinned_a, pinned_b], 1 / 24, rtol=1e-12)
    free = np.setdiff1d(np.arange(24), pinned_b)
    assert P[np.ix_(np.setdiff1d(np.arange(24), pinned_a), pinned_b)].max() < 1e-15
    assert np.isfinite(P).all() and P[np.ix_(pinned_a, free)].max() < 1e-15


def test_a_non_finite_cost_or_a_missing_structure_is_refused(small):
    C, A, B, _, _ = small
    bad = C.copy()
    bad[3, 7] = np.inf
    with pytest.raises(ValueError, match="row 3, column 7"):
        coupling_posterior(bad, A, B)
    with pytest.raises(ValueError, match="structure matrices"):
        coupling_posterior(C, A, None, geometry=1.0)
    with pytest.raises(ValueError, match="geometry"):
        coupling_posterior(C, A, B, geometry=-1.0)


def test_coupling_edges_join_each_unaligned_row_to_its_most_probable_partners():
    # brute force: every unaligned row's k largest probabilities each way (its mass divided out), max-symmetrised
    rng = np.random.default_rng(1)
    P = rng.random((8, 7)) ** 4
    rows_a, rows_b = np.array([1, 2, 4, 5, 7]), np.array([0, 2, 3, 6])
    entity_a, entity_b = np.arange(8), 8 + np.arange(7)
    W = coupling_edges(P, rows_a, rows_b, entity_a, entity_b, 15, k=2).toarray()
    by_row, by_col = P / P.sum(1, keepdims=True), P / P.sum(0, keepdims=True)
    expected = np.zeros((15, 15))
    for i in rows_a:
        for j in sorted(rows_b, key=lambda j: -by_row[i, j])[:2]:
            expected[entity_a[i], entity_b[j]] = max(expected[entity_a[i], entity_b[j]], by_row[i, j])
    for j in rows_b:
        for i in sorted(rows_a, key=lambda i: -by_col[i, j])[:2]:
            expected[entity_a[i], entity_b[j]] = max(expected[entity_a[i], entity_b[j]], by_col[i, j])
    np.testing.assert_allclose(W, np.maximum(expected, expected.T), rtol=0, atol=1e-15)


def test_q_p_rounds_never_leave_the_anchors_aligned_worse_than_the_first_fit(monkeypatch):
    problem = ba.datasets.mad_toy("linear_shared", seed=0, n_anchors=12).shuffle_unaligned(seed=0)
    monkeypatch.setattr(refinement, "ROUNDS", 2)
    mad = ba.MAD(latent_dim=3, num_inducing=8, seed=0, engine_options={"max_iter": 80}).fit(problem)
    history = mad.correspondence_history_
    assert history[0]["round"] == 0 and len(history) >= 2
    first = history[0]["anchor_foscttm"]
    kept = [h for h in history if h["kept"]]
    assert len(kept) == 1 and kept[0]["anchor_foscttm"] <= first
    # the state kept is the kept round's: its held-out anchors' FOSCTTM, recomputed (the same seeded folds and
    # continuations; 1e-6 for the optimiser's round-off)
    score = anchor_foscttm(mad.anchor_pool("Y1", "Y2", held_out=True), mad.cost, ("Y1", "Y2"))
    assert score == pytest.approx(kept[0]["anchor_foscttm"], abs=1e-6) and score <= first
    assert 0 <= history[0]["accuracy"] <= 1
