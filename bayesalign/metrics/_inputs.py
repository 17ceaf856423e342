"""The inputs of the metrics: a truth as pairs, the views it is between, the predicted pairs to score."""

from __future__ import annotations

import numpy as np

from ..data import Alignment, AlignmentProblem, Correspondence


def _permutation_pairs(perm, what: str):
    perm = np.asarray(perm)
    if perm.ndim != 1 or not np.issubdtype(perm.dtype, np.integer):
        raise TypeError(f"{what}: expected a 1-D integer permutation array (perm[i] = j, -1 if none), "
                        f"got {perm.dtype} of shape {perm.shape}")
    if (perm < -1).any():
        raise ValueError(f"{what}: entries must be row indices or -1, got {int(perm.min())}")
    rows = np.flatnonzero(perm >= 0)
    return rows, perm[rows].astype(np.int64)


def _truth_pairs(truth, views):
    """(index_a, index_b, problem) of the truth oriented as ``views`` (a, b).

    With a problem, pairs touching an anchored row of either view are dropped.
    """
    if isinstance(truth, AlignmentProblem):
        if views is None:
            raise ValueError("name the two views (views=(a, b)) to take the truth from a problem")
        corr = truth.truth_between(*views)
        keep = np.isin(corr.index_a, truth.unaligned(views[0])) & np.isin(corr.index_b, truth.unaligned(views[1]))
        return corr.index_a[keep], corr.index_b[keep], truth
    if isinstance(truth, Correspondence):
        corr = truth if views is None else truth.oriented(*views)
        return corr.index_a, corr.index_b, None
    ia, ib = _permutation_pairs(truth, "truth")
    return ia, ib, None


def _views_of(predicted_views, truth, fallback=None):
    if predicted_views is not None:
        return tuple(predicted_views)
    if isinstance(truth, Correspondence):
        return truth.views
    if isinstance(truth, AlignmentProblem):
        return tuple(fallback or truth.views.names[:2])
    return None


def _prediction(predicted, truth, views):
    """(views, index_a, index_b, candidates_a, candidates_b, alignment-or-None)."""
    if isinstance(predicted, Alignment):
        return (tuple(predicted.views), predicted.index_a, predicted.index_b, predicted.candidates_a,
                predicted.candidates_b, predicted)
    ia, ib = _permutation_pairs(predicted, "predicted")
    return _views_of(views, truth), ia, ib, None, None, None


def _evaluable_truth(predicted, truth, views):
    """The truth pairs to score a matching on, and the prediction."""
    views, pa, pb, cand_a, cand_b, alignment = _prediction(predicted, truth, views)
    ta, tb, _ = _truth_pairs(truth, views)
    if cand_a is not None:  # only rows that took part in the matching can be scored
        keep = np.isin(ta, cand_a) & np.isin(tb, cand_b)
        ta, tb = ta[keep], tb[keep]
    return ta, tb, pa, pb, alignment


def _pair_keys(ia, ib, ta, tb):
    width = int(max(ib.max(initial=-1), tb.max(initial=-1))) + 1
    return ia.astype(np.int64) * width + ib, ta.astype(np.int64) * width + tb
