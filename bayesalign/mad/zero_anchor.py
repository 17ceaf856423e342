"""MAD without anchors: unsupervised starting pairs, each candidate fitted and self-trained, the best supported kept.

The candidates are the most confident mutual pairs of entropic Gromov-Wasserstein between the views' within-view
distances (started from each reflection of the views' leading principal axes, since a mirror image is as good to
it as the right correspondence) and of the shared-subspace Procrustes search (:mod:`bayesalign.bootstrap`). From
each candidate's pairs the model is fitted and self-trained (hard EM over the correspondence); the candidate whose
self-training confirmed the most pairs is kept (the highest final bound among those equally extended). When a
candidate that pairs the rows differently was extended nearly as much (``RIVAL_SUPPORT``), a RuntimeWarning says
the alignment is ambiguous; when the kept one confirmed few rows (``WEAK_SUPPORT``), that it is weakly supported.
With several candidates every fit uses p(X) = N(0, I): the graph prior is built over the entities, which each
candidate's pairs merge differently, so its bounds would compare different priors.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..data import Views
from ..matching import posterior_assignment
from .refinement import truth_pairs
from .self_training import self_train
from .training import MIN_ANCHORS, mean_filled

__all__ = ["BOOTSTRAPS", "REFLECTIONS", "RIVAL_SUPPORT", "WEAK_SUPPORT", "fit_without_anchors"]

#: The unsupervised initialisers tried (with ``training="anchors"``, whose bounds cover different rows for each
#: candidate and cannot compare them, the first alone from its default start); "geodesic_gromov_wasserstein":
#: the coupling of :class:`bayesalign.transport.GromovWassersteinAlignment` (:func:`geodesic_pairs`).
BOOTSTRAPS = ("gromov_wasserstein", "subspace_procrustes")
#: Leading principal axes whose reflections start Gromov-Wasserstein (2 ** REFLECTIONS starts).
REFLECTIONS = 2
#: A candidate pairing the rows differently whose self-training added at least this fraction of the kept one's
#: pairs makes the alignment ambiguous.
RIVAL_SUPPORT = 0.75
#: A kept candidate whose self-training confirmed fewer than this fraction of the rows left to match is weakly
#: supported.
WEAK_SUPPORT = 0.2
#: Self-training of each candidate: the probability a pair needs, and the most rounds.
CONFIDENCE_THRESHOLD, MAX_ROUNDS = 0.9, 5


def geodesic_pairs(views, a: str, b: str) -> tuple[np.ndarray, np.ndarray]:
    """(pairs (m, 2), scores (m,)): the mutual row-and-column maxima of the coupling of
    :class:`bayesalign.transport.GromovWassersteinAlignment` (k-NN geodesic distances, its settings chosen by
    stability) between views a and b, scored by n T_ij (at most 1)."""
    from ..transport import GromovWassersteinAlignment

    T = GromovWassersteinAlignment().fit(Views({a: views[a], b: views[b]})).coupling_  # [n_a, n_b]
    rows = np.arange(T.shape[0])
    best = T.argmax(axis=1)
    mutual = T.argmax(axis=0)[best] == rows
    scores = np.minimum(T[rows, best] * T.shape[0], 1.0)
    return np.c_[rows[mutual], best[mutual]].astype(np.int64), scores[mutual]


def candidates(mad) -> list:
    """Unsupervised starting anchors: per candidate ``(method, signs, pairs (k, 2), scores (k,), mutual pairs
    found)``, its k = max(MIN_ANCHORS, 2 latent_dim) highest-scored mutual pairs."""
    from ..bootstrap import reflection_starts, unsupervised_pairs

    problem = mad.problem_
    a, b = problem.views.names
    methods = BOOTSTRAPS[:1] if mad.training == "anchors" else BOOTSTRAPS
    reflections = 0 if mad.training == "anchors" else REFLECTIONS
    k = max(MIN_ANCHORS, 2 * int(mad.latent_dim))
    views = mean_filled(problem.views)
    Ya, Yb = views[a], views[b]
    out, found = [], [0]
    for method in methods:
        starts = reflection_starts(Ya, Yb, n_axes=reflections) if method == "gromov_wasserstein" and reflections \
            else [((), None)]
        for signs, start in starts:
            try:
                pairs_all, weights = geodesic_pairs(views, a, b) if method == "geodesic_gromov_wasserstein" else \
                    unsupervised_pairs(Ya, Yb, method, views=(a, b), init=start)
            except ValueError as exc:  # e.g. a view with one column has no plane for the subspace search
                if len(methods) == 1:
                    raise
                warnings.warn(f"MAD without anchors: the {method!r} bootstrap cannot run on these views ({exc}); only "
                              f"the other bootstraps' candidates are compared", RuntimeWarning, stacklevel=4)
                continue
            order = np.argsort(-weights, kind="stable")[:k]
            found.append(int(order.size))
            if order.size >= MIN_ANCHORS:
                out.append((method, tuple(int(x) for x in signs), pairs_all[order].astype(np.int64), weights[order],
                            int(len(pairs_all))))
    if not out:
        raise ValueError(f"the unsupervised bootstrap found at most {max(found)} mutual pairs; MAD needs at least "
                         f"{MIN_ANCHORS}: give a few anchors")
    return out


def fit_without_anchors(mad) -> None:
    """Fit every candidate (see the module docstring) and keep the best supported; sets ``bootstrap_`` with every
    candidate's record, re-issues the kept candidate's warnings and drops the others'."""
    problem = mad.problem_
    a, b = problem.views.names
    found_candidates = candidates(mad)
    if len(found_candidates) > 1:
        mad.latent_prior_ = "standard_normal"
    truth = truth_pairs(problem, a, b)
    records, found, best = [], [], None  # best: ((pairs self-training added, final bound), k, state, warnings)
    for k, (method, signs, pairs, scores, n_mutual) in enumerate(found_candidates):
        correct = None if truth is None else int(sum((int(i), int(j)) in truth for i, j in pairs))
        mad.anchors_, mad.discovered_, mad.self_training_history_, mad.start_ = pairs, {}, [], None
        mad.bootstrap_ = {"method": method, "n_mutual_pairs": n_mutual, "pairs": pairs, "correct": correct}
        # the scores (n T_ij or exp(-dist / delta^2)) stand in for probabilities (not calibrated)
        mad.discovered_ = {(a, b): {"index_a": pairs[:, 0], "index_b": pairs[:, 1],
                                    "probability": np.clip(scores, 0.0, 1.0), "cost": np.zeros(len(pairs)),
                                    "round": np.zeros(len(pairs), np.int64)}}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mad.refit()
            self_train(mad, CONFIDENCE_THRESHOLD, MAX_ROUNDS)
        bound = float(mad.model_.elbo())
        added = int(sum(h["added"] for h in mad.self_training_history_))
        records.append({"method": method, "signs": signs, "n_pairs": int(len(pairs)), "correct": correct,
                        "bound": bound, "self_training_added": added})
        found.append(mad.anchors_.copy())  # its bootstrap and self-training pairs, for the agreement below
        if best is None or (added, bound) > best[0]:
            best = ((added, bound), k, vars(mad).copy(), list(caught))
    _, chosen, state, caught = best
    vars(mad).update(state)
    mad.bootstrap_.update(candidates=records, chosen=chosen)
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    _check_rivals(mad, a, b, records, found, chosen)


def _check_rivals(mad, a, b, records: list, found: list, chosen: int) -> None:
    """Each candidate's pairs read against the kept alignment (``agreement``: the fraction it reproduces); warn when
    a rival (agreement below one half) had nearly as much support, or the kept one little."""
    p = mad.posteriors(a, b)
    kept = {int(i): int(j) for i, j in mad.anchors_[:, :2]}
    if p.rows_a.size and p.rows_b.size:
        al = posterior_assignment(mad.cost, p.mean_a, p.var_a, p.mean_b, p.var_b)
        kept.update(zip(p.rows_a[al.index_a].tolist(), p.rows_b[al.index_b].tolist()))
    support = records[chosen]["self_training_added"]
    rivals = []
    for k, (record, pairs) in enumerate(zip(records, found)):
        record["agreement"] = float(np.mean([kept.get(int(i)) == int(j) for i, j in pairs[:, :2]]))
        if k != chosen and record["agreement"] < 0.5 and record["self_training_added"] >= RIVAL_SUPPORT * support:
            rivals.append(k)
    bootstrap = mad.bootstrap_
    bootstrap["ambiguous"] = bool(rivals) and support > 0
    # the rows the kept candidate's self-training could confirm: those its bootstrap pairs left
    left = min(mad.problem_.views.n_samples[a], mad.problem_.views.n_samples[b]) - records[chosen]["n_pairs"]
    bootstrap["weak_support"] = 0 < support < WEAK_SUPPORT * left
    if bootstrap["weak_support"]:
        warnings.warn(f"MAD without anchors: self-training confirmed only {support} of the {left} rows left to match "
                      f"from the kept candidate's pairs (fewer than WEAK_SUPPORT = {WEAK_SUPPORT:.0%}): the data "
                      "barely support the alignment, which is likely wrong (a mirror image is common). Check "
                      "bootstrap_['candidates'] and give a few anchors", RuntimeWarning, stacklevel=4)
    if bootstrap["ambiguous"]:
        rival = records[max(rivals, key=lambda k: records[k]["self_training_added"])]

        def label(record):
            return " ".join([record["method"], *([str(tuple(record["signs"]))] if record["signs"] else [])])

        warnings.warn(f"MAD without anchors: the alignment is ambiguous. The kept candidate "
                      f"({label(records[chosen])}) was extended by {support} pairs in self-training, and a candidate "
                      f"that pairs the rows differently ({label(rival)}, {rival['agreement']:.0%} of its pairs agree) "
                      f"by {rival['self_training_added']}: the data support both about equally. Check "
                      "bootstrap_['candidates'] and give a few anchors", RuntimeWarning, stacklevel=4)
