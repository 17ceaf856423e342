"""Shared parts of the optimal-transport aligners: the views' structure matrices, the anchors' feature
cost, POT's solvers behind one call, the barycentric projection, and the choice of settings.

Every object here is dense: the structure matrices are (n_v, n_v) and a coupling is (n_a, n_b), because
Gromov-Wasserstein compares every pair of rows of one view with every pair of the other. Memory and time
grow as n^2 (n^3 per outer step for the structure gradient): meant for up to a few thousand rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import ot
from scipy.spatial.distance import cdist
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from .._utils import as_rng, check_count
from ..data import AlignmentProblem, Correspondence, LatentEmbedding, Views
from ..graph import geodesic_distances, knn_graph
from ..metrics import foscttm

__all__ = ["MARGINALS", "TransportAlignment", "anchor_profiles", "barycentric_projection", "coupling_disagreement",
           "coupling_rank", "profile_cost", "solve_coupling", "structure_matrix"]

#: Marginals of the coupling: both uniform, or view a's uniform and view b's free (semi-relaxed).
MARGINALS = ("balanced", "semi-relaxed")
#: Settings whose criterion differs by less than this (a fraction of the rows, as FOSCTTM) count as tied.
AMBIGUITY_TOLERANCE = 0.02
#: Two couplings disagree when each ranks the other's partners this far down on average (FOSCTTM units):
#: a mirror image sits near 0.3-0.5, couplings of one solution at a few hundredths.
DISAGREEMENT_LIMIT = 0.1


def structure_matrix(X, n_neighbors: int, name: str = "X") -> np.ndarray:
    """Within-view geodesic distances of SCOT (Demetci et al. 2022): shortest paths on the k-NN
    connectivity graph (every edge of length 1; components joined by their shortest edges), divided by
    their largest value. Dense (n, n): Gromov-Wasserstein needs every pair.

    >>> structure_matrix(np.arange(4.0)[:, None], 1).tolist()[0]
    [0.0, 0.3333333333333333, 0.6666666666666666, 1.0]
    """
    G = knn_graph(X, n_neighbors, mode="connectivity", connect_components=True, name=name)
    D = geodesic_distances(G, name=name)  # [n, n]
    return D / D.max()


def anchor_profiles(X, anchor_rows) -> np.ndarray:
    """Each row described by its Euclidean distances to its own view's anchors, every column standardised:
    (n, m). Rows of two views with the same profile lie alike relative to the same anchors."""
    profile = cdist(X, X[np.asarray(anchor_rows, np.int64)])  # [n, m]
    scale = profile.std(axis=0)
    return (profile - profile.mean(axis=0)) / np.where(scale > 0, scale, 1.0)


def profile_cost(profiles_a, profiles_b) -> np.ndarray:
    """Feature cost of fused GW: Euclidean distances between anchor profiles, divided by the largest (n_a, n_b)."""
    M = cdist(profiles_a, profiles_b)
    return M / M.max() if M.max() > 0 else M


def barycentric_projection(coupling, target) -> np.ndarray:
    r"""Row i of view a placed at :math:`\sum_j T_{ij} y_j / \sum_j T_{ij}` (the barycentric projection)."""
    mass = coupling.sum(axis=1, keepdims=True)
    return (coupling @ target) / np.where(mass > 0, mass, 1.0)


def solve_coupling(A, B, *, M=None, alpha: float = 0.5, epsilon: float = 5e-3, marginals: str = "balanced",
                   n_outer: int = 100, n_inner: int = 100, tol: float = 1e-7, G0=None, prior_cost=None):
    r"""One entropic (fused) Gromov-Wasserstein coupling through POT: ``(T, loss, converged)``.

    Minimises :math:`(1 - \alpha)\langle M, T\rangle + \alpha \sum_{ijkl} (A_{ik} - B_{jl})^2 T_{ij} T_{kl}
    - \epsilon H(T)` (Peyre, Cuturi & Solomon 2016; fused: Vayer et al. 2019; ``M=None`` is plain GW, alpha
    unused) by POT's projected mirror descent, each step a Sinkhorn projection. ``marginals="balanced"``:
    :math:`T 1 = 1/n_a`, :math:`T' 1 = 1/n_b`; ``"semi-relaxed"`` keeps only the first (Vincent-Cuaz et al.
    2022): view b's populations may be weighted as the structure fits, for views whose populations differ.
    ``loss`` is POT's objective value without the entropy (with ``prior_cost``, its term included);
    ``converged`` says whether the coupling changed by less than ``tol`` (Frobenius norm, POT checks every
    10 steps) within ``n_outer`` steps.
    Dense: ``A`` (n_a, n_a), ``B`` (n_b, n_b) and T (n_a, n_b).

    Parameters
    ----------
    A, B : arrays (n_a, n_a), (n_b, n_b)
        The views' structure matrices (:func:`structure_matrix`).
    M : array (n_a, n_b), optional
        Feature cost (fused GW), e.g. :func:`profile_cost`.
    alpha, epsilon : float
        Weight of the structure term; entropic regularisation (in units of A and B).
    marginals : {"balanced", "semi-relaxed"}
    n_outer : int
        Mirror-descent steps at most.
    n_inner : int
        Sinkhorn sweeps per balanced step (an inexact projection; the semi-relaxed step is one closed-form
        row scaling).
    tol : float
    G0 : array (n_a, n_b), optional
        Starting coupling (default the independent one).
    prior_cost : array (n_a, n_b), optional
        Minus the log of a prior over pairs, c (nats; :meth:`~bayesalign.AlignmentProblem.label_cost`). The
        objective gains :math:`\epsilon \langle c, T\rangle`, which multiplies the Gibbs kernel
        :math:`\exp(-G / \epsilon)` of every step by the prior :math:`\exp(-c)`: M becomes
        :math:`M + \epsilon c / (1 - \alpha)`; without M (or with alpha = 1) the problem is the fused GW
        :math:`\tfrac12 \langle \epsilon c, T\rangle + \tfrac12 GW - \tfrac\epsilon2 H(T)`, half the GW objective
        with the prior's term.
    """
    if marginals not in MARGINALS:
        raise ValueError(f"marginals must be one of {MARGINALS}, got {marginals!r}")
    loss_scale, given_epsilon = 1.0, epsilon
    if prior_cost is not None:
        prior_cost = np.asarray(prior_cost, np.float64)
        if prior_cost.shape != (A.shape[0], B.shape[0]) or not np.all(np.isfinite(prior_cost)):
            raise ValueError(f"prior_cost must be a finite ({A.shape[0]}, {B.shape[0]}) array, got shape "
                             f"{prior_cost.shape}")
        if M is None or float(alpha) >= 1.0:
            M, alpha, epsilon, loss_scale = float(epsilon) * prior_cost, 0.5, float(epsilon) / 2.0, 2.0
        else:
            M = np.asarray(M, np.float64) + float(epsilon) / (1.0 - float(alpha)) * prior_cost
    n_a, n_b = A.shape[0], B.shape[0]
    p, q = np.full(n_a, 1.0 / n_a), np.full(n_b, 1.0 / n_b)
    common = dict(epsilon=float(epsilon), G0=G0, max_iter=int(n_outer), tol=float(tol), log=True)
    with warnings.catch_warnings():  # an inexact Sinkhorn projection (n_inner sweeps) is the method's own choice
        warnings.filterwarnings("ignore", message="Sinkhorn did not converge")
        warnings.filterwarnings("ignore", message="Solver failed to produce a transport plan")
        warnings.filterwarnings("ignore", category=RuntimeWarning)  # overflow inside Sinkhorn: caught below
        if marginals == "balanced" and M is None:  # POT passes numItermax on to each step's Sinkhorn
            T, log = ot.gromov.entropic_gromov_wasserstein(A, B, p, q, numItermax=int(n_inner), **common)
        elif marginals == "balanced":
            T, log = ot.gromov.entropic_fused_gromov_wasserstein(M, A, B, p, q, alpha=float(alpha),
                                                                 numItermax=int(n_inner), **common)
        elif M is None:
            T, log = ot.gromov.entropic_semirelaxed_gromov_wasserstein(A, B, p, **common)
        else:
            T, log = ot.gromov.entropic_semirelaxed_fused_gromov_wasserstein(M, A, B, p, alpha=float(alpha), **common)
    T = np.asarray(T, np.float64)
    if not np.all(np.isfinite(T)) or abs(T.sum() - 1.0) > 1e-3:
        raise FloatingPointError(f"the Gromov-Wasserstein coupling is not a transport plan at epsilon={given_epsilon} "
                                 "(Sinkhorn underflowed); raise epsilon")
    loss = loss_scale * float(log.get("fgw_dist", log.get("gw_dist", log.get("srfgw_dist",
                                                                             log.get("srgw_dist", np.nan)))))
    errors = log.get("err", [])
    converged = bool(errors) and float(errors[-1]) <= tol
    return T / T.sum(), loss, converged


def coupling_rank(coupling, index_a, index_b) -> float:
    """FOSCTTM of the pairs (index_a[t], index_b[t]) when partners are ranked by the coupling (a larger entry
    is closer), both directions averaged: 0 when every pair holds its row's and its column's largest entry."""
    pairs = Correspondence(("a", "b"), np.asarray(index_a, np.int64), np.asarray(index_b, np.int64))
    return foscttm(-np.asarray(coupling), pairs)


def coupling_disagreement(T1, T2) -> float:
    """How far two couplings disagree: each one's rank (:func:`coupling_rank`) of the other's row-wise
    largest entries, averaged. 0 when they pick the same partners; a mirror image scores high."""
    rows = np.arange(T1.shape[0])
    return 0.5 * (coupling_rank(T1, rows, T2.argmax(1)) + coupling_rank(T2, rows, T1.argmax(1)))


def neighbor_values(values, max_neighbors: int) -> list[int]:
    """The distinct k of a grid (an int or a sequence of them), each capped at ``max_neighbors``, ascending."""
    ks = values if isinstance(values, (list, tuple, np.ndarray)) else (values,)
    return sorted({min(check_count(k, "n_neighbors"), max_neighbors) for k in ks})


def positive_values(values, name: str) -> list[float]:
    """The values of a grid (a float or a sequence of them) as floats, each finite and positive."""
    out = [float(v) for v in np.atleast_1d(values)]
    if not out or not all(np.isfinite(v) and v > 0 for v in out):
        raise ValueError(f"{name} must be positive, got {values!r}")
    return out


def _settings_grid(**axes) -> list[dict]:
    """Every combination of the given values (a scalar is one value), in order."""
    grid = [{}]
    for key, values in axes.items():
        values = values if isinstance(values, (list, tuple, np.ndarray)) else (values,)
        if not len(values):
            raise ValueError(f"{key} needs at least one value")
        grid = [{**g, key: v} for g in grid for v in values]
    return grid


class TransportAlignment(BaseEstimator):
    """Base of the optimal-transport aligners (scikit-learn contract), two views at a time.

    ``fit(problem)`` standardises both views' columns, lets the subclass score every setting of its grid
    (``_evaluate``) and solve the chosen one on all the data (``_final``), and sets:

    ``coupling_`` (n_a, n_b)
        The transport plan between the rows of the first and the second view (summing to 1).
    ``embedding_`` : LatentEmbedding
        View b at its standardised features, view a at its barycentric projection onto them (SCOT).
    ``setting_`` : dict
        The chosen setting. ``criterion_``: one dict per setting of the grid, its values and
        ``criterion`` (lower is better; what it measures is ``criterion_name_``) and ``disagreement``
        with the chosen setting's coupling (:func:`coupling_disagreement`).
    ``ambiguous_`` : bool
        Whether a setting whose criterion is within :data:`AMBIGUITY_TOLERANCE` of the chosen one's
        gives a coupling that disagrees with it beyond :data:`DISAGREEMENT_LIMIT` (e.g. a mirror image),
        or, when the criterion is the settings' agreement, whether every other setting's coupling disagrees
        with the chosen one's beyond it; a ``RuntimeWarning`` says which.
    ``converged_`` : bool
        Whether the chosen setting's mirror descent converged (a ``RuntimeWarning`` when not).

    A label prior on the problem (:meth:`~bayesalign.AlignmentProblem.with_label_prior`) enters every coupling
    through :func:`solve_coupling`'s ``prior_cost``: each step's Gibbs kernel is multiplied by the prior over
    partners.
    """

    def fit(self, problem):
        """Fit on an AlignmentProblem (or Views / a dict of two arrays); returns self."""
        problem = _as_problem(problem)
        if len(problem.views.names) != 2:
            raise ValueError(f"{type(self).__name__} aligns two views; this problem has {len(problem.views.names)}: "
                             f"{list(problem.views.names)}")
        problem.views.check_complete(type(self).__name__)
        if self.marginals not in MARGINALS:
            raise ValueError(f"marginals must be one of {MARGINALS}, got {self.marginals!r}")
        a, b = problem.views.names
        views = problem.views.standardised()
        self._structures = {}
        self._views, self._names = (views[a], views[b]), (a, b)
        self._label_cost = problem.label_cost(a, b)  # [n_a, n_b] or None
        settings = self._grid(min(X.shape[0] for X in self._views) - 1)
        scores, couplings = self._evaluate(problem, settings)
        if not np.isfinite(scores).any():
            raise FloatingPointError(f"{type(self).__name__}: no setting gave a transport plan; raise epsilon")
        best = int(np.argmin(scores))
        self.setting_ = dict(settings[best])
        self.coupling_, self.loss_, self.converged_ = self._final(problem, self.setting_, couplings[best])
        self.criterion_ = []
        reference = couplings[best][0]
        for setting, score, coupling in zip(settings, scores, couplings):
            disagreement = np.nan if coupling is None else coupling_disagreement(reference, coupling[0])
            self.criterion_.append({**setting, "criterion": float(score), "disagreement": float(disagreement)})
        rivals = [c for c in self.criterion_ if c["criterion"] - scores[best] <= AMBIGUITY_TOLERANCE
                  and c["disagreement"] > DISAGREEMENT_LIMIT]
        others = [c["disagreement"] for i, c in enumerate(self.criterion_) if i != best and np.isfinite(c["criterion"])]
        unstable = getattr(self, "_criterion_is_disagreement", False) and bool(others) \
            and min(others) > DISAGREEMENT_LIMIT
        self.ambiguous_ = bool(rivals) or bool(unstable)
        if unstable and not rivals:
            warnings.warn(f"{type(self).__name__}: no other setting agrees with the most stable one, {self.setting_} "
                          f"(their couplings disagree with it by {min(others):.2f} or more: a coupling the data do not "
                          "determine); see criterion_", RuntimeWarning, stacklevel=2)
        if rivals:
            warnings.warn(f"{type(self).__name__}: the choice of setting is ambiguous: {self.setting_} and "
                          f"{ {k: v for k, v in rivals[0].items() if k not in ('criterion', 'disagreement')} } score "
                          f"{scores[best]:.3f} and {rivals[0]['criterion']:.3f} ({self.criterion_name_}) but their "
                          f"couplings disagree ({rivals[0]['disagreement']:.2f}; a mirror image?); see criterion_",
                          RuntimeWarning, stacklevel=2)
        if not self.converged_:
            warnings.warn(f"{type(self).__name__}: the mirror descent did not converge in {self.n_outer} steps at "
                          f"{self.setting_}; raise n_outer or epsilon", RuntimeWarning, stacklevel=2)
        Xa, Xb = self._views
        self.embedding_ = LatentEmbedding({a: barycentric_projection(self.coupling_, Xb), b: np.array(Xb)},
                                          method=type(self).__name__, info={"setting": self.setting_})
        self.view_names_ = (a, b)
        del self._structures, self._views, self._names, self._label_cost
        return self

    def match_probabilities(self, a=None, b=None) -> np.ndarray:
        """P(row i of view a is row j of view b): the coupling's rows divided by their sums (n_a, n_b).

        ``(a, b)`` in either order of the fitted views (default their order); reversed, the columns are
        normalised instead.
        """
        if not hasattr(self, "coupling_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")
        first, second = self.view_names_
        a, b = (first, second) if a is None else (a, b)
        if {a, b} != {first, second} or a == b:
            raise ValueError(f"views {a!r}, {b!r}: this model aligns {first!r} and {second!r}")
        T = self.coupling_ if a == first else self.coupling_.T
        return T / np.maximum(T.sum(axis=1, keepdims=True), np.finfo(float).tiny)

    # parts of fit ----------------------------------------------------------------------------
    def _structure(self, n_neighbors: int) -> tuple[np.ndarray, np.ndarray]:
        """Both views' structure matrices for ``n_neighbors``, computed once per fit."""
        if n_neighbors not in self._structures:
            self._structures[n_neighbors] = tuple(structure_matrix(X, n_neighbors, name=v)
                                                  for X, v in zip(self._views, self._names))
        return self._structures[n_neighbors]

    def _coupling(self, setting, M=None):
        """``(T, loss, converged)`` of one setting (its ``n_neighbors``, ``epsilon``, ``alpha``)."""
        A, B = self._structure(int(setting["n_neighbors"]))
        return solve_coupling(A, B, M=M, alpha=setting.get("alpha", 0.5), epsilon=setting["epsilon"],
                              marginals=self.marginals, n_outer=self.n_outer, prior_cost=self._label_cost)

    def _grid(self, max_neighbors: int) -> list[dict]:  # pragma: no cover - abstract
        """The settings to choose from (``n_neighbors`` at most ``max_neighbors``)."""
        raise NotImplementedError

    def _evaluate(self, problem, settings):  # pragma: no cover - abstract
        """``(scores, couplings)``: per setting its criterion (inf where it failed) and ``(T, loss, converged)``
        of a coupling it gave (None where it failed); sets ``criterion_name_``."""
        raise NotImplementedError

    def _final(self, problem, setting, result):  # pragma: no cover - abstract
        """``(T, loss, converged)`` of the chosen setting on all the data (``result``: its evaluation's)."""
        raise NotImplementedError


def _as_problem(problem) -> AlignmentProblem:
    if isinstance(problem, AlignmentProblem):
        return problem
    if isinstance(problem, (Views, Mapping, list, tuple)):
        return AlignmentProblem(problem)
    raise TypeError("fit expects an AlignmentProblem, Views, or a dict/list of 2-D arrays, got "
                    f"{type(problem).__name__}")


def anchor_folds(n_anchors: int, n_folds: int, seed) -> list[np.ndarray]:
    """The anchors' positions split into ``n_folds`` random folds of near-equal size."""
    return np.array_split(as_rng(seed).permutation(n_anchors), n_folds)
