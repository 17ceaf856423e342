"""The MAD estimator: fit a multi-view GP-LVM, hand its posteriors to the matcher (Damianou, Lawrence & Ek, 2016).

Its parts, one job a module: :mod:`~bayesalign.mad.training` (what the model learns from),
:mod:`~bayesalign.mad.anchors` (the anchor pairs placed as unaligned rows), :mod:`~bayesalign.mad.posteriors` and
:mod:`~bayesalign.mad.calibration` (matching and its temperature), :mod:`~bayesalign.mad.refinement` (soft
correspondence rounds), :mod:`~bayesalign.mad.self_training`, :mod:`~bayesalign.mad.zero_anchor` and
:mod:`~bayesalign.mad.streaming`.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning

from ..data import AlignmentProblem, LatentEmbedding
from ..matching import COSTS, fit_misfit
from . import anchors as anchor_pairs
from . import refinement, self_training, streaming, training, zero_anchor
from .calibration import MIN_CALIBRATION_PAIRS
from .posteriors import AnchorPool, MatchPosteriors, PosteriorAligner
from .training import MIN_ANCHORS, MIN_RESOLUTION

__all__ = ["ENGINES", "MAD", "MIN_ANCHORS", "MIN_RESOLUTION", "TRAININGS"]

#: What the model learns from: the anchors only (the paper, section 3.1) or every row (a partially observed MRD).
TRAININGS = ("anchors", "all_rows")
#: The inference engine: the exact collapsed bound (L-BFGS), or Pyro SVI with minibatches (all rows only).
ENGINES = ("collapsed", "svi")


def _anchor_groups(problem, engine: str) -> np.ndarray:
    """The anchor groups (G, V) of a valid problem; raises on bad anchors or views MAD cannot fit."""
    if not isinstance(problem, AlignmentProblem):
        raise TypeError(f"MAD.fit expects an AlignmentProblem, got {type(problem).__name__}")
    groups = problem.anchor_groups()
    given = sum(len(corr) for corr in problem.anchors.values())  # an empty Correspondence is no anchor
    if given and len(groups) < MIN_ANCHORS:
        raise ValueError(f"MAD needs at least {MIN_ANCHORS} anchors present in every view to fit MRD, got "
                         f"{len(groups)}; with no anchors at all it bootstraps them without supervision")
    if len(groups) == 0 and len(problem.views) != 2:
        raise ValueError(f"MAD without anchors bootstraps pairs between two views; this problem has "
                         f"{len(problem.views)} views and no anchors")
    for k, view in enumerate(problem.views.names):
        n = problem.views.n_samples[view]
        if np.unique(groups[:, k]).size >= n:
            raise ValueError(f"view {view!r} has no unaligned rows: all its {n} rows are anchors, so nothing is "
                             "left to align")
    if any(problem.views.n_missing.values()) and engine != "svi":
        problem.views.check_complete(f"MAD(engine={engine!r})")
    return groups


class MAD(PosteriorAligner, BaseEstimator):
    r"""Manifold Alignment Determination: correspondences from a multi-view Bayesian GP-LVM (MRD) with ARD kernels.

    Every view v is a sparse GP mapping of a shared latent space, :math:`Y_v = f_v(X) + \epsilon`, with an ARD
    kernel whose relevance weights say which latent dimensions each view uses (Damianou, Ek, Titsias & Lawrence
    2012). The model learns from every row by default (``training="all_rows"``): one latent point per entity (an
    anchor group, or an unaligned row seen by its own view), the bound

    .. math:: \sum_v F_v(Y_v; q(X)[\mathrm{obs}_v]) - \mathrm{KL}(q(X) \,\|\, p(X)),
              \qquad p(X) = N(0, (I + \lambda L)^{-1}),

    under a graph prior over the views' kNN graphs (:mod:`bayesalign.mad.training`); ``training="anchors"`` is
    the paper's procedure (MRD on the anchors, eq. 2-3, then q_v(x) of each unaligned row from its own view, eq. 4).
    Two views' posteriors q(x_i) = N(mu_i, S_i) are compared in the dimensions both views resolve, by the match
    likelihood with the cross-view misfit :math:`\Sigma_\tau` learned on the anchors,

    .. math:: C_{ij} = -\log N(\mu_i - \mu_j;\ 0,\ S_i + S_j + \Sigma_\tau),

    or the paper's D** (``cost="mean"``: squared distances between the means), and matched by
    :meth:`~bayesalign.mad.posteriors.PosteriorAligner.align` (Hungarian, the paper's myopic rule, or the
    expected-accuracy matching under Sinkhorn marginals). The probabilities are the Sinkhorn marginals of
    exp(-C / T), T fitted on the anchor pairs (:mod:`bayesalign.mad.calibration`). With anchors,
    ``refinement.ROUNDS`` rounds of q(P), a posterior over the matching, and q(X) follow the fit (none by default;
    :mod:`bayesalign.mad.refinement`); with none,
    the fit starts from the views' Gromov-Wasserstein coupling (:mod:`bayesalign.mad.zero_anchor`).

    Parameters
    ----------
    latent_dim : int
        Q, the latent dimensions; ARD switches off those the data do not need.
    num_inducing : int
        Inducing inputs per view (capped at the number of latent points).
    kernel : str or gpytorch kernel
        Each view's kernel ("rbf", "linear", ...).
    cost : {"likelihood", "mean"}
        Default cost of :meth:`align`.
    training : {"all_rows", "anchors"}
        What the model learns from (above).
    engine : {"collapsed", "svi"}
        The exact collapsed bound with L-BFGS (:class:`bayesalign.gp.MRD`), or Pyro SVI with minibatches
        (:class:`bayesalign.gp.StochasticMRD`: any size, missing entries, non-Gaussian likelihoods; all rows only).
    engine_options : dict, optional
        Further keywords of the engine's model (e.g. ``max_iter``, ``init``, ``dtype``; ``likelihood`` for SVI).
    standardize : bool
        Give every column unit variance before fitting; otherwise the views are centred only.
    graph_strength : float
        lambda of the graph prior; 0: p(X) = N(0, I).
    seed : int, optional
    device : str, optional
        torch device ("cuda").
    progress : bool
        Progress bars (on a terminal only).

    Attributes
    ----------
    model_ : MRD or StochasticMRD
    posteriors_ : dict view -> (rows, mean [n, Q], var [n, Q])
        q(x) of each view's rows that are not anchors.
    embedding_ : LatentEmbedding
        Every row's latent coordinates (anchor rows: their group's q(x)).
    anchors_ : int array (G, V)
        The anchor groups seen by every view (given and discovered).
    relevance_, resolution_ : dict view -> array (Q,)
    shared_dims_ : dict (a, b) -> int array
    converged_ : bool
        Whether the kept fit reached its stopping rule (its bound rose by less than the engine's ``tol``, relative,
        over its last 50 evaluations, before ``max_iter``); a ConvergenceWarning when not.
    calibration_ : dict (a, b, cost) -> dict
        The fitted temperatures and their evidence (:func:`bayesalign.mad.calibration.fit_temperature`).
    discovered_, bootstrap_, self_training_history_, correspondence_history_, starts_, start_, timings_
        What the fit's stages did.

    Examples
    --------
    >>> from bayesalign.datasets import mad_toy
    >>> problem = mad_toy("linear_shared", seed=0, n_anchors=10).shuffle_unaligned(seed=0)
    >>> mad = MAD(latent_dim=3, num_inducing=10, seed=0, engine_options={"max_iter": 200})
    >>> mad.fit(problem).align().n_pairs  # doctest: +SKIP
    90
    """

    #: the probabilities' temperature: fitted on the anchors (``align(temperature=...)`` overrides it)
    temperature = "anchors"

    def __init__(self, latent_dim: int = 10, num_inducing: int = 80, kernel="rbf", cost: str = "likelihood",
                 training: str = "all_rows", engine: str = "collapsed", engine_options: dict | None = None,
                 standardize: bool = False, graph_strength: float = 10.0, seed=None, device=None,
                 progress: bool = False):
        self.latent_dim = latent_dim
        self.num_inducing = num_inducing
        self.kernel = kernel
        self.cost = cost
        self.training = training
        self.engine = engine
        self.engine_options = engine_options
        self.standardize = standardize
        self.graph_strength = graph_strength
        self.seed = seed
        self.device = device
        self.progress = progress

    # -- validation ------------------------------------------------------------------------
    def _check_params(self) -> None:
        from ..gp import MRD, StochasticMRD

        for name in ("latent_dim", "num_inducing"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name, allowed in (("cost", COSTS), ("training", TRAININGS), ("engine", ENGINES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")
        if self.engine == "svi" and self.training != "all_rows":
            raise ValueError("engine='svi' fits every row (training='all_rows'); the paper's anchors-only procedure "
                             "runs on the collapsed engine")
        if isinstance(self.graph_strength, bool) or not (np.isfinite(float(self.graph_strength))
                                                         and float(self.graph_strength) >= 0):
            raise ValueError(f"graph_strength must be a finite number >= 0, got {self.graph_strength!r}")
        if self.engine_options is not None and not isinstance(self.engine_options, dict):
            raise TypeError(f"engine_options must be a dict of keywords of the engine's model or None, got "
                            f"{type(self.engine_options).__name__}")
        estimator = StochasticMRD if self.engine == "svi" else MRD
        options = set(self.engine_options or {})
        reserved = {"latent_dim", "num_inducing", "kernel", "seed", "device", "progress"} & options
        if reserved:
            raise ValueError(f"engine_options must not set {sorted(reserved)}: they are MAD's own parameters")
        unknown = sorted(options - set(estimator._get_param_names()))
        if unknown:
            raise ValueError(f"engine_options has no {estimator.__name__} parameter {unknown}; "
                             f"{estimator.__name__} takes {estimator._get_param_names()}")

    def set_params(self, **params) -> MAD:
        """Set parameters; ``engine_options__<key>=value`` sets one keyword of ``engine_options`` (a new dict, the
        others kept), as scikit-learn's nested keys set a parameter of an inner estimator."""
        nested = {key: params.pop(key) for key in list(params) if key.startswith("engine_options__")}
        if nested:
            options = dict(params.pop("engine_options", self.engine_options) or {})
            options.update({key[len("engine_options__"):]: value for key, value in nested.items()})
            params["engine_options"] = options
        return super().set_params(**params)

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, problem: AlignmentProblem, y=None) -> MAD:
        """Fit the model on ``problem`` (views, anchors; the truth is only reported) and its posteriors.

        With anchors: the fit, then (collapsed, all rows, the graph prior, enough anchors to judge it)
        ``refinement.ROUNDS`` rounds of q(P) and q(X), each kept only if the anchors align better under it.
        Without anchors (two views): the unsupervised candidates' fits, each self-trained, the best supported kept
        (:mod:`bayesalign.mad.zero_anchor`).
        """
        self._check_params()
        groups = _anchor_groups(problem, self.engine)
        self.problem_ = problem
        self.anchors_ = groups
        self.discovered_, self.bootstrap_ = {}, None
        self.self_training_history_, self.correspondence_history_, self.correspondence_rounds_ = [], [], 0
        self.start_, self.starts_ = None, []
        graph = self.training == "all_rows" and float(self.graph_strength) > 0
        self.latent_prior_ = "graph" if graph else "standard_normal"
        self._in_fit = True  # the stages stay quiet about convergence; fit says it once, at its end
        try:
            if len(groups) == 0:
                zero_anchor.fit_without_anchors(self)
            else:
                self.refit()
                refinement.refine_correspondences(self)
        except BaseException:  # an error or Ctrl-C: the model as it stands warns on its own again
            if hasattr(self, "model_"):
                vars(self.model_).pop("_warn_convergence", None)
            raise
        finally:
            self._in_fit = False
        self._report_convergence()
        return self

    def refit(self, init: LatentEmbedding | None = None, extra_edges=None) -> MAD:
        """Fit the model again on ``problem_`` with the current ``anchors_``: from ``init`` (a refit from the current
        q(X)) or from the start kept before (``start_``; every start at the first fit), with ``extra_edges`` (sparse
        entities x entities) added to the graph prior. Every derived result (shared dimensions, embedding,
        temperatures) is computed anew."""
        start = time.perf_counter()
        views = self.problem_.views.standardised() if self.standardize else self.problem_.views
        if self.training == "anchors":
            state = training.fit_anchors_only(self, views, self.anchors_)
        else:
            state = training.fit_all_rows(self, self.problem_, views, self.anchors_, init, extra_edges, self.start_)
        for name, value in state.items():
            setattr(self, name, value)
        self.converged_ = bool(getattr(self.model_, "converged_", True))
        self.relevance_ = self.model_.relevance_
        self.resolution_ = self.model_.resolution_
        self._set_shared_dims()
        self.embedding_ = training.embedding(self)
        self.timings_["total_seconds"] = time.perf_counter() - start
        self.misfit_, self.calibration_ = {}, {}
        self._calibration_potentials, self._anchor_cache, self._stream = {}, {}, {}
        return self

    def _set_shared_dims(self) -> None:
        """The dimensions each pair of views shares: those both resolve; warnings for a view switched off and for
        a pair that shares none."""
        from ..gp import shared_dimensions

        names, relevance = self.problem_.views.names, self.relevance_
        self.shared_dims_ = {(a, b): shared_dimensions({a: self.resolution_[a], b: self.resolution_[b]},
                                                       MIN_RESOLUTION, fallback=True, relative=False)
                             for i, a in enumerate(names) for b in names[i + 1:]}
        # a view off: it resolves no dimension while another view does (its outputs are noise to the model)
        self.switched_off_views_ = [v for v in names if not np.any(self.resolution_[v] > MIN_RESOLUTION)
                                    and any(np.any(self.resolution_[w] > MIN_RESOLUTION) for w in names if w != v)]
        for view in self.switched_off_views_:
            warnings.warn(f"MAD: the fit switched view {view!r} off (it resolves no latent dimension: resolution "
                          f"{np.max(self.resolution_[view]):.2g} at most, {MIN_RESOLUTION} needed; ARD relevance "
                          f"{np.max(relevance[view]):.2g}); its rows carry no information about the latent space, "
                          "and any matching of them is random. Try a smaller latent_dim or standardize=True",
                          RuntimeWarning, stacklevel=4)
        for (a, b), dims in self.shared_dims_.items():
            if len(dims) == 0:
                warnings.warn(f"MAD: views {a!r} and {b!r} share no latent dimension (resolution above "
                              f"{MIN_RESOLUTION} in both); the fit found nothing in common, and align() between them "
                              "refuses rather than returning a random matching", RuntimeWarning, stacklevel=4)

    def _report_convergence(self) -> None:
        """One ConvergenceWarning when the kept model stopped before its stopping rule."""
        model = self.model_
        if "_warn_convergence" not in vars(model):  # the SVI engine says it from its own fit
            return
        del model._warn_convergence  # the kept model warns on its own again (e.g. continue_fit)
        if self.converged_:
            return
        stopped = getattr(model, "stopped_by_", "max_iter")
        if stopped == "max_iter":
            advice = "raise engine_options['max_iter']"
        else:  # the optimiser gave up on its own: more evaluations would not have been used
            advice = "try another seed"
        warnings.warn(f"MAD: the fit kept stopped before the optimiser's tolerance (by {stopped}, after "
                      f"{getattr(model, 'n_iter_', '?')} evaluations; converged_ is False); the alignment may be far "
                      f"from the model's optimum: {advice}", ConvergenceWarning, stacklevel=3)

    # -- self-training ---------------------------------------------------------------------
    def self_train(self, confidence_threshold: float = 0.9, max_rounds: int = 5) -> MAD:
        """Tie the confident mutual-nearest pairs and refit, round after round (two views; hard EM over the
        correspondence, :func:`bayesalign.mad.self_training.self_train`). ``discovered_`` holds the pairs,
        ``self_training_history_`` one entry per round."""
        self._check_fitted()
        self_training.self_train(self, confidence_threshold, max_rounds)
        if not getattr(self, "_in_fit", False):  # called on its own, after fit
            self._report_convergence()
        return self

    def tie(self, a, b, index_a, index_b, probability, cost, round_: int = 0) -> MAD:
        """Make each pair (``index_a[k]`` of a, ``index_b[k]`` of b) one anchor group (``discovered_``) and refit
        from the current q(X) (a new pair's entity at the mean of its two rows')."""
        found = self.discovered_.get((a, b))
        new = {"index_a": index_a, "index_b": index_b, "probability": probability, "cost": cost,
               "round": np.full(len(index_a), round_)}
        dtypes = {"index_a": np.int64, "index_b": np.int64, "probability": float, "cost": float, "round": np.int64}
        self.discovered_ = {**self.discovered_, (a, b): {
            key: np.concatenate([[] if found is None else found[key], np.asarray(new[key])]).astype(dtypes[key])
            for key in dtypes}}
        self.anchors_ = np.vstack([self.anchors_, np.column_stack([index_a, index_b])])
        return self.refit(init=None if self.training == "anchors" else self.embedding_)

    # -- what the matcher compares ---------------------------------------------------------
    def shared_dims(self, a, b) -> np.ndarray:
        """The latent dimensions shared by views a and b: those both resolve."""
        a, b = self._pair(a, b)
        return self.shared_dims_[(a, b)] if (a, b) in self.shared_dims_ else self.shared_dims_[(b, a)]

    def infer(self, view, Y) -> tuple[np.ndarray, np.ndarray]:
        """q(x) = N(mean, diag var) [n, Q] of rows ``Y`` [n, p] of ``view`` alone (as given: standardised here when the
        fit was), under the fitted model."""
        self._check_fitted()
        view = self.problem_.views.name_of(view)
        Y = np.asarray(Y, np.float64)
        n_columns = self.problem_.views.n_features[view]
        if Y.ndim != 2 or Y.shape[1] != n_columns:
            raise ValueError(f"view {view!r}: rows must be an array (n, {n_columns}), got shape {Y.shape}")
        if self.standardize:
            centre, scale = self.problem_.views.column_scaling(view)
            Y = (Y - centre) / scale
        if self.engine == "svi":
            return self.model_.infer(view, Y)
        return self.model_.infer(view, Y, max_iter=training.INFER_MAX_ITER)

    def cross_view_misfit(self, a=None, b=None):
        r"""How far views a and b put the same point beyond their posterior variances: the covariance
        :math:`\Sigma_\tau` of the re-inferred anchor pairs' differences less their mean posterior variances
        (:func:`bayesalign.matching.fit_misfit`), which the likelihood cost adds. None with the SVI engine, and with
        fewer than ``MIN_CALIBRATION_PAIRS`` anchor pairs (a RuntimeWarning). Cached in ``misfit_``."""
        a, b = self._pair(a, b)
        key = (a, b) if (a, b) in self.shared_dims_ else (b, a)
        if self.engine == "svi":
            return None
        if key not in self.misfit_:
            self._shared(*key)  # raises, naming the views, when they share no dimension
            n = len(self.problem_.anchors_between(*key, implied=True))
            if n < MIN_CALIBRATION_PAIRS:
                warnings.warn(f"views {key[0]!r} and {key[1]!r} have {n} anchor pairs, fewer than "
                              f"MIN_CALIBRATION_PAIRS = {MIN_CALIBRATION_PAIRS}, to estimate their cross-view misfit "
                              f"on; the likelihood cost uses the posterior variances alone", RuntimeWarning,
                              stacklevel=3)
                self.misfit_[key] = None
            else:
                self.misfit_[key] = fit_misfit(*self.anchor_posteriors(*key))
        return self.misfit_[key]

    def anchor_posteriors(self, a, b, held_out: bool = False) -> tuple:
        """The anchor pairs between a and b placed as unaligned rows (re-inferred, or ``held_out`` of continuations of
        the fit; :mod:`bayesalign.mad.anchors`): (mean_a, var_a, mean_b, var_b) in the shared dimensions (cached)."""
        a, b = self._pair(a, b)
        key = (a, b, held_out)
        if key not in self._anchor_cache:
            place = anchor_pairs.held_out_anchors if held_out else anchor_pairs.reinferred_anchors
            self._anchor_cache[key] = place(self, a, b)
        return self._anchor_cache[key]

    def _shared(self, a, b):
        """(rows_a, mean_a, var_a, rows_b, mean_b, var_b) of the rows still to match, in the shared dimensions."""
        dims = self.shared_dims(a, b)
        if len(dims) == 0:
            raise ValueError(f"views {a!r} and {b!r} share no latent dimension (resolution above {MIN_RESOLUTION} "
                             "in both): there is nothing to match them in")
        anchored = self.problem_.anchors_between(a, b, implied=True)
        out = []
        for view, taken in ((a, anchored.index_a), (b, anchored.index_b)):
            rows, mean, var = self.posteriors_[view]
            keep = ~np.isin(rows, taken)
            out += [rows[keep], mean[keep][:, dims], var[keep][:, dims]]
        return tuple(out)

    def _misfit(self, a, b, cost):
        return self.cross_view_misfit(a, b) if cost == "likelihood" else None

    def posteriors(self, a=None, b=None, cost: str | None = None) -> MatchPosteriors:
        """The rows of a and b still to match and their posteriors as ``cost`` compares them (with the likelihood
        cost, in the cross-view misfit's basis with the misfit added)."""
        a, b = self._pair(a, b)
        cost = self._cost(cost)
        rows_a, ma, va, rows_b, mb, vb = self._shared(a, b)
        dims, misfit, emb = self.shared_dims(a, b), self._misfit(a, b, cost), self.embedding_
        compared = {v: (emb.means[v][:, dims], emb.variance_of(v)[:, dims]) for v in (a, b)}
        if misfit is not None:
            (ma, va), (mb, vb) = misfit.apply(ma, va), misfit.apply(mb, vb)
            compared = {v: misfit.apply(*compared[v]) for v in (a, b)}
        embedding = LatentEmbedding({v: m for v, (m, _) in compared.items()},
                                    {v: s for v, (_, s) in compared.items()}, method="mad")
        info = {"shared_dims": dims.tolist(), "min_resolution": MIN_RESOLUTION, "misfit": misfit is not None}
        return MatchPosteriors((a, b), rows_a, ma, va, rows_b, mb, vb, embedding, self._discovered(a, b), info)

    def _discovered(self, a, b) -> dict | None:
        """The pairs the fit discovered between a and b, oriented (a, b), or None."""
        if (a, b) in self.discovered_:
            return self.discovered_[(a, b)]
        found = self.discovered_.get((b, a))
        return None if found is None else {**found, "index_a": found["index_b"], "index_b": found["index_a"]}

    def anchor_pool(self, a=None, b=None, cost: str | None = None, rows=None, held_out: bool = False):
        """The rows still to match (or ``rows``: (rows of a, rows of b), each by its posterior in the fit) with the
        anchor pairs placed as unaligned rows appended, as ``cost`` compares them; None without anchor pairs."""
        a, b = self._pair(a, b)
        cost = self._cost(cost)
        if len(self.problem_.anchors_between(a, b, implied=True)) == 0:
            return None
        p = self.posteriors(a, b, cost)
        if rows is None:
            ma, va, mb, vb = p.mean_a, p.var_a, p.mean_b, p.var_b
        else:
            emb = p.embedding
            ma, va = emb.means[a][rows[0]], emb.variance_of(a)[rows[0]]
            mb, vb = emb.means[b][rows[1]], emb.variance_of(b)[rows[1]]
        xa, sa, xb, sb = self.anchor_posteriors(a, b, held_out)
        misfit = self._misfit(a, b, cost)
        if misfit is not None:
            (xa, sa), (xb, sb) = misfit.apply(xa, sa), misfit.apply(xb, sb)
        n = xa.shape[0]
        return AnchorPool(np.vstack([ma, xa]), np.vstack([va, sa]), np.vstack([mb, xb]), np.vstack([vb, sb]),
                          ma.shape[0] + np.arange(n), mb.shape[0] + np.arange(n))

    # -- streaming (the paper's myopic, online variant) --------------------------------------
    def match_one(self, y, view=None, other=None, cost_limit=None):
        """Match one incoming row ``y`` of ``view`` (default the second view) to the nearest free unaligned row of
        ``other`` (:class:`bayesalign.mad.streaming.Stream`): (row of ``other``, or -1; the pair's cost)."""
        self._check_fitted()
        views = self.problem_.views
        b = views.names[1] if view is None else views.name_of(view)
        a = next(v for v in views.names if v != b) if other is None else views.name_of(other)
        a, b = self._pair(a, b)
        if (a, b) not in self._stream:
            self._stream[(a, b)] = streaming.Stream(self, a, b)
        return self._stream[(a, b)].match(y, cost_limit)

    def reset_stream(self) -> None:
        """Forget the rows streamed by :meth:`match_one` (every row is free again)."""
        self._stream = {}
