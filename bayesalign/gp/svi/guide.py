"""The variational pieces of the stochastic MRD: q(X) per entity and one sparse variational GP per view.

- :class:`LatentPosterior`: ``q(X) = prod_n N(x_n; mu_n, diag(s_n))`` [N, Q], free per entity
  (Titsias & Lawrence, 2010), sampled in the guide by reparameterisation.
- :class:`ViewGP`: the sparse variational GP of one view (Hensman, Fusi & Lawrence, 2013; Hensman,
  Matthews & Ghahramani, 2015) built from GPyTorch parts: M inducing inputs ``Z`` [M, Q], an ARD
  kernel shared by the view's D outputs (one kernel per view, as in MRD), and one whitened
  ``q(v_d) = N(m_d, L_d L_d')`` per output (``u_d = chol(K_uu) v_d``), a batch of D
  ``CholeskyVariationalDistribution`` (or, for natural-gradient steps, ``NaturalVariationalDistribution``;
  a Gaussian view without missing entries shares one covariance among its outputs:
  :class:`TiedNaturalVariationalDistribution`). For inputs X its marginal is
  ``q(f_d(x)) = N(k_xu K_uu^-1 u-mean, k_xx - k_xu K_uu^-1 (K_uu - S_d) K_uu^-1 k_ux)``
  (GPyTorch's ``VariationalStrategy``).
"""

from __future__ import annotations

from contextlib import contextmanager

import gpytorch
import torch
from gpytorch.constraints import GreaterThan
from gpytorch.means import ConstantMean, ZeroMean
from gpytorch.models import ApproximateGP
from gpytorch.variational import CholeskyVariationalDistribution, NaturalVariationalDistribution, VariationalStrategy
from gpytorch.variational.natural_variational_distribution import _NaturalVariationalDistribution
from linear_operator.operators import CholLinearOperator, TriangularLinearOperator
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch.distributions import register_kl

__all__ = ["LatentPosterior", "TiedMultivariateNormal", "TiedNaturalVariationalDistribution", "ViewGP"]


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


class TiedMultivariateNormal(gpytorch.distributions.MultivariateNormal):
    """D independent Gaussians ``N(m_d, S)`` [D, M] with one covariance ``S = L L'`` shared by all D.

    A GPyTorch ``MultivariateNormal`` of batch [D] (its covariance the shared Cholesky factor, expanded
    without a copy), so GPyTorch's variational strategy takes it as any q(u); sampling and the KL between
    two tied Gaussians cost one M x M factor instead of D.

    Parameters
    ----------
    mean : tensor [D, M]
    scale_tril : tensor [M, M]
        Lower-triangular ``L`` with ``S = L L'``.
    """

    def __init__(self, mean: torch.Tensor, scale_tril: torch.Tensor):
        D, M = mean.shape
        self.shared_scale_tril = scale_tril
        covariance = CholLinearOperator(TriangularLinearOperator(scale_tril)).expand(D, M, M)
        super().__init__(mean, covariance)

    @property
    def shared_covariance(self) -> torch.Tensor:
        """S [M, M]."""
        return self.shared_scale_tril @ self.shared_scale_tril.mT

    def rsample(self, sample_shape=(), base_samples=None) -> torch.Tensor:
        """``m_d + L eps_d``, eps standard normal [*sample_shape, D, M] (or ``base_samples`` of that shape)."""
        if base_samples is None:
            base_samples = torch.randn(torch.Size(sample_shape) + self.mean.shape, dtype=self.mean.dtype,
                                       device=self.mean.device)
        return self.mean + base_samples @ self.shared_scale_tril.mT


@register_kl(TiedMultivariateNormal, TiedMultivariateNormal)
def _kl_tied_tied(q: TiedMultivariateNormal, p: TiedMultivariateNormal) -> torch.Tensor:
    """KL(q || p) [D] per output, in closed form with one factor:
    ``(tr(S_p^-1 S_q) + |L_p^-1 (m_p,d - m_q,d)|^2 - M + log|S_p| - log|S_q|) / 2``."""
    Lq, Lp = q.shared_scale_tril, p.shared_scale_tril
    M = Lq.shape[-1]
    trace = torch.linalg.solve_triangular(Lp, Lq, upper=False).square().sum()
    difference = torch.linalg.solve_triangular(Lp, (p.mean - q.mean).mT, upper=False)  # [M, D]
    log_det = 2.0 * (Lp.diagonal().log().sum() - Lq.diagonal().log().sum())
    return 0.5 * (trace + difference.square().sum(0) - M + log_det)


class _TiedNaturalToMeanScaleTril(torch.autograd.Function):
    r"""(m [D, M], L [M, M]) from the natural parameters ``theta_1,d = S^-1 m_d`` [D, M] and
    ``theta_2 = -S^-1 / 2`` [M, M] of D Gaussians sharing the covariance S; backward returns the gradient
    with respect to the expectation parameters ``eta_1,d = m_d``, ``eta_2 = sum_d (S + m_d m_d')``, which
    is the natural gradient with respect to theta (the tied family is an exponential family with
    sufficient statistics ``u_d`` and ``sum_d u_d u_d'``). With ``S = (eta_2 - sum_d eta_1,d eta_1,d') / D``:
    ``dF/deta_2 = (dF/dS) / D`` and ``dF/deta_1,d = dF/dm_d - 2 (dF/dS) m_d / D``.
    """

    @staticmethod
    def forward(ctx, natural_vec, natural_mat):
        precision_factor = psd_safe_cholesky(-2.0 * natural_mat)  # S^-1 = P P'; NotPSDError if it is not
        eye = torch.eye(natural_mat.shape[-1], dtype=natural_mat.dtype, device=natural_mat.device)
        inverse = torch.linalg.solve_triangular(precision_factor, eye, upper=False)  # P^-1
        covariance = inverse.mT @ inverse  # S = P^-T P^-1
        mean = natural_vec @ covariance  # [D, M]
        scale_tril = psd_safe_cholesky(covariance)
        ctx.save_for_backward(mean, scale_tril)
        return mean, scale_tril

    @staticmethod
    def backward(ctx, d_mean, d_scale_tril):
        mean, L = ctx.saved_tensors
        # dF/dS of S = L L' (Murray, 2016): L^-T Phi(L' dF/dL) L^-1, Phi the lower triangle with half its diagonal
        phi = (L.mT @ d_scale_tril).tril()
        phi.diagonal().mul_(0.5)
        left = torch.linalg.solve_triangular(L.mT, phi, upper=True)  # L^-T Phi
        d_covariance = torch.linalg.solve_triangular(L.mT, left.mT, upper=True).mT  # L^-T Phi L^-1
        d_covariance = 0.5 * (d_covariance + d_covariance.mT)
        D = mean.shape[0]
        return d_mean - (2.0 / D) * mean @ d_covariance, d_covariance / D


class TiedNaturalVariationalDistribution(_NaturalVariationalDistribution):
    r"""q(u) of D outputs that share one covariance, ``q(u_d) = N(m_d, S)``, in natural parameters for
    natural-gradient steps (GPyTorch's ``NGD``).

    For a Gaussian likelihood whose outputs are all observed at the same inputs the optimal q(u_d)
    have the same covariance, ``S = (I + L^-1 Psi_2 L^-T / sigma^2)^-1`` in the whitened basis (Titsias,
    2009, eq. 10; Titsias & Lawrence, 2010), and differ only in the mean. So this family loses nothing
    there, and a natural-gradient step costs one M x M Cholesky factor instead of D. A step of size 1 on
    the full data moves it to that optimum, as for GPyTorch's ``NaturalVariationalDistribution``.
    """

    def __init__(self, num_inducing_points: int, batch_shape=(), mean_init_std: float = 0.0, **kwargs):
        batch_shape = torch.Size(batch_shape)
        if len(batch_shape) != 1:
            raise ValueError(f"a tied q(u) needs one batch dimension (the outputs), got batch_shape {batch_shape}")
        super().__init__(num_inducing_points=num_inducing_points, batch_shape=batch_shape,
                         mean_init_std=mean_init_std)
        M = int(num_inducing_points)
        self.register_parameter("natural_vec", torch.nn.Parameter(torch.zeros(batch_shape[0], M)))
        self.register_parameter("natural_mat", torch.nn.Parameter(-0.5 * torch.eye(M)))

    def forward(self) -> TiedMultivariateNormal:
        mean, scale_tril = _TiedNaturalToMeanScaleTril.apply(self.natural_vec, self.natural_mat)
        return TiedMultivariateNormal(mean, scale_tril)

    def initialize_variational_distribution(self, prior_dist) -> None:
        """Set q(u) to ``prior_dist`` (batch [D]), whose outputs must share one covariance."""
        if isinstance(prior_dist, TiedMultivariateNormal):
            covariance = prior_dist.shared_covariance
        else:
            covariances = prior_dist.covariance_matrix.reshape(-1, *self.natural_mat.shape)
            covariance = covariances[0]
            if not torch.allclose(covariances, covariance, rtol=1e-8, atol=1e-10):
                raise ValueError("a tied q(u) needs one covariance for every output")
        precision = torch.cholesky_inverse(psd_safe_cholesky(covariance))
        precision = 0.5 * (precision + precision.mT)
        noise = torch.randn_like(prior_dist.mean).mul_(self.mean_init_std)
        self.natural_vec.data.copy_((prior_dist.mean @ precision).add_(noise))
        self.natural_mat.data.copy_(-0.5 * precision)


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
    tied : bool
        With ``natural``: one covariance shared by the D outputs (:class:`TiedNaturalVariationalDistribution`,
        exact for a Gaussian view without missing entries).
    """

    def __init__(self, inducing_inputs: torch.Tensor, num_outputs: int, kernel, constant_mean: bool, jitter: float,
                 natural: bool = False, tied: bool = False):
        M = inducing_inputs.shape[0]
        batch = torch.Size([num_outputs])
        if tied and not natural:
            raise ValueError("a tied q(u) is a natural-gradient family: tied=True needs natural=True")
        family = (TiedNaturalVariationalDistribution if tied else NaturalVariationalDistribution if natural
                  else CholeskyVariationalDistribution)
        q_u = family(M, batch_shape=batch, mean_init_std=0.0)
        strategy = VariationalStrategy(self, inducing_inputs, q_u, learn_inducing_locations=True, jitter_val=jitter)
        super().__init__(strategy)
        # q(u) = p(u) = N(0, I) (whitened) from the start; GPyTorch would otherwise do this (with a small random
        # perturbation) at the first call, after the guide has already read q(u). The perturbation is drawn (times
        # mean_init_std = 0) from a forked RNG: building the model leaves the caller's global RNG as it was
        devices = [inducing_inputs.device] if inducing_inputs.device.type == "cuda" else []
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
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
        r"""Mean and variance [n, D] of q(f(x)) for inputs x [n, Q] (the diagonal only: never n x n).

        With the whitened :math:`q(u_d) = N(m_d, S_d)`, :math:`L L^\top = K_{ZZ} + \text{jitter}\, I` and
        :math:`a_n = L^{-1} k(Z, x_n)`: :math:`E f_d(x_n) = m_d(x_n) + a_n^\top m_d` and
        :math:`\mathrm{Var} f_d(x_n) = k(x_n, x_n) + \text{jitter} - |a_n|^2 + a_n^\top S_d a_n`, GPyTorch's
        ``VariationalStrategy`` (whitened) in closed form, the variance floored at GPyTorch's ``min_variance``.
        Unlike a call of the GP it reads nothing back from the device (no status buffers, no variance check).
        """
        strategy = self.variational_strategy
        Z = strategy.inducing_points
        eye = torch.eye(Z.shape[0], dtype=Z.dtype, device=Z.device)
        L = torch.linalg.cholesky(self.covar_module(Z).to_dense() + strategy.jitter_val * eye)
        A = torch.linalg.solve_triangular(L, self.covar_module(Z, x).to_dense(), upper=False)  # [M, n]
        q_u = self.inducing_distributions()[1]  # batch [D], event [M]
        prior_mean = self.mean_module(x)  # [D, n] or [n]
        mean = A.mT @ q_u.mean.mT + (prior_mean.mT if prior_mean.dim() == 2 else prior_mean[:, None])  # [n, D]
        if isinstance(q_u, TiedMultivariateNormal):
            explained = (A * (q_u.shared_covariance @ A)).sum(0)[:, None]  # a_n' S a_n [n, 1]
        else:
            explained = torch.einsum("mn,dmk,kn->nd", A, q_u.covariance_matrix, A)  # [n, D]
        prior_variance = self.covar_module(x, diag=True) + strategy.jitter_val  # [n]
        variance = (prior_variance - A.square().sum(0))[:, None] + explained
        floor = gpytorch.settings.min_variance.value(variance.dtype)
        return mean, variance.clamp_min(floor).expand_as(mean)

    def mean_jacobian(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        r"""The predictive mean [n, D] at x [n, Q] and its derivatives :math:`\partial \bar f_d(x_n) / \partial x_{nq}`
        [n, Q, D], exact and detached.

        With the whitened q(u) = N(m_w, S) the predictive mean is
        :math:`\bar f(x) = m(x) + k(x, Z) \alpha`, :math:`\alpha = L^{-\top} m_w^\top` [M, D],
        :math:`L L^\top = K_{ZZ} + \text{jitter}\, I` (GPyTorch's ``VariationalStrategy``; the mean m(x) is
        zero or a constant), so only :math:`k(x, Z)` depends on x: one reverse pass per output through
        the n x M kernel block, not through the whole variational strategy (GPyTorch's predictive mean
        runs the D outputs as a batch, so each pass through it repeats the work of all D). The
        mean is checked against :meth:`marginals`; where they differ (e.g. GPyTorch raised the jitter
        to factor K_ZZ), the derivatives go through ``marginals`` itself.
        """
        strategy = self.variational_strategy
        x = x.detach()
        with torch.no_grad():
            Z = strategy.inducing_points.detach()
            exact = self.marginals(x)[0]  # [n, D]
            K = self.covar_module(Z).to_dense().double()
            K = K + float(strategy.jitter_val) * torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)
            L, info = torch.linalg.cholesky_ex(K)
            m_w = strategy.variational_distribution.mean.double()  # [D, M]
            alpha = torch.linalg.solve_triangular(L.mT, m_w.mT, upper=True).to(x.dtype)  # [M, D]
            offset = exact - self.covar_module(x, Z).to_dense() @ alpha  # m(x): constant per output
        with torch.enable_grad():
            xg = x.clone().requires_grad_(True)
            fast = not int(info) and torch.allclose(offset, offset[:1].expand_as(offset), rtol=1e-6,
                                                    atol=1e-6 * (1.0 + float(exact.abs().max())))
            f = self.covar_module(xg, Z).to_dense() @ alpha if fast else self.marginals(xg)[0]  # [n, D]
            D = f.shape[1]
            J = torch.stack([torch.autograd.grad(f[:, d].sum(), xg, retain_graph=d < D - 1)[0]  # row n: x_n alone
                             for d in range(D)], -1)  # [n, Q, D]
        return exact, J.detach()

    def inducing_distributions(self):
        """(p(u), q(u)) of the whitened inducing values, batch [D], event [M], built afresh.

        GPyTorch memoises q(u) on the variational strategy and clears the memo only when the GP is
        called in training mode; a guide that reads q(u) before the model calls the GP would get the
        previous step's (freed) graph, so the memo is cleared here first.
        """
        memo = getattr(self, "_evaluation_memo", None)
        if memo:
            return memo[0]
        strategy = self.variational_strategy
        strategy._clear_cache()
        q_u = strategy.variational_distribution
        if isinstance(q_u, TiedMultivariateNormal):  # p(u) tied as well, for the KL in closed form with one factor
            eye = torch.eye(q_u.mean.shape[-1], dtype=q_u.mean.dtype, device=q_u.mean.device)
            pair = TiedMultivariateNormal(torch.zeros_like(q_u.mean), eye), q_u
        else:
            pair = strategy.prior_distribution, q_u
        if memo is not None:
            memo.append(pair)
        return pair

    @contextmanager
    def one_evaluation(self):
        """Within the block :meth:`inducing_distributions` builds (p(u), q(u)) once and returns that pair on every
        call: one evaluation of the ELBO at fixed parameters (the model, the guide and the Gaussian term each read
        q(u); its conversion from the natural parameters, with its factorisations, runs once)."""
        object.__setattr__(self, "_evaluation_memo", [])  # a plain attribute, not a module
        try:
            yield
        finally:
            object.__setattr__(self, "_evaluation_memo", None)

    @property
    def tied(self) -> bool:
        """Whether q(u) shares one covariance among the outputs."""
        return isinstance(self.variational_strategy._variational_distribution, TiedNaturalVariationalDistribution)

    def set_inducing_distribution(self, mean: torch.Tensor, covariance: torch.Tensor) -> None:
        """Set the whitened q(u) to N(mean [D, M], covariance [D or 1, M, M]) (a tied q(u): one covariance)."""
        q_u = self.variational_strategy._variational_distribution
        like = self.variational_strategy.inducing_points
        target = gpytorch.distributions.MultivariateNormal(mean.to(like), covariance.to(like).expand(
            mean.shape[0], -1, -1))
        with torch.no_grad():
            q_u.initialize_variational_distribution(target)  # mean_init_std is 0: exactly this q(u)

    def kl_divergence(self) -> torch.Tensor:
        """KL(q(u) || p(u)) summed over the outputs (whitened: against N(0, I))."""
        return self.variational_strategy.kl_divergence().sum()
