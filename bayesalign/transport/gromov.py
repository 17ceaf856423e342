"""Gromov-Wasserstein: the coupling of two metric spaces, and the SCOT-style aligner built on it.

- :func:`gromov_wasserstein_coupling`: the entropic GW coupling of two distance matrices (POT).
- :class:`GromovWassersteinAlignment`: entropic GW between the views' k-NN geodesic distances, the
  barycentric projection as the embedding (Demetci, Santorella, Sandstede, Noble & Singh 2022, SCOT),
  its settings chosen without the truth.

Dense throughout: GW needs the (n_v, n_v) structure matrices and the (n_a, n_b) coupling.
"""

from __future__ import annotations

import warnings

import numpy as np
import ot

from ._base import (
    TransportAlignment,
    _settings_grid,
    coupling_disagreement,
    coupling_rank,
    neighbor_values,
    positive_values,
)

__all__ = ["GromovWassersteinAlignment", "gromov_wasserstein_coupling"]


def gromov_wasserstein_coupling(dist_a, dist_b, epsilon: float = 1e-3, n_outer: int = 50, n_inner: int = 1000,
                                tol: float = 1e-6, init=None):
    """Entropic Gromov-Wasserstein coupling of two metric spaces (Peyre, Cuturi & Solomon 2016, eq. 8-10).

    Minimises ``sum_{ijkl} (A_ik - B_jl)^2 T_ij T_kl - epsilon H(T)`` over couplings T with
    uniform marginals (1/n_a, 1/n_b) by the paper's projected mirror descent, each step a
    Sinkhorn projection of the linearised cost (POT's ``ot.gromov.entropic_gromov_wasserstein``).
    Only the within-view distances are used: no feature of one view is compared with a feature
    of the other, which is what an unsupervised correspondence needs. Dense (n_a, n_b) and
    (n, n): meant for a few hundred points.

    Parameters
    ----------
    dist_a, dist_b : arrays (n_a, n_a), (n_b, n_b)
        Within-view distances, each divided by its largest entry (so epsilon is relative).
    epsilon : float
    n_outer : int
        Mirror-descent steps (stops earlier when T changes by less than ``tol``).
    n_inner : int
        Sinkhorn sweeps per step (an inexact projection, as in the paper's experiments).
    init : array (n_a, n_b), optional
        The coupling the mirror descent starts from (non-negative, rescaled to sum to 1); default the
        independent coupling 1 / (n_a n_b). The objective is not convex: different starts can end in
        different optima, e.g. mirror images.

    Returns
    -------
    array (n_a, n_b): the coupling, summing to 1.

    Examples
    --------
    >>> x = np.array([0.0, 1.0, 3.0, 7.0])[:, None]
    >>> D = np.abs(x - x.T) / 7.0
    >>> T = gromov_wasserstein_coupling(D, D[::-1, ::-1])
    >>> T.argmax(1).tolist()  # an isometry: point i of a is point 3 - i of b
    [3, 2, 1, 0]
    """
    A = np.asarray(dist_a, np.float64)  # [n_a, n_a]
    B = np.asarray(dist_b, np.float64)  # [n_b, n_b]
    G0 = None
    if init is not None:
        G0 = np.array(init, dtype=np.float64)  # [n_a, n_b]
        if G0.shape != (A.shape[0], B.shape[0]) or not np.all(np.isfinite(G0)) or G0.min() < 0 or G0.sum() <= 0:
            raise ValueError(f"init must be a non-negative finite ({A.shape[0]}, {B.shape[0]}) coupling with a "
                             f"positive sum, got shape {G0.shape}")
        G0 /= G0.sum()
    p, q = np.full(A.shape[0], 1.0 / A.shape[0]), np.full(B.shape[0], 1.0 / B.shape[0])
    with warnings.catch_warnings():  # an inexact projection (n_inner sweeps) is the paper's choice
        warnings.filterwarnings("ignore", message="Sinkhorn did not converge")
        T = ot.gromov.entropic_gromov_wasserstein(A, B, p, q, loss_fun="square_loss", epsilon=float(epsilon),
                                                  G0=G0, max_iter=int(n_outer), tol=float(tol),
                                                  numItermax=int(n_inner))
    if not np.all(np.isfinite(T)):
        raise FloatingPointError(f"Gromov-Wasserstein coupling is not finite at epsilon={epsilon}; raise epsilon")
    return T / T.sum()


class GromovWassersteinAlignment(TransportAlignment):
    r"""Entropic Gromov-Wasserstein between the views' geodesic distances (SCOT; Demetci et al. 2022).

    Each view's columns are standardised; its structure matrix is the shortest-path distance on its
    k-NN connectivity graph, divided by its largest value (:func:`~bayesalign.transport.structure_matrix`).
    The coupling minimises :math:`\sum_{ijkl} (A_{ik} - B_{jl})^2 T_{ij} T_{kl} - \epsilon H(T)`
    (Peyre, Cuturi & Solomon 2016) with uniform marginals, or, with ``marginals="semi-relaxed"``, with
    view b's marginal free (Vincent-Cuaz et al. 2022), for views whose populations differ. No anchor
    enters the transport: GW needs none. A label prior on the problem
    (:meth:`~bayesalign.AlignmentProblem.with_label_prior`) makes it a fused GW whose feature cost is the
    prior's (:func:`~bayesalign.transport.solve_coupling`, ``prior_cost``).

    Settings (every combination of ``n_neighbors`` and ``epsilon``) are chosen without the truth:

    - with anchors between the two views: the setting whose coupling ranks the anchors' partners best
      (:func:`~bayesalign.transport.coupling_rank`; the anchors are held out by construction);
    - without: the most stable one, the setting whose coupling disagrees least, on average, with those of
      the other settings (:func:`~bayesalign.transport.coupling_disagreement`).

    Dense: (n_v, n_v) structure matrices and an (n_a, n_b) coupling per setting.

    Parameters
    ----------
    n_neighbors : int or sequence of int
        k of the k-NN graphs (each capped at the smaller view's n - 1).
    epsilon : float or sequence of float
        Entropic regularisation, relative to the structure matrices' largest entry (1).
    marginals : {"balanced", "semi-relaxed"}
    n_outer : int
        Mirror-descent steps per coupling.

    Attributes
    ----------
    coupling_, embedding_, setting_, criterion_, criterion_name_, ambiguous_, converged_, loss_
        As :class:`~bayesalign.transport.TransportAlignment`.

    Examples
    --------
    >>> import bayesalign as ba
    >>> problem = ba.datasets.mmdma_simulation("swiss_roll", n_samples=120, seed=0)
    >>> gw = GromovWassersteinAlignment(n_neighbors=10, epsilon=5e-3).fit(problem)
    >>> gw.coupling_.shape, round(float(gw.coupling_.sum()), 6)
    ((120, 120), 1.0)
    """

    def __init__(self, n_neighbors=(20, 50), epsilon=(1e-3, 5e-3), marginals: str = "balanced",
                 n_outer: int = 100):
        self.n_neighbors = n_neighbors
        self.epsilon = epsilon
        self.marginals = marginals
        self.n_outer = n_outer

    def _grid(self, max_neighbors):
        return _settings_grid(n_neighbors=neighbor_values(self.n_neighbors, max_neighbors),
                              epsilon=positive_values(self.epsilon, "epsilon"))

    def _evaluate(self, problem, settings):
        results = []
        for setting in settings:
            try:
                results.append(self._coupling(setting))
            except FloatingPointError:
                results.append(None)
        anchors = problem.anchors_between(*problem.views.names)
        self._criterion_is_disagreement = not len(anchors)
        if len(anchors):
            self.criterion_name_ = "FOSCTTM of the anchors under the coupling"
            scores = [np.inf if r is None else coupling_rank(r[0], anchors.index_a, anchors.index_b) for r in results]
            return np.array(scores), results
        self.criterion_name_ = "mean disagreement with the other settings' couplings"
        done = [i for i, r in enumerate(results) if r is not None]
        scores = np.full(len(settings), np.inf)
        for i in done:
            others = [coupling_disagreement(results[i][0], results[j][0]) for j in done if j != i]
            scores[i] = float(np.mean(others)) if others else 0.0
        return scores, results

    def _final(self, problem, setting, result):
        return result

