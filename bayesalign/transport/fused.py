"""Fused Gromov-Wasserstein with anchors: the anchors as a feature cost and as fixed mass.

:class:`FusedGromovWassersteinAlignment` couples two views by entropic fused GW (Vayer, Chapel, Flamary,
Tavenard & Courty 2019) between their k-NN geodesic distances, with a feature cost built from the anchors
(each row described by its distances to its own view's anchors) and the anchors' mass pinned to their
partners; its settings are chosen by cross-fitting on the anchors. Dense, as all of GW.
"""

from __future__ import annotations

import numpy as np

from ._base import (
    TransportAlignment,
    _settings_grid,
    anchor_folds,
    anchor_profiles,
    coupling_rank,
    neighbor_values,
    positive_values,
    profile_cost,
)

__all__ = ["FusedGromovWassersteinAlignment", "pinned_cost"]


def pinned_cost(M, index_a, index_b) -> np.ndarray:
    """The feature cost with every anchor's mass pinned to its partner: an anchor row's (and column's) cost is 0
    at its partner and 1 (the largest) elsewhere. Under entropic transport an entry of cost 1 more than its
    row's best carries :math:`\\exp(-(1 - \\alpha) / \\epsilon)` of the mass of that best, negligible at the
    usual settings, so the anchors' coupling entries are fixed. Returns a new (n_a, n_b) array."""
    M = np.array(M, dtype=np.float64)
    M[index_a, :] = 1.0
    M[:, index_b] = 1.0
    M[index_a, index_b] = 0.0
    return M


class FusedGromovWassersteinAlignment(TransportAlignment):
    r"""Entropic fused Gromov-Wasserstein with the anchors as a feature cost and as fixed mass.

    Minimises :math:`(1 - \alpha)\langle M, T\rangle + \alpha \sum_{ijkl} (A_{ik} - B_{jl})^2 T_{ij} T_{kl}
    - \epsilon H(T)` (Vayer et al. 2019) with A, B the views' k-NN geodesic distances (as
    :class:`~bayesalign.transport.GromovWassersteinAlignment`) and M the distances between anchor
    profiles: each row described by its Euclidean distances to its own view's anchors, each column
    standardised (:func:`~bayesalign.transport.anchor_profiles`, :func:`~bayesalign.transport.profile_cost`).
    With ``pin_anchors`` the anchors' coupling entries are pinned (:func:`pinned_cost`). ``marginals=
    "semi-relaxed"`` leaves view b's marginal free (the semi-relaxed fused GW of Vincent-Cuaz et al. 2022).
    A label prior on the problem (:meth:`~bayesalign.AlignmentProblem.with_label_prior`) is added to M
    (:func:`~bayesalign.transport.solve_coupling`, ``prior_cost``).

    Settings (every combination of ``n_neighbors``, ``epsilon``, ``alpha``) are chosen by cross-fitting:
    the anchors are split into ``n_folds`` folds (seeded); each fold in turn is held out, the coupling
    fitted with the other anchors, and the held-out anchors' partners ranked under it
    (:func:`~bayesalign.transport.coupling_rank`). The setting of the lowest mean rank is then fitted with
    every anchor. Dense: (n_v, n_v) structure matrices and (n_a, n_b) couplings, ``n_folds + 1`` solves
    per setting.

    Parameters
    ----------
    n_neighbors : int or sequence of int
    epsilon : float or sequence of float
    alpha : float or sequence of float in [0, 1]
        Weight of the structure term against the feature cost.
    pin_anchors : bool
    marginals : {"balanced", "semi-relaxed"}
    n_folds : int
        Folds of the cross-fitting (each needs at least two anchors).
    n_outer : int
    seed : int
        Seed of the folds.

    Attributes
    ----------
    coupling_, embedding_, setting_, criterion_, criterion_name_, ambiguous_, converged_, loss_
        As :class:`~bayesalign.transport.TransportAlignment`.

    Examples
    --------
    >>> import bayesalign as ba
    >>> problem = ba.datasets.mmdma_simulation("swiss_roll", n_samples=120, seed=0).split_anchors(12, seed=0)
    >>> fgw = FusedGromovWassersteinAlignment(n_neighbors=10, alpha=0.5).fit(problem)
    >>> fgw.setting_
    {'n_neighbors': 10, 'epsilon': 0.005, 'alpha': 0.5}
    """

    def __init__(self, n_neighbors=20, epsilon=5e-3, alpha=(0.3, 0.5, 0.7), pin_anchors: bool = True,
                 marginals: str = "balanced", n_folds: int = 2, n_outer: int = 100, seed=0):
        self.n_neighbors = n_neighbors
        self.epsilon = epsilon
        self.alpha = alpha
        self.pin_anchors = pin_anchors
        self.marginals = marginals
        self.n_folds = n_folds
        self.n_outer = n_outer
        self.seed = seed

    def _grid(self, max_neighbors):
        alphas = [float(a) for a in np.atleast_1d(self.alpha)]
        if not all(0.0 <= a <= 1.0 for a in alphas):
            raise ValueError(f"alpha must lie in [0, 1], got {alphas}")
        return _settings_grid(n_neighbors=neighbor_values(self.n_neighbors, max_neighbors),
                              epsilon=positive_values(self.epsilon, "epsilon"), alpha=alphas)

    def _anchored_coupling(self, setting, index_a, index_b):
        Xa, Xb = self._views
        M = profile_cost(anchor_profiles(Xa, index_a), anchor_profiles(Xb, index_b))  # [n_a, n_b]
        if self.pin_anchors:
            M = pinned_cost(M, index_a, index_b)
        return self._coupling(setting, M)

    def _evaluate(self, problem, settings):
        a, b = problem.views.names
        anchors = problem.anchors_between(a, b)
        n_folds = int(self.n_folds)
        if n_folds < 2:
            raise ValueError(f"n_folds must be at least 2, got {self.n_folds}")
        if len(anchors) < 2 * n_folds:
            raise ValueError(f"{len(anchors)} anchor pair(s) between views {a!r} and {b!r}; "
                             f"{type(self).__name__} needs at least {2 * n_folds} ({n_folds} folds of two)")
        folds = anchor_folds(len(anchors), n_folds, self.seed)
        self.criterion_name_ = f"FOSCTTM of held-out anchors under the coupling ({n_folds}-fold cross-fit)"
        scores, results = np.full(len(settings), np.inf), []
        for s, setting in enumerate(settings):
            ranks, first = [], None
            try:
                for held in folds:
                    train = np.setdiff1d(np.arange(len(anchors)), held)
                    result = self._anchored_coupling(setting, anchors.index_a[train], anchors.index_b[train])
                    ranks.append(coupling_rank(result[0], anchors.index_a[held], anchors.index_b[held]))
                    first = result if first is None else first
            except FloatingPointError:
                results.append(None)
                continue
            scores[s] = float(np.mean(ranks))
            results.append(first)
        return scores, results

    def _final(self, problem, setting, result):
        anchors = problem.anchors_between(*problem.views.names)
        return self._anchored_coupling(setting, anchors.index_a, anchors.index_b)
