"""The collapsed variational bound of the Bayesian GP-LVM and the optimal q(u) behind it.

Titsias & Lawrence (2010), "Bayesian Gaussian Process Latent Variable Model", eqs. (14)-(18);
Damianou, Ek, Titsias & Lawrence (2012), "Manifold Relevance Determination", eq. (4) for the
sum over views. One view with outputs ``Y`` [N, D] (centred), noise variance ``1/beta``, inducing
inputs ``Z`` [M, Q], ``Kuu = k(Z, Z)`` and the psi-statistics of q(X) (``psi0 = sum_n <k(x_n,
x_n)>``, ``psi1[n, m] = <k(x_n, z_m)>``, ``psi2 = sum_n <k(z, x_n) k(x_n, z)>``) has

    F = -N D / 2 log(2 pi / beta) - beta / 2 tr(Y'Y) + D / 2 log|Kuu| - D / 2 log|A|
        + beta^2 / 2 tr(Y' psi1 A^-1 psi1' Y) - beta D / 2 psi0 + beta D / 2 tr(Kuu^-1 psi2),
    A = Kuu + beta psi2,

and the full bound is ``sum_views F_v - KL(q(X) || N(0, I))``. Everything is written with the
Cholesky factors ``L = chol(Kuu)``, ``C = L^-1 psi2 L^-T``, ``B = I + beta C = L^-1 A L^-T``,
``LB = chol(B)`` (the same factorisation as GPy's ``VarDTC``), so that
``log|A| - log|Kuu| = log|B|`` and ``tr(Y' psi1 A^-1 psi1' Y) = ||LB^-1 L^-1 psi1' Y||^2``.

The optimal q(u) of a view (Titsias, 2009, eq. 10) is ``N(Kuu alpha, Kuu A^-1 Kuu)`` with
``alpha = beta A^-1 psi1' Y`` [M, D]; :func:`inducing_posterior` returns ``alpha`` and
``Kuu^-1 - A^-1``, which give predictions and the per-point bound used to infer new points.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import gpytorch
import torch
from linear_operator.utils.cholesky import psd_safe_cholesky
from linear_operator.utils.errors import NotPSDError
from linear_operator.utils.warnings import NumericalWarning
from torch.autograd.function import once_differentiable

from .functions.rbf_psi import gram_backward, gram_forward, psi_backward, psi_forward, with_bias_and_white
from .kernels import fast_gram

__all__ = [
    "InducingPosterior",
    "RBFViewsBound",
    "collapsed_bound",
    "inducing_posterior",
    "kernel_matrix",
    "kl_standard_normal",
    "per_point_bound",
    "stable_cholesky",
    "views_bound_backward",
    "views_bound_forward",
]

_LOG_2PI = math.log(2.0 * math.pi)


def stable_cholesky(matrix: torch.Tensor, what: str = "matrix", jitter: float | None = None,
                    max_tries: int = 4) -> torch.Tensor:
    """Lower Cholesky factor of a symmetric PSD matrix, adding diagonal jitter only if it fails.

    The fast path is one ``torch.linalg.cholesky_ex``. If the matrix is not numerically positive
    definite, ``linear_operator``'s ``psd_safe_cholesky`` adds ``jitter * 10**i`` (relative to the
    mean of the diagonal) for ``i = 0..max_tries-1`` and a ``NumericalWarning`` names the matrix
    and the jitter that was needed. Raises ``linear_operator.utils.errors.NotPSDError`` after
    ``max_tries`` failures (naming the matrix). Differentiable.

    >>> L = stable_cholesky(torch.tensor([[4.0, 2.0], [2.0, 5.0]], dtype=torch.float64))
    >>> L.tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    L, info = torch.linalg.cholesky_ex(matrix)
    if not bool(info.any()):
        return L
    if matrix.dim() == 3:  # a batch over views (RBFViewsBound): say which failed
        what = f"{what} of view index {torch.nonzero(info).flatten().tolist()}"
    if jitter is None:
        jitter = 1e-8 if matrix.dtype == torch.float64 else 1e-6
    scale = float(matrix.detach().diagonal(dim1=-2, dim2=-1).abs().mean().clamp_min(1e-300))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", NumericalWarning)
        try:
            L = psd_safe_cholesky(matrix, jitter=jitter * scale, max_tries=max_tries)
        except NotPSDError as exc:
            raise NotPSDError(f"{what} is not positive definite even with {jitter * scale * 10 ** (max_tries - 1):.1e} "
                              f"added to its diagonal (mean diagonal {scale:.3g}); in float32 the psi-statistics "
                              "may be too inexact for this model: use dtype=float64") from exc
    added = [str(w.message).split("jitter of ")[-1].split(" ")[0] for w in caught
             if issubclass(w.category, NumericalWarning)]
    warnings.warn(f"{what} was not positive definite: added jitter {added[-1] if added else '?'} to its "
                  f"diagonal (mean diagonal {scale:.3g})", NumericalWarning, stacklevel=2)
    return L


def kernel_matrix(kernel, x1: torch.Tensor, x2: torch.Tensor | None = None) -> torch.Tensor:
    """The dense kernel matrix ``k(x1, x2)`` [N1, N2] of a GPyTorch kernel (``x2 = x1`` if omitted).

    ``k(x1, x1)`` of ``rbf (+ bias) (+ white)`` takes :func:`bayesalign.gp.kernels.fast_gram` (the same
    values in a tenth of the tensor operations).
    """
    if x2 is None:
        gram = fast_gram(kernel, x1)
        if gram is not None:
            return gram
    # non-lazy evaluation: the lazy kernel tensor costs twice the time on the small matrices here
    with gpytorch.settings.lazily_evaluate_kernels(False):
        out = kernel(x1, x1 if x2 is None else x2)
    return out.to_dense() if hasattr(out, "to_dense") else out


def kl_standard_normal(mean: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
    """KL(q(X) || N(0, I)) for a diagonal Gaussian q(X) = prod_n N(mean_n, diag(variance_n)).

    ``0.5 * sum(mean^2 + variance - log(variance) - 1)`` (Titsias & Lawrence, 2010, eq. 14).

    >>> float(kl_standard_normal(torch.zeros(3, 2), torch.ones(3, 2)))
    0.0
    """
    return 0.5 * (mean.square() + variance - variance.log() - 1.0).sum()


def _bound_factors(noise, L, psi2):
    """``C = L^-1 psi2 L^-T`` and ``LB = chol(I + beta C)`` [M, M] (eq. 17 of Titsias & Lawrence)."""
    beta = 1.0 / noise
    left = torch.linalg.solve_triangular(L, psi2, upper=False)  # L^-1 psi2   [M, M]
    C = torch.linalg.solve_triangular(L, left.mT, upper=False)  # L^-1 psi2 L^-T (psi2 symmetric)
    C = 0.5 * (C + C.mT)
    B = torch.eye(C.shape[-1], dtype=C.dtype, device=C.device) + beta * C  # [M, M]
    return C, stable_cholesky(B, "I + beta L^-1 psi2 L^-T")


def bound_forward(Y, D, trYY, noise, Kuu, psi0, psi1, psi2):
    """F [V] of V views at once (no autograd graph; the forward of the custom Functions below).

    Shapes: Y [V, N, D_max] (each view's centred outputs, zero-padded to the widest view: zero
    columns add nothing to ``psi1' Y`` or ``tr(Y'Y)``), D [V] the true column counts, trYY [V],
    noise [V], Kuu [V, M, M], psi0 [V], psi1 [V, N, M], psi2 [V, M, M]. Returns ``(F, saved)``.
    The M x M algebra runs in float64 whatever the model's dtype: it is cheap, and in float32 the
    Cholesky factors of an ill-conditioned Kuu lose B's positive definiteness.
    """
    V, N, _ = Y.shape
    M = Kuu.shape[-1]
    dtype = Kuu.dtype
    psi1Y = torch.bmm(psi1.mT, Y)  # [V, M, D_max] (the only O(N) product, in the model's dtype)
    if dtype != torch.float64:
        psi1Y, noise, Kuu, psi0, psi2, trYY, D = (t.double() for t in (psi1Y, noise, Kuu, psi0, psi2, trYY, D))
    beta = noise.reciprocal()  # [V]
    eye = torch.eye(M, dtype=torch.float64, device=Kuu.device).expand(V, M, M)
    L = stable_cholesky(Kuu, "Kuu")
    Li = torch.linalg.solve_triangular(L, eye, upper=False)  # L^-1   [V, M, M]
    C = torch.bmm(torch.bmm(Li, psi2), Li.mT)  # L^-1 psi2 L^-T   [V, M, M]
    B = C * beta[:, None, None]  # I + beta C; the Cholesky reads its lower triangle only
    B.diagonal(dim1=1, dim2=2).add_(1.0)
    LB = stable_cholesky(B, "I + beta L^-1 psi2 L^-T")
    LBi = torch.linalg.solve_triangular(LB, eye, upper=False)  # LB^-1   [V, M, M]
    c = torch.bmm(LBi, torch.bmm(Li, psi1Y))  # LB^-1 L^-1 psi1' Y   [V, M, D_max]
    trC = C.diagonal(dim1=1, dim2=2).sum(1)  # [V]
    log_det_B = LB.diagonal(dim1=1, dim2=2).log().sum(1)  # [V]
    bound = (-0.5 * (N * D * (noise.log() + _LOG_2PI) + beta * (trYY + D * (psi0 - trC))
                     - beta.square() * c.square().sum((1, 2))) - D * log_det_B)  # [V]
    return bound.to(dtype), (Y, trYY, D, noise, psi0, psi2, Li, LBi, c, psi1Y, trC)


def bound_backward(saved, grad=None):
    """Gradients (noise [V], Kuu [V, M, M], psi0 [V], psi1 [V, N, M], psi2 [V, M, M]) of ``<grad, F>``
    for the incoming gradient ``grad`` [V] (None: all ones) (the formulas of :class:`_CollapsedBound`)."""
    Y, trYY, D, noise, psi0, psi2, Li, LBi, c, psi1Y, trC = saved
    N = Y.shape[1]
    M = Li.shape[-1]
    out = Y.dtype
    beta = noise.reciprocal()  # [V]
    b3, D3 = beta[:, None, None], D[:, None, None]
    Kinv = torch.bmm(Li.mT, Li)  # Kuu^-1
    LBiLi = torch.bmm(LBi, Li)  # LB^-1 L^-1
    Ainv = torch.bmm(LBiLi.mT, LBiLi)  # A^-1 = L^-T B^-1 L^-1
    alpha = torch.bmm(LBiLi.mT, c).mul_(b3)  # beta A^-1 psi1' Y   [V, M, D_max]
    aa = torch.bmm(alpha, alpha.mT)  # [V, M, M]
    half = (D3 * (Kinv - Ainv) - aa).mul_(0.5)  # (D (Kuu^-1 - A^-1) - alpha alpha') / 2
    d_psi2 = half * b3
    d_Kuu = half.sub_(torch.bmm(torch.bmm(Kinv, psi2), Kinv).mul_(0.5 * b3 * D3))
    d_psi1 = torch.bmm(Y, alpha.mT.to(out)).mul_(b3.to(out))  # [V, N, M]
    d_psi0 = -0.5 * beta * D
    # dF/dbeta; tr(alpha' psi2 alpha) = sum(psi2 * alpha alpha')
    d_beta = (0.5 * D * (LBi.square().sum((1, 2)) + (N - M)) * noise + (alpha * psi1Y).sum((1, 2))
              - 0.5 * (trYY + (aa * psi2).sum((1, 2)) + D * (psi0 - trC)))
    d_noise = -beta.square() * d_beta
    if grad is not None:
        grad = grad.double()
        g3 = grad[:, None, None]
        d_noise, d_Kuu, d_psi0, d_psi2 = grad * d_noise, g3 * d_Kuu, grad * d_psi0, g3 * d_psi2
        d_psi1 = d_psi1 * g3.to(out)
    if out != torch.float64:
        d_noise, d_Kuu, d_psi0, d_psi2 = (t.to(out) for t in (d_noise, d_Kuu, d_psi0, d_psi2))
    return d_noise, d_Kuu, d_psi0, d_psi1, d_psi2


class _CollapsedBound(torch.autograd.Function):
    """F of one view with a hand-written backward (the bound is a few M x M products; autograd
    through two Cholesky factorisations and their triangular solves costs several times more).

    Gradients (A = Kuu + beta psi2, alpha = beta A^-1 psi1' Y [M, D], s = 1/beta the noise variance):
        dF/dpsi0 = -beta D / 2,    dF/dpsi1 = beta Y alpha',
        dF/dpsi2 = beta / 2 (D Kuu^-1 - D A^-1 - alpha alpha'),
        dF/dKuu  = D / 2 (Kuu^-1 - A^-1) - alpha alpha' / 2 - beta D / 2 Kuu^-1 psi2 Kuu^-1,
        dF/ds    = -beta^2 [N D / (2 beta) - tr(Y'Y) / 2 - D (M - tr B^-1) / (2 beta) + tr(alpha' psi1' Y)
                            - tr(alpha' psi2 alpha) / 2 - D psi0 / 2 + D tr(C) / 2]
    (the same as GPy's VarDTC, written in terms of alpha; checked against autograd in the tests).
    One view of :func:`bound_forward` / :func:`bound_backward`.
    """

    @staticmethod
    def forward(ctx, Y, trYY, noise, Kuu, psi0, psi1, psi2):
        D = torch.full((1,), Y.shape[1], dtype=Y.dtype, device=Y.device)
        bound, saved = bound_forward(Y[None], D, trYY.reshape(1), noise.reshape(1), Kuu[None], psi0.reshape(1),
                                     psi1[None], psi2[None])
        ctx.save_for_backward(*saved)
        return bound[0]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        d_noise, d_Kuu, d_psi0, d_psi1, d_psi2 = bound_backward(ctx.saved_tensors, grad.reshape(1))
        needs = ctx.needs_input_grad
        return (None, None,
                d_noise[0] if needs[2] else None,
                d_Kuu[0] if needs[3] else None,
                d_psi0[0] if needs[4] else None,
                d_psi1[0] if needs[5] else None,
                d_psi2[0] if needs[6] else None)


class RBFViewsBound(torch.autograd.Function):
    r"""The collapsed bounds F_v [V] of every view of an MRD whose kernels are all ``rbf (+ bias) (+ white)``,
    in one custom Function: ``Kuu`` (:func:`~bayesalign.gp.functions.rbf_psi.gram_forward`), the
    psi-statistics (:func:`~bayesalign.gp.functions.rbf_psi.psi_forward`) and F
    (:func:`bound_forward`), batched over the views, with the backward chained by hand through the
    same pieces. One evaluation is about 150 tensor operations for any number of views, instead of
    ~400 per view through autograd (the per-operation overhead dominates at small N).

    The kernel of view v is :math:`\sigma_v^2 \exp(-	frac12 \sum_q (x_q - x'_q)^2 / l_{vq}^2) + b_v + w_v [x = x']`;
    the bias adds :math:`N b` to psi0, b to psi1 and :math:`b (s_m + s_k) + N b^2` to psi2 with
    :math:`s = \sum_n \psi_{1,n}` of the RBF part (the RBF x bias cross terms); the white term adds
    :math:`N w` to psi0 and w to the diagonal of Kuu only. ``jitter`` times the (detached) diagonal
    :math:`\sigma^2 + b + w` is added to Kuu, as :meth:`LatentGPModule.kuu` does.

    Inputs: variance, bias, white, noise [V] (bias or white None: no view has that term);
    lengthscale [V, Q]; mu, S [N, Q]; Z [1 or V, M, Q] (shared or per view); Y [V, N, D_max]
    zero-padded outputs, D [V] column counts, trYY [V]; jitter (float); chunk_size (int). Output: F [V].
    """

    @staticmethod
    def forward(ctx, variance, lengthscale, bias, white, noise, mu, S, Z, Y, D, trYY, jitter: float, chunk_size: int):
        F, saved = views_bound_forward(variance, lengthscale, bias, white, noise, mu, S, Z, Y, D, trYY, jitter,
                                       chunk_size)
        tensors, ctx.layout = saved
        ctx.save_for_backward(*tensors)
        return F

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        grads = views_bound_backward((ctx.saved_tensors, ctx.layout), grad)
        return (*grads, None, None, None, None, None)


def views_bound_forward(variance, lengthscale, bias, white, noise, mu, S, Z, Y, D, trYY, jitter: float,
                        chunk_size: int):
    """F [V] of :class:`RBFViewsBound` without an autograd graph; returns ``(F, saved)`` for
    :func:`views_bound_backward` (the inputs are those of :class:`RBFViewsBound`; ``bias`` or
    ``white`` may be None when no view has that term)."""
    V, N = variance.shape[0], mu.shape[0]
    M = Z.shape[1]
    Zv = Z.expand(V, M, Z.shape[2])  # [V, M, Q]
    gram, gram_saved = gram_forward(variance, lengthscale, Zv)  # [V, M, M]
    signal = variance if bias is None else variance + bias  # the jitter is relative to the mean diagonal
    diag = jitter * signal if white is None else white + jitter * (signal + white)  # [V]
    Kuu = gram + diag[:, None, None] * torch.eye(M, dtype=gram.dtype, device=gram.device)  # gram is saved
    psi0, psi1, psi2, psi_saved = psi_forward(variance, lengthscale, mu, S, Zv, chunk_size)
    psi0, psi1, psi2, colsum = with_bias_and_white(psi0, psi1, psi2, bias, white, N)
    if bias is not None:
        Kuu = Kuu + bias[:, None, None]
    F, bound_saved = bound_forward(Y, D, trYY, noise, Kuu, psi0, psi1, psi2)
    tensors = (*gram_saved, *psi_saved, *bound_saved, *(() if bias is None else (bias, colsum)))
    layout = (len(gram_saved), len(psi_saved), len(bound_saved), chunk_size, Z.shape[0] == 1, white is not None)
    return F, (tensors, layout)


def views_bound_backward(saved, grad=None):
    """Gradients (variance, lengthscale, bias, white, noise, mu, S, Z) of ``<grad, F>`` for the
    incoming gradient ``grad`` [V] (None: all ones), from the ``saved`` of :func:`views_bound_forward`
    (None for an absent bias or white term)."""
    saved, (n_gram, n_psi, n_bound, chunk_size, shared_z, has_white) = saved
    gram_saved = saved[:n_gram]
    psi_saved = saved[n_gram:n_gram + n_psi]
    bound_saved = saved[n_gram + n_psi:n_gram + n_psi + n_bound]
    bias, colsum = saved[n_gram + n_psi + n_bound:] or (None, None)
    N = psi_saved[3].shape[1]
    d_noise, d_Kuu, d_psi0, d_psi1, d_psi2 = bound_backward(bound_saved, grad)
    d_bias = d_white = None
    if bias is not None:
        d_psi2_rows = (d_psi2 + d_psi2.mT).sum(2)  # [V, M]
        d_bias = (N * d_psi0 + d_psi1.sum((1, 2)) + (d_psi2_rows * colsum).sum(1)
                  + 2.0 * N * bias * d_psi2.sum((1, 2)) + d_Kuu.sum((1, 2)))
        d_psi1 = d_psi1 + (bias[:, None] * d_psi2_rows).unsqueeze(1)  # through colsum
    if has_white:
        d_white = N * d_psi0 + d_Kuu.diagonal(dim1=1, dim2=2).sum(1)
    g_var, g_ls, g_mu, g_S, g_Z = psi_backward(psi_saved, d_psi0, d_psi1, d_psi2, chunk_size)
    k_var, k_ls, k_Z = gram_backward(gram_saved, d_Kuu)
    g_Z = g_Z + k_Z
    if shared_z:
        g_Z = g_Z.sum(0, keepdim=True)
    return g_var + k_var, g_ls + k_ls, d_bias, d_white, d_noise, g_mu, g_S, g_Z


def collapsed_bound(Y: torch.Tensor, noise: torch.Tensor, Kuu: torch.Tensor, psi0: torch.Tensor,
                    psi1: torch.Tensor, psi2: torch.Tensor, trYY: torch.Tensor | None = None) -> torch.Tensor:
    """The collapsed bound F of one view, without the KL term (eq. 14-17 of Titsias & Lawrence).

    Parameters
    ----------
    Y : tensor [N, D]
        Centred outputs of the view (no gradient is taken with respect to Y).
    noise : scalar tensor
        Noise variance ``1 / beta``.
    Kuu : tensor [M, M]
        ``k(Z, Z)`` with its jitter (more is added, with a warning, if its Cholesky fails).
    psi0 : scalar tensor
        ``sum_n <k(x_n, x_n)>``.
    psi1 : tensor [N, M]
    psi2 : tensor [M, M]
        ``sum_n <k(Z, x_n) k(x_n, Z)>``.
    trYY : scalar tensor, optional
        ``tr(Y'Y)``, if precomputed.

    Returns
    -------
    Scalar tensor F, differentiable in noise, Kuu, psi0, psi1 and psi2 (hand-written backward).

    Examples
    --------
    With ``psi1 = 0`` and ``psi2 = 0`` the data are pure noise and F is the noise log density:

    >>> Y = torch.tensor([[1.0], [-1.0]], dtype=torch.float64)
    >>> F = collapsed_bound(Y, torch.tensor(1.0, dtype=torch.float64), torch.eye(1, dtype=torch.float64),
    ...                     torch.tensor(0.0, dtype=torch.float64), torch.zeros(2, 1, dtype=torch.float64),
    ...                     torch.zeros(1, 1, dtype=torch.float64))
    >>> round(float(F), 6) == round(-math.log(2 * math.pi) - 1.0, 6)
    True
    """
    if trYY is None:
        trYY = Y.square().sum()
    return _CollapsedBound.apply(Y.detach(), trYY.detach(), noise, Kuu, psi0, psi1, psi2)


@dataclass(frozen=True)
class InducingPosterior:
    """The optimal q(u) of one view, in the two forms predictions need.

    Attributes
    ----------
    alpha : tensor [M, D]
        ``beta A^-1 psi1' Y``: the predictive mean at x is ``k(x, Z) alpha`` and q(u) has mean
        ``Kuu alpha``.
    woodbury_inv : tensor [M, M]
        ``Kuu^-1 - A^-1``: the predictive variance of f at x is ``k(x, x) - k(x, Z) W k(Z, x)``.
    L : tensor [M, M]
        Cholesky factor of ``Kuu`` (with jitter).
    """

    alpha: torch.Tensor
    woodbury_inv: torch.Tensor
    L: torch.Tensor


def inducing_posterior(Y: torch.Tensor, noise: torch.Tensor, L: torch.Tensor, psi1: torch.Tensor,
                       psi2: torch.Tensor) -> InducingPosterior:
    """The optimal q(u) = N(Kuu alpha, Kuu A^-1 Kuu) of one view (Titsias, 2009, eq. 10).

    With ``A = L B L'`` (see the module docstring): ``alpha = beta L^-T B^-1 L^-1 psi1' Y`` and
    ``Kuu^-1 - A^-1 = L^-T (I - B^-1) L^-1``. Computed in float64 and returned in L's dtype.
    """
    dtype = L.dtype
    psi1Y = (psi1.mT @ Y).double()  # [M, D]
    noise, L, psi2 = noise.double(), L.double(), psi2.double()
    beta = 1.0 / noise
    _, LB = _bound_factors(noise, L, psi2)
    eye = torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)
    Linv = torch.linalg.solve_triangular(L, eye, upper=False)  # [M, M]
    LBinv = torch.linalg.solve_triangular(LB, eye, upper=False)  # [M, M]
    Binv = LBinv.mT @ LBinv
    alpha = beta * (Linv.mT @ (Binv @ (Linv @ psi1Y)))  # [M, D]
    woodbury_inv = Linv.mT @ (eye - Binv) @ Linv  # [M, M]
    return InducingPosterior(alpha=alpha.to(dtype), woodbury_inv=(0.5 * (woodbury_inv + woodbury_inv.mT)).to(dtype),
                             L=L.to(dtype))


def per_point_bound(Y: torch.Tensor, noise: torch.Tensor, posterior: InducingPosterior, psi0: torch.Tensor,
                    psi1: torch.Tensor, psi2: torch.Tensor) -> torch.Tensor:
    """The uncollapsed bound of each row of Y with q(u) fixed, without the KL term of q(x_n).

    With q(u) = N(Kuu alpha, Kuu (Kuu^-1 - W) Kuu) fixed, the bound
    ``<log p(Y | F)>_{p(F|u) q(u) q(X)} - KL(q(u) || p(u))`` of Titsias & Lawrence (2010, eq. 13)
    factorises over the rows n; the term of row n (dropping the constant KL of q(u)) is

        F_n = -D/2 log(2 pi / beta) - beta/2 ||y_n||^2 + beta psi1_n alpha y_n
              - beta/2 tr((alpha alpha' - D W) psi2_n) - beta D/2 psi0_n.

    At the optimal q(u) of the training data, ``sum_n F_n = F + KL(q(u) || p(u))`` and the
    gradient in q(x_n) equals that of the collapsed bound F. The matrix ``alpha alpha' - D W`` is
    the same for every row, so ``sum_n F_n`` needs only the *summed* psi2: given summed
    statistics (``psi0`` scalar, ``psi2`` [M, M]) this returns ``sum_n F_n`` (a scalar), which is
    what inference optimises (each row's gradient is still its own).

    Parameters
    ----------
    Y : tensor [n, D]
    noise : scalar tensor
    posterior : InducingPosterior
    psi0 : tensor [n] or scalar
    psi1 : tensor [n, M]
    psi2 : tensor [n, M, M] (per point) or [M, M] (summed)

    Returns
    -------
    tensor [n] (per-point statistics) or scalar (summed statistics)
    """
    n, D = Y.shape
    beta = 1.0 / noise
    alpha, W = posterior.alpha, posterior.woodbury_inv
    G = alpha @ alpha.mT - D * W  # [M, M]
    fit = (psi1 * (Y @ alpha.mT)).sum(-1)  # psi1_n alpha y_n   [n]
    yy = Y.square().sum(-1)  # [n]
    quad = (psi2 * G).sum((-2, -1))  # tr(G psi2_n)   [n], or summed over n
    if psi2.dim() == 2:
        fit, yy, n_rows = fit.sum(), yy.sum(), n
    else:
        n_rows = 1
    return (-0.5 * n_rows * D * (_LOG_2PI + noise.log()) - 0.5 * beta * yy + beta * fit
            - 0.5 * beta * quad - 0.5 * beta * D * psi0)
