r"""Psi-statistics: kernel expectations under the variational posterior of a Bayesian GP-LVM.

With :math:`q(X) = \prod_n N(x_n | \mu_n, \mathrm{diag}(S_n))` and inducing inputs :math:`Z` [M, Q],
the collapsed variational bound of the Bayesian GP-LVM (Titsias & Lawrence 2010, AISTATS, Sec. 3,
eqs. 12-14) needs

.. math::
    \psi_0 = \sum_n E[k(x_n, x_n)],\quad
    (\Psi_1)_{nm} = E[k(x_n, z_m)],\quad
    (\Psi_2)_{mk} = \sum_n E[k(z_m, x_n)\, k(x_n, z_k)].

Closed forms (Titsias & Lawrence 2010, Sec. 3 and its supplement) for the RBF-ARD kernel
:math:`\sigma^2 \exp(-\sum_q p_q (x_q - x'_q)^2 / 2)` with precisions :math:`p_q = 1/l_q^2`:

.. math::
    \psi_{1,nm} = \sigma^2 \prod_q (1 + p_q S_{nq})^{-1/2}
        \exp\Big(-\frac{p_q (\mu_{nq} - z_{mq})^2}{2 (1 + p_q S_{nq})}\Big), \qquad
    \psi_{2,nmk} = \sigma^4 \prod_q (1 + 2 p_q S_{nq})^{-1/2}
        \exp\Big(-\frac{p_q (z_{mq} - z_{kq})^2}{4} - \frac{p_q (\mu_{nq} - \bar z_q)^2}{1 + 2 p_q S_{nq}}\Big),

:math:`\bar z = (z_m + z_k)/2`; for the linear-ARD kernel :math:`\sum_q a_q x_q x'_q`:
:math:`\psi_{0,n} = \sum_q a_q (\mu_{nq}^2 + S_{nq})`, :math:`\Psi_1 = \mu A Z^\top`,
:math:`\Psi_{2,n} = Z A (\mu_n \mu_n^\top + \mathrm{diag}(S_n)) A Z^\top`. A sum of kernels adds the
statistics of its terms plus the cross terms :math:`E[k_i(z_m, x) k_j(x, z_k)] + (i \leftrightarrow j)`
in :math:`\Psi_2` (derived in the private helpers below; GPy has them for RBF/linear x bias and
RBF x linear). Bias (constant) and white (diagonal-only) terms complete the usual GP-LVM kernel.
Any other GPyTorch kernel is integrated by tensor-product Gauss-Hermite quadrature.

As GPflow's ``expectations``, the statistics are chosen by the class of each term's kernel: one
function per kernel family for a term's own statistics (:data:`_TERM_STATISTICS`) and one per pair of
families for the cross terms of a sum (:data:`_CROSS_TERMS`). The lookup is by the exact class: a
subclass may change the kernel's function (its ``forward``), for which the closed form would be wrong,
so a class without a rule (a subclass included) is integrated by quadrature. The RBF family's
summed statistics go through its custom autograd Function,
:func:`bayesalign.gp.functions.rbf_psi.rbf_psi_statistics` (psi1 and psi2 in one forward, hand-written
backward, memory linear in N); the plain-torch formulas here are its reference (``fast=False``).
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import NamedTuple

import numpy as np
import torch
from gpytorch.kernels import ConstantKernel, Kernel, LinearKernel, RBFKernel
from torch import Tensor

from .functions.rbf_psi import rbf_psi_statistics
from .kernels import WhiteKernel, _kernel_terms, _Term

__all__ = ["PsiStatistics", "psi_statistics", "rbf_psi1", "supports_analytic"]

# Tensor-product quadrature grows as n^d; beyond this many nodes per point we refuse.
_MAX_QUADRATURE_NODES = 2**20
_WARNED_QUADRATURE: set = set()


class PsiStatistics(NamedTuple):
    """The three kernel expectations of the collapsed bound (shapes: see :func:`psi_statistics`)."""

    psi0: Tensor
    psi1: Tensor
    psi2: Tensor


def supports_analytic(kernel) -> bool:
    """True when every term of ``kernel`` has closed-form psi-statistics (RBF, linear, bias, white, sums).

    >>> from bayesalign.gp.kernels import make_kernel
    >>> supports_analytic(make_kernel("rbf+linear", 2, bias=True)), supports_analytic(make_kernel("matern52", 2))
    (True, False)
    """
    return all(_has_closed_form(t.leaf) for t in _kernel_terms(kernel))


def psi_statistics(
    kernel, mu: Tensor, S: Tensor, Z: Tensor, per_point: bool = False, *, n_quadrature: int | None = None,
    fast: bool = True, check_variances: bool = True,
) -> PsiStatistics:
    r"""Psi-statistics of ``kernel`` under q(X) = prod_n N(mu_n, diag(S_n)) (Titsias & Lawrence 2010, Sec. 3).

    Parameters
    ----------
    kernel : gpytorch.kernels.Kernel
        ``RBFKernel`` (ARD or not), ``LinearKernel`` (ARD variances), ``ConstantKernel`` (bias),
        :class:`~bayesalign.gp.kernels.WhiteKernel`, ``ScaleKernel`` over any of these and
        ``AdditiveKernel`` sums; ``active_dims`` are honoured. Any other kernel is integrated by
        Gauss-Hermite quadrature (slower and approximate; warns once per kernel class).
    mu : Tensor [N, Q]
        Means of q(X).
    S : Tensor [N, Q]
        Diagonal variances of q(X) (non-negative).
    Z : Tensor [M, Q]
        Inducing inputs.
    per_point : bool
        False: ``psi0`` scalar, ``psi1`` [N, M], ``psi2`` [M, M] summed over points.
        True: ``psi0`` [N], ``psi1`` [N, M], ``psi2`` [N, M, M] (e.g. to infer new points one by one).
    n_quadrature : int, optional
        Gauss-Hermite points per latent dimension for kernels without a closed form (the grid has
        ``n_quadrature ** d`` nodes for a kernel on d dimensions). Default: as many as keep the grid
        at most 4096 nodes, between 2 and 10 points per dimension.
    fast : bool
        The summed statistics of each RBF term through the RBF family's custom autograd Function
        (:func:`~bayesalign.gp.functions.rbf_psi.rbf_psi_statistics`); False: the plain-torch
        formulas (its reference; equal to round-off).
    check_variances : bool
        Raise if ``S`` has a negative entry: one read-back from the device. A caller whose variances are
        positive by construction (the stochastic engine's training step) passes False.

    Returns
    -------
    PsiStatistics
        ``(psi0, psi1, psi2)`` on ``mu``'s dtype and device, differentiable w.r.t. ``mu``, ``S``,
        ``Z`` and the kernel's (raw) hyperparameters.

    Examples
    --------
    >>> import torch
    >>> from bayesalign.gp.kernels import make_kernel
    >>> k = make_kernel("rbf", input_dim=1, variance=2.0)
    >>> mu = S = Z = torch.zeros(1, 1, dtype=torch.float64)  # psi0 = k(0,0), psi1 = k(0,0), psi2 = k(0,0)^2
    >>> [s.detach().reshape(-1)[0].item() for s in psi_statistics(k, mu, S, Z)]  # q(x) = delta(0)
    [2.0, 2.0, 4.0]
    """
    mu, S, Z = _check_inputs(mu, S, Z, check_variances)
    terms = _kernel_terms(kernel)
    context = _Context(mu, S, Z, per_point, fast, _Quadrature(mu, S, n_quadrature))
    own = [_TERM_STATISTICS.get(type(t.leaf), _quadrature_statistics)(t, context) for t in terms]  # per term
    N, M = mu.shape[0], Z.shape[0]
    psi0 = sum(stats.psi0 for stats in own) + mu.new_zeros(N)  # terms may give scalars: broadcast to [N]
    psi1 = sum(stats.psi1 for stats in own) + mu.new_zeros(N, M)
    psi2 = mu.new_zeros((N, M, M) if per_point else (M, M))
    for stats in own:
        if stats.psi2 is not None:
            psi2 = psi2 + stats.psi2
    for i, j in itertools.combinations(range(len(terms)), 2):
        cross = _cross_term(terms[i], terms[j], own[i].psi1, own[j].psi1, context)
        if cross is not None:  # E[k_i(z_m, x) k_j(x, z_k)] + E[k_j(z_m, x) k_i(x, z_k)]
            psi2 = psi2 + cross + cross.transpose(-1, -2)
    return PsiStatistics(psi0 if per_point else psi0.sum(), psi1, psi2)


class _Context(NamedTuple):
    """What every rule needs: q(X), the inducing inputs, the options and the quadrature rule."""

    mu: Tensor  # [N, Q]
    S: Tensor  # [N, Q]
    Z: Tensor  # [M, Q]
    per_point: bool
    fast: bool
    quadrature: _Quadrature

    def summed(self, per_point_psi2: Tensor) -> Tensor:
        """psi2 [N, M, M] as asked: per point, or summed over the points [M, M]."""
        return per_point_psi2 if self.per_point else per_point_psi2.sum(0)


# ---------------------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------------------


def _check_inputs(mu, S, Z, check_variances: bool = True):
    for name, value in (("mu", mu), ("S", S), ("Z", Z)):
        if not torch.is_tensor(value):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
        if value.dim() != 2:
            raise ValueError(f"{name} must be 2-D, got shape {tuple(value.shape)}")
        if not value.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {value.dtype}")
        if value.dtype != mu.dtype or value.device != mu.device:
            raise TypeError(f"{name} is {value.dtype} on {value.device}, but mu is {mu.dtype} on {mu.device}")
    if S.shape != mu.shape:
        raise ValueError(f"S must have the shape of mu {tuple(mu.shape)}, got {tuple(S.shape)}")
    if Z.shape[1] != mu.shape[1]:
        raise ValueError(f"Z has {Z.shape[1]} columns but mu has {mu.shape[1]} latent dimensions")
    if check_variances and bool((S < 0).any()):
        raise ValueError("S (variances of q(X)) must be non-negative")
    return mu, S, Z


# ---------------------------------------------------------------------------------------------------
# a term's own statistics, by the class of its kernel
# ---------------------------------------------------------------------------------------------------


class _TermStatistics(NamedTuple):
    """psi0 [N] (or a scalar that broadcasts), psi1 [N, M] (or broadcastable), psi2 [N, M, M] / [M, M] or None
    (zero) of one term."""

    psi0: Tensor
    psi1: Tensor
    psi2: Tensor | None


def _quadrature_statistics(t: _Term, c: _Context) -> _TermStatistics:
    """A kernel without a closed form: Gauss-Hermite quadrature on the dimensions it sees."""
    x, w = c.quadrature.nodes((t,))  # [N, J, Q], [J]
    N, J, Q = x.shape
    flat = x.reshape(N * J, Q)
    psi0 = t.evaluate(flat, flat, diag=True).reshape(N, J) @ w  # [N]
    K = c.quadrature.kernel_at_nodes(t, c.Z)  # [N, M, J]
    return _TermStatistics(psi0, K @ w, _quadrature_psi2(K, K, w, c.per_point))


def _rbf_statistics(t: _Term, c: _Context) -> _TermStatistics:
    """RBF-ARD: the summed statistics through its custom Function (``fast``), else the plain formulas."""
    variance, precision = t.scale(c.mu), t.precision(c.mu.shape[1], c.mu)
    if c.fast and not c.per_point:
        _, psi1, psi2 = rbf_psi_statistics(variance, precision, c.mu, c.S, c.Z)
        return _TermStatistics(variance, psi1, psi2)
    psi2 = _rbf_rbf_psi2(variance, precision, variance, precision, c.mu, c.S, c.Z)  # [N, M, M]
    return _TermStatistics(variance, rbf_psi1(variance, precision, c.mu, c.S, c.Z), c.summed(psi2))


def _linear_statistics(t: _Term, c: _Context) -> _TermStatistics:
    """Linear-ARD: psi0 = sum_q a_q (mu^2 + S), psi1 = mu A Z', psi2 = Z A (mu mu' + diag S) A Z'."""
    a = t.linear_variances(c.mu.shape[1], c.mu)  # [Q]
    psi2 = _linear_linear_psi2(a, a, c.mu, c.S, c.Z, c.per_point)
    return _TermStatistics((c.mu.square() + c.S) @ a, c.mu @ (c.Z * a).T, psi2)


def _bias_statistics(t: _Term, c: _Context) -> _TermStatistics:
    """A constant b: psi0 = b, psi1 = b, psi2 = b^2 per point."""
    b = t.constant(c.mu)
    n = 1 if c.per_point else c.mu.shape[0]
    return _TermStatistics(b, b, (n * b.square()).expand(c.Z.shape[0], c.Z.shape[0]))


def _white_statistics(t: _Term, c: _Context) -> _TermStatistics:
    """White noise w [x = x']: psi0 = w; psi1 = psi2 = 0 (x_n != z_m almost surely)."""
    return _TermStatistics(t.constant(c.mu), c.mu.new_zeros(()), None)


#: kernel class -> the rule for a term's own (psi0, psi1, psi2); any other class: quadrature
_TERM_STATISTICS = {
    RBFKernel: _rbf_statistics,
    LinearKernel: _linear_statistics,
    ConstantKernel: _bias_statistics,
    WhiteKernel: _white_statistics,
}


def _has_closed_form(leaf: Kernel) -> bool:
    return type(leaf) in _TERM_STATISTICS


def rbf_psi1(variance, precision, mu, S, Z) -> Tensor:
    r"""RBF psi1 [N, M] (Titsias & Lawrence 2010, Sec. 3).

    The quadratic form :math:`\sum_q d_{nq} (\mu_{nq} - z_{mq})^2`, :math:`d = p / (1 + p S)`, is
    expanded into two [N, Q] x [Q, M] products, so no [N, M, Q] temporary is made (nor saved for
    the backward). Stationary: mu and Z are first shifted by the (constant) mean of Z, which keeps
    the expanded squares small.
    """
    center = Z.detach().mean(0)
    mu, Z = mu - center, Z - center
    scaled = 1.0 + precision * S  # [N, Q]
    d = precision / scaled  # [N, Q]
    log_norm = -0.5 * torch.log(scaled).sum(1) - 0.5 * (d * mu.square()).sum(1)  # [N]
    quad = d @ Z.square().T - 2.0 * (d * mu) @ Z.T  # [N, M]
    return variance * torch.exp(log_norm.unsqueeze(1) - 0.5 * quad)


# ---------------------------------------------------------------------------------------------------
# cross terms E[k_i(z_m, x) k_j(x, z_k)] of a sum, by the classes of the two kernels
# ---------------------------------------------------------------------------------------------------


def _bias_cross(ti, tj, psi1_i, psi1_j, c):
    """E[b k_j(x, z_k)] = b psi1_j[n, k]: the bias is constant in x."""
    N, M = c.mu.shape[0], c.Z.shape[0]
    left, right = ti.constant(c.mu).expand(N, M), psi1_j + c.mu.new_zeros(N, M)  # [N, M] each
    return left.unsqueeze(2) * right.unsqueeze(1) if c.per_point else left.T @ right


def _white_cross(ti, tj, psi1_i, psi1_j, c):
    """A white term is zero off the (measure-zero) diagonal."""
    return None


def _rbf_rbf_cross(ti, tj, psi1_i, psi1_j, c):
    Q = c.mu.shape[1]
    return c.summed(_rbf_rbf_psi2(ti.scale(c.mu), ti.precision(Q, c.mu), tj.scale(c.mu), tj.precision(Q, c.mu),
                                  c.mu, c.S, c.Z))


def _rbf_linear_cross(ti, tj, psi1_i, psi1_j, c):
    Q = c.mu.shape[1]
    return _rbf_linear_psi2(psi1_i, ti.precision(Q, c.mu), tj.linear_variances(Q, c.mu), c.mu, c.S, c.Z,
                            c.per_point)


def _linear_linear_cross(ti, tj, psi1_i, psi1_j, c):
    Q = c.mu.shape[1]
    return _linear_linear_psi2(ti.linear_variances(Q, c.mu), tj.linear_variances(Q, c.mu), c.mu, c.S, c.Z,
                               c.per_point)


def _quadrature_cross(ti, tj, psi1_i, psi1_j, c):
    """At least one term without a closed form: Gauss-Hermite on the union of their dimensions."""
    Ki = c.quadrature.kernel_at_nodes(ti, c.Z, with_terms=(ti, tj))  # [N, M, J]
    Kj = c.quadrature.kernel_at_nodes(tj, c.Z, with_terms=(ti, tj))
    return _quadrature_psi2(Ki, Kj, c.quadrature.weights((ti, tj)), c.per_point)


#: (class of k_i, class of k_j) -> the rule for E[k_i(z_m, x) k_j(x, z_k)], either way round (the result then
#: transposed); ``Kernel`` in the second place: any other class. A pair without a rule: quadrature.
_CROSS_TERMS = {
    (RBFKernel, RBFKernel): _rbf_rbf_cross,
    (RBFKernel, LinearKernel): _rbf_linear_cross,
    (LinearKernel, LinearKernel): _linear_linear_cross,
    (WhiteKernel, Kernel): _white_cross,
    (ConstantKernel, Kernel): _bias_cross,
}


def _cross_term(ti: _Term, tj: _Term, psi1_i, psi1_j, c: _Context):
    """E[k_i(z_m, x_n) k_j(x_n, z_k)] [N, M, M] (per point) or [M, M], or None when identically zero."""
    class_i, class_j = type(ti.leaf), type(tj.leaf)
    for key, swapped in (((class_i, class_j), False), ((class_j, class_i), True), ((class_i, Kernel), False),
                         ((class_j, Kernel), True)):
        if key in _CROSS_TERMS:
            if not swapped:
                return _CROSS_TERMS[key](ti, tj, psi1_i, psi1_j, c)
            out = _CROSS_TERMS[key](tj, ti, psi1_j, psi1_i, c)
            return None if out is None else out.transpose(-1, -2)
    return _quadrature_cross(ti, tj, psi1_i, psi1_j, c)


def _quadrature_psi2(Ki, Kj, w, per_point):
    """sum_j w_j K_i[n, m, j] K_j[n, k, j]: [N, M, M] per point, else summed [M, M]."""
    if per_point:
        return (Ki * w) @ Kj.transpose(1, 2)
    N, M, J = Ki.shape
    return (Ki * w).transpose(0, 1).reshape(M, N * J) @ Kj.transpose(0, 1).reshape(M, N * J).T


def _rbf_rbf_psi2(v1, p1, v2, p2, mu, S, Z) -> Tensor:
    r"""E[k_1(z_m, x_n) k_2(x_n, z_k)] for two RBF-ARD kernels, [N, M, M] (the reference path).

    Per dimension, :math:`\exp(-p_1 (x - z_m)^2/2 - p_2 (x - z_k)^2/2) = \exp(-\gamma (z_m - z_k)^2/2)
    \exp(-P (x - c)^2/2)` with :math:`P = p_1 + p_2`, :math:`\gamma = p_1 p_2 / P`,
    :math:`c = (p_1 z_m + p_2 z_k)/P`, and :math:`E_{N(\mu, S)}[\exp(-P (x - c)^2/2)] = (1 + P S)^{-1/2}
    \exp(-P (\mu - c)^2 / 2(1 + P S))`. With :math:`p_1 = p_2 = 1/l^2` this is Titsias & Lawrence's psi2.
    The quadratic in :math:`\mu - c` is expanded so that the temporaries are [N, M, M], not [N, M, M, Q].
    """
    # Stationary kernels: shift mu and Z by a common point (the mean of Z) to keep the expanded
    # squares small (avoids cancellation, notably in float32). The shift is a constant.
    center = Z.detach().mean(0)
    mu, Z = mu - center, Z - center
    P = p1 + p2  # [Q]
    P_safe = torch.where(P > 0, P, torch.ones_like(P))  # dimensions neither kernel uses: P = 0
    alpha, beta, gamma = p1 / P_safe, p2 / P_safe, p1 * p2 / P_safe  # [Q]
    M, Q = Z.shape
    log_norm = torch.log(v1) + torch.log(v2) - 0.5 * torch.log1p(P * S).sum(1)  # [N]
    dz = Z.unsqueeze(1) - Z.unsqueeze(0)  # [M, M, Q]
    z_term = 0.5 * (dz.square() * gamma).sum(2)  # [M, M]
    c = alpha * Z.unsqueeze(1) + beta * Z.unsqueeze(0)  # [M, M, Q]
    w = 0.5 * P / (1.0 + P * S)  # [N, Q]
    # sum_q w (mu - c)^2 = w.mu^2 - 2 (w mu).c + w.c^2
    mu_term = (
        (w * mu.square()).sum(1).reshape(-1, 1, 1)
        - 2.0 * ((w * mu) @ c.reshape(M * M, Q).T).reshape(-1, M, M)
        + (w @ c.square().reshape(M * M, Q).T).reshape(-1, M, M)
    )  # [N, M, M]
    return torch.exp(log_norm.reshape(-1, 1, 1) - z_term - mu_term)


def _rbf_linear_psi2(psi1_rbf, p, a, mu, S, Z, per_point) -> Tensor:
    r"""E[k_rbf(z_m, x_n) k_lin(x_n, z_k)], [N, M, M] or summed [M, M].

    :math:`k_{lin}(x, z_k) = \sum_q a_q z_{kq} x_q`, so this is :math:`\psi_{1,nm} \sum_q a_q z_{kq}
    t_{nmq}` where :math:`t_{nmq} = (\mu_{nq} + p_q S_{nq} z_{mq}) / (1 + p_q S_{nq})` is the mean of
    :math:`x_q` under :math:`q(x_n)` tilted by the RBF factor :math:`\exp(-p_q (x_q - z_{mq})^2/2)`
    (product of two Gaussians in :math:`x_q`).
    """
    scaled = 1.0 + p * S  # [N, Q]
    u, r = mu / scaled, p * S / scaled  # [N, Q] each: t = u + r z_m
    aZ = Z * a  # [M, Q]
    if per_point:
        t = u.unsqueeze(1) + r.unsqueeze(1) * Z.unsqueeze(0)  # [N, M, Q]
        return psi1_rbf.unsqueeze(2) * (t @ aZ.T)
    return (psi1_rbf.T @ u + (psi1_rbf.T @ r) * Z) @ aZ.T


def _linear_linear_psi2(a, b, mu, S, Z, per_point) -> Tensor:
    r"""E[k_a(z_m, x_n) k_b(x_n, z_k)] = z_m^T A (\mu_n \mu_n^T + diag(S_n)) B z_k (Titsias & Lawrence 2010)."""
    aZ, bZ = Z * a, Z * b  # [M, Q]
    if per_point:
        mean_part = (mu @ aZ.T).unsqueeze(2) * (mu @ bZ.T).unsqueeze(1)  # [N, M, M]
        return mean_part + torch.einsum("mq,nq,kq->nmk", aZ, S, bZ)
    second_moment = mu.T @ mu + torch.diag(S.sum(0))  # [Q, Q]
    return aZ @ second_moment @ bZ.T


# ---------------------------------------------------------------------------------------------------
# Gauss-Hermite quadrature for kernels without a closed form
# ---------------------------------------------------------------------------------------------------


class _Quadrature:
    r"""Tensor-product Gauss-Hermite rule for :math:`E_{N(\mu_n, diag S_n)}[f(x)]` on a subset of dimensions.

    :math:`E[f(x)] \approx \sum_j w_j f(\mu_n + \sqrt{2 S_n} t_j)` with :math:`w_j = \pi^{-d/2}
    \prod_q w^{GH}_{j_q}`; dimensions outside the subset stay at :math:`\mu_n` (the kernels there do
    not depend on them).
    """

    def __init__(self, mu, S, n_quadrature):
        self.mu, self.S, self.n = mu, S, n_quadrature
        self._cache = {}

    def _columns(self, terms) -> tuple:
        Q = self.mu.shape[1]
        cols = set()
        for t in terms:
            cols.update(range(Q) if t.dims is None else t.columns(Q).tolist())
        return tuple(sorted(cols))

    def _points(self, d: int) -> int:
        if self.n is not None:
            if int(self.n) < 1:
                raise ValueError(f"n_quadrature must be >= 1, got {self.n}")
            if int(self.n) ** d > _MAX_QUADRATURE_NODES:
                raise ValueError(
                    f"n_quadrature={self.n} on {d} dimensions gives {int(self.n) ** d} nodes per point "
                    f"(> {_MAX_QUADRATURE_NODES}); use fewer points or a kernel with closed-form psi-statistics"
                )
            return int(self.n)
        return int(max(2, min(10, math.floor(4096 ** (1.0 / d) + 1e-9))))

    def _grid(self, cols):
        if cols not in self._cache:
            d = len(cols)
            n = self._points(d)
            t, w = np.polynomial.hermite.hermgauss(n)
            t = torch.as_tensor(t, dtype=self.mu.dtype, device=self.mu.device)
            w = torch.as_tensor(w / math.sqrt(math.pi), dtype=self.mu.dtype, device=self.mu.device)
            grid = torch.cartesian_prod(*([t] * d)).reshape(-1, d)  # [J, d]
            weights = torch.cartesian_prod(*([w] * d)).reshape(-1, d).prod(1)  # [J]
            idx = torch.tensor(cols, dtype=torch.long, device=self.mu.device)
            N, Q = self.mu.shape
            x = self.mu.unsqueeze(1).expand(N, grid.shape[0], Q).clone()  # [N, J, Q]
            offsets = torch.sqrt(2.0 * self.S[:, idx]).unsqueeze(1) * grid  # [N, J, d]
            x = x.index_add(2, idx, offsets)
            self._cache[cols] = (x, weights, n)
        return self._cache[cols]

    def nodes(self, terms):
        self._warn(terms)
        x, w, _ = self._grid(self._columns(terms))
        return x, w

    def weights(self, terms) -> Tensor:
        return self._grid(self._columns(terms))[1]

    def kernel_at_nodes(self, t: _Term, Z: Tensor, with_terms=None) -> Tensor:
        """``t`` between the nodes of ``with_terms``' dimensions and Z: [N, M, J]."""
        x, _ = self.nodes(with_terms or (t,))
        N, J, Q = x.shape
        return t.evaluate(x.reshape(N * J, Q), Z).reshape(N, J, -1).transpose(1, 2)

    def _warn(self, terms):
        for t in terms:
            name = type(t.leaf).__name__
            if not _has_closed_form(t.leaf) and name not in _WARNED_QUADRATURE:
                _WARNED_QUADRATURE.add(name)
                d = len(self._columns((t,)))
                warnings.warn(
                    f"{name} has no closed-form psi-statistics: using Gauss-Hermite quadrature with "
                    f"{self._points(d)} points per dimension ({self._points(d) ** d} nodes per point), "
                    "which is slower and approximate (set n_quadrature to change it)",
                    stacklevel=4,
                )
