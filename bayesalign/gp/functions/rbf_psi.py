r"""All three RBF-ARD psi-statistics in one custom autograd Function (the hot path of the bound).

For :math:`k(x, x') = \sigma^2 \exp(-\sum_q p_q (x_q - x'_q)^2 / 2)`, :math:`p_q = 1 / l_q^2`, and
:math:`q(x_n) = N(\mu_n, \mathrm{diag}(S_n))` (Titsias & Lawrence 2010, Sec. 3):

.. math::
    \psi_0 = N \sigma^2, \qquad
    \psi_{1,nm} = \sigma^2 \exp\Big(-\tfrac12 \sum_q \log s_{nq} - \tfrac12 \sum_q d_{nq} (\mu_{nq} - z_{mq})^2\Big),
    \quad s = 1 + p S,\ d = p / s,

and the summed :math:`\Psi_2 = \sum_n \exp(E_n)` of :mod:`bayesalign.gp.functions.rbf_psi2`, whose
exponent is linear in per-point coefficients :math:`K_n = [2 b_n \circ \mu_n, -b_n, c_n, 1]` and
per-pair features.

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

and for psi2 the gradients of K from :func:`~bayesalign.gp.functions.rbf_psi2.psi2_sum_backward`
are chained through :math:`b = p / (1 + 2 p S)` and
:math:`c = 2 \log \sigma^2 - \tfrac12 \sum_q \log(1 + 2 p S) - \sum_q b \mu^2`, those of the pair
features through :func:`~bayesalign.gp.functions.rbf_psi2.pair_features_backward`.
Everything is computed on mu and Z shifted by the (detached) mean of Z: the statistics are
translation invariant, so values and gradients are unchanged, and the expanded squares stay small.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from .rbf_psi2 import (
    default_chunk_size,
    pair_features,
    pair_features_backward,
    psi2_coefficients,
    psi2_sum_backward,
    psi2_sum_forward,
    symmetric_from_pairs,
)

__all__ = ["RBFGram", "RBFPsiStatistics", "gram_backward", "gram_forward", "psi_backward", "psi_forward",
           "rbf_psi_statistics", "with_bias_and_white"]


def psi_forward(variance: Tensor, lengthscale: Tensor, mu: Tensor, S: Tensor, Z: Tensor, chunk_size: int):
    """RBF-ARD (psi0 [V], psi1 [V, N, M], psi2 [V, M, M]) of V kernels on one q(X), and what the backward needs.

    Shapes: variance [V], lengthscale [V, Q], mu and S [N, Q] (shared by the V kernels), Z [V, M, Q].
    Returns ``(psi0, psi1, psi2, saved)``; ``saved`` is a tuple of tensors for :func:`psi_backward`.
    No autograd graph is built here (called from the forward of custom Functions).
    """
    center = Z.mean(1, keepdim=True)  # [V, 1, Q]; a constant shift (the statistics are translation invariant)
    mu, Z = mu - center, Z - center  # [V, N, Q], [V, M, Q]
    N = mu.shape[1]
    p = lengthscale.reciprocal().square().unsqueeze(1)  # [V, 1, Q]
    Z2 = Z.square()  # [V, M, Q]
    # psi1 (Titsias & Lawrence 2010, Sec. 3), the square expanded: [N, Q] x [Q, M] products only
    s1 = 1.0 + p * S  # [V, N, Q]
    d = p / s1  # [V, N, Q]
    dmu = d * mu  # [V, N, Q]
    log_psi1 = torch.baddbmm(torch.bmm(d, Z2.mT), dmu, Z.mT, alpha=-2.0)  # sum_q d (z^2 - 2 mu z)   [V, N, M]
    log_psi1.mul_(-0.5).add_((s1.log() + dmu * mu).sum(2, keepdim=True), alpha=-0.5)
    psi1 = log_psi1.exp_().mul_(variance[:, None, None])  # [V, N, M]
    # psi2: the exponent's per-point coefficients and pair features (rbf_psi2 module docstring)
    K, b, s2 = psi2_coefficients(variance[:, None, None], p, mu, S)  # [V, N, 2Q+2], [V, N, Q] x 2
    F = pair_features(Z, p)  # [V, P, 2Q+2]
    pairs, block = psi2_sum_forward(K, F, chunk_size, keep=True)  # [V, P], exp(E) if one chunk
    psi2 = symmetric_from_pairs(pairs, Z.shape[1])  # [V, M, M]
    psi0 = N * variance  # [V]
    empty = mu.new_empty(0)
    saved = (variance, lengthscale, p, mu, S, Z, Z2, s1, d, dmu, psi1, s2, b, K, F, empty if block is None else block)
    return psi0, psi1, psi2, saved


def with_bias_and_white(psi0: Tensor, psi1: Tensor, psi2: Tensor, bias: Tensor | None, white: Tensor | None,
                        n_points: int):
    r"""The statistics of ``rbf + bias + white`` from those of the RBF part, for V kernels at once.

    A bias (constant) :math:`b` adds :math:`N b` to psi0, b to psi1 and
    :math:`b (s_m + s_k) + N b^2` to psi2 with :math:`s = \sum_n \psi_{1,n}` of the RBF part (the
    RBF x bias cross terms); a white term :math:`w` adds :math:`N w` to psi0 only (it is zero off the
    diagonal). Shapes: psi0 [V], psi1 [V, N, M], psi2 [V, M, M], bias and white [V] or None. Returns
    ``(psi0, psi1, psi2, s)`` with ``s`` [V, M] (None without a bias), which a hand-written backward
    needs. Plain torch (differentiable).
    """
    colsum = None
    if bias is not None:
        b3 = bias[:, None, None]
        colsum = psi1.sum(1)  # [V, M]
        psi0 = psi0 + n_points * bias
        psi1 = psi1 + b3
        psi2 = psi2 + b3 * (colsum.unsqueeze(2) + colsum.unsqueeze(1)) + n_points * b3.square()
    if white is not None:
        psi0 = psi0 + n_points * white
    return psi0, psi1, psi2, colsum


def psi_backward(saved, grad_psi0: Tensor, grad_psi1: Tensor, grad_psi2: Tensor, chunk_size: int):
    """Gradients (variance [V], lengthscale [V, Q], mu [N, Q], S [N, Q], Z [V, M, Q]) of
    ``sum_v <grad_psi0_v, psi0_v> + <grad_psi1_v, psi1_v> + <grad_psi2_v, psi2_v>`` (module docstring).

    ``saved`` is the tuple of :func:`psi_forward`; the gradients of mu and S are summed over the V kernels.
    """
    variance, lengthscale, p, mu, S, Z, Z2, s1, d, dmu, psi1, s2, b, K, F, block = saved
    block = block if block.numel() else None
    N = mu.shape[1]
    # psi1
    W = grad_psi1 * psi1  # [V, N, M]
    r = W.sum(2, keepdim=True)  # [V, N, 1]
    WZ = torch.bmm(W, Z)  # [V, N, Q]
    mu2 = mu.square()  # [V, N, Q]
    A = torch.addcmul(torch.bmm(W, Z2), mu, WZ, value=-2.0).addcmul_(mu2, r)  # sum_m W (mu - z_m)^2   [V, N, Q]
    grad_mu = d * (WZ - mu * r)  # [V, N, Q]
    Wt = W.mT  # [V, M, N]
    grad_Z = torch.bmm(Wt, dmu) - Z * torch.bmm(Wt, d)  # [V, M, Q]
    grad_S = 0.5 * (d.square() * A - d * r)  # [V, N, Q]
    grad_p = -0.5 * ((S / s1) * r + A / s1.square()).sum(1)  # [V, Q]
    grad_var = W.sum((1, 2)) / variance + N * grad_psi0  # [V]
    # psi2: gradients of K = [2 b mu, -b, c, 1] and of the pair features, then the chain rule by hand
    grad_K, grad_Ft = psi2_sum_backward(K, F, grad_psi2, chunk_size, block=block)
    Q = mu.shape[2]
    grad_bmu2, grad_neg_b, grad_c = grad_K[..., :Q], grad_K[..., Q:2 * Q], grad_K[..., 2 * Q:2 * Q + 1]
    grad_b = 2.0 * mu * grad_bmu2 - grad_neg_b - grad_c * mu2  # c has -b mu^2   [V, N, Q]
    grad_mu += 2.0 * b * (grad_bmu2 - grad_c * mu)
    pair_grad_Z, pair_grad_p = pair_features_backward(grad_Ft, Z, p)
    grad_Z += pair_grad_Z
    # b = p / s2, s2 = 1 + 2 p S: db/dS = -2 b^2, db/dp = 1/s2^2; c has -log(s2)/2: dc/dS = -b, dc/dp = -S/s2
    grad_S += -2.0 * b.square() * grad_b - grad_c * b
    grad_p += pair_grad_p + (grad_b / s2.square() - grad_c * S / s2).sum(1)
    grad_var = grad_var + 2.0 * grad_c.sum((1, 2)) / variance
    grad_lengthscale = -2.0 * grad_p * p.squeeze(1) / lengthscale  # p = l^-2: dp/dl = -2 l^-3
    return grad_var, grad_lengthscale, grad_mu.sum(0), grad_S.sum(0), grad_Z


class RBFPsiStatistics(torch.autograd.Function):
    r"""(psi0 [], psi1 [N, M], psi2 [M, M]) of RBF-ARD from (variance [], lengthscale [Q], mu, S [N, Q], Z [M, Q]).

    The last input is the psi2 chunk size (int). The backward is hand-written (module docstring) and
    not itself differentiable (no double backward). One view of :func:`psi_forward` /
    :func:`psi_backward`.
    """

    @staticmethod
    def forward(ctx, variance: Tensor, lengthscale: Tensor, mu: Tensor, S: Tensor, Z: Tensor, chunk_size: int):
        psi0, psi1, psi2, saved = psi_forward(variance[None], lengthscale[None], mu, S, Z[None], chunk_size)
        ctx.save_for_backward(*saved)
        ctx.chunk_size = chunk_size
        return psi0[0], psi1[0], psi2[0]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_psi0: Tensor, grad_psi1: Tensor, grad_psi2: Tensor):
        grads = psi_backward(ctx.saved_tensors, grad_psi0[None], grad_psi1[None], grad_psi2[None], ctx.chunk_size)
        grad_var, grad_lengthscale, grad_mu, grad_S, grad_Z = grads
        return grad_var[0], grad_lengthscale[0], grad_mu, grad_S, grad_Z[0], None


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


def gram_forward(variance: Tensor, lengthscale: Tensor, x: Tensor):
    """RBF-ARD Gram matrices [V, n, n] of V kernels (variance [V], lengthscale [V, Q]) on x [V, n, Q];
    returns ``(gram, saved)`` for :func:`gram_backward` (see :class:`RBFGram` for the formulas)."""
    x = x - x.mean(1, keepdim=True)  # [V, n, Q]
    inv = lengthscale.reciprocal().unsqueeze(1)  # [V, 1, Q]
    z = x * inv  # [V, n, Q]
    sq = z.square().sum(2)  # [V, n]
    dist = torch.baddbmm(sq.unsqueeze(2) + sq.unsqueeze(1), z, z.mT, alpha=-2.0).clamp_min_(0.0)  # [V, n, n]
    dist.diagonal(dim1=1, dim2=2).zero_()  # exactly 0 (round-off otherwise)
    gram = dist.mul_(-0.5).exp_().mul_(variance[:, None, None])
    return gram, (variance, lengthscale, inv.square(), x, gram)


def gram_backward(saved, grad: Tensor):
    """Gradients (variance [V], lengthscale [V, Q], x [V, n, Q]) of ``sum_v <grad_v, gram_v>``."""
    variance, lengthscale, p, x, gram = saved
    W = grad * gram  # [V, n, n]
    Ws = W + W.mT
    rows = Ws.sum(2, keepdim=True)  # [V, n, 1]
    grad_x = (torch.bmm(Ws, x) - x * rows) * p  # [V, n, Q]
    grad_p = (torch.bmm(W, x) * x).sum(1) - 0.5 * (rows * x.square()).sum(1)  # [V, Q]
    grad_lengthscale = -2.0 * grad_p * p.squeeze(1) / lengthscale
    return W.sum((1, 2)) / variance, grad_lengthscale, grad_x


class RBFGram(torch.autograd.Function):
    r"""RBF-ARD Gram matrix :math:`K = \sigma^2 \exp(-\tfrac12 \sum_q p_q (x_{iq} - x_{jq})^2)` [n, n] from
    (variance [], lengthscale [Q], x [n, Q]), with a hand-written backward (one autograd node instead of
    about fifteen). With :math:`W = G \circ K` and :math:`W_s = W + W^\top`:
    :math:`\partial x = -p \circ (x \circ W_s \mathbf{1} - W_s x)`,
    :math:`\partial p_q = -\tfrac12 (\mathbf{1}^\top W_s x_{:q}^2 - 2 x_{:q}^\top W x_{:q})`,
    :math:`\partial \sigma^2 = \sum W / \sigma^2`. The points are shifted by their mean (translation
    invariance) so the expanded square stays small; the diagonal is exactly :math:`\sigma^2`.
    One view of :func:`gram_forward` / :func:`gram_backward`.
    """

    @staticmethod
    def forward(ctx, variance: Tensor, lengthscale: Tensor, x: Tensor) -> Tensor:
        gram, saved = gram_forward(variance.reshape(1), lengthscale.reshape(1, -1), x[None])
        ctx.save_for_backward(*saved)
        ctx.shapes = (variance.shape, lengthscale.shape)
        return gram[0]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        grad_var, grad_lengthscale, grad_x = gram_backward(ctx.saved_tensors, grad[None])
        var_shape, ls_shape = ctx.shapes
        return grad_var.reshape(var_shape), grad_lengthscale.reshape(ls_shape), grad_x[0]
