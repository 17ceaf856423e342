"""MRD: Manifold Relevance Determination (Damianou, Ek, Titsias & Lawrence, ICML 2012)."""

from __future__ import annotations

import torch

from ..data import AlignmentProblem, Views
from ._model import LatentGPBase
from ._optim import TOL
from .initialisation import as_paired_views, as_views
from .model_file import register_model_class

__all__ = ["MRD"]


@register_model_class
class MRD(LatentGPBase):
    r"""Manifold Relevance Determination: one latent space, one ARD Gaussian process per view.

    The views y^(v) [N, D_v] share a latent X [N, Q] with prior N(0, I); view v is
    ``y_n^(v) = f^(v)(x_n) + eps``, ``f^(v) ~ GP(0, k^(v))`` with an ARD kernel of its own, and
    ``eps ~ N(0, sigma_v^2 I)``. q(X) = prod_n N(mu_n, diag S_n) is shared by all views and fitted
    by maximising (Damianou et al. 2012, eq. 4; Titsias & Lawrence 2010, eq. 14-18)

        F = sum_v F_v(q(X), Z_v, k^(v), sigma_v^2) - KL(q(X) || N(0, I)),

    each F_v the collapsed bound of :func:`bayesalign.gp.bound.collapsed_bound` with analytic
    psi-statistics. The ARD weights of each view's kernel (``relevance_``) switch latent dimensions
    on or off per view, which splits the latent space into shared and private parts.

    Partially observed views (``fit(views, observed=...)``): one latent point per *entity*, and view
    v observes the entities ``obs_v`` (one per row, in row order); views may then have different
    numbers of rows, and an entity may be seen by any subset of the views. The bound is

        F = sum_v F_v(Y_v; q(X)[obs_v]) - KL(q(X) || N(0, I)),

    each view's collapsed bound over the entities it observes (its psi-statistics over its own
    rows), the KL over all entities; it stays exact within the collapsed bound and costs
    O(sum_v N_v M^2). An entity no view observes keeps its prior. With every view observing every
    entity in order it is the paired bound above.

    The outputs of each view are centred (the column means are stored in ``output_means_`` and
    added back by :meth:`predict`); they are not scaled, so the noise and signal variances are in
    the units of the data. Constant columns are dropped with a warning.

    Parameters
    ----------
    latent_dim : int
        Q, the number of latent dimensions.
    num_inducing : int
        M inducing inputs (capped at the number of rows with a warning).
    kernel : str, gpytorch Kernel or list of kernels
        A name for :func:`bayesalign.gp.kernels.make_kernel` ("rbf" = ScaleKernel(RBF-ARD), "linear",
        "rbf+bias", ...), a kernel copied for every view, or one kernel per view. The signal variance
        of a named kernel starts at the mean column variance of its view. A linear kernel has rank
        <= Q: with more inducing inputs than Q use "linear+white" (warned otherwise).
    init : {"pca", "pca_split", "cca", "random"}, LatentEmbedding or array (N, Q)
        Initial q(X) means. "pca": PCA of the concatenated views, each centred and scaled to unit
        total variance; "pca_split": the Q dimensions split between the views, each part the PCA of
        its view; "cca": PCA constrained to axes that are either shared by the views (their
        generalised-CCA subspace, canonical correlation above 0.5) or private to one view, shared
        ones first (:func:`bayesalign.gp.cca_latent`): the split MRD's relevance weights look for,
        so the optimiser need not rotate a PCA that mixes shared and private signals; "random":
        standard normal (seeded). PCA and CCA scores are divided by one common factor (the
        largest component gets unit variance). A LatentEmbedding (e.g. from a spectral method)
        gives the mean of its views' coordinates, centred and scaled the same way; an array is used
        as given. "cca" is the better start when the views have a few strong shared and private
        signals, not everywhere on real data, hence not the default (benchmarks/RESULTS.md,
        "Bayesian core"). A tuple or list of such starts (e.g. ``("pca", "cca")``) fits from each
        and keeps the highest bound (with ``n_restarts``, each start is restarted that often); a named
        start that cannot be computed on these views is skipped with a RuntimeWarning (a given
        embedding or array that does not fit raises).
    init_variance : float
        Initial q(X) variance of every point and dimension.
    snr : float
        Initial signal-to-noise ratio: noise variance = mean column variance / snr, per view.
    warmup_iters : int
        Bound evaluations with the noise variances held fixed before all parameters are freed
        (otherwise the noise can absorb the signal early on, GPy issue #286). The default 100 and the
        other optimiser defaults below were chosen on ``benchmarks/bench_mrd.py`` (figures in
        benchmarks/RESULTS.md, "Bayesian core").
    optimizer : {"lbfgs", "adam"}
        L-BFGS on the flattened parameters (default; in torch, on the model's device) or torch Adam.
    max_iter : int
        Most bound evaluations in all, the warm-up included.
    tol : float
        The fit has converged when its best bound rose by less than ``tol`` times its magnitude over the last
        50 evaluations (``bayesalign.gp._optim.STOP_WINDOW``; a window, not one step, so that a short step of
        the line search does not end a fit that is still climbing); default 3e-3.
    lbfgs_memory : int
        Correction pairs of L-BFGS (scipy's ``maxcor``); default 30, not scipy's and GPy's 10.
        ``experiments/mad_paper.py`` uses GPy's 10, as the paper.
    precondition_after : int or None
        After this many evaluations of the main phase (the warm-up not counted), L-BFGS restarts
        on ``mu / sqrt(S)`` instead of the latent means ``mu`` (S at the restart): the bound's
        curvature in a mean is about ``1 / S``, and this diagonal preconditioner equalises stiff
        and flat directions. None: never. Not from the start of the main phase (0): where views have
        many more columns than rows the bound then ends lower. For large N, when the best optimum
        matters more than time, None can find a better one.
    learning_rate : float
        Adam's step size.
    inducing : {"shared", "per_view"}
        One set of inducing inputs for all views or one per view.
    jitter : float, optional
        Added to the diagonal of Kuu relative to its mean diagonal (default 1e-6, GPy's VarDTC
        value); more is added, with a warning, if a Cholesky factorisation fails. It keeps the
        inducing inputs from collapsing onto each other (1e-8 leaves the reference fit in worse optima).
    seed : int, Generator or None
        For the inducing inputs (a random subset of the initial means) and init="random".
    device : str or torch.device, optional
        Where all tensors live ("cpu" by default, "cuda", ...).
    dtype : torch.dtype or str
        float64 (default) or float32. In float32 the psi-statistics cost less; the M x M algebra of
        the bound still runs in float64, but a summed psi2 rounded to float32 can lose positive
        definiteness against an ill-conditioned Kuu (small noise, many inducing inputs), which stops
        the fit with a ``NotPSDError``.
    progress : bool
        Show a tqdm progress bar with the bound.
    n_restarts : int
        Fits from this many starting points, keeping the one with the highest bound (the bound is
        multimodal; GPy's ``optimize_restarts``). The first starts at ``init``; the others at ``init``
        plus Gaussian jitter of 30% of each latent dimension's spread, with fresh inducing inputs
        (with several starts in ``init``: this many fits from each).
        A higher bound is a better model of the data it was fitted on, not always a better alignment.
    race_inducing : int, optional
        With several fits (starts or restarts): each runs with this many inducing inputs for
        ``RACE_FRACTION`` of ``max_iter`` (``bayesalign.gp._model``), and only the one with the highest bound
        grows to ``num_inducing`` (farthest points, as :meth:`grow_inducing`) and goes on for ``max_iter``.
        None (default), or not fewer than ``num_inducing``: every fit at ``num_inducing`` for ``max_iter``.

    Attributes
    ----------
    module_ : LatentGPModule
        The torch module with every parameter.
    view_names_ : tuple of str
    restart_bounds_ : array [n_starts * n_restarts]
        The final bound of every restart (the model kept is the argmax, ``best_restart_``).
    restart_inits_ : list of str
        The start of every restart: its name ("pca", ...; "embedding", "array"), with
        " (jitter k)" for the jittered restarts.
    best_restart_ : int
        Index of the kept restart in ``restart_bounds_``.
    history_ : array
        The bound at every evaluation of the kept restart (warm-up first: ``n_warmup_`` of them).
    history_seconds_ : array
        Seconds since the start of the fit at every evaluation.
    n_iter_ : int
        Number of bound evaluations.
    converged_ : bool
        Whether the last optimisation phase stopped on its tolerance. A fit with ``max_iter > 0`` that
        did not also warns (``sklearn.exceptions.ConvergenceWarning``). L-BFGS's test is on the
        relative change of the bound per iteration, which a stall (a stale curvature memory) can pass
        far from an optimum: :meth:`continue_fit` restarts with a fresh memory and shows whether the
        bound still rises (benchmarks/RESULTS.md, "Why the thread count decides fou-kar's draw 0").
    stopped_by_ : str
        Why a phase that did not converge stopped: ``"max_iter"`` (its budget of evaluations) or the
        optimiser's own stop with its message (set only when a phase has not converged).
    interrupted_ : bool
        Whether a KeyboardInterrupt stopped the fit: the best parameters so far are kept, a
        RuntimeWarning says so, and the interrupt is re-raised to the caller.
    relevance_ : dict view -> array [Q]
        ARD relevance weights (variance / lengthscale^2 for RBF).
    resolution_ : dict view -> array [Q]
        How finely each view's outputs pin down each latent dimension: its Fisher information about
        x_q times the spread of the q(X) means along q, unit-free (above 1: resolved; see the property).
    embedding_ : LatentEmbedding
        q(X) means and variances of each view's rows (the same for every view of a paired fit),
        ``shared_dims`` at threshold 0.05.
    entity_means_, entity_variances_ : array [n_entities, Q]
        q(X) per entity.
    observed_ : dict view -> array [N_v]
        The entity of each row of a view (``arange`` for a paired fit).
    noise_variance_ : dict view -> float
    output_means_, kept_columns_ : dict view -> array [D_v]

    Examples
    --------
    >>> import numpy as np
    >>> t = np.linspace(0, 2 * np.pi, 40)[:, None]
    >>> rng = np.random.default_rng(0)
    >>> views = {"a": np.hstack([np.sin(t), np.cos(2 * t)]) @ rng.normal(size=(2, 6)),
    ...          "b": np.hstack([np.sin(t), np.cos(3 * t)]) @ rng.normal(size=(2, 5))}
    >>> mrd = MRD(latent_dim=3, num_inducing=10, max_iter=50, warmup_iters=10, progress=False, seed=0).fit(views)
    >>> mrd.embedding_.means["a"].shape, sorted(mrd.relevance_)
    ((40, 3), ['a', 'b'])
    >>> mean, var = mrd.infer("b", views["b"][:5])
    >>> mean.shape
    (5, 3)

    Partially observed: b's first 10 rows are a's first 10 entities (anchors), its other 30 rows
    entities of their own (40 to 69):

    >>> observed = {"b": np.r_[np.arange(10), np.arange(40, 70)]}
    >>> mrd = MRD(latent_dim=3, num_inducing=10, max_iter=30, warmup_iters=10, progress=False, seed=0)
    >>> mrd = mrd.fit({"a": views["a"], "b": views["b"][:40]}, observed=observed)
    >>> mrd.entity_means_.shape, mrd.embedding_.means["b"].shape
    ((70, 3), (40, 3))
    """

    _method = "MRD"

    def __init__(self, latent_dim: int = 5, num_inducing: int = 20, kernel="rbf", init="pca",
                 init_variance: float = 0.1, snr: float = 100.0, warmup_iters: int = 100,
                 optimizer: str = "lbfgs", max_iter: int = 2000, tol: float = TOL, learning_rate: float = 0.01,
                 inducing: str = "shared", jitter: float | None = None, seed=None, device=None,
                 dtype=torch.float64, progress: bool = True, n_restarts: int = 1,
                 lbfgs_memory: int = 30, precondition_after: int | None = 200, race_inducing: int | None = None):
        self.latent_dim = latent_dim
        self.num_inducing = num_inducing
        self.kernel = kernel
        self.init = init
        self.init_variance = init_variance
        self.snr = snr
        self.warmup_iters = warmup_iters
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.tol = tol
        self.learning_rate = learning_rate
        self.inducing = inducing
        self.jitter = jitter
        self.seed = seed
        self.device = device
        self.dtype = dtype
        self.progress = progress
        self.n_restarts = n_restarts
        self.lbfgs_memory = lbfgs_memory
        self.precondition_after = precondition_after
        self.race_inducing = race_inducing

    def fit(self, views, y=None, observed=None, n_entities: int | None = None, latent_prior=None) -> MRD:
        """Fit to views: Views, an AlignmentProblem (its views), or a dict / list of arrays.

        Parameters
        ----------
        views
            Without ``observed`` every view must have the same number of rows (row i of every view
            is the same entity).
        observed : dict view -> int array [N_v], or list (one per view), optional
            The entity of each row of a view (indices into 0 .. n_entities - 1; an entry None, or a
            view left out of the dict, means row n is entity n). Views may then have different
            numbers of rows. The initialisation is per entity: "pca", "pca_split" and "cca" are
            computed on the entities every view observes and carried to every other row by a
            least-squares map from its view (:func:`~bayesalign.gp.initialisation.anchored_latent`;
            C < Q + 2 such entities anchor C - 2 dimensions, the others start small and random;
            with fewer than 3, on the views completed by a rank-Q SVD,
            :func:`~bayesalign.gp.initialisation.complete_views`); an init array has one row per
            entity; a LatentEmbedding one row per row of each view (an entity gets the mean).
        n_entities : int, optional
            Number of entities (default: the largest index in ``observed`` + 1); entities no view
            observes keep the prior N(0, I).
        latent_prior : prior of :mod:`bayesalign.gp.priors`, optional
            p(X) over the entities (default N(0, I)); e.g. a
            :class:`~bayesalign.gp.priors.GraphLaplacianPrior` over a neighbourhood graph of the
            entities, whose KL replaces N(0, I)'s in the bound. It is data (its size is the number of
            entities), so it is given here rather than to the constructor.
        """
        complete = views.views if isinstance(views, AlignmentProblem) else views
        if isinstance(complete, Views):  # only the stochastic engine models missing entries
            complete.check_complete(type(self).__name__)
        if observed is None and n_entities is None:
            names, arrays = as_paired_views(views)
        else:
            names, arrays = as_views(views)
        return self._fit_views(names, arrays, observed=observed, n_entities=n_entities, latent_prior=latent_prior)

    def predict(self, view, X, X_variance=None, include_noise: bool = True):
        """Posterior mean and variance [n, D_v] of view ``view``'s outputs at latent points X [n, Q].

        With ``X_variance`` [n, Q] the inputs are uncertain, x ~ N(X, diag(X_variance)), and the
        moments are exact under that q(x) (via per-point psi-statistics). The variance is that of
        f plus, with ``include_noise``, the view's noise variance. Constant training columns are
        predicted as their constant with variance 0.
        """
        return self._predict(view, X, X_variance, include_noise)

    def infer(self, view, Y_new, max_iter: int = 500, tol: float = 1e-10, progress: bool | None = None,
              context=None):
        """q(x*) = N(mean, diag(variance)) [n, Q] for new rows ``Y_new`` seen in ``view`` only.

        The trained model is fixed; only q(x*) is optimised, against the named view's bound term
        with its optimal q(u) fixed (see :mod:`bayesalign.gp.inference`). No other view's kernel
        or data enters: dimensions private to other views come back at the prior N(0, 1).
        ``context=(Y, mean, variance)``: rows of the same view seen before, with their q(x), that
        join the training rows in the view's q(u) (the kernel, noise and inducing inputs stay fixed).
        """
        return self._infer(view, Y_new, max_iter=max_iter, tol=tol, progress=progress, context=context)
