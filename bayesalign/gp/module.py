"""The torch module of BayesianGPLVM and MRD: q(X) per entity, the inducing inputs, one kernel and
one noise variance per view; ``forward()`` evaluates the bound.

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

from .bound import (
    InducingPosterior,
    RBFViewsBound,
    collapsed_bound,
    inducing_posterior,
    kernel_matrix,
    stable_cholesky,
    views_bound_backward,
    views_bound_forward,
)
from .functions.rbf_psi2 import default_chunk_size
from .kernels import _kernel_terms, _rbf_parts, _rbf_raw, lower_bounded, normalise_latent_symmetries
from .priors import StandardNormalPrior, check_latent_prior
from .psi import psi_statistics

__all__ = ["LatentGPModule", "resolve_dtype"]


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
    r"""q(X), inducing inputs, per-view kernels and noise variances; ``forward()`` is the bound.

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
        Initial noise variances and their lower bounds.
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
        self._observed_views = [v for v, rows in enumerate(observed) if rows is not None]
        # views that observe the same entities in the same order go through one view-batched bound
        # (RBFViewsBound) together, their outputs zero-padded to the widest; derived, so not saved
        groups: list[list[int]] = []
        for v in range(self.n_views):
            for group in groups:
                if self._same_rows(group[0], v):
                    group.append(v)
                    break
            else:
                groups.append([v])
        self._groups = groups
        for g, views in enumerate(groups):
            widths = [outputs[v].shape[1] for v in views]
            padded = outputs[views[0]].new_zeros(len(views), outputs[views[0]].shape[0], max(widths))  # [V_g, N_g, D]
            for i, v in enumerate(views):
                padded[i, :, :widths[i]] = outputs[v]
            self.register_buffer(f"group_outputs_{g}", padded, persistent=False)
            self.register_buffer(f"group_widths_{g}", torch.tensor(widths, dtype=padded.dtype, device=padded.device),
                                 persistent=False)  # [V_g]
            self.register_buffer(f"group_sq_norms_{g}", padded.square().sum((1, 2)), persistent=False)  # tr(Y'Y)
        self.q_mean = torch.nn.Parameter(q_mean.clone())  # [N, Q]
        self.register_parameter("raw_q_variance", torch.nn.Parameter(torch.zeros_like(q_variance)))
        self.register_constraint("raw_q_variance", Positive())
        self.q_variance = q_variance  # [N, Q]
        self.inducing_inputs = torch.nn.Parameter(inducing_inputs.clone())  # [1 or V, M, Q]
        self.kernels = torch.nn.ModuleList(kernels)
        self.register_parameter("raw_noise", torch.nn.Parameter(torch.zeros_like(noise)))  # [V]
        # gpytorch makes a constraint's bounds in the default dtype (float32), where a floor above 3e38 (data of
        # scale 1e22) is inf: the floor is set after everything is brought to our dtype
        self.register_constraint("raw_noise", GreaterThan(torch.zeros_like(noise_floor)))
        self.jitter = float(jitter)
        self.to(dtype=q_mean.dtype, device=q_mean.device)
        self.raw_noise_constraint.lower_bound = torch.as_tensor(noise_floor, dtype=q_mean.dtype, device=q_mean.device)
        self.noise = noise

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
        return self.raw_noise_constraint.transform(self.raw_noise)

    @noise.setter
    def noise(self, value):
        value = torch.as_tensor(value, dtype=self.raw_noise.dtype, device=self.raw_noise.device)
        with torch.no_grad():
            self.raw_noise.copy_(self.raw_noise_constraint.inverse_transform(value))

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

    def _same_rows(self, u: int, v: int) -> bool:
        a, b = self.observed(u), self.observed(v)
        if a is None or b is None:
            return a is None and b is None
        return a.shape == b.shape and bool(torch.equal(a, b))

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
        return collapsed_bound(self.outputs(v), self.noise[v], self.kuu(v), stats.psi0, stats.psi1, stats.psi2)

    def kl(self, q_variance: torch.Tensor | None = None) -> torch.Tensor:
        """KL(q(X) || p(X)) under the module's latent prior (N(0, I) unless one was given)."""
        return self.latent_prior.kl(self.q_mean, self.q_variance if q_variance is None else q_variance)

    def view_bounds(self, q_variance: torch.Tensor | None = None) -> torch.Tensor:
        """F_v of every view [V] (without the KL term).

        When every kernel is ``rbf (+ bias) (+ white)`` on all latent dimensions (the default), the
        views that observe the same entities go through one :class:`~bayesalign.gp.bound.RBFViewsBound`
        (all views at once when every view observes every entity); otherwise view by view through
        :meth:`view_bound`. Both give the same values and gradients (tested).
        """
        S = self.q_variance if q_variance is None else q_variance
        parts = self._rbf_parts()
        if parts is None:
            return torch.stack([self.view_bound(v, S) for v in range(self.n_views)])
        variance, lengthscale, bias, white = parts
        bounds = []
        for g, views in enumerate(self._groups):
            take = self._group_index(views)
            mu, S_g = self.view_latent(views[0], S)
            Z = self.inducing_inputs
            if Z.shape[0] > 1 and take is not None:
                Z = Z[take]
            chunk = default_chunk_size(mu.shape[0], Z.shape[1], mu.device, len(views))
            bounds.append(RBFViewsBound.apply(
                _take(variance, take), _take(lengthscale, take), _take(bias, take), _take(white, take),
                _take(self.noise, take), mu, S_g, Z, getattr(self, f"group_outputs_{g}"),
                getattr(self, f"group_widths_{g}"), getattr(self, f"group_sq_norms_{g}"), self.jitter, chunk))
        if len(self._groups) == 1:
            return bounds[0]
        order = torch.tensor([v for views in self._groups for v in views], device=self.q_mean.device)
        return torch.cat(bounds)[torch.argsort(order)]

    def _group_index(self, views: list[int]) -> torch.Tensor | None:
        """Index of a group's views into the [V] stacks (None: the group is every view, in order)."""
        if views == list(range(self.n_views)):
            return None
        return torch.tensor(views, device=self.q_mean.device)

    def _view_terms(self) -> list:
        """Each view's kernel as :func:`~bayesalign.gp.kernels._kernel_terms` (the structure of the kernels
        never changes after construction: computed once)."""
        if getattr(self, "_kernel_terms_cache", None) is None:
            self._kernel_terms_cache = [_kernel_terms(kernel) for kernel in self.kernels]
        return self._kernel_terms_cache

    def _rbf_parts(self):
        """(variance [V], lengthscale [V, Q], bias [V], white [V]) when every kernel is rbf (+ bias) (+ white);
        bias (white) is None when no view has that term."""
        Q = self.q_mean.shape[1]
        like = self.q_mean
        parts = []
        for terms in self._view_terms():
            part = _rbf_parts(terms, Q, like)
            if part is None:
                return None
            parts.append(part)
        zero = like.new_zeros(())

        def stacked(values):  # [V], or None when no view has the term
            return None if all(v is None for v in values) else torch.stack([zero if v is None else v for v in values])

        return (torch.stack([p.variance for p in parts]), torch.stack([p.lengthscale for p in parts]),
                stacked([p.bias for p in parts]), stacked([p.white for p in parts]))

    def _hand_chained(self):
        """``(q_variance, noise, [_RBFRaw per view])`` as :class:`~bayesalign.gp.kernels.LowerBounded`
        parameters when :meth:`evaluate_with_gradient` can chain the gradient by hand, else None (the
        kernels and constraints never change after construction: cached)."""
        if not hasattr(self, "_hand_chained_cache"):
            Q = self.q_mean.shape[1]
            views = [_rbf_raw(terms, Q) for terms in self._view_terms()]
            own = [lower_bounded(self, "q_variance"), lower_bounded(self, "noise")]
            ok = all(p is not None for p in views + own)
            self._hand_chained_cache = (own[0], own[1], views) if ok else None
        return self._hand_chained_cache

    def evaluate_with_gradient(self) -> float:
        """The bound, with ``.grad`` of every parameter set to the gradient of the *negative* bound
        (what a minimiser wants).

        When every kernel is ``ScaleKernel(RBF) (+ bias) (+ white)`` with softplus or exp
        constraints (the default), there is no autograd graph: the bound and its gradients in the
        transformed hyperparameters come from :func:`~bayesalign.gp.bound.views_bound_forward` /
        :func:`~bayesalign.gp.bound.views_bound_backward` (the code of
        :class:`~bayesalign.gp.bound.RBFViewsBound`), the KL term's gradient is ``mu`` and
        ``(1 - 1/S) / 2``, and the chain rule to the raw parameters is ``d value / d raw`` of each
        constraint (:class:`~bayesalign.gp.kernels.LowerBounded`). At the reference size the
        autograd engine is about a fifth of an evaluation. Otherwise it is ``forward()`` and
        autograd. Both give the same values and gradients (tested).
        """
        plan = self._hand_chained()
        if plan is None:
            for p in self.parameters():
                p.grad = None
            bound = self()
            (-bound).backward()
            return bound.item()
        value = self._hand_chained_bound(plan)
        if self.has_priors():  # log p(theta) through autograd, its gradient added to the bound's
            log_prior = self.log_prior()
            if log_prior.requires_grad:
                (-log_prior).backward()
            value += log_prior.item()
        return value

    def _hand_chained_bound(self, plan) -> float:
        """The bound (no prior) with ``.grad`` set by hand (see :meth:`evaluate_with_gradient`)."""
        q_variance, noise_param, views = plan
        with torch.no_grad():
            mu, Z = self.q_mean, self.inducing_inputs
            S, dS = q_variance.value_and_slope()
            noise, d_noise = noise_param.value_and_slope()
            Q = mu.shape[1]
            scales = [v.outputscale.value_and_slope() for v in views]
            lengths = [v.lengthscale.value_and_slope() for v in views]
            biases = [[b.value_and_slope() for b in v.biases] for v in views]
            whites = [[w.value_and_slope() for w in v.whites] for v in views]
            zero = mu.new_zeros(())

            def summed(terms):  # [V] (each view's terms added), or None when no view has such a term
                if not any(terms):
                    return None
                return torch.stack([sum((value.reshape(()) for value, _ in t), zero) for t in terms])

            variance = torch.stack([value.reshape(()) for value, _ in scales])  # [V]
            lengthscale = torch.stack([value.reshape(-1).expand(Q) for value, _ in lengths])  # [V, Q]
            bias, white = summed(biases), summed(whites)
            value, g_var, g_ls, g_bias, g_white, g_noise, g_mu, g_S, g_Z = self._grouped_bound_and_gradient(
                variance, lengthscale, bias, white, noise, mu, S, Z)
            kl, d_kl_mu, d_kl_S = self.latent_prior.kl_and_gradient(mu, S)
            value = value - kl
            # gradients of -bound = -sum_v F_v + KL (for N(0, I): dKL/dmu = mu, dKL/dS = (1 - 1/S) / 2)
            self._set_grad(self.q_mean, d_kl_mu - g_mu)
            self._set_grad(self.raw_q_variance, (d_kl_S - g_S) * dS)
            self._set_grad(self.inducing_inputs, -g_Z)
            self._set_grad(self.raw_noise, -g_noise * d_noise)
            for v, raw in enumerate(views):
                self._set_grad(raw.outputscale.raw, -g_var[v] * scales[v][1])
                slope = lengths[v][1]
                g = -g_ls[v] * slope.reshape(-1) if slope.numel() == Q else -(g_ls[v].sum() * slope)
                self._set_grad(raw.lengthscale.raw, g)
                for param, (_, slope) in zip(raw.biases, biases[v]):
                    self._set_grad(param.raw, -g_bias[v] * slope)
                for param, (_, slope) in zip(raw.whites, whites[v]):
                    self._set_grad(param.raw, -g_white[v] * slope)
        return value.item()

    def _grouped_bound_and_gradient(self, variance, lengthscale, bias, white, noise, mu, S, Z):
        """sum_v F_v and its gradients (variance, lengthscale, bias, white, noise [V]-stacked; mu, S [N, Q];
        Z) through :func:`~bayesalign.gp.bound.views_bound_forward` / ``views_bound_backward``, one call per
        group of views observing the same entities; each group's gradients in its rows' q(x) are added
        into the entities' (no autograd graph)."""
        if len(self._groups) == 1 and self._group_index(self._groups[0]) is None:  # every view, every entity
            views = self._groups[0]
            rows = self.observed(views[0])
            mu_g, S_g = (mu, S) if rows is None else (mu[rows], S[rows])
            chunk = default_chunk_size(mu_g.shape[0], Z.shape[1], mu.device, self.n_views)
            F, saved = views_bound_forward(variance, lengthscale, bias, white, noise, mu_g, S_g, Z,
                                           self.group_outputs_0, self.group_widths_0, self.group_sq_norms_0,
                                           self.jitter, chunk)
            g_var, g_ls, g_bias, g_white, g_noise, g_mu, g_S, g_Z = views_bound_backward(saved)
            if rows is not None:
                g_mu = torch.zeros_like(mu).index_add_(0, rows, g_mu)
                g_S = torch.zeros_like(S).index_add_(0, rows, g_S)
            return F.sum(), g_var, g_ls, g_bias, g_white, g_noise, g_mu, g_S, g_Z
        value = mu.new_zeros(())
        g_var, g_ls, g_noise = torch.zeros_like(variance), torch.zeros_like(lengthscale), torch.zeros_like(noise)
        g_bias = None if bias is None else torch.zeros_like(bias)
        g_white = None if white is None else torch.zeros_like(white)
        g_mu, g_S, g_Z = torch.zeros_like(mu), torch.zeros_like(S), torch.zeros_like(Z)
        for g, views in enumerate(self._groups):
            take = self._group_index(views)
            rows = self.observed(views[0])
            mu_g, S_g = (mu, S) if rows is None else (mu[rows], S[rows])
            Z_g = Z[take] if Z.shape[0] > 1 else Z
            chunk = default_chunk_size(mu_g.shape[0], Z.shape[1], mu.device, len(views))
            F, saved = views_bound_forward(
                variance[take], lengthscale[take], _take(bias, take), _take(white, take), noise[take], mu_g, S_g,
                Z_g, getattr(self, f"group_outputs_{g}"), getattr(self, f"group_widths_{g}"),
                getattr(self, f"group_sq_norms_{g}"), self.jitter, chunk)
            grads = views_bound_backward(saved)
            value = value + F.sum()
            g_var[take] += grads[0]
            g_ls[take] += grads[1]
            if g_bias is not None:
                g_bias[take] += grads[2]
            if g_white is not None:
                g_white[take] += grads[3]
            g_noise[take] += grads[4]
            if rows is None:
                g_mu += grads[5]
                g_S += grads[6]
            else:
                g_mu.index_add_(0, rows, grads[5])
                g_S.index_add_(0, rows, grads[6])
            if Z.shape[0] > 1:
                g_Z[take] += grads[7]
            else:
                g_Z += grads[7]
        return value, g_var, g_ls, g_bias, g_white, g_noise, g_mu, g_S, g_Z

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

    @staticmethod
    def _set_grad(param, grad):
        if param.requires_grad:
            param.grad = grad.reshape(param.shape).to(param.dtype)

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


def _take(values: torch.Tensor | None, index: torch.Tensor | None) -> torch.Tensor | None:
    """values[index] (None: all of them; values None stays None)."""
    return values if values is None or index is None else values[index]
