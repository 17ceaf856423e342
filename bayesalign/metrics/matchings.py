"""Metrics of a matching against the truth: the Kendall-tau distance, accuracy, and all matching metrics at once."""

from __future__ import annotations

import math

import numpy as np

from ..data import Alignment, AlignmentProblem, Correspondence
from ._inputs import _evaluable_truth, _pair_keys, _truth_pairs
from .calibration import brier_score, expected_calibration_error, precision_at_coverage


def kendall_tau_distance(predicted, truth, views=None) -> float:
    r"""Normalised Kendall-tau distance between the predicted and the true matching.

    For the m rows i of view a with a true partner that the prediction matches to a row
    :math:`p_i` of view b which has a true partner in a, let :math:`r_i = t^{-1}(p_i)` be that true partner (the row
    of a the prediction effectively puts at position i). The distance is the fraction of
    discordant pairs between the order of the rows of a and the order of the :math:`r_i`,

    .. math:: d_K = \frac{\#\{k < l : (r_k - r_l)(k - l) < 0\}
              + \tfrac12 \#\{k < l : r_k = r_l\}}{\binom{m}{2}} = \frac{1 - \tau}{2},

    where :math:`\tau` is Kendall's rank correlation; a tie (two rows sent to one row of b)
    counts as half a discordance. Measured in view a's row order (the sequence order of
    MAD's toy and motion data), it does not change when the rows of view b are relabelled,
    e.g. by :meth:`AlignmentProblem.shuffle_unaligned`. 0 for the true
    matching, 1 for the reversed order, about 0.5 at random: the measure of MAD's Table 1
    (Damianou, Lawrence & Ek 2016). O(m log m) through ``scipy.stats.kendalltau``.
    Returns NaN when fewer than two rows can be scored.

    Parameters
    ----------
    predicted : Alignment or int array (n_a,)
        The matching (a permutation array has -1 for unmatched rows).
    truth : Correspondence, AlignmentProblem or int array (n_a,)
        One-to-one on the scored rows.
    views : (str, str), optional
        Names of the views, when neither argument carries them.

    Examples
    --------
    >>> kendall_tau_distance([0, 1, 2, 3], [0, 1, 2, 3]), kendall_tau_distance([3, 2, 1, 0], [0, 1, 2, 3])
    (0.0, 1.0)
    >>> kendall_tau_distance([1, 0, 2], [0, 1, 2])   # one discordant pair out of 3
    0.3333333333333333
    """
    from scipy.stats import kendalltau

    ta, tb, pa, pb, _ = _evaluable_truth(predicted, truth, views)
    if np.unique(pa).size != pa.size:
        raise ValueError("kendall_tau_distance: the prediction matches a row of view a more than once")
    if np.unique(ta).size != ta.size or np.unique(tb).size != tb.size:
        raise ValueError("kendall_tau_distance: the truth must be one-to-one")
    if tb.size == 0:
        return float("nan")
    by_b = np.argsort(tb)
    sorted_b = tb[by_b]
    slot = np.minimum(np.searchsorted(sorted_b, pb), sorted_b.size - 1)
    # scored: rows with a true partner whose predicted partner has a true partner in view a
    known = (sorted_b[slot] == pb) & np.isin(pa, ta)
    x = ta[by_b[slot[known]]]  # [m] r_i: the true a-partner of each predicted partner
    y = pa[known]  # [m] the rows i of view a themselves
    m = x.size
    if m < 2:
        return float("nan")
    n0 = m * (m - 1) // 2
    _, counts = np.unique(x, return_counts=True)
    tied = int((counts * (counts - 1) // 2).sum())  # pairs tied in the prediction (y has none)
    if tied == n0:
        return 0.5
    tau_b = kendalltau(x, y).statistic  # (C - D) / sqrt((n0 - tied) n0)
    concordant_minus_discordant = tau_b * math.sqrt((n0 - tied) * n0)
    discordant = round(((n0 - tied) - concordant_minus_discordant) / 2)
    return (discordant + 0.5 * tied) / n0


def matching_accuracy(predicted, truth, views=None) -> float:
    r"""Fraction of the true pairs that the matching recovers.

    .. math:: \text{acc} = \frac{|\{(i, j) \in T : (i, j) \in M\}|}{|T|}

    over the true pairs T whose rows took part in the matching (the Alignment's
    candidates) and, with a problem, are not anchors. An unmatched row counts as wrong. It is
    the top-1 retrieval accuracy of Wang & Mahadevan (2013), section 4, for a one-to-one
    matching instead of a nearest-neighbour search.

    Examples
    --------
    >>> matching_accuracy([0, 2, 1, -1], [0, 1, 2, 3])
    0.25
    """
    ta, tb, pa, pb, _ = _evaluable_truth(predicted, truth, views)
    if not ta.size:
        return float("nan")
    pred_keys, true_keys = _pair_keys(pa, pb, ta, tb)
    return float(np.isin(true_keys, pred_keys).mean())


def evaluate(alignment: Alignment, problem: AlignmentProblem, coverage: float = 0.5) -> dict:
    """Accuracy and calibration of an alignment against the problem's truth, on its candidate rows.

    Returns a dict with ``n_pairs``, ``accuracy`` (:func:`matching_accuracy`), ``kendall_tau``
    (:func:`kendall_tau_distance`, the MAD paper's measure: 0 perfect, about 0.5 random) and, when
    the alignment carries probabilities, ``ece`` (:func:`expected_calibration_error`), ``brier``
    (:func:`brier_score`) and ``precision_at_coverage`` (of the ``coverage`` fraction of most
    confident pairs). The truth is restricted to the pairs whose rows are both candidates of the
    alignment (the rows it was asked to match) and, as for every metric given a problem, unaligned
    (anchors are given, not found).

    Examples
    --------
    >>> problem = AlignmentProblem.paired({"a": np.eye(3), "b": np.eye(3)})
    >>> al = Alignment(("a", "b"), [0, 1, 2], [0, 2, 1], probabilities=[0.9, 0.6, 0.3])
    >>> out = evaluate(al, problem)
    >>> round(out["accuracy"], 3), out["n_pairs"]
    (0.333, 3)
    """
    ta, tb, _ = _truth_pairs(problem, tuple(alignment.views))  # the anchors' pairs left out
    keep = np.isin(ta, alignment.candidates_a) & np.isin(tb, alignment.candidates_b)
    held = Correspondence(tuple(alignment.views), ta[keep], tb[keep])
    out = {"n_pairs": len(alignment), "accuracy": float(matching_accuracy(alignment, held)),
           "kendall_tau": float(kendall_tau_distance(alignment, held))}
    if alignment.probabilities is not None and len(alignment):
        out["ece"] = float(expected_calibration_error(alignment, held))
        out["brier"] = float(brier_score(alignment, held))
        out["precision_at_coverage"] = float(precision_at_coverage(alignment, held, coverage))
    return out
