"""Linear algebra of the linear spectral methods: whitening and row-space bases, locality preserving projections."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import scipy.linalg
import scipy.sparse.linalg as spla

from .._utils import as_rng
from ._checks import check_n_components


def whitening_basis(Xc: np.ndarray, weights: np.ndarray | None = None, reg: float = 0.0) -> np.ndarray:
    """T (p, r): a basis of the row space of ``Xc`` with ``T' (Xc' D Xc + gamma I) T = I``, ``D = diag(weights)``.

    Used by CCA to restrict the projections to the row space of a view and whiten its
    constraint matrix there, so a view with more features than rows costs ``O(n p min(n, p))``
    and never a dense ``p x p`` eigen-problem.
    ``H = D^{1/2} Xc`` (``D = I`` when ``weights`` is None) has right singular vectors ``E`` and
    squared singular values ``lam`` (from the eigen-decomposition of the smaller Gram matrix, ``H'H`` or ``HH'``); the
    directions with ``lam = 0`` (the null space of ``Xc``, non-empty when p >= n) are dropped
    and ``T = E (lam + gamma)^{-1/2}``, ``gamma = reg * mean(lam)``.
    """
    n, p = Xc.shape
    H = Xc if weights is None else np.sqrt(weights)[:, None] * Xc  # [n, p]
    if p <= n:
        lam, E = np.linalg.eigh(H.T @ H)  # [p], [p, p]
    else:
        lam, U = np.linalg.eigh(H @ H.T)  # [n], [n, n]
        E = H.T @ U  # [p, n]: right singular vectors times sqrt(lam)
    lam = np.clip(lam, 0.0, None)
    keep = lam > max(n, p) * np.finfo(float).eps * max(float(lam.max()), np.finfo(float).tiny)
    lam, E = lam[keep], E[:, keep]
    if p > n:
        E = E / np.sqrt(lam)  # unit columns
    gamma = reg * float(lam.mean()) if lam.size else 0.0
    return E / np.sqrt(lam + gamma)  # [p, r]


# Above this many coordinates the linear eigenproblem is solved by shift-invert Lanczos.
LPP_DENSE_LIMIT = 1500


def row_space_basis(Xc: np.ndarray) -> np.ndarray:
    """E (p, r): orthonormal basis of the row space of ``Xc`` (n, p), from the n x n Gram matrix.

    ``O(n^2 p + n^3)``; meant for p > n, where it replaces p coordinates by r <= n.
    """
    n, p = Xc.shape
    lam, U = np.linalg.eigh(Xc @ Xc.T)  # [n], [n, n]
    keep = lam > max(n, p) * np.finfo(float).eps * max(float(lam.max()), np.finfo(float).tiny)
    return (Xc.T @ U[:, keep]) / np.sqrt(lam[keep])  # [p, r]


def locality_preserving_projections(L, D, centred: Mapping[str, np.ndarray], slices: Mapping[str, slice],
                                    n_components: int, *, reg: float = 1e-6, eigen_solver: str = "auto",
                                    seed=0) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Smallest solutions of ``X' L X f = lambda X' D X f`` with ``X = diag(X_v)`` block-diagonal, regularised.

    Locality preserving projections (He & Niyogi 2003) of one view, or of the joint graph of
    several (manifold projections, Wang, Krafft & Mahadevan 2011, section 5.3.1).

    Regularisation: ``X' D X`` is singular when a view has p >= n (centring alone removes one
    rank) or collinear features, and a ridge on that side alone does not help: any ``f`` with
    ``X f = 0`` has cost 0 and would come out first, as an all-zero embedding. So the ridge
    ``gamma_v = reg * mean eigenvalue of X_v' D_v X_v`` is added to ``X' D X`` and ``2 gamma_v``
    to ``X' L X``: directions without data get the eigenvalue 2, the top of the spectrum of a
    normalised Laplacian (all eigenvalues of the unregularised problem lie in [0, 2]), and the
    others move by ``O(gamma)``.

    Size: a view with p_v > n_v is first reduced, exactly, to its row space
    (:func:`row_space_basis`; null-space directions change no coordinate), so the problem has
    ``R = sum_v min(p_v, rank_v)`` unknowns. ``X' L X`` is assembled block by block, using only the
    anchored rows for the sparse off-diagonal blocks. The dense ``R x R`` problem is solved by
    LAPACK when ``R <= 1500`` and otherwise by Lanczos in shift-invert mode around a point just
    below 0 (one dense Cholesky factorisation, ``R^3 / 3`` flops, then a few dozen solves).

    Parameters
    ----------
    L, D : sparse (N, N) joint Laplacian and degree matrix
    centred : dict view -> (n_v, p_v) centred data, in the row order of ``L``
    slices : dict view -> rows of that view in ``L``
    n_components : int
    reg : float
        Relative ridge (> 0 whenever some ``X_v' D_v X_v`` may be singular).
    eigen_solver : "auto", "dense" or "arpack"
    seed : int
        Starting vector of Lanczos.

    Returns
    -------
    eigenvalues : (d,) ascending
    projections : dict view -> F_v (p_v, d), with ``sum_v F_v' (X_v' D_v X_v + gamma_v I) F_v = I``
    """
    names = list(centred)
    degree = D.diagonal()
    bases, coords = {}, {}
    for v in names:
        n_v, p_v = centred[v].shape
        if not np.any(centred[v]):  # its block of X' D X would be 0 however large reg is
            raise ValueError(f"view {v!r} is constant (every column holds one value): nothing in it to project")
        bases[v] = row_space_basis(centred[v]) if p_v > n_v else None  # E_v: [p_v, r_v]
        coords[v] = centred[v] if bases[v] is None else centred[v] @ bases[v]  # Z_v: [n_v, r_v]
    sizes = [coords[v].shape[1] for v in names]
    R = int(sum(sizes))
    d = check_n_components(n_components, R, f"the features of the views ({R} after row-space reduction)")
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    blocks = {v: slice(int(bounds[i]), int(bounds[i + 1])) for i, v in enumerate(names)}
    A = np.zeros((R, R))  # Z' L Z, assembled in place (R x R is the largest object here)
    B = np.zeros((R, R))  # Z' D Z, block-diagonal
    diagonal = np.diag_indices(R)
    for i, a in enumerate(names):
        Za = coords[a]
        B_aa = Za.T @ (degree[slices[a], None] * Za)
        B[blocks[a], blocks[a]] = 0.5 * (B_aa + B_aa.T)
        for b in names[i:]:
            L_ab = L[slices[a], slices[b]].tocsr()
            rows = np.flatnonzero(np.diff(L_ab.indptr))  # only rows with entries (anchors, off the diagonal)
            if rows.size:
                A_ab = Za[rows].T @ (L_ab[rows] @ coords[b])
                if a == b:
                    A[blocks[a], blocks[a]] = 0.5 * (A_ab + A_ab.T)
                else:  # L is symmetric: the (b, a) block is the transpose
                    A[blocks[a], blocks[b]] = A_ab
                    A[blocks[b], blocks[a]] = A_ab.T
                del A_ab
        del B_aa
    ridge = np.concatenate([np.full(sizes[i], reg * np.trace(B[blocks[v], blocks[v]]) / max(sizes[i], 1))
                            for i, v in enumerate(names)])  # [R]: gamma_v per coordinate
    A[diagonal] += 2.0 * ridge
    B[diagonal] += ridge
    method = eigen_solver
    if method == "auto":
        method = "dense" if R <= LPP_DENSE_LIMIT or d >= R - 1 else "arpack"
    try:
        if method == "dense":
            values, beta = scipy.linalg.eigh(A, B, subset_by_index=[0, d - 1])
        elif method == "arpack":
            sigma = -1e-6 * float(np.mean(np.diag(A)) / np.mean(np.diag(B)))
            for v in names:  # A -= sigma B in place, block by block (B is block-diagonal): no R x R temporary
                A[blocks[v], blocks[v]] -= sigma * B[blocks[v], blocks[v]]
            # A's memory becomes the Cholesky factor of A - sigma B (positive definite for sigma < 0)
            factor = scipy.linalg.cho_factor(A, overwrite_a=True, check_finite=False)
            inverse = spla.LinearOperator((R, R), dtype=np.float64,
                                          matvec=lambda x: scipy.linalg.cho_solve(factor, x, check_finite=False))
            unused = spla.LinearOperator((R, R), dtype=np.float64, matvec=None)  # mode 3 needs only OPinv and M
            v0 = as_rng(seed).standard_normal(R)
            values, beta = spla.eigsh(unused, k=d, M=B, sigma=sigma, OPinv=inverse, which="LM", v0=v0)
            order = np.argsort(values)
            values, beta = values[order], beta[:, order]
            beta = beta @ np.linalg.inv(np.linalg.cholesky(beta.T @ B @ beta)).T  # exactly B-orthonormal
        else:
            raise ValueError(f"eigen_solver must be 'auto', 'dense' or 'arpack', got {method!r}")
    except np.linalg.LinAlgError as exc:
        raise ValueError(f"X' D X is singular ({exc}); use reg > 0") from None
    rows = np.argmax(np.abs(beta), axis=0)  # deterministic signs
    beta = beta * np.sign(beta[rows, np.arange(d)])
    return values, {v: beta[blocks[v]] if bases[v] is None else bases[v] @ beta[blocks[v]] for v in names}
