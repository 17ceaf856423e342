"""MAD without anchors (bayesalign.mad.zero_anchor): the Gromov-Wasserstein start, the fit, and what it says."""

from __future__ import annotations

import copy
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

import bayesalign as ba
from bayesalign.mad import zero_anchor


def _y_tree(arms=(50, 35, 20), seed=0) -> ba.AlignmentProblem:
    """Points along a Y (a stem and two arms of different lengths: no symmetry maps it onto itself), two noisy
    linear views of it of 6 and 9 columns, view b's rows shuffled."""
    rng = np.random.default_rng(seed)
    stem = np.c_[np.zeros(arms[0]), np.linspace(-2.0, 0.0, arms[0], endpoint=False)]
    s1, s2 = np.linspace(0, 1, arms[1] + 1)[1:], np.linspace(0, 1, arms[2] + 1)[1:]
    X = np.vstack([stem, 1.4 * np.c_[-s1, s1], 1.4 * arms[2] / arms[1] * np.c_[s2, s2]])  # [n, 2]
    n = len(X)
    order = rng.permutation(n)
    A = X @ rng.standard_normal((2, 6)) + 0.02 * rng.standard_normal((n, 6))
    B = (X @ rng.standard_normal((2, 9)) + 0.02 * rng.standard_normal((n, 9)))[order]
    truth = ba.Correspondence(("a", "b"), np.arange(n), np.argsort(order))
    return ba.AlignmentProblem(ba.Views({"a": A, "b": B}), truth=truth)


@pytest.fixture(scope="module")
def tree_fit():
    problem = _y_tree()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mad = ba.MAD(latent_dim=2, num_inducing=8, seed=0, engine_options={"max_iter": 60}).fit(problem)
    return problem, mad, [str(w.message) for w in caught]


def test_mutual_pairs_are_the_mutual_maxima_of_the_coupling():
    # brute force: every (i, j) with j the largest entry of row i and i the largest of column j, scored n_a T_ij
    # capped at 1
    rng = np.random.default_rng(0)
    T = rng.random((30, 25)) ** 4
    T[3, 7] = 5.0  # one row whose mass sits on one column: its score is capped at 1
    T /= T.sum()
    pairs, scores = zero_anchor.mutual_pairs(T)
    expected = [(i, j) for i in range(30) for j in range(25) if T[i].argmax() == j and T[:, j].argmax() == i]
    assert [tuple(p) for p in pairs.tolist()] == expected and (3, 7) in expected
    np.testing.assert_allclose(scores, [min(30 * T[i, j], 1.0) for i, j in expected], rtol=1e-12)


def test_the_zero_anchor_fit_recovers_the_y_trees_correspondence(tree_fit):
    # the Y has no symmetry, so a mirror image is no answer here: a wrong alignment matches about 1 row in n
    problem, mad, _ = tree_fit
    boot = mad.bootstrap_
    truth = set(map(tuple, problem.truth_between("a", "b").pairs.tolist()))
    assert boot["method"] == "gromov_wasserstein" and not boot["ambiguous"]
    assert len(boot["pairs"]) == max(ba.mad.MIN_ANCHORS, zero_anchor.PAIRS_PER_DIMENSION * 2)
    assert boot["correct"] == sum(tuple(p) in truth for p in boot["pairs"].tolist())
    assert boot["n_mutual_pairs"] >= len(boot["pairs"]) and np.all(np.diff(boot["scores"]) <= 0)  # the best first
    with pytest.warns(RuntimeWarning, match="no anchor pair to fit the temperature on"):
        alignment = mad.align(matcher="hungarian")
    assert ba.metrics.evaluate(alignment, problem)["accuracy"] > 0.3  # by chance 1 row in 105
    record = mad.calibration_[("a", "b", "likelihood")]  # no anchor: the posterior temperature, said so
    assert record["fallback"] and alignment.info["temperature"] == 1.0


def test_the_refit_joins_every_unaligned_row_to_its_most_probable_partners_under_the_coupling(tree_fit):
    # brute force on the fitted model: the prior's cross-view edges of each unaligned row of a are its NEIGHBORS
    # largest entries of the coupling among the unaligned rows of b (or ones that picked it), weighted by them
    from bayesalign.mad.coupling import NEIGHBORS

    problem, mad, _ = tree_fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        T = zero_anchor.gromov_wasserstein_pairs(problem.views, "a", "b")[2].coupling_
    n_entities, rows = mad.entities_
    free_a, free_b = mad.posteriors_["a"][0], mad.posteriors_["b"][0]
    W = mad.prior_edges_.toarray()[np.ix_(rows["a"][free_a], rows["b"][free_b])]  # [n_a', n_b'] cross-view
    by_row = (T / T.sum(1, keepdims=True))[np.ix_(free_a, free_b)]
    for k in range(len(free_a)):
        top = np.argsort(-by_row[k], kind="stable")[:NEIGHBORS]
        assert np.all(W[k, top] >= by_row[k, top] * (1 - 1e-9))  # the row's own choice, or its partners' larger
    assert np.all(W <= 1 + 1e-12) and np.count_nonzero(W) <= 2 * NEIGHBORS * len(free_a)


def test_a_symmetric_geometry_is_said_to_be_ambiguous(monkeypatch):
    # points evenly on a circle: every rotation and reflection of it is as good to Gromov-Wasserstein, so the
    # settings' couplings land on different ones (the kNN graphs of 20 and of 50 neighbours disagree by about 0.3).
    # Which setting scores best is round-off here, so every setting counts as near-equal (the tolerance raised):
    # couplings that disagree then make the choice ambiguous, and MAD re-issues the warning in its own name
    import bayesalign.transport._base as transport_base

    monkeypatch.setattr(transport_base, "AMBIGUITY_TOLERANCE", np.inf)
    n = 60
    t = 2 * np.pi * np.arange(n) / n
    rng = np.random.default_rng(0)
    circle = np.c_[np.cos(t), np.sin(t)]
    a = circle @ rng.standard_normal((2, 5))
    order = rng.permutation(n)
    views = ba.Views({"a": a, "b": (circle @ rng.standard_normal((2, 7)))[order]})
    with pytest.warns(RuntimeWarning, match="MAD without anchors, the Gromov-Wasserstein coupling .* ambiguous"):
        pairs, scores, aligner = zero_anchor.gromov_wasserstein_pairs(views, "a", "b")
    assert aligner.ambiguous_ and len(pairs) == len(scores)
    assert max(c["disagreement"] for c in aligner.criterion_) > transport_base.DISAGREEMENT_LIMIT


def _restarted(mad, monkeypatch, support: int = 0, pairs=None):
    """``fit_without_anchors`` on a copy of a fitted MAD, its coupling's pairs and the model's sure pairs replaced
    (no refit)."""
    mad = copy.deepcopy(mad)
    boot = mad.bootstrap_
    found = (boot["pairs"], boot["scores"]) if pairs is None else pairs
    aligner = SimpleNamespace(setting_=boot["setting"], ambiguous_=True)
    monkeypatch.setattr(zero_anchor, "gromov_wasserstein_pairs", lambda views, a, b: (*found, aligner))
    monkeypatch.setattr(type(mad), "refit", lambda self, *args, **kwargs: self)
    monkeypatch.setattr(zero_anchor, "COUPLING_EDGES", False)
    monkeypatch.setattr(zero_anchor, "confident_pairs", lambda model, a, b, threshold: (None, np.arange(support), None))
    zero_anchor.fit_without_anchors(mad)
    return mad


def test_weak_support_is_said_with_a_warning_and_a_flag(tree_fit, monkeypatch):
    problem, mad, _ = tree_fit
    left = problem.views.n_samples["a"] - len(mad.bootstrap_["pairs"])
    weak = int(np.ceil(zero_anchor.WEAK_SUPPORT * left)) - 1
    for support in (0, weak):
        with pytest.warns(RuntimeWarning, match=f"is sure of {support} of the {left} rows left to match"):
            restarted = _restarted(mad, monkeypatch, support=support)
        assert restarted.bootstrap_["weak_support"] and restarted.bootstrap_["support"] == support
        assert restarted.bootstrap_["ambiguous"]  # the coupling's flag, kept
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # enough support: no warning
        assert not _restarted(mad, monkeypatch, support=weak + 1).bootstrap_["weak_support"]


def test_too_few_mutual_pairs_are_refused_naming_the_views(tree_fit, monkeypatch):
    _, mad, _ = tree_fit
    two = (np.array([[0, 1], [2, 3]], np.int64), np.ones(2))
    with pytest.raises(ValueError, match="views 'a' and 'b' has 2 confident mutual pairs; MAD needs at least 3"):
        _restarted(mad, monkeypatch, pairs=two)


def test_the_start_record_survives_a_file(tree_fit, tmp_path):
    from bayesalign.mad import load, save

    _, mad, _ = tree_fit
    save(mad, tmp_path / "zero.npz")
    loaded = load(tmp_path / "zero.npz").bootstrap_
    boot = mad.bootstrap_
    assert loaded["pairs"].dtype == np.int64 and np.array_equal(loaded["pairs"], boot["pairs"])
    keys = ("method", "setting", "n_mutual_pairs", "correct", "ambiguous", "support", "weak_support")
    assert {k: loaded[k] for k in keys} == {k: boot[k] for k in keys}
    np.testing.assert_allclose(loaded["scores"], boot["scores"], rtol=0)  # JSON keeps a float64 exactly
