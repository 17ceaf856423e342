"""The anchor pairs placed as unaligned rows are: what calibrates, judges and corrects MAD's matching.

An anchor pair shaped the fitted model as one latent point seen by both views. To tell how the model places rows it
did not see paired, each pair's rows are placed again one view at a time:

- re-inferred (:func:`reinferred_anchors`): q_a(x_i) from y_i of a alone and q_b(x_t) from y_t of b alone under
  the fitted model (``MRD.infer``), as if unaligned;
- held out (:func:`held_out_anchors`): the pair split into two rows of their own in ``HELD_OUT_FOLDS`` warm
  continuations of the fit (:meth:`bayesalign.gp.MRD.split_entities`), each placed by its own view and its
  neighbours, in a model that keeps the other folds' anchors.

Both return (mean_a, var_a, mean_b, var_b) [n, |shared|], row k the k-th anchor pair, in the shared dimensions.
The held-out pairs are out-of-sample, as the unaligned rows are; the re-inferred ones were one latent point of the
fit, so they look easier to match than the unaligned rows do. Only a collapsed all-rows fit can hold its anchors
out (:func:`holds_out`).
"""

from __future__ import annotations

import numpy as np

from .._utils import as_rng
from .training import entity_prior, mean_filled

__all__ = ["HELD_OUT_FOLDS", "HELD_OUT_FRACTION", "held_out_anchors", "holds_out", "reinferred_anchors"]

#: Folds of the anchor pairs held out: each fold's pairs are split and the fit continued once.
HELD_OUT_FOLDS = 4
#: Evaluations of each fold's continuation, as a fraction of MRD's ``max_iter``.
HELD_OUT_FRACTION = 0.1


def holds_out(estimator) -> bool:
    """Whether every model of ``estimator`` (a MAD, or each member of a pool of them) is a collapsed all-rows fit,
    whose anchor pairs :func:`held_out_anchors` can hold out."""
    members = getattr(estimator, "estimators_", [estimator])
    return all(getattr(m, "training", None) == "all_rows" and getattr(m, "engine", None) == "collapsed"
               for m in members)


def reinferred_anchors(mad, a, b) -> tuple:
    """The anchor pairs between a and b, each row inferred again from its own view alone under the fitted model."""
    dims = mad.shared_dims(a, b)
    anchors = mad.problem_.anchors_between(a, b, implied=True)
    views = mad.problem_.views
    xa = [np.asarray(z, np.float64)[:, dims] for z in mad.infer(a, views[a][anchors.index_a])]
    xb = [np.asarray(z, np.float64)[:, dims] for z in mad.infer(b, views[b][anchors.index_b])]
    return xa[0], xa[1], xb[0], xb[1]


def held_out_anchors(mad, a, b) -> tuple:
    """The anchor pairs between a and b held out of warm continuations of the collapsed all-rows fit (see the module
    docstring; each split row starts where its own view alone places it). The fitted model is unchanged."""
    from ..gp import MRD

    dims = mad.shared_dims(a, b)
    anchors = mad.problem_.anchors_between(a, b, implied=True)
    n_entities, rows = mad.entities_
    views = mean_filled(mad.problem_.views.standardised() if mad.standardize else mad.problem_.views)
    budget = max(int(HELD_OUT_FRACTION * int((mad.engine_options or {}).get("max_iter", MRD().max_iter))), 1)
    n = len(anchors)
    out = [np.empty((n, dims.size)) for _ in range(4)]
    for fold in np.array_split(as_rng(mad.seed).permutation(n), min(HELD_OUT_FOLDS, n)):
        fold = fold[np.argsort(anchors.index_b[fold])]  # split_entities numbers new entities in row order
        rows_b = anchors.index_b[fold]
        split = {**rows, b: rows[b].copy()}
        split[b][rows_b] = n_entities + np.arange(fold.size)
        prior = entity_prior(mad, views, split, n_entities + fold.size, mad.prior_edges_)
        model = mad.model_.split_entities(b, rows_b, latent_prior=prior, start="inferred")
        model._warn_convergence = False  # a held-out fold's share of the budget, not the kept fit
        model.continue_fit(budget)
        mean, var = model.entity_means_, model.entity_variances_
        for k, entity in ((0, rows[a][anchors.index_a[fold]]), (2, split[b][rows_b])):
            out[k][fold], out[k + 1][fold] = mean[entity][:, dims], var[entity][:, dims]
    return tuple(out)
