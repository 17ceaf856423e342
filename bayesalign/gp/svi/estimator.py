"""StochasticMRD: MRD as a Pyro model over GPyTorch sparse variational GPs, fitted by SVI with minibatches.

See :mod:`bayesalign.gp.svi.model` for the generative model and its bound. (About 750 lines, one
class: input checks, the training loops (stochastic Adam, full-batch L-BFGS), inference of new rows and the
fitted attributes all work on the same Pyro model and guide; the model and guide themselves live
in their own modules.)
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Mapping

import gpytorch
import numpy as np
import torch
from gpytorch.optim import NGD
from linear_operator.utils.errors import NotPSDError
from pyro import poutine
from pyro.infer import TraceMeanField_ELBO
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning

from ...data import AlignmentProblem, LatentEmbedding, Views
from ...data.views import InputTypeError, check_view
from ..inference import nearest_observed_rows
from ..initialisation import check_observed, check_paired, entity_means_from_embedding, init_latent, partial_latent
from ..kernels import (
    ard_relevance,
    make_kernel,
    normalise_latent_symmetries,
    relevant_dimensions,
    shared_dimensions,
)
from ..module import resolve_dtype
from ..priors import GraphLaplacianPrior
from .guide import LatentPosterior, ViewGP
from .likelihoods import LIKELIHOODS, check_targets, expected_log_likelihood, make_likelihood
from .model import SVIMRDModel

__all__ = ["OPTIMIZERS", "StochasticMRD"]

#: ``optimizer`` of :class:`StochasticMRD`.
OPTIMIZERS = ("adam", "lbfgs")
#: How often a natural-gradient step that broke q(u)'s positive definiteness is undone (its size halved each
#: time) before the fit gives up with a FloatingPointError.
MAX_NATURAL_HALVINGS = 10
#: Adam's second-moment decay in the stochastic fit (a memory of about 100 steps; see :class:`StochasticMRD`).
ADAM_BETA2 = 0.99


def _views_with_nan(data) -> tuple[list[str], list[np.ndarray]]:
    """Names and float64 copies of the views (:func:`~bayesalign.data.views.check_view`): NaN is a missing entry."""
    if isinstance(data, AlignmentProblem):
        data = data.views
    if isinstance(data, Views):
        pairs = [(name, data[name]) for name in data.names]
    elif isinstance(data, Mapping):
        pairs = list(data.items())
    elif isinstance(data, (list, tuple)):
        pairs = [(f"view{i}", a) for i, a in enumerate(data)]
    else:
        raise TypeError("expected Views, an AlignmentProblem, or a dict / list of 2-D arrays, got "
                        f"{type(data).__name__}")
    if len(pairs) < 1:
        raise ValueError("no views given")
    names, arrays = [], []
    for name, a in pairs:
        if not isinstance(name, str) or not name:
            raise TypeError(f"view names must be non-empty strings, got {name!r}")
        names.append(name)
        arrays.append(np.array(check_view(a, name, allow_missing=True)))  # a writable float64 copy
    return names, arrays


class StochasticMRD(BaseEstimator):
    r"""MRD with per-view likelihoods, missing entries, latent priors and partial observation, by SVI.

    The model of :class:`bayesalign.gp.MRD` (Damianou, Ek, Titsias & Lawrence, 2012) written in Pyro
    (:mod:`bayesalign.gp.svi.model`): a latent point per entity with a prior, one sparse variational
    GP per view (GPyTorch ``ApproximateGP``, whitened ``VariationalStrategy``, a batch of
    ``CholeskyVariationalDistribution`` over the view's outputs, one ARD kernel per view from
    :func:`bayesalign.gp.make_kernel`) and a likelihood per view. The uncollapsed bound

        ELBO = sum_v E_q(X) E_q(f) [log p_v(Y_v | F_v)] - sum_v KL(q(U_v) || p(U_v)) - KL(q(X) || p(X))

    (Hensman, Fusi & Lawrence, 2013) is maximised by stochastic variational inference: Adam on
    Pyro's ``TraceMeanField_ELBO`` (analytic KL terms; ``num_particles`` reparameterised draws of X per step for
    the non-Gaussian views), natural-gradient steps on q(U) of the Gaussian views, minibatches of entities through
    ``pyro.plate`` subsampling, the learning rate decayed
    exponentially from ``learning_rate`` to ``learning_rate * final_lr_fraction``. Adam's second-moment
    average has a memory of about 100 steps (beta_2 = 0.99, not torch's 0.999): the first epochs' gradients are
    orders of magnitude larger than later ones, and a 1,000-step memory of them shrinks every step for thousands
    of epochs. Under the standard normal prior, every ``NORMALISE_EVERY`` steps q(X), the inducing inputs and
    the kernels move to the shift and scale of each latent dimension where KL(q(X) || p(X)) is smallest at the
    same likelihood, as the collapsed engine does at each L-BFGS restart: an exact step along directions in
    which first-order steps crawl (the scale of X against the lengthscales). A Gaussian view's
    term is exact in q(X) too (its kernel's psi-statistics), so with only Gaussian views the ELBO has no
    Monte Carlo error; at the optimal q(U) it equals the collapsed bound of :class:`~bayesalign.gp.MRD`
    (Titsias & Lawrence, 2010), which it approaches from below.

    Gaussian views are centred per column (observed entries only; ``output_means_``); the other
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
    init : {"pca", "random"}, LatentEmbedding or array [N, Q]
        Initial q(X) means (as :class:`~bayesalign.gp.MRD`: "pca" of the complete views, or under partial
        observation on the entities every view observes, carried to the others,
        :func:`~bayesalign.gp.initialisation.partial_latent`; a missing entry starts at its column mean).
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
        Entities per SVI step (all entities when larger than N).
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
    observed_ : list of (array [N_v] or None)
        The entity of every row of each view (None: row n is entity n).
    elbo_history_ : array [epochs]
        Mean ELBO estimate per epoch (each step estimates the full-data ELBO); with
        ``optimizer="lbfgs"`` the ELBO at every evaluation, line-search trials included.
    n_epochs_ : int
        Epochs run (evaluations with ``optimizer="lbfgs"``).
    converged_ : bool
        Whether the convergence test passed before ``max_epochs`` (a ConvergenceWarning otherwise).
    natural_gradient_lr_ : float or None
        The natural-gradient step size at the end of the fit (1 with ``optimizer="lbfgs"``, None without
        natural gradients): ``natural_gradient_lr`` unless a step broke q(u)'s positive definiteness
        (float32 round-off), which undoes that step and halves the size (``natural_gradient_halvings_``
        times, a RuntimeWarning each time).
    latent_mean_, latent_variance_ : arrays [N, Q]
        q(X) per entity.
    relevance_ : dict view -> array [Q]
        ARD relevance of each view's kernel (:func:`~bayesalign.gp.ard_relevance`).
    resolution_ : dict view -> array [Q]
        How finely each view resolves each latent dimension, under its own likelihood (the Fisher
        information about the dimension times the points' spread along it; see the property).
    latent_ : LatentEmbedding
        Per view, the q(X) means and variances of the entities its rows observe; ``shared_dims`` at 0.05.
    noise_variance_ : dict view -> float
        Noise variances of the Gaussian views.
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
    >>> m.latent_mean_.shape, sorted(m.relevance_)
    ((60, 2), ['a', 'b'])
    """

    _method = "StochasticMRD"
    #: Optimiser steps between the exact latent normalisations of the Adam path (standard normal prior only; after
    #: the warm-up epochs).
    NORMALISE_EVERY = 100

    def __init__(self, latent_dim: int = 5, num_inducing: int = 20, likelihood="gaussian", kernel: str = "rbf",
                 init="pca", init_variance: float = 0.01, snr: float = 100.0, latent_prior="normal",
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

    # -- validation -------------------------------------------------------------------------------
    def _check_params(self):
        for name in ("latent_dim", "num_inducing", "batch_size", "max_epochs", "window", "num_particles",
                     "warmup_epochs"):
            value = getattr(self, name)
            low = 0 if name in ("max_epochs", "warmup_epochs") else 1
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        for name in ("init_variance", "snr", "learning_rate", "time_lengthscale", "jitter"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        if not 0 < self.final_lr_fraction <= 1:
            raise ValueError(f"final_lr_fraction must be in (0, 1], got {self.final_lr_fraction!r}")
        if not self.tol >= 0:
            raise ValueError(f"tol must be >= 0, got {self.tol!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        prior = self.latent_prior
        if not (prior in ("normal", "gp") if isinstance(prior, str) else
                isinstance(prior, (torch.distributions.Distribution, GraphLaplacianPrior)) or callable(prior)):
            raise ValueError(f"latent_prior must be 'normal', 'gp', a GraphLaplacianPrior, a pyro distribution or a "
                             f"callable, got {prior!r}")
        if isinstance(prior, torch.distributions.Distribution) and tuple(prior.event_shape) != (int(self.latent_dim),):
            raise ValueError(f"latent_prior must have event shape ({self.latent_dim},) (one latent point), got "
                             f"{tuple(prior.event_shape)}; use .to_event(1) on a per-dimension distribution")
        return resolve_dtype(self.dtype), torch.device(self.device if self.device is not None else "cpu")

    def _likelihood_names(self, names: list[str]) -> list[str]:
        spec = self.likelihood
        if isinstance(spec, str):
            out = [spec] * len(names)
        elif isinstance(spec, Mapping):
            unknown = [k for k in spec if k not in names]
            if unknown:
                raise ValueError(f"likelihood names views {unknown} that are not among the views {names}")
            out = [spec.get(name, "gaussian") for name in names]
        elif isinstance(spec, (list, tuple)) and len(spec) == len(names):
            out = list(spec)
        else:
            raise ValueError(f"likelihood must be a name, a dict view -> name or a list of {len(names)} names, "
                             f"got {spec!r}")
        for name, lik in zip(names, out):
            if lik not in LIKELIHOODS:
                raise ValueError(f"view {name!r}: unknown likelihood {lik!r}; choose from {LIKELIHOODS}")
        return out

    # -- fitting ----------------------------------------------------------------------------------
    def fit(self, views, y=None, observed=None, time_index=None) -> StochasticMRD:
        """Fit to views (Views, AlignmentProblem, dict or list of 2-D arrays; NaN = missing).

        ``observed``: the entity of every row of each view (a dict view -> index array, or a list; None:
        the views are paired, row n of every view is entity n). ``time_index`` [N]: the entities'
        times, for ``latent_prior="gp"``.
        """
        dtype, device = self._check_params()
        names, arrays = _views_with_nan(views)
        if self.warm_start and hasattr(self, "model_"):
            shapes = {name: Y.shape[1] for name, Y in zip(names, arrays)}
            if tuple(names) != self.view_names_ or shapes != self.n_features_in_:
                raise ValueError("warm_start: fit must get the same views as the fitted model "
                                 f"({self.n_features_in_}), got {shapes}")
            self._train()
            return self
        likelihoods = self._likelihood_names(names)
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
        targets = [Y - mu for Y, mu in zip(arrays, means)]
        X0 = self._initial_latent(names, targets, likelihoods, observed, N, Q)
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
            time_cov = self._time_covariance(time_index, N, dtype, device)
        elif isinstance(self.latent_prior, GraphLaplacianPrior):
            graph = self.latent_prior
            graph.check(N)
        elif not isinstance(self.latent_prior, str):
            prior = self.latent_prior
        self.model_ = SVIMRDModel(gps, liks, [tensor(Y) for Y in targets], rows,
                                  LatentPosterior(tensor(X0), torch.full((N, Q), float(self.init_variance),
                                                                         dtype=dtype, device=device)),
                                  latent_prior=prior, time_covariance=time_cov, graph_prior=graph).to(
            device=device, dtype=dtype)
        self.view_names_ = tuple(names)
        self.likelihoods_ = dict(zip(names, likelihoods))
        self.n_entities_ = N
        self.observed_ = observed
        self.output_means_ = dict(zip(names, means))
        self.n_features_in_ = {name: Y.shape[1] for name, Y in zip(names, arrays)}
        self._train()
        return self

    def _initial_latent(self, names, targets, likelihoods, observed, N, Q) -> np.ndarray:
        init = self.init
        if isinstance(init, LatentEmbedding) and any(r is not None for r in observed):
            return entity_means_from_embedding(init, names, observed, N, Q)  # each entity: the mean of its rows
        if not isinstance(init, str) or init == "random":
            return init_latent(init, names, targets, Q, self.seed, n_rows=N)
        if init != "pca":
            raise ValueError(f"init must be 'pca', 'random', a LatentEmbedding or an array, got {init!r}")
        blocks = []
        for Y, lik in zip(targets, likelihoods):
            Y = np.log1p(Y) if lik in ("poisson", "negative_binomial") else Y  # counts on a log scale
            Y = Y - np.nanmean(Y, 0)
            blocks.append(np.where(np.isnan(Y), 0.0, Y))  # a missing entry starts at its column mean
        if any(r is not None for r in observed):  # learned on the entities every view observes, as MRD's
            return partial_latent("pca", names, blocks, observed, N, Q, self.seed)
        return init_latent("pca", names, blocks, Q, self.seed, n_rows=N)

    def _time_covariance(self, time_index, N, dtype, device) -> torch.Tensor:
        if time_index is None:
            raise ValueError("latent_prior='gp' needs fit(..., time_index=[N times])")
        t = np.asarray(time_index, dtype=np.float64).reshape(-1)
        if t.shape[0] != N or not np.isfinite(t).all():
            raise ValueError(f"time_index must hold {N} finite times (one per entity), got shape {t.shape}")
        # k(t, t') = exp(-(t - t')^2 / 2 l^2) + 1e-6 on the diagonal: dense N x N (the prior couples all entities)
        diff = (t[:, None] - t[None, :]) / float(self.time_lengthscale)
        return torch.as_tensor(np.exp(-0.5 * diff ** 2) + 1e-6 * np.eye(N), dtype=dtype, device=device)

    def _train(self) -> None:
        if self.optimizer == "lbfgs":
            device = self.model_.q_x.mean.device
            # Pyro's guide draws X (unused by the exact Gaussian terms) from a forked RNG: the caller's stays as it was
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                return self._train_lbfgs()
        from tqdm.auto import tqdm

        model = self.model_
        N = self.n_entities_
        B = min(int(self.batch_size), N)
        steps = math.ceil(N / B)
        epochs = int(self.max_epochs)
        loss_fn = TraceMeanField_ELBO(num_particles=int(self.num_particles), vectorize_particles=False)
        natural = [p for name, p in model.named_parameters() if "natural_" in name]
        noise = [p for name, p in model.named_parameters() if name.startswith("likelihoods.")]
        params = [p for name, p in model.named_parameters() if "natural_" not in name and
                  not name.startswith("likelihoods.")]
        warmup = int(self.warmup_epochs)
        # the likelihood's parameters (the noise) held for the warm-up: lr 0 in their group until then
        optimiser = torch.optim.Adam([{"params": params}, {"params": noise, "lr": 0.0 if warmup else
                                                           float(self.learning_rate)}], lr=float(self.learning_rate),
                                     betas=(0.9, ADAM_BETA2))
        # the loss is the ELBO itself, not divided by N as GPyTorch's VariationalELBO: num_data=1
        ngd = NGD(natural, num_data=1, lr=float(self.natural_gradient_lr)) if natural else None
        gamma = float(self.final_lr_fraction) ** (1.0 / max(epochs, 1))
        schedule = torch.optim.lr_scheduler.ExponentialLR(optimiser, gamma=gamma)
        device = model.q_x.mean.device
        history, converged = [], False
        w = int(self.window)
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(0 if self.seed is None else int(np.random.default_rng(self.seed).integers(2**31)))
            generator = torch.Generator().manual_seed(int(torch.randint(2**31, ()).item()))
            bar = tqdm(range(epochs), desc=self._method, disable=not self.progress, leave=False)
            before_step = None  # q(u)'s natural parameters before the last natural-gradient step
            self.natural_gradient_halvings_ = 0
            n_steps = 0  # optimiser steps so far
            for _ in bar:
                order = torch.randperm(N, generator=generator).to(device)
                total = 0.0
                for s in range(steps):
                    idx = order[s * B:(s + 1) * B]
                    while True:
                        optimiser.zero_grad(set_to_none=True)
                        if ngd is not None:
                            ngd.zero_grad(set_to_none=True)
                        try:
                            loss = loss_fn.differentiable_loss(model.model, model.guide, idx)
                            break
                        except NotPSDError as exc:
                            self._undo_natural_step(ngd, natural, before_step, len(history) + 1, exc)
                            before_step = None
                    if not torch.isfinite(loss):
                        raise FloatingPointError(f"the ELBO became {loss.item()} at epoch {len(history) + 1}; "
                                                 "lower learning_rate or use float64")
                    loss.backward()
                    optimiser.step()
                    if ngd is not None:
                        before_step = [p.detach().clone() for p in natural]
                        ngd.step()
                    total += -loss.item()
                    n_steps += 1
                    if len(history) >= warmup and n_steps % self.NORMALISE_EVERY == 0:
                        self._normalise_latent()  # exact; a no-op under other priors
                history.append(total / steps)
                schedule.step()
                if len(history) == warmup:
                    optimiser.param_groups[1]["lr"] = optimiser.param_groups[0]["lr"]
                bar.set_postfix(elbo=f"{history[-1]:.4g}")
                if len(history) >= warmup + 2 * w:
                    last, before = np.mean(history[-w:]), np.mean(history[-2 * w:-w])
                    if abs(last - before) <= self.tol * abs(last):
                        converged = True
                        break
            bar.close()
        self.natural_gradient_lr_ = None if ngd is None else float(ngd.param_groups[0]["lr"])
        self.elbo_history_ = np.asarray(history)
        self.n_epochs_ = len(history)
        self.converged_ = converged
        if not converged:
            warnings.warn(f"{self._method} did not converge in {epochs} epochs: the mean ELBO of the last {w} epochs "
                          f"still moved by more than tol={self.tol} relative to the {w} before; increase max_epochs",
                          ConvergenceWarning, stacklevel=3)

    def _undo_natural_step(self, ngd, natural, before_step, epoch: int, exc: Exception) -> None:
        """q(u) lost positive definiteness after a natural-gradient step (its precision, rounded in float32,
        is no longer positive definite): restore q(u) from before that step and halve the step size for the
        rest of the fit (``natural_gradient_lr_``), at most :data:`MAX_NATURAL_HALVINGS` times; otherwise
        (no step to undo, or too many halvings) raise a FloatingPointError with the remedies."""
        if ngd is None or before_step is None or self.natural_gradient_halvings_ >= MAX_NATURAL_HALVINGS:
            raise FloatingPointError(
                f"q(u) lost positive definiteness at epoch {epoch} (its natural parameters after a natural-gradient "
                f"step, in {self.model_.q_x.mean.dtype}; step size halved {self.natural_gradient_halvings_} times): "
                f"use dtype=torch.float64 or a smaller natural_gradient_lr (now {self.natural_gradient_lr})") from exc
        with torch.no_grad():
            for p, saved in zip(natural, before_step):
                p.copy_(saved)
        for group in ngd.param_groups:
            group["lr"] *= 0.5
        self.natural_gradient_halvings_ += 1
        warnings.warn(f"{self._method}: q(u) lost positive definiteness after a natural-gradient step at epoch "
                      f"{epoch} (in {self.model_.q_x.mean.dtype}); the step was undone and natural_gradient_lr halved "
                      f"to {ngd.param_groups[0]['lr']:.4g} for the rest of the fit (natural_gradient_lr_)",
                      RuntimeWarning, stacklevel=4)

    def _train_lbfgs(self) -> None:
        """Full-batch L-BFGS on the ELBO with q(u) at its optimum at every evaluation (``optimizer="lbfgs"``)."""
        from tqdm.auto import tqdm

        model = self.model_
        N = self.n_entities_
        why = []
        if any(lik != "gaussian" for lik in self.likelihoods_.values()):
            why.append("every view Gaussian (the other likelihoods' terms are Monte Carlo estimates)")
        if not (isinstance(self.latent_prior, GraphLaplacianPrior) or
                isinstance(self.latent_prior, str) and self.latent_prior == "normal"):
            why.append("latent_prior='normal' or a GraphLaplacianPrior (the KL of the others may be a Monte Carlo "
                       "estimate)")
        if self.natural_gradient_lr is None:
            why.append("natural-gradient q(u) (natural_gradient_lr not None)")
        if int(self.batch_size) < N:
            why.append(f"batch_size >= the {N} entities (full batch)")
        if why:
            raise ValueError("optimizer='lbfgs' needs a deterministic full-batch ELBO: " + "; ".join(why))
        loss_fn = TraceMeanField_ELBO(num_particles=1, vectorize_particles=False)
        natural = [p for name, p in model.named_parameters() if "natural_" in name]
        noise = [p for name, p in model.named_parameters() if name.startswith("likelihoods.")]
        params = [p for name, p in model.named_parameters() if "natural_" not in name and
                  not name.startswith("likelihoods.")]
        ngd = NGD(natural, num_data=1, lr=1.0)  # one step of size 1: the optimal q(u) of a Gaussian view
        idx = torch.arange(N, device=model.q_x.mean.device)
        history: list[float] = []
        budget = int(self.max_epochs)
        bar = tqdm(total=budget, desc=self._method, disable=not self.progress, leave=False)

        def negative_elbo():
            try:
                ngd.zero_grad(set_to_none=True)
                loss_fn.differentiable_loss(model.model, model.guide, idx).backward()
                ngd.step()  # q(u) at its optimum given the other parameters
                for p in params + noise:
                    p.grad = None
                loss = loss_fn.differentiable_loss(model.model, model.guide, idx)
            except NotPSDError as exc:
                raise FloatingPointError(f"q(u) lost positive definiteness at evaluation {len(history) + 1} (in "
                                         f"{model.q_x.mean.dtype}): use dtype=torch.float64") from exc
            if not torch.isfinite(loss):
                raise FloatingPointError(f"the ELBO became {loss.item()} at evaluation {len(history) + 1}; "
                                         "use float64 or a smaller init_variance")
            loss.backward()
            history.append(-loss.item())
            bar.update()
            bar.set_postfix(elbo=f"{history[-1]:.6g}")
            return loss

        # torch's tolerance on the change of the loss is absolute: 1e-9 of the ELBO's size at the start
        tolerance = 1e-9 * max(abs(negative_elbo().item()), 1.0) if budget else 0.0
        converged = False
        warmup = min(int(self.warmup_epochs), budget - 1) if budget else 0
        # the likelihoods' parameters (the noise) held for the warm-up, as MRD's warm-up; L-BFGS restarted with
        # a fresh memory whenever it stops early (a stale curvature pair can give a non-descent direction),
        # until a restart no longer improves the ELBO by more than the tolerance
        for group, end in ((params, 1 + warmup), (params + noise, budget)):
            while end - len(history) > 0:
                if group is not params:
                    self._normalise_latent()  # the exact step along the likelihood's flat directions
                    negative_elbo()
                start, before = len(history), max(history)
                optimiser = torch.optim.LBFGS(group, lr=1.0, max_iter=end - start, max_eval=end - start,
                                              history_size=30, line_search_fn="strong_wolfe", tolerance_grad=1e-12,
                                              tolerance_change=tolerance)
                optimiser.step(negative_elbo)
                if group is params:
                    break  # the warm-up is a fixed number of evaluations
                if max(history[start:], default=before) - before <= tolerance:
                    converged = True
                    break
        bar.close()
        if budget:  # q(u) at its optimum for the final parameters (the last evaluation may be a line-search trial)
            ngd.zero_grad(set_to_none=True)
            loss_fn.differentiable_loss(model.model, model.guide, idx).backward()
            ngd.step()
        for p in model.parameters():
            p.grad = None
        self.natural_gradient_lr_, self.natural_gradient_halvings_ = 1.0, 0  # q(u) set to its optimum, never halved
        self.elbo_history_ = np.asarray(history)
        self.n_epochs_ = len(history)
        self.converged_ = converged
        if not converged:
            warnings.warn(f"{self._method} (optimizer='lbfgs') stopped at max_epochs={budget} ELBO evaluations before "
                          "L-BFGS converged; increase max_epochs", ConvergenceWarning, stacklevel=3)

    def _normalise_latent(self) -> None:
        """Shift and scale each latent dimension (with the inducing inputs and the kernels) to where the KL to
        N(0, I) is smallest at the same likelihood (:func:`~bayesalign.gp.kernels.normalise_latent_symmetries`;
        the whitened q(u) stays valid since K_uu is unchanged). Only under the standard normal prior and with no
        registered kernel prior (both would change); as the collapsed engine does at every L-BFGS restart."""
        model = self.model_
        if not (isinstance(self.latent_prior, str) and self.latent_prior == "normal"):
            return
        if any(True for gp in model.gps for _ in gp.covar_module.named_priors()):
            return
        with torch.no_grad():
            mu, S = model.q_x.mean, model.q_x.variance
            moved = normalise_latent_symmetries([gp.covar_module for gp in model.gps], mu, S)
            if moved is None:
                return
            shift, scale = moved
            model.q_x.mean.copy_((mu - shift) * scale)
            model.q_x.variance = S * scale.square()
            for gp in model.gps:
                Z = gp.variational_strategy.inducing_points
                Z.copy_((Z - shift) * scale)

    # -- results ----------------------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "model_"):
            raise RuntimeError(f"this {self._method} is not fitted yet; call fit first")

    def elbo(self, num_samples: int = 16, batch_size: int | None = None, seed=0) -> float:
        """The ELBO on all entities: exact for Gaussian views; the non-Gaussian views' terms (and a GP prior's
        KL, where Pyro has no closed form) averaged over ``num_samples`` draws of X (an unbiased Monte Carlo
        estimate, standard error falling as ``1 / sqrt(num_samples)``). ``batch_size``: entities per chunk
        (memory only; the value is the same)."""
        self._check_fitted()
        model = self.model_
        N = self.n_entities_
        B = N if batch_size is None else min(int(batch_size), N)
        loss_fn = TraceMeanField_ELBO(num_particles=int(num_samples), vectorize_particles=False)
        device = model.q_x.mean.device
        total = 0.0
        with torch.no_grad(), torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(int(seed))
            for start in range(0, N, B):
                idx = torch.arange(start, min(start + B, N), device=device)
                # a chunk's plate is scaled by N / B_c; its global terms are weighted B_c / N so they add up once
                scaled = poutine.scale(scale=idx.shape[0] / N)
                total += -float(loss_fn.differentiable_loss(scaled(model.model), scaled(model.guide), idx))
        return total

    def load_collapsed(self, mrd) -> StochasticMRD:
        """Set q(X), the kernels, noise variances, inducing inputs and q(U) to those of a fitted collapsed
        :class:`~bayesalign.gp.MRD` on the same Gaussian views, q(U) at the collapsed bound's optimum
        (Titsias, 2009, eq. 10), whitened: mean ``L' alpha``, covariance ``B^-1 = I - L' W L``.

        At that point the ELBO here equals the collapsed bound (Titsias & Lawrence, 2010: the collapsed
        bound is the uncollapsed one maximised in q(U)), up to the Monte Carlo error of sampling X and
        the jitter GPyTorch adds to k(x, x): a check of both engines against each other.
        """
        self._check_fitted()
        source = mrd.module_
        if tuple(mrd.view_names_) != self.view_names_ or any(n != "gaussian" for n in self.likelihoods_.values()):
            raise ValueError("load_collapsed needs the same views, all Gaussian, as the collapsed MRD")
        if any(r is not None for r in self.observed_) or any(source.observed(v) is not None
                                                                for v in range(len(self.view_names_))):
            raise ValueError("load_collapsed supports paired views only (observed=None in both models)")
        model = self.model_
        with torch.no_grad():
            model.q_x.mean.copy_(source.q_mean.to(model.q_x.mean))
            model.q_x.variance = source.q_variance
            for v, (gp, lik) in enumerate(zip(model.gps, model.likelihoods)):
                gp.covar_module.load_state_dict(source.kernels[v].state_dict())
                strategy = gp.variational_strategy
                strategy.inducing_points.copy_(source.inducing(v).to(strategy.inducing_points))
                Kuu = source.kuu(v)
                jitter = Kuu.diagonal() - source.kernels[v](source.inducing(v)).to_dense().diagonal()
                strategy.jitter_val = float(jitter.mean())  # the same Kuu + jitter as the collapsed bound
                lik.noise = source.noise[v].reshape(1).to(model.q_x.mean)
                post = source.posterior(v)
                L = post.L  # [M, M]
                eye = torch.eye(L.shape[0], dtype=L.dtype, device=L.device)
                mean = (L.mT @ post.alpha).mT  # [D, M] whitened mean of q(u)
                covariance = eye - L.mT @ post.woodbury_inv @ L  # [M, M] B^-1, the same for every output
                gp.set_inducing_distribution(mean, 0.5 * (covariance + covariance.mT))
        return self

    @property
    def latent_mean_(self) -> np.ndarray:
        self._check_fitted()
        return self.model_.q_x.mean.detach().cpu().numpy()

    @property
    def latent_variance_(self) -> np.ndarray:
        self._check_fitted()
        return self.model_.q_x.variance.detach().cpu().numpy()

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
        self._check_fitted()
        from .likelihoods import fisher_information

        model, out = self.model_, {}
        means = model.q_x.mean.detach()  # [N, Q]
        for v, name in enumerate(self.view_names_):
            Y, rows = getattr(model, f"targets_{v}"), getattr(model, f"rows_{v}")
            if rows is None:
                mean = means
            else:
                seen = rows >= 0
                mean, Y = means[seen], Y[rows[seen]]  # [N_v, Q], [N_v, D]
            gp, likelihood = model.gps[v], model.likelihoods[v]
            total = mean.new_zeros(mean.shape[1])
            for start in range(0, mean.shape[0], 1024):
                f, J = gp.mean_jacobian(mean[start:start + 1024])  # [n, D], d fbar_nd / d x_nq [n, Q, D]
                information = fisher_information(likelihood, f).detach()  # [n, D] (no graph)
                information = torch.where(torch.isnan(Y[start:start + 1024]), 0.0, information)
                total += (J.square() * information[:, None, :]).sum((0, 2))
            spread = mean.var(0, unbiased=False)  # [Q]
            out[name] = (spread * total / max(mean.shape[0], 1)).detach().cpu().numpy()
        return out

    def _active(self, threshold: float) -> dict[str, np.ndarray]:
        return {name: relevant_dimensions(rel, threshold) for name, rel in self.relevance_.items()}

    def shared_dims(self, threshold: float = 0.05) -> np.ndarray:
        """Latent dimensions relevant to every view (relevance above ``threshold`` x the view's largest)."""
        return shared_dimensions(self.relevance_, threshold)

    def private_dims(self, view, threshold: float = 0.05) -> np.ndarray:
        """Latent dimensions relevant to ``view`` and to no other view."""
        name = self.view_names_[self._view_index(view)]
        active = self._active(threshold)
        others = np.logical_or.reduce([a for k, a in active.items() if k != name] or [np.zeros_like(active[name])])
        return np.flatnonzero(active[name] & ~others)

    @property
    def noise_variance_(self) -> dict[str, float]:
        self._check_fitted()
        pairs = zip(self.view_names_, self.model_.likelihoods)
        return {name: float(lik.noise.detach().reshape(())) for name, lik in pairs
                if self.likelihoods_[name] == "gaussian"}

    @property
    def latent_(self) -> LatentEmbedding:
        """q(X) as a LatentEmbedding: per view the means and variances of the entities its rows observe."""
        mean, var = self.latent_mean_, self.latent_variance_
        means, variances = {}, {}
        for name, rows in zip(self.view_names_, self.observed_):
            means[name] = mean if rows is None else mean[rows]
            variances[name] = var if rows is None else var[rows]
        return LatentEmbedding(means=means, variances=variances, shared_dims=self.shared_dims(), method=self._method,
                               info={"elbo_history": self.elbo_history_, "relevance": self.relevance_})

    def _view_index(self, view) -> int:
        self._check_fitted()
        if isinstance(view, (int, np.integer)) and not isinstance(view, bool) and 0 <= view < len(self.view_names_):
            return int(view)
        if view in self.view_names_:
            return self.view_names_.index(view)
        raise ValueError(f"unknown view {view!r}; the views are {list(self.view_names_)}")

    def infer(self, view, Y_new, max_iter: int = 200, num_samples: int = 64, seed=0):
        r"""q(x*) = N(mean, diag(variance)) [n, Q] for new rows ``Y_new`` [n, D_v] of one view (NaN: missing).

        Per-row optimisation with the model fixed (the GPs, q(U), likelihood and the other views
        untouched): q(x*_n) maximises

            E_q(x*_n)[sum_d E_q(f)[log p(y*_nd | f_d(x*_n))]] - KL(q(x*_n) || p(x)),

        the expectation over x*_n a sample average over ``num_samples`` reparameterised draws
        ``x = mean + sqrt(variance) * eps`` with the draws ``eps`` fixed for the whole optimisation
        (sample-average approximation; eps is moment-matched per row and dimension, sample mean 0 and
        mean square 1, so a locally quadratic objective has its optimum exactly), maximised by
        L-BFGS (strong Wolfe line search) from the fitted q(x) of the view's nearest training row
        (mean squared difference over the entries both rows observe,
        :func:`~bayesalign.gp.inference.nearest_observed_rows`), as the collapsed engine's ``MRD.infer``
        starts (from the prior, as before 2026-11-25, a row with missing entries could stop in another mode:
        benchmarks/RESULTS.md, "Inferring a holed row"). p(x) is N(0, I)
        for the "normal" and "gp" priors (the GP prior's marginal) and the per-entity distribution otherwise
        (a callable prior is evaluated at entity index 0). Dimensions the view ignores go to the prior (only
        the KL acts on them). Rows are independent given the model: their objectives add.
        """
        self._check_fitted()
        v = self._view_index(view)
        name = self.view_names_[v]
        try:
            Y = np.array(Y_new, dtype=np.float64, copy=True)
        except (TypeError, ValueError) as exc:  # strings, ragged lists
            raise InputTypeError(f"view {name!r}: Y_new cannot be read as a numeric array ({exc})") from None
        if Y.ndim == 1:
            Y = Y[None]
        if Y.ndim != 2 or Y.shape[0] == 0 or Y.shape[1] != self.n_features_in_[name]:
            raise ValueError(f"Y_new for view {name!r} must have at least one row and {self.n_features_in_[name]} "
                             f"columns, got shape {Y.shape}")
        if int(num_samples) < 2:
            raise ValueError(f"num_samples must be >= 2, got {num_samples!r}")
        check_targets(self.likelihoods_[name], Y, name)
        model = self.model_
        like = model.q_x.mean
        y = torch.as_tensor(Y - self.output_means_[name], dtype=like.dtype, device=like.device)  # [n, D]
        n, Q, S = y.shape[0], like.shape[1], int(num_samples)
        gen = torch.Generator(device=like.device).manual_seed(int(seed))
        eps = torch.randn(S, n, Q, generator=gen, dtype=like.dtype, device=like.device)  # [S, n, Q]
        eps = (eps - eps.mean(0)) / eps.std(0, unbiased=False)  # moment-matched draws
        targets = y.expand(S, -1, -1).reshape(S * n, -1)  # [S n, D]
        train = getattr(model, f"targets_{v}")  # [N_v, D] (centred, NaN where missing)
        rows = getattr(model, f"rows_{v}")  # [N] row of each entity, -1 where unobserved; None: row n is entity n
        entity = torch.arange(train.shape[0], device=like.device)
        if rows is not None:
            entity = torch.nonzero(rows >= 0).reshape(-1)[torch.argsort(rows[rows >= 0])]  # the entity of each row
        start = entity[nearest_observed_rows(y, train)]  # [n]
        mean = model.q_x.mean.detach()[start].clone().requires_grad_(True)
        log_var = model.q_x.variance.detach()[start].log().clone().requires_grad_(True)
        prior = model.prior_of(torch.zeros(n, dtype=torch.long, device=like.device))
        optimiser = torch.optim.LBFGS([mean, log_var], lr=1.0, max_iter=int(max_iter), line_search_fn="strong_wolfe",
                                      tolerance_grad=1e-9, tolerance_change=1e-12, history_size=20)

        def closure():
            optimiser.zero_grad()
            std = (0.5 * log_var).exp()
            x = mean + std * eps  # [S, n, Q]
            f_mean, f_var = model.gps[v].marginals(x.reshape(-1, Q))  # [S n, D]
            ell = expected_log_likelihood(model.likelihoods[v], targets, f_mean, f_var).sum(-1).reshape(S, n).mean(0)
            q = torch.distributions.Independent(torch.distributions.Normal(mean, std), 1)
            try:
                kl = torch.distributions.kl_divergence(q, prior)  # [n]
            except NotImplementedError:
                kl = (q.log_prob(x) - prior.log_prob(x)).mean(0)
            loss = -(ell - kl).sum()
            loss.backward()
            return loss

        for p in model.parameters():
            p.requires_grad_(False)
        try:
            optimiser.step(closure)
        finally:
            for p in model.parameters():
                p.requires_grad_(True)
        if not (torch.isfinite(mean).all() and torch.isfinite(log_var).all()):
            raise FloatingPointError(f"infer: q(x*) of view {name!r} became non-finite")
        return mean.detach().cpu().numpy(), log_var.detach().exp().cpu().numpy()
