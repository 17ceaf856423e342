"""Graph Laplacians and the generalized eigenproblem ``L f = lambda D f`` of the spectral methods."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from .._utils import as_rng
from ._checks import _check_square_symmetric
from .connectivity import connected_component_labels

# Below this many nodes the eigen-solver uses dense LAPACK (faster and exact at that size).
DENSE_EIGEN_LIMIT = 1500
#: Above this many nodes ``method="auto"`` solves by LOBPCG with an algebraic multigrid preconditioner (when pyamg
#: is installed): the sparse LU of shift-invert ARPACK fills in faster than linearly with a neighbourhood graph's
#: size, the multigrid hierarchy does not.
AMG_ABOVE = 20_000


def laplacian(W, normalized=False) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Graph Laplacian of a symmetric non-negative weight matrix, with its degree matrix.

    ``D = diag(W 1)`` and, by ``normalized``:

    - ``False``: ``L = D - W`` (section 5.2 of Wang, Krafft & Mahadevan 2011);
    - ``"sym"``: ``L = I - D^{-1/2} W D^{-1/2}`` (the normalized Laplacian of the Procrustes
      paper, Wang & Mahadevan 2008, step 1);
    - ``"rw"``: ``L = I - D^{-1} W`` (random walk).

    An isolated vertex (degree 0) gets an all-zero row and column in the normalized variants.

    Returns
    -------
    L, D : scipy.sparse.csr_matrix (n, n)

    >>> import numpy as np
    >>> L, D = laplacian(np.array([[0.0, 2.0], [2.0, 0.0]]))
    >>> L.toarray(), D.diagonal()
    (array([[ 2., -2.],
           [-2.,  2.]]), array([2., 2.]))
    """
    W = _check_square_symmetric(W, "W")
    if W.nnz and (W.data < 0).any():
        raise ValueError("W must be non-negative (similarities, not distances)")
    degree = np.asarray(W.sum(axis=1)).ravel()  # [n]
    D = sp.diags(degree, format="csr")
    if normalized is False or normalized is None:
        return (D - W).tocsr(), D
    nonisolated = (degree > 0).astype(np.float64)
    with np.errstate(divide="ignore"):
        if normalized == "sym":
            scale = np.where(degree > 0, 1.0 / np.sqrt(degree), 0.0)
            S = sp.diags(scale) @ W @ sp.diags(scale)
        elif normalized == "rw":
            S = sp.diags(np.where(degree > 0, 1.0 / degree, 0.0)) @ W
        else:
            raise ValueError(f"normalized must be False, 'sym' or 'rw', got {normalized!r}")
    return (sp.diags(nonisolated) - S).tocsr(), D


def _has_pyamg() -> bool:
    try:
        import pyamg  # noqa: F401
    except ImportError:
        return False
    return True


def spd_lu(A):
    """Sparse LU of a symmetric positive definite matrix: a fill-reducing ordering of A + A' (minimum degree)
    applied to rows and columns alike and the diagonal pivots kept (``SymmetricMode``), as a Cholesky
    factorisation would; scipy's default (COLAMD on the columns, partial pivoting) makes several times the fill
    on a neighbourhood graph's Laplacian."""
    return spla.splu(sp.csc_matrix(A), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                     options={"SymmetricMode": True})


def _trivial_basis(L: sp.csr_matrix, sqrt_degree: np.ndarray) -> tuple[np.ndarray, int]:
    """Orthonormal basis [n, c] of the null space of D^{-1/2} L D^{-1/2}: D^{1/2} 1_component."""
    n_components, labels = connected_component_labels(L)
    N = np.zeros((L.shape[0], n_components))
    N[np.arange(L.shape[0]), labels] = sqrt_degree
    N /= np.linalg.norm(N, axis=0)
    return N, n_components


def _fix_signs(F: np.ndarray) -> np.ndarray:
    """Deterministic signs: the entry of largest magnitude of every column is positive."""
    rows = np.argmax(np.abs(F), axis=0)
    signs = np.sign(F[rows, np.arange(F.shape[1])])
    signs[signs == 0] = 1.0
    return F * signs


def smallest_generalized_eigenvectors(L, D, k: int, *, skip_trivial: bool = True, method: str = "auto",
                                      tol: float = 1e-10, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` smallest solutions of ``L f = lambda D f`` with ``F' D F = I``.

    The eigenproblem of Laplacian eigenmaps and of joint-Laplacian manifold alignment (Wang,
    Krafft & Mahadevan 2011, section 5.2.2: "the d smallest nonzero eigenvectors"). ``L`` is a
    symmetric graph Laplacian and ``D`` its positive diagonal degree matrix. It is solved in
    the symmetric form ``S g = lambda g`` with ``S = D^{-1/2} L D^{-1/2}`` and ``f = D^{-1/2} g``,
    so orthonormal ``g`` give ``F' D F = I``.

    With ``skip_trivial`` the null space of ``L`` (the constant vector of each connected
    component, eigenvalue 0) is removed exactly, by deflation with its known basis
    ``D^{1/2} 1_component``, rather than by dropping the first computed eigenvalues; so a
    graph with c components returns its ``k`` smallest eigenpairs orthogonal to those c.

    Parameters
    ----------
    L, D : sparse or dense (n, n)
        Symmetric Laplacian (rows summing to zero if ``skip_trivial``) and diagonal ``D > 0``.
    k : int
        Number of eigenpairs; at most ``n - c`` (``c`` components) with ``skip_trivial``.
    skip_trivial : bool
        Exclude the trivial constant eigenvector(s), one per connected component.
    method : "auto", "dense", "arpack", "amg" or "lobpcg"
        ``"dense"``: ``scipy.linalg.eigh`` (O(n^3), forms dense n x n; used by ``"auto"`` for
        ``n <= 1500``). ``"arpack"``: ``eigsh`` in shift-invert mode on
        ``(S - sigma I)^{-1}`` with ``sigma = -1e-6``: ``S - sigma I`` is positive definite, so its
        sparse LU factorization (:func:`spd_lu`) exists, and the smallest eigenvalues of ``S`` become the best
        separated largest ones of the inverse (``"auto"`` up to ``AMG_ABOVE`` nodes). ``"amg"``: LOBPCG on
        ``S - sigma I`` preconditioned by a smoothed-aggregation multigrid V-cycle (pyamg; Knyazev 2001, the
        solver of scikit-learn's ``spectral_embedding(eigen_solver="amg")``), memory linear in n (``"auto"``
        above ``AMG_ABOVE`` nodes when pyamg is installed). ``"lobpcg"``: matrix-free
        LOBPCG preconditioned by an incomplete LU of ``S - sigma I``, for graphs whose full
        factorization does not fit in memory (slower; convergence is not guaranteed).
    tol : float
        Convergence tolerance of the iterative solvers.
    seed : int or Generator
        Starting vector of the iterative solvers (results are deterministic for a given seed).

    Returns
    -------
    eigenvalues : ndarray (k,), ascending
    F : ndarray (n, k), ``F' D F = I``; each column's largest-magnitude entry is positive.

    Raises
    ------
    ValueError
        ``k`` too large, ``D`` not diagonal positive, shapes that do not match, or (with
        ``skip_trivial``) ``L`` whose rows do not sum to zero.

    >>> import numpy as np
    >>> W = np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]], dtype=float)  # a path
    >>> values, F = smallest_generalized_eigenvectors(*laplacian(W), 1)
    >>> round(float(values[0]), 6)
    0.5
    """
    L = _check_square_symmetric(L, "L")
    n = L.shape[0]
    D = sp.csr_matrix(D, dtype=np.float64)
    if D.shape != (n, n):
        raise ValueError(f"D has shape {D.shape}, L has shape {L.shape}")
    degree = D.diagonal()
    if (D - sp.diags(degree)).count_nonzero():
        raise ValueError("D must be diagonal (the degree matrix)")
    if not np.all(degree > 0):
        bad = int(np.flatnonzero(~(degree > 0))[0])
        raise ValueError(f"D must be positive on the diagonal; node {bad} has degree {degree[bad]} "
                         "(an isolated vertex: connect it or remove it)")
    k = int(k)
    if skip_trivial:
        row_sums = np.abs(np.asarray(L.sum(axis=1)).ravel())
        if row_sums.max() > 1e-8 * max(1.0, abs(L).max()):
            raise ValueError("skip_trivial=True needs a graph Laplacian L = D - W (rows summing to zero); "
                             f"row {int(np.argmax(row_sums))} sums to {row_sums.max():.3g}")
    inv_sqrt = 1.0 / np.sqrt(degree)
    S = (sp.diags(inv_sqrt) @ L @ sp.diags(inv_sqrt)).tocsr()  # [n, n], symmetric
    S = ((S + S.T) * 0.5).tocsr()
    if skip_trivial:
        N, n_trivial = _trivial_basis(L, np.sqrt(degree))  # [n, c]
    else:
        N, n_trivial = np.zeros((n, 0)), 0
    available = n - n_trivial
    if not 1 <= k <= available:
        extra = f" minus {n_trivial} trivial eigenvector(s), one per connected component" if n_trivial else ""
        raise ValueError(f"k must be between 1 and {available} ({n} nodes{extra}), got {k}")
    if method == "auto":
        method = "dense" if n <= DENSE_EIGEN_LIMIT else "arpack" if n <= AMG_ABOVE or not _has_pyamg() else "amg"
    if method == "arpack" and k >= available - 1:
        method = "dense"  # ARPACK needs k < (size of the problem) - 1
    rng = as_rng(seed)

    def deflate(V):  # project out the trivial eigenvectors
        return V - N @ (N.T @ V) if n_trivial else V

    if method == "dense":
        A = S.toarray()
        if n_trivial:
            A += 3.0 * (N @ N.T)  # trivial eigenvalues 0 -> 3 > 2 >= spectrum of S: out of the way
        values, G = scipy.linalg.eigh(A, subset_by_index=[0, k - 1])
    elif method == "arpack":
        sigma = -1e-6
        lu = spd_lu(S - sigma * sp.identity(n, format="csr"))
        operator = spla.LinearOperator((n, n), matvec=lambda v: deflate(lu.solve(deflate(v))),
                                       dtype=np.float64)
        v0 = deflate(rng.standard_normal(n))
        nu, G = spla.eigsh(operator, k=k, which="LA", v0=v0, tol=tol,
                           ncv=min(available, max(2 * k + 1, k + 20)))
        values = sigma + 1.0 / nu
    elif method == "amg":
        from pyamg import smoothed_aggregation_solver

        sigma = -1e-6
        shifted = (S - sigma * sp.identity(n, format="csr")).tocsr()
        precond = smoothed_aggregation_solver(shifted).aspreconditioner()  # one V-cycle per application
        X0 = deflate(rng.standard_normal((n, k)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # lobpcg's "not reaching the requested tolerance"
            values, G = spla.lobpcg(shifted, X0, M=precond, Y=N if n_trivial else None, tol=max(tol, 1e-8),
                                    maxiter=max(200, 20 * k), largest=False)
        values = values + sigma
    elif method == "lobpcg":
        sigma = -1e-6
        ilu = spla.spilu((S - sigma * sp.identity(n, format="csr")).tocsc(), drop_tol=1e-4, fill_factor=20)
        precond = spla.LinearOperator((n, n), matvec=ilu.solve, dtype=np.float64)
        X0 = deflate(rng.standard_normal((n, k)))
        values, G = spla.lobpcg(S, X0, M=precond, Y=N if n_trivial else None, tol=max(tol, 1e-8),
                                maxiter=max(200, 20 * k), largest=False)
    else:
        raise ValueError(f"method must be 'auto', 'dense', 'arpack', 'amg' or 'lobpcg', got {method!r}")
    order = np.argsort(values)
    values, G = values[order], G[:, order]
    # The shift-invert operator multiplies round-off along the trivial vectors (eigenvalue 0) by 1 / |sigma| = 1e6:
    # project them out of the result again, then exact orthonormality (iterative solvers stop at tol).
    G, _ = np.linalg.qr(deflate(G))
    F = _fix_signs(inv_sqrt[:, None] * G)  # [n, k]
    values = np.einsum("ij,ij->j", F, L @ F)  # Rayleigh quotients, F' D F = I
    return values, F
