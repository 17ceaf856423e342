r"""MAD without anchors: the model started from the confident pairs of the views' Gromov-Wasserstein coupling.

The views' k-NN geodesic distances are coupled by entropic Gromov-Wasserstein, its settings chosen by their
stability (:class:`bayesalign.transport.GromovWassersteinAlignment`; SCOT, Demetci et al. 2022). Its confident
mutual pairs are the (i, j) that hold each other's largest entry of the coupling T, scored
:math:`\min(n_a T_{ij}, 1)` (1 when row i's whole mass sits on j); the
``max(MIN_ANCHORS, PAIRS_PER_DIMENSION * latent_dim)`` highest scored tie the model's first fit (each pair one
entity, as an anchor group). The all-rows model is then refitted from its q(X) with the whole coupling in its graph
prior (``COUPLING_EDGES``): every unaligned row joined to its ``NEIGHBORS`` most probable partners under T by edges
of their probability (:func:`~bayesalign.mad.coupling.coupling_edges`),

.. math:: p(X) = N(0, (I + \lambda (L + L_T))^{-1}),

so that each row is drawn toward its probable partners in the latent space, not only the few pairs tied. Its
support is read from the fitted model: the pairs it is sure of (:func:`~bayesalign.mad.self_training.confident_pairs`,
probability at least ``CONFIDENCE_THRESHOLD`` and mutual nearest neighbours), which self-training
(:meth:`~bayesalign.MAD.self_train`) would tie.

Within-view distances do not change when a view is reflected, so when the views' geometry is symmetric the
coupling cannot tell the correspondence from a mirror image. What the fit can see of that is said with a
RuntimeWarning and a flag in ``bootstrap_``: the coupling's settings disagreeing (``ambiguous``, the aligner's
:attr:`~bayesalign.transport.TransportAlignment.ambiguous_`), the model sure of none (``support`` 0) or of few of the
rows left to match (``weak_support``, fewer than ``WEAK_SUPPORT`` of them).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..data import Views
from .refinement import truth_pairs
from .self_training import confident_pairs
from .training import MIN_ANCHORS, mean_filled

__all__ = ["CONFIDENCE_THRESHOLD", "COUPLING_EDGES", "PAIRS_PER_DIMENSION", "WEAK_SUPPORT", "fit_without_anchors",
           "gromov_wasserstein_pairs", "mutual_pairs"]

#: Starting pairs per latent dimension (at least ``MIN_ANCHORS``).
PAIRS_PER_DIMENSION = 2
#: Refit the all-rows model with the coupling's soft edges in its graph prior after the first fit.
COUPLING_EDGES = True
#: The probability a pair the model is sure of needs.
CONFIDENCE_THRESHOLD = 0.9
#: A model sure of fewer than this fraction of the rows left to match supports the alignment weakly.
WEAK_SUPPORT = 0.2


def mutual_pairs(coupling) -> tuple[np.ndarray, np.ndarray]:
    """(pairs (m, 2), scores (m,)): the (i, j) of a coupling T [n_a, n_b] (summing to 1) where j is the largest
    entry of row i and i the largest of column j, scored min(n_a T_ij, 1), in the order of i.

    >>> mutual_pairs(np.array([[0.4, 0.1], [0.3, 0.2]]))  # row 1's best column is row 0's: not mutual
    (array([[0, 0]]), array([0.8]))
    """
    T = np.asarray(coupling, np.float64)
    rows = np.arange(T.shape[0])
    best = T.argmax(axis=1)
    mutual = T.argmax(axis=0)[best] == rows
    scores = np.minimum(T[rows, best] * T.shape[0], 1.0)
    return np.c_[rows[mutual], best[mutual]].astype(np.int64), scores[mutual]


def gromov_wasserstein_pairs(views: Views, a: str, b: str):
    """(pairs (m, 2), scores (m,), the fitted aligner): the confident mutual pairs (:func:`mutual_pairs`) of the
    coupling of :class:`~bayesalign.transport.GromovWassersteinAlignment` between views a and b (complete), its
    warnings re-issued as MAD's."""
    from ..transport import GromovWassersteinAlignment

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        aligner = GromovWassersteinAlignment().fit(Views({a: views[a], b: views[b]}))
    for w in caught:
        warnings.warn(f"MAD without anchors, the Gromov-Wasserstein coupling it starts from: {w.message}", w.category,
                      stacklevel=4)
    return (*mutual_pairs(aligner.coupling_), aligner)


def _refit_under_the_coupling(mad, coupling, a: str, b: str) -> None:
    """The all-rows model refitted from its q(X) under the graph prior with every unaligned row joined to its
    ``NEIGHBORS`` most probable partners under the coupling (:func:`~bayesalign.mad.coupling.coupling_edges`)."""
    from .coupling import NEIGHBORS, coupling_edges

    n_entities, rows = mad.entities_
    free_a, free_b = mad.posteriors_[a][0], mad.posteriors_[b][0]
    edges = coupling_edges(coupling, free_a, free_b, rows[a], rows[b], n_entities, NEIGHBORS)
    mad.refit(init=mad.embedding_, extra_edges=edges)


def fit_without_anchors(mad) -> None:
    """Fit ``mad`` (no anchors, two views) from the coupling's confident mutual pairs and refit it under the
    coupling's edges (see the module docstring); ``bootstrap_`` records the start: ``method``, the coupling's
    ``setting``, ``n_mutual_pairs``, the starting ``pairs`` and their ``scores``, ``correct`` (of them, where the
    problem has truth), ``ambiguous``, ``support`` (the pairs the fitted model is sure of) and ``weak_support``."""
    problem = mad.problem_
    a, b = problem.views.names
    pairs, scores, aligner = gromov_wasserstein_pairs(mean_filled(problem.views), a, b)
    n_mutual = len(pairs)
    if n_mutual < MIN_ANCHORS:
        raise ValueError(f"the Gromov-Wasserstein coupling of views {a!r} and {b!r} has {n_mutual} confident mutual "
                         f"pairs; MAD needs at least {MIN_ANCHORS} to start from: give a few anchors")
    keep = np.argsort(-scores, kind="stable")[:max(MIN_ANCHORS, PAIRS_PER_DIMENSION * int(mad.latent_dim))]
    pairs, scores = pairs[keep], scores[keep]
    truth = truth_pairs(problem, a, b)
    mad.anchors_ = pairs
    mad.bootstrap_ = {"method": "gromov_wasserstein", "setting": dict(aligner.setting_), "n_mutual_pairs": n_mutual,
                      "pairs": pairs, "scores": scores,
                      "correct": None if truth is None else int(sum((int(i), int(j)) in truth for i, j in pairs)),
                      "ambiguous": bool(aligner.ambiguous_), "weak_support": False}
    # the scores stand in for the pairs' probabilities (min(n_a T_ij, 1), not calibrated)
    mad.discovered_ = {(a, b): {"index_a": pairs[:, 0], "index_b": pairs[:, 1], "probability": scores,
                                "cost": np.zeros(len(pairs)), "round": np.zeros(len(pairs), np.int64)}}
    mad.refit()
    if COUPLING_EDGES and mad.entities_ is not None:
        _refit_under_the_coupling(mad, aligner.coupling_, a, b)
    with warnings.catch_warnings():  # no anchor for the misfit or the temperature: align() says so itself
        warnings.simplefilter("ignore", RuntimeWarning)
        support = int(confident_pairs(mad, a, b, CONFIDENCE_THRESHOLD)[1].size)
    left = min(problem.views.n_samples[a], problem.views.n_samples[b]) - len(pairs)
    mad.bootstrap_.update(support=support, weak_support=bool(support < WEAK_SUPPORT * left))
    if mad.bootstrap_["weak_support"]:
        warnings.warn(f"MAD without anchors: the model fitted from the {len(pairs)} Gromov-Wasserstein starting pairs "
                      f"is sure of {support} of the {left} rows left to match (probability at least "
                      f"{CONFIDENCE_THRESHOLD} and mutual nearest; fewer than WEAK_SUPPORT = {WEAK_SUPPORT:.0%}): the "
                      "data barely support the alignment, which may be wrong (a mirror image is common). Check "
                      "bootstrap_ and give a few anchors", RuntimeWarning, stacklevel=3)
