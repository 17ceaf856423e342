"""What BayesianGPLVM and MRD share: the torch module that holds q(X), the inducing inputs, one
kernel and one noise variance per view and evaluates the bound, and the estimator base class (fit,
relevance, predict, infer, save / load).

The model (Titsias & Lawrence, 2010; Damianou et al., 2012): one latent point x_n ~ N(0, I_Q) per
row, shared by every view; view v is y_n^(v) = f^(v)(x_n) + noise with f^(v) ~ GP(0, k^(v)) with its
own ARD kernel and noise variance. q(X) = prod_n N(mu_n, diag(S_n)) is shared by every view; the
bound is ``sum_v F_v(q(X), Z_v, k_v, noise_v) - KL(q(X) || N(0, I))`` (:mod:`bayesalign.gp.bound`).
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Mapping, Sequence

import gpytorch
import numpy as np
import torch
from gpytorch.constraints import GreaterThan, Positive
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning

from .._utils import as_rng
from ..data import AlignmentProblem, LatentEmbedding, Views, check_view
from . import _optim
from .bound import (
    InducingPosterior,
    RBFViewsBound,
    collapsed_bound,
    inducing_posterior,
    kernel_matrix,
    kl_standard_normal,
    stable_cholesky,
    views_bound_backward,
    views_bound_forward,
)
from .functions.rbf_psi2 import default_chunk_size
from .kernels import (
    _kernel_terms,
    _latent_symmetries,
    _rbf_parts,
    _rbf_raw,
    ard_relevance,
    lower_bounded,
    make_kernel,
)
from .psi import psi_statistics

_INITS = ("pca", "pca_split", "cca", "random")


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
        \mathcal{F} = \sum_v F_v\big(Y_v;\ q(X)[\mathrm{obs}_v]\big) - \mathrm{KL}\big(q(X) \,\|\, N(0, I)\big),

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
    """

    def __init__(self, outputs, q_mean, q_variance, inducing_inputs, kernels, noise, noise_floor,
                 jitter: float, observed=None):
        super().__init__()
        self.n_views = len(outputs)
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
        self.register_constraint("raw_noise", GreaterThan(noise_floor))
        self.jitter = float(jitter)
        # gpytorch constraints keep their bounds in the default dtype: bring everything to ours
        self.to(dtype=q_mean.dtype, device=q_mean.device)
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
        return kl_standard_normal(self.q_mean, self.q_variance if q_variance is None else q_variance)

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
            value = value - kl_standard_normal(mu, S)
            # gradients of -bound = -sum_v F_v + KL; KL = sum (mu^2 + S - log S - 1) / 2
            self._set_grad(self.q_mean, mu - g_mu)
            self._set_grad(self.raw_q_variance, (0.5 - 0.5 / S - g_S) * dS)
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
        if self.has_priors():
            return 0.0
        Q = self.q_mean.shape[1]
        symmetries = [_latent_symmetries(terms, Q) for terms in self._view_terms()]
        if any(s is None for s in symmetries):
            return 0.0
        shiftable = torch.stack([s[1] for s in symmetries]).all(0).to(self.q_mean.device)  # [Q]
        seen = self._seen_entities()  # entities no view observes are at their optimum, the prior: left alone
        mu, S = self.q_mean, self.q_variance  # [N, Q]
        if seen is not None:
            mu, S = mu[seen], S[seen]
        shift = torch.where(shiftable, mu.mean(0), torch.zeros_like(mu[0]))  # [Q]
        centred = mu - shift
        scale = (mu.shape[0] / (centred.square() + S).sum(0)).sqrt()  # [Q]
        if not bool(torch.isfinite(scale).all() & (scale > 0).all()):
            return 0.0
        before = float(self.kl())
        if seen is None:
            self.q_mean.copy_(centred * scale)
            self.q_variance = S * scale.square()
        else:
            self.q_mean[seen] = centred * scale
            variance = self.q_variance.clone()
            variance[seen] = S * scale.square()
            self.q_variance = variance
        self.inducing_inputs.copy_((self.inducing_inputs - shift) * scale)
        for rescaled, _ in symmetries:
            for leaf, cols, attribute, power in rescaled:
                value = getattr(leaf, attribute)  # [1, d]
                setattr(leaf, attribute, value * scale[cols.to(scale.device)].to(value).pow(power))
        return before - float(self.kl())

    @staticmethod
    def _set_grad(param, grad):
        if param.requires_grad:
            param.grad = grad.reshape(param.shape).to(param.dtype)

    def forward(self) -> torch.Tensor:
        """The objective ``sum_v F_v - KL(q(X) || N(0, I)) + log p(theta)``: the bound (the KL counted once)
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


# ----------------------------------------------------------------------------------------------------
# Input preparation and initialisation
# ----------------------------------------------------------------------------------------------------
def as_paired_views(data) -> tuple[list[str], list[np.ndarray]]:
    """Names and validated float64 arrays of paired views (Views, dict, list, AlignmentProblem)."""
    names, arrays = as_views(data)
    sizes = {name: a.shape[0] for name, a in zip(names, arrays)}
    if len(set(sizes.values())) > 1:
        common = max(set(sizes.values()), key=list(sizes.values()).count)
        odd = {k: n for k, n in sizes.items() if n != common}
        raise ValueError(f"the views must be paired (row i of every view is the same point), but their "
                         f"numbers of rows differ: {sizes}; {sorted(odd)} differ from {common} rows "
                         "(pass observed= to fit views of different entities)")
    return names, arrays


def as_views(data) -> tuple[list[str], list[np.ndarray]]:
    """Names and validated float64 arrays of views of any numbers of rows (Views, dict, list, AlignmentProblem)."""
    if isinstance(data, AlignmentProblem):
        data = data.views
    if isinstance(data, Views):
        names, arrays = list(data.names), [data[name] for name in data.names]
    elif isinstance(data, Mapping):
        names = list(data)
        for name in names:
            if not isinstance(name, str) or not name:
                raise TypeError(f"view names must be non-empty strings, got {name!r}")
        arrays = [check_view(data[name], name) for name in names]
    elif isinstance(data, (list, tuple)):
        names = [f"view{i}" for i in range(len(data))]
        arrays = [check_view(a, name) for name, a in zip(names, data)]
    else:
        raise TypeError("expected Views, an AlignmentProblem, or a dict / list of 2-D arrays, got "
                        f"{type(data).__name__} (use BayesianGPLVM for a single array)")
    if not arrays:
        raise ValueError("no views given")
    return names, arrays


def check_observed(observed, names: list[str], arrays: list[np.ndarray],
                   n_entities=None) -> tuple[list[np.ndarray | None], int]:
    """The entity index [N_v] of every row of each view (None: row n is entity n) and the number of entities.

    ``observed``: a dict view name -> 1-D integer array (or None), or a sequence with one entry per
    view. An entity index may repeat within a view (two rows observing the same entity).
    """
    sizes = [a.shape[0] for a in arrays]
    if observed is None:
        out = [None] * len(names)
    elif isinstance(observed, Mapping):
        unknown = [k for k in observed if k not in names]
        if unknown:
            raise ValueError(f"observed names views {unknown} that are not among the views {names}")
        out = [observed.get(name) for name in names]
    elif isinstance(observed, (list, tuple)):
        if len(observed) != len(names):
            raise ValueError(f"observed has {len(observed)} entries for {len(names)} views")
        out = list(observed)
    else:
        raise TypeError(f"observed must be a dict view -> entity indices or a list with one per view, "
                        f"got {type(observed).__name__}")
    checked = []
    for name, size, rows in zip(names, sizes, out):
        if rows is None:
            checked.append(None)
            continue
        rows = rows.detach().cpu().numpy() if torch.is_tensor(rows) else np.asarray(rows)
        if rows.ndim != 1 or rows.shape[0] != size:
            raise ValueError(f"observed[{name!r}] must be 1-D with one entity index per row of the view "
                             f"({size}), got shape {rows.shape}")
        if rows.dtype == bool or not np.issubdtype(rows.dtype, np.integer):
            raise ValueError(f"observed[{name!r}] must hold integer entity indices, got dtype {rows.dtype}")
        if size and (rows.min() < 0 or rows.max() >= 2**62):
            bad = int(np.flatnonzero((rows < 0) | (rows >= 2**62))[0])
            raise ValueError(f"observed[{name!r}] row {bad}: entity index {rows[bad]} is negative or too large")
        checked.append(rows.astype(np.int64))
    largest = max([int(r.max()) + 1 for r in checked if r is not None and r.size]
                  + [n for n, r in zip(sizes, checked) if r is None])
    if n_entities is None:
        n_entities = largest
    if not isinstance(n_entities, (int, np.integer)) or isinstance(n_entities, bool) or n_entities < largest:
        raise ValueError(f"n_entities must be an int >= {largest} (the largest entity index + 1, and the rows of "
                         f"every view without observed), got {n_entities!r}")
    for name, size, rows in zip(names, sizes, checked):
        if rows is None and size != n_entities:
            raise ValueError(f"view {name!r} has no observed indices, so its {size} rows must be the "
                             f"{n_entities} entities")
    # every view observes every entity in order: the paired model, stored as such
    if all(r is None or (r.size == n_entities and np.array_equal(r, np.arange(n_entities))) for r in checked):
        checked = [None] * len(names)
    return checked, int(n_entities)


def complete_views(centred: list[np.ndarray], observed: list[np.ndarray | None], n_entities: int, rank: int,
                   max_iter: int = 100, tol: float = 1e-6) -> list[np.ndarray]:
    """Every view's centred outputs per entity [n_entities, D_v], the entities a view does not observe
    filled in by a rank-``rank`` SVD of the concatenated views (hard impute: fill, truncate the SVD,
    refill the missing blocks, repeat; Mazumder, Hastie & Tibshirani, 2010). An entity seen twice
    in a view gets the mean of its rows. Gives the "pca" / "pca_split" / "cca" initialisations
    their complete rows under partial observation."""
    scaled, masks = [], []
    for Y, rows in zip(centred, observed):
        Y = Y / math.sqrt(max(float(np.square(Y).sum()) / Y.shape[0], 1e-300))  # equal weight per view
        if rows is None:
            scaled.append(Y)
            masks.append(np.ones(n_entities, dtype=bool))
            continue
        counts = np.bincount(rows, minlength=n_entities)  # [n_entities]
        block = np.zeros((n_entities, Y.shape[1]))
        np.add.at(block, rows, Y)
        seen = counts > 0
        block[seen] /= counts[seen, None]
        scaled.append(block)
        masks.append(seen)
    full = np.hstack(scaled)  # [n_entities, sum D]
    missing = np.hstack([np.repeat(~m[:, None], Y.shape[1], axis=1) for m, Y in zip(masks, scaled)])
    rank = max(1, min(rank, min(full.shape) - 1))
    for _ in range(max_iter):
        U, s, Vt = np.linalg.svd(full, full_matrices=False)
        low = (U[:, :rank] * s[:rank]) @ Vt[:rank]
        change = np.square(low[missing] - full[missing]).sum() / max(np.square(full).sum(), 1e-300)
        full[missing] = low[missing]
        if change < tol:
            break
    out, start = [], 0
    for Y, block in zip(centred, scaled):
        width = block.shape[1]
        part = full[:, start:start + width]
        out.append(part * math.sqrt(max(float(np.square(Y).sum()) / Y.shape[0], 1e-300)))
        start += width
    return out


def centre_view(Y: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Centred non-constant columns [N, D_kept], the column means [D] and the kept-column mask [D].

    Constant columns carry no information and would give a zero-variance output; they are dropped
    with a warning and predicted as their constant.
    """
    mean = Y.mean(0)  # [D]
    keep = np.ptp(Y, axis=0) > 0  # [D]
    if not keep.any():
        raise ValueError(f"view {name!r}: every column is constant; nothing to model")
    if not keep.all():
        dropped = np.flatnonzero(~keep)
        warnings.warn(f"view {name!r}: dropping {dropped.size} constant column(s) {dropped[:10].tolist()}"
                      f"{' ...' if dropped.size > 10 else ''}; they are predicted as their constant",
                      RuntimeWarning, stacklevel=3)
    return Y[:, keep] - mean[keep], mean, keep


def _pca_scores(blocks: list[np.ndarray], n_components: int) -> np.ndarray:
    """Top principal-component scores [N, n] of the column-concatenated centred blocks."""
    data = np.hstack(blocks)  # [N, sum D]
    U, s, Vt = np.linalg.svd(data, full_matrices=False)
    # deterministic signs (as sklearn's svd_flip): largest loading of each component positive
    signs = np.sign(Vt[np.arange(Vt.shape[0]), np.abs(Vt).argmax(1)])
    signs[signs == 0] = 1.0
    return (U[:, :n_components] * s[:n_components]) * signs[:n_components]


#: Fraction of a view's variance its whitened principal subspace keeps in the "cca" initialisation.
CCA_VARIANCE_KEPT = 0.95
#: Canonical correlation (its generalisation to V views, see cca_latent) above which a direction is shared.
CCA_SHARED_CORRELATION = 0.5


def _principal_basis(block: np.ndarray, kept: float) -> np.ndarray:
    """Orthonormal basis [N, k] of the fewest principal components of ``block`` holding ``kept`` of its variance."""
    U, s, _ = np.linalg.svd(block, full_matrices=False)
    power = np.square(s)
    k = int(np.searchsorted(np.cumsum(power), kept * power.sum() * (1.0 - 1e-12))) + 1
    return U[:, :min(k, s.size)]


def cca_latent(blocks: list[np.ndarray], latent_dim: int, names: Sequence[str] | None = None,
               kept: float = CCA_VARIANCE_KEPT, threshold: float = CCA_SHARED_CORRELATION):
    r"""Latent coordinates [N, Q] with the views' shared directions first, then each view's private ones.

    The shared part is generalised CCA (MAXVAR; Kettenring, 1971): with :math:`U_v` [N, k_v] an
    orthonormal basis of view v's principal subspace (the fewest components holding ``kept`` of its
    variance: whitening the whole view would make chance correlations large when D_v is not small
    against N), the canonical directions are the left singular vectors :math:`g_i` of
    :math:`[U_1, \dots, U_V]` and their correlations :math:`(\sigma_i^2 - 1) / (V - 1)`: 1 for a
    direction in every view's subspace, 0 for one in a single view's, and for two views Hotelling's
    canonical correlation (:math:`\sigma_i^2 = 1 + \rho_i`). The directions with correlation above
    ``threshold`` span the shared subspace. The candidate dimensions are the principal components
    of the views within it (shared) and of each view outside it (private to that view); the Q that
    explain the most of the views' variance (a shared one: the mean fraction over the views; a
    private one: its fraction of its view / V) are kept, shared ones first, then each view's, in
    view order. This is PCA of the concatenated views (each scaled to unit total variance)
    constrained to axes that are either shared or private. Every dimension is a unit-variance
    score times the square root of the fraction it explains (of its own view for a private one), so
    weak directions start small, as PCA scores do.

    The point is the start of MRD's optimisation: the ARD kernels must split the latent space into
    shared and private parts, and a PCA of the concatenated views mixes them, which L-BFGS then has
    to undo by moving every point (``benchmarks/bench_mrd.py --large``).

    Parameters
    ----------
    blocks : list of arrays [N, D_v]
        Centred views (scaled to equal total variance by the caller, or not).
    latent_dim : int
    names : view names (for ``owners`` and error messages; default "0", "1", ...).
    kept, threshold : float
        See above.

    Returns
    -------
    X : array [N, Q]
    correlations : array
        The correlation of every canonical direction (above), largest first.
    owners : list
        For each dimension, None if it is shared, else the name of the view it is private to.

    Examples
    --------
    Two views that share one column (twice as large in the second):

    >>> rng = np.random.default_rng(0)
    >>> t = rng.normal(size=(200, 1))
    >>> a, b = np.c_[t, rng.normal(size=(200, 1))], np.c_[2 * t, rng.normal(size=(200, 1))]
    >>> X, correlations, owners = cca_latent([a - a.mean(0), b - b.mean(0)], 3, names=["a", "b"])
    >>> owners, correlations.round(2).tolist(), round(float(abs(np.corrcoef(X[:, 0], t[:, 0])[0, 1])), 6)
    ([None, 'a', 'b'], [1.0, 0.06, -0.06, -1.0], 1.0)
    """
    V = len(blocks)
    names = list(names) if names is not None else [str(v) for v in range(V)]
    if V < 2:
        raise ValueError("init='cca' needs at least two views (it finds what they share); use 'pca'")
    N = blocks[0].shape[0]
    bases = [_principal_basis(b, kept) for b in blocks]
    G, sigma, _ = np.linalg.svd(np.hstack(bases), full_matrices=False)  # [N, sum k_v]
    correlations = (np.square(sigma) - 1.0) / (V - 1)
    span = G[:, :int(np.sum(correlations > threshold))]  # [N, r] the shared subspace, orthonormal
    totals = np.array([max(float(np.square(b).sum()), 1e-300) for b in blocks])  # [V]

    def components(matrix):
        """Left singular vectors [N, k] and singular values [k] of the numerical rank of ``matrix``."""
        U, s, _ = np.linalg.svd(matrix, full_matrices=False)
        keep = s > (s[0] if s.size else 0.0) * max(matrix.shape) * np.finfo(float).eps
        keep[min(N - 1, s.size):] = False
        return U[:, keep], s[keep]

    # candidates: the principal components of the views within the shared subspace, and of each
    # view outside it; each scores the fraction of the views' variance it explains (mean over views)
    shared, _ = components(span @ (span.T @ np.hstack([b / math.sqrt(t) for b, t in zip(blocks, totals)])))
    shared_fraction = np.mean([np.square(b.T @ shared).sum(0) / t for b, t in zip(blocks, totals)], axis=0)
    private = [components(b - span @ (span.T @ b)) for b in blocks]
    private_fraction = [np.square(s) / t for (_, s), t in zip(private, totals)]  # of its own view
    scores = np.concatenate([shared_fraction] + [f / V for f in private_fraction])
    if scores.size < latent_dim:
        raise ValueError(f"latent_dim={latent_dim} is larger than init='cca' allows here: {shared.shape[1]} shared "
                         f"and {dict(zip(names, (U.shape[1] for U, _ in private)))} private dimensions per view; "
                         "use a smaller latent_dim, 'random' or an array")
    chosen = np.zeros(scores.size, dtype=bool)
    chosen[np.argsort(-scores, kind="stable")[:latent_dim]] = True
    n_shared = int(chosen[:shared.shape[1]].sum())
    columns = [shared[:, :n_shared] * np.sqrt(N * shared_fraction[:n_shared])]
    owners = [None] * n_shared
    offset = shared.shape[1]
    for name, (U, _), fraction in zip(names, private, private_fraction):
        k = int(chosen[offset:offset + fraction.size].sum())  # the largest ones of this view
        columns.append(U[:, :k] * np.sqrt(N * fraction[:k]))
        owners += [name] * k
        offset += fraction.size
    X = np.hstack(columns)
    # deterministic signs (SVD signs depend on the LAPACK build): each column's largest entry positive
    X *= np.where(X[np.abs(X).argmax(0), np.arange(X.shape[1])] < 0, -1.0, 1.0)
    return X, correlations, owners


def entity_means_from_embedding(init: LatentEmbedding, names: list[str], observed: list, n_entities: int,
                                latent_dim: int) -> np.ndarray:
    """Initial q(X) means [n_entities, Q] from a LatentEmbedding whose views have the rows of the fitted
    views: each entity gets the mean of its rows' coordinates (0 where no view observes it), then the
    common centring and scaling of :func:`init_latent`."""
    total = np.zeros((n_entities, latent_dim))
    counts = np.zeros(n_entities)
    used = []
    for name, rows in zip(names, observed):
        means = init.means.get(name)
        if means is None:
            continue
        size = n_entities if rows is None else rows.size
        if means.shape[0] != size:
            raise ValueError(f"init embedding of view {name!r} has {means.shape[0]} rows, the view {size}")
        if means.shape[1] != latent_dim:
            raise ValueError(f"init embedding has {means.shape[1]} dimensions, latent_dim is {latent_dim}")
        index = np.arange(n_entities) if rows is None else rows
        np.add.at(total, index, means)
        np.add.at(counts, index, 1.0)
        used.append(name)
    if not used:
        raise ValueError(f"init embedding has none of the views {names}")
    X = np.where(counts[:, None] > 0, total / np.maximum(counts, 1.0)[:, None], 0.0)
    X = X - X[counts > 0].mean(0)
    X[counts == 0] = 0.0
    scale = X.std(0).max()
    return X / scale if scale > 0 else X


def init_latent(init, names: list[str], centred: list[np.ndarray], latent_dim: int, seed,
                n_rows: int | None = None) -> np.ndarray:
    """Initial q(X) means [N, Q] (see the ``init`` parameter of :class:`MRD`); ``n_rows`` (default: the
    rows of the first view) is N for the "random" and array initialisations."""
    N = centred[0].shape[0] if n_rows is None else n_rows
    if isinstance(init, LatentEmbedding):
        means = [m for m in init.means.values() if m.shape[0] == N]
        if not means:
            raise ValueError(f"init embedding has no view with {N} rows")
        X = np.mean(means, axis=0)
        if X.shape[1] != latent_dim:
            raise ValueError(f"init embedding has {X.shape[1]} dimensions, latent_dim is {latent_dim}")
        X = X - X.mean(0)
        scale = X.std(0).max()
        return X / scale if scale > 0 else X
    if not isinstance(init, str):
        X = np.array(init, dtype=np.float64, copy=True)
        if X.shape != (N, latent_dim):
            raise ValueError(f"init array must have shape (n_samples, latent_dim) = {(N, latent_dim)}, "
                             f"got {X.shape}")
        if not np.isfinite(X).all():
            raise ValueError("init array contains NaN or inf")
        return X
    if init not in _INITS:
        raise ValueError(f"init must be one of {_INITS}, a LatentEmbedding or an array, got {init!r}")
    if init == "random":
        return as_rng(seed).standard_normal((N, latent_dim))
    # every view scaled to unit total variance, so that a view with many columns does not dominate
    blocks = [Y / math.sqrt(max(float(np.square(Y).sum()) / N, 1e-300)) for Y in centred]
    if init == "pca":
        limit = min(N - 1, sum(b.shape[1] for b in blocks))
        if latent_dim > limit:
            raise ValueError(f"latent_dim={latent_dim} is larger than PCA initialisation allows: at most "
                             f"min(n_samples - 1, total columns) = {limit}; use init='random' or an array")
        X = _pca_scores(blocks, latent_dim)
    elif init == "cca":
        X = cca_latent(blocks, latent_dim, names)[0]
    else:  # pca_split: each view gives its share of the dimensions
        chunks = np.array_split(np.arange(latent_dim), len(blocks))
        X = np.zeros((N, latent_dim))
        for name, block, dims in zip(names, blocks, chunks):
            limit = min(N - 1, block.shape[1])
            if dims.size > limit:
                raise ValueError(f"latent_dim={latent_dim} split over {len(blocks)} views gives view {name!r} "
                                 f"{dims.size} dimensions, more than its PCA allows ({limit})")
            if dims.size:
                X[:, dims] = _pca_scores([block], dims.size)
    # one common scale (the largest component gets unit variance): the smaller components start
    # small, so that the kernels see them as less relevant, like GPy's 1 / fraction lengthscales
    scale = X.std(0).max()
    return X / scale if scale > 0 else X


# ----------------------------------------------------------------------------------------------------
# The estimator base
# ----------------------------------------------------------------------------------------------------
class LatentGPBase(BaseEstimator):
    """Fit / predict / infer / save for BayesianGPLVM and MRD (see :class:`bayesalign.gp.MRD`)."""

    _method = "MRD"

    # -- parameters -----------------------------------------------------------------------------
    def _check_params(self):
        if not isinstance(self.latent_dim, (int, np.integer)) or self.latent_dim < 1:
            raise ValueError(f"latent_dim must be an int >= 1, got {self.latent_dim!r}")
        if not isinstance(self.num_inducing, (int, np.integer)) or self.num_inducing < 1:
            raise ValueError(f"num_inducing must be an int >= 1, got {self.num_inducing!r}")
        if not self.snr > 0:
            raise ValueError(f"snr must be positive, got {self.snr!r}")
        if self.warmup_iters < 0 or self.max_iter < 0:
            raise ValueError("warmup_iters and max_iter must be >= 0")
        if self.optimizer not in ("lbfgs", "adam"):
            raise ValueError(f"optimizer must be 'lbfgs' or 'adam', got {self.optimizer!r}")
        if getattr(self, "inducing", "shared") not in ("shared", "per_view"):
            raise ValueError(f"inducing must be 'shared' or 'per_view', got {self.inducing!r}")
        if not self.init_variance > 0:
            raise ValueError(f"init_variance must be positive, got {self.init_variance!r}")
        after = self.precondition_after
        if after is not None and (not isinstance(after, (int, np.integer)) or isinstance(after, bool) or after < 0):
            raise ValueError(f"precondition_after must be None or an int >= 0, got {after!r}")
        memory = self.lbfgs_memory
        if not isinstance(memory, (int, np.integer)) or isinstance(memory, bool) or memory < 1:
            raise ValueError(f"lbfgs_memory must be an int >= 1, got {memory!r}")
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
    def _fit_views(self, names: list[str], arrays: list[np.ndarray], observed=None, n_entities=None):
        dtype, device = self._check_params()
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
        if partial and isinstance(self.init, LatentEmbedding):
            X0 = entity_means_from_embedding(self.init, names, observed, N, Q)
        elif partial and isinstance(self.init, str) and self.init != "random":
            X0 = init_latent(self.init, names, complete_views(centred, observed, N, Q), Q, self.seed)  # [N, Q]
        else:
            X0 = init_latent(self.init, names, centred, Q, self.seed, n_rows=N)  # [N, Q]
        unseen = np.setdiff1d(np.arange(N), seen)  # entities no view observes start (and stay) at the prior
        X0 = X0.copy()
        X0[unseen] = 0.0
        q_variance = np.full((N, Q), float(self.init_variance))
        q_variance[unseen] = 1.0
        rng = as_rng(self.seed)
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
        best, bounds = None, []
        for restart in range(n_restarts):
            # restart 0 starts at the initialisation itself; the others at a jittered copy (30% of each
            # latent dimension's spread) with their own inducing inputs, as GPy's optimize_restarts
            X = X0 if restart == 0 else X0 + 0.3 * X0.std(0) * rng.standard_normal(X0.shape)  # [N, Q]
            X[unseen] = 0.0
            Z0 = X[seen[rng.choice(seen.size, size=M, replace=False)]]  # [M, Q] among the observed entities
            self.module_ = LatentGPModule(
                outputs=[tensor(Y) for Y in centred], q_mean=tensor(X),
                q_variance=tensor(q_variance),
                inducing_inputs=tensor(np.repeat(Z0[None], n_z, axis=0)),
                kernels=self._make_kernels(len(names), variances, dtype, device),
                noise=tensor(noise), noise_floor=tensor(floor), jitter=self._jitter(dtype),
                observed=[None if rows is None else torch.as_tensor(rows, device=device) for rows in observed])
            self.history_ = np.zeros(0)
            self.history_seconds_ = np.zeros(0)
            self.n_warmup_ = 0
            self.n_iter_ = 0
            self.converged_ = False
            self._interrupted = False
            self._optimise(self.max_iter)
            bounds.append(self.elbo())
            state = {k: getattr(self, k) for k in ("module_", "history_", "history_seconds_", "n_warmup_", "n_iter_",
                                                   "converged_")}
            if best is None or bounds[-1] > best[0]:
                best = (bounds[-1], state)
            if self._interrupted:  # KeyboardInterrupt: keep the best fit so far, run no more restarts
                break
        for key, value in best[1].items():
            setattr(self, key, value)
        self.restart_bounds_ = np.asarray(bounds)
        self.interrupted_ = self._interrupted
        if self.interrupted_:  # the best fit so far is kept (and warned about); Ctrl-C goes on to the caller
            raise KeyboardInterrupt
        if self.max_iter > 0 and not self.converged_:
            warnings.warn(f"{self._method} stopped after {self.n_iter_} bound evaluations (max_iter={self.max_iter}) "
                          f"before the optimiser's tolerance (tol={self.tol}); the fit may be far from an optimum "
                          "(converged_ is False): raise max_iter", ConvergenceWarning, stacklevel=3)
        return self

    def _optimise(self, max_iter: int):
        """Warm-up with the noise fixed (GPy issue #286: otherwise the noise may absorb the signal),
        then all parameters; ``max_iter`` bound evaluations in all. Every restart of L-BFGS (after
        the warm-up, before the preconditioned phase, a continued fit) starts with the exact step of
        :meth:`LatentGPModule.normalise_latent`."""
        module = self.module_
        history = list(self.history_)
        seconds = list(self.history_seconds_)
        params = [p for name, p in module.named_parameters() if name != "raw_noise"]

        closure = module.evaluate_with_gradient

        warmup = min(int(self.warmup_iters), int(max_iter)) if self.n_iter_ == 0 else 0
        main = int(max_iter) - warmup
        after = main if self.precondition_after is None else min(int(self.precondition_after), main)
        # (parameters, evaluations, description, preconditioned)
        phases = [(params, warmup, f"{self._method} warm-up", False),
                  (params + [module.raw_noise], after, self._method, False),
                  (params + [module.raw_noise], main - after, f"{self._method} preconditioned", True)]
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
    def _check_fitted(self):
        if not hasattr(self, "module_"):
            raise AttributeError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def _view_index(self, view) -> int:
        self._check_fitted()
        if isinstance(view, (int, np.integer)) and not isinstance(view, bool):
            if not -len(self.view_names_) <= view < len(self.view_names_):
                raise IndexError(f"view index {view} out of range for {len(self.view_names_)} views")
            return int(view) % len(self.view_names_)
        if view not in self.view_names_:
            raise KeyError(f"no view named {view!r}; views are {list(self.view_names_)}")
        return self.view_names_.index(view)

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

    def _active(self, threshold: float) -> dict[str, np.ndarray]:
        if not 0 <= threshold < 1:
            raise ValueError(f"threshold is relative to the largest relevance of a view; it must be in [0, 1), "
                             f"got {threshold!r}")
        out = {}
        for name, rel in self.relevance_.items():
            top = rel.max()
            out[name] = rel > threshold * top if top > 0 else np.zeros(rel.shape, dtype=bool)
        return out

    @property
    def latent_(self) -> LatentEmbedding:
        """q(X) as a LatentEmbedding: per view the means and variances of the entities its rows observe,
        in its row order (the same arrays for every view of a paired fit)."""
        self._check_fitted()
        mean = self.module_.q_mean.detach().cpu().numpy()
        var = self.module_.q_variance.detach().cpu().numpy()
        rows = self.observed_
        return LatentEmbedding(means={v: mean[rows[v]] for v in self.view_names_},
                               variances={v: var[rows[v]] for v in self.view_names_},
                               shared_dims=self._shared(self._default_threshold), method=self._method,
                               info={"elbo": self.elbo(), "relevance": self.relevance_})

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

    _default_threshold = 0.05

    def _shared(self, threshold):
        active = self._active(threshold)
        return np.flatnonzero(np.logical_and.reduce(list(active.values())))

    @property
    def noise_variance_(self) -> dict[str, float]:
        """Noise variance per view (of the centred outputs)."""
        self._check_fitted()
        return {name: float(n) for name, n in zip(self.view_names_, self.module_.noise.detach().cpu())}

    # -- prediction and inference ---------------------------------------------------------------
    def _tensor(self, array):
        p = self.module_.q_mean
        return torch.tensor(np.asarray(array, dtype=np.float64), dtype=p.dtype, device=p.device)  # a copy

    def _predict(self, view, X, X_variance=None, include_noise=True, chunk_size=256):
        v = self._view_index(view)
        name = self.view_names_[v]
        Q = self.module_.q_mean.shape[1]
        X = check_view(X, "X")
        if X.shape[1] != Q:
            raise ValueError(f"X has {X.shape[1]} columns, the latent space has {Q}")
        S = np.zeros_like(X) if X_variance is None else check_view(X_variance, "X_variance")
        if S.shape != X.shape:
            raise ValueError(f"X_variance must have the shape of X {X.shape}, got {S.shape}")
        if (S < 0).any():
            raise ValueError("X_variance must be non-negative")
        module = self.module_
        kernel, Z = module.kernels[v], module.inducing(v)
        keep = self.kept_columns_[name]
        with torch.no_grad():
            post = module.posterior(v)
            alpha, W = post.alpha, post.woodbury_inv  # [M, D], [M, M]
            means, variances = [], []
            Xt, St = self._tensor(X), self._tensor(S)
            for start in range(0, X.shape[0], chunk_size):
                # moments of f under q(x*) = N(X, diag(S)) (S = 0: exact GP predictions)
                stats = psi_statistics(kernel, Xt[start:start + chunk_size], St[start:start + chunk_size], Z,
                                       per_point=True)
                mean = stats.psi1 @ alpha  # [n, D]
                second = torch.einsum("md,nmk,kd->nd", alpha, stats.psi2, alpha)  # alpha_d' psi2_n alpha_d
                shared = stats.psi0 - (stats.psi2 * W).sum((-2, -1))  # psi0_n - tr(W psi2_n)   [n]
                var = (second - mean.square() + shared[:, None]).clamp_min(0.0)
                if include_noise:
                    var = var + module.noise[v]
                means.append(mean)
                variances.append(var)
            mean = torch.cat(means).cpu().numpy()
            var = torch.cat(variances).cpu().numpy()
        out_mean = np.tile(self.output_means_[name], (X.shape[0], 1))  # [n, D]
        out_var = np.zeros_like(out_mean)
        out_mean[:, keep] += mean
        out_var[:, keep] = var
        return out_mean, out_var

    def _infer(self, view, Y_new, max_iter=500, tol=1e-10, progress=None, chunk_size=1024, context=None):
        from .inference import infer_latent

        v = self._view_index(view)
        name = self.view_names_[v]
        Y_new = check_view(Y_new, name)
        if Y_new.shape[1] != self.n_features_in_[name]:
            raise ValueError(f"view {name!r}: new rows have {Y_new.shape[1]} columns, the model was fitted "
                             f"with {self.n_features_in_[name]}")
        keep = self.kept_columns_[name]
        Yc = self._tensor(Y_new[:, keep] - self.output_means_[name][keep])
        if context is not None:  # (Y, mean, variance) of earlier rows: centred as the training outputs
            Y_ctx, mean_ctx, var_ctx = context
            Y_ctx = check_view(Y_ctx, f"{name} (context)")
            context = (self._tensor(mean_ctx), self._tensor(var_ctx),
                       self._tensor(Y_ctx[:, keep] - self.output_means_[name][keep]))
        mean, var = infer_latent(self.module_, v, Yc, max_iter=max_iter, tol=tol,
                                 progress=self.progress if progress is None else progress, chunk_size=chunk_size,
                                 desc=f"infer {name}", context=context)
        return mean.detach().cpu().numpy(), var.detach().cpu().numpy()

    # -- persistence ----------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the fitted model to one ``.npz`` file: tensors and JSON metadata, no pickle.

        See :func:`bayesalign.gp.io.save_model`.
        """
        from .io import save_model

        save_model(self, path)

    @classmethod
    def load(cls, path, device=None):
        """Read a model written by :meth:`save` (never unpickles; loading runs no code from the file)."""
        from .io import load_model

        model = load_model(path, device=device)
        if not isinstance(model, cls):
            raise TypeError(f"{path} holds a {type(model).__name__}, not a {cls.__name__}")
        return model
