r"""The RBF-ARD psi-statistics as one custom autograd Function: the hot path of the collapsed bound.

For :math:`k(x, x') = \sigma^2 \exp(-\sum_q p_q (x_q - x'_q)^2 / 2)`, :math:`p_q = 1 / l_q^2`, and
:math:`q(x_n) = N(\mu_n, \mathrm{diag}(S_n))` (Titsias & Lawrence 2010, Sec. 3):

.. math::
    \psi_0 = N \sigma^2, \qquad
    \psi_{1,nm} = \sigma^2 \exp\Big(-\tfrac12 \sum_q \log s_{nq} - \tfrac12 \sum_q d_{nq} (\mu_{nq} - z_{mq})^2\Big),
    \quad s = 1 + p S,\ d = p / s,

    \Psi_{2,mk} = \sum_n \sigma^4 \prod_q (1 + 2 p_q S_{nq})^{-1/2}
        \exp\Big(-\frac{p_q (z_{mq} - z_{kq})^2}{4} - \frac{p_q (\mu_{nq} - \bar z_{q})^2}{1 + 2 p_q S_{nq}}\Big)

(:math:`\bar z = (z_m + z_k)/2`). The exponent of :math:`\Psi_2` is, for each point n, *linear* in a few
features of the pair (m, k). Expanding the second square with :math:`b_{nq} = p_q / (1 + 2 p_q S_{nq})`:

.. math::
    E_n[m, k] = \sum_q \big(2 b_{nq} \mu_{nq} \bar z_q - b_{nq} \bar z_q^2\big) + c_n + \log A_{mk},

    c_n = 2 \log\sigma^2 - \tfrac12 \sum_q \log(1 + 2 p_q S_{nq}) - \sum_q b_{nq} \mu_{nq}^2, \qquad
    \log A_{mk} = -\tfrac14 \sum_q p_q (z_{mq} - z_{kq})^2,

i.e. :math:`E = K F^\top` with the per-point coefficients :math:`K_n = [2 b_n \circ \mu_n, -b_n, c_n, 1]`
[N, 2Q+2] (:func:`psi2_coefficients`) and the pair features :math:`F_{(m,k)} = [\bar z, \bar z^2, 1,
\log A_{mk}]` (:func:`pair_features`). :math:`E_n` is symmetric in (m, k), so only the
:math:`P = M (M+1) / 2` pairs :math:`m \le k` are computed. For a chunk of points the forward is one
matrix product, an in-place exp and a sum over the chunk; memory is O(chunk * P + N (M + Q)), never
[N, M, M]. For the incoming gradient G [M, M], with :math:`\tilde G_{(m,k)} = G_{mk} + G_{km}`
(:math:`G_{mm}` on the diagonal) and :math:`W_{np} = \tilde G_p \exp(E_{np})`: :math:`\partial K = W F`,
:math:`\partial F = W^\top K` (:func:`psi2_sum_backward`); :func:`pair_features_backward` takes
:math:`\partial F` to the inducing inputs and precisions.

:class:`RBFPsiStatistics` takes the kernel's transformed hyperparameters (variance, precisions) and
mu, S, Z, and returns (psi0, psi1, psi2) with a hand-written backward. Gradients of psi1, with
:math:`W = G_1 \circ \Psi_1` for the incoming gradient :math:`G_1`, :math:`r_n = \sum_m W_{nm}` and
:math:`A_{nq} = \sum_m W_{nm} (\mu_{nq} - z_{mq})^2`:

.. math::
    \partial \mu = -d \circ (\mu \circ r - W Z), \quad
    \partial Z = W^\top (d \circ \mu) - Z \circ (W^\top d), \quad
    \partial S = \tfrac12 d^2 \circ A - \tfrac12 d \circ r, \quad
    \partial p_q = -\tfrac12 \sum_n (S_{nq} r_n / s_{nq} + A_{nq} / s_{nq}^2),

and those of psi2 are chained from :math:`\partial K` through :math:`b = p / (1 + 2 p S)` and
:math:`c`. Everything is computed on mu and Z shifted by the (detached) mean of Z: the statistics are
translation invariant, so values and gradients are unchanged, and the expanded squares stay small.
The plain-torch reference is :mod:`bayesalign.gp.psi` (``fast=False``); the two are tested equal.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = ["RBFPsiStatistics", "default_chunk_size", "pair_features", "pairs_of_gradient", "psi2_coefficients",
           "rbf_psi_statistics"]

# Working set per chunk (elements of a [views, chunk, P] block): 4 MB in float64 on a CPU, so that a chunk
# stays in cache (chosen on benchmarks/bench_mrd.py --large; benchmarks/RESULTS.md); a GPU wants large batches.
_CPU_CHUNK_ELEMENTS = 2**19
_GPU_CHUNK_ELEMENTS = 2**25


def n_pairs(num_inducing: int) -> int:
    """Pairs (m, k) with m <= k: M (M + 1) / 2."""
    return num_inducing * (num_inducing + 1) // 2


def default_chunk_size(n_points: int, num_inducing: int, device: torch.device, n_views: int = 1) -> int:
    """Points per chunk: the [n_views, chunk, P] block fits the cache (CPU) or fills the device (GPU)."""
    budget = _CPU_CHUNK_ELEMENTS if torch.device(device).type == "cpu" else _GPU_CHUNK_ELEMENTS
    return int(max(1, min(n_points, budget // max(1, n_views * n_pairs(num_inducing)))))


@functools.lru_cache(maxsize=16)
def _pairs(M: int, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
    """Row and column of every pair m <= k [P] each, and 1/2 on the diagonal pairs, 1 elsewhere [P]
    (cached: every evaluation of the bound needs them)."""
    rows, cols = torch.triu_indices(M, M, device=device)
    return rows, cols, torch.where(rows == cols, 0.5, 1.0)


def psi2_coefficients(variance: Tensor, precision: Tensor, mu: Tensor, S: Tensor):
    """Per-point coefficients K = [2 b mu, -b, c, 1] [..., N, 2Q+2] of the psi2 exponent (module docstring),
    and b [..., N, Q], 1 + 2 p S [..., N, Q] (what a hand-written backward needs).

    Broadcasting: ``precision`` [..., 1, Q] or [Q], ``mu`` and ``S`` [..., N, Q], ``variance``
    broadcastable to [..., N, 1] (e.g. [] or [V, 1, 1]). Differentiable (plain torch).
    """
    s2 = 1.0 + 2.0 * precision * S  # [..., N, Q]
    b = precision / s2  # [..., N, Q]
    bmu = b * mu
    b, bmu = torch.broadcast_tensors(b, bmu)
    c = 2.0 * torch.log(variance) - (0.5 * s2.log() + bmu * mu).sum(-1, keepdim=True)  # [..., N, 1]
    c = c.expand(*b.shape[:-1], 1)
    return torch.cat([2.0 * bmu, -b, c, torch.ones_like(c)], -1), b, s2


def _pair_geometry(Z: Tensor):
    """Pair rows, columns, midpoints z-bar [V, P, Q] and differences z_m - z_k [V, P, Q] of Z [V, M, Q]."""
    rows, cols, _ = _pairs(Z.shape[1], Z.device)
    Zm, Zk = Z[:, rows], Z[:, cols]  # [V, P, Q]
    return rows, cols, 0.5 * (Zm + Zk), Zm - Zk


def pair_features(Z: Tensor, precision: Tensor) -> Tensor:
    """F [V, P, 2Q+2] = [z-bar, z-bar^2, 1, log A] for the pairs m <= k of Z [V, M, Q]; precision [V, 1, Q]."""
    _, _, mid, diff = _pair_geometry(Z)
    log_a = -0.25 * (precision * diff.square()).sum(2, keepdim=True)  # [V, P, 1]
    return torch.cat([mid, mid.square(), torch.ones_like(log_a), log_a], 2)


def pair_features_backward(grad_Ft: Tensor, Z: Tensor, precision: Tensor):
    r"""Gradients (Z [V, M, Q], precision [V, Q]) of ``<grad_Ft, pair_features(Z, precision)'>``.

    ``grad_Ft`` is [V, 2Q+2, P] (features first). A pair's midpoint gets
    :math:`\partial \bar z + 2 \bar z \circ \partial \bar z^2`, half of it to each of its two
    inducing inputs; :math:`\log A` adds :math:`\mp \tfrac12 p \circ (z_m - z_k)\, \partial \log A`
    to z_m / z_k and :math:`-\tfrac14 (z_m - z_k)^2 \partial \log A` to p.
    """
    Q = Z.shape[2]
    rows, cols, mid, diff = _pair_geometry(Z)
    grad = grad_Ft.mT  # [V, P, 2Q+2]
    g_log_a = grad[..., 2 * Q + 1:]  # [V, P, 1]
    g_mid = 0.5 * (grad[..., :Q] + 2.0 * mid * grad[..., Q:2 * Q])  # half to each end   [V, P, Q]
    g_diff = -0.5 * precision * diff * g_log_a  # [V, P, Q]
    grad_Z = torch.zeros_like(Z).index_add_(1, rows, g_mid + g_diff).index_add_(1, cols, g_mid - g_diff)
    return grad_Z, -0.25 * (diff.square() * g_log_a).sum(1)


def symmetric_from_pairs(values: Tensor, M: int) -> Tensor:
    """The symmetric [..., M, M] matrices whose pairs m <= k are ``values`` [..., P]."""
    rows, cols, _ = _pairs(M, values.device)
    out = values.new_empty(values.shape[:-1] + (M, M))
    out[..., rows, cols] = values
    out[..., cols, rows] = values
    return out


def pairs_of_gradient(grad: Tensor) -> Tensor:
    """G~ [..., P]: ``G_mk + G_km`` for m < k and ``G_mm``, the gradient of the pairs of a symmetric output."""
    rows, cols, half_on_diagonal = _pairs(grad.shape[-1], grad.device)
    return (grad + grad.mT)[..., rows, cols] * half_on_diagonal.to(grad.dtype)


def _chunks(n_points: int, chunk_size: int):
    for start in range(0, n_points, chunk_size):
        yield start, min(start + chunk_size, n_points)


def psi2_sum_forward(K: Tensor, F: Tensor, chunk_size: int, keep: bool = False):
    """``sum_n exp(K_n F')`` over the pairs [V, P] for V views at once, chunk by chunk, and the block.

    Shapes: K [V, N, F], F [V, P, F] (F features; V = 1 for one view). When all N points fit one chunk
    there is no loop, and with ``keep`` the block ``exp(E)`` [V, N, P] is returned too (else None),
    so that the backward need not recompute it. Over several chunks the backward recomputes them:
    keeping a large block (written to and read back from main memory) is slower than recomputing
    cache-sized chunks.
    :func:`symmetric_from_pairs` gives the [V, M, M] matrix.
    """
    V, N, _ = K.shape
    P = F.shape[1]
    Ft = F.mT  # [V, features, P]
    if N <= chunk_size:
        block = torch.bmm(K, Ft).exp_()  # [V, N, P]
        return block.sum(1), (block if keep else None)
    out = K.new_zeros(V, P)
    work = K.new_empty(V, min(chunk_size, N), P)
    for start, stop in _chunks(N, chunk_size):
        block = torch.bmm(K[:, start:stop], Ft, out=work[:, :stop - start]).exp_()
        out += block.sum(1)  # [V, P]
    return out, None


def psi2_sum_backward(K: Tensor, F: Tensor, grad_out: Tensor, chunk_size: int, block: Tensor | None = None):
    r"""Gradients (K [V, N, F], features transposed [V, F, P]) of ``<grad_out, sum_n exp(E_n)>``.

    ``grad_out`` is the gradient of the whole symmetric [V, M, M] matrix. ``block`` is the kept
    ``exp(E)`` [V, N, P] of the forward (one chunk; it is not changed), else the exponent is
    recomputed chunk by chunk. With :math:`W = \tilde G \circ \exp(E)` (module docstring):
    ``grad_K = W F`` and ``grad_F' = K' W``.
    """
    V, N, _ = K.shape
    P = F.shape[1]
    Ft = F.mT  # [V, features, P]
    weight = pairs_of_gradient(grad_out).unsqueeze(1)  # [V, 1, P]
    grad_K = torch.empty_like(K)
    grad_Ft = K.new_zeros(V, K.shape[2], P)
    work = K.new_empty(V, min(chunk_size, N), P)
    for start, stop in _chunks(N, chunk_size):
        n = stop - start
        if block is not None:
            W = torch.mul(block[:, start:stop], weight, out=work[:, :n])  # [V, n, P]
        else:
            W = torch.bmm(K[:, start:stop], Ft, out=work[:, :n]).exp_().mul_(weight)
        torch.bmm(W, F, out=grad_K[:, start:stop])
        grad_Ft.baddbmm_(K[:, start:stop].mT, W)
    return grad_K, grad_Ft


def psi_forward(variance: Tensor, precision: Tensor, mu: Tensor, S: Tensor, Z: Tensor, chunk_size: int):
    """RBF-ARD (psi0 [V], psi1 [V, N, M], psi2 [V, M, M]) of V kernels on one q(X), and what the backward needs.

    Shapes: variance [V], precision [V, Q] (:math:`1 / l^2`, 0 on a dimension the kernel ignores), mu and S
    [N, Q] (shared by the V kernels), Z [V, M, Q].
    Returns ``(psi0, psi1, psi2, saved)``; ``saved`` is a tuple of tensors for :func:`psi_backward`.
    No autograd graph is built here (called from the forward of custom Functions).
    """
    center = Z.mean(1, keepdim=True)  # [V, 1, Q]; a constant shift (the statistics are translation invariant)
    mu, Z = mu - center, Z - center  # [V, N, Q], [V, M, Q]
    N = mu.shape[1]
    p = precision.unsqueeze(1)  # [V, 1, Q]
    Z2 = Z.square()  # [V, M, Q]
    # psi1 (Titsias & Lawrence 2010, Sec. 3), the square expanded: [N, Q] x [Q, M] products only
    s1 = 1.0 + p * S  # [V, N, Q]
    d = p / s1  # [V, N, Q]
    dmu = d * mu  # [V, N, Q]
    log_psi1 = torch.baddbmm(torch.bmm(d, Z2.mT), dmu, Z.mT, alpha=-2.0)  # sum_q d (z^2 - 2 mu z)   [V, N, M]
    log_psi1.mul_(-0.5).add_((s1.log() + dmu * mu).sum(2, keepdim=True), alpha=-0.5)
    psi1 = log_psi1.exp_().mul_(variance[:, None, None])  # [V, N, M]
    # psi2: the exponent's per-point coefficients and pair features (module docstring)
    K, b, s2 = psi2_coefficients(variance[:, None, None], p, mu, S)  # [V, N, 2Q+2], [V, N, Q] x 2
    F = pair_features(Z, p)  # [V, P, 2Q+2]
    pairs, block = psi2_sum_forward(K, F, chunk_size, keep=True)  # [V, P], exp(E) if one chunk
    psi2 = symmetric_from_pairs(pairs, Z.shape[1])  # [V, M, M]
    psi0 = N * variance  # [V]
    empty = mu.new_empty(0)
    saved = (variance, p, mu, S, Z, Z2, s1, d, dmu, psi1, s2, b, K, F, empty if block is None else block)
    return psi0, psi1, psi2, saved


def psi_backward(saved, grad_psi0: Tensor, grad_psi1: Tensor, grad_psi2: Tensor, chunk_size: int):
    """Gradients (variance [V], precision [V, Q], mu [N, Q], S [N, Q], Z [V, M, Q]) of
    ``sum_v <grad_psi0_v, psi0_v> + <grad_psi1_v, psi1_v> + <grad_psi2_v, psi2_v>`` (module docstring).

    ``saved`` is the tuple of :func:`psi_forward`; the gradients of mu and S are summed over the V kernels.
    """
    variance, p, mu, S, Z, Z2, s1, d, dmu, psi1, s2, b, K, F, block = saved
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
    return grad_var, grad_p, grad_mu.sum(0), grad_S.sum(0), grad_Z


class RBFPsiStatistics(torch.autograd.Function):
    r"""(psi0 [], psi1 [N, M], psi2 [M, M]) of RBF-ARD from (variance [], precision [Q], mu, S [N, Q], Z [M, Q]).

    The last input is the psi2 chunk size (int). The backward is hand-written (module docstring) and
    not itself differentiable (no double backward). One kernel of :func:`psi_forward` /
    :func:`psi_backward`.
    """

    @staticmethod
    def forward(ctx, variance: Tensor, precision: Tensor, mu: Tensor, S: Tensor, Z: Tensor, chunk_size: int):
        psi0, psi1, psi2, saved = psi_forward(variance[None], precision[None], mu, S, Z[None], chunk_size)
        ctx.save_for_backward(*saved)
        ctx.chunk_size = chunk_size
        return psi0[0], psi1[0], psi2[0]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_psi0: Tensor, grad_psi1: Tensor, grad_psi2: Tensor):
        grads = psi_backward(ctx.saved_tensors, grad_psi0[None], grad_psi1[None], grad_psi2[None], ctx.chunk_size)
        grad_var, grad_p, grad_mu, grad_S, grad_Z = grads
        return grad_var[0], grad_p[0], grad_mu, grad_S, grad_Z[0], None


def rbf_psi_statistics(variance: Tensor, precision: Tensor, mu: Tensor, S: Tensor, Z: Tensor,
                       chunk_size: int | None = None):
    r"""RBF-ARD (psi0, psi1, psi2 summed over points) through :class:`RBFPsiStatistics`.

    Parameters
    ----------
    variance : Tensor []
        Signal variance :math:`\sigma^2` (the transformed outputscale).
    precision : Tensor [Q]
        :math:`p_q = 1 / l_q^2` (0 on a dimension the kernel ignores; a shared lengthscale expanded to [Q]).
    mu, S : Tensor [N, Q]
        Means and diagonal variances of q(X).
    Z : Tensor [M, Q]
        Inducing inputs.
    chunk_size : int, optional
        Points per batched matmul of psi2 (default: :func:`default_chunk_size`); memory is
        O(chunk * M^2 + N (M + Q)).

    Returns
    -------
    (psi0 [], psi1 [N, M], psi2 [M, M])

    Examples
    --------
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
    return RBFPsiStatistics.apply(variance.reshape(()), precision.reshape(-1), mu, S, Z, int(chunk_size))
