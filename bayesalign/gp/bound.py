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

__all__ = [
    "InducingPosterior",
    "collapsed_bound",
    "inducing_posterior",
    "kernel_matrix",
    "kl_standard_normal",
    "per_point_bound",
    "stable_cholesky",
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
    """The dense kernel matrix ``k(x1, x2)`` [N1, N2] of a GPyTorch kernel (``x2 = x1`` if omitted)."""
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


def collapsed_bound(Y: torch.Tensor, noise: torch.Tensor, Kuu: torch.Tensor, psi0: torch.Tensor,
                    psi1: torch.Tensor, psi2: torch.Tensor, trYY: torch.Tensor | None = None,
                    what: str = "Kuu") -> torch.Tensor:
    r"""The collapsed bound F of one view, without the KL term (eq. 14-17 of Titsias & Lawrence).

    .. math::
        F = -\tfrac{ND}{2} \log(2\pi/\beta) - \tfrac\beta2 \mathrm{tr}(Y^\top Y) - D \log|L_B|
            + \tfrac{\beta^2}{2} \|L_B^{-1} L^{-1} \Psi_1^\top Y\|^2 - \tfrac{\beta D}{2} (\psi_0 - \mathrm{tr}\, C),

    with :math:`L = \mathrm{chol}(K_{uu})`, :math:`C = L^{-1} \Psi_2 L^{-\top}`, :math:`L_B = \mathrm{chol}(I +
    \beta C)` (module docstring). Plain torch: autograd differentiates it. The M x M algebra runs in
    float64 whatever the model's dtype: it is cheap, and in float32 the Cholesky factors of an
    ill-conditioned Kuu lose B's positive definiteness; F is returned in Y's dtype.

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
    what : str
        How a warning or error about Kuu's Cholesky names it (e.g. ``"Kuu of view 0"``).

    Returns
    -------
    Scalar tensor F, differentiable in noise, Kuu, psi0, psi1 and psi2.

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
    Y = Y.detach()
    N, D = Y.shape
    psi1Y = (psi1.mT @ Y).double()  # [M, D]: the only O(N) product, in the model's dtype
    trYY = (Y.square().sum() if trYY is None else trYY.detach()).double()
    noise, Kuu, psi0, psi2 = noise.double(), Kuu.double(), psi0.double(), psi2.double()
    beta = 1.0 / noise
    L = stable_cholesky(Kuu, what)  # [M, M]
    C, LB = _bound_factors(noise, L, psi2)  # [M, M] each
    c = torch.linalg.solve_triangular(LB, torch.linalg.solve_triangular(L, psi1Y, upper=False), upper=False)
    F = (-0.5 * N * D * (_LOG_2PI + noise.log()) - 0.5 * beta * trYY  # log N(Y | 0, I / beta)
         - D * LB.diagonal().log().sum()  # D/2 (log|Kuu| - log|A|)
         + 0.5 * beta.square() * c.square().sum()  # beta^2 / 2 tr(Y' psi1 A^-1 psi1' Y)
         - 0.5 * beta * D * (psi0 - C.diagonal().sum()))  # -beta D / 2 (psi0 - tr(Kuu^-1 psi2))
    return F.to(Y.dtype)


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
