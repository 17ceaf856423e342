"""The optimal-transport aligners: POT's coupling reproduced, an isometry recovered, anchors pinned, the
settings' choice and its ambiguity warning, semi-relaxed marginals, the estimator contract, the registry."""

from __future__ import annotations

import warnings

import numpy as np
import ot
import pytest
from sklearn.exceptions import NotFittedError

import bayesalign as ba
from bayesalign import AlignmentProblem, metrics
from bayesalign.transport import (
    FusedGromovWassersteinAlignment,
    GromovWassersteinAlignment,
    TransportAlignment,
    anchor_profiles,
    barycentric_projection,
    coupling_disagreement,
    coupling_rank,
    solve_coupling,
    structure_matrix,
)


@pytest.fixture(scope="module")
def branch():
    return ba.datasets.mmdma_simulation("branch", n_samples=90, n_features=(15, 25), seed=0)


def test_gw_coupling_is_pots_on_the_same_structure_matrices(branch):
    gw = GromovWassersteinAlignment(n_neighbors=10, epsilon=5e-3, n_outer=50).fit(branch)
    views = branch.views.standardised()
    A, B = structure_matrix(views["view1"], 10), structure_matrix(views["view2"], 10)
    n = A.shape[0]
    p = np.full(n, 1.0 / n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        T = ot.gromov.entropic_gromov_wasserstein(A, B, p, p, epsilon=5e-3, max_iter=50, tol=1e-7, numItermax=100)
    # the same POT calls on the same matrices: only the final renormalisation (by a sum within 1e-12 of 1) differs
    np.testing.assert_allclose(gw.coupling_, T / T.sum(), rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(gw.embedding_["view1"], barycentric_projection(T, views["view2"]), atol=1e-8)


def test_structure_matrix_is_hop_count_over_its_largest():
    # a path graph of 5 points with k = 1: hop counts 0..4, divided by 4
    D = structure_matrix(np.arange(5.0)[:, None] ** 1.5, 1)
    np.testing.assert_allclose(D[0], [0, 0.25, 0.5, 0.75, 1.0])


def test_gw_recovers_a_shuffled_rotated_copy():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3)) * [3.0, 1.5, 0.5]  # no symmetry: a unique isometry
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    perm = rng.permutation(60)
    A = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    Y = X[perm] @ Q
    B = np.sqrt(((Y[:, None] - Y[None]) ** 2).sum(-1))
    T, _, _ = solve_coupling(A / A.max(), B / B.max(), epsilon=1e-3, n_outer=200)
    # row i of X is row where(perm == i) of Y
    assert np.mean(T.argmax(1) == np.argsort(perm)) >= 0.95  # a few near-ties may blur under entropy


def test_coupling_rank_is_foscttm_by_hand():
    T = np.array([[0.5, 0.1, 0.2], [0.1, 0.3, 0.4], [0.2, 0.2, 0.2]])
    # rows: pair (0,0) none above -> 0; (1,1) one above (0.4) -> 1/2; (2,2) two tied -> (0 + 2/2)/2 = 1/2
    # columns: (0,0) 0; (1,1) none above 0.3 -> 0; (2,2) two above (0.4 > 0.2, tie 0.2) -> (1 + 1/2)/2 = 3/4
    expected = 0.5 * ((0 + 0.5 + 0.5) / 3 + (0 + 0 + 0.75) / 3)
    assert coupling_rank(T, [0, 1, 2], [0, 1, 2]) == pytest.approx(expected)
    assert coupling_disagreement(T, T) == pytest.approx(coupling_rank(T, [0, 1, 2], T.argmax(1)))


def test_anchor_profiles_are_standardised_distances():
    X = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
    P = anchor_profiles(X, [0])
    np.testing.assert_allclose(P[:, 0], (np.array([0, 5, 10]) - 5) / np.std([0, 5, 10]))


def test_fused_gw_pins_the_anchors_and_aligns_the_rest(branch):
    problem = branch.split_anchors(12, seed=0)
    fgw = FusedGromovWassersteinAlignment(n_neighbors=10, alpha=(0.3, 0.7)).fit(problem)
    anchors = problem.anchors_between("view1", "view2")
    rows = fgw.coupling_[anchors.index_a]
    # pinned: exp(-(1 - alpha) / epsilon) of the mass off the partner, far below this bound
    assert np.all(rows[np.arange(len(anchors)), anchors.index_b] / rows.sum(1) > 0.99)
    assert metrics.foscttm(fgw.embedding_, problem, views=("view1", "view2")) < 0.05  # chance is 0.5
    assert [c["alpha"] for c in fgw.criterion_] == [0.3, 0.7]
    assert fgw.setting_["alpha"] == min(fgw.criterion_, key=lambda c: c["criterion"])["alpha"]


def test_fused_gw_refuses_too_few_anchors_naming_the_views(branch):
    with pytest.raises(ValueError, match="3 anchor pair.*'view1' and 'view2'.*at least 4"):
        FusedGromovWassersteinAlignment(n_neighbors=10).fit(branch.split_anchors(3, seed=0))


def test_gw_chooses_by_the_anchors_when_there_are_some(branch):
    problem = branch.split_anchors(9, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gw = GromovWassersteinAlignment(n_neighbors=(5, 10), epsilon=5e-3).fit(problem)
    assert "anchors" in gw.criterion_name_
    anchors = problem.anchors_between("view1", "view2")
    best = min(gw.criterion_, key=lambda c: c["criterion"])
    assert gw.setting_["n_neighbors"] == best["n_neighbors"]
    assert best["criterion"] == pytest.approx(coupling_rank(gw.coupling_, anchors.index_a, anchors.index_b))


class _Scripted(TransportAlignment):
    """An aligner whose settings give fixed couplings and scores: the choice and its warning, by hand."""

    def __init__(self, scores=(0.10, 0.11, 0.30), mirror=1, marginals="balanced", n_outer=1):
        self.scores, self.mirror, self.marginals, self.n_outer = scores, mirror, marginals, n_outer

    def _grid(self, max_neighbors):
        return [{"index": i} for i in range(len(self.scores))]

    def _evaluate(self, problem, settings):
        self.criterion_name_ = "scripted"
        n = problem.views.n_samples["a"]
        couplings = [np.eye(n)[::-1] / n if i == self.mirror else np.eye(n) / n for i in range(len(settings))]
        return np.array(self.scores), [(T, 0.0, True) for T in couplings]

    def _final(self, problem, setting, result):
        return result


def test_near_equal_settings_that_disagree_are_flagged_ambiguous():
    problem = AlignmentProblem({"a": np.arange(8.0)[:, None], "b": np.arange(8.0)[:, None]})
    with pytest.warns(RuntimeWarning, match="ambiguous"):
        model = _Scripted().fit(problem)
    assert model.ambiguous_ and model.setting_ == {"index": 0}
    assert model.criterion_[1]["disagreement"] > 0.5 and model.criterion_[2]["disagreement"] == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the mirror scores far worse: no ambiguity, no warning
        assert not _Scripted(scores=(0.10, 0.30, 0.11)).fit(problem).ambiguous_
    stability = _Scripted(scores=(0.30, 0.35, 0.40), mirror=2)
    stability._criterion_is_disagreement = True  # as GW's stability criterion: the settings' mean disagreement
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # setting 1 agrees with the chosen 0: not ambiguous, however poor the mean
        assert not stability.fit(problem).ambiguous_
    stability.scores = (0.30, 0.35)
    stability.mirror = 1
    with pytest.warns(RuntimeWarning, match="no other setting agrees"):
        assert stability.fit(problem).ambiguous_


def test_semi_relaxed_leaves_a_population_absent_from_view_a_empty():
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(0, 1, 30))
    y = np.r_[x, 1.6 + 0.05 * rng.uniform(0, 1, 10)]  # view b: view a's points and 10 more, far away
    A, B = np.abs(x[:, None] - x[None]), np.abs(y[:, None] - y[None])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        relaxed, _, _ = solve_coupling(A, B, epsilon=5e-3, marginals="semi-relaxed", n_outer=300)
        balanced, _, _ = solve_coupling(A, B, epsilon=5e-3, n_outer=300)
    np.testing.assert_allclose(relaxed.sum(1), 1 / 30, rtol=1e-6)  # view a's marginal is kept exactly
    assert relaxed[:, 30:].sum() < 0.01
    assert balanced[:, 30:].sum() > 0.2  # 10/40 of the columns' mass, up to the inexact Sinkhorn projection


def test_estimator_contract_and_bad_input(branch):
    gw = GromovWassersteinAlignment(n_neighbors=10, epsilon=5e-3)
    assert gw.get_params()["epsilon"] == 5e-3 and gw.set_params(n_outer=20).n_outer == 20
    with pytest.raises(NotFittedError):
        gw.match_probabilities()
    before = np.array(branch.views["view1"])
    gw.fit(branch)
    np.testing.assert_array_equal(branch.views["view1"], before)
    P = gw.match_probabilities("view2", "view1")
    np.testing.assert_allclose(P.sum(1), 1.0, rtol=1e-12)
    assert P.shape == (90, 90) and gw.embedding_.n_components == 25
    with pytest.raises(ValueError, match="aligns 'view1' and 'view2'"):
        gw.match_probabilities("view1", "view1")
    three = AlignmentProblem({v: branch.views["view1"] for v in "abc"})
    with pytest.raises(ValueError, match="aligns two views; this problem has 3"):
        GromovWassersteinAlignment().fit(three)
    with pytest.raises(ValueError, match="marginals must be one of"):
        GromovWassersteinAlignment(marginals="unbalanced").fit(branch)
    with pytest.raises(ValueError, match="n_neighbors must be an int >= 1, got 2.5"):
        GromovWassersteinAlignment(n_neighbors=2.5).fit(branch)
    with pytest.raises(ValueError, match="epsilon must be positive"):
        GromovWassersteinAlignment(epsilon=(5e-3, 0.0)).fit(branch)


def test_registry_matches_by_the_coupling(branch):
    from bayesalign.registry import METHODS, run_method

    problem = branch.split_anchors(9, seed=0).shuffle_unaligned(seed=0)
    result = run_method("fused-gw", problem, options={"n_neighbors": 10, "alpha": 0.5})
    al = result.alignments[("view1", "view2")]
    assert METHODS["fused-gw"].kind == "coupling" and len(al) == 81
    assert set(al.index_a) <= set(problem.unaligned("view1"))
    assert metrics.matching_accuracy(al, problem) > 0.15  # over ten times chance (1/81)
    P = result.model.match_probabilities("view1", "view2")
    rows_b = problem.unaligned("view2")
    # each pair's probability is its row's coupling mass on it, among the not-anchored columns
    expected = P[al.index_a, al.index_b] / P[al.index_a][:, rows_b].sum(1)
    np.testing.assert_allclose(al.probabilities, expected, rtol=1e-10)
