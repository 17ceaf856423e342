r"""Summed RBF psi2 as a custom autograd Function: one matrix product + exp per chunk of points.

The RBF-ARD psi2 statistic of the Bayesian GP-LVM (Titsias & Lawrence 2010, Sec. 3),

.. math::
    \Psi_{2,mk} = \sum_n \sigma^4 \prod_q (1 + 2 p_q S_{nq})^{-1/2}
        \exp\Big(-\frac{p_q (z_{mq} - z_{kq})^2}{4} - \frac{p_q (\mu_{nq} - \bar z_{q})^2}{1 + 2 p_q S_{nq}}\Big)

(:math:`p_q = 1/l_q^2`, :math:`\bar z = (z_m + z_k)/2`), has for each point n an exponent that is
*linear* in a few features of the pair (m, k). Expanding the second square with
:math:`b_{nq} = p_q / (1 + 2 p_q S_{nq})`:

.. math::
    E_n[m, k] = \sum_q \big(2 b_{nq} \mu_{nq} \bar z_q - b_{nq} \bar z_q^2\big) + c_n + \log A_{mk},

    c_n = 2 \log\sigma^2 - \tfrac12 \sum_q \log(1 + 2 p_q S_{nq}) - \sum_q b_{nq} \mu_{nq}^2, \qquad
    \log A_{mk} = -\tfrac14 \sum_q p_q (z_{mq} - z_{kq})^2,

i.e. :math:`E = K F^\top` with the per-point coefficients :math:`K_n = [2 b_n \circ \mu_n, -b_n, c_n, 1]`
[N, 2Q+2] (:func:`psi2_coefficients`) and the pair features :math:`F_{(m,k)} = [\bar z, \bar z^2, 1,
\log A_{mk}]` (:func:`pair_features`). :math:`E_n` is symmetric in (m, k), so only the
:math:`P = M (M+1) / 2` pairs :math:`m \le k` are computed. For a chunk of points the forward is one
matrix product (a single GEMM: a batch of tiny products per point is several times slower on a CPU),
an in-place exp and a sum over the chunk; memory is O(chunk * P + N (M + Q)), never [N, M, M].
This form (half the pairs, 22 features, no broadcast adds) is faster than the full [M, M] exponent
with separate per-point terms (benchmarks/RESULTS.md, "Bayesian core").

Backward, for the incoming gradient G [M, M]: with :math:`\tilde G_{(m,k)} = G_{mk} + G_{km}`
(:math:`G_{mm}` on the diagonal) and :math:`W_{np} = \tilde G_p \exp(E_{np})`,

.. math::
    \partial K = W F, \qquad \partial F = W^\top K,

two more matrix products per chunk; :func:`pair_features_backward` takes :math:`\partial F` to the
inducing inputs and precisions. :class:`RBFPsi2Sum` is the autograd Function of (K, Z, p); the cheap
map (variance, lengthscales, mu, S) -> K stays in plain autograd (:func:`rbf_psi2`), or is chained by
hand in :mod:`bayesalign.gp.functions.rbf_psi`.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = ["RBFPsi2Sum", "default_chunk_size", "pair_features", "pair_features_backward", "pairs_of_gradient",
           "psi2_coefficients", "psi2_sum_backward", "psi2_sum_forward", "rbf_psi2", "symmetric_from_pairs"]

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


class RBFPsi2Sum(torch.autograd.Function):
    r"""``sum_n exp(E_n)`` [M, M] with :math:`E_n = K_n F^\top` (module docstring).

    Inputs: K [N, 2Q+2] (:func:`psi2_coefficients`), Z [M, Q], precision [Q], chunk_size (int).
    One [chunk, P] work buffer is reused for every chunk. The backward is hand-written and recomputes
    each chunk; it is not itself differentiable (no double backward). The work is done by
    :func:`psi2_sum_forward` / :func:`psi2_sum_backward`, which take a leading batch of views.
    """

    @staticmethod
    def forward(ctx, K: Tensor, Z: Tensor, precision: Tensor, chunk_size: int) -> Tensor:
        F = pair_features(Z[None], precision.reshape(1, 1, -1))
        ctx.save_for_backward(K, Z, precision, F)
        ctx.chunk_size = chunk_size
        pairs, _ = psi2_sum_forward(K[None], F, chunk_size)
        return symmetric_from_pairs(pairs, Z.shape[0])[0]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor):
        K, Z, precision, F = ctx.saved_tensors
        grad_K, grad_Ft = psi2_sum_backward(K[None], F, grad_out[None], ctx.chunk_size)
        grad_Z, grad_p = pair_features_backward(grad_Ft, Z[None], precision.reshape(1, 1, -1))
        return grad_K[0], grad_Z[0], grad_p.reshape(precision.shape), None


def rbf_psi2(
    variance: Tensor, precision: Tensor, mu: Tensor, S: Tensor, Z: Tensor, chunk_size: int | None = None
) -> Tensor:
    r"""Summed RBF-ARD psi2 [M, M] through :class:`RBFPsi2Sum` (memory linear in N).

    Parameters
    ----------
    variance : Tensor []
        Signal variance :math:`\sigma^2`.
    precision : Tensor [Q]
        :math:`1 / l_q^2` (0 on dimensions the kernel ignores).
    mu, S : Tensor [N, Q]
        Means and diagonal variances of q(X).
    Z : Tensor [M, Q]
        Inducing inputs.
    chunk_size : int, optional
        Points per chunk (default: :func:`default_chunk_size`).

    Examples
    --------
    >>> import torch
    >>> one = torch.ones((), dtype=torch.float64)
    >>> mu, S, Z = torch.zeros(3, 1).double(), torch.zeros(3, 1).double(), torch.zeros(2, 1).double()
    >>> rbf_psi2(2 * one, one.reshape(1), mu, S, Z).tolist()  # 3 points at 0: 3 * k(0, 0)^2
    [[12.0, 12.0], [12.0, 12.0]]
    """
    # Stationary: shift mu and Z by one constant point so the expanded squares stay small
    # (cancellation in float32 otherwise); the shift is detached, so gradients are unchanged.
    center = Z.detach().mean(0)
    mu, Z = mu - center, Z - center
    K, _, _ = psi2_coefficients(variance, precision, mu, S)
    if chunk_size is None:
        chunk_size = default_chunk_size(mu.shape[0], Z.shape[0], mu.device)
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return RBFPsi2Sum.apply(K, Z, precision, int(chunk_size))
