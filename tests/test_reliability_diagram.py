"""The reliability diagram's bins against a binning done by hand."""

import numpy as np
import pytest

from bayesalign import metrics, plot

#: Six pairs and the 10 bins of width 0.1 they fall in: 0.1 opens bin 1, and p = 1 joins the last bin.
PROBABILITIES = np.array([0.05, 0.1, 0.18, 0.5, 0.95, 1.0])
CORRECT = np.array([False, True, False, False, True, True])
#: By hand: bin 0 {0.05: wrong}, bin 1 {0.1: right, 0.18: wrong}, bin 5 {0.5: wrong}, bin 9 {0.95, 1.0: right}.
BY_HAND = {"confidence": [0.05, 0.14, 0.5, 0.975], "correct": [0.0, 0.5, 0.0, 1.0], "count": [1, 2, 1, 2]}


def test_reliability_bins_are_the_hand_binning():
    confidence, correct, count = plot.reliability_bins(PROBABILITIES, CORRECT)
    # means of two or fewer numbers: exact up to one rounding of the division
    np.testing.assert_allclose(confidence, BY_HAND["confidence"], rtol=1e-15)
    np.testing.assert_array_equal(correct, BY_HAND["correct"])
    np.testing.assert_array_equal(count, BY_HAND["count"])
    # ECE by hand: (0.05 + 2 * 0.36 + 0.5 + 2 * 0.025) / 6
    assert metrics.expected_calibration_error(PROBABILITIES, CORRECT) == pytest.approx(1.32 / 6, rel=1e-12)


def test_reliability_diagram_of_pooled_probabilities_draws_the_hand_binning(tmp_path):
    other = (np.full(4, 0.25), np.array([True, False, False, False]))  # one bin: 0.25 stated, 0.25 right
    fig = plot.plot_reliability({"pooled": (PROBABILITIES, CORRECT), "other": other}, None,
                                path=tmp_path / "reliability.png")
    assert (tmp_path / "reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    lines = fig.axes[0].lines  # the diagonal, then one line per entry
    assert len(lines) == 3
    np.testing.assert_allclose(lines[1].get_xydata(), np.column_stack([BY_HAND["confidence"], BY_HAND["correct"]]),
                               rtol=1e-15)
    np.testing.assert_allclose(lines[2].get_xydata(), [[0.25, 0.25]])
