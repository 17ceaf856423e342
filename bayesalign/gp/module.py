"""The torch module of BayesianGPLVM and MRD: q(X) per entity, the inducing inputs, one kernel and
one Gaussian likelihood (its noise variance) per view; ``forward()`` evaluates the bound.

The model (Titsias & Lawrence, 2010; Damianou et al., 2012): one latent point x_n ~ N(0, I_Q) per
entity, shared by every view that observes it; view v is y^(v) = f^(v)(x) + noise with
f^(v) ~ GP(0, k^(v)) with its own ARD kernel and noise variance. q(X) = prod_n N(mu_n, diag(S_n));
the bound is ``sum_v F_v(Y_v; q(X)[obs_v], Z_v, k_v, noise_v) - KL(q(X) || p(X))``
(:mod:`bayesalign.gp.bound`), plus the log density of any prior registered on a parameter.
"""

from __future__ import annotations

import gpytorch
import torch
from gpytorch.constraints import GreaterThan, Positive

from .bound import InducingPosterior, collapsed_bound, inducing_posterior, kernel_matrix, stable_cholesky
from .kernels import normalise_latent_symmetries
from .priors import StandardNormalPrior, check_latent_prior
from .psi import psi_statistics

__all__ = ["LatentGPModule", "noise_floor_in_state", "resolve_dtype"]


def resolve_dtype(dtype) -> torch.dtype:
    """torch dtype from a torch dtype or a name ("float64", "float32")."""
    if isinstance(dtype, torch.dtype):
        out = dtype
    else:
        out = {"float64": torch.float64, "double": torch.float64, "float32": torch.float32,
               "float": torch.float32}.get(str(dtype).replace("torch.", ""))
    if out not in (torch.float64, torch.float32):
        raise ValueError(f"dtype must be float64 or float32, got {dtype!r}")
    return out


class LatentGPModule(gpytorch.Module):
    r"""q(X), inducing inputs, per-view kernels and Gaussian likelihoods; ``forward()`` is the bound.

    One latent point per *entity*; view v observes the entities ``observed[v]`` (its rows, in order):

    .. math::
        \mathcal{F} = \sum_v F_v\big(Y_v;\ q(X)[\mathrm{obs}_v]\big) - \mathrm{KL}\big(q(X) \,\|\, p(X)\big),

    each view's collapsed bound (psi-statistics) over the entities it observes, the KL over all
    entities (an entity no view observes contributes its KL only). With every view observing every
    entity in order (``observed=None``) this is the paired MRD bound of Damianou et al. (2012).

    Parameters
    ----------
    outputs : sequence of tensors [N_v, D_v]
        Centred outputs of each view (stored as buffers ``outputs_0, outputs_1, ...``).
    q_mean, q_variance : tensors [N, Q]
        Initial q(X) means and (positive) variances, one row per entity.
    inducing_inputs : tensor [1 or V, M, Q]
        Shared (first axis 1) or per-view inducing inputs.
    kernels : sequence of gpytorch kernels, one per view
    noise, noise_floor : tensors [V]
        Initial noise variances and their lower bounds. The noise is the ``likelihood``, one
        ``gpytorch.likelihoods.GaussianLikelihood`` batched over the views (noise [V, 1], a
        ``GreaterThan(noise_floor)`` constraint); :attr:`noise` reads it as [V].
    jitter : float
        Added to the diagonal of every Kuu, relative to its mean diagonal.
    observed : sequence of (LongTensor [N_v] or None), optional
        The entity of each row of view v (None: row n is entity n, N_v = N). Stored as buffers
        ``observed_v``.
    latent_prior : prior of :mod:`bayesalign.gp.priors`, optional
        p(X); default N(0, I). E.g. :class:`~bayesalign.gp.priors.GraphLaplacianPrior`, a Gaussian
        Markov random field that keeps neighbouring entities together.
    """

    def __init__(self, outputs, q_mean, q_variance, inducing_inputs, kernels, noise, noise_floor,
                 jitter: float, observed=None, latent_prior=None):
        super().__init__()
        self.n_views = len(outputs)
        # p(X): N(0, I) by default, or a prior of bayesalign.gp.priors (its KL in closed form)
        self.latent_prior = check_latent_prior(latent_prior, q_mean.shape[0])
        observed = [None] * self.n_views if observed is None else list(observed)
        for v, (Y, rows) in enumerate(zip(outputs, observed)):
            self.register_buffer(f"outputs_{v}", Y)  # [N_v, D_v]
            if rows is not None:  # the entity of each row of view v (saved: it defines the model)
                self.register_buffer(f"observed_{v}", torch.as_tensor(rows, dtype=torch.long, device=Y.device))
        self.q_mean = torch.nn.Parameter(q_mean.clone())  # [N, Q]
        self.register_parameter("raw_q_variance", torch.nn.Parameter(torch.zeros_like(q_variance)))
        self.register_constraint("raw_q_variance", Positive())
        self.q_variance = q_variance  # [N, Q]
        self.inducing_inputs = torch.nn.Parameter(inducing_inputs.clone())  # [1 or V, M, Q]
        self.kernels = torch.nn.ModuleList(kernels)
        floor = torch.as_tensor(noise_floor, dtype=q_mean.dtype, device=q_mean.device).reshape(-1).expand(
            self.n_views).reshape(self.n_views, 1)  # [V, 1]
        # gpytorch makes a constraint's bounds in the default dtype (float32), where a floor above 3e38 (data of
        # scale 1e22) is inf: the floor is set after everything is brought to our dtype
        self.likelihood = gpytorch.likelihoods.GaussianLikelihood(
            batch_shape=torch.Size([self.n_views]), noise_constraint=GreaterThan(torch.zeros_like(floor)))
        self.jitter = float(jitter)
        self.to(dtype=q_mean.dtype, device=q_mean.device)
        self.raw_noise_constraint.lower_bound = floor
        self.noise = noise
        self._register_load_state_dict_pre_hook(_noise_of_format_version_1)

    @property
    def q_variance(self) -> torch.Tensor:
        return self.raw_q_variance_constraint.transform(self.raw_q_variance)

    @q_variance.setter
    def q_variance(self, value):
        value = torch.as_tensor(value, dtype=self.raw_q_variance.dtype, device=self.raw_q_variance.device)
        with torch.no_grad():
            self.raw_q_variance.copy_(self.raw_q_variance_constraint.inverse_transform(value))

    @property
    def noise(self) -> torch.Tensor:
        """The noise variance of every view [V] (the likelihood's)."""
        return self.likelihood.noise.reshape(-1)

    @noise.setter
    def noise(self, value):
        value = torch.as_tensor(value, dtype=self.raw_noise.dtype, device=self.raw_noise.device)
        with torch.no_grad():
            self.raw_noise.copy_(self.raw_noise_constraint.inverse_transform(value.reshape(-1, 1)))

    @property
    def raw_noise(self) -> torch.nn.Parameter:
        """The likelihood's raw noise parameter [V, 1] (what an optimiser moves)."""
        return self.likelihood.noise_covar.raw_noise

    @property
    def raw_noise_constraint(self) -> GreaterThan:
        """The likelihood's noise constraint: ``lower_bound`` [V, 1] is each view's noise floor."""
        return self.likelihood.noise_covar.raw_noise_constraint

    def outputs(self, v: int) -> torch.Tensor:
        return getattr(self, f"outputs_{v}")

    def observed(self, v: int) -> torch.Tensor | None:
        """The entity of each row of view v [N_v], or None when row n is entity n."""
        return getattr(self, f"observed_{v}", None)

    def _seen_entities(self) -> torch.Tensor | None:
        """Boolean mask [N] of the entities some view observes, or None when every entity is observed."""
        if any(self.observed(v) is None for v in range(self.n_views)):
            return None
        seen = torch.zeros(self.q_mean.shape[0], dtype=torch.bool, device=self.q_mean.device)
        for v in range(self.n_views):
            seen[self.observed(v)] = True
        return None if bool(seen.all()) else seen

    def view_latent(self, v: int, q_variance: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """q(X) of the rows of view v: (means, variances) [N_v, Q] (differentiable)."""
        S = self.q_variance if q_variance is None else q_variance
        rows = self.observed(v)
        return (self.q_mean, S) if rows is None else (self.q_mean[rows], S[rows])

    def inducing(self, v: int) -> torch.Tensor:
        return self.inducing_inputs[v if self.inducing_inputs.shape[0] > 1 else 0]  # [M, Q]

    def kuu(self, v: int) -> torch.Tensor:
        """Kuu + jitter * mean(diag Kuu) I of view v [M, M]."""
        Kuu = kernel_matrix(self.kernels[v], self.inducing(v))  # [M, M]
        scale = Kuu.detach().diagonal().mean().clamp_min(torch.finfo(Kuu.dtype).tiny)
        return Kuu + (self.jitter * scale) * torch.eye(Kuu.shape[0], dtype=Kuu.dtype, device=Kuu.device)

    def view_bound(self, v: int, q_variance: torch.Tensor | None = None) -> torch.Tensor:
        """F_v: the collapsed bound of view v (over the entities it observes) without the KL term."""
        mu, S = self.view_latent(v, q_variance)
        stats = psi_statistics(self.kernels[v], mu, S, self.inducing(v), per_point=False)
        return collapsed_bound(self.outputs(v), self.noise[v], self.kuu(v), stats.psi0, stats.psi1, stats.psi2,
                               what=f"Kuu of view {v}")

    def kl(self, q_variance: torch.Tensor | None = None) -> torch.Tensor:
        """KL(q(X) || p(X)) under the module's latent prior (N(0, I) unless one was given)."""
        return self.latent_prior.kl(self.q_mean, self.q_variance if q_variance is None else q_variance)

    def view_bounds(self, q_variance: torch.Tensor | None = None) -> torch.Tensor:
        """F_v of every view [V] (without the KL term)."""
        S = self.q_variance if q_variance is None else q_variance
        return torch.stack([self.view_bound(v, S) for v in range(self.n_views)])

    def evaluate_with_gradient(self) -> float:
        """The objective (:meth:`forward`), with ``.grad`` of every parameter set to the gradient of the
        *negative* objective (what a minimiser wants); the closure of :func:`bayesalign.gp._optim.maximize`."""
        for p in self.parameters():
            p.grad = None
        objective = self()
        (-objective).backward()
        return objective.item()

    @torch.no_grad()
    def normalise_latent(self) -> float:
        r"""Move to the point of highest bound among those with the same likelihood: returns the gain.

        The likelihood terms :math:`F_v` are unchanged when latent dimension q is shifted by
        :math:`t_q` and scaled by :math:`c_q` (means :math:`c_q (\mu_{nq} - t_q)`, variances
        :math:`c_q^2 S_{nq}`, inducing inputs :math:`c_q (z_{mq} - t_q)`) and every kernel follows
        (RBF / Matern lengthscales :math:`c_q l_q`, linear variances :math:`a_q / c_q^2`; shifts only
        where no linear term looks); only :math:`\mathrm{KL}(q(X) \| N(0, I))` changes, and it is
        smallest at :math:`t_q = \bar\mu_q`, :math:`c_q^2 = N / \sum_n ((\mu_{nq} - t_q)^2 + S_{nq})`,
        i.e. where every dimension has mean 0 and second moment 1 under q (under partial observation:
        over the entities some view observes; the others stay at their optimum, the prior). The gain,
        :math:`\sum_q \tfrac N2 (m_q - 1 - \log m_q) + \tfrac N2 \sum_q t_q^2` with :math:`m_q` the
        second moment after the shift, is in closed form. This direction (all means, variances,
        inducing inputs and lengthscales of a dimension at once, against a pull of the KL alone) is
        nearly flat, so L-BFGS crawls along it; the fit takes this exact step whenever it restarts
        L-BFGS (see :class:`~bayesalign.gp.MRD`). Kernels outside these kinds, or a registered prior
        (:meth:`log_prior`, which the rescaling would change): nothing is changed (0).
        """
        if self.has_priors() or not isinstance(self.latent_prior, StandardNormalPrior):
            return 0.0  # the closed form below is that of N(0, I); other priors change under the rescaling
        seen = self._seen_entities()  # entities no view observes are at their optimum, the prior: left alone
        mu, S = self.q_mean, self.q_variance  # [N, Q]
        if seen is not None:
            mu, S = mu[seen], S[seen]
        before = float(self.kl())
        moved = normalise_latent_symmetries(self.kernels, mu, S)
        if moved is None:
            return 0.0
        shift, scale = moved
        centred = mu - shift
        if seen is None:
            self.q_mean.copy_(centred * scale)
            self.q_variance = S * scale.square()
        else:
            self.q_mean[seen] = centred * scale
            variance = self.q_variance.clone()
            variance[seen] = S * scale.square()
            self.q_variance = variance
        self.inducing_inputs.copy_((self.inducing_inputs - shift) * scale)
        return before - float(self.kl())

    def forward(self) -> torch.Tensor:
        """The objective ``sum_v F_v - KL(q(X) || p(X)) + log p(theta)``: the bound (the KL counted once)
        plus the log density of every prior registered on a parameter (:meth:`log_prior`; 0 without one)."""
        S = self.q_variance  # [N, Q]
        bound = self.view_bounds(S).sum() - self.kl(S)
        return bound + self.log_prior() if self.has_priors() else bound

    def has_priors(self) -> bool:
        """Whether any prior is registered on a parameter (e.g. ``make_kernel(lengthscale_prior=...)``)."""
        if getattr(self, "_has_priors_cache", None) is None:
            self._has_priors_cache = any(True for _ in self.named_priors())
        return self._has_priors_cache

    def log_prior(self) -> torch.Tensor:
        """``log p(theta)``: the sum of the log densities of every prior registered on the module's
        parameters (GPyTorch's ``register_prior``), added to the bound as GPyTorch's marginal log
        likelihoods add them; the objective is then a lower bound on ``log p(Y, theta)`` (MAP for the
        hyperparameters, variational for X)."""
        total = self.q_mean.new_zeros(())
        for _, module, prior, closure, _ in self.named_priors():
            total = total + prior.log_prob(closure(module)).sum()
        return total

    @torch.no_grad()
    def posterior(self, v: int, context=None) -> InducingPosterior:
        """The optimal q(u) of view v under the current q(X) and hyperparameters (Titsias 2009, eq. 10).

        ``context``: optional ``(mean [t, Q], variance [t, Q], outputs [t, D_v])`` of further rows
        of view v with their q(x) (e.g. rows inferred earlier); their psi-statistics join the
        training rows' in the collapsed q(u), the kernel, noise and inducing inputs held fixed.
        """
        (mean, variance), outputs = self.view_latent(v), self.outputs(v)
        if context is not None:
            extra_mean, extra_variance, extra_outputs = context
            mean = torch.cat([mean, extra_mean])  # [N + t, Q]
            variance = torch.cat([variance, extra_variance])  # [N + t, Q]
            outputs = torch.cat([outputs, extra_outputs])  # [N + t, D_v]
        stats = psi_statistics(self.kernels[v], mean, variance, self.inducing(v), per_point=False)
        L = stable_cholesky(self.kuu(v).double(), f"Kuu of view {v}")
        return inducing_posterior(outputs, self.noise[v], L, stats.psi1, stats.psi2)


#: The likelihood's noise in a module's state (names of ``state_dict``).
NOISE_STATE = "likelihood.noise_covar.raw_noise"


def noise_floor_in_state(state) -> torch.Tensor:
    """Each view's noise floor [V] from a module's saved state (of either format version)."""
    key = f"{NOISE_STATE}_constraint.lower_bound"
    return (state[key] if key in state else state["raw_noise_constraint.lower_bound"]).reshape(-1)


def _noise_of_format_version_1(state, prefix, *args):
    """Load-state pre-hook: a state whose noise is a raw tensor ``raw_noise`` [V] with its own constraint
    (model files of format version 1) is renamed to the likelihood's parameter [V, 1] in place."""
    for old, new in (("raw_noise", NOISE_STATE), ("raw_noise_constraint.lower_bound",
                                                   f"{NOISE_STATE}_constraint.lower_bound"),
                     ("raw_noise_constraint.upper_bound", f"{NOISE_STATE}_constraint.upper_bound")):
        if prefix + old in state:
            value = state.pop(prefix + old)
            state[prefix + new] = value.reshape(-1, 1) if value.dim() else value
