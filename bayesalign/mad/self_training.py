"""Self-training: tie the pairs the model is sure of and refit, round after round (hard EM over the correspondence).

Each round aligns the two views (Hungarian on the cost, Sinkhorn probabilities at the posterior temperature: the
pairs the model itself is sure of), keeps the pairs whose probability is at least ``confidence_threshold`` and that
are mutual nearest neighbours under the cost, and ties them (each pair one entity, the model refitted from its
current q(X): the M-step raises the bound of the model in which those rows share one latent point). It stops when
no pair qualifies or after ``max_rounds``. With at least ``MIN_CALIBRATION_PAIRS`` given anchor pairs the anchors
judge each round: it is kept unless their FOSCTTM among the rows unaligned when self-training began rises (the
anchors held out of continuations of the fit where the model allows, else re-inferred); otherwise the state before
the round comes back and self-training stops. Works on a :class:`~bayesalign.MAD` or a
:class:`~bayesalign.MADEnsemble` (whose members each tie the same pairs) through their public interface.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..matching import mutual_nearest
from .anchors import holds_out
from .calibration import MIN_CALIBRATION_PAIRS
from .posteriors import anchor_foscttm
from .refinement import truth_pairs

__all__ = ["check_self_training", "confident_pairs", "self_train"]


def check_self_training(problem, confidence_threshold, max_rounds) -> None:
    """Refuse what self-training cannot do (more than two views) or a bad argument, before any (slow) fit."""
    if len(problem.views) != 2:
        raise ValueError(f"self-training is implemented for two views; this problem has {len(problem.views)}")
    if isinstance(confidence_threshold, bool) or not 0 < float(confidence_threshold) <= 1:
        raise ValueError(f"confidence_threshold must be in (0, 1], got {confidence_threshold!r}")
    if isinstance(max_rounds, bool) or int(max_rounds) < 0:
        raise ValueError(f"max_rounds must be an integer >= 0, got {max_rounds!r}")


def _members(estimator) -> list:
    return list(getattr(estimator, "estimators_", [estimator]))


def _bound(estimator):
    bounds = [float(member.model_.elbo()) for member in _members(estimator)]
    return bounds if hasattr(estimator, "estimators_") else bounds[0]


def confident_pairs(estimator, a, b, confidence_threshold: float = 0.9):
    """The pairs the model is sure of: ``(alignment, keep, (rows_a, rows_b))`` with ``alignment`` the Hungarian
    matching of the unaligned rows of a and b (probabilities at the posterior temperature), ``keep`` the positions
    of its pairs whose probability is at least ``confidence_threshold`` and that are mutual nearest neighbours under
    the cost, and the unaligned rows of each view."""
    rows_a, rows_b, C = estimator.cost_matrix(a, b)  # [n_a, n_b]: the mutual nearest neighbours need all of it
    al = estimator.align(a, b, matcher="hungarian", include_discovered=False, temperature="posterior")
    mutual = mutual_nearest(C)
    pos_a, pos_b = np.searchsorted(rows_a, al.index_a), np.searchsorted(rows_b, al.index_b)
    keep = np.flatnonzero((al.probabilities >= float(confidence_threshold)) & mutual[pos_a, pos_b])
    return al, keep, (rows_a, rows_b)


def self_train(estimator, confidence_threshold: float = 0.9, max_rounds: int = 5) -> None:
    """Run self-training's rounds between the two views of a fitted estimator (see the module docstring); one entry
    per round in ``self_training_history_`` (``round``, ``n_anchors``, ``added``, ``correct`` and ``accuracy``
    where the problem has truth, ``elbo``, ``anchor_foscttm``, ``judge_pairs``, ``kept``)."""
    problem = estimator.problem_
    check_self_training(problem, confidence_threshold, max_rounds)
    a, b = problem.views.names
    truth = truth_pairs(problem, a, b)
    members = _members(estimator)
    judged = len(problem.anchors_between(a, b, implied=True)) >= MIN_CALIBRATION_PAIRS
    held_out = judged and holds_out(estimator)
    judge_pairs = ("held_out" if held_out else "reinferred") if judged else None
    # among the rows unaligned now, whichever a round ties: a pool that shrank would lose the rows easiest to tell
    # apart from an anchor, and its FOSCTTM would rise with no change in the model
    start = estimator.posteriors(a, b)
    rows = (start.rows_a, start.rows_b)

    def score():
        return anchor_foscttm(estimator.anchor_pool(a, b, rows=rows, held_out=held_out), estimator.cost, (a, b))

    best_score = score() if judged else None
    for round_ in range(1, int(max_rounds) + 1):
        al, keep, (rows_a, rows_b) = confident_pairs(estimator, a, b, confidence_threshold)
        room = min(rows_a.size, rows_b.size) - 1  # leave a row of each view to align (a fit refuses a view with none)
        if keep.size > room:
            keep = keep[np.argsort(-al.probabilities[keep], kind="stable")[:max(room, 0)]]
        new_a, new_b = al.index_a[keep], al.index_b[keep]
        correct = accuracy = None
        if truth is not None:
            correct = int(sum((int(i), int(j)) in truth for i, j in zip(new_a, new_b)))
            full = estimator.align(a, b, matcher="hungarian", temperature="posterior")
            partner = dict(truth)
            held = [i for i in full.candidates_a.tolist() if i in partner]
            right = sum(partner.get(int(i)) == int(j) for i, j in zip(full.index_a, full.index_b))
            accuracy = right / max(len(held), 1)
        entry = {"round": round_, "n_anchors": len(members[0].anchors_), "added": int(keep.size), "correct": correct,
                 "accuracy": accuracy, "elbo": _bound(estimator), "anchor_foscttm": None, "judge_pairs": judge_pairs,
                 "kept": None}
        estimator.self_training_history_.append(entry)
        if keep.size == 0:
            break
        before = vars(estimator).copy()
        estimator.tie(a, b, new_a, new_b, al.probabilities[keep], al.costs[keep], round_)
        entry["kept"] = True
        if judged:
            value = entry["anchor_foscttm"] = score()
            if not (np.isfinite(value) and value <= best_score):  # the anchors say the round made it worse
                entry["kept"] = False
                history = estimator.self_training_history_
                vars(estimator).update(before)
                estimator.self_training_history_ = history
                break
            best_score = value
    bootstrap = getattr(estimator, "bootstrap_", None)
    if bootstrap is not None:
        added = sum(entry["added"] for entry in estimator.self_training_history_)
        bootstrap["self_training_added"] = int(added)
        if added == 0:
            warnings.warn(f"MAD without anchors: self-training added no pair to the {len(bootstrap['pairs'])} "
                          f"unsupervised starting pairs ({bootstrap['method']}), so nothing confirmed them; the "
                          "alignment is likely wrong (a mirror image is common). Check bootstrap_ and give a few "
                          "anchors if you can", RuntimeWarning, stacklevel=4)
