"""StochasticMRD: MRD as a Pyro model over GPyTorch sparse variational GPs, fitted by SVI with minibatches.

See :mod:`bayesalign.gp.svi.model` for the generative model and its bound, :mod:`.start` for the collapsed
start, :mod:`.training` for the training loops and :mod:`.inference` for q(x*) of new rows.
"""

from __future__ import annotations

import copy
import warnings

import gpytorch
import numpy as np
import torch

from ..fitted import FittedLatentModel
from ..initialisation import check_observed, check_paired
from ..kernels import ard_relevance, make_kernel
from ..model_file import register_model_class
from ..priors import GraphLaplacianPrior
from .continuation import continue_training, grow_inducing_inputs
from .files import read_stochastic, write_stochastic
from .guide import LatentPosterior, ViewGP
from .inference import infer_rows, view_resolution
from .inputs import (
    check_params,
    check_step_memory,
    constant_columns_dropped,
    initial_latent,
    likelihood_names,
    start_name,
    time_covariance,
    views_with_nan,
)
from .likelihoods import check_targets, make_likelihood
from .model import SVIMRDModel, negative_elbo
from .start import collapsed_start, load_collapsed_state
from .training import collapsed_elbo, normalise_latent, train

__all__ = ["StochasticMRD"]


class StochasticMRD(FittedLatentModel):
    r"""MRD with per-view likelihoods, missing entries, latent priors and partial observation, by SVI.

    The model of :class:`bayesalign.gp.MRD` (Damianou, Ek, Titsias & Lawrence, 2012) written in Pyro
    (:mod:`bayesalign.gp.svi.model`): a latent point per entity with a prior, one sparse variational
    GP per view (GPyTorch ``ApproximateGP``, whitened ``VariationalStrategy``, a batch of
    ``CholeskyVariationalDistribution`` over the view's outputs, one ARD kernel per view from
    :func:`bayesalign.gp.make_kernel`) and a likelihood per view. The uncollapsed bound

        ELBO = sum_v E_q(X) E_q(f) [log p_v(Y_v | F_v)] - sum_v KL(q(U_v) || p(U_v)) - KL(q(X) || p(X))

    (Hensman, Fusi & Lawrence, 2013) is maximised by stochastic variational inference: Adam on Pyro's
    mean-field ELBO (:func:`~bayesalign.gp.svi.model.negative_elbo`: analytic KL terms; ``num_particles``
    reparameterised draws of X per step for the non-Gaussian views), natural-gradient steps on q(U) of the
    Gaussian views, minibatches of entities through ``pyro.plate`` subsampling, the learning rate decayed
    exponentially from ``learning_rate`` to ``learning_rate * final_lr_fraction``. Adam's second-moment
    average has a memory of about 100 steps (beta_2 = 0.99, not torch's 0.999): the first epochs' gradients are
    orders of magnitude larger than later ones, and a 1,000-step memory of them shrinks every step for thousands
    of epochs. Under the standard normal prior, every ``window`` epochs q(X), the inducing inputs and
    the kernels move to the shift and scale of each latent dimension where KL(q(X) || p(X)) is smallest at the
    same likelihood, as the collapsed engine does at each L-BFGS restart: an exact step along directions in
    which first-order steps crawl (the scale of X against the lengthscales). A Gaussian view's
    term is exact in q(X) too (its kernel's psi-statistics), so with only Gaussian views the ELBO has no
    Monte Carlo error; at the optimal q(U) it equals the collapsed bound of :class:`~bayesalign.gp.MRD`
    (Titsias & Lawrence, 2010), which it approaches from below.

    Gaussian views are centred per column (observed entries only; ``output_means_``), their constant
    columns dropped with a warning as :class:`~bayesalign.gp.MRD` drops them (``kept_columns_``); the other
    likelihoods get a learned constant mean per column. A NaN entry is missing: it is left out of
    its view's likelihood. Partial observation: view v observes the entities ``observed[v]`` (one
    latent point per entity, the mechanism of :class:`~bayesalign.gp.MRD`'s ``observed``).

    Parameters
    ----------
    latent_dim : int
        Q.
    num_inducing : int
        M inducing inputs per view (capped at the number of entities).
    likelihood : str, list or dict
        ``"gaussian"``, ``"bernoulli"`` (probit, y in {0, 1}), ``"poisson"`` or ``"negative_binomial"``
        (counts; log link) for every view, or one per view (a list, or a dict view name -> name;
        views not named are Gaussian).
    kernel : str or gpytorch Kernel
        A name for :func:`~bayesalign.gp.make_kernel` (ARD), or a kernel copied for every view; one
        kernel per view. Priors registered on it (and on the likelihoods) enter the ELBO.
    init : {"auto", "collapsed", "pca", "random"}, LatentEmbedding or array [N, Q]
        Initial q(X) means. "collapsed": the collapsed :class:`~bayesalign.gp.MRD` fitted (L-BFGS, its
        defaults) on a random subsample of :data:`~bayesalign.gp.svi.start.COLLAPSED_ENTITIES` entities
        from their PCA start; its kernels, noise variances, inducing inputs and optimal q(U) start the
        stochastic fit, its q(X) the subsample's entities, and the affine map from the PCA start to its
        q(X) means the other entities (:func:`~bayesalign.gp.svi.start.collapsed_start`); for paired,
        complete, Gaussian views under the standard normal prior with a named kernel. "auto" (default):
        "collapsed" where it applies, "pca" elsewhere. "pca" (as :class:`~bayesalign.gp.MRD`): of the
        complete views, or under partial observation on the entities every view observes, carried to
        the others (:func:`~bayesalign.gp.initialisation.partial_latent`; a missing entry starts at its
        column mean).
    init_variance : float
        Initial q(X) variance (smaller than MRD's 0.1: Adam moves it slowly, and a wide q(X) costs the
        sampled bound much early on; measured in benchmarks/RESULTS.md, "SVI engine").
    snr : float
        Initial signal-to-noise ratio of the Gaussian views (noise = column variance / snr).
    latent_prior : "normal", "gp", GraphLaplacianPrior, pyro Distribution or callable
        p(x_n): standard normal; ``"gp"``: each latent dimension a GP over the ``time_index`` given to
        :meth:`fit`, RBF covariance with unit variance and lengthscale ``time_lengthscale`` (it couples
        the entities: an N x N matrix, for sequences of up to a few thousand); a
        :class:`~bayesalign.gp.priors.GraphLaplacianPrior` over the N entities (the Gaussian Markov
        random field N(0, (I + lambda L)^-1) of the collapsed engine's all-rows MAD: its KL in closed form,
        the sparse P mu over every entity at each step, the rest of the term per minibatch,
        :meth:`~bayesalign.gp.svi.SVIMRDModel.graph_log_ratio`); a distribution with event shape (Q,) shared by every
        entity; or a callable ``prior(idx) -> distribution`` with batch shape [B] and event shape [Q]
        for the entity indices ``idx`` [B] (a tensor).
    time_lengthscale : float
        Lengthscale of the ``"gp"`` prior, in the units of ``time_index``.
    batch_size : int
        Entities per SVI step (all entities when larger than N). ``fit`` refuses, with a MemoryError naming the
        view and a batch size that fits, a step whose memory (estimated from the views' shapes:
        :func:`~bayesalign.gp.svi.inputs.step_memory`) and the targets exceed what the device has free.
    max_epochs : int
        Passes over the entities.
    learning_rate, final_lr_fraction : float
        Adam's initial step size, and the fraction of it reached after ``max_epochs`` (exponential decay).
    tol : float
        Converged when the mean ELBO of the last ``window`` epochs differs from that of the ``window``
        before by less than ``tol`` times its magnitude (the estimates are noisy: a window averages
        them); the fit then stops.
    window : int
        Epochs per window of the convergence test.
    num_particles : int
        Samples of X per step.
    natural_gradient_lr : float or None
        Step size of natural-gradient descent on q(u) of the Gaussian views (GPyTorch's ``NGD`` on a
        ``NaturalVariationalDistribution``; Salimbeni, Eleftheriadis & Hensman, 2018), the other
        parameters taking Adam steps; None: Adam on a Cholesky-parameterised q(u) for every view.
        Adam alone moves q(u) of a Gaussian view slowly toward its optimum, which the collapsed bound
        reaches in closed form. A Gaussian view without missing entries shares one q(u) covariance among
        its outputs (:class:`~bayesalign.gp.svi.guide.TiedNaturalVariationalDistribution`): their optimal
        covariances are the same (Titsias, 2009, eq. 10), and a step costs one M x M factor, not D.
    warmup_epochs : int
        Epochs with the likelihoods' parameters (Gaussian noise, negative binomial dispersion) held at
        their initial values, as :class:`~bayesalign.gp.MRD`'s warm-up: otherwise the noise rises to
        explain the data while q(u) is still far from it, and must come back down (GPy issue #286).
        None after the collapsed start, whose noise is fitted.
    jitter : float
        Diagonal jitter of K_uu (GPyTorch's ``jitter_val``), relative to the kernel's initial variance.
    optimizer : {"adam", "lbfgs"}
        ``"adam"`` (default): the stochastic optimisation above, minibatches allowed. ``"lbfgs"``: full
        batch and deterministic, for Gaussian views under the standard normal prior (where the ELBO
        has no Monte Carlo error): every evaluation first sets q(u) of each view to its optimum
        given the rest (one natural-gradient step of size 1, exact for a Gaussian likelihood), then
        L-BFGS (strong Wolfe line search, 30 correction pairs) moves the kernel, likelihood and q(X)
        parameters on the ELBO at that q(u) -- the collapsed bound as a function of them, whose
        gradient it then is (the envelope theorem). ``max_epochs`` and ``warmup_epochs`` count ELBO
        evaluations; it stops when an L-BFGS step changes the ELBO by less than 1e-9 of its size.
    warm_start : bool
        When the estimator is already fitted, :meth:`fit` on the same views continues from its current
        parameters (e.g. after :meth:`load_collapsed`) instead of starting afresh.
    seed : int or None
        Seeds the initialisation, the minibatches and Pyro's samples (the caller's global torch RNG is
        restored afterwards).
    device : str, optional
        "cpu" (default) or "cuda".
    dtype : torch.dtype or str
        float64 (default) or float32.
    progress : bool
        tqdm progress bar with the epoch's mean ELBO.

    Attributes
    ----------
    model_ : SVIMRDModel
        The Pyro model and guide with every parameter.
    view_names_ : tuple of str
    n_entities_ : int
    observed_ : dict view -> array [N_v]
        The entity of every row of each view (``arange`` for paired views).
    start_ : str
        The start that was used ("collapsed", "pca", "random", "embedding" or "array").
    elbo_history_ : array [epochs]
        Mean ELBO estimate per epoch (each step estimates the full-data ELBO); with
        ``optimizer="lbfgs"`` the ELBO at every evaluation, line-search trials included.
    n_epochs_ : int
        Epochs run (evaluations with ``optimizer="lbfgs"``), :meth:`continue_fit`'s included (its history appended).
    converged_ : bool
        Whether the convergence test of the last :meth:`fit` or :meth:`continue_fit` passed within its budget
        (a ConvergenceWarning otherwise). :meth:`save` / :meth:`load`: one model file, no pickle.
    natural_gradient_lr_ : float or None
        The natural-gradient step size at the end of the fit (1 with ``optimizer="lbfgs"``, None without
        natural gradients): ``natural_gradient_lr`` unless a step broke q(u)'s positive definiteness
        (float32 round-off), which undoes that step and halves the size (``natural_gradient_halvings_``
        times, a RuntimeWarning each time).
    entity_means_, entity_variances_ : arrays [N, Q]
        q(X) per entity.
    relevance_ : dict view -> array [Q]
        ARD relevance of each view's kernel (:func:`~bayesalign.gp.ard_relevance`).
    resolution_ : dict view -> array [Q]
        How finely each view resolves each latent dimension, under its own likelihood (the Fisher
        information about the dimension times the points' spread along it; see the property).
    embedding_ : LatentEmbedding
        Per view, the q(X) means and variances of the entities its rows observe; ``shared_dims`` at 0.05.
    noise_variance_ : dict view -> float
        Noise variances of the Gaussian views.
    kept_columns_ : dict view -> bool array [D_v]
        The columns modelled (a Gaussian view's constant columns are not).
    output_means_ : dict view -> array [D_v]
        Column means subtracted from the Gaussian views (zeros for the others).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> t = rng.uniform(-2, 2, size=(60, 1))
    >>> views = {"a": np.sin(t) @ rng.normal(size=(1, 5)) + 0.1 * rng.normal(size=(60, 5)),
    ...          "b": (np.cos(t) @ rng.normal(size=(1, 4)) > 0).astype(float)}
    >>> m = StochasticMRD(latent_dim=2, num_inducing=10, likelihood={"b": "bernoulli"}, max_epochs=20,
    ...                   progress=False, seed=0).fit(views)
    >>> m.entity_means_.shape, sorted(m.relevance_)
    ((60, 2), ['a', 'b'])
    """

    _method = "StochasticMRD"
    _fitted_attribute = "model_"
    #: The state buffers in which NaN marks a missing entry (a model file may hold it there).
    _buffers_with_missing = ("targets_",)

    def __init__(self, latent_dim: int = 5, num_inducing: int = 20, likelihood="gaussian", kernel: str = "rbf",
                 init="auto", init_variance: float = 0.01, snr: float = 100.0, latent_prior="normal",
                 time_lengthscale: float = 1.0, batch_size: int = 256, max_epochs: int = 500,
                 learning_rate: float = 0.05, final_lr_fraction: float = 0.1, tol: float = 1e-4, window: int = 20,
                 num_particles: int = 1, natural_gradient_lr: float | None = 0.1, warmup_epochs: int = 50,
                 jitter: float = 1e-6, warm_start: bool = False, optimizer: str = "adam", seed=None,
                 device=None, dtype=torch.float64, progress: bool = True):
        self.latent_dim = latent_dim
        self.num_inducing = num_inducing
        self.likelihood = likelihood
        self.kernel = kernel
        self.init = init
        self.init_variance = init_variance
        self.snr = snr
        self.latent_prior = latent_prior
        self.time_lengthscale = time_lengthscale
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.learning_rate = learning_rate
        self.final_lr_fraction = final_lr_fraction
        self.tol = tol
        self.window = window
        self.num_particles = num_particles
        self.natural_gradient_lr = natural_gradient_lr
        self.warmup_epochs = warmup_epochs
        self.warm_start = warm_start
        self.optimizer = optimizer
        self.jitter = jitter
        self.seed = seed
        self.device = device
        self.dtype = dtype
        self.progress = progress

    # -- fitting ----------------------------------------------------------------------------------
    def fit(self, views, y=None, observed=None, time_index=None) -> StochasticMRD:
        """Fit to views (Views, AlignmentProblem, dict or list of 2-D arrays; NaN = missing).

        ``observed``: the entity of every row of each view (a dict view -> index array, or a list; None:
        the views are paired, row n of every view is entity n). ``time_index`` [N]: the entities'
        times, for ``latent_prior="gp"``.
        """
        dtype, device = check_params(self)
        names, arrays = views_with_nan(views)
        if self.warm_start and hasattr(self, "model_"):
            shapes = {name: Y.shape[1] for name, Y in zip(names, arrays)}
            if tuple(names) != self.view_names_ or shapes != self.n_features_in_:
                raise ValueError("warm_start: fit must get the same views as the fitted model "
                                 f"({self.n_features_in_}), got {shapes}")
            self._train()
            return self
        likelihoods = likelihood_names(self, names)
        for name, lik, Y in zip(names, likelihoods, arrays):
            check_targets(lik, Y, name)
        if observed is None:  # paired: row n of every view is entity n
            check_paired(names, arrays)
        observed, N = check_observed(observed, names, arrays)
        Q, M = int(self.latent_dim), int(self.num_inducing)
        if N < 2:
            raise ValueError(f"need at least 2 entities, got {N}")
        if M > N:
            warnings.warn(f"num_inducing={M} is more than the {N} entities; using {N}", RuntimeWarning, stacklevel=2)
            M = N
        # Gaussian views centred on their observed entries; the others keep their values (constant mean learned)
        means = [np.nanmean(Y, 0) if lik == "gaussian" else np.zeros(Y.shape[1]) for Y, lik in zip(arrays, likelihoods)]
        kept = [constant_columns_dropped(Y, name) if lik == "gaussian" else np.ones(Y.shape[1], dtype=bool)
                for name, Y, lik in zip(names, arrays, likelihoods)]
        targets = [Y[:, keep] - mu[keep] for Y, mu, keep in zip(arrays, means, kept)]
        check_step_memory(self, names, targets, likelihoods, M, Q, dtype, device)
        start = start_name(self, likelihoods, targets, observed)
        X0 = initial_latent(self, start, names, targets, likelihoods, observed, N, Q)
        S0 = np.full((N, Q), float(self.init_variance))
        if start == "collapsed":  # the caller's torch RNG is left as it was (MRD's kernels draw from it)
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                mrd, subsample, X0, S0 = collapsed_start(names, targets, X0, self, M)
        rng = np.random.default_rng(self.seed)
        Z0 = X0[rng.choice(N, size=M, replace=False)]  # [M, Q]
        variances = [float(np.nanmean(np.square(Y - np.nanmean(Y, 0)))) for Y in targets]

        def tensor(a):
            return torch.as_tensor(np.asarray(a), dtype=dtype, device=device)

        gps, liks = [], []
        for Y, lik, var in zip(targets, likelihoods, variances):
            signal = max(var, 1e-12) if lik == "gaussian" else 1.0
            if isinstance(self.kernel, str):
                kernel = make_kernel(self.kernel, Q, variance=signal, dtype=dtype)
            elif isinstance(self.kernel, gpytorch.kernels.Kernel):
                kernel = copy.deepcopy(self.kernel).to(dtype=dtype)  # the caller's module is never changed
            else:
                raise TypeError(f"kernel must be a name for make_kernel or a gpytorch Kernel, got {self.kernel!r}")
            natural = lik == "gaussian" and self.natural_gradient_lr is not None
            gps.append(ViewGP(tensor(Z0), Y.shape[1], kernel, constant_mean=lik != "gaussian",
                              jitter=float(self.jitter) * signal, natural=natural,
                              tied=natural and not np.isnan(Y).any()))
            noise = max(var, 1e-12) / self.snr
            liks.append(make_likelihood(lik, noise=noise, noise_floor=min(1e-6 * max(var, 1e-12), 0.1 * noise)))
        rows = []
        for r in observed:
            if r is None:
                rows.append(None)
                continue
            if np.unique(r).size != r.size:
                raise ValueError("an entity observed twice by one view is not supported by StochasticMRD")
            lookup = np.full(N, -1, dtype=np.int64)
            lookup[r] = np.arange(r.size)
            rows.append(torch.as_tensor(lookup, device=device))
        prior, time_cov, graph = None, None, None
        if isinstance(self.latent_prior, str) and self.latent_prior == "gp":
            time_cov = time_covariance(self, time_index, N, dtype, device)
        elif isinstance(self.latent_prior, GraphLaplacianPrior):
            graph = self.latent_prior
            graph.check(N)
        elif not isinstance(self.latent_prior, str):
            prior = self.latent_prior
        self.model_ = SVIMRDModel(gps, liks, [tensor(Y) for Y in targets], rows,
                                  LatentPosterior(tensor(X0), tensor(S0)),
                                  latent_prior=prior, time_covariance=time_cov, graph_prior=graph).to(
            device=device, dtype=dtype)
        self.view_names_ = tuple(names)
        self.likelihoods_ = dict(zip(names, likelihoods))
        self.n_entities_ = N
        self._entity_of = observed  # per view the entity of each row, None: paired
        self.output_means_ = dict(zip(names, means))
        self.kept_columns_ = dict(zip(names, kept))
        self.n_features_in_ = {name: Y.shape[1] for name, Y in zip(names, arrays)}
        self.start_ = start
        if start == "collapsed":
            load_collapsed_state(self.model_, mrd, entities=subsample)
        self._train()
        return self

    def _train(self) -> None:
        train(self)  # :func:`bayesalign.gp.svi.training.train`

    def continue_fit(self, max_epochs: int | None = None, latent_prior=None) -> StochasticMRD:
        """Go on maximising the ELBO from the fitted q(u), q(X), kernels and noise for ``max_epochs`` more epochs
        (default ``max_epochs``; evaluations with ``optimizer="lbfgs"``), the optimiser restarted and no warm-up,
        with the fit's stopping rule (``converged_``; a ConvergenceWarning when it did not converge); the
        history goes on in ``elbo_history_``. ``latent_prior`` (a StandardNormalPrior or GraphLaplacianPrior of
        :mod:`bayesalign.gp.priors` over the same entities) replaces p(X) first. Works on a loaded model too
        (:func:`bayesalign.gp.svi.continuation.continue_training`)."""
        continue_training(self, max_epochs, latent_prior)
        return self

    def grow_inducing(self, num_inducing: int, max_epochs: int | None = None) -> StochasticMRD:
        """Add inducing inputs up to ``num_inducing`` per view by farthest-point selection on the q(X) means (as
        :meth:`bayesalign.gp.MRD.grow_inducing`), each new inducing output at its conditional prior given the
        old ones so that the ELBO is unchanged by the growth
        (:func:`bayesalign.gp.svi.continuation.grow_view_gp`), then :meth:`continue_fit` for ``max_epochs``.
        Capped at the number of observed entities, with a warning; ``num_inducing`` becomes the new size."""
        grow_inducing_inputs(self, num_inducing)
        return self.continue_fit(max_epochs)

    def _normalise_latent(self) -> None:
        normalise_latent(self)  # :func:`bayesalign.gp.svi.training.normalise_latent`

    # -- results ----------------------------------------------------------------------------------
    def elbo(self, num_samples: int = 16, batch_size: int | None = None, seed=0) -> float:
        """The ELBO on all entities: exact for Gaussian views; the non-Gaussian views' terms (and a GP prior's
        KL, where Pyro has no closed form) averaged over ``num_samples`` draws of X (an unbiased Monte Carlo
        estimate, standard error falling as ``1 / sqrt(num_samples)``). ``batch_size``: entities per chunk
        (memory only; the value is the same)."""
        self._check_fitted()
        model = self.model_
        N = self.n_entities_
        B = N if batch_size is None else min(int(batch_size), N)
        device = model.q_x.mean.device
        total = 0.0
        with torch.no_grad(), torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(int(seed))
            for start in range(0, N, B):
                idx = torch.arange(start, min(start + B, N), device=device)
                # a chunk's plate is scaled by N / B_c; its global terms are weighted B_c / N so they add up once
                total += -float(negative_elbo(model, idx, num_samples, scale=idx.shape[0] / N))
        return total

    def collapsed_elbo(self) -> float:
        """The collapsed bound at the fitted parameters (:func:`bayesalign.gp.svi.training.collapsed_elbo`)."""
        self._check_fitted()
        return collapsed_elbo(self)

    def load_collapsed(self, mrd) -> StochasticMRD:
        """Set q(X), the kernels, noise variances, inducing inputs and q(U) to those of a fitted collapsed
        :class:`~bayesalign.gp.MRD` on the same Gaussian views, q(U) at the collapsed bound's optimum
        (Titsias, 2009, eq. 10), whitened: mean ``L' alpha``, covariance ``B^-1 = I - L' W L``.

        At that point the ELBO here equals the collapsed bound (Titsias & Lawrence, 2010: the collapsed
        bound is the uncollapsed one maximised in q(U)), up to the Monte Carlo error of sampling X and
        the jitter GPyTorch adds to k(x, x): a check of both engines against each other.
        """
        self._check_fitted()
        if tuple(mrd.view_names_) != self.view_names_ or any(n != "gaussian" for n in self.likelihoods_.values()):
            raise ValueError("load_collapsed needs the same views, all Gaussian, as the collapsed MRD")
        if any(r is not None for r in self._entity_of) or any(mrd.module_.observed(v) is not None
                                                              for v in range(len(self.view_names_))):
            raise ValueError("load_collapsed supports paired views only (observed=None in both models)")
        if mrd.entity_means_.shape[0] != self.n_entities_:
            raise ValueError(f"load_collapsed needs a collapsed MRD of the same {self.n_entities_} entities, got "
                             f"{mrd.entity_means_.shape[0]}")
        load_collapsed_state(self.model_, mrd)
        return self

    @property
    def entity_means_(self) -> np.ndarray:
        """q(X) means [n_entities, Q]."""
        self._check_fitted()
        return self.model_.q_x.mean.detach().cpu().numpy()

    @property
    def entity_variances_(self) -> np.ndarray:
        """q(X) diagonal variances [n_entities, Q]."""
        self._check_fitted()
        return self.model_.q_x.variance.detach().cpu().numpy()

    @property
    def observed_(self) -> dict[str, np.ndarray]:
        """Per view the entity index [N_v] of each of its rows (``arange`` for a paired fit)."""
        self._check_fitted()
        return {name: np.arange(self.n_entities_) if rows is None else rows
                for name, rows in zip(self.view_names_, self._entity_of)}

    @property
    def relevance_(self) -> dict[str, np.ndarray]:
        """ARD relevance [Q] per view (variance / lengthscale^2 for RBF; :func:`~bayesalign.gp.ard_relevance`)."""
        self._check_fitted()
        Q = int(self.latent_dim)
        return {name: ard_relevance(gp.covar_module, Q).detach().cpu().numpy()
                for name, gp in zip(self.view_names_, self.model_.gps)}

    @property
    def resolution_(self) -> dict[str, np.ndarray]:
        r"""How finely each view's data pin down each latent dimension: [Q] per view, unit-free.

        .. math:: r_{vq} = \operatorname{Var}_n(\mu_{nq}) \, \frac{1}{N_v} \sum_{n=1}^{N_v} \sum_{d\,
                  \text{observed}} I_v(\bar f_{vd}(\mu_n)) \Big(\frac{\partial \bar f_{vd}(\mu_n)}{\partial
                  x_q}\Big)^2,

        :math:`\bar f_v` the predictive mean of view v's GP under its q(u), :math:`\mu_n` the q(X)
        means of the entities view v observes and :math:`I_v(f)` the Fisher information of one
        observation about f under the view's likelihood
        (:func:`~bayesalign.gp.svi.likelihoods.fisher_information`; a missing entry carries none).
        With a Gaussian likelihood, :math:`I_v = 1 / \sigma_v^2`, this is
        :attr:`bayesalign.gp.MRD.resolution_` (equal at the collapsed optimum of q(u): tested through
        :meth:`load_collapsed`); for a binary or count view it is the same quantity, the Fisher
        information the view's observations carry about :math:`x_q` at the posterior means, times
        the spread of the points along q. :math:`r_{vq} > 1`: view v resolves dimension q more
        finely than the points are spread along it. The derivatives are exact (reverse mode, one
        pass per output column).
        """
        return view_resolution(self)  # :func:`bayesalign.gp.svi.inference.view_resolution`

    @property
    def noise_variance_(self) -> dict[str, float]:
        self._check_fitted()
        pairs = zip(self.view_names_, self.model_.likelihoods)
        return {name: float(lik.noise.detach().reshape(())) for name, lik in pairs
                if self.likelihoods_[name] == "gaussian"}

    def infer(self, view, Y_new, max_iter: int = 200, num_samples: int = 64, seed=0):
        """q(x*) = N(mean, diag(variance)) [n, Q] for new rows ``Y_new`` [n, D_v] of one view (NaN: missing),
        the model fixed: :func:`bayesalign.gp.svi.inference.infer_rows`."""
        return infer_rows(self, view, Y_new, max_iter=max_iter, num_samples=num_samples, seed=seed)


register_model_class(StochasticMRD, write=write_stochastic, read=read_stochastic)
