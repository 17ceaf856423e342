"""Predictions and the resolution of a fitted collapsed model (MRD, BayesianGPLVM)."""

from __future__ import annotations

import numpy as np
import torch

from ..data import check_view
from .psi import psi_statistics

__all__ = ["collapsed_resolution", "predict_outputs"]


def collapsed_resolution(module, view_names) -> dict[str, np.ndarray]:
    r"""How finely each view's data pin down each latent dimension: [Q] per view, unit-free.

    .. math:: r_{vq} = \frac{\operatorname{Var}_n(\mu_{nq})}{\sigma_v^2} \, \frac{1}{N_v}
              \sum_{n=1}^{N_v} \sum_{d} \Big(\frac{\partial \bar f_{vd}(\mu_n)}{\partial x_q}\Big)^2,

    with :math:`\bar f_v(x) = k_v(x, Z_v)\,\alpha_v` the predictive mean of view v under its optimal
    q(u), :math:`\mu_n` the q(X) means of the rows view v observes and :math:`\sigma_v^2` its noise
    variance. It is the Fisher information that view v's outputs carry about :math:`x_q` (Gaussian
    likelihood, at the posterior means), times the spread of the points along q: the squared
    number of noise standard deviations by which the view's noiseless outputs move when x moves
    by one standard deviation along q. :math:`r_{vq} > 1`: view v resolves dimension q more finely
    than the points are spread along it.

    Unlike the ARD relevance (``relevance_``) it does not change when a dimension is rescaled
    (:math:`x_q \to c x_q`, :math:`l_q \to c l_q`), and it counts how many outputs depend on
    the dimension and how noisy they are: a dimension with a hundredth of a view's largest
    relevance can still be resolved a hundred times over by a view with many quiet outputs,
    while a dimension switched off by ARD has a resolution of about 0. MAD's shared dimensions
    (``shared_by="resolution"``) are those every view resolves. The derivatives are exact: reverse-mode
    automatic differentiation of k(x, Z) gives :math:`\partial k(x_n, z_m) / \partial x_n` for each
    inducing input (one pass each), contracted with :math:`\alpha_v` (forward mode would need fewer
    passes, but its dual levels are process-global and clash between threads, e.g. dask workers).
    """
    out = {}
    for v, name in enumerate(view_names):
        with torch.no_grad():
            mean = module.view_latent(v)[0].detach()  # [N_v, Q]
            Z = module.inducing(v).detach()
            alpha = module.posterior(v).alpha.detach().to(mean.dtype)  # [M, D_v]; the posterior is float64
            noise = module.noise[v].detach()
        kernel, (Q, M) = module.kernels[v], (mean.shape[1], Z.shape[0])
        total = mean.new_zeros(Q)
        for start in range(0, mean.shape[0], 1024):
            x = mean[start:start + 1024].clone().requires_grad_(True)  # [n, Q]
            with torch.enable_grad():
                K = kernel(x, Z).to_dense()  # [n, M]
                # d k(x_n, z_m) / d x_n for every m: row n of K depends on x_n alone   [n, Q, M]
                dK = torch.stack([torch.autograd.grad(K[:, m].sum(), x, retain_graph=m < M - 1)[0]
                                  for m in range(M)], -1)
            total += (dK.detach() @ alpha).square().sum((0, 2))  # sum_n sum_d (d fbar_d / d x_q)^2   [Q]
        spread = mean.var(0, unbiased=False)  # [Q]
        out[name] = (spread * total / max(mean.shape[0], 1) / noise).cpu().numpy()
    return out


def predict_outputs(model, view, X, X_variance=None, include_noise=True, chunk_size=256):
    """Posterior mean and variance [n, D_v] of view ``view``'s outputs at latent points X [n, Q] of a fitted
    collapsed ``model`` (see :meth:`bayesalign.gp.MRD.predict`): the moments of f under q(x*) = N(X, diag(S)),
    from per-point psi-statistics, plus the noise variance with ``include_noise``."""
    v = model._view_index(view)
    name = model.view_names_[v]
    Q = model.module_.q_mean.shape[1]
    X = check_view(X, "X")
    if X.shape[1] != Q:
        raise ValueError(f"X has {X.shape[1]} columns, the latent space has {Q}")
    S = np.zeros_like(X) if X_variance is None else check_view(X_variance, "X_variance")
    if S.shape != X.shape:
        raise ValueError(f"X_variance must have the shape of X {X.shape}, got {S.shape}")
    if (S < 0).any():
        raise ValueError("X_variance must be non-negative")
    module = model.module_
    kernel, Z = module.kernels[v], module.inducing(v)
    keep = model.kept_columns_[name]
    with torch.no_grad():
        post = module.posterior(v)
        alpha, W = post.alpha, post.woodbury_inv  # [M, D], [M, M]
        means, variances = [], []
        Xt, St = model._tensor(X, "X"), model._tensor(S, "X_variance")
        for start in range(0, X.shape[0], chunk_size):
            # moments of f under q(x*) = N(X, diag(S)) (S = 0: exact GP predictions)
            stats = psi_statistics(kernel, Xt[start:start + chunk_size], St[start:start + chunk_size], Z,
                                   per_point=True)
            # q(u) is float64 whatever the model's dtype: a float32 model's statistics join it there
            psi0, psi1, psi2 = (s.to(alpha.dtype) for s in (stats.psi0, stats.psi1, stats.psi2))
            mean = psi1 @ alpha  # [n, D]
            second = torch.einsum("md,nmk,kd->nd", alpha, psi2, alpha)  # alpha_d' psi2_n alpha_d
            shared = psi0 - (psi2 * W).sum((-2, -1))  # psi0_n - tr(W psi2_n)   [n]
            var = (second - mean.square() + shared[:, None]).clamp_min(0.0)
            if include_noise:
                var = var + module.noise[v]
            means.append(mean)
            variances.append(var)
        mean = torch.cat(means).cpu().numpy()
        var = torch.cat(variances).cpu().numpy()
    out_mean = np.tile(model.output_means_[name], (X.shape[0], 1))  # [n, D]
    out_var = np.zeros_like(out_mean)
    out_mean[:, keep] += mean
    out_var[:, keep] = var
    return out_mean, out_var
