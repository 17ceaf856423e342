r"""Soft correspondences as inference: rounds that join each unaligned row to its probable partners and refit.

Round r (EM-style): (E) P = the Sinkhorn match marginals of the current posteriors at the posterior temperature;
(M) the all-rows model refitted from its current q(X) means under the graph prior with every unaligned row joined
to its ``NEIGHBORS`` most probable partners in the other view by edges of weight P,

.. math:: p(X) = N(0, (I + \lambda (L + L_P))^{-1}),

so that a probable partner counts like a within-view neighbour. Priors that differ make the rounds' bounds
incomparable, so a round is judged on the anchors: it is kept when the FOSCTTM of the re-inferred anchor pairs
among the unaligned rows is lower than the best so far. The rounds stop at the first that is not, after
``ROUNDS``, or when fewer than 1% of the Hungarian pairs changed. They run on the collapsed all-rows model with
the graph prior and at least ``MIN_CALIBRATION_PAIRS`` anchor pairs between the first two views.
"""

from __future__ import annotations

import time

import numpy as np

from ..matching import posterior_assignment, posterior_marginals, posterior_temperature
from .calibration import MIN_CALIBRATION_PAIRS
from .posteriors import anchor_foscttm

__all__ = ["NEIGHBORS", "ROUNDS", "refine_correspondences", "truth_pairs"]

#: Rounds of soft correspondence after the first fit.
ROUNDS = 1
#: Partners per row (each way) that a round joins it to.
NEIGHBORS = 5


def truth_pairs(problem, a: str, b: str) -> set[tuple[int, int]] | None:
    """The true (row of a, row of b) pairs as a set, or None when the problem has no truth for them."""
    if not problem.has_truth:
        return None
    try:
        truth = problem.truth_between(a, b)
    except ValueError:
        return None
    return set(zip(truth.index_a.tolist(), truth.index_b.tolist()))


def pairs_accuracy(pairs, truth) -> float | None:
    """Fraction of the pairs that are true (None without truth or pairs)."""
    if truth is None or not pairs:
        return None
    return sum(pair in truth for pair in pairs) / len(pairs)


def _top_k_per_row(P, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, columns, values) of the k largest positive entries of every row of a CSR matrix."""
    heads, tails, values = [], [], []
    for i in range(P.shape[0]):
        lo, hi = P.indptr[i], P.indptr[i + 1]
        data = P.data[lo:hi]
        top = np.argsort(-data, kind="stable")[:k]
        top = top[data[top] > 0]
        heads.append(np.full(top.size, i))
        tails.append(P.indices[lo:hi][top])
        values.append(data[top])
    if not heads:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(heads).astype(np.int64), np.concatenate(tails).astype(np.int64), np.concatenate(values)


def correspondence_edges(mad, edges: bool = True) -> tuple:
    """(W, pairs): the soft correspondences as graph weights, sparse symmetric (n_entities, n_entities), every
    unaligned row joined to its ``NEIGHBORS`` most probable partners (each way, for every pair of views sharing a
    dimension), weighted by P (None with ``edges=False``); and the Hungarian pairs of the first two views."""
    import scipy.sparse as sp

    n_entities, rows = mad.entities_
    names = mad.problem_.views.names
    weights, pairs = sp.csr_matrix((n_entities, n_entities)), None
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if len(mad.shared_dims(a, b)) == 0 or (not edges and pairs is not None):
                continue
            p = mad.posteriors(a, b)
            if pairs is None:  # the optimal assignment of the first two views, as align() finds it
                found = posterior_assignment(mad.cost, p.mean_a, p.var_a, p.mean_b, p.var_b)
                pairs = set(zip(p.rows_a[found.index_a].tolist(), p.rows_b[found.index_b].tolist()))
            if not edges:
                continue
            P = posterior_marginals(mad.cost, p.mean_a, p.var_a, p.mean_b, p.var_b,
                                    posterior_temperature(mad.cost, p.var_a, p.var_b))
            entity_a, entity_b = rows[a][p.rows_a], rows[b][p.rows_b]  # the entity of each candidate row
            for M, heads_of, tails_of in ((P, entity_a, entity_b), (P.T.tocsr(), entity_b, entity_a)):
                heads, tails, mass = _top_k_per_row(M, NEIGHBORS)
                W = sp.coo_matrix((mass, (heads_of[heads], tails_of[tails])), shape=(n_entities, n_entities)).tocsr()
                weights = weights.maximum(W).maximum(W.T)
    return (weights.tocsr() if edges else None), pairs


def _applies(mad) -> bool:
    a, b = mad.problem_.views.names[:2]
    return (mad.engine == "collapsed" and mad.training == "all_rows" and mad.latent_prior_ == "graph"
            and len(mad.problem_.anchors_between(a, b, implied=True)) >= MIN_CALIBRATION_PAIRS
            and len(mad.shared_dims(a, b)) > 0)


def refine_correspondences(mad) -> None:
    """Run the rounds on a fitted MAD where they apply (see the module docstring), keep the best judged state;
    ``correspondence_history_`` lists every round (round 0 is the first fit), ``correspondence_rounds_`` how many
    were asked for."""
    if not _applies(mad):
        return
    start = time.perf_counter()
    mad.correspondence_rounds_ = ROUNDS
    problem = mad.problem_
    a, b = problem.views.names[:2]
    truth = truth_pairs(problem, a, b)

    def score():
        return anchor_foscttm(mad.anchor_pool(a, b), mad.cost, (a, b))

    best_score, best = score(), vars(mad).copy()
    edges, pairs = correspondence_edges(mad)
    history = [{"round": 0, "elbo": float(mad.model_.elbo()), "anchor_foscttm": best_score, "changed": None,
                "accuracy": pairs_accuracy(pairs, truth), "kept": True}]
    for round_ in range(1, ROUNDS + 1):
        mad.refit(init=mad.embedding_, extra_edges=edges)
        value, last = score(), round_ == ROUNDS
        new_edges, new_pairs = correspondence_edges(mad, edges=not last)
        changed = 1.0 - len(new_pairs & pairs) / max(len(pairs), 1)
        better = bool(np.isfinite(value) and value < best_score)
        for previous in history:
            previous["kept"] = previous["kept"] and not better
        history.append({"round": round_, "elbo": float(mad.model_.elbo()), "anchor_foscttm": value,
                        "changed": changed, "accuracy": pairs_accuracy(new_pairs, truth), "kept": better})
        if not better:
            break
        best_score, best = value, vars(mad).copy()
        edges, pairs = new_edges, new_pairs
        if changed < 0.01:
            break
    vars(mad).update(best)  # the kept round's fitted state
    mad.correspondence_history_ = history
    mad.timings_ = {**mad.timings_, "correspondence_seconds": time.perf_counter() - start}
