"""Per-view likelihoods of the stochastic MRD and their expected log-likelihood with missing entries.

A view's likelihood ``p(y | f)`` acts entry by entry on the latent function ``f``; under the
variational marginal ``q(f) = N(m, s)`` of one entry the bound needs (Hensman, Matthews & Ghahramani,
2015, eq. 16)

    E_q(f)[log p(y | f)],

in closed form for the Gaussian likelihood (GPyTorch's ``GaussianLikelihood``) and by Gauss-Hermite
quadrature for the others (GPyTorch's ``_OneDimensionalLikelihood``):

- ``"gaussian"``: ``y = f + eps``, ``eps ~ N(0, sigma^2)``;
- ``"bernoulli"``: ``p(y = 1 | f) = Phi(f)`` (probit; GPyTorch's ``BernoulliLikelihood``), y in {0, 1};
- ``"poisson"``: ``y ~ Poisson(exp(f))``, y a count;
- ``"negative_binomial"``: ``y ~ NB(r, p)`` with mean ``exp(f)`` and a learned dispersion ``r``
  (variance ``mu + mu^2 / r``), y a count.

A NaN entry of y is missing: it is left out of the sum (:func:`expected_log_likelihood`), never imputed.
"""

from __future__ import annotations

import math

import torch
from gpytorch.constraints import GreaterThan, Positive
from gpytorch.likelihoods import BernoulliLikelihood, GaussianLikelihood
from gpytorch.likelihoods.likelihood import _OneDimensionalLikelihood
from torch import Tensor

__all__ = ["LIKELIHOODS", "PoissonLikelihood", "NegativeBinomialLikelihood", "make_likelihood",
           "expected_log_likelihood", "fisher_information", "check_targets"]

LIKELIHOODS = ("gaussian", "bernoulli", "poisson", "negative_binomial")


class PoissonLikelihood(_OneDimensionalLikelihood):
    r"""Poisson likelihood with log link, :math:`p(y | f) = \mathrm{Poisson}(y; e^f)` (GPyTorch has none).

    Its expected log-likelihood has the closed form
    :math:`y m - e^{m + s/2} - \log y!`; GPyTorch's Gauss-Hermite quadrature computes it here like the
    other one-dimensional likelihoods (tested against the closed form and Monte Carlo).
    """

    def forward(self, function_samples: Tensor, *args, **kwargs) -> torch.distributions.Poisson:
        return torch.distributions.Poisson(rate=function_samples.exp())


class NegativeBinomialLikelihood(_OneDimensionalLikelihood):
    r"""Negative binomial likelihood with log link: mean :math:`\mu = e^f`, dispersion :math:`r > 0`,
    variance :math:`\mu + \mu^2 / r` (the Poisson limit as :math:`r \to \infty`).

    ``torch.distributions.NegativeBinomial(total_count=r, logits=f - log r)`` has exactly this mean.
    """

    def __init__(self, dispersion: float = 1.0):
        super().__init__()
        self.register_parameter("raw_dispersion", torch.nn.Parameter(torch.zeros(1)))
        self.register_constraint("raw_dispersion", Positive())
        self.dispersion = dispersion

    @property
    def dispersion(self) -> Tensor:
        return self.raw_dispersion_constraint.transform(self.raw_dispersion)

    @dispersion.setter
    def dispersion(self, value) -> None:
        value = torch.as_tensor(value, dtype=self.raw_dispersion.dtype, device=self.raw_dispersion.device)
        self.initialize(raw_dispersion=self.raw_dispersion_constraint.inverse_transform(value.expand(1)))

    def forward(self, function_samples: Tensor, *args, **kwargs) -> torch.distributions.NegativeBinomial:
        r = self.dispersion.to(function_samples)
        return torch.distributions.NegativeBinomial(total_count=r, logits=function_samples - r.log())


def make_likelihood(name: str, noise: float = 1.0, noise_floor: float | None = None):
    """The GPyTorch likelihood module for ``name`` (one of :data:`LIKELIHOODS`).

    ``noise`` is the initial noise variance of the Gaussian likelihood and ``noise_floor`` its lower
    bound (default: the smaller of GPyTorch's 1e-4 and a tenth of ``noise``, so data of any scale can
    be modelled); both are ignored by the other likelihoods.
    """
    if name == "gaussian":
        floor = min(1e-4, 0.1 * float(noise)) if noise_floor is None else float(noise_floor)
        likelihood = GaussianLikelihood(noise_constraint=GreaterThan(floor))
        likelihood.noise = torch.tensor(float(noise))
        return likelihood
    if name == "bernoulli":
        return BernoulliLikelihood()
    if name == "poisson":
        return PoissonLikelihood()
    if name == "negative_binomial":
        return NegativeBinomialLikelihood()
    raise ValueError(f"unknown likelihood {name!r}; choose from {LIKELIHOODS}")


def check_targets(name: str, Y, view: str) -> None:
    """Raise a ValueError naming the view, row and column when an observed entry is outside the support."""
    import numpy as np

    observed = ~np.isnan(Y)
    if name == "bernoulli":
        bad = observed & (Y != 0) & (Y != 1)
        what = "0 or 1 (bernoulli likelihood)"
    elif name in ("poisson", "negative_binomial"):
        bad = observed & ((Y < 0) | (Y != np.round(Y)))
        what = f"a non-negative integer count ({name} likelihood)"
    else:
        bad = observed & ~np.isfinite(Y)
        what = "finite"
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(f"view {view!r}: entry at row {row}, column {col} is {Y[row, col]!r}; it must be {what}")


def expected_log_likelihood(likelihood, y: Tensor, mean: Tensor, variance: Tensor) -> Tensor:
    r"""``E_q(f)[log p(y | f)]`` entry by entry [..., D], 0 where ``y`` is NaN (missing).

    ``q(f)`` has marginal ``mean`` and ``variance`` [..., D] per entry. The Gaussian likelihood is in
    closed form, :math:`-\tfrac12 \log 2\pi\sigma^2 - ((y - m)^2 + s) / 2\sigma^2`; the others use
    GPyTorch's Gauss-Hermite quadrature. Missing entries are set to a value inside the support before
    the likelihood sees them and then multiplied out, so neither the value nor its gradient is NaN.
    """
    missing = torch.isnan(y)
    filled = torch.where(missing, torch.zeros((), dtype=y.dtype, device=y.device), y)
    marginal = torch.distributions.Normal(mean, variance.clamp_min(0).sqrt())
    if isinstance(likelihood, GaussianLikelihood):
        noise = likelihood.noise.to(mean).reshape(())
        values = -0.5 * (math.log(2 * math.pi) + noise.log() + ((filled - mean).square() + variance) / noise)
    else:
        values = likelihood.expected_log_prob(filled, marginal)
    return torch.where(missing, torch.zeros((), dtype=values.dtype, device=values.device), values)


def fisher_information(likelihood, f: Tensor) -> Tensor:
    r"""Fisher information that one observation carries about its latent function value, per entry [..., D].

    .. math:: I(f) = \mathrm{E}_{p(y | f)}\Big[\Big(\frac{\partial \log p(y | f)}{\partial f}\Big)^2\Big]

    in closed form: Gaussian :math:`1 / \sigma^2`; Bernoulli (probit)
    :math:`\varphi(f)^2 / (\Phi(f)\,\Phi(-f))`; Poisson (log link) :math:`e^f`; negative binomial
    (log link, dispersion r) :math:`\mu r / (\mu + r)` with :math:`\mu = e^f`, i.e.
    :math:`(\partial\mu/\partial f)^2 / \operatorname{Var}(y)`. Computed in log space where it
    under- or overflows otherwise (the probit's tails). Tested against Monte Carlo.
    """
    if isinstance(likelihood, GaussianLikelihood):
        return torch.ones_like(f) / likelihood.noise.to(f).reshape(())
    if isinstance(likelihood, BernoulliLikelihood):
        log_density = -0.5 * f.square() - 0.5 * math.log(2 * math.pi)
        return torch.exp(2 * log_density - torch.special.log_ndtr(f) - torch.special.log_ndtr(-f))
    if isinstance(likelihood, PoissonLikelihood):
        return f.exp()
    if isinstance(likelihood, NegativeBinomialLikelihood):
        r = likelihood.dispersion.to(f).reshape(())
        return r * torch.sigmoid(f - r.log())  # mu r / (mu + r)
    raise TypeError(f"no Fisher information for {type(likelihood).__name__}")
