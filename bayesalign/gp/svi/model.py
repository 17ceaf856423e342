"""The generative model of the stochastic MRD, written in Pyro, and its guide.

Generative model (Damianou, Ek, Titsias & Lawrence, 2012, with per-view likelihoods and partial
observation): one latent point per entity, ``x_n ~ p(x)`` (standard normal, a GP over a time index,
or any user prior); view v has its own sparse GP ``f^(v) ~ GP(0, k^(v))`` with inducing values
``u^(v)`` and observes the entities ``observed[v]``: ``y_{i d}^(v) ~ p_v(y | f_d^(v)(x_{observed[v][i]}))``,
NaN entries left out. The guide is ``q(X) q(U) = prod_n N(mu_n, diag s_n) prod_v q(u^(v))``
(:mod:`bayesalign.gp.svi.guide`).

The evidence lower bound Pyro's ``TraceMeanField_ELBO`` estimates is (Hensman, Fusi & Lawrence, 2013;
Titsias & Lawrence, 2010, with the expectation over q(X) taken by sampling)

    ELBO = sum_v sum_{(i, d) observed} E_q(x) E_q(f) [log p_v(y_id | f_d(x))]
           - sum_v KL(q(u^(v)) || p(u^(v))) - KL(q(X) || p(X)) + log p(kernel and likelihood hyperparameters).

f given x is integrated out analytically: q(f(x)) = int p(f | u, x) q(u) du is the variational GP's
marginal, so the ``u`` sample sites carry only their (analytic) KL term and the likelihood enters as
``pyro.factor`` of ``E_q(f)[log p(y | f)]`` (a Rao-Blackwellised estimate, as GPyTorch's own Pyro
integration does). The entity plate subsamples a minibatch and Pyro scales its terms by N / B.
"""

from __future__ import annotations

import gpytorch
import pyro
import pyro.distributions as dist
import torch

from .guide import LatentPosterior
from .likelihoods import expected_log_likelihood

__all__ = ["SVIMRDModel"]


class SVIMRDModel(gpytorch.Module):
    """Pyro model and guide of the stochastic MRD over ``num_entities`` latent points.

    Parameters
    ----------
    gps : sequence of ViewGP
        One sparse variational GP per view.
    likelihoods : sequence of GPyTorch likelihoods
        One per view (:mod:`bayesalign.gp.svi.likelihoods`).
    targets : sequence of tensors [N_v, D_v]
        The outputs of each view (NaN: missing).
    rows : sequence of (LongTensor [N] or None)
        For each view, the row that observes entity n, or -1 (None: row n observes entity n).
    q_x : LatentPosterior
        q(X) [N, Q].
    latent_prior : None, pyro Distribution or callable
        None: ``N(0, I)``. A distribution with event shape [Q] (i.i.d. per entity), or a callable
        ``prior(idx)`` returning a distribution with batch shape [B] and event shape [Q] for the
        entities ``idx`` [B].
    time_covariance : tensor [N, N], optional
        A GP prior over a time index instead: the Q latent dimensions are independent GPs with this
        covariance over the entities (this prior couples every entity, so it needs the dense N x N
        matrix and its Cholesky factor, and X is sampled for all N entities at every step).
    """

    def __init__(self, gps, likelihoods, targets, rows, q_x: LatentPosterior, latent_prior=None,
                 time_covariance: torch.Tensor | None = None):
        super().__init__()
        self.gps = torch.nn.ModuleList(gps)
        self.likelihoods = torch.nn.ModuleList(likelihoods)
        self.n_views = len(self.gps)
        for v, (Y, r) in enumerate(zip(targets, rows)):
            self.register_buffer(f"targets_{v}", Y)  # [N_v, D_v]
            self.register_buffer(f"rows_{v}", r)  # [N] or None
        self.q_x = q_x
        self.latent_prior = latent_prior
        if time_covariance is not None:
            self.register_buffer("time_scale_tril", torch.linalg.cholesky(time_covariance))  # [N, N]
        else:
            self.time_scale_tril = None

    @property
    def num_entities(self) -> int:
        return int(self.q_x.mean.shape[0])

    # -- the generative model ---------------------------------------------------------------------
    def prior_of(self, idx: torch.Tensor):
        """p(x_n) for the entities ``idx`` [B]: batch [B], event [Q] (per-entity priors only)."""
        Q = self.q_x.mean.shape[1]
        like = self.q_x.mean
        if self.latent_prior is None:
            return dist.Normal(like.new_zeros(()), like.new_ones(())).expand([idx.shape[0], Q]).to_event(1)
        if isinstance(self.latent_prior, torch.distributions.Distribution):
            return self.latent_prior.expand([idx.shape[0]])
        return self.latent_prior(idx)

    def view_log_likelihood(self, v: int, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """sum_d E_q(f)[log p(y_nd | f_d(x_n))] [B] of view v for the entities ``idx`` at latent points x [B, Q]
        (0 for an entity the view does not observe and for missing entries)."""
        Y = getattr(self, f"targets_{v}")
        rows = getattr(self, f"rows_{v}")
        if rows is None:
            mean, variance = self.gps[v].marginals(x)  # [B, D]
            return expected_log_likelihood(self.likelihoods[v], Y[idx], mean, variance).sum(-1)
        r = rows[idx]  # [B]
        seen = r >= 0
        out = x.new_zeros(idx.shape[0])
        if bool(seen.any()):
            mean, variance = self.gps[v].marginals(x[seen])  # [b, D]
            out = out.masked_scatter(seen, expected_log_likelihood(self.likelihoods[v], Y[r[seen]], mean,
                                                                   variance).sum(-1))
        return out

    def hyper_log_prior(self) -> torch.Tensor:
        """Sum of the log densities of every GPyTorch prior registered on the kernels and likelihoods."""
        total = self.q_x.mean.new_zeros(())
        for module in list(self.gps) + list(self.likelihoods):
            for _, prior_module, prior, closure, _ in module.named_priors():
                total = total + prior.log_prob(closure(prior_module)).sum()
        return total

    def model(self, idx: torch.Tensor):
        """The Pyro model over the minibatch of entities ``idx`` [B] (all entities: ``torch.arange(N)``)."""
        for v, gp in enumerate(self.gps):
            p_u = gp.inducing_distributions()[0]  # whitened N(0, I), batch [D]
            pyro.sample(f"u_{v}", p_u.to_event(len(p_u.batch_shape)))
        pyro.factor("hyper_prior", self.hyper_log_prior())
        X = None
        if self.time_scale_tril is not None:
            Q = self.q_x.mean.shape[1]
            p_x = dist.MultivariateNormal(self.time_scale_tril.new_zeros(self.num_entities),
                                          scale_tril=self.time_scale_tril).expand([Q]).to_event(1)
            X = pyro.sample("X", p_x).mT  # [N, Q]
        with pyro.plate("entities", self.num_entities, subsample=idx):
            x = pyro.sample("X", self.prior_of(idx)) if X is None else X[idx]  # [B, Q]
            for v in range(self.n_views):
                pyro.factor(f"y_{v}", self.view_log_likelihood(v, x, idx))

    # -- the guide --------------------------------------------------------------------------------
    def guide(self, idx: torch.Tensor):
        """q(U) q(X): the view GPs' variational distributions and q(x_n) of the minibatch ``idx``."""
        for v, gp in enumerate(self.gps):
            q_u = gp.inducing_distributions()[1]  # batch [D], event [M]
            pyro.sample(f"u_{v}", q_u.to_event(len(q_u.batch_shape)))
        if self.time_scale_tril is not None:
            pyro.sample("X", dist.Normal(self.q_x.mean.mT, self.q_x.variance.sqrt().mT).to_event(2))
        with pyro.plate("entities", self.num_entities, subsample=idx):
            if self.time_scale_tril is None:
                pyro.sample("X", dist.Normal(self.q_x.mean[idx], self.q_x.variance[idx].sqrt()).to_event(1))
