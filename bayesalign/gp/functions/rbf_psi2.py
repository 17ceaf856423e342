r"""Summed RBF psi2 as a custom autograd Function: batched matmul + exp per chunk of points.

The RBF-ARD psi2 statistic of the Bayesian GP-LVM (Titsias & Lawrence 2010, Sec. 3),

.. math::
    \Psi_{2,mk} = \sum_n \sigma^4 \prod_q (1 + 2 p_q S_{nq})^{-1/2}
        \exp\Big(-\frac{p_q (z_{mq} - z_{kq})^2}{4} - \frac{p_q (\mu_{nq} - \bar z_{q})^2}{1 + 2 p_q S_{nq}}\Big)

(:math:`p_q = 1/l_q^2`, :math:`\bar z = (z_m + z_k)/2`), has for each point n an exponent that is a
bilinear form in the inducing inputs. Expanding the squares with :math:`a_q = p_q/4` and
:math:`b_{nq} = p_q / (1 + 2 p_q S_{nq})`:

.. math::
    E_n[m, k] = \sum_q h_{nq} z_{mq} z_{kq} + g_{nm} + g_{nk} + c_n, \qquad
    h_{nq} = 2 a_q - b_{nq}/2 = \frac{p_q^2 S_{nq}}{1 + 2 p_q S_{nq}},

    g_{nm} = \sum_q \big(b_{nq} \mu_{nq} z_{mq} - (a_q + b_{nq}/4) z_{mq}^2\big), \qquad
    c_n = 2 \log\sigma^2 - \tfrac12 \sum_q \log(1 + 2 p_q S_{nq}) - \sum_q b_{nq} \mu_{nq}^2,

i.e. :math:`E_n[m, k] = \langle [h_n \circ z_m, g_{nm} + c_n, 1], [z_k, 1, g_{nk}] \rangle`: one batched
matmul of width Q + 2 per chunk of points, an in-place exp and a sum over the chunk. Memory is
O(chunk * M^2 + N (M + Q)), never [N, M, M].

:class:`RBFPsi2Sum` maps (h, g, c, Z) to :math:`\sum_n \exp(E_n)` with a hand-written backward that
recomputes each chunk; the cheap maps (variance, lengthscales, mu, S, Z) -> (h, g, c) stay in plain
autograd (:func:`rbf_psi2`). With :math:`W_n = (G + G^\top) \circ \exp(E_n)` for the incoming
gradient G (psi2 and every :math:`E_n` are symmetric):

.. math::
    \partial g_{nm} = \sum_k W_n[m, k], \quad \partial c_n = \tfrac12 \sum_{mk} W_n[m, k], \quad
    \partial h_{nq} = \tfrac12 \sum_m z_{mq} (W_n Z)_{mq}, \quad
    \partial z_{mq} = \sum_n h_{nq} (W_n Z)_{mq}.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

__all__ = ["RBFPsi2Sum", "rbf_psi2", "rbf_psi2_exponent"]

# Working set per chunk (elements of a [chunk, M, M] block): ~2 MB in float64 stays in cache on
# a CPU; a GPU wants large batches.
_CPU_CHUNK_ELEMENTS = 2**18
_GPU_CHUNK_ELEMENTS = 2**25


def default_chunk_size(n_points: int, num_inducing: int, device: torch.device) -> int:
    """Points per chunk: the [chunk, M, M] block fits the cache (CPU) or fills the device (GPU)."""
    budget = _GPU_CHUNK_ELEMENTS if torch.device(device).type != "cpu" else _CPU_CHUNK_ELEMENTS
    return int(max(1, min(n_points, budget // max(1, num_inducing * num_inducing))))


def _exponent(h: Tensor, g: Tensor, c: Tensor, Z: Tensor, out: Tensor) -> Tensor:
    """E_n[m, k] of a chunk into ``out`` [C, M, M], from h [C, Q], g [C, M], c [C], Z [M, Q]: one bmm."""
    C, M = g.shape
    ones = g.new_ones(C, M, 1)
    left = torch.cat([h.unsqueeze(1) * Z, (g + c.unsqueeze(1)).unsqueeze(2), ones], dim=2)  # [C, M, Q+2]
    right = torch.cat([Z.expand(C, -1, -1), ones, g.unsqueeze(2)], dim=2)  # [C, M, Q+2]
    return torch.bmm(left, right.transpose(1, 2), out=out)


def _chunks(n_points: int, chunk_size: int):
    for start in range(0, n_points, chunk_size):
        yield start, min(start + chunk_size, n_points)


class RBFPsi2Sum(torch.autograd.Function):
    r"""``sum_n exp(E_n)`` with :math:`E_n[m,k] = h_n \cdot (z_m \circ z_k) + g_{nm} + g_{nk} + c_n`.

    Inputs: h [N, Q], g [N, M], c [N], Z [M, Q], chunk_size (int). Output: [M, M].
    One [chunk, M, M] work buffer is reused for every chunk (in-place exp, the sum over the chunk
    as a matrix-vector product into the output). The backward is hand-written and recomputes each
    chunk (see the module docstring); it is not itself differentiable (no double backward).
    """

    @staticmethod
    def forward(ctx, h: Tensor, g: Tensor, c: Tensor, Z: Tensor, chunk_size: int) -> Tensor:
        N, M = g.shape
        out = g.new_zeros(M, M)
        work = g.new_empty(min(chunk_size, N), M, M)
        ones = g.new_ones(1, work.shape[0])
        for start, stop in _chunks(N, chunk_size):
            n = stop - start
            block = _exponent(h[start:stop], g[start:stop], c[start:stop], Z, out=work[:n]).exp_()  # [n, M, M]
            out.view(1, M * M).addmm_(ones[:, :n], block.view(n, M * M))  # += sum over the chunk
        ctx.save_for_backward(h, g, c, Z)
        ctx.chunk_size = chunk_size
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: Tensor):
        h, g, c, Z = ctx.saved_tensors
        N, M = g.shape
        Q = Z.shape[1]
        grad_sym = grad_out + grad_out.T  # [M, M]; every E_n is symmetric
        need_h, need_z = ctx.needs_input_grad[0], ctx.needs_input_grad[3]
        grad_h = torch.empty_like(h) if need_h else None
        grad_g = torch.empty_like(g)
        grad_z = torch.zeros_like(Z) if need_z else None
        work = g.new_empty(min(ctx.chunk_size, N), M, M)
        for start, stop in _chunks(N, ctx.chunk_size):
            n = stop - start
            h_c = h[start:stop]
            weights = _exponent(h_c, g[start:stop], c[start:stop], Z, out=work[:n]).exp_().mul_(grad_sym)  # W_n
            torch.sum(weights, 2, out=grad_g[start:stop])
            if not (need_h or need_z):
                continue
            weighted_z = (weights.view(n * M, M) @ Z).view(n, M, Q)  # W_n Z [n, M, Q]
            if need_h:
                grad_h[start:stop] = 0.5 * (weighted_z * Z).sum(1)
            if need_z:
                grad_z += (weighted_z * h_c.unsqueeze(1)).sum(0)
        grad_c = 0.5 * grad_g.sum(1) if ctx.needs_input_grad[2] else None
        return grad_h, (grad_g if ctx.needs_input_grad[1] else None), grad_c, grad_z, None


def rbf_psi2_exponent(variance: Tensor, precision: Tensor, mu: Tensor, S: Tensor, Z: Tensor):
    """The coefficients (h [N, Q], g [N, M], c [N]) of the bilinear psi2 exponent (module docstring)."""
    a = 0.25 * precision  # [Q]
    b = precision / (1.0 + 2.0 * precision * S)  # [N, Q]
    h = 2.0 * a - 0.5 * b  # [N, Q]; = p^2 S / (1 + 2 p S) >= 0
    g = (b * mu) @ Z.T - (a + 0.25 * b) @ Z.square().T  # [N, M]
    c = 2.0 * torch.log(variance) - 0.5 * torch.log1p(2.0 * precision * S).sum(1) - (b * mu.square()).sum(1)  # [N]
    return h, g, c


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
        Points per batched matmul (default: :func:`default_chunk_size`).

    Examples
    --------
    >>> import torch
    >>> one = torch.ones((), dtype=torch.float64)
    >>> mu, S, Z = torch.zeros(3, 1).double(), torch.zeros(3, 1).double(), torch.zeros(2, 1).double()
    >>> rbf_psi2(2 * one, one.reshape(1), mu, S, Z)  # 3 points at 0: 3 * k(0, 0)^2
    tensor([[12., 12.],
            [12., 12.]], dtype=torch.float64)
    """
    # Stationary: shift mu and Z by one constant point so the expanded squares stay small
    # (cancellation in float32 otherwise); the shift is detached, so gradients are unchanged.
    center = Z.detach().mean(0)
    mu, Z = mu - center, Z - center
    h, g, c = rbf_psi2_exponent(variance, precision, mu, S, Z)
    if chunk_size is None:
        chunk_size = default_chunk_size(mu.shape[0], Z.shape[0], mu.device)
    if int(chunk_size) < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return RBFPsi2Sum.apply(h, g, c, Z, int(chunk_size))
