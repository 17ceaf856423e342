"""The estimator base of BayesianGPLVM and MRD: fit (initialisation, restarts, the optimiser phases),
continuation and growth, relevance, predict, infer; the rest of the fitted interface is
:class:`~bayesalign.gp.fitted.FittedLatentModel`'s.

The torch module is :mod:`bayesalign.gp.module`, the initialisation :mod:`bayesalign.gp.initialisation`,
the optimisers :mod:`bayesalign.gp._optim`.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Sequence

import gpytorch
import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from .._utils import as_rng
from ..data import LatentEmbedding, check_view
from . import _optim
from .extend import split_entities
from .fitted import FittedLatentModel
from .inducing import grown_inducing_inputs
from .inference import infer_latent
from .initialisation import (
    StartError,
    centre_view,
    check_observed,
    entity_means_from_embedding,
    init_latent,
    partial_latent,
)
from .kernels import ard_relevance, make_kernel
from .module import LatentGPModule, resolve_dtype
from .prediction import collapsed_resolution, predict_outputs
from .priors import check_latent_prior

#: Fraction of ``max_iter`` each start of a race gets (``MRD(race_inducing=...)``): enough for the starts' bounds to
#: separate, while the winner's growth and its full budget carry the fit.
RACE_FRACTION = 0.075

__all__ = ["LatentGPBase"]


def _starts(init) -> list:
    """The starts of a fit: ``init`` itself, or each element of a tuple / list of starts (names,
    LatentEmbeddings, 2-d arrays); a nested list of numbers is one array start."""
    if isinstance(init, (tuple, list)) and len(init) > 0 and all(
            isinstance(i, (str, LatentEmbedding)) or (isinstance(i, np.ndarray) and i.ndim == 2) for i in init):
        return list(init)
    if isinstance(init, (tuple, list)) and len(init) == 0:
        raise ValueError("init is an empty sequence of starts; give at least one")
    return [init]


def _init_label(init) -> str:
    """A start's name in ``restart_inits_``."""
    if isinstance(init, str):
        return init
    return "embedding" if isinstance(init, LatentEmbedding) else "array"


class LatentGPBase(FittedLatentModel):
    """Fit / predict / infer / save for BayesianGPLVM and MRD (see :class:`bayesalign.gp.MRD`)."""

    _method = "MRD"

    # -- parameters -----------------------------------------------------------------------------
    def _check_params(self):
        for name in ("latent_dim", "num_inducing"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if not self.snr > 0:
            raise ValueError(f"snr must be positive, got {self.snr!r}")
        if not 0 <= self.tol < np.inf:
            raise ValueError(f"tol must be a finite float >= 0, got {self.tol!r}")
        if self.warmup_iters < 0 or self.max_iter < 0:
            raise ValueError("warmup_iters and max_iter must be >= 0")
        if self.optimizer not in ("lbfgs", "adam"):
            raise ValueError(f"optimizer must be 'lbfgs' or 'adam', got {self.optimizer!r}")
        if getattr(self, "inducing", "shared") not in ("shared", "per_view"):
            raise ValueError(f"inducing must be 'shared' or 'per_view', got {self.inducing!r}")
        if not 0 < self.init_variance < np.inf:
            raise ValueError(f"init_variance must be positive and finite, got {self.init_variance!r}")
        if self.jitter is not None and not 0 <= self.jitter < np.inf:
            raise ValueError(f"jitter must be None or a finite float >= 0, got {self.jitter!r}")
        after = self.precondition_after
        if after is not None and (not isinstance(after, (int, np.integer)) or isinstance(after, bool) or after < 0):
            raise ValueError(f"precondition_after must be None or an int >= 0, got {after!r}")
        memory = self.lbfgs_memory
        if not isinstance(memory, (int, np.integer)) or isinstance(memory, bool) or memory < 1:
            raise ValueError(f"lbfgs_memory must be an int >= 1, got {memory!r}")
        race = getattr(self, "race_inducing", None)
        if race is not None and (not isinstance(race, (int, np.integer)) or isinstance(race, bool) or race < 1):
            raise ValueError(f"race_inducing must be None or an int >= 1, got {race!r}")
        restarts = getattr(self, "n_restarts", 1)
        if not isinstance(restarts, (int, np.integer)) or isinstance(restarts, bool) or restarts < 1:
            raise ValueError(f"n_restarts must be an int >= 1, got {restarts!r}")
        return resolve_dtype(self.dtype), torch.device(self.device if self.device is not None else "cpu")

    def _jitter(self, dtype):
        return self.jitter if self.jitter is not None else 1e-6

    def _make_kernels(self, n_views: int, variances: list[float], dtype, device):
        kernel = self.kernel
        if isinstance(kernel, str):
            parts = {p.strip().lower() for p in kernel.split("+")}
            if "linear" in parts and parts <= {"linear", "bias"} and self.num_inducing > self.latent_dim:
                warnings.warn(f"kernel {kernel!r} has rank <= latent_dim={self.latent_dim}, so Kuu of "
                              f"{self.num_inducing} inducing inputs is singular and the fit is ill-conditioned; "
                              f"use {kernel + '+white'!r} (a learned jitter, as in GPy's MRD examples)",
                              RuntimeWarning, stacklevel=4)
            return [make_kernel(kernel, int(self.latent_dim), variance=var, dtype=dtype).to(device)
                    for var in variances]
        # copies: the caller's kernel modules are never changed by the fit
        if isinstance(kernel, gpytorch.kernels.Kernel):
            return [copy.deepcopy(kernel).to(device=device, dtype=dtype) for _ in range(n_views)]
        if isinstance(kernel, Sequence) and len(kernel) == n_views and all(
                isinstance(k, gpytorch.kernels.Kernel) for k in kernel):
            return [copy.deepcopy(k).to(device=device, dtype=dtype) for k in kernel]
        raise TypeError("kernel must be a name for make_kernel (e.g. 'rbf', 'linear', 'rbf+bias'), a gpytorch "
                        f"Kernel (copied for every view) or a list of one kernel per view; got {kernel!r}")

    # -- fitting --------------------------------------------------------------------------------
    def _fit_views(self, names: list[str], arrays: list[np.ndarray], observed=None, n_entities=None,
                   latent_prior=None):
        dtype, device = self._check_params()
        inits = _starts(self.init)
        observed, N = check_observed(observed, names, arrays, n_entities)  # N entities
        Q = int(self.latent_dim)
        if N < 2:
            raise ValueError(f"need at least 2 rows, got {N}")
        for name, Y in zip(names, arrays):
            if Y.shape[0] < 2:
                raise ValueError(f"view {name!r} has {Y.shape[0]} row(s); every view needs at least 2")
        seen = np.arange(N) if any(rows is None for rows in observed) else np.unique(np.concatenate(observed))
        M = int(self.num_inducing)
        if M > seen.size:
            warnings.warn(f"num_inducing={M} is more than the {seen.size} observed entities; using {seen.size}",
                          RuntimeWarning, stacklevel=3)
            M = seen.size
        prepared = [centre_view(Y, name) for name, Y in zip(names, arrays)]
        centred = [p[0] for p in prepared]
        partial = any(rows is not None for rows in observed)
        unseen = np.setdiff1d(np.arange(N), seen)  # entities no view observes start (and stay) at the prior
        starts = []  # (label, [N, Q] initial means) of every start
        for init in inits:
            try:
                X0 = self._initial_means(init, names, centred, observed, N, partial)
            except ValueError as error:  # e.g. "cca" with fewer shared axes than latent_dim
                if not isinstance(init, str):  # a given embedding or array that does not fit
                    raise
                if len(inits) == 1:
                    raise StartError(f"{self._method}: start {_init_label(init)!r} cannot be computed: {error}") \
                        from error
                warnings.warn(f"{self._method}: start {_init_label(init)!r} was skipped: {error}", RuntimeWarning,
                              stacklevel=3)
                continue
            X0 = X0.copy()
            X0[unseen] = 0.0
            starts.append((_init_label(init), X0))
        if not starts:
            raise ValueError(f"none of the starts {[_init_label(i) for i in inits]} could be computed (warned above)")
        q_variance = np.full((N, Q), float(self.init_variance))
        q_variance[unseen] = 1.0
        n_z = len(names) if getattr(self, "inducing", "shared") == "per_view" else 1
        variances = [float(np.square(Y).sum() / Y.size) for Y in centred]  # mean column variance per view
        noise = np.array([var / self.snr for var in variances])
        floor = np.minimum(1e-6 * np.array(variances), 0.1 * noise)
        self.view_names_ = tuple(names)
        self.n_features_in_ = {name: Y.shape[1] for name, Y in zip(names, arrays)}
        self.output_means_ = {name: p[1] for name, p in zip(names, prepared)}
        self.kept_columns_ = {name: p[2] for name, p in zip(names, prepared)}

        def tensor(a):
            return torch.as_tensor(np.asarray(a), dtype=dtype, device=device)

        n_restarts = int(getattr(self, "n_restarts", 1))
        best, bounds, labels = None, [], []
        runs = [(label, X0, restart) for label, X0 in starts for restart in range(n_restarts)]
        race = getattr(self, "race_inducing", None)
        race = race is not None and len(runs) > 1 and int(race) < M  # the starts race small (see MRD)
        M_run, budget = (int(self.race_inducing), max(int(RACE_FRACTION * self.max_iter), 1)) \
            if race else (M, self.max_iter)
        for label, X0, restart in runs:
            if restart == 0:  # each start's fits draw as a fit from that start alone would (an int seed)
                rng = as_rng(self.seed)
            # restart 0 of a start starts at the initialisation itself; the others at a jittered copy (30% of
            # each latent dimension's spread) with their own inducing inputs, as GPy's optimize_restarts
            X = X0 if restart == 0 else X0 + 0.3 * X0.std(0) * rng.standard_normal(X0.shape)  # [N, Q]
            X[unseen] = 0.0
            Z0 = X[seen[rng.choice(seen.size, size=M_run, replace=False)]]  # [M, Q] among the observed entities
            self.module_ = LatentGPModule(
                outputs=[tensor(Y) for Y in centred], q_mean=tensor(X),
                q_variance=tensor(q_variance),
                inducing_inputs=tensor(np.repeat(Z0[None], n_z, axis=0)),
                kernels=self._make_kernels(len(names), variances, dtype, device),
                noise=tensor(noise), noise_floor=tensor(floor), jitter=self._jitter(dtype),
                observed=[None if rows is None else torch.as_tensor(rows, device=device) for rows in observed],
                latent_prior=latent_prior)
            self.history_ = np.zeros(0)
            self.history_seconds_ = np.zeros(0)
            self.n_warmup_ = 0
            self.n_iter_ = 0
            self.converged_ = False
            self._interrupted = False
            run_label = label if restart == 0 else f"{label} (jitter {restart})"
            self._start_tag = f" (start {run_label})" if len(runs) > 1 else ""  # the progress bar's name
            try:
                self._optimise(budget)
            finally:
                self._start_tag = ""
            bounds.append(self.elbo())
            labels.append(run_label)
            state = {k: getattr(self, k) for k in ("module_", "history_", "history_seconds_", "n_warmup_", "n_iter_",
                                                   "converged_")}
            state["best_restart_"] = len(bounds) - 1
            if best is None or bounds[-1] > best[0] or (np.isnan(best[0]) and not np.isnan(bounds[-1])):
                best = (bounds[-1], state)
            if self._interrupted:  # KeyboardInterrupt: keep the best fit so far, run no more restarts
                break
        for key, value in best[1].items():
            setattr(self, key, value)
        self.restart_bounds_ = np.asarray(bounds)
        self.restart_inits_ = labels
        done = 0  # evaluations before the last phase
        if race and not self._interrupted:  # the race's winner: grown to num_inducing, then the whole budget
            self.module_.inducing_inputs = torch.nn.Parameter(torch.stack(self._grown_inducing(M)))
            done = self.n_iter_
            self._optimise(self.max_iter)
        self.interrupted_ = self._interrupted
        if self.interrupted_:  # the best fit so far is kept (and warned about); Ctrl-C goes on to the caller
            raise KeyboardInterrupt
        if self.max_iter > 0 and not self.converged_:
            self._warn_unconverged(done + self.max_iter, self.max_iter, stacklevel=4)
        return self

    def _initial_means(self, init, names, centred, observed, N: int, partial: bool) -> np.ndarray:
        """q(X) means [N, Q] of one start (``init``: a name, a LatentEmbedding or an array)."""
        Q = int(self.latent_dim)
        if partial and isinstance(init, LatentEmbedding):
            return entity_means_from_embedding(init, names, observed, N, Q)
        if partial and isinstance(init, str) and init != "random":
            return partial_latent(init, names, centred, observed, N, Q, self.seed)  # [N, Q]
        return init_latent(init, names, centred, Q, self.seed, n_rows=N)  # [N, Q]

    #: Whether a fit that stops before the optimiser's tolerance warns (a ConvergenceWarning). A caller that runs
    #: the model in stages (MAD: a race of starts, a growth, a correspondence round) turns it off on its instance
    #: and says once, at its end, whether the model it keeps converged (``stopped_by_``).
    _warn_convergence = True

    def _warn_unconverged(self, budget: int, asked: int, stacklevel: int) -> None:
        """ConvergenceWarning: the fit stopped at its ``budget`` of evaluations (``asked`` in this call) or on
        the optimiser's own stop, before the tolerance; recorded in ``stopped_by_`` ("max_iter" or the optimiser's
        message) either way."""
        if self.n_iter_ >= budget:
            self.stopped_by_ = "max_iter"
            why = f"at max_iter={asked}" if asked == budget else f"at the end of the {asked} further evaluations " \
                f"continue_fit was given"
            advice = "raise max_iter"
        else:  # the optimiser gave up on its own (e.g. a line search that found no better point)
            message = getattr(self, "optimizer_message_", "") or "no reason given"
            self.stopped_by_ = f"the optimiser's own stop ({message})"
            why, advice = f"by {self.stopped_by_}", "try another init or seed"
        if self._warn_convergence:
            warnings.warn(f"{self._method} stopped after {self.n_iter_} bound evaluations, {why}, before the "
                          f"optimiser's tolerance (tol={self.tol}); the fit may be far from an optimum (converged_ "
                          f"is False): {advice}", ConvergenceWarning, stacklevel=stacklevel)

    def continue_fit(self, max_iter: int | None = None, latent_prior=None):
        """Go on maximising the bound from the fitted parameters: ``max_iter`` more evaluations (default the
        model's ``max_iter``), after the exact latent-symmetry step of a restart and without a warm-up.

        ``latent_prior`` (a prior of :mod:`bayesalign.gp.priors` over the same entities) replaces p(X)
        first, e.g. the M-step of an EM round whose E-step changed the prior. The bound and its
        history then refer to the new prior from the next evaluation on. Works on a loaded model too.
        """
        self._check_fitted()
        budget = int(self.max_iter if max_iter is None else max_iter)
        if budget < 1:
            raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
        if latent_prior is not None:
            self.module_.latent_prior = check_latent_prior(latent_prior, self.module_.q_mean.shape[0])
        self._interrupted = False
        done = self.n_iter_
        self._optimise(budget)
        self.interrupted_ = self._interrupted
        if self.interrupted_:
            raise KeyboardInterrupt
        if not self.converged_:
            self._warn_unconverged(done + budget, budget, stacklevel=3)
        return self

    def split_entities(self, view, rows, latent_prior=None, start: str = "copy", infer_max_iter: int = 500):
        """A copy of the fitted model in which ``rows`` of ``view`` are entities of their own, not yet refitted
        (:func:`bayesalign.gp.extend.split_entities`; :meth:`continue_fit` goes on from there)."""
        return split_entities(self, view, rows, latent_prior=latent_prior, start=start, infer_max_iter=infer_max_iter)

    def grow_inducing(self, num_inducing: int, max_iter: int | None = None):
        """Add inducing inputs up to ``num_inducing`` per set, then go on maximising the bound (:meth:`continue_fit`).

        Each new inducing input goes to the q(X) mean of the observed entity farthest (Euclidean) from every
        inducing input of its set so far (greedy farthest-point selection), so the new ones cover the latent
        regions the old ones leave out. At fixed other parameters, adding inducing inputs never lowers the
        collapsed bound (Titsias 2009: the bound is log p(Y) minus a KL to the exact posterior that a larger
        inducing set can only shrink), so the continued fit starts at or above the bound it had. Then
        ``max_iter`` evaluations (default the model's ``max_iter``); ``num_inducing`` becomes the new size.
        Capped at the number of observed entities, with a warning.
        """
        self._check_fitted()
        grown = self._grown_inducing(num_inducing)
        self.module_.inducing_inputs = torch.nn.Parameter(torch.stack(grown))  # [1 or V, num_inducing, Q]
        self.num_inducing = grown[0].shape[0]
        return self.continue_fit(max_iter)

    def _grown_inducing(self, num_inducing: int) -> list:
        """Each set of inducing inputs grown to ``num_inducing`` by farthest-point selection among the observed
        entities' q(X) means (:func:`bayesalign.gp.inducing.grown_inducing_inputs`)."""
        module = self.module_
        seen = module._seen_entities()
        means = module.q_mean.detach() if seen is None else module.q_mean.detach()[seen]  # [N_seen, Q]
        return grown_inducing_inputs(module.inducing_inputs.detach(), means, num_inducing)[0]

    def _optimise(self, max_iter: int):
        """Warm-up with the noise fixed (GPy issue #286: otherwise the noise may absorb the signal),
        then all parameters; ``max_iter`` bound evaluations in all. Every restart of L-BFGS (after
        the warm-up, before the preconditioned phase, a continued fit) starts with the exact step of
        :meth:`~bayesalign.gp.module.LatentGPModule.normalise_latent`."""
        module = self.module_
        history = list(self.history_)
        seconds = list(self.history_seconds_)
        params = [p for p in module.parameters() if p is not module.raw_noise]

        closure = module.evaluate_with_gradient

        warmup = min(int(self.warmup_iters), int(max_iter)) if self.n_iter_ == 0 else 0
        main = int(max_iter) - warmup
        after = main if self.precondition_after is None else min(int(self.precondition_after), main)
        # (parameters, evaluations, description, preconditioned)
        name = self._method + getattr(self, "_start_tag", "")  # e.g. "MRD (start cca)" among several starts
        phases = [(params, warmup, f"{name} warm-up", False),
                  (params + [module.raw_noise], after, name, False),
                  (params + [module.raw_noise], main - after, f"{name} preconditioned", True)]
        plain_converged = False
        for phase_params, budget, desc, precondition in phases:
            if budget <= 0:
                continue
            if precondition and plain_converged:
                break  # the unpreconditioned main phase converged: nothing left to do
            if history:  # L-BFGS restarts here: first the exact step along the latent symmetries
                module.normalise_latent()
            frozen = [p for p in module.parameters() if all(p is not q for q in phase_params)]
            for p in frozen:
                p.requires_grad_(False)
            offset = seconds[-1] if seconds else 0.0
            times: list = []
            # where each optimiser run begins in history_ (the bound trace labels them); runs of a reset history dropped
            self.history_phases_ = [p for p in getattr(self, "history_phases_", []) if p[0] < len(history)] + [
                (len(history), desc)]
            try:
                scales = self._preconditioner(phase_params) if precondition else None
                result = _optim.maximize(closure, phase_params, method=self.optimizer, max_evals=budget,
                                         tol=self.tol, learning_rate=self.learning_rate, history=history,
                                         times=times, progress=self.progress, desc=desc,
                                         memory=int(self.lbfgs_memory), scales=scales)
            finally:
                for p in frozen:
                    p.requires_grad_(True)
                seconds.extend(offset + t for t in times)
                self.history_ = np.asarray(history, dtype=np.float64)
                self.history_seconds_ = np.asarray(seconds, dtype=np.float64)
                self.n_iter_ = len(history)
            if desc.endswith("warm-up"):
                self.n_warmup_ = result.n_evals
            elif not precondition:
                plain_converged = result.converged
            self.converged_ = result.converged
            self.optimizer_message_ = result.message
            if result.interrupted:
                self._interrupted = True
                break
        return self

    def _preconditioner(self, params):
        """Diagonal scales for L-BFGS (see ``_optim.maximize``): ``sqrt(S)`` for the q(X) means, 1 for the rest.

        The curvature of the bound in a latent mean is about ``1 / S`` (for the optimal Gaussian q(x_n)
        its variance is the inverse curvature of the expected log-likelihood; Price's theorem), so the
        means of confident points are stiff and those of vague points flat: ill-conditioned by the
        spread of S. Working on ``mu / sqrt(S)`` equalises them. The scales are the variances at the
        start of the run, held fixed during it (L-BFGS's curvature pairs need fixed variables). Used
        after ``precondition_after`` evaluations of the main phase (see :class:`~bayesalign.gp.MRD`
        for why not from its start).
        """
        module = self.module_
        spread = module.q_variance.detach().sqrt()  # [N, Q]
        return [spread if p is module.q_mean else None for p in params]

    # -- results --------------------------------------------------------------------------------
    def elbo(self) -> float:
        """The variational lower bound on log p(Y) at the current parameters (the KL included); with
        priors registered on parameters (e.g. ``make_kernel(lengthscale_prior=...)``) the objective
        that was maximised, the bound plus their log density (``module_.log_prior()``)."""
        self._check_fitted()
        with torch.no_grad():
            return float(self.module_())

    @property
    def relevance_(self) -> dict[str, np.ndarray]:
        """ARD relevance weights [Q] per view (variance / lengthscale^2 for RBF; see ``ard_relevance``)."""
        self._check_fitted()
        Q = int(self.module_.q_mean.shape[1])
        return {name: ard_relevance(k, Q).detach().cpu().numpy()
                for name, k in zip(self.view_names_, self.module_.kernels)}

    @property
    def resolution_(self) -> dict[str, np.ndarray]:
        """How finely each view's data pin down each latent dimension: [Q] per view, unit-free
        (:func:`bayesalign.gp.prediction.collapsed_resolution`)."""
        self._check_fitted()
        return collapsed_resolution(self.module_, self.view_names_)

    @property
    def entity_means_(self) -> np.ndarray:
        """q(X) means [n_entities, Q], one row per entity (for a paired fit: per row)."""
        self._check_fitted()
        return self.module_.q_mean.detach().cpu().numpy()

    @property
    def entity_variances_(self) -> np.ndarray:
        """q(X) diagonal variances [n_entities, Q], one row per entity."""
        self._check_fitted()
        return self.module_.q_variance.detach().cpu().numpy()

    @property
    def observed_(self) -> dict[str, np.ndarray]:
        """Per view the entity index [N_v] of each of its rows (``arange`` for a paired fit)."""
        self._check_fitted()
        module = self.module_
        out = {}
        for v, name in enumerate(self.view_names_):
            rows = module.observed(v)
            out[name] = np.arange(module.q_mean.shape[0]) if rows is None else rows.cpu().numpy()
        return out

    @property
    def noise_variance_(self) -> dict[str, float]:
        """Noise variance per view (of the centred outputs)."""
        self._check_fitted()
        return {name: float(n) for name, n in zip(self.view_names_, self.module_.noise.detach().cpu())}

    # -- prediction and inference ---------------------------------------------------------------
    def _tensor(self, array, name: str = "the input"):
        """A copy of a finite float64 array in the model's dtype; refused when it overflows that dtype (float32)."""
        p = self.module_.q_mean
        tensor = torch.tensor(np.asarray(array, dtype=np.float64), dtype=p.dtype, device=p.device)
        if not bool(torch.isfinite(tensor).all()):
            raise ValueError(f"{name} has values beyond the range of the model's {str(p.dtype).replace('torch.', '')} "
                             f"(largest magnitude {np.abs(array).max():.3g}); standardise it or fit in float64")
        return tensor

    def _predict(self, view, X, X_variance=None, include_noise=True, chunk_size=256):
        return predict_outputs(self, view, X, X_variance, include_noise, chunk_size)

    def _infer(self, view, Y_new, max_iter=500, tol=1e-10, progress=None, chunk_size=1024, context=None):
        if not isinstance(max_iter, (int, np.integer)) or isinstance(max_iter, bool) or max_iter < 1:
            raise ValueError(f"infer: max_iter must be an int >= 1, got {max_iter!r}")
        if not 0 <= tol < np.inf:
            raise ValueError(f"infer: tol must be a finite float >= 0, got {tol!r}")
        v = self._view_index(view)
        name = self.view_names_[v]
        Y_new = check_view(Y_new, name)
        if Y_new.shape[1] != self.n_features_in_[name]:
            raise ValueError(f"view {name!r}: new rows have {Y_new.shape[1]} columns, the model was fitted "
                             f"with {self.n_features_in_[name]}")
        keep = self.kept_columns_[name]
        Yc = self._tensor(Y_new[:, keep] - self.output_means_[name][keep], f"view {name!r}: Y_new")
        if context is not None:  # (Y, mean, variance) of earlier rows: centred as the training outputs
            Y_ctx, mean_ctx, var_ctx = context
            Y_ctx = check_view(Y_ctx, f"{name} (context)")
            mean_ctx, var_ctx = check_view(mean_ctx, "context mean"), check_view(var_ctx, "context variance")
            D, Q = self.n_features_in_[name], self.module_.q_mean.shape[1]
            if Y_ctx.shape[1] != D or not mean_ctx.shape == var_ctx.shape == (Y_ctx.shape[0], Q) or (var_ctx < 0).any():
                raise ValueError(f"view {name!r}: context must be (Y [n, {D}], mean [n, {Q}], variance [n, {Q}] >= 0), "
                                 f"got shapes {Y_ctx.shape}, {mean_ctx.shape}, {var_ctx.shape}")
            context = (self._tensor(mean_ctx, "context mean"), self._tensor(var_ctx, "context variance"),
                       self._tensor(Y_ctx[:, keep] - self.output_means_[name][keep], f"view {name!r}: context Y"))
        mean, var = infer_latent(self.module_, v, Yc, max_iter=max_iter, tol=tol,
                                 progress=self.progress if progress is None else progress, chunk_size=chunk_size,
                                 desc=f"infer {name}", context=context)
        return mean.detach().cpu().numpy(), var.detach().cpu().numpy()
