"""Labels as partner hints: the prior's closed form against a brute-force posterior over partners, unlabelled rows
and an uninformative noise rate giving the label-free result, the table form, clear errors, and the prior in MAD's
matcher (POT's Sinkhorn and a brute-force assignment as references) and in the optimal-transport aligners."""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np
import ot
import pytest

import bayesalign as ba
from bayesalign import AlignmentProblem, Correspondence, LatentEmbedding
from bayesalign.data import LabelPrior
from bayesalign.mad.posteriors import MatchPosteriors, PosteriorAligner
from bayesalign.matching import likelihood_cost
from bayesalign.transport import FusedGromovWassersteinAlignment, GromovWassersteinAlignment, solve_coupling


def _problem(n_a=4, n_b=5, seed=0):
    rng = np.random.default_rng(seed)
    return AlignmentProblem({"a": rng.normal(size=(n_a, 2)), "b": rng.normal(size=(n_b, 2))})


def _brute_force_partner_posterior(l_i, labels_b, channel, K):
    """p(J = j | labels): J uniform over the rows of b; the partner's label drawn from channel(l_i, .), every other
    row's label uniform over the K labels of b; an unlabelled row's label unobserved (summed out: factor 1)."""
    post = np.zeros(len(labels_b))
    for j in range(len(labels_b)):
        likelihood = 1.0
        for k, m in enumerate(labels_b):
            if m is None:
                continue
            likelihood *= channel(l_i, m) if k == j else 1.0 / K
        post[j] = likelihood / len(labels_b)
    return post / post.sum()


def _softmax_rows(cost):
    w = np.exp(-cost)
    return w / w.sum(axis=1, keepdims=True)


def test_same_label_prior_is_the_brute_force_posterior_over_partners():
    labels_a = ["x", "y", None, "z"]
    labels_b = ["y", None, "x", "x", "w"]
    eps = 0.2
    K = 4  # labels of b in the same-label form: the identity on both views' labels {w, x, y, z}

    def channel(label, m):
        return 1 - eps if label == m else eps / (K - 1)

    problem = _problem().with_label_prior({"a": labels_a, "b": labels_b}, noise=eps)
    prior = _softmax_rows(problem.label_cost("a", "b"))
    for i, l_i in enumerate(labels_a):
        if l_i is None:  # no information: uniform over partners
            expected = np.full(len(labels_b), 1 / len(labels_b))
        else:
            expected = _brute_force_partner_posterior(l_i, labels_b, channel, K)
        np.testing.assert_allclose(prior[i], expected, rtol=1e-12)  # a few exp/log round-offs


def test_table_prior_is_the_brute_force_posterior_over_partners():
    # view a's "T" corresponds to two labels of b, "B" to one; "NK" has no counterpart (no information)
    table = {"T": ["CD4", "CD8"], "B": "Bcell"}
    labels_a = ["T", "B", "NK"]
    labels_b = ["CD4", "CD8", "Bcell", None, "Mono"]
    eps = 0.1
    partners = {"T": {"CD4", "CD8"}, "B": {"Bcell"}}
    K = 4  # CD4, CD8, Bcell, Mono

    def channel(label, m):
        t = partners[label]
        return (1 - eps) / len(t) if m in t else eps / (K - len(t))

    problem = _problem(3, 5).with_label_prior({"a": labels_a, "b": labels_b}, table=table, noise=eps)
    cost = problem.label_cost("a", "b")
    prior = _softmax_rows(cost)
    for i in range(2):
        np.testing.assert_allclose(prior[i], _brute_force_partner_posterior(labels_a[i], labels_b, channel, K),
                                   rtol=1e-12)  # exp/log round-off
    np.testing.assert_array_equal(cost[2], 0.0)
    # the transposed order gives the same prior
    np.testing.assert_array_equal(problem.label_cost("b", "a"), cost.T)


def test_unlabelled_rows_and_uninformative_noise_carry_no_information():
    problem = _problem()
    hints = {"a": ["x", None, "y", np.nan], "b": [None, "x", "y", "x", None]}
    cost = problem.with_label_prior(hints, noise=0.1).label_cost("a", "b")
    np.testing.assert_array_equal(cost[[1, 3]], 0.0)  # unlabelled rows of a
    np.testing.assert_array_equal(cost[:, [0, 4]], 0.0)  # unlabelled rows of b
    assert problem.with_label_prior({"a": [None] * 4, "b": hints["b"]}).label_cost("a", "b") is None
    # K = 2 labels: noise (K - 1) / K makes equal labels uninformative
    assert problem.with_label_prior(hints, noise=0.5).label_cost("a", "b") is None
    assert problem.label_cost("a", "b") is None  # no prior at all


def test_identity_table_equals_the_same_label_form():
    problem = _problem()
    hints = {"a": [0, 1, None, 2], "b": [2, 2, 1, None, 0]}
    same = problem.with_label_prior(hints, noise=0.15).label_cost("a", "b")
    identity = problem.with_label_prior(hints, table=[(k, k) for k in range(3)], noise=0.15).label_cost("a", "b")
    np.testing.assert_allclose(identity, same, rtol=0, atol=0)  # the same table entries, computed alike
    per_pair = problem.with_label_prior(hints, table={("b", "a"): {k: k for k in range(3)}}, noise=0.15)
    np.testing.assert_allclose(per_pair.label_cost("a", "b"), same, rtol=0, atol=0)


def test_hints_are_separate_from_evaluation_labels_and_follow_the_rows():
    X = np.arange(12.0).reshape(6, 2)
    problem = AlignmentProblem.paired({"a": X, "b": X}, labels=np.array([0, 0, 1, 1, 2, 2])).split_anchors(2, seed=0)
    assert problem.label_prior is None
    default = problem.with_label_prior()  # opting in: the evaluation labels become hints too
    np.testing.assert_array_equal(default.label_prior.labels["b"], problem.labels["b"])
    hints = {"a": [0, None, 1, None, 2, None], "b": [None, 0, None, 1, None, 2]}
    hinted = problem.with_label_prior(hints, noise=0.2)
    np.testing.assert_array_equal(hinted.labels["a"], problem.labels["a"])  # evaluation labels untouched
    shuffled = hinted.shuffle_unaligned(seed=1)
    order = [int(np.flatnonzero((shuffled.views["b"] == row).all(1))[0]) for row in X]  # old row -> new row
    np.testing.assert_allclose(shuffled.label_cost("a", "b")[:, order], hinted.label_cost("a", "b"), atol=0)
    assert shuffled.replace(name="x").label_prior is shuffled.label_prior


@pytest.mark.parametrize("noise", [0, 1, 1.5, -0.1, True, "0.1", np.nan])
def test_noise_outside_the_open_unit_interval_is_refused(noise):
    with pytest.raises(ValueError, match="noise must be a probability in \\(0, 1\\)"):
        _problem().with_label_prior({"a": [0] * 4}, noise=noise)


def test_bad_hints_are_refused_with_the_view_at_fault():
    problem = _problem()
    with pytest.raises(ValueError, match="label hints of view 'b': expected shape \\(5,\\), got \\(3,\\)"):
        problem.with_label_prior({"b": [0, 1, 2]})
    with pytest.raises(ValueError, match="label hints name view 'c', which does not exist"):
        problem.with_label_prior({"c": [0] * 4})
    with pytest.raises(ValueError, match="this problem has none"):
        problem.with_label_prior()
    with pytest.raises(ValueError, match="each entry must be a pair"):
        problem.with_label_prior({"a": [0] * 4}, table=[(0, 1, 2)])
    with pytest.raises(ValueError, match="names view 'c'"):
        problem.with_label_prior({"a": [0] * 4}, table={("a", "c"): [(0, 0)]})
    with pytest.raises(ValueError, match="views 'a' and 'b' have no label in common"):
        problem.with_label_prior({"a": ["x", None, "y", "x"], "b": ["X", "Y", None, "X", "Y"]})
    with pytest.raises(ValueError, match="pairs none of the labels their hints carry"):
        problem.with_label_prior({"a": ["x", None, "y", "x"], "b": ["X", "Y", None, "X", "Y"]}, table={"x": "Z"})
    three = AlignmentProblem({v: np.zeros((3, 1)) for v in "abc"})
    with pytest.raises(ValueError, match="key the label table by pairs of views"):
        three.with_label_prior({"a": [0] * 3}, table=[(0, 0)])
    with pytest.raises(TypeError, match="label_prior must be a LabelPrior"):
        AlignmentProblem({"a": np.zeros((2, 1)), "b": np.zeros((2, 1))}, label_prior={"a": [0, 1]})
    hints = {"a": np.array([0, 1, 1, 0])}
    problem.with_label_prior(hints)
    hints["a"][0] = 5  # the prior holds a copy
    assert LabelPrior(hints).labels["a"][0] == 5 and problem.with_label_prior({"a": [0] * 4}).label_prior is not None


class _FixedPosteriors(PosteriorAligner):
    """Posteriors given as values: the matching of PosteriorAligner on known costs, no model fit."""

    cost, temperature, seed, progress = "likelihood", 1.0, 0, False

    def __init__(self, problem, mean_a, var_a, mean_b, var_b):
        self.problem_, self.calibration_, self._calibration_potentials = problem, {}, {}
        self._values = (mean_a, var_a, mean_b, var_b)

    def posteriors(self, a=None, b=None, cost=None):
        ma, va, mb, vb = self._values
        rows_a, rows_b = np.arange(ma.shape[0]), np.arange(mb.shape[0])
        emb = LatentEmbedding({"a": ma, "b": mb}, {"a": va, "b": vb})
        return MatchPosteriors(("a", "b"), rows_a, ma, va, rows_b, mb, vb, emb)

    def anchor_pool(self, a=None, b=None, cost=None):
        return None


@pytest.fixture
def fixed():
    rng = np.random.default_rng(3)
    n = 5
    x = rng.normal(size=(n, 2))
    ma, mb = x + 0.6 * rng.normal(size=(n, 2)), x[::-1] + 0.6 * rng.normal(size=(n, 2))
    va, vb = np.full((n, 2), 1.0), np.full((n, 2), 0.8)  # wide posteriors: a soft kernel, Sinkhorn converges fast
    problem = AlignmentProblem({"a": ma, "b": mb}, truth=Correspondence(("a", "b"), np.arange(n), np.arange(n)[::-1]))
    hints = {"a": ["u", "v", None, "v", "u"], "b": ["u", None, "v", "u", "u"]}
    return problem, hints, (ma, va, mb, vb)


def test_mad_match_probabilities_are_sinkhorn_of_the_likelihood_times_the_prior(fixed):
    problem, hints, values = fixed
    labelled = _FixedPosteriors(problem.with_label_prior(hints, noise=0.1), *values)
    _, _, P = labelled.match_probabilities(temperature=0.7)
    C = likelihood_cost(*values)
    c = labelled.problem_.label_cost("a", "b")
    n = C.shape[0]
    # POT's Sinkhorn on exp(-C / T) * prior, unit marginals: the same plan to the Sinkhorn tolerance (1e-3)
    reference = ot.sinkhorn(np.ones(n), np.ones(n), C / 0.7 + c, 1.0, numItermax=20_000, stopThr=1e-10)
    np.testing.assert_allclose(P, reference, atol=2e-3)
    plain = _FixedPosteriors(problem, *values).match_probabilities(temperature=0.7)[2]
    assert np.abs(P - plain).max() > 0.05  # the prior moved the probabilities
    np.testing.assert_allclose(labelled.cost_matrix(temperature=0.7)[2], C + 0.7 * c, rtol=1e-12)


def test_mad_hungarian_under_the_prior_is_the_brute_force_map_assignment(fixed):
    problem, hints, values = fixed
    model = _FixedPosteriors(problem.with_label_prior(hints, noise=0.1), *values)
    total = likelihood_cost(*values) + 0.7 * model.problem_.label_cost("a", "b")
    best = min(itertools.permutations(range(5)), key=lambda p: total[np.arange(5), list(p)].sum())
    al = model.align(matcher="hungarian", temperature=0.7)
    assert al.index_b.tolist() == list(best)
    assert _FixedPosteriors(problem, *values).align(temperature=0.7).index_b.tolist() != list(best)  # it mattered
    np.testing.assert_allclose(al.costs, total[np.arange(5), list(best)], rtol=1e-12)


def test_mad_without_information_is_the_label_free_matcher(fixed):
    problem, hints, values = fixed
    plain = _FixedPosteriors(problem, *values)
    for prior in (problem.with_label_prior({"a": [None] * 5, "b": hints["b"]}),
                  problem.with_label_prior(hints, noise=0.5)):  # unlabelled rows of a; uninformative noise, K = 2
        model = _FixedPosteriors(prior, *values)
        for method in ("match_probabilities", "match_log_probabilities", "cost_matrix"):
            np.testing.assert_array_equal(getattr(model, method)()[2], getattr(plain, method)()[2])
        al, ref = model.align(matcher="sinkhorn"), plain.align(matcher="sinkhorn")
        np.testing.assert_array_equal(al.index_b, ref.index_b)
        np.testing.assert_array_equal(al.probabilities, ref.probabilities)


def test_solve_coupling_multiplies_the_gibbs_kernel_by_the_prior():
    rng = np.random.default_rng(0)
    n_a, n_b = 6, 7
    A, B = np.zeros((n_a, n_a)), np.zeros((n_b, n_b))  # equal distances: a constant structure gradient
    c = rng.normal(size=(n_a, n_b))
    M = rng.uniform(size=(n_a, n_b))
    p, q = np.full(n_a, 1 / n_a), np.full(n_b, 1 / n_b)
    eps, alpha = 0.05, 0.3
    # the entropic coupling is then Sinkhorn's projection of the kernel exp(-(1 - alpha) M / eps) * exp(-c)
    T, _, _ = solve_coupling(A, B, prior_cost=c, epsilon=eps, n_inner=5000, tol=1e-12)
    np.testing.assert_allclose(T, ot.sinkhorn(p, q, c, 1.0, stopThr=1e-14), atol=1e-9)  # Sinkhorn's tolerance
    T, _, _ = solve_coupling(A, B, M=M, alpha=alpha, prior_cost=c, epsilon=eps, n_inner=5000, tol=1e-12)
    expected = ot.sinkhorn(p, q, (1 - alpha) * M / eps + c, 1.0, stopThr=1e-14)
    np.testing.assert_allclose(T, expected, atol=1e-9)
    # semi-relaxed: each step multiplies the coupling by the kernel and rescales its rows; three steps from p q'
    T, _, _ = solve_coupling(A, B, prior_cost=c, epsilon=eps, marginals="semi-relaxed", n_outer=3, tol=0.0)
    w = np.exp(-3 * c)
    np.testing.assert_allclose(T, p[:, None] * w / w.sum(1, keepdims=True), rtol=1e-9)  # exp round-off


@pytest.fixture(scope="module")
def cells():
    problem = ba.datasets.single_cell_simulation(120, n_genes=40, n_peaks=60, second_view="gaussian", seed=0)
    return problem.split_anchors(12, seed=0)


def _label_agreement(model, problem):
    """The fraction of rows of a whose most likely partner has the same (true) cell type."""
    y_a, y_b = problem.labels["rna"], problem.labels["protein"]
    return float(np.mean(y_a == y_b[model.coupling_.argmax(1)]))


@pytest.mark.parametrize("estimator", [
    FusedGromovWassersteinAlignment(n_neighbors=10, alpha=0.5, epsilon=5e-3, n_outer=50),
    GromovWassersteinAlignment(n_neighbors=10, epsilon=5e-3, n_outer=50)])
def test_transport_aligners_follow_the_label_prior(cells, estimator):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # convergence and ambiguity: not what is tested here
        plain = estimator.fit(cells)
        coupling, agreement = plain.coupling_, _label_agreement(plain, cells)
        unlabelled = estimator.fit(cells.with_label_prior({"rna": [None] * 120}))
        np.testing.assert_array_equal(unlabelled.coupling_, coupling)  # no information: the label-free path
        labelled = estimator.fit(cells.with_label_prior(noise=0.05))
    # correct labels on every row: the most likely partners share their cell type far more often
    assert _label_agreement(labelled, cells) > agreement + 0.1


def test_label_prior_arrays_round_trip_to_the_same_costs():
    problem = _problem(3, 5)
    hints = {"a": [1, 2, None], "b": [1.0, None, 2, 7, 1]}  # 1 and 1.0 are one label
    for table in (None, {1: [1, 7], 2: 2}):
        prior = problem.with_label_prior(hints, table=table, noise=0.3)
        arrays, meta = prior.label_prior.to_arrays()
        json.dumps(meta)  # the metadata is plain JSON
        back = problem.replace(label_prior=LabelPrior.from_arrays(arrays, meta))
        np.testing.assert_allclose(back.label_cost("a", "b"), prior.label_cost("a", "b"), rtol=0, atol=0)
    arrays["labels/0"] = np.array([0, 9, -1])
    with pytest.raises(ValueError, match="outside their vocabulary"):
        LabelPrior.from_arrays(arrays, meta)


def test_a_fitted_mad_matches_under_its_problems_label_prior(tmp_path):
    problem = ba.datasets.mad_toy("linear_shared", seed=0, n=40).split_anchors(12, seed=0).shuffle_unaligned(seed=0)
    names = problem.views.names
    classes = {v: np.arange(problem.views.n_samples[v]) % 3 for v in names}  # any labels: the wiring is tested
    labelled = problem.with_label_prior(classes, noise=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a capped fit: its convergence is not what is tested here
        mad = ba.MAD(latent_dim=2, num_inducing=5, seed=0, training="anchors",
                     engine_options={"max_iter": 30}).fit(labelled)
    rows_a, rows_b, C = mad.cost_matrix(temperature=0.5)
    p = mad.posteriors()
    expected = likelihood_cost(p.mean_a, p.var_a, p.mean_b, p.var_b) + 0.5 * labelled.label_cost(*names, rows_a, rows_b)
    np.testing.assert_allclose(C, expected, rtol=1e-12)  # the same arrays summed in the same order
    al = mad.align(temperature=0.5)
    at = np.searchsorted(rows_a, al.index_a), np.searchsorted(rows_b, al.index_b)
    np.testing.assert_allclose(al.costs, expected[at], rtol=1e-12)
    ba.mad.save(mad, tmp_path / "mad.npz")  # the saved model keeps the prior its matcher uses
    loaded = ba.mad.load(tmp_path / "mad.npz")
    np.testing.assert_allclose(loaded.problem_.label_cost(*names), labelled.label_cost(*names), rtol=0, atol=0)
    np.testing.assert_allclose(loaded.cost_matrix(temperature=0.5)[2], C, rtol=1e-12)  # the same sums
