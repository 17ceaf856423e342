"""The two views' posteriors as a value, and the matching every posterior-based aligner shares.

A fitted :class:`~bayesalign.MAD` (or a pool of them, :class:`~bayesalign.MADEnsemble`) hands the matcher one
:class:`MatchPosteriors` per pair of views: the rows still to match and their Gaussian posteriors q(x) = N(mu,
diag S) in the coordinates the cost compares. :class:`PosteriorAligner` turns that value into cost matrices,
Sinkhorn match probabilities at a temperature fitted on the anchors (:mod:`bayesalign.mad.calibration`) and an
:class:`~bayesalign.data.Alignment` with any matcher of :func:`bayesalign.matching.match`. An estimator provides two
methods, ``posteriors(a, b, cost)`` and ``anchor_pool(a, b, cost)``, and the attributes ``problem_``, ``cost``,
``temperature``, ``seed`` and ``progress``. A label prior on the problem
(:meth:`~bayesalign.AlignmentProblem.with_label_prior`) multiplies the match probabilities exp(-C / T) by the prior
over partners: the cost of a pair is C + T c, c the prior's :meth:`~bayesalign.AlignmentProblem.label_cost` (dense).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from sklearn.exceptions import NotFittedError

from ..data import Alignment, Correspondence, LatentEmbedding
from ..matching import COSTS, match, posterior_marginals, posterior_temperature, sinkhorn_log_marginals
from ..matching.costs import cost_source
from ..matching.matcher import SPARSE_ABOVE, _cost_matrix, sinkhorn_probabilities
from .anchors import holds_out
from .calibration import check_temperature, fit_temperature

__all__ = ["AnchorPool", "MatchPosteriors", "PosteriorAligner", "anchor_foscttm"]


@dataclass(frozen=True)
class MatchPosteriors:
    """The posteriors of views a and b as a cost compares them.

    ``rows_a``/``rows_b`` are the rows still to match (unaligned, not yet paired), ``mean_*``/``var_*`` [n, d] their
    posterior means and variances in the compared coordinates (the shared latent dimensions, in the cross-view
    misfit's basis where there is one). ``embedding`` holds every row of a and b in those coordinates (what
    :func:`bayesalign.matching.match` reads), ``discovered`` the pairs the fit found itself (bootstrap or
    self-training; None: none), ``info`` what an alignment reports about them.
    """

    views: tuple
    rows_a: np.ndarray
    mean_a: np.ndarray
    var_a: np.ndarray
    rows_b: np.ndarray
    mean_b: np.ndarray
    var_b: np.ndarray
    embedding: LatentEmbedding
    discovered: dict | None = None
    info: dict = field(default_factory=dict)


@dataclass(frozen=True)
class AnchorPool:
    """The rows to match with n anchor pairs appended, each placed as an unaligned row is: the pools' means and
    variances [n_a + n, d] and [n_b + n, d] in the compared coordinates, and the positions of the n true pairs."""

    mean_a: np.ndarray
    var_a: np.ndarray
    mean_b: np.ndarray
    var_b: np.ndarray
    true_a: np.ndarray
    true_b: np.ndarray


def anchor_foscttm(pool: AnchorPool, cost: str, views: tuple) -> float:
    """FOSCTTM of the anchor pairs among the rows to match: how well a model aligns rows it did not see as
    unaligned (ranked from the cost's blocks, never an n x n matrix)."""
    from ..metrics import foscttm

    source = cost_source(cost, pool.mean_a, pool.var_a, pool.mean_b, pool.var_b)
    return foscttm(source, Correspondence(views, pool.true_a, pool.true_b))


class PosteriorAligner:
    """Matching of fitted posteriors: cost matrix, match probabilities, the anchors' temperature and ``align``."""

    def _check_fitted(self):
        if not hasattr(self, "problem_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def _pair(self, a, b):
        self._check_fitted()
        names = self.problem_.views.names
        a = names[0] if a is None else self.problem_.views.name_of(a)
        b = (names[1] if a != names[1] else names[0]) if b is None else self.problem_.views.name_of(b)
        if a == b:
            raise ValueError(f"align needs two different views, got {a!r} twice")
        return a, b

    def _cost(self, cost):
        cost = self.cost if cost is None else cost
        if cost not in COSTS:
            raise ValueError(f"cost must be one of {COSTS}, got {cost!r}")
        return cost

    def _temperature(self, a, b, cost, temperature):
        """The temperature a call uses: the given one, else the estimator's; "anchors": fitted
        (:meth:`calibrate_temperature`); "posterior": None, which the matchers read as the posterior temperature."""
        temperature = self.temperature if temperature is None else temperature
        check_temperature(temperature)
        if temperature == "anchors":
            return self.calibrate_temperature(a, b, cost)
        return None if temperature == "posterior" else temperature

    def calibrate_temperature(self, a=None, b=None, cost: str | None = None) -> float:
        """T of the match probabilities, fitted on the anchor pairs (:func:`bayesalign.mad.calibration.fit_temperature`)
        pooled with the rows to match: each pair held out of continuations of the fit, out-of-sample as the rows to
        match are (:func:`bayesalign.mad.anchors.held_out_anchors`), where the fit can hold them out (collapsed, all
        rows); otherwise inferred again from each view alone under the fitted model. Cached per (a, b, cost) in
        ``calibration_``, whose ``method`` says which."""
        a, b = self._pair(a, b)
        cost = self._cost(cost)
        key = (a, b, cost)
        if key not in self.calibration_:
            posteriors = self.posteriors(a, b, cost)
            if holds_out(self):
                pool, method = self.anchor_pool(a, b, cost, held_out=True), "held out of the fit"
            else:
                pool, method = self.anchor_pool(a, b, cost), "anchor re-inference"
            T, record, potentials = fit_temperature(posteriors, pool, cost, self.progress, method)
            self.calibration_[key] = record
            if potentials is not None:
                self._calibration_potentials[key] = (posteriors.rows_a, posteriors.rows_b, potentials)
        return self.calibration_[key]["temperature"]

    def _warm_start(self, a, b, cost, temperature, cost_limit, rows_a, rows_b):
        """(the calibration record, Sinkhorn's potentials) when ``temperature`` is the one fitted on the anchors, else
        (None, None): the temperature search's potentials at T* over the same rows start their solve near its end."""
        fitted = self.calibration_.get((a, b, cost))
        if fitted is None or fitted["fallback"] or temperature != fitted["temperature"]:
            return None, None
        saved = self._calibration_potentials.get((a, b, cost))
        if cost_limit is not None or saved is None or not (np.array_equal(saved[0], rows_a) and
                                                            np.array_equal(saved[1], rows_b)):
            return fitted, None
        return fitted, saved[2]

    def _label_cost(self, p: MatchPosteriors):
        """The label prior's cost [n_a, n_b] between the rows to match of ``p``, or None (no prior, no information)."""
        prior = self.problem_.label_cost(*p.views, p.rows_a, p.rows_b)
        if prior is not None and p.rows_a.size * p.rows_b.size > SPARSE_ABOVE:
            raise ValueError(f"a label prior needs the dense cost of {p.rows_a.size} x {p.rows_b.size} pairs, above "
                             f"SPARSE_ABOVE = {SPARSE_ABOVE}")
        return prior

    def cost_matrix(self, a=None, b=None, cost: str | None = None, temperature: float | None = None):
        """(rows_a, rows_b, C): the cost [n_a, n_b] between the rows still to match of a and b (dense: the
        assignment needs every entry; the sparse path of :meth:`align` uses kNN candidates instead). With a label
        prior, C + T c with c its cost and T the ``temperature`` of :meth:`match_probabilities`."""
        a, b = self._pair(a, b)
        cost = self._cost(cost)
        p = self.posteriors(a, b, cost)
        C = _cost_matrix(cost, p.mean_a, p.var_a, p.mean_b, p.var_b)  # [n_a, n_b]
        prior = self._label_cost(p)
        if prior is not None:
            temperature = self._temperature(a, b, cost, temperature)
            T = float(temperature) if temperature is not None else posterior_temperature(cost, p.var_a, p.var_b)
            C = C + T * prior
        return p.rows_a, p.rows_b, C

    def _matching_inputs(self, a, b, cost, cost_limit, temperature):
        a, b = self._pair(a, b)
        cost = self._cost(cost)
        p = self.posteriors(a, b, cost)
        temperature = self._temperature(a, b, cost, temperature)
        T = float(temperature) if temperature is not None else posterior_temperature(cost, p.var_a, p.var_b)
        warm = self._warm_start(a, b, cost, temperature, cost_limit, p.rows_a, p.rows_b)[1]
        return cost, p, T, warm

    def match_probabilities(self, a=None, b=None, cost: str | None = None, cost_limit=None,
                            temperature: float | None = None):
        """(rows_a, rows_b, P): Sinkhorn match marginals P [n_a, n_b] of exp(-C / T) (log domain).

        P[i, j] approximates the probability that rows ``rows_a[i]`` of a and ``rows_b[j]`` of b are the same point;
        rows and columns sum to at most 1 (the rest: no match, the dustbin with ``cost_limit`` or the surplus of
        the larger view). P is dense up to ``SPARSE_ABOVE`` pairs, above it a CSR matrix of the pairs that carry
        probability (:func:`~bayesalign.matching.posterior_marginals`; the cost matrix is never formed). With a
        label prior, the marginals of exp(-C / T) times the prior (:meth:`cost_matrix`).
        """
        cost, p, T, warm = self._matching_inputs(a, b, cost, cost_limit, temperature)
        prior = self._label_cost(p)
        if prior is not None:
            C = _cost_matrix(cost, p.mean_a, p.var_a, p.mean_b, p.var_b) + T * prior  # [n_a, n_b]
            return p.rows_a, p.rows_b, sinkhorn_probabilities(C, T, cost_limit, p.mean_a, p.mean_b)
        P = posterior_marginals(cost, p.mean_a, p.var_a, p.mean_b, p.var_b, T, cost_limit, warm_start=warm)
        return p.rows_a, p.rows_b, (P.toarray() if p.rows_a.size * p.rows_b.size <= SPARSE_ABOVE else P)

    def match_log_probabilities(self, a=None, b=None, cost: str | None = None, cost_limit=None,
                                temperature: float | None = None):
        r"""(rows_a, rows_b, L): log match probabilities :math:`L_{ij} = \alpha_i + \beta_j - C_{ij} / T` from the
        potentials of :meth:`match_probabilities`' Sinkhorn solve, finite where P underflows. Ranking the rows of b by
        ``L[i]`` discounts a row of b near many rows of a (a hub; Radovanovic et al. 2010). Dense by nature."""
        cost, p, T, warm = self._matching_inputs(a, b, cost, cost_limit, temperature)
        C = _cost_matrix(cost, p.mean_a, p.var_a, p.mean_b, p.var_b)  # [n_a, n_b]
        prior = self._label_cost(p)
        if prior is not None:
            C, warm = C + T * prior, None
        return p.rows_a, p.rows_b, sinkhorn_log_marginals(C, T, cost_limit, p.mean_a, p.mean_b, warm_start=warm)

    def align(self, a=None, b=None, matcher: str = "hungarian", cost: str | None = None, cost_limit=None,
              n_samples: int = 100, temperature: float | None = None, order=None, seed=None,
              include_discovered: bool = True, sparse: bool | None = None, n_neighbors: int = 10):
        """Match the unaligned rows of views a and b in their shared latent dimensions.

        Parameters
        ----------
        a, b : view names (default the first two views)
        matcher : {"hungarian", "myopic", "sinkhorn", "perturb"}
            Optimal assignment, the paper's myopic rule, expected-accuracy matching under Sinkhorn or
            perturb-and-MAP marginals (:func:`bayesalign.matching.match`).
        cost : {"likelihood", "mean"}, optional
            The match likelihood of the two posteriors, or the paper's D** between their means. Default ``cost``.
        cost_limit : float, optional
            Leaving a row unmatched costs ``cost_limit / 2``; the probabilities then have a dustbin.
        n_samples : int
            Samples of perturb-and-MAP.
        temperature : float, "anchors" or "posterior", optional
            T of the probabilities exp(-C / T): fitted on the anchors (default), the posterior one, or a number.
        order : int array, optional
            Arrival order for "myopic": positions in ``align(..., include_discovered=False).candidates_b``.
        seed : optional
            Seed of perturb-and-MAP (default ``seed``).
        include_discovered : bool
            Also report the pairs the fit found itself (bootstrap, self-training), which are anchors of it now.
            With a label prior on the problem the costs are C + T c (:meth:`cost_matrix`), on the dense path.
        sparse, n_neighbors
            The large-N path on kNN candidate pairs (default: above ``SPARSE_ABOVE`` pairs).

        Returns
        -------
        Alignment
            Pairs in the problem's row indices, their costs and probabilities; ``info`` holds the shared
            dimensions, the temperature and the matcher.
        """
        a, b = self._pair(a, b)
        cost = self._cost(cost)
        p = self.posteriors(a, b, cost)
        found = p.discovered
        if order is not None and found is not None and np.size(order) != p.rows_b.size:
            raise ValueError(f"order lists {np.size(order)} rows, but {p.rows_b.size} rows of view {b!r} are still to "
                             f"match: its positions are those of align(..., include_discovered=False).candidates_b "
                             f"({found['index_b'].size} rows of {b!r} were discovered as pairs and are anchors now)")
        temperature = self._temperature(a, b, cost, temperature)
        fitted, warm = self._warm_start(a, b, cost, temperature, cost_limit, p.rows_a, p.rows_b)
        dims = np.arange(p.mean_a.shape[1])
        al = match(p.embedding, self.problem_, a, b, matcher=matcher, cost=cost, cost_limit=cost_limit,
                   temperature=temperature, dims=dims, rows_a=p.rows_a, rows_b=p.rows_b, sparse=sparse,
                   n_neighbors=n_neighbors, order=order, n_samples=n_samples,
                   seed=self.seed if seed is None else seed, method=f"mad-{matcher}-{cost}",
                   warm_start=warm, prior_cost=self._label_cost(p))
        info = {**p.info, **al.info}
        if fitted is not None:
            info["temperature_from"] = f"fitted on {fitted['pairs']} anchor pairs"
        index_a, index_b, costs, probs = al.index_a, al.index_b, al.costs, al.probabilities
        cand_a, cand_b = p.rows_a, p.rows_b
        if include_discovered and found is not None and len(found["index_a"]):
            index_a = np.concatenate([found["index_a"], index_a])
            index_b = np.concatenate([found["index_b"], index_b])
            costs = np.concatenate([found["cost"], costs])
            probs = np.concatenate([found["probability"], probs])
            cand_a, cand_b = np.union1d(cand_a, found["index_a"]), np.union1d(cand_b, found["index_b"])
            info["n_discovered"] = len(found["index_a"])
        order_a = np.argsort(index_a, kind="stable")
        views = self.problem_.views
        return Alignment((a, b), index_a[order_a], index_b[order_a], costs[order_a], probs[order_a],
                         n_a=views.n_samples[a], n_b=views.n_samples[b], candidates_a=cand_a, candidates_b=cand_b,
                         method=al.method, info=info)
