"""Inference of q(x*) for new rows observed in one view, the trained model held fixed.

The formulation (ours; GPy's MRD instead re-optimises a bound that mixes every view's kernel): the
trained view v has an optimal q(u_v) = N(Kuu alpha, Kuu A^-1 Kuu) (Titsias, 2009, eq. 10). With q(u_v)
and every hyperparameter fixed, the uncollapsed bound of Titsias & Lawrence (2010, eq. 13) for new
rows ``Y*`` of view v alone factorises over the rows:

    F(q(X*)) = sum_n [ F_n(q(x*_n)) - KL(q(x*_n) || N(0, I)) ] + const,

with ``F_n`` of :func:`bayesalign.gp.bound.per_point_bound`. Each row's q(x*_n) = N(mu*_n, diag(S*_n))
is therefore a separate 2Q-dimensional problem: only view v's kernel, noise and q(u_v) are used, and
the latent dimensions that view v ignores (relevance 0) fall back to the prior N(0, 1). For a
training row of a one-view model the answer is that row's trained q(x_n): at the optimum of the
collapsed bound, q(u) is optimal and the gradient of F_n in q(x_n) is that of the collapsed bound.

The optimiser (:func:`minimize_rows`) is L-BFGS run for every row at once but *per row*: each row
has its own curvature pairs, step length, Armijo line search and convergence test (Nocedal &
Wright, 2006, Algorithm 7.4 and Section 3.5), and one batched evaluation of the per-row bounds and
their gradients serves every row still moving; a row that has converged leaves the batch. The
number of evaluations is therefore that of the slowest row, not that of one joint problem, which
grows with the number of rows. Two things make a row converge in a few evaluations:

- a preconditioner from Price's theorem (:func:`_gaussian_metric`): a row's mean is as well
  determined as its posterior is narrow, so without it the problem is ill-conditioned by 1/S;
- a stopping rule at the round-off of the bound (:func:`_roundoff`): the difference of large terms
  in ``tr(G psi2_n)`` makes ``F_n`` exact to ~1e-8 only, below which no line search can see a
  decrease (``tol`` = 1e-10 alone would keep every row backtracking in noise).

A row then takes a few tens of evaluations, where one L-BFGS on the sum of all rows takes hundreds
and stops short of the optimum (benchmarks/RESULTS.md, "Bayesian core").

Each row is optimised in (mu, log S) and starts at the trained q(x_m) of the nearest training row m
in view v's output space. The per-row bound of the usual GP-LVM kernel (one RBF on every latent
dimension, plus bias / white terms) takes a fused path (:class:`_RBFRowBound`) that never holds more
than a cache-sized block of the per-row psi2 [rows, M (M + 1) / 2]; other kernels take the per-point
psi-statistics of :func:`bayesalign.gp.psi.psi_statistics` chunk by chunk.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import torch
from sklearn.exceptions import ConvergenceWarning
from torch.autograd.function import once_differentiable

from ._optim import NonFiniteBoundError, minimize_rows
from .bound import per_point_bound
from .functions.rbf_psi import pair_features, pairs_of_gradient, psi2_coefficients
from .kernels import _kernel_terms, _rbf_parts
from .psi import psi_statistics, rbf_psi1

__all__ = ["infer_latent", "nearest_observed_rows"]

_LOG_2PI = math.log(2.0 * math.pi)
#: Elements of one [rows, P] block of the fused psi2 trace: ~2 MB in float64 stays in a CPU cache.
_CPU_BLOCK_ELEMENTS = 2**18
_GPU_BLOCK_ELEMENTS = 2**25


# ----------------------------------------------------------------------------------------------------
# Per-row bounds
# ----------------------------------------------------------------------------------------------------
class _RBFPsi2Trace(torch.autograd.Function):
    r"""``tr(G psi2_n)`` [n] of the RBF kernel for every row n, in cache-sized blocks of rows.

    With the exponent of :mod:`bayesalign.gp.functions.rbf_psi`, linear in the row's coefficients,
    :math:`\psi_{2,n}[p] = \exp(K_n \cdot F_p)` over the pairs p = (m <= k), and a symmetric G
    with pair weights :math:`\tilde G` (:func:`~bayesalign.gp.functions.rbf_psi.pairs_of_gradient`),
    the trace :math:`T_n = \sum_p \tilde G_p \exp(K_n \cdot F_p)` has :math:`\partial T_n / \partial K_n
    = \sum_p \tilde G_p \exp(K_n \cdot F_p) F_p`: the forward computes it in the same pass over the
    block (inference always needs the gradient) and the backward only scales it. Memory: the per-row
    derivatives, linear in n, and one [P, block] work buffer.

    Inputs: K [n, F] (:func:`~bayesalign.gp.functions.rbf_psi.psi2_coefficients`), the pair features
    [P, F], the pair weights of G and of |G| [P], block (rows per block). Outputs: the traces [n] and,
    not differentiable, :math:`\sum_{mk} |G_{mk}| \psi_{2,n}[m, k]` [n], the scale of their round-off.
    """

    @staticmethod
    def forward(ctx, K, features, weights, abs_weights, block):
        n = K.shape[0]
        trace, magnitude = K.new_empty(n), K.new_empty(n)  # [n]
        d_K = torch.empty_like(K)  # [n, F]
        work = K.new_empty(features.shape[0], min(block, n))
        for start in range(0, n, block):
            stop = min(start + block, n)
            # pairs x rows, so that a row's numbers do not depend on the other rows of its block
            # (a [rows, F] x [F, P] product changes its summation order with the number of rows)
            psi2 = torch.mm(features, K[start:stop].T, out=work[:, :stop - start]).exp_()  # [P, k]
            torch.mv(psi2.T, abs_weights, out=magnitude[start:stop])
            weighted = psi2.mul_(weights[:, None])  # G~ o psi2_n   [P, k]
            torch.sum(weighted, 0, out=trace[start:stop])
            torch.mm(weighted.T, features, out=d_K[start:stop])
        ctx.save_for_backward(d_K)
        ctx.mark_non_differentiable(magnitude)
        return trace, magnitude

    @staticmethod
    @once_differentiable
    def backward(ctx, grad, _):
        (d_K,) = ctx.saved_tensors
        return grad[:, None] * d_K, None, None, None, None


def _roundoff(beta, G_abs_psi2, psi1_fit):
    """Round-off scale [k] of the terms of ``F_n`` that depend on q(x*_n).

    ``eps * beta * (|G| : psi2_n / 2 + |psi1_n o alpha y_n|)``, with ``:`` the sum of the elementwise
    product.

    ``G = alpha alpha' - D W`` has large entries of both signs when Kuu is ill-conditioned, so
    ``tr(G psi2_n)`` is a small difference of large terms; differences of ``F_n`` below this scale
    (about 1e-8 for the toys of ``benchmarks/bench_mad.py``, whose bounds are ~10) are noise.
    """
    return torch.finfo(G_abs_psi2.dtype).eps * beta * (0.5 * G_abs_psi2 + psi1_fit)


class _RBFRowBound:
    r"""Per-row bound ``F_n`` [k] of ``rbf (+ bias) (+ white)`` on every latent dimension, and its round-off.

    The terms of :func:`~bayesalign.gp.bound.per_point_bound` with the per-row statistics in closed
    form (Titsias & Lawrence, 2010, Sec. 3): psi1 of the RBF term from :func:`~bayesalign.gp.psi.rbf_psi1`,
    ``tr(G psi2_n)`` through :class:`_RBFPsi2Trace`, and a bias b adds ``b`` to psi0 and psi1 and
    ``2 b psi1_n^rbf . (G 1) + b^2 1'G1`` to the trace (its cross terms with the RBF term, as in the
    summed statistics); a white term only adds its variance to psi0. Everything that does not depend
    on q(x*) (the data terms, psi0, G) is computed once.
    """

    def __init__(self, parts, Z, alpha, G, noise, Y):
        D = Y.shape[1]
        self.beta = 1.0 / noise
        self.variance = parts.variance  # []
        self.precision = parts.lengthscale.reciprocal().square()  # [Q]
        self.bias = parts.bias
        self.center = Z.mean(0)  # stationary kernel: shift mu and Z by one point (smaller expanded squares)
        self.Z = Z - self.center  # [M, Q]
        self.features = pair_features(self.Z[None], self.precision[None, None])[0]  # [P, 2Q+2]
        self.G_pairs, self.G_abs_pairs = pairs_of_gradient(G), pairs_of_gradient(G.abs())  # [P]
        self.G = G  # [M, M]
        self.fit = Y @ alpha.T  # alpha y_n   [n, M]
        psi0 = parts.variance + (0.0 if parts.bias is None else parts.bias) + (
            0.0 if parts.white is None else parts.white)
        self.const = (-0.5 * D * (_LOG_2PI + noise.log()) - 0.5 * self.beta * Y.square().sum(1)
                      - 0.5 * self.beta * D * psi0)  # [n]
        if parts.bias is not None:
            self.bias_fit = parts.bias * self.fit.sum(1)  # b 1' alpha y_n   [n]
            self.G_ones = self.G.sum(1)  # G 1   [M]
            self.bias_trace = parts.bias.square() * self.G.sum()  # b^2 1'G1
        budget = _CPU_BLOCK_ELEMENTS if Z.device.type == "cpu" else _GPU_BLOCK_ELEMENTS
        self.block = max(1, budget // self.features.shape[0])

    def __call__(self, rows, mu, S):
        p = self.precision  # [Q]
        mu = mu - self.center  # [k, Q]
        Z = self.Z
        psi1 = rbf_psi1(self.variance, p, mu, S, Z)  # psi1 of the RBF term [k, M]
        K, _, _ = psi2_coefficients(self.variance, p, mu, S)  # psi2 exponent coefficients   [k, 2Q+2]
        trace, magnitude = _RBFPsi2Trace.apply(K, self.features, self.G_pairs, self.G_abs_pairs, self.block)
        fit_terms = psi1 * self.fit[rows]  # [k, M]
        fit = fit_terms.sum(1)  # psi1_n alpha y_n   [k]
        if self.bias is not None:
            fit = fit + self.bias_fit[rows]
            trace = trace + 2.0 * self.bias * (psi1 @ self.G_ones) + self.bias_trace
        roundoff = _roundoff(self.beta, magnitude, fit_terms.detach().abs().sum(1))
        return self.const[rows] + self.beta * fit - 0.5 * self.beta * trace, roundoff


class _PerPointRowBound:
    """Per-row bound ``F_n`` [k] of any kernel and its round-off (per-point statistics, per_point_bound)."""

    def __init__(self, kernel, Z, posterior, G, noise, Y):
        self.kernel, self.Z, self.posterior, self.noise, self.Y = kernel, Z, posterior, noise, Y
        self.G_abs = G.abs()  # [M, M]
        self.fit = Y @ posterior.alpha.T  # alpha y_n   [n, M]

    def __call__(self, rows, mu, S):
        stats = psi_statistics(self.kernel, mu, S, self.Z, per_point=True)  # psi2 [k, M, M]
        value = per_point_bound(self.Y[rows], self.noise, self.posterior, stats.psi0, stats.psi1, stats.psi2)
        with torch.no_grad():
            roundoff = _roundoff(1.0 / self.noise, (stats.psi2 * self.G_abs).sum((-2, -1)),
                                 (stats.psi1 * self.fit[rows]).abs().sum(1))
        return value, roundoff


def _row_bound(kernel, Z, posterior, noise, Y):
    """The fused RBF per-row bound when the kernel allows it, else the per-point reference path.

    q(u) comes in float64 (:func:`~bayesalign.gp.bound.inducing_posterior`): ``G = alpha alpha' - D W``
    [M, M] is formed there, then everything is cast to the model's dtype (Y's).
    """
    G = posterior.alpha @ posterior.alpha.T - Y.shape[1] * posterior.woodbury_inv
    G = (0.5 * (G + G.T)).to(Y.dtype)  # [M, M]
    dtype = Y.dtype
    posterior = dataclasses.replace(posterior, alpha=posterior.alpha.to(dtype),
                                    woodbury_inv=posterior.woodbury_inv.to(dtype), L=posterior.L.to(dtype))
    parts = _rbf_parts(_kernel_terms(kernel), Z.shape[1], Z)
    if parts is not None:
        return _RBFRowBound(parts, Z, posterior.alpha, G, noise, Y)
    return _PerPointRowBound(kernel, Z, posterior, G, noise, Y)


def _gaussian_metric(x, grad):
    r"""Diagonal inverse-Hessian guess [k, 2Q] of ``-(F_n - KL_n)`` in (mu, log S).

    ``F_n`` is an expectation under q(x*_n) = N(mu, diag S) of a function of x, so by Price's theorem
    (Opper & Archambeau, 2009, eq. 5) :math:`\partial^2 F_n / \partial \mu_q^2 = 2\, \partial F_n /
    \partial S_q`, and the gradient in log S, :math:`g_q = S_q (\tfrac12 - \tfrac1{2 S_q} - \partial F_n
    / \partial S_q)`, gives the exact diagonal of the mu block: :math:`(1 + 2 g_q) / S_q` (1/S_q at
    the optimum: a row's mu is as well determined as its posterior is narrow, which makes the
    problem ill-conditioned by 1/S, a thousand for the toys of ``benchmarks/bench_mad.py``). It is
    floored at the prior's curvature 1 where the expected likelihood is not convex. The log S block
    is 1/2 at the optimum of a locally quadratic likelihood (the KL alone).
    """
    Q = x.shape[1] // 2
    S = x[:, Q:].exp()
    return torch.cat([S / torch.maximum(1.0 + 2.0 * grad[:, Q:], S), torch.full_like(S, 2.0)], 1)


def _nearest_rows(Y: torch.Tensor, train: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """Index of the nearest training row (Euclidean) for each row of Y [n]; memory [chunk, N]."""
    return torch.cat([torch.cdist(Y[s:s + chunk_size], train).argmin(1)
                      for s in range(0, Y.shape[0], chunk_size)])


def nearest_observed_rows(Y: torch.Tensor, train: torch.Tensor, block_entries: int = 1 << 22) -> torch.Tensor:
    """Index of the nearest row of ``train`` [N, D] for each row of ``Y`` [n, D], NaN marking a missing entry: the
    mean squared difference over the entries both rows observe (a pair that shares none is farthest). Without NaN
    this is the Euclidean nearest row (:func:`_nearest_rows`). Rows of Y in blocks of ``block_entries`` / N, so
    memory stays [block, N]; the sums over co-observed entries are matrix products of zero-filled copies."""
    chunk = max(1, block_entries // max(train.shape[0], 1))
    if not (bool(torch.isnan(Y).any()) or bool(torch.isnan(train).any())):
        return _nearest_rows(Y, train, chunk)
    mt = (~torch.isnan(train)).to(Y.dtype)  # [N, D]
    t = torch.nan_to_num(train)
    out = []
    for s in range(0, Y.shape[0], chunk):
        block = Y[s:s + chunk]
        my, y = (~torch.isnan(block)).to(Y.dtype), torch.nan_to_num(block)  # [b, D]
        squares = (y * y) @ mt.T + my @ (t * t).T - 2.0 * y @ t.T  # [b, N]: sums over co-observed entries
        shared = my @ mt.T
        distance = torch.where(shared > 0, squares / shared.clamp_min(1.0), torch.full_like(squares, float("inf")))
        out.append(distance.argmin(1))
    return torch.cat(out)


def infer_latent(module, view: int, Y: torch.Tensor, *, max_iter: int = 500, tol: float = 1e-10,
                 progress: bool = False, chunk_size: int = 1024, desc: str = "infer", context=None):
    """Means and variances [n, Q] of q(x*) for the centred rows ``Y`` [n, D_v] of view ``view``.

    Each row maximises its own bound ``F_n - KL(q(x*_n) || N(0, I))`` (module docstring) over
    (mu, log S) with :func:`minimize_rows`, from the trained q(x) of its nearest training row.

    Parameters
    ----------
    module : LatentGPModule
        The trained model (unchanged by this call).
    view : int
        Index of the view the rows belong to.
    Y : tensor [n, D_v]
        New rows, centred and restricted to the kept columns as the training outputs.
    max_iter : int
        Most batched evaluations of the per-row bounds and their gradients, hence most evaluations
        of any one row (the former meaning, bound evaluations, now per row: a typical row needs
        10-20). Rows still moving after ``max_iter`` keep their best q(x*), with a RuntimeWarning.
    tol : float
        A row has converged when a step raises its bound by at most ``tol * max(|F_n|, 1)`` (as the
        ``ftol`` of scipy's L-BFGS-B, per row), or by no more than the round-off of ``F_n`` (see
        :func:`minimize_rows`), or its gradient is below 1e-8.
    progress : bool
        A tqdm bar over the evaluations.
    chunk_size : int
        Rows per evaluation chunk (memory linear in it).
    context : (mean [t, Q], variance [t, Q], outputs [t, D_v]), optional
        Further rows of the view with their q(x) (e.g. inferred earlier) that join the training
        rows in view v's optimal q(u) (:meth:`LatentGPModule.posterior`); MAD's streaming matcher
        uses it to condition each arrival on the rows that came before.

    Returns
    -------
    (mean, variance) : tensors [n, Q]

    Raises
    ------
    NonFiniteBoundError
        When the bound of a row is not finite at its starting point (e.g. NaN in its values). A
        KeyboardInterrupt is re-raised after a RuntimeWarning (the model is unchanged).
    """
    if Y.shape[0] == 0:
        Q = module.q_mean.shape[1]
        return Y.new_zeros(0, Q), Y.new_zeros(0, Q)
    with torch.no_grad():
        posterior = module.posterior(view, context)
        noise = module.noise[view].detach()
        kernel, Z = module.kernels[view], module.inducing(view).detach()
        nearest = _nearest_rows(Y, module.outputs(view), chunk_size)  # [n]
        Q = Z.shape[1]
        rows_mean, rows_variance = module.view_latent(view)  # q(x) of the view's rows [N_v, Q]
        x0 = torch.cat([rows_mean[nearest], rows_variance[nearest].log()], 1).detach()  # [n, 2Q]
    frozen = [p for p in kernel.parameters() if p.requires_grad]
    for p in frozen:  # only q(x*) is differentiated
        p.requires_grad_(False)
    try:
        row_bound = _row_bound(kernel, Z, posterior, noise, Y)

        def negative_bound(x, rows):
            """-(F_n - KL_n) [k] and its gradient in (mu, log S) [k, 2Q], chunk by chunk."""
            values, grads, roundoffs = [], [], []
            for start in range(0, x.shape[0], chunk_size):
                with torch.enable_grad():
                    xc = x[start:start + chunk_size].detach().requires_grad_(True)  # [c, 2Q]
                    mu, log_S = xc[:, :Q], xc[:, Q:]
                    S = log_S.exp()
                    kl = 0.5 * (mu.square() + S - log_S - 1.0).sum(1)  # KL(q(x*_n) || N(0, I))   [c]
                    bound, roundoff = row_bound(rows[start:start + chunk_size], mu, S)
                    value = kl - bound  # [c]
                    (grad,) = torch.autograd.grad(value.sum(), xc)  # rows independent: per-row gradients
                values.append(value.detach())
                grads.append(grad)
                roundoffs.append(roundoff)
            return torch.cat(values), torch.cat(grads), torch.cat(roundoffs)

        x, info = minimize_rows(negative_bound, x0, precondition=_gaussian_metric, max_iter=max_iter, tol=tol,
                                progress=progress, desc=desc)
    finally:
        for p in frozen:
            p.requires_grad_(True)
    if not info["interrupted"] and not bool(info["converged"].all()):
        left = int((~info["converged"]).sum())
        warnings.warn(f"{desc}: {left} of {Y.shape[0]} rows had not converged after {max_iter} evaluations; "
                      "they keep their best q(x*) so far (raise max_iter)", ConvergenceWarning, stacklevel=2)
    mean, variance = x[:, :Q].clone(), x[:, Q:].exp()
    # cannot happen (rows only move to finite points), but a NaN must never be returned silently
    if not bool(torch.isfinite(mean).all() & torch.isfinite(variance).all()):
        raise NonFiniteBoundError(f"{desc}: inference returned non-finite q(x*)")
    return mean, variance
