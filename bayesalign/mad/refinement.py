r"""Correspondence as inference: q(P) and q(X) in turn, each round judged on the anchors.

Round r: (E) q(P), the coupling between the first two views' rows of :mod:`bayesalign.mad.coupling` (the latent
match cost of the current posteriors at the anchors' temperature and the views' geometric agreement, a fused
Gromov-Wasserstein term on their geodesic distances, the anchor pairs pinned), started from the previous round's;
(M) the all-rows model refitted from its current q(X) means under the graph prior with every unaligned row joined
to its ``NEIGHBORS`` most probable partners under q(P) by edges of their probability,

.. math:: p(X) = N(0, (I + \lambda (L + L_P))^{-1}),

so that a probable partner counts like a within-view neighbour. Priors that differ make the rounds' bounds
incomparable, so a round is judged on the anchors: it is kept when the FOSCTTM of the anchor pairs held out of
continuations of the fit (:func:`bayesalign.mad.anchors.held_out_anchors`: placed by their own views under the
round's graph prior, as the unaligned rows are, which anchors re-inferred from one view alone would not feel)
among the unaligned rows is lower than the best so far; the rounds stop at the first that is not, or after
``ROUNDS``. They run on the collapsed all-rows model with the graph prior, at least ``MIN_CALIBRATION_PAIRS``
anchor pairs between the first two views and at most ``MAX_COUPLING_ROWS`` rows in each (q(P) is dense).
"""

from __future__ import annotations

import time

import numpy as np

from .calibration import MIN_CALIBRATION_PAIRS
from .coupling import NEIGHBORS, coupling_edges, mad_coupling
from .posteriors import anchor_foscttm

__all__ = ["MAX_COUPLING_ROWS", "NEIGHBORS", "ROUNDS", "refine_correspondences", "truth_pairs"]

#: Rounds of q(P) and q(X) after the first fit (0: none; the fit's q(X) is kept as it is). None by default: on the
#: benchmarks of ``benchmarks/bench_mad_geometry.py`` the rounds the anchors kept aligned the other rows worse.
ROUNDS = 0
#: Rows of each view beyond which no round runs: q(P) is an (n_a, n_b) coupling with (n_v, n_v) structure matrices.
MAX_COUPLING_ROWS = 3000


def truth_pairs(problem, a: str, b: str) -> set[tuple[int, int]] | None:
    """The true (row of a, row of b) pairs as a set, or None when the problem has no truth for them."""
    if not problem.has_truth:
        return None
    try:
        truth = problem.truth_between(a, b)
    except ValueError:
        return None
    return set(zip(truth.index_a.tolist(), truth.index_b.tolist()))


def coupling_accuracy(P, rows_a, truth) -> float | None:
    """Fraction of the unaligned rows of a with a true partner whose most probable partner under P is it (None
    without truth)."""
    if truth is None:
        return None
    partner = dict(truth)
    held = [int(i) for i in rows_a if int(i) in partner]
    if not held:
        return None
    best = np.asarray(P)[held].argmax(axis=1)
    return float(np.mean([partner[i] == int(j) for i, j in zip(held, best)]))


def _applies(mad) -> bool:
    a, b = mad.problem_.views.names[:2]
    n = mad.problem_.views.n_samples
    return (ROUNDS > 0 and mad.engine == "collapsed" and mad.training == "all_rows" and mad.latent_prior_ == "graph"
            and len(mad.problem_.anchors_between(a, b, implied=True)) >= MIN_CALIBRATION_PAIRS
            and len(mad.shared_dims(a, b)) > 0 and max(n[a], n[b]) <= MAX_COUPLING_ROWS)


def refine_correspondences(mad) -> None:
    """Run the rounds on a fitted MAD where they apply (see the module docstring), keep the best judged state;
    ``correspondence_history_`` lists every round (round 0 is the first fit: its ``anchor_foscttm``, ``elbo``,
    ``accuracy`` of q(P)'s most probable partners where the problem has truth, whether q(P)'s mirror descent
    ``converged``, and whether it was ``kept``), ``correspondence_rounds_`` how many were asked for."""
    if not _applies(mad):
        return
    start = time.perf_counter()
    mad.correspondence_rounds_ = ROUNDS
    problem = mad.problem_
    a, b = problem.views.names[:2]
    truth = truth_pairs(problem, a, b)
    n_entities, rows = mad.entities_

    def score():  # held out of continuations of the fit: placed under the round's graph prior, as unaligned rows are
        return anchor_foscttm(mad.anchor_pool(a, b, held_out=True), mad.cost, (a, b))

    best_score, best = score(), vars(mad).copy()
    P, rows_a, rows_b, converged, structures = mad_coupling(mad, a, b)
    history = [{"round": 0, "elbo": float(mad.model_.elbo()), "anchor_foscttm": best_score,
                "accuracy": coupling_accuracy(P, rows_a, truth), "converged": converged, "kept": True}]
    for round_ in range(1, ROUNDS + 1):
        mad.refit(init=mad.embedding_, extra_edges=coupling_edges(P, rows_a, rows_b, rows[a], rows[b], n_entities,
                                                                  NEIGHBORS))
        value = score()
        better = bool(np.isfinite(value) and value < best_score)
        entry = {"round": round_, "elbo": float(mad.model_.elbo()), "anchor_foscttm": value, "accuracy": None,
                 "converged": None, "kept": better}
        history.append(entry)
        if not better:
            break
        for previous in history[:-1]:
            previous["kept"] = False
        best_score, best = value, vars(mad).copy()
        if round_ < ROUNDS:  # the next round's q(P), from this round's q(X) and the coupling before it
            P, rows_a, rows_b, converged, structures = mad_coupling(mad, a, b, init=P, structures=structures)
            entry.update(accuracy=coupling_accuracy(P, rows_a, truth), converged=converged)
    vars(mad).update(best)  # the kept round's fitted state
    mad.correspondence_history_ = history
    mad.timings_ = {**mad.timings_, "correspondence_seconds": time.perf_counter() - start}
