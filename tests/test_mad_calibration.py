"""MAD's temperature fitted on anchor pairs held out of the fit, against a brute-force grid."""

import numpy as np
import pytest

import bayesalign as ba
from bayesalign.mad import refinement
from bayesalign.mad.calibration import CALIBRATION_SINKHORN_TOL
from bayesalign.matching.matcher import _cost_matrix, sinkhorn_probabilities


@pytest.fixture(scope="module")
def toy():
    return ba.datasets.mad_toy("linear_shared", seed=0, n_anchors=12).shuffle_unaligned(seed=0)


@pytest.fixture(scope="module")
def all_rows(toy):
    with pytest.MonkeyPatch.context() as patch:  # the first fit alone: no correspondence round
        patch.setattr(refinement, "ROUNDS", 0)
        return ba.MAD(latent_dim=4, num_inducing=10, seed=0, engine_options={"max_iter": 150}).fit(toy)


def test_temperature_minimises_the_held_out_anchors_negative_log_probability(all_rows):
    # brute force: the anchor pairs held out of the fit join the rows to match; T* must be no worse than any
    # temperature of a grid over the search range, each objective solved to 1e-6 here
    mad = all_rows
    T = mad.calibrate_temperature("Y1", "Y2")
    record = mad.calibration_[("Y1", "Y2", mad.cost)]
    assert record["method"] == "held out of the fit" and record["pairs"] == 12 and not record["fallback"]
    pool = mad.anchor_pool("Y1", "Y2", held_out=True)  # the cached held-out pairs: the same pool
    C = _cost_matrix(mad.cost, pool.mean_a, pool.var_a, pool.mean_b, pool.var_b)

    def objective(t):
        P = sinkhorn_probabilities(C, t, tol=1e-6)
        return -np.log(np.maximum(P[pool.true_a, pool.true_b], 1e-300)).sum()

    T0 = record["posterior_temperature"]
    grid = T0 * np.logspace(-1, 4, 16)
    # the search solves to a marginal error of CALIBRATION_SINKHORN_TOL, each pair's log P about as far off, so its
    # T* may sit off the exact minimum by that much per pair (its own step, 5% in T, costs far less near a minimum)
    assert objective(T) <= min(objective(t) for t in grid) + 2 * CALIBRATION_SINKHORN_TOL * record["pairs"]
    # and the held-out pairs are not the re-inferred ones: that pool's optimum is another temperature
    inferred = mad.anchor_pool("Y1", "Y2")
    assert not np.allclose(inferred.mean_b[inferred.true_b], pool.mean_b[pool.true_b])


def test_a_fit_that_cannot_hold_its_anchors_out_calibrates_on_them_reinferred(toy):
    mad = ba.MAD(latent_dim=3, num_inducing=10, seed=0, training="anchors",
                 engine_options={"max_iter": 150, "warmup_iters": 50}).fit(toy)
    mad.calibrate_temperature()
    assert mad.calibration_[("Y1", "Y2", mad.cost)]["method"] == "anchor re-inference"
