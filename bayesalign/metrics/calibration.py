"""Calibration of match probabilities: expected calibration error, Brier score, precision at a coverage."""

from __future__ import annotations

import math

import numpy as np

from .._utils import check_count
from ..data import Alignment
from ._inputs import _pair_keys, _truth_pairs


def _confidence_and_correct(predicted, truth, views, need_probabilities=True):
    """Per scored pair of a matching: its confidence and whether it is a true pair.

    A predicted pair (i, j) is scored when i or j has a true partner (after the problem's
    anchor filter); it is correct when (i, j) is a true pair.
    """
    if not isinstance(predicted, Alignment):
        conf = np.asarray(predicted, dtype=np.float64).reshape(-1)
        if np.isnan(conf).any():  # a NaN would fall in no bin, or sort anywhere
            raise ValueError(f"confidence {int(np.flatnonzero(np.isnan(conf))[0])} is NaN")
        correct = np.asarray(truth).reshape(-1)
        if correct.shape != conf.shape:
            raise ValueError(f"{conf.size} confidences but {correct.size} correctness flags")
        if not np.isin(correct, (0, 1)).all():
            raise ValueError("correctness flags must be booleans (or 0/1)")
        return conf, correct.astype(bool)
    views = tuple(predicted.views)
    ta, tb, _ = _truth_pairs(truth, views)
    if predicted.probabilities is not None:
        conf = predicted.probabilities
    elif need_probabilities:
        raise ValueError(f"the {predicted.method or 'given'} alignment carries no match probabilities")
    else:
        conf = -predicted.costs  # a lower cost is a more confident pair
    scored = np.isin(predicted.index_a, ta) | np.isin(predicted.index_b, tb)
    pred_keys, true_keys = _pair_keys(predicted.index_a, predicted.index_b, ta, tb)
    return conf[scored], np.isin(pred_keys, true_keys)[scored]


def expected_calibration_error(predicted, truth, n_bins: int = 10, views=None) -> float:
    r"""Expected calibration error of the match probabilities (Guo et al. 2017, eq. 3).

    Pairs are put in ``n_bins`` equal-width bins of probability on [0, 1] (p = 1 in the
    last); with :math:`B_b` the pairs of bin b,

    .. math:: \text{ECE} = \sum_b \frac{|B_b|}{n}\,\bigl|\text{acc}(B_b) - \text{conf}(B_b)\bigr|.

    ``predicted`` is an Alignment with probabilities (``truth`` as elsewhere; see
    ``_confidence_and_correct`` for which pairs are scored), or an array of probabilities
    with ``truth`` the matching array of correctness flags.

    Examples
    --------
    >>> round(expected_calibration_error([0.9, 0.9, 0.2, 0.2], [True, False, False, False], n_bins=5), 12)
    0.3
    """
    p, y = _confidence_and_correct(predicted, truth, views)
    if (p < 0).any() or (p > 1).any():
        raise ValueError("probabilities must lie in [0, 1]")
    n_bins = check_count(n_bins, "n_bins")
    if not p.size:
        return float("nan")
    bins = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(bins, minlength=n_bins)
    gap = np.abs(np.bincount(bins, y.astype(float), n_bins) - np.bincount(bins, p, n_bins))
    return float(gap.sum() / count.sum())


def brier_score(predicted, truth, views=None) -> float:
    r"""Mean squared error of the match probabilities (Brier 1950): :math:`\frac1n \sum_t (p_t - y_t)^2`.

    Inputs as in :func:`expected_calibration_error`.

    >>> brier_score([1.0, 0.5, 0.0], [True, True, True])
    0.4166666666666667
    """
    p, y = _confidence_and_correct(predicted, truth, views)
    return float(np.mean((p - y) ** 2)) if p.size else float("nan")


def precision_at_coverage(predicted, truth, coverage: float = 0.5, views=None) -> float:
    r"""Precision among the most confident fraction of the pairs.

    Keeps the :math:`\lceil c\,n \rceil` pairs of highest confidence (match probability; for
    an Alignment without probabilities, lowest cost) and returns the fraction of them that
    are true pairs: the accuracy a user gets by trusting only the confident matches.
    Ties in confidence keep the earlier pair. Inputs as in
    :func:`expected_calibration_error`.

    >>> precision_at_coverage([0.9, 0.8, 0.3, 0.1], [True, False, True, False], coverage=0.5)
    0.5
    """
    coverage = float(coverage)
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage must be in (0, 1], got {coverage}")
    conf, y = _confidence_and_correct(predicted, truth, views, need_probabilities=False)
    if not conf.size:
        return float("nan")
    keep = max(1, math.ceil(coverage * conf.size - 1e-12))
    order = np.argsort(-conf, kind="stable")
    return float(y[order[:keep]].mean())
