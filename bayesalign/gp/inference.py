"""Inference of q(x*) for new rows observed in one view, the trained model held fixed.

The formulation (ours; GPy's MRD instead re-optimises a bound that mixes every view's kernel): the
trained view v has an optimal q(u_v) = N(Kuu alpha, Kuu A^-1 Kuu) (Titsias, 2009, eq. 10). With q(u_v)
and every hyperparameter fixed, the uncollapsed bound of Titsias & Lawrence (2010, eq. 13) for new
rows ``Y*`` of view v alone factorises over the rows:

    F(q(X*)) = sum_n [ F_n(q(x*_n)) - KL(q(x*_n) || N(0, I)) ] + const,

with ``F_n`` of :func:`bayesalign.gp.bound.per_point_bound` (whose sum needs only the summed
psi-statistics, as the collapsed bound does). Each row's
q(x*_n) = N(mu*_n, diag(S*_n)) is found independently of the others (a batch is one L-BFGS run on
the sum, whose Hessian is block diagonal), only view v's kernel, noise and q(u_v) are used, and
the latent dimensions that view v ignores (relevance 0) fall back to the prior N(0, 1). For a
training row of a one-view model the answer is that row's trained q(x_n): at the optimum of the
collapsed bound, q(u) is optimal and the gradient of F_n in q(x_n) is that of the collapsed bound.

Each q(x*_n) starts at the trained q(x_m) of the nearest training row m in view v's output space.
"""

from __future__ import annotations

import torch

from . import _optim
from .bound import kl_standard_normal, per_point_bound
from .psi import psi_statistics

__all__ = ["infer_latent"]


def _nearest_rows(Y: torch.Tensor, train: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """Index of the nearest training row (Euclidean) for each row of Y [n]; memory [chunk, N]."""
    return torch.cat([torch.cdist(Y[s:s + chunk_size], train).argmin(1) for s in range(0, Y.shape[0], chunk_size)])


def infer_latent(module, view: int, Y: torch.Tensor, *, max_iter: int = 500, tol: float = 1e-10,
                 progress: bool = False, chunk_size: int = 1024, desc: str = "infer"):
    """Means and variances [n, Q] of q(x*) for the centred rows ``Y`` [n, D_v] of view ``view``.

    Parameters
    ----------
    module : LatentGPModule
        The trained model (unchanged by this call).
    view : int
        Index of the view the rows belong to.
    Y : tensor [n, D_v]
        New rows, centred and restricted to the kept columns as the training outputs.
    max_iter, tol : int, float
        L-BFGS evaluations and relative tolerance of the summed bound.
    chunk_size : int
        Rows per block of psi-statistics (memory linear in it).

    Returns
    -------
    (mean, variance) : tensors [n, Q]
    """
    constraint = module.raw_q_variance_constraint
    frozen = [p for p in module.parameters() if p.requires_grad]
    for p in frozen:
        p.requires_grad_(False)
    try:
        with torch.no_grad():
            posterior = module.posterior(view)
            noise = module.noise[view]
            nearest = _nearest_rows(Y, module.outputs(view), chunk_size)  # [n]
            mean = torch.nn.Parameter(module.q_mean[nearest].clone())  # [n, Q]
            raw_variance = torch.nn.Parameter(module.raw_q_variance[nearest].clone())  # [n, Q]
        kernel, Z = module.kernels[view], module.inducing(view)

        def closure():
            total = 0.0
            # the rows are independent: backward per chunk bounds the memory of the psi-statistics;
            # the summed psi2 suffices (see per_point_bound), so the fast summed path is used
            for start in range(0, Y.shape[0], chunk_size):
                rows = slice(start, start + chunk_size)
                mu, S = mean[rows], constraint.transform(raw_variance[rows])  # [c, Q]
                stats = psi_statistics(kernel, mu, S, Z, per_point=False)
                bound = (per_point_bound(Y[rows], noise, posterior, stats.psi0, stats.psi1, stats.psi2)
                         - kl_standard_normal(mu, S))
                (-bound).backward()
                total += bound.item()
            return total

        _optim.maximize(closure, [mean, raw_variance], method="lbfgs", max_evals=max_iter, tol=tol,
                        progress=progress, desc=desc)
    finally:
        for p in frozen:
            p.requires_grad_(True)
    with torch.no_grad():
        return mean.detach().clone(), constraint.transform(raw_variance).detach().clone()
