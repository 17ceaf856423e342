r"""All three RBF-ARD psi-statistics in one custom autograd Function (the hot path of the bound).

For :math:`k(x, x') = \sigma^2 \exp(-\sum_q p_q (x_q - x'_q)^2 / 2)`, :math:`p_q = 1 / l_q^2`, and
:math:`q(x_n) = N(\mu_n, \mathrm{diag}(S_n))` (Titsias & Lawrence 2010, Sec. 3):

.. math::
    \psi_0 = N \sigma^2, \qquad
    \psi_{1,nm} = \sigma^2 \exp\Big(-\tfrac12 \sum_q \log s_{nq} - \tfrac12 \sum_q d_{nq} (\mu_{nq} - z_{mq})^2\Big),
    \quad s = 1 + p S,\ d = p / s,

and the summed :math:`\Psi_2 = \sum_n \exp(E_n)` of :mod:`bayesalign.gp.functions.rbf_psi2` with the
bilinear exponent coefficients :math:`h = p^2 S / (1 + 2 p S)`, :math:`g`, :math:`c`.

:class:`RBFPsiStatistics` takes the kernel's *transformed* hyperparameters (variance, lengthscales)
and mu, S, Z, and returns (psi0, psi1, psi2) with a hand-written backward: a whole evaluation is
about 40 tensor operations instead of the ~350 of the plain-torch path (whose per-operation
overhead dominates at small N). Gradients, with :math:`W = G_1 \circ \Psi_1` for the incoming
gradient :math:`G_1` of psi1, :math:`r_n = \sum_m W_{nm}` and
:math:`A_{nq} = \sum_m W_{nm} (\mu_{nq} - z_{mq})^2`:

.. math::
    \partial \mu = -d \circ (\mu \circ r - W Z), \quad
    \partial Z = W^\top (d \circ \mu) - Z \circ (W^\top d), \quad
    \partial S = \tfrac12 d^2 \circ A - \tfrac12 d \circ r, \quad
    \partial p_q = -\tfrac12 \sum_n (S_{nq} r_n / s_{nq} + A_{nq} / s_{nq}^2),

and for psi2 the gradients of (h, g, c) from :func:`~bayesalign.gp.functions.rbf_psi2.psi2_sum_backward`
are chained through :math:`b = p / (1 + 2 p S)`, :math:`a = p / 4`,
:math:`h = 2 a - b / 2`, :math:`g = (b \circ \mu) Z^\top - (a + b / 4) (Z^2)^\top`,
:math:`c = 2 \log \sigma^2 - \tfrac12 \sum_q \log(1 + 2 p S) - \sum_q b \mu^2`.
Everything is computed on mu and Z shifted by the (detached) mean of Z: the statistics are
translation invariant, so values and gradients are unchanged, and the expanded squares stay small.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .rbf_psi2 import default_chunk_size, psi2_sum_backward, psi2_sum_forward

__all__ = ["RBFGram", "RBFPsiStatistics", "rbf_psi_statistics"]


class RBFPsiStatistics(torch.autograd.Function):
    r"""(psi0 [], psi1 [N, M], psi2 [M, M]) of RBF-ARD from (variance [], lengthscale [Q], mu, S [N, Q], Z [M, Q]).

    The last input is the psi2 chunk size (int). The backward is hand-written (module docstring) and
    not itself differentiable (no double backward).
    """

    @staticmethod
    def forward(ctx, variance: Tensor, lengthscale: Tensor, mu: Tensor, S: Tensor, Z: Tensor, chunk_size: int):
        center = Z.mean(0)  # [Q]; a constant shift (the statistics are translation invariant)
        mu, Z = mu - center, Z - center
        N = mu.shape[0]
        p = lengthscale.reciprocal().square()  # [Q]
        Z2 = Z.square()  # [M, Q]
        # psi1 (Titsias & Lawrence 2010, Sec. 3), the square expanded: [N, Q] x [Q, M] products only
        s1 = 1.0 + p * S  # [N, Q]
        d = p / s1  # [N, Q]
        dmu = d * mu  # [N, Q]
        log_psi1 = torch.addmm(d @ Z2.T, dmu, Z.T, alpha=-2.0)  # sum_q d (z^2 - 2 mu z)   [N, M]
        log_psi1.mul_(-0.5).add_((s1.log() + dmu * mu).sum(1, keepdim=True), alpha=-0.5)
        psi1 = log_psi1.exp_().mul_(variance)  # [N, M]
        # psi2: bilinear exponent coefficients (rbf_psi2 module docstring)
        a = 0.25 * p  # [Q]
        s2 = 1.0 + 2.0 * p * S  # [N, Q]
        b = p / s2  # [N, Q]
        h = 2.0 * a - 0.5 * b  # [N, Q]
        g = torch.addmm((b * mu) @ Z.T, a + 0.25 * b, Z2.T, alpha=-1.0)  # [N, M]
        c = 2.0 * variance.log() - (0.5 * s2.log() + b * mu.square()).sum(1)  # [N]
        psi2, block = psi2_sum_forward(h, g, c, Z, chunk_size, keep=True)  # [M, M], exp(E) if one chunk
        psi0 = N * variance
        ctx.save_for_backward(variance, lengthscale, p, mu, S, Z, Z2, s1, d, psi1, s2, b, h, g, c, block)
        ctx.chunk_size = chunk_size
        return psi0, psi1, psi2

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_psi0: Tensor, grad_psi1: Tensor, grad_psi2: Tensor):
        variance, lengthscale, p, mu, S, Z, Z2, s1, d, psi1, s2, b, h, g, c, block = ctx.saved_tensors
        N = mu.shape[0]
        # psi1
        W = grad_psi1 * psi1  # [N, M]
        r = W.sum(1, keepdim=True)  # [N, 1]
        WZ = W @ Z  # [N, Q]
        mu2 = mu.square()  # [N, Q]
        A = torch.addcmul(W @ Z2, mu, WZ, value=-2.0).addcmul_(mu2, r)  # sum_m W (mu - z_m)^2   [N, Q]
        grad_mu = d * (WZ - mu * r)  # [N, Q]
        grad_Z = W.T @ (d * mu) - Z * (W.T @ d)  # [M, Q]
        dd = d.square()  # [N, Q]
        grad_S = 0.5 * (dd * A - d * r)  # [N, Q]
        grad_p = -0.5 * ((S / s1) * r + A / s1.square()).sum(0)  # [Q]
        grad_var = W.sum() / variance + N * grad_psi0
        # psi2: gradients of (h, g, c), then the chain rule by hand
        grad_h, grad_g, grad_Z2 = psi2_sum_backward(h, g, c, Z, grad_psi2, ctx.chunk_size, block=block)
        grad_c = 0.5 * grad_g.sum(1, keepdim=True)  # [N, 1]
        GgZ = grad_g @ Z  # [N, Q]
        GgZ2 = grad_g @ Z2  # [N, Q]
        grad_b = mu * GgZ - 0.5 * grad_h - 0.25 * GgZ2 - grad_c * mu2  # [N, Q]
        grad_a = 2.0 * grad_h.sum(0) - grad_g.sum(0) @ Z2  # [Q]
        grad_mu += b * (GgZ - 2.0 * grad_c * mu)
        a = 0.25 * p  # [Q]
        # dg/dZ_m = b mu - 2 (a + b/4) z_m
        grad_Z += grad_Z2 + grad_g.T @ (b * mu) - Z * (grad_g.T @ (0.5 * b) + 2.0 * grad_g.sum(0, keepdim=True).T * a)
        # db/dS = -2 b^2, db/dp = 1/s2^2; c has -1/2 log s2: dc/dS = -b, dc/dp = -S/s2
        grad_S += -2.0 * b.square() * grad_b - grad_c * b
        grad_p += 0.25 * grad_a + (grad_b / s2.square() - grad_c * S / s2).sum(0)
        grad_var = grad_var + 2.0 * grad_c.sum() / variance
        grad_lengthscale = -2.0 * grad_p * p / lengthscale  # p = l^-2: dp/dl = -2 l^-3
        return grad_var, grad_lengthscale, grad_mu, grad_S, grad_Z, None


def rbf_psi_statistics(variance: Tensor, lengthscale: Tensor, mu: Tensor, S: Tensor, Z: Tensor,
                       chunk_size: int | None = None):
    r"""RBF-ARD (psi0, psi1, psi2 summed over points) through :class:`RBFPsiStatistics`.

    Parameters
    ----------
    variance : Tensor []
        Signal variance :math:`\sigma^2` (the transformed outputscale).
    lengthscale : Tensor [Q]
        ARD lengthscales (the transformed ones; expand a shared lengthscale to [Q]).
    mu, S : Tensor [N, Q]
        Means and diagonal variances of q(X).
    Z : Tensor [M, Q]
        Inducing inputs.
    chunk_size : int, optional
        Points per batched matmul of psi2 (default: :func:`~bayesalign.gp.functions.rbf_psi2.default_chunk_size`);
        memory is O(chunk * M^2 + N (M + Q)).

    Returns
    -------
    (psi0 [], psi1 [N, M], psi2 [M, M])

    Examples
    --------
    >>> import torch
    >>> one = torch.ones((), dtype=torch.float64)
    >>> mu = S = torch.zeros(3, 1, dtype=torch.float64)
    >>> psi0, psi1, psi2 = rbf_psi_statistics(2 * one, one.reshape(1), mu, S, torch.zeros(2, 1).double())
    >>> float(psi0), psi1[0].tolist(), psi2[0].tolist()  # 3 points at the inducing inputs: k = 2
    (6.0, [2.0, 2.0], [12.0, 12.0])
    """
    if chunk_size is None:
        chunk_size = default_chunk_size(mu.shape[0], Z.shape[0], mu.device)
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return RBFPsiStatistics.apply(variance.reshape(()), lengthscale.reshape(-1), mu, S, Z, int(chunk_size))


class RBFGram(torch.autograd.Function):
    r"""RBF-ARD Gram matrix :math:`K = \sigma^2 \exp(-\tfrac12 \sum_q p_q (x_{iq} - x_{jq})^2)` [n, n] from
    (variance [], lengthscale [Q], x [n, Q]), with a hand-written backward (one autograd node instead of
    about fifteen). With :math:`W = G \circ K` and :math:`W_s = W + W^\top`:
    :math:`\partial x = -p \circ (x \circ W_s \mathbf{1} - W_s x)`,
    :math:`\partial p_q = -\tfrac12 (\mathbf{1}^\top W_s x_{:q}^2 - 2 x_{:q}^\top W x_{:q})`,
    :math:`\partial \sigma^2 = \sum W / \sigma^2`. The points are shifted by their mean (translation
    invariance) so the expanded square stays small; the diagonal is exactly :math:`\sigma^2`.
    """

    @staticmethod
    def forward(ctx, variance: Tensor, lengthscale: Tensor, x: Tensor) -> Tensor:
        x = x - x.mean(0)  # [n, Q]
        p = lengthscale.reciprocal().square()  # [Q]
        z = x * lengthscale.reciprocal()  # [n, Q]
        sq = z.square().sum(1)  # [n]
        dist = torch.addmm(sq.unsqueeze(1) + sq.unsqueeze(0), z, z.T, alpha=-2.0).clamp_min_(0.0)  # [n, n]
        dist.diagonal().zero_()  # exactly 0 (round-off otherwise)
        gram = dist.mul_(-0.5).exp_().mul_(variance)
        ctx.save_for_backward(variance, lengthscale, p, x, gram)
        return gram

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        variance, lengthscale, p, x, gram = ctx.saved_tensors
        W = grad * gram  # [n, n]
        Ws = W + W.T
        rows = Ws.sum(1, keepdim=True)  # [n, 1]
        grad_x = (Ws @ x - x * rows) * p  # [n, Q]
        grad_p = ((W @ x) * x).sum(0) - 0.5 * (rows * x.square()).sum(0)  # [Q]
        grad_lengthscale = -2.0 * grad_p * p / lengthscale
        return W.sum() / variance, grad_lengthscale, grad_x
