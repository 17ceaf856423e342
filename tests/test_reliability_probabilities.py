"""Match probabilities of the deterministic baselines: calibrated on anchors held out of cross-fitted fits."""

import warnings

import numpy as np
import pytest

import bayesalign as ba
from bayesalign.matching import calibration
from bayesalign.matching.calibration import SCALES, cross_fitted_temperature
from bayesalign.registry import run_method


def _noise_beside_real(kind: str) -> ba.AlignmentProblem:
    """40 rows of the digit halves beside a view that says nothing about them; 10 anchors."""
    p = ba.datasets.digits_halves(digit=None, seed=0)
    rng = np.random.default_rng(0)
    A = p.views[p.views.names[0]][np.sort(rng.permutation(p.views.n_samples[p.views.names[0]])[:40])]
    B = rng.standard_normal((40, 6))
    if kind == "constant":
        B = 1.0 + 1e-9 * B
    return ba.AlignmentProblem.paired({"real": A, "other": B}).split_anchors(10, seed=0)


@pytest.mark.parametrize("method, kind", [(m, "noise") for m in ("cca", "least-squares", "linear",
                                                                   "joint-laplacian", "global-geometry")]
                         + [("cca", "constant"), ("linear", "constant")])
def test_a_view_without_signal_gives_chance_probabilities_or_a_warning(method, kind):
    problem = _noise_beside_real(kind)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        al = run_method(method, problem).alignments[("real", "other")]
    accuracy = ba.metrics.matching_accuracy(al, problem)
    no_signal = [w for w in caught if "no signal" in str(w.message)]
    # 0.1: the tolerance of the claim (30 rows to match: chance is 1/30)
    assert abs(float(np.mean(al.probabilities)) - accuracy) <= 0.1 or no_signal
    record = al.info["calibration"]
    assert record["calibrated"] and not record["signal"] and no_signal


def test_a_view_with_signal_is_calibrated_without_warning():
    # b is a rotation of a plus noise: the held-out anchors rank far above chance
    rng = np.random.default_rng(1)
    X = rng.normal(size=(80, 4))
    Q = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    problem = ba.AlignmentProblem.paired({"a": X, "b": X @ Q + 0.3 * rng.normal(size=(80, 4))}).split_anchors(
        20, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        al = run_method("cca", problem, latent_dim=4).alignments[("a", "b")]
    record = al.info["calibration"]
    assert record["signal"] and record["evidence"] > 20
    accuracy = ba.metrics.matching_accuracy(al, problem)
    # 0.15: 60 rows matched, a binomial sd of about 0.06 on the accuracy, and a cross-fit on 16 of 20 anchors
    assert abs(float(np.mean(al.probabilities)) - accuracy) <= 0.15


def test_the_search_over_the_scales_finds_the_grid_minimum(monkeypatch):
    # the windowed search against the objective on every scale of the grid (brute force)
    problem = _noise_beside_real("noise")
    rng = np.random.default_rng(2)
    X = problem.views["real"]
    Y = X[:, :6] @ rng.normal(size=(6, 6)) + 0.5 * rng.normal(size=(40, 6))
    problem = problem.replace(views=ba.Views({"real": X, "other": Y}))

    def fit(p):
        return ba.spectral.CCAAlignment(n_components=3).fit(p).embedding_

    found = cross_fitted_temperature(fit, problem, "real", "other")
    monkeypatch.setattr(calibration, "SCALES", SCALES[[int(np.log2(found["scale"])) + 2]])  # s* alone
    alone = cross_fitted_temperature(fit, problem, "real", "other")
    objectives = []
    for s in SCALES:
        monkeypatch.setattr(calibration, "SCALES", np.array([s]))
        objectives.append(cross_fitted_temperature(fit, problem, "real", "other")["objective"])
    assert found["scale"] == SCALES[int(np.argmin(objectives))]
    # 1e-6 relative: warm starts change where Sinkhorn stops inside its tolerance
    assert found["objective"] == pytest.approx(alone["objective"], rel=1e-6)


def test_too_few_anchors_are_reported_as_uncalibrated():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 3))
    problem = ba.AlignmentProblem.paired({"a": X, "b": X + 0.1 * rng.normal(size=(30, 3))}).split_anchors(4, seed=0)
    al = run_method("joint-laplacian", problem).alignments[("a", "b")]
    assert not al.info["calibration"]["calibrated"]
    assert "uncalibrated" in al.info["probability"]


@pytest.mark.parametrize("guess", ["sharpest", "softest"])
def test_the_window_widens_to_the_grid_minimum_from_a_far_guess(monkeypatch, guess):
    # the Sinkhorn window starts at the row-softmax guess; forced to an end of the grid, the widening must still
    # reach the minimum over every scale (brute force)
    problem = _noise_beside_real("noise")
    rng = np.random.default_rng(2)
    X = problem.views["real"]
    problem = problem.replace(views=ba.Views({"real": X, "other": X[:, :6] @ rng.normal(size=(6, 6))
                                              + 0.5 * rng.normal(size=(40, 6))}))

    def fit(p):
        return ba.spectral.CCAAlignment(n_components=3).fit(p).embedding_

    objectives = []
    for s in SCALES:
        monkeypatch.setattr(calibration, "SCALES", np.array([s]))
        objectives.append(cross_fitted_temperature(fit, problem, "real", "other")["objective"])
    monkeypatch.setattr(calibration, "SCALES", SCALES)
    at = 0 if guess == "sharpest" else SCALES.size - 1
    monkeypatch.setattr(calibration, "_row_softmax_objective",
                        lambda folds: np.where(np.arange(SCALES.size) == at, 0.0, 1.0))
    found = cross_fitted_temperature(fit, problem, "real", "other")
    assert 2 < int(np.argmin(objectives)) < SCALES.size - 3  # the guess is far from the minimum
    assert found["scale"] == SCALES[int(np.argmin(objectives))]
    # a start from a sharper scale stops elsewhere inside Sinkhorn's tolerance: each held-out pair's log marginal
    # within about CALIBRATION_TOL (its columns' largest relative error; the rows are exact)
    assert abs(found["objective"] - min(objectives)) <= found["pairs"] * calibration.CALIBRATION_TOL


def test_the_row_softmax_guess_is_its_brute_force():
    # the guess's objective against log softmax written out per pair
    rng = np.random.default_rng(4)
    C = rng.uniform(0.0, 3.0, size=(7, 9))
    fold = {"C": C, "T0": 0.5, "ia": np.array([0, 3, 5]), "ib": np.array([2, 2, 8])}
    expected = []
    for s in SCALES:
        T = s * 0.5
        expected.append(-sum(-C[i, t] / T - np.log(np.exp(-C[i] / T).sum()) for i, t in zip(fold["ia"], fold["ib"])))
    # 1e-9 relative: logsumexp against the plain sum of exponentials (no underflow at these costs)
    np.testing.assert_allclose(calibration._row_softmax_objective([fold, fold]), 2 * np.array(expected), rtol=1e-9)


def test_a_sampled_pool_fits_the_scale_of_the_whole_pool(monkeypatch):
    # the folds' Sinkhorn solves over a sample of the rows to match (MAX_CALIBRATION_PAIRS) against the whole pool
    rng = np.random.default_rng(5)
    X = rng.normal(size=(240, 4))
    Q = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    problem = ba.AlignmentProblem.paired({"a": X, "b": X @ Q + 0.6 * rng.normal(size=(240, 4))}).split_anchors(
        40, seed=0)

    def fit(p):
        return ba.spectral.CCAAlignment(n_components=4).fit(p).embedding_

    whole = cross_fitted_temperature(fit, problem, "a", "b")
    monkeypatch.setattr(calibration, "MAX_CALIBRATION_PAIRS", 80 ** 2)
    sampled = cross_fitted_temperature(fit, problem, "a", "b")
    assert not whole["subsampled"] and sampled["subsampled"]
    assert whole["signal"] and sampled["signal"]
    # one step of the grid (a factor 2): a third of the rivals changes the objective's curvature, not its place
    assert abs(np.log2(sampled["scale"] / whole["scale"])) <= 1
