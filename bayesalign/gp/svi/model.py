"""The generative model of the stochastic MRD, written in Pyro, and its guide.

Generative model (Damianou, Ek, Titsias & Lawrence, 2012, with per-view likelihoods and partial
observation): one latent point per entity, ``x_n ~ p(x)`` (standard normal, a GP over a time index,
or any user prior); view v has its own sparse GP ``f^(v) ~ GP(0, k^(v))`` with inducing values
``u^(v)`` and observes the entities ``observed[v]``: ``y_{i d}^(v) ~ p_v(y | f_d^(v)(x_{observed[v][i]}))``,
NaN entries left out. The guide is ``q(X) q(U) = prod_n N(mu_n, diag s_n) prod_v q(u^(v))``
(:mod:`bayesalign.gp.svi.guide`).

The evidence lower bound :func:`negative_elbo` estimates (Pyro's mean-field estimator) is (Hensman, Fusi &
Lawrence, 2013; Titsias & Lawrence, 2010; the expectation over q(X) sampled for non-Gaussian views)

    ELBO = sum_v sum_{(i, d) observed} E_q(x) E_q(f) [log p_v(y_id | f_d(x))]
           - sum_v KL(q(u^(v)) || p(u^(v))) - KL(q(X) || p(X)) + log p(kernel and likelihood hyperparameters).

f given x is integrated out analytically: q(f(x)) = int p(f | u, x) q(u) du is the variational GP's
marginal, so the ``u`` sample sites carry only their (analytic) KL term and the likelihood enters as
``pyro.factor`` of ``E_q(f)[log p(y | f)]`` (a Rao-Blackwellised estimate, as GPyTorch's own Pyro
integration does). For a Gaussian view the expectation over q(x) is exact as well, through the
psi-statistics of its kernel (Titsias & Lawrence, 2010, eq. 14-15; :func:`gaussian_expected_log_likelihood`),
so only the non-Gaussian views use the sampled x. The entity plate subsamples a minibatch and Pyro scales
its terms by N / B; the Gaussian views' minibatch sums are scaled by N / B the same way.
"""

from __future__ import annotations

import contextlib
import math

import gpytorch
import numpy as np
import pyro
import pyro.distributions as dist
import scipy.sparse as sp
import torch
from gpytorch.likelihoods import GaussianLikelihood
from pyro import poutine
from pyro.distributions.util import scale_and_mask
from pyro.poutine.util import prune_subsample_sites
from torch.distributions import kl_divergence

from ..psi import psi_statistics
from .guide import LatentPosterior, TiedMultivariateNormal
from .likelihoods import expected_log_likelihood

__all__ = ["SVIMRDModel", "gaussian_expected_log_likelihood", "negative_elbo"]


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
                 time_covariance: torch.Tensor | None = None, graph_prior=None):
        super().__init__()
        self.graph_prior = graph_prior
        self.gps = torch.nn.ModuleList(gps)
        self.likelihoods = torch.nn.ModuleList(likelihoods)
        self.n_views = len(self.gps)
        for v, (Y, r) in enumerate(zip(targets, rows)):
            self.register_buffer(f"targets_{v}", Y)  # [N_v, D_v]
            self.register_buffer(f"rows_{v}", r)  # [N] or None
        # whether each view has a missing entry, read once here: the training step never asks the device
        self.view_has_missing = [bool(torch.isnan(Y).any()) for Y in targets]
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

    def gaussian_view_log_likelihood(self, v: int, idx: torch.Tensor) -> torch.Tensor:
        """sum over the entities ``idx`` of view v's E_q(x) E_q(f)[log N(y | f, sigma^2)] (a scalar; Gaussian views)."""
        Y = getattr(self, f"targets_{v}")
        rows = getattr(self, f"rows_{v}")
        if rows is None:
            entities, Y = idx, Y[idx]
        else:
            r = rows[idx]
            seen = r >= 0
            entities, Y = idx[seen], Y[r[seen]]
        if entities.numel() == 0:
            return self.q_x.mean.new_zeros(())
        gp = self.gps[v]
        strategy = gp.variational_strategy
        return gaussian_expected_log_likelihood(
            Y, self.q_x.mean[entities], self.q_x.variance[entities], gp.covar_module, strategy.inducing_points,
            strategy.jitter_val, gp.inducing_distributions()[1], self.likelihoods[v].noise.reshape(()),
            any_missing=self.view_has_missing[v])

    def graph_log_ratio(self, idx: torch.Tensor) -> torch.Tensor:
        r"""Per entity n of ``idx`` [B], the closed form of :math:`E_q[\log p_G(X) - \log N(X; 0, I)]` split over
        the entities (:class:`~bayesalign.gp.priors.GraphLaplacianPrior`, precision P = I + lambda L):

        .. math:: d_n = -\tfrac12\bigl[(P_{nn} - 1)\textstyle\sum_q (S_{nq} + \mu_{nq}^2)
                  + \mu_n^\top ((P - \mathrm{diag} P)\mu)_n\bigr] + \tfrac{Q}{2E}\log|P|,

        whose sum over all E entities added to the ELBO under N(0, I) gives the ELBO under the graph prior
        (KL(q || p_G) = KL(q || N(0, I)) - E_q[log p_G - log N(0, I)]). Summed over a minibatch and scaled by
        E / B (the plate) it is unbiased, and so is its gradient. Only the minibatch's rows of (P - diag P) mu are
        formed, each from its entity's graph neighbours (:meth:`graph_neighbours`): a step costs O(B K Q), not a
        sparse product over every entity.
        """
        mu, S = self.q_x.mean, self.q_x.variance  # [E, Q]
        neighbours, weights, diagonal = self.graph_neighbours(mu)  # [E, K], [E, K], [E]
        E, Q = mu.shape
        m, d = mu[idx], diagonal[idx]
        off = (weights[idx].unsqueeze(-1) * mu[neighbours[idx]]).sum(1)  # ((P - diag P) mu)_n [B, Q]
        return (-0.5 * ((d - 1.0) * (S[idx].sum(1) + m.square().sum(1)) + (m * off).sum(1))
                + 0.5 * Q * self.graph_prior.log_det_precision / E)

    def graph_neighbours(self, like: torch.Tensor):
        """(neighbours [E, K], weights [E, K], diagonal [E]) of the graph prior's precision P = I + lambda L: entity
        n's off-diagonal entries P[n, neighbours[n, k]] = weights[n, k], padded with weight 0 to the largest number
        K of neighbours (a fixed shape, so a minibatch's rows are a gather), and diag P. Built once per prior,
        dtype and device."""
        prior = self.graph_prior
        key = (like.dtype, like.device)
        cached = vars(self).get("_graph_neighbours")
        if cached is None or cached[0] is not prior or cached[1] != key:
            P = sp.csr_matrix(sp.identity(prior.n_entities, format="csr") + prior.strength * prior.laplacian)
            diagonal = P.diagonal()
            off = sp.csr_matrix(P - sp.diags(diagonal))
            off.eliminate_zeros()
            degree = np.diff(off.indptr)
            rows = np.repeat(np.arange(off.shape[0]), degree)
            slot = np.arange(off.nnz) - np.repeat(off.indptr[:-1], degree)  # position of each entry in its row
            K = max(int(degree.max(initial=0)), 1)
            neighbours = np.zeros((off.shape[0], K), np.int64)
            weights = np.zeros((off.shape[0], K))
            neighbours[rows, slot], weights[rows, slot] = off.indices, off.data
            value = tuple(torch.as_tensor(a, device=like.device, dtype=torch.long if a.dtype == np.int64 else
                                          like.dtype) for a in (neighbours, weights, diagonal))
            cached = (prior, key, value)
            object.__setattr__(self, "_graph_neighbours", cached)  # a cache, not a module attribute or buffer
        return cached[2]

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
        gaussian = [isinstance(lik, GaussianLikelihood) for lik in self.likelihoods]
        with pyro.plate("entities", self.num_entities, subsample=idx):
            x = pyro.sample("X", self.prior_of(idx)) if X is None else X[idx]  # [B, Q]
            if self.graph_prior is not None:  # X above is N(0, I); this term makes it the graph prior
                pyro.factor("graph_prior", self.graph_log_ratio(idx))
            for v in range(self.n_views):
                if not gaussian[v]:
                    pyro.factor(f"y_{v}", self.view_log_likelihood(v, x, idx))
        with poutine.scale(scale=self.num_entities / idx.shape[0]):  # the minibatch sum, scaled as the plate's
            for v in range(self.n_views):
                if gaussian[v]:
                    pyro.factor(f"y_{v}", self.gaussian_view_log_likelihood(v, idx))

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


def negative_elbo(module: SVIMRDModel, idx: torch.Tensor, num_particles: int = 1, scale: float | None = None
                  ) -> torch.Tensor:
    """Minus the ELBO of ``module``'s Pyro model and guide at the minibatch ``idx``: a differentiable scalar on the
    device, the estimate of Pyro's :class:`~pyro.infer.TraceMeanField_ELBO`. Each latent site contributes
    ``-KL(q || p)`` in closed form where torch registers one (else ``log p - log q`` at the guide's draw), each
    observed site (every ``pyro.factor``) its log density, each with its plate's scale (times ``scale``, when
    given); ``num_particles`` draws are averaged. Each view's q(u) is built once for the evaluation
    (:meth:`~bayesalign.gp.svi.guide.ViewGP.one_evaluation`). Unlike Pyro's estimator, the sum itself reads
    nothing back from the device (no ``.item()``, no NaN check, no argument validation): the training loop
    checks the ELBO's finiteness every ``window`` epochs."""
    model, guide = module.model, module.guide
    if scale is not None:
        model, guide = poutine.scale(model, scale=scale), poutine.scale(guide, scale=scale)
    elbo = 0.0
    with pyro.validation_enabled(False), contextlib.ExitStack() as memo:
        for gp in module.gps:
            memo.enter_context(gp.one_evaluation())
        for _ in range(int(num_particles)):
            guide_trace = prune_subsample_sites(poutine.trace(guide).get_trace(idx))
            model_trace = prune_subsample_sites(poutine.trace(poutine.replay(model, trace=guide_trace)).get_trace(idx))
            for name, site in model_trace.nodes.items():
                if site["type"] != "sample":
                    continue
                if site["is_observed"]:
                    term = site["fn"].log_prob(site["value"])
                else:
                    q = guide_trace.nodes[name]["fn"]
                    try:
                        term = -kl_divergence(q, site["fn"])
                    except NotImplementedError:  # e.g. q(X) against a GP prior over time
                        term = site["fn"].log_prob(site["value"]) - q.log_prob(site["value"])
                elbo = elbo + scale_and_mask(term, site["scale"], site["mask"]).sum()
    return -elbo / int(num_particles)


def gaussian_expected_log_likelihood(Y: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor, kernel,
                                     inducing: torch.Tensor, jitter: float, q_u, noise: torch.Tensor,
                                     any_missing: bool | None = None) -> torch.Tensor:
    r"""``sum_{n, d observed} E_q(x_n) E_q(f) [log N(y_nd | f_d(x_n), sigma^2)]`` in closed form (a scalar).

    With whitened ``q(v_d) = N(m_d, S_d)`` (``u_d = L v_d``, ``L L' = K_uu + jitter I``) and the
    psi-statistics of ``q(x_n) = N(mean_n, diag variance_n)`` (Titsias & Lawrence, 2010, eq. 14-15):
    ``E[f_nd] = psi1_n L^-T m_d`` and
    ``E[f_nd^2] = psi0_n + tr(L^-T (m_d m_d' + S_d - I) L^-1 Psi2_n)`` (``K_uu^-1 = L^-T L^-1``), so each entry gives
    ``-log(2 pi sigma^2) / 2 - (y^2 - 2 y E[f] + E[f^2]) / (2 sigma^2)``. NaN entries of Y are left out
    (then Psi2 is needed per point, [n, M, M]; otherwise only its sum over the points). A tied q(u)
    (one S for every output) enters through that one S.

    Parameters
    ----------
    Y : [n, D] outputs (NaN: missing); mean, variance : [n, Q] q(x); kernel : the view's kernel;
    inducing : [M, Q]; jitter : float; q_u : the whitened q(u), batch [D], event [M]; noise : scalar sigma^2;
    any_missing : whether Y may hold NaN (None: looked up, a read-back from the device).
    """
    missing = torch.isnan(Y)
    observed = (~missing).to(mean.dtype)  # [n, D]
    Y0 = torch.where(missing, torch.zeros((), dtype=Y.dtype, device=Y.device), Y)
    M = inducing.shape[0]
    eye = torch.eye(M, dtype=mean.dtype, device=mean.device)
    Kuu = kernel(inducing).to_dense() + jitter * eye  # [M, M]
    L = torch.linalg.cholesky(Kuu)
    m = q_u.mean  # [D, M]
    shared = q_u.shared_covariance if isinstance(q_u, TiedMultivariateNormal) else None  # [M, M] or None
    any_missing = bool(missing.any()) if any_missing is None else bool(any_missing)
    stats = psi_statistics(kernel, mean, variance, inducing, per_point=any_missing, check_variances=False)
    mean_f = stats.psi1 @ torch.linalg.solve_triangular(L.mT, m.mT, upper=True)  # E[f_nd] [n, D]

    def whitened(A):  # L^-T A L^-1 for A [.., M, M]
        left = torch.linalg.solve_triangular(L.mT, A, upper=True)
        return torch.linalg.solve_triangular(L.mT, left.mT, upper=True).mT

    counts = observed.sum(1)  # [n] observed entries per point
    # K_uu^-1 = L^-T L^-1: the bracket is whitened as one, (m m' + S - I) in the whitened basis, never as the
    # difference of two terms of the size of K_uu^-1 (which cancel, losing digits as K_uu's condition number grows)
    if any_missing:  # sum over the observed outputs of each point: sum_d o_nd E[v_d v_d'] [n, M, M]
        outer = torch.einsum("nd,di,dj->nij", observed, m, m)
        covariances = (counts[:, None, None] * shared if shared is not None
                       else torch.einsum("nd,dij->nij", observed, q_u.covariance_matrix))
        C = whitened(outer + covariances - counts[:, None, None] * eye)
        square = (counts * stats.psi0).sum() + (C * stats.psi2).sum()
    else:  # sum_d E[v_d v_d'] [M, M], the covariances summed once (D S when they are one)
        D = Y.shape[1]
        covariances = D * shared if shared is not None else q_u.covariance_matrix.sum(0)
        C = whitened(m.mT @ m + covariances - D * eye)  # [M, M]
        square = D * stats.psi0.sum() + (C * stats.psi2).sum()
    cross = (Y0 * mean_f * observed).sum()
    n_observed = observed.sum()
    return (-0.5 * n_observed * torch.log(2 * math.pi * noise)
            - 0.5 / noise * ((Y0.square() * observed).sum() - 2 * cross + square))
