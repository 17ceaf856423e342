"""The variational pieces of the stochastic MRD: q(X) per entity and one sparse variational GP per view.

- :class:`LatentPosterior`: ``q(X) = prod_n N(x_n; mu_n, diag(s_n))`` [N, Q], free per entity
  (Titsias & Lawrence, 2010), sampled in the guide by reparameterisation.
- :class:`ViewGP`: the sparse variational GP of one view (Hensman, Fusi & Lawrence, 2013; Hensman,
  Matthews & Ghahramani, 2015) built from GPyTorch parts: M inducing inputs ``Z`` [M, Q], an ARD
  kernel shared by the view's D outputs (one kernel per view, as in MRD), and one whitened
  ``q(v_d) = N(m_d, L_d L_d')`` per output (``u_d = chol(K_uu) v_d``), a batch of D
  ``CholeskyVariationalDistribution``. For inputs X its marginal is
  ``q(f_d(x)) = N(k_xu K_uu^-1 u-mean, k_xx - k_xu K_uu^-1 (K_uu - S_d) K_uu^-1 k_ux)``
  (GPyTorch's ``VariationalStrategy``).
"""

from __future__ import annotations

import gpytorch
import torch
from gpytorch.constraints import GreaterThan
from gpytorch.means import ConstantMean, ZeroMean
from gpytorch.models import ApproximateGP
from gpytorch.variational import CholeskyVariationalDistribution, NaturalVariationalDistribution, VariationalStrategy

__all__ = ["LatentPosterior", "ViewGP"]


#: The smallest variance of q(x): far below any posterior variance a fit keeps, but above 0, so that a trial
#: point of a line search far out along a variance's raw parameter (softplus underflows to 0 there) gives a
#: finite, poor ELBO that the search backs off from, not a zero scale that the distributions refuse.
VARIANCE_FLOOR = 1e-10


class LatentPosterior(gpytorch.Module):
    """q(X): a mean [N, Q] and a positive diagonal variance [N, Q] per entity.

    Parameters
    ----------
    mean, variance : tensors [N, Q]
        Initial values (the variance through GPyTorch's softplus constraint, ``GreaterThan`` the
        :data:`VARIANCE_FLOOR`; a smaller value given is raised to twice the floor).
    """

    def __init__(self, mean: torch.Tensor, variance: torch.Tensor):
        super().__init__()
        self.mean = torch.nn.Parameter(mean.clone())  # [N, Q]
        self.register_parameter("raw_variance", torch.nn.Parameter(torch.zeros_like(variance)))  # [N, Q]
        self.register_constraint("raw_variance", GreaterThan(VARIANCE_FLOOR))
        self.to(mean)
        self.variance = variance

    @property
    def variance(self) -> torch.Tensor:
        return self.raw_variance_constraint.transform(self.raw_variance)

    @variance.setter
    def variance(self, value) -> None:
        value = torch.as_tensor(value).to(self.raw_variance).clamp_min(2 * VARIANCE_FLOOR)
        with torch.no_grad():
            self.raw_variance.copy_(self.raw_variance_constraint.inverse_transform(value))


class ViewGP(ApproximateGP):
    """Sparse variational GP of one view: D outputs, one shared ARD kernel, one whitened q(u) per output.

    Parameters
    ----------
    inducing_inputs : tensor [M, Q]
    num_outputs : int
        D, the view's columns.
    kernel : gpytorch Kernel
        Non-batched (shared by the outputs); its ARD weights are the view's relevance.
    constant_mean : bool
        A learned constant per output (non-Gaussian views, whose outputs are not centred); else zero.
    jitter : float
        Added to the diagonal of K_uu (and of k_xx) by the variational strategy.
    natural : bool
        q(u) in natural parameters (GPyTorch's ``NaturalVariationalDistribution``), for natural-gradient
        steps (``gpytorch.optim.NGD``; Salimbeni, Eleftheriadis & Hensman, 2018): with a Gaussian
        likelihood a step of size 1 on the full data moves q(u) to its optimum.
    """

    def __init__(self, inducing_inputs: torch.Tensor, num_outputs: int, kernel, constant_mean: bool, jitter: float,
                 natural: bool = False):
        M = inducing_inputs.shape[0]
        batch = torch.Size([num_outputs])
        family = NaturalVariationalDistribution if natural else CholeskyVariationalDistribution
        q_u = family(M, batch_shape=batch, mean_init_std=0.0)
        strategy = VariationalStrategy(self, inducing_inputs, q_u, learn_inducing_locations=True, jitter_val=jitter)
        super().__init__(strategy)
        # q(u) = p(u) = N(0, I) (whitened) from the start; GPyTorch would otherwise do this (with a small random
        # perturbation) at the first call, after the guide has already read q(u)
        with torch.no_grad():
            q_u.initialize_variational_distribution(strategy.prior_distribution)
            strategy.variational_params_initialized.fill_(1)
        self.mean_module = ConstantMean(batch_shape=batch) if constant_mean else ZeroMean()
        self.covar_module = kernel
        self.num_outputs = int(num_outputs)

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        mean = self.mean_module(x)  # [D, n] or [n]
        if mean.dim() == 1:
            mean = mean.expand(self.num_outputs, -1)
        return gpytorch.distributions.MultivariateNormal(mean, self.covar_module(x))

    def marginals(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and variance [n, D] of q(f(x)) for inputs x [n, Q] (the diagonal only: never n x n)."""
        q_f = self(x)  # batch [D], event [n]
        return q_f.mean.mT, q_f.variance.mT

    def inducing_distributions(self):
        """(p(u), q(u)) of the whitened inducing values, batch [D], event [M], built afresh.

        GPyTorch memoises q(u) on the variational strategy and clears the memo only when the GP is
        called in training mode; a guide that reads q(u) before the model calls the GP would get the
        previous step's (freed) graph, so the memo is cleared here first.
        """
        strategy = self.variational_strategy
        strategy._clear_cache()
        return strategy.prior_distribution, strategy.variational_distribution

    def set_inducing_distribution(self, mean: torch.Tensor, covariance: torch.Tensor) -> None:
        """Set the whitened q(u) to N(mean [D, M], covariance [D or 1, M, M])."""
        q_u = self.variational_strategy._variational_distribution
        like = self.variational_strategy.inducing_points
        target = gpytorch.distributions.MultivariateNormal(mean.to(like), covariance.to(like).expand(
            mean.shape[0], -1, -1))
        with torch.no_grad():
            q_u.initialize_variational_distribution(target)  # mean_init_std is 0: exactly this q(u)

    def kl_divergence(self) -> torch.Tensor:
        """KL(q(u) || p(u)) summed over the outputs (whitened: against N(0, I))."""
        return self.variational_strategy.kl_divergence().sum()
