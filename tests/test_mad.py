"""Tests of bayesalign.mad: costs, problem checks, the MAD pipeline on the paper's toy data."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from bayesalign.data import AlignmentProblem, Correspondence, LatentEmbedding
from bayesalign.matching import likelihood_cost, mean_distance_cost, mutual_nearest, pair_costs


# ----------------------------------------------------------------------------------------
# Pure cost functions
# ----------------------------------------------------------------------------------------
def test_likelihood_cost_equals_gaussian_logpdf():
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(0)
    ma, mb = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    va, vb = rng.uniform(0.1, 2, size=(4, 3)), rng.uniform(0.1, 2, size=(5, 3))
    cost = likelihood_cost(ma, va, mb, vb)
    for i in range(4):
        for j in range(5):
            ref = -multivariate_normal(np.zeros(3), np.diag(va[i] + vb[j])).logpdf(ma[i] - mb[j])
            assert cost[i, j] == pytest.approx(ref, rel=1e-12)
    ia, ib = np.array([0, 3, 2]), np.array([4, 0, 2])
    np.testing.assert_allclose(pair_costs("likelihood", ma, va, mb, vb, ia, ib), cost[ia, ib], rtol=1e-12)
    np.testing.assert_allclose(pair_costs("mean", ma, va, mb, vb, ia, ib),
                               mean_distance_cost(ma, mb)[ia, ib], rtol=1e-12)


def test_expected_squared_distance_changes_no_assignment():
    # E||x_i - x_j||^2 = D_ij + tr S_i + tr S_j: the same Hungarian solution as D
    rng = np.random.default_rng(1)
    ma, mb = rng.normal(size=(12, 2)), rng.normal(size=(12, 2))
    va, vb = rng.uniform(0.01, 3, size=(12, 2)), rng.uniform(0.01, 3, size=(12, 2))
    mean = mean_distance_cost(ma, mb)
    expected = mean + va.sum(1)[:, None] + vb.sum(1)[None, :]
    assert np.array_equal(linear_sum_assignment(mean)[1], linear_sum_assignment(expected)[1])


def test_likelihood_cost_beats_mean_cost_with_heteroscedastic_posteriors():
    # Posterior means scatter around the true latent point with per-point variances
    # spread over three orders of magnitude: the likelihood cost is the correct model.
    acc_mean, acc_lik = [], []
    for seed in range(20):
        rng = np.random.default_rng(seed)
        n, q = 40, 2
        x = rng.normal(size=(n, q))
        va = np.exp(rng.uniform(np.log(1e-3), 0.0, size=(n, 1))) * np.ones((1, q))
        vb = np.exp(rng.uniform(np.log(1e-3), 0.0, size=(n, 1))) * np.ones((1, q))
        ma = x + np.sqrt(va) * rng.normal(size=(n, q))
        mb = x + np.sqrt(vb) * rng.normal(size=(n, q))
        acc_mean.append(np.mean(linear_sum_assignment(mean_distance_cost(ma, mb))[1] == np.arange(n)))
        acc_lik.append(np.mean(linear_sum_assignment(likelihood_cost(ma, va, mb, vb))[1] == np.arange(n)))
    # the likelihood cost must win on average by more than the spread of the paired difference allows by chance
    assert np.mean(acc_lik) - np.mean(acc_mean) > 0.08
    assert np.mean(np.array(acc_lik) >= np.array(acc_mean)) >= 0.8


def test_mutual_nearest_brute_force():
    rng = np.random.default_rng(2)
    cost = rng.normal(size=(7, 9))
    mask = mutual_nearest(cost)
    for i in range(7):
        for j in range(9):
            assert mask[i, j] == (cost[i].argmin() == j and cost[:, j].argmin() == i)


# ----------------------------------------------------------------------------------------
# Problem checks
# ----------------------------------------------------------------------------------------
def _three_views():
    x = np.random.default_rng(0).normal(size=(10, 3))
    return {"a": x, "b": x + 1, "c": x - 1}


def test_anchor_groups_join_chains_and_catch_contradictions():
    views = _three_views()
    problem = AlignmentProblem(views, anchors=[Correspondence.from_pairs([(0, 1), (2, 3)], ("a", "b")),
                                               Correspondence.from_pairs([(1, 5), (3, 4), (7, 7)], ("b", "c"))])
    assert problem.anchor_groups().tolist() == [[0, 1, 5], [2, 3, 4]]  # (b7, c7) misses view a
    bad = problem.replace(anchors=list(problem.anchors.values())
                          + [Correspondence.from_pairs([(0, 6)], ("a", "c"))])
    with pytest.raises(ValueError, match="rows 5 and 6 of view 'c'"):
        bad.anchor_groups()
    direct = AlignmentProblem(views, anchors=Correspondence.from_pairs([(0, 1), (0, 2)], ("a", "b")))
    with pytest.raises(ValueError, match=r"row 0 of view 'a' is anchored to rows \[1, 2\] of view 'b'"):
        direct.anchor_groups()


def _problem_with_anchors(pairs, n=12):
    x = np.random.default_rng(0).normal(size=(n, 3))
    return AlignmentProblem.paired({"a": x, "b": x[:, ::-1] + 1.0}).replace(
        anchors=Correspondence.from_pairs(pairs, ("a", "b")))


def test_bad_problems_get_clear_errors():
    from bayesalign.mad import MAD

    with pytest.raises(ValueError, match="at least 3 anchors"):
        MAD().fit(_problem_with_anchors([(0, 0), (1, 1)]))
    with pytest.raises(ValueError, match=r"row 0 of view 'a' is anchored to rows \[0, 1\]"):
        MAD().fit(_problem_with_anchors([(0, 0), (0, 1), (2, 2), (3, 3)]))
    with pytest.raises(ValueError, match="view 'a' has no unaligned rows"):
        MAD().fit(_problem_with_anchors([(i, i) for i in range(12)]))
    problem = _problem_with_anchors([(0, 0), (1, 1), (2, 2)])
    problem.anchors[("a", "b")] = Correspondence(("a", "b"), [0, 1, 20], [0, 1, 2])  # bypasses the constructor
    with pytest.raises(ValueError, match="row 20 is out of range for view 'a' with 12 rows"):
        MAD().fit(problem)
    with pytest.raises(ValueError, match="duplicated pair"):  # the data layer refuses duplicates first
        _problem_with_anchors([(0, 0), (1, 1), (0, 0)])
    with pytest.raises(TypeError, match="AlignmentProblem"):
        MAD().fit({"a": np.zeros((3, 2)), "b": np.zeros((3, 2))})
    with pytest.raises(ValueError, match="cost must be one of"):
        MAD(cost="expected").fit(_problem_with_anchors([(0, 0), (1, 1), (2, 2)]))


# ----------------------------------------------------------------------------------------
# The pipeline on the MAD paper's toy data (one MRD fit shared by the tests below)
# ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def toy():
    from bayesalign.datasets import mad_toy
    from bayesalign.mad import MAD

    problem = mad_toy("linear_shared", seed=0, n_anchors=10).shuffle_unaligned(seed=0)
    before = {v: problem.views[v].copy() for v in problem.views}, problem.anchors_between("Y1", "Y2").pairs.copy()
    # the paper's procedure (MRD on the anchors, then q(x) per view), whose Table 1 these tests follow
    mad = MAD(latent_dim=3, num_inducing=10, seed=0, training="anchors",
              engine_options=dict(max_iter=150, warmup_iters=50)).fit(problem)
    return problem, mad, before


def test_fit_leaves_the_problem_unchanged(toy):
    problem, mad, (views, anchors) = toy
    for v in views:
        np.testing.assert_array_equal(problem.views[v], views[v])
    np.testing.assert_array_equal(problem.anchors_between("Y1", "Y2").pairs, anchors)
    assert set(problem.anchors) == {("Y1", "Y2")} and len(problem.anchors[("Y1", "Y2")]) == 10
    rows, mean, var = mad.posteriors_["Y2"]
    np.testing.assert_array_equal(rows, problem.unaligned("Y2"))
    assert mean.shape == var.shape == (90, 3) and (var > 0).all()


def _sequence_kendall_tau(alignment, problem):
    """Kendall-tau distance in the order of the toy's sequence (view Y1's rows), whatever the labels of Y2.

    ``metrics.kendall_tau_distance`` orders the partners by their row index in Y2, which
    ``shuffle_unaligned`` randomised; mapping each predicted partner back to the row of Y1 it
    truly belongs to measures the paper's quantity.
    """
    from bayesalign.metrics import kendall_tau_distance

    owner = {j: i for i, j in problem.truth_between("Y1", "Y2").pairs.tolist()}
    return kendall_tau_distance([owner[int(j)] for j in alignment.index_b], alignment.index_a.tolist())


def test_hungarian_recovers_the_toy_alignment(toy):
    from bayesalign.metrics import evaluate

    problem, mad, _ = toy
    al = mad.align(matcher="hungarian", cost="mean")
    out = evaluate(al, problem)
    # the paper's Table 1 (N=100, N_init=8) gives 0.001
    assert _sequence_kendall_tau(al, problem) < 0.015
    assert out["accuracy"] > 0.85
    assert mad.shared_dims("Y1", "Y2").size >= 2  # the toy's shared latent is 2-D
    # calibration: the confident half of the pairs is right
    assert out["precision_at_coverage"] > 0.95 and 0 <= out["ece"] <= 1


def test_every_alignment_carries_probabilities(toy):
    from bayesalign import matching

    problem, mad, _ = toy
    rows_a, rows_b, C = mad.cost_matrix(cost="likelihood")
    _, _, P = mad.match_probabilities(cost="likelihood")
    assert P.min() >= 0 and P.sum(1).max() <= 1 + 1e-12 and P.sum(0).max() <= 1 + 1e-12
    assert P.sum() > 89.9  # square problem without dustbin: (almost) doubly stochastic
    for matcher in ("hungarian", "myopic", "sinkhorn", "perturb"):
        al = mad.align(matcher=matcher, n_samples=30)
        assert len(al) == 90 and al.probabilities.shape == (90,)
        assert ((al.confidence >= 0) & (al.confidence <= 1)).all()
        assert np.bincount(np.searchsorted(rows_a, al.index_a), al.probabilities).max() <= 1.0
        np.testing.assert_array_equal(al.candidates_a, problem.unaligned("Y1"))
        if matcher != "perturb":  # the Sinkhorn marginal of each chosen pair
            ia, ib = np.searchsorted(rows_a, al.index_a), np.searchsorted(rows_b, al.index_b)
            np.testing.assert_allclose(al.probabilities, P[ia, ib], atol=1e-12)
    hungarian, expected = mad.align(matcher="hungarian"), mad.align(matcher="sinkhorn")
    assert expected.probabilities.sum() >= hungarian.probabilities.sum() - 1e-9  # it maximises that sum
    myopic = mad.align(matcher="myopic", order=np.arange(90)[::-1])
    ref = matching.myopic_assignment(C, order=np.arange(90)[::-1])
    np.testing.assert_array_equal(myopic.index_b, rows_b[ref.index_b])


def test_match_log_probabilities_are_the_log_of_the_sinkhorn_marginals_for_every_pair(toy, monkeypatch):
    from bayesalign import matching
    from bayesalign.matching import matcher

    problem, mad, _ = toy
    rows_a, rows_b, C = mad.cost_matrix()
    for T in (1.0, 0.01):  # at T = 0.01 most probabilities underflow to 0; their logs stay finite
        _, _, P = mad.match_probabilities(temperature=T)
        ra, rb, L = mad.match_log_probabilities(temperature=T)
        np.testing.assert_array_equal(ra, rows_a), np.testing.assert_array_equal(rb, rows_b)
        assert L.shape == (90, 90) and np.isfinite(L).all() and L.max() <= 1e-3
        # the same marginals where P holds them (Sinkhorn stops at a marginal error of 1e-3)
        np.testing.assert_allclose(np.exp(L), P, atol=2e-3)
        # and a doubly stochastic matrix for every pair, also those P rounds to 0 (square, no dustbin)
        np.testing.assert_allclose(np.exp(L).sum(1), 1.0, atol=2e-3)
        np.testing.assert_allclose(np.exp(L).sum(0), 1.0, atol=2e-3)
        if T == 0.01:
            assert (P == 0).mean() > 0.5
        # L is the cost less a constant per row and one per column: the optimal assignment is the cost's
        assert np.allclose((L + C / T) - (L + C / T)[:, :1], (L + C / T)[:1] - (L + C / T)[0, 0], atol=1e-8)
        np.testing.assert_array_equal(matching.linear_assignment(-L).index_b, matching.linear_assignment(C).index_b)
    # the sparse solve (kNN candidate pairs only, as above DENSE_SINKHORN_MAX pairs): the same logs wherever P is
    # not tiny
    dense = mad.match_log_probabilities()[2]
    monkeypatch.setattr(matcher, "DENSE_SINKHORN_MAX", 100)
    sparse = mad.match_log_probabilities()[2]
    assert np.isfinite(sparse).all()
    np.testing.assert_allclose(np.exp(sparse), np.exp(dense), atol=5e-3)


def test_cost_limit_and_unequal_sizes_leave_points_unmatched(toy):
    import copy

    problem, mad, _ = toy
    full = mad.align(cost="mean")
    limit = float(np.quantile(full.costs, 0.8))
    limited = mad.align(cost="mean", cost_limit=limit)
    assert (limited.costs < limit).all() and 0 < limited.unmatched_a.size < 90
    # drop 15 candidate rows of Y1: 75 x 90, every row of Y1 matched, 15 of Y2 left over
    small = copy.copy(mad)
    rows, mean, var = mad.posteriors_["Y1"]
    small.posteriors_ = dict(mad.posteriors_, Y1=(rows[15:], mean[15:], var[15:]))
    rect = small.align(matcher="hungarian")
    assert len(rect) == 75 and rect.unmatched_b.size == 15 and rect.unmatched_a.size == 0
    assert rect.probabilities.max() <= 1.0


def test_match_one_streams_with_the_updated_posterior(toy):
    problem, mad, _ = toy
    rows_b = mad.posteriors_["Y2"][0][:4]
    mad.reset_stream()
    taken = []
    for j in rows_b:
        row, cost = mad.match_one(problem.views["Y2"][j], view="Y2")
        taken.append(row)
    assert len(set(taken)) == 4 and all(r in set(problem.unaligned("Y1")) for r in taken)
    stream = mad._stream[("Y1", "Y2")]
    # the first arrival is inferred exactly as MRD.infer does; later ones see q(u) refreshed with it
    first, _ = mad.model_.infer("Y2", problem.views["Y2"][rows_b[:1]])
    np.testing.assert_allclose(stream.q_mean[0], first[0], atol=1e-6)
    later, _ = mad.model_.infer("Y2", problem.views["Y2"][rows_b[3:4]])
    assert 0 < np.abs(stream.q_mean[3] - later[0]).max() < 0.5
    mad.reset_stream()


def test_match_one_maps_a_raw_row_as_the_standardised_fit_saw_its_rows(toy, tmp_path):
    # standardize=True fits on standardised columns: a streamed raw row must be mapped by the training view's
    # column means and deviations
    from bayesalign.mad import MAD, load

    problem, _, _ = toy
    scales = np.logspace(-2, 2, problem.views.n_features["Y2"])  # columns in very different units
    problem = problem.replace(views=type(problem.views)({"Y1": problem.views["Y1"],
                                                          "Y2": problem.views["Y2"] * scales}))
    mad = MAD(latent_dim=3, num_inducing=10, seed=0, training="anchors", standardize=True,
              engine_options=dict(max_iter=60, warmup_iters=20)).fit(problem)
    j = int(mad.posteriors_["Y2"][0][0])
    y = problem.views["Y2"][j]
    centre, scale = problem.views.column_scaling("Y2")
    np.testing.assert_allclose(problem.views.standardised()["Y2"][j], (y - centre) / scale, rtol=1e-12)
    expected, _ = mad.model_.infer("Y2", ((y - centre) / scale)[None])
    for model in (mad, load(_saved(mad, tmp_path))):
        model.reset_stream()
        model.match_one(y, view="Y2")
        np.testing.assert_allclose(model._stream[("Y1", "Y2")].q_mean[0], expected[0], atol=1e-6)
    raw, _ = mad.model_.infer("Y2", y[None])  # what the raw row would have given: far from it
    assert np.abs(raw[0] - expected[0]).max() > 0.1
    with pytest.raises(ValueError, match="view 'Y2': the row has 3 values"):
        mad.match_one(y[:3], view="Y2")


def _saved(mad, tmp_path):
    from bayesalign.mad import save

    path = tmp_path / "mad.npz"
    save(mad, path)
    return path


def test_a_self_training_round_the_anchors_judge_worse_is_undone(toy, tmp_path):
    from bayesalign.mad import load, save, self_training
    from bayesalign.metrics import evaluate

    problem, mad, _ = toy
    before = evaluate(mad.align(), problem)["accuracy"]

    def judged(rise):  # the anchors' score before the round as MAD computes it; after it, that plus `rise`
        model, calls, first = copy.deepcopy(mad), [], []
        score = self_training.anchor_foscttm

        def scored(pool, cost, views):
            calls.append((len(pool.mean_a) - len(pool.true_a), len(pool.mean_b) - len(pool.true_b)))
            value = score(pool, cost, views)
            first.append(value)
            return value if len(calls) == 1 else first[0] + rise
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(self_training, "anchor_foscttm", scored)
            first_model = model.model_
            model.self_train(confidence_threshold=0.9, max_rounds=1)
        return model, first_model, calls

    # worse after the round: its pairs and refit are undone (the verdict forced, so that no CPU's round-off decides)
    trained, first_model, calls = judged(1.0)
    first = trained.self_training_history_[0]
    assert first["added"] >= 20 and first["correct"] >= 0.95 * first["added"]
    assert first["kept"] is False and np.isfinite(first["anchor_foscttm"])
    assert first["judge_pairs"] == "reinferred"  # the paper's anchors-only MRD cannot hold its anchors out
    # judged among the same rows before and after, though the round tied some of them
    assert len(calls) == 2 and calls[0] == calls[1] == (90, 90)
    assert trained.model_ is first_model and trained.discovered_ == {} and len(trained.anchors_) == 10
    assert evaluate(trained.align(), problem)["accuracy"] == before
    assert mad.self_training_history_ == []  # the original is untouched
    save(trained, tmp_path / "undone.npz")  # the record of the undone round is saved with the model
    assert load(tmp_path / "undone.npz").self_training_history_ == trained.self_training_history_
    # a tie keeps the round
    kept, first_model, _ = judged(0.0)
    entry = kept.self_training_history_[0]
    assert entry["kept"] is True and kept.model_ is not first_model
    assert len(kept.anchors_) == 10 + entry["added"]
    assert len(kept.discovered_[("Y1", "Y2")]["index_a"]) == entry["added"]


def test_self_training_adds_right_pairs(toy, monkeypatch):
    import copy

    problem, mad, _ = toy
    # without the anchors' judge (too few anchor pairs to judge on), the round is kept
    monkeypatch.setattr("bayesalign.mad.self_training.MIN_CALIBRATION_PAIRS", 11)
    trained = copy.deepcopy(mad).self_train(confidence_threshold=0.9, max_rounds=1)
    first = trained.self_training_history_[0]
    assert first["added"] >= 20 and first["correct"] >= 0.95 * first["added"]
    assert first["kept"] is True and first["anchor_foscttm"] is None and first["judge_pairs"] is None
    assert len(trained.anchors_) == 10 + first["added"]
    al = trained.align()
    assert al.info["n_discovered"] == first["added"] and len(al) == 90  # discovered pairs are reported too
    found = trained.discovered_[("Y1", "Y2")]
    assert (found["probability"] >= 0.9).all() and (found["round"] == 1).all()
    assert mad.self_training_history_ == []  # the original is untouched
    # the other way round: the same pairs
    back = trained.align("Y2", "Y1")
    assert back.info["n_discovered"] == first["added"] and len(back) == 90
    assert set(zip(back.index_b.tolist(), back.index_a.tolist())) == set(zip(al.index_a.tolist(),
                                                                             al.index_b.tolist()))
    # myopic arrival order: positions among the rows still to match, said when given over all candidates
    still = trained.align(include_discovered=False).candidates_b
    assert trained.align(matcher="myopic", order=np.arange(still.size)[::-1]).info["n_discovered"] == first["added"]
    with pytest.raises(ValueError, match="rows of view 'Y2' are still to match"):
        trained.align(matcher="myopic", order=np.arange(al.candidates_b.size))


def test_sparse_path_gives_the_dense_matching(toy):
    problem, mad, _ = toy
    for cost in ("mean", "likelihood"):
        dense, sparse = mad.align(cost=cost, sparse=False), mad.align(cost=cost, sparse=True, n_neighbors=10)
        np.testing.assert_array_equal(dense.pairs, sparse.pairs)
        # probabilities from Sinkhorn on the kNN candidates only: within the solver's tolerance, widened by the
        # candidates left out
        np.testing.assert_allclose(sparse.probabilities, dense.probabilities, atol=0.02)
    assert mad.align(cost="mean", sparse=True).info["certified"]
    with pytest.raises(ValueError, match="needs the dense path"):
        mad.align(matcher="perturb", sparse=True)


def test_gromov_wasserstein_recovers_an_isometry():
    from scipy.spatial.distance import cdist

    from bayesalign.transport import gromov_wasserstein_coupling

    rng = np.random.default_rng(3)
    x = rng.normal(size=(25, 3)) * [3.0, 1.5, 0.5]  # anisotropic: no symmetry to confuse the coupling
    rotation, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    perm = rng.permutation(25)
    y = 2.0 * x[perm] @ rotation + 5.0  # another frame and unit, rows shuffled
    da, db = cdist(x, x), cdist(y, y)
    T = gromov_wasserstein_coupling(da / da.max(), db / db.max())
    assert T.sum() == pytest.approx(1.0) and T.min() >= 0
    assert np.mean(perm[T.argmax(1)] == np.arange(25)) >= 0.95  # row i of x is row perm^-1(i) of y


def test_fewer_anchors_than_latent_dimensions_pad_the_pca_initialisation():
    """5 anchors allow 4 PCA components: MAD with latent_dim=6 starts the other 2 at small random values
    (MRD itself refuses such an init) and still aligns."""
    from bayesalign.datasets import mad_toy
    from bayesalign.mad import MAD
    from bayesalign.metrics import evaluate

    problem = mad_toy("linear_shared", seed=0, n=60).split_anchors(5, seed=0).shuffle_unaligned(seed=0)
    with pytest.warns(RuntimeWarning, match="5 anchors allow 4 PCA dimensions"):
        mad = MAD(latent_dim=6, num_inducing=5, seed=0, training="anchors",
                  engine_options=dict(max_iter=60, warmup_iters=20)).fit(problem)
    assert mad.model_.module_.q_mean.shape == (5, 6)
    assert evaluate(mad.align(), problem)["accuracy"] > 0.9  # chance: 1/55


def test_sparse_likelihood_path_completes_the_candidates_until_every_row_can_match(toy):
    """The kNN candidates of the likelihood cost's sparse path are completed until a full matching exists, as
    matching.assign does for the mean cost: with k = 1 the graph alone has none, yet every row is matched; with
    k = 2 the candidates hold the dense optimum on this toy (the cost sums agree to 1%; 8% apart at k = 1)."""
    problem, mad, _ = toy
    dense = mad.align(matcher="hungarian", cost="likelihood", sparse=False)
    one = mad.align(matcher="hungarian", cost="likelihood", sparse=True, n_neighbors=1)
    two = mad.align(matcher="hungarian", cost="likelihood", sparse=True, n_neighbors=2)
    assert len(one) == len(two) == len(dense)
    assert abs(two.costs.sum() - dense.costs.sum()) <= 0.01 * abs(dense.costs.sum())


# ----------------------------------------------------------------------------------------
# The scikit-learn contract and the learned attributes
# ----------------------------------------------------------------------------------------
def test_mad_follows_the_estimator_contract():
    from sklearn.base import clone
    from sklearn.exceptions import NotFittedError

    from bayesalign.mad import MAD

    mad = MAD(latent_dim=4, seed=3, engine_options={"max_iter": 7})
    assert len(mad.get_params()) <= 12
    copy = clone(mad)
    assert copy.get_params() == mad.get_params() and copy.engine_options is not mad.engine_options
    assert copy.set_params(cost="mean", engine_options={"init": "pca"}).get_params()["cost"] == "mean"
    for name, value in MAD().get_params().items():  # every parameter can be set, and __init__ only stores
        assert getattr(MAD().set_params(**{name: value}), name) is value
    with pytest.raises(TypeError, match="max_iter"):
        MAD(latent_dim=4, max_iter=7)  # an engine's keyword belongs in engine_options
    for method in ("align", "cost_matrix", "match_probabilities", "posteriors", "self_train"):
        with pytest.raises(NotFittedError, match="not fitted"):
            getattr(mad, method)()
    problem = _problem_with_anchors([(0, 0), (1, 1), (2, 2)])
    with pytest.raises(ValueError, match="latent_dim must be a positive integer"):
        MAD(latent_dim=0).fit(problem)
    with pytest.raises(ValueError, match=r"engine_options must not set \['seed'\]"):
        MAD(engine_options={"seed": 1}).fit(problem)
    for engine, option in (("collapsed", "max_epochs"), ("svi", "max_iter")):  # the other engine's word
        with pytest.raises(ValueError, match=rf"engine_options has no \w+ parameter \['{option}'\]"):
            MAD(engine=engine, engine_options={option: 5}).fit(problem)
    # a nested key sets one engine option in a new dict, the others kept
    nested = clone(mad).set_params(engine_options__tol=1e-6)
    assert nested.engine_options == {"max_iter": 7, "tol": 1e-6} and mad.engine_options == {"max_iter": 7}
    params = mad.get_params()
    fitted = MAD(latent_dim=2, num_inducing=4, seed=0, engine_options={"max_iter": 5}).fit(
        _problem_with_anchors([(i, i) for i in range(4)]))
    assert fitted.get_params()["engine_options"] == {"max_iter": 5} and params == mad.get_params()


def _misfit_embedding(mad):
    """Every row's shared coordinates as the default likelihood cost compares them: the cross-view misfit's
    basis, the misfit added to the variances (by hand, from ``cross_view_misfit``)."""
    misfit, dims, emb = mad.cross_view_misfit(), mad.shared_dims("Y1", "Y2"), mad.embedding_
    moved = {v: misfit.apply(emb.means[v][:, dims], emb.variances[v][:, dims]) for v in ("Y1", "Y2")}
    return LatentEmbedding({v: m for v, (m, _) in moved.items()}, {v: s for v, (_, s) in moved.items()})


def test_embedding_holds_every_row_and_matches_like_align(toy):
    from bayesalign.matching import match

    problem, mad, _ = toy
    emb = mad.embedding_
    assert emb.means["Y1"].shape == (100, 3) and emb.variances["Y2"].shape == (100, 3)
    rows, mean, var = mad.posteriors_["Y2"]
    np.testing.assert_array_equal(emb.means["Y2"][rows], mean)
    np.testing.assert_array_equal(emb.shared_dims, mad.shared_dims("Y1", "Y2"))
    anchors = mad.anchors_
    # an anchor group is one latent point: the same q(x) in both views
    np.testing.assert_array_equal(emb.means["Y1"][anchors[:, 0]], emb.means["Y2"][anchors[:, 1]])
    # the mean cost compares the shared coordinates as they are: match on the embedding
    al = mad.align(matcher="hungarian", cost="mean", temperature="posterior")
    direct = match(emb, problem, matcher="hungarian", cost="mean")
    assert al.pairs.tolist() == direct.pairs.tolist()
    np.testing.assert_allclose(al.probabilities, direct.probabilities)
    # the likelihood cost with the cross-view misfit: match on the shared coordinates with the misfit added
    emb = _misfit_embedding(mad)
    al = mad.align(matcher="hungarian", cost="likelihood", temperature="posterior")
    direct = match(emb, problem, matcher="hungarian", cost="likelihood")
    assert al.pairs.tolist() == direct.pairs.tolist()
    np.testing.assert_allclose(al.probabilities, direct.probabilities)
    # the default: the same pairs, with the probabilities at the temperature fitted on the anchors
    al = mad.align(matcher="hungarian", cost="likelihood")
    direct = match(emb, problem, matcher="hungarian", cost="likelihood", temperature=mad.calibrate_temperature())
    assert al.pairs.tolist() == direct.pairs.tolist() and "anchor pairs" in al.info["temperature_from"]
    # align() starts Sinkhorn from the temperature search's potentials, this call cold: both stop within the
    # marginal tolerance of 1e-3 of the same solution
    np.testing.assert_allclose(al.probabilities, direct.probabilities, rtol=0, atol=2e-3)


def test_temperature_fitted_on_the_anchors_minimises_their_negative_log_probability(toy):
    # brute force: the anchors re-inferred view by view join the unaligned rows; the objective is minus the log
    # Sinkhorn marginal of the true anchor pairs; T* must beat every temperature of a grid over the search range.
    # The reference marginals come from a log-domain Sinkhorn written here (temperatures halving from the cost
    # spread down to t, each warm-started from the last; no candidates), run to a column error of 1e-6 or 3,000
    # sweeps at t (near-hard costs converge sublinearly), whose log P stays exact where P underflows
    from scipy.special import logsumexp

    from bayesalign.matching import likelihood_cost

    problem, mad, _ = toy
    T = mad.calibrate_temperature()
    record = mad.calibration_[("Y1", "Y2", "likelihood")]
    assert record["pairs"] == 10 and not record["fallback"] and record["temperature"] == T
    rows_a, rows_b, _ = mad.cost_matrix()
    dims = mad.shared_dims("Y1", "Y2")
    emb, anchors = mad.embedding_, problem.anchors_between("Y1", "Y2")
    qa = [np.asarray(z)[:, dims] for z in mad.model_.infer("Y1", problem.views["Y1"][anchors.index_a])]
    qb = [np.asarray(z)[:, dims] for z in mad.model_.infer("Y2", problem.views["Y2"][anchors.index_b])]
    ma = np.vstack([emb.means["Y1"][rows_a][:, dims], qa[0]])
    va = np.vstack([emb.variances["Y1"][rows_a][:, dims], qa[1]])
    mb = np.vstack([emb.means["Y2"][rows_b][:, dims], qb[0]])
    vb = np.vstack([emb.variances["Y2"][rows_b][:, dims], qb[1]])
    misfit = mad.cross_view_misfit()  # the likelihood cost compares them with the cross-view misfit added
    C = likelihood_cost(*misfit.apply(ma, va), *misfit.apply(mb, vb))
    true_a, true_b = rows_a.size + np.arange(10), rows_b.size + np.arange(10)

    def objective(t):
        stages = [t * 2.0 ** k for k in range(int(np.ceil(np.log2(max(np.ptp(C) / t, 1.0)))), -1, -1)]
        u, v = np.zeros(C.shape[0]), np.zeros(C.shape[1])  # potentials in cost units
        for s in stages:
            for sweep in range(3000 if s == t else 300):
                v = -s * logsumexp((u[:, None] - C) / s, axis=0)
                u = -s * logsumexp((v[None, :] - C) / s, axis=1)  # rows exact
                if sweep % 10 == 0 and np.abs(np.exp((u[:, None] + v[None, :] - C) / s).sum(0) - 1).max() < (
                        1e-6 if s == t else 1e-3):
                    break
        assert np.abs(np.exp((u[:, None] + v[None, :] - C) / t).sum(0) - 1).max() < 1e-3
        return -((u[:, None] + v[None, :] - C) / t)[true_a, true_b].sum()

    grid = np.exp(np.linspace(np.log(0.1), np.log(1e4), 14))  # a point every factor of about 2.4 in T
    best = min(objective(t) for t in grid)
    # the bounded search stops within 0.05 of log T (5% of T); the objective is flat there to well under 1%
    assert objective(T) <= best + 1e-2 * abs(best) + 1e-6
    # the package's Sinkhorn stops at a marginal error of 1e-3, so its log P of a pair is within ~1e-3 of exact
    assert record["objective"] == pytest.approx(objective(T), rel=1e-3, abs=10 * 1e-3)
    assert record["objective"] <= record["objective_at_posterior_temperature"] + 1e-9
    al = mad.align()  # the default, temperature="anchors"
    assert al.info["temperature"] == T and "anchor pairs" in al.info["temperature_from"]
    al = mad.align(temperature="posterior")
    assert al.info["temperature"] == 1.0 and al.info["temperature_from"] == "posterior variances"
    assert mad.temperature == "anchors"  # the estimator's own setting is untouched


@pytest.mark.parametrize("minimum", [-4.0, -2.0, -0.3, 0.0, 0.35, 1.7, 6.0, 9.0, 12.0])
@pytest.mark.parametrize("one_sided", [False, True])
def test_temperature_search_from_the_posterior_temperature_finds_the_minimum(minimum, one_sided):
    # brute force: the search outwards from the centre (0) must land within its tolerance of the minimum of a
    # unimodal function over [lo, hi] (the minimum itself, a bound when it lies beyond, the centre when a one-sided
    # search cannot go below it), report the value at the centre it was given, and never evaluate outside [lo, hi]
    from bayesalign.mad.calibration import _search_from

    lo, hi = (0.0 if one_sided else -np.log(10)), 4 * np.log(10)
    seen = []

    def objective(x):
        seen.append(x)
        return abs(x - minimum) ** 1.5 + 0.1 * (x - minimum) ** 2  # unimodal, not a parabola, kinked at its minimum

    (x, value), at_centre = _search_from(objective, 0.0, lo, hi)
    searched = list(seen)
    assert min(searched) >= lo and max(searched) <= hi
    assert len(searched) == len(set(searched)) <= 20  # no point solved twice
    grid = np.linspace(lo, hi, 20001)
    expected = grid[np.argmin([objective(g) for g in grid])]
    assert abs(x - expected) <= 0.05  # the search's xatol in log T
    assert value == objective(x) and at_centre == objective(0.0)


def test_temperature_search_never_takes_a_point_whose_objective_failed():
    # a solve that gives no finite objective (NaN above x = 1 here) counts as +inf: the search goes on to the minimum
    # of the finite part instead of stepping into the failed region or returning NaN
    from bayesalign.mad.calibration import _search_from

    (x, value), at_centre = _search_from(lambda x: np.nan if x > 1.0 else (x - 0.8) ** 2, 0.0, -2.3, 9.2)
    assert abs(x - 0.8) <= 0.05 and np.isfinite(value) and at_centre == pytest.approx(0.64)


@pytest.mark.parametrize("drop", [0, 7])
def test_alignment_at_the_fitted_temperature_starts_from_the_searchs_potentials(drop, monkeypatch):
    # align() at T* hands the temperature search's Sinkhorn potentials, the anchors' entries taken out, to the
    # final solve: they fit the unaligned rows' augmented problem (a slack row when the views' sizes differ, drop
    # > 0), and the marginals and pairs are those of a cold solve at the same T (the solver's tolerance is 1e-3)
    from bayesalign.data import AlignmentProblem, Correspondence
    from bayesalign.datasets import mad_toy
    from bayesalign.mad import MAD
    from bayesalign.matching import match, matcher

    toy = mad_toy("linear_shared", seed=0, n_anchors=10)
    keep = np.setdiff1d(np.arange(100), np.setdiff1d(np.arange(100), toy.anchors_between("Y1", "Y2").index_b)[:drop])
    anchors = toy.anchors_between("Y1", "Y2")
    problem = AlignmentProblem({"Y1": toy.views["Y1"], "Y2": toy.views["Y2"][keep]},
                               anchors=[Correspondence(("Y1", "Y2"), anchors.index_a,
                                                       np.searchsorted(keep, anchors.index_b))])
    mad = MAD(latent_dim=3, num_inducing=10, seed=0, training="anchors",
              engine_options=dict(max_iter=100, warmup_iters=30)).fit(problem)
    given = []
    real = matcher.sinkhorn_probabilities
    monkeypatch.setattr(matcher, "sinkhorn_probabilities",
                        lambda *args, **kw: given.append(kw.get("warm_start")) or real(*args, **kw))
    al = mad.align()
    T = mad.calibration_[("Y1", "Y2", "likelihood")]["temperature"]
    assert al.info["temperature"] == T and len(given) == 1 and given[0] is not None
    f, g, T0 = given[0]
    n_a, n_b = al.candidates_a.size, al.candidates_b.size
    assert (n_a, n_b) == (90, 90 - drop) and f.shape == (n_a + (n_b > n_a),) and g.shape == (n_b + (n_a > n_b),)
    cold = match(_misfit_embedding(mad), problem, "Y1", "Y2", cost="likelihood", temperature=T,
                 rows_a=al.candidates_a, rows_b=al.candidates_b)
    np.testing.assert_array_equal(al.index_b, cold.index_b)
    np.testing.assert_allclose(al.probabilities, cold.probabilities, rtol=0, atol=2e-3)
    given.clear()
    mad.align(cost_limit=50.0)  # dustbins: another augmented problem, solved cold
    assert given == [None]


def test_temperature_reports_the_evidence_of_its_pairs_against_chance(toy, monkeypatch):
    """``evidence`` = 2 (objective at chance - objective at T*), chance being every pair of the pools at 1 / (the
    larger pool's size), the limit of P_T as T grows. The toy's anchors carry plenty (no warning); calibration pairs
    whose costs do not depend on which pair is true carry none, and say so."""
    import warnings as _warnings

    from bayesalign.mad import AnchorPool
    from bayesalign.mad.calibration import MIN_CALIBRATION_EVIDENCE

    problem, mad, _ = toy
    key = ("Y1", "Y2", "likelihood")
    with _warnings.catch_warnings():
        _warnings.simplefilter("error", RuntimeWarning)  # informative anchors: no warning
        mad.calibrate_temperature()
    record = mad.calibration_[key]
    rows_a, rows_b, _ = mad.cost_matrix()
    n = record["pairs"]
    assert record["objective_at_chance"] == pytest.approx(n * np.log(max(rows_a.size, rows_b.size) + n), rel=1e-12)
    # the limit it stands for: the true pairs' -log P of the Sinkhorn marginals at a very large T
    from bayesalign.matching.matcher import _cost_matrix, sinkhorn_probabilities

    pool = mad.anchor_pool("Y1", "Y2")
    P = sinkhorn_probabilities(_cost_matrix("likelihood", pool.mean_a, pool.var_a, pool.mean_b, pool.var_b), 1e12,
                               tol=1e-9)  # exp(-C / T) ~ 1
    assert -np.log(P[pool.true_a, pool.true_b]).sum() == pytest.approx(record["objective_at_chance"], rel=1e-6)
    assert record["evidence"] == pytest.approx(2.0 * (record["objective_at_chance"] - record["objective"]), rel=1e-12)
    assert record["evidence"] > 10 * MIN_CALIBRATION_EVIDENCE  # 10 anchors matched far above chance (1 in 100)
    # pools of independent random points, the last 10 rows of each called the true pairs: nothing to rank by
    rng = np.random.default_rng(0)
    d = len(mad.shared_dims("Y1", "Y2"))
    pool_a = (rng.standard_normal((50, d)), np.full((50, d), 0.01))
    pool_b = (rng.standard_normal((50, d)), np.full((50, d), 0.01))
    monkeypatch.setattr(mad, "anchor_pool", lambda a, b, cost=None: AnchorPool(*pool_a, *pool_b, 40 + np.arange(10),
                                                                               40 + np.arange(10)))
    saved = mad.calibration_.pop(key), mad._calibration_potentials.pop(key, None)
    try:
        with pytest.warns(RuntimeWarning, match="give no evidence that the match probabilities rank partners"):
            T = mad.calibrate_temperature()
        fake = mad.calibration_[key]
        assert fake["evidence"] < MIN_CALIBRATION_EVIDENCE and T > 10 * fake["posterior_temperature"]
        assert fake["objective_at_chance"] == pytest.approx(10 * np.log(50), rel=1e-12)
    finally:  # the module's fitted model keeps its own calibration
        mad.calibration_[key] = saved[0]
        if saved[1] is not None:
            mad._calibration_potentials[key] = saved[1]


def test_temperature_at_the_lower_end_of_the_search_is_said(toy, monkeypatch):
    """Calibration pairs whose rows coincide with their true partners, among rivals a few posterior widths away:
    the pairs' likelihood rises all the way down to the search's floor (a tenth of the posterior temperature), so
    T* is that bound; the record says so (``at_bound``) and a RuntimeWarning tells the user. Brute force: no
    temperature of a grid over the search range does better."""
    from bayesalign.mad import AnchorPool
    from bayesalign.matching.matcher import _cost_matrix, sinkhorn_probabilities

    problem, mad, _ = toy
    key = ("Y1", "Y2", "likelihood")
    mad.calibrate_temperature()
    assert mad.calibration_[key]["at_bound"] is None  # the toy's own anchors: a minimum inside the range
    rng = np.random.default_rng(1)
    d = len(mad.shared_dims("Y1", "Y2"))
    points = 3.0 * rng.standard_normal((50, d))
    pool_a = (points, np.full((50, d), 0.5))
    pool_b = (points.copy(), np.full((50, d), 0.5))  # every row of a has its own point in b
    true = 40 + np.arange(10)
    monkeypatch.setattr(mad, "anchor_pool", lambda a, b, cost=None: AnchorPool(*pool_a, *pool_b, true, true))
    saved = mad.calibration_.pop(key, None), mad._calibration_potentials.pop(key, None)
    try:
        with pytest.warns(RuntimeWarning, match="still more probable at the lowest temperature searched"):
            T = mad.calibrate_temperature()
        record = mad.calibration_[key]
        assert record["at_bound"] == "lower" and not record["one_sided"]
        assert T == pytest.approx(0.1 * record["posterior_temperature"], rel=1e-12)
        C = _cost_matrix("likelihood", *pool_a, *pool_b)

        def objective(t):
            return -np.log(sinkhorn_probabilities(C, t, tol=1e-9)[true, true]).sum()

        # the grid starts at T itself; the rest must not do better beyond the solves' tolerance (1e-9 marginals)
        grid = np.exp(np.linspace(np.log(T), np.log(1e4), 12))[1:]
        assert objective(T) <= min(objective(t) for t in grid) + 1e-6
    finally:  # the module's fitted model keeps its own calibration
        if saved[0] is not None:
            mad.calibration_[key] = saved[0]
        if saved[1] is not None:
            mad._calibration_potentials[key] = saved[1]


def test_temperature_from_few_anchors_may_only_flatten_the_probabilities():
    """Fewer than MIN_CALIBRATION_PAIRS anchor pairs: a warning, and T searched at or above the posterior temperature
    only; it is the posterior temperature itself where nothing above it does better, and it rises where the anchors
    are matched at low probability (a model without enough iterations to be sure of anything)."""
    from bayesalign.datasets import mad_toy
    from bayesalign.mad import MAD

    problem = mad_toy("linear_shared", seed=1, n_anchors=5)
    key = ("Y1", "Y2", "likelihood")
    temperatures = {}
    for max_iter in (30, 2):  # enough evaluations to match the anchors well, and too few to be sure of anything
        mad = MAD(latent_dim=2, num_inducing=5, seed=0, training="anchors",
                  engine_options=dict(max_iter=max_iter, warmup_iters=min(10, max_iter - 1))).fit(problem)
        with pytest.warns(RuntimeWarning, match="MIN_CALIBRATION_PAIRS = 10: the temperature fitted on them may only"):
            al = mad.align()
        record = mad.calibration_[key]
        assert record["one_sided"] and not record["fallback"] and record["pairs"] == 5
        assert al.info["temperature"] == record["temperature"] >= record["posterior_temperature"] == 1.0
        assert record["objective"] <= record["objective_at_posterior_temperature"]
        temperatures[max_iter] = record["temperature"]
    assert temperatures[30] == 1.0  # exactly the posterior temperature: the search's bound, taken as such
    assert temperatures[2] > 2.0  # two evaluations: the anchors re-inferred match badly, the probabilities flatten
    with pytest.raises(ValueError, match="temperature must be positive"):
        mad.align(temperature=True)
    with pytest.raises(ValueError, match="'anchors', 'posterior'"):
        mad.align(temperature="fitted")


def test_temperature_fit_shows_one_progress_step_per_solve_when_asked(toy, monkeypatch):
    # progress=True: a bar (on a terminal only: disable=None) steps once per Sinkhorn solve of the search, with
    # the temperature and objective as postfix; progress=False: disabled. The fitted T is the same either way
    import copy

    import tqdm.auto

    made = []

    class Recording:
        def __init__(self, *args, **kwargs):
            self.kwargs, self.steps, self.postfix = kwargs, 0, None
            made.append(self)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, n=1):
            self.steps += n

        def set_postfix(self, ordered_dict=None, refresh=True, **kwargs):
            self.postfix = kwargs

    monkeypatch.setattr(tqdm.auto, "tqdm", Recording)
    problem, mad, _ = toy
    temperatures = []
    for progress in (True, False):
        model = copy.deepcopy(mad)
        model.progress, model.calibration_ = progress, {}
        temperatures.append(model.calibrate_temperature())
    assert [bar.kwargs["disable"] for bar in made] == [None, True]
    assert made[0].steps >= 5 and set(made[0].postfix) == {"T", "objective"}
    assert temperatures[0] == temperatures[1]


@pytest.mark.parametrize("scale", [1e-6, 1e6])
def test_a_view_in_other_units_is_not_called_switched_off(scale):
    # the rule reads each view's resolution (its outputs' movement over the latent spread, in noise units), which no
    # change of units moves; ARD relevance is in the outputs' units, so a view in micro-units looked switched off
    import warnings

    from bayesalign.datasets import mad_toy
    from bayesalign.mad import MAD
    from bayesalign.metrics import matching_accuracy

    problem = mad_toy("linear_shared", seed=0, n=60, n_anchors=12).shuffle_unaligned(seed=0)
    scaled = problem.replace(views=type(problem.views)({"Y1": problem.views["Y1"], "Y2": problem.views["Y2"] * scale}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mad = MAD(latent_dim=3, num_inducing=8, seed=0, engine_options={"max_iter": 100}).fit(scaled)
    assert mad.switched_off_views_ == [] and not [w for w in caught if "switched view" in str(w.message)]
    relevance = {v: float(np.max(r)) for v, r in mad.relevance_.items()}
    assert max(relevance.values()) / min(relevance.values()) > 1e6  # the relevances differ by the units' factor
    assert matching_accuracy(mad.align(), scaled) > 0.8  # and the alignment is good
