"""The paper's myopic, online matcher: rows of view b arrive one at a time and each takes the nearest free row of a.

The posteriors q_a(x_i) of the unaligned rows of a are computed at fit. Each incoming row y_t of b gets
q_b(x_t | X_A, X_B-hat), B-hat the rows of b that arrived before it: with view b's kernel, noise and inducing
inputs fixed, its optimal q_b(u) (Titsias 2009, eq. 10) is recomputed from the anchors' q(X_A) and the arrived
rows with their inferred q(x), and q(x_t) is the optimum of view b's bound term for y_t under that q(u)
(:func:`bayesalign.gp.inference.infer_latent`; one block of coordinate ascent per arrival, exactly ``MRD.infer``
for the first). With the SVI engine q(u) is fitted, not derived from rows, so every arrival is inferred as a new
row is. y_t is paired with the free row of a at the lowest cost (the paper's distance between modes for the mean
cost, the match likelihood otherwise), which is then used up (Damianou, Lawrence & Ek 2016, section 3.1).
"""

from __future__ import annotations

import numpy as np

from ..matching import likelihood_cost, mean_distance_cost

__all__ = ["Stream"]


class Stream:
    """The state of one stream of rows of view b matched to the unaligned rows of view a of a fitted MAD."""

    def __init__(self, mad, a: str, b: str):
        self.mad, self.a, self.b = mad, a, b
        posteriors = mad.posteriors(a, b)
        self.rows, self.mean, self.var = posteriors.rows_a, posteriors.mean_a, posteriors.var_a
        self.dims = mad.shared_dims(a, b)
        self.misfit = mad.cross_view_misfit(a, b) if mad.cost == "likelihood" else None
        self.free = np.ones(self.rows.size, bool)
        self.arrived, self.q_mean, self.q_var = [], [], []  # the arrived rows as the model sees them, their q(x)

    def match(self, y, cost_limit=None) -> tuple[int, float]:
        """(the matched row of a, or -1 when none is free or every free one costs more than ``cost_limit``; the
        pair's cost) for one row ``y`` (p_b,) of b."""
        mad, b = self.mad, self.b
        y = np.asarray(y, dtype=np.float64).reshape(1, -1)
        n_columns = mad.problem_.views.n_features[b]
        if y.shape[1] != n_columns:
            raise ValueError(f"view {b!r}: the row has {y.shape[1]} values, the view has {n_columns} columns")
        if mad.standardize:  # as the fitted model saw the view's rows
            centre, scale = mad.problem_.views.column_scaling(b)
            y = (y - centre) / scale
        if mad.engine == "svi":
            mean, var = mad.model_.infer(b, y)
        else:
            context = None
            if self.arrived:
                context = (np.asarray(self.arrived), np.asarray(self.q_mean), np.asarray(self.q_var))
            mean, var = mad.model_.infer(b, y, progress=False, context=context)  # [1, Q]
        self.arrived.append(y[0])
        self.q_mean.append(mean[0])
        self.q_var.append(var[0])
        free = np.flatnonzero(self.free)
        if free.size == 0:
            return -1, float("nan")
        mean, var = mean[:, self.dims], var[:, self.dims]
        if self.misfit is not None:  # compared as the unaligned rows of a are
            mean, var = self.misfit.apply(mean, var)
        if mad.cost == "mean":
            c = mean_distance_cost(self.mean[free], mean)[:, 0]
        else:
            c = likelihood_cost(self.mean[free], self.var[free], mean, var)[:, 0]
        k = int(np.argmin(c))
        if cost_limit is not None and c[k] > float(cost_limit):
            return -1, float(c[k])
        self.free[free[k]] = False
        return int(self.rows[free[k]]), float(c[k])
