r"""Priors p(X) over the latent points of the collapsed engine, and their KL divergence from q(X).

q(X) is the mean-field Gaussian of the variational GP-LVM, q(X) = prod_n prod_q N(x_nq; mu_nq, S_nq)
(Titsias & Lawrence 2010). The bound needs KL(q(X) || p(X)), which stays in closed form for every
prior here.

- :class:`StandardNormalPrior`: p(X) = prod_n N(x_n; 0, I), the GP-LVM's default (eq. 14 of Titsias &
  Lawrence 2010).
- :class:`GraphLaplacianPrior`: a Gaussian Markov random field over the entities,
  p(X) = prod_q N(x_{:,q}; 0, P^{-1}) with the sparse precision P = I + lambda L, L the Laplacian of a
  neighbourhood graph. It keeps neighbours of the graph near each other in the latent space (the
  smoothness term tr(X' L X) of Laplacian eigenmaps and of manifold alignment, Belkin & Niyogi 2003;
  Wang, Krafft & Mahadevan 2011, eq. 5.1, made a proper prior by the identity), so a row seen in one
  view only is held in place by its neighbours. For Q latent dimensions

  .. math:: \mathrm{KL} = \tfrac12 \sum_q \bigl[\textstyle\sum_n P_{nn} S_{nq} + \mu_q^\top P \mu_q - E
            - \log|P| - \sum_n \log S_{nq}\bigr],

  with E the number of entities; log|P| is computed once (:func:`log_det_spd`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch

__all__ = ["GraphLaplacianPrior", "log_det_spd", "StandardNormalPrior", "check_latent_prior"]


class StandardNormalPrior:
    """p(X) = prod_n N(x_n; 0, I). KL(q || p) = 0.5 sum(mu^2 + S - log S - 1)."""

    name = "standard_normal"

    def kl(self, mean: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
        return 0.5 * (mean.square() + variance - variance.log() - 1.0).sum()

    def check(self, n_entities: int) -> None:
        """Nothing to check: the prior has no size."""

    def to_json(self) -> dict:
        return {"name": self.name}


class GraphLaplacianPrior:
    """p(X) = prod_q N(x_{:,q}; 0, (I + strength * L)^-1), a Gaussian Markov random field over the entities.

    Parameters
    ----------
    laplacian : scipy sparse matrix (E, E)
        Symmetric graph Laplacian L = D - W (non-negative weights W); E must equal the model's number
        of latent points (entities).
    strength : float
        lambda >= 0; 0 gives the standard normal prior.

    Examples
    --------
    Two entities joined by an edge of weight 1, and q(X) at the prior's own moments: KL = 0.

    >>> import scipy.sparse as sp
    >>> L = sp.csr_matrix(np.array([[1.0, -1.0], [-1.0, 1.0]]))
    >>> prior = GraphLaplacianPrior(L, strength=1.0)      # P = [[2, -1], [-1, 2]]
    >>> mean = torch.zeros(2, 1, dtype=torch.float64)
    >>> variance = 1.0 / torch.tensor([[2.0], [2.0]], dtype=torch.float64)  # the optimal mean-field q
    >>> round(float(prior.kl(mean, variance)), 6)  # 0.5 (2 - log 3 + 2 log 2 - 2): mean field loses this
    0.143841
    """

    name = "graph_laplacian"

    def __init__(self, laplacian, strength: float = 1.0):
        L = sp.csr_matrix(laplacian, dtype=np.float64)
        if L.ndim != 2 or L.shape[0] != L.shape[1]:
            raise ValueError(f"laplacian must be a square matrix, got shape {L.shape}")
        if not np.all(np.isfinite(L.data)):
            raise ValueError("laplacian has non-finite entries")
        if abs(L - L.T).max() > 1e-10 * max(1.0, abs(L).max()):
            raise ValueError("laplacian must be symmetric")
        off = L - sp.diags(L.diagonal())
        if off.nnz and off.data.max() > 0:
            raise ValueError("laplacian must have non-positive off-diagonal entries (L = D - W with W >= 0)")
        if np.abs(np.asarray(L.sum(axis=1)).ravel()).max() > 1e-8 * max(1.0, abs(L).max()):
            raise ValueError("laplacian rows must sum to zero (L = D - W)")
        strength = float(strength)
        if not np.isfinite(strength) or strength < 0:
            raise ValueError(f"strength must be a finite number >= 0, got {strength!r}")
        self.laplacian = L
        self.strength = strength
        precision = (sp.identity(L.shape[0], format="csr") + strength * L).tocsr()  # P = I + lambda L, [E, E]
        self._precision = precision
        self.log_det_precision = log_det_spd(precision)
        self._torch = {}

    @property
    def n_entities(self) -> int:
        return self.laplacian.shape[0]

    def check(self, n_entities: int) -> None:
        if self.n_entities != n_entities:
            raise ValueError(f"the graph prior has {self.n_entities} nodes, the model has {n_entities} latent points")

    def _tensors(self, like: torch.Tensor):
        key = (like.dtype, like.device)
        if key not in self._torch:
            P = self._precision.tocoo()
            indices = torch.as_tensor(np.vstack([P.row, P.col]), dtype=torch.long, device=like.device)
            values = torch.as_tensor(P.data, dtype=like.dtype, device=like.device)
            matrix = torch.sparse_coo_tensor(indices, values, P.shape, check_invariants=True).coalesce()
            diagonal = torch.as_tensor(self._precision.diagonal(), dtype=like.dtype, device=like.device)
            self._torch[key] = (matrix, diagonal)
        return self._torch[key]

    def kl(self, mean: torch.Tensor, variance: torch.Tensor) -> torch.Tensor:
        P, diagonal = self._tensors(mean)
        E, Q = mean.shape
        quadratic = (mean * torch.sparse.mm(P, mean)).sum()  # sum_q mu_q' P mu_q
        return 0.5 * ((diagonal[:, None] * variance).sum() + quadratic - E * Q
                      - Q * self.log_det_precision - variance.log().sum())

    def to_json(self) -> dict:
        L = self.laplacian.tocoo()
        return {"name": self.name, "strength": self.strength, "shape": list(L.shape), "row": L.row.tolist(),
                "col": L.col.tolist(), "data": L.data.tolist()}


#: Up to this many entities log|P| is exact (a sparse LU); above, the LU's fill grows too fast with the size of a
#: neighbourhood graph and it is estimated by stochastic Lanczos quadrature (:func:`log_det_spd`).
EXACT_LOG_DET_MAX = 5000
#: Probe vectors and Lanczos steps of that estimate.
LOG_DET_PROBES, LOG_DET_STEPS = 64, 40


def log_det_spd(P, seed: int = 0) -> float:
    r"""log|P| of a sparse symmetric positive definite P (E, E).

    Up to :data:`EXACT_LOG_DET_MAX` rows exact: the sum of the log pivots of a sparse LU with a symmetric
    fill-reducing ordering and diagonal pivots (the pivots of a Cholesky factorisation, squared). Above, with
    :math:`P = D^{1/2} A D^{1/2}`, D = diag P, :math:`\log|P| = \sum_n \log P_{nn} + \log|A|` and
    :math:`\log|A| = \mathrm{tr} \log A` by stochastic Lanczos quadrature (Ubaru, Chen & Saad 2017):
    :data:`LOG_DET_PROBES` Rademacher probes z, :data:`LOG_DET_STEPS` Lanczos steps on A from each, and the
    Gauss quadrature :math:`z^\top \log(A) z \approx \|z\|^2 \sum_k \tau_k^2 \log \theta_k` of the Lanczos
    tridiagonal's eigenpairs. The Jacobi scaling leaves A's spectrum near 1, where the estimate's variance is
    small; ``seed`` fixes the probes, so the value is a deterministic function of P. Memory is linear in E.
    """
    P = sp.csr_matrix(P, dtype=np.float64)
    E = P.shape[0]
    if E <= EXACT_LOG_DET_MAX:
        lu = spla.splu(P.tocsc(), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
        return float(np.log(np.abs(lu.U.diagonal())).sum())
    diagonal = P.diagonal()
    scale = sp.diags(1.0 / np.sqrt(diagonal))
    A = (scale @ P @ scale).tocsr()  # [E, E], unit diagonal
    Z = np.random.default_rng(seed).choice([-1.0, 1.0], size=(E, LOG_DET_PROBES))  # [E, probes]
    V, V_prev = Z / np.sqrt(E), np.zeros_like(Z)  # every probe's Lanczos vectors side by side
    alpha, beta = np.zeros((LOG_DET_STEPS, LOG_DET_PROBES)), np.zeros((LOG_DET_STEPS, LOG_DET_PROBES))
    b = np.zeros(LOG_DET_PROBES)
    steps = LOG_DET_STEPS
    for j in range(LOG_DET_STEPS):
        W = A @ V - b * V_prev
        alpha[j] = np.einsum("ij,ij->j", W, V)
        W -= alpha[j] * V
        b = np.linalg.norm(W, axis=0)
        beta[j] = b
        if b.min() < 1e-10:  # an invariant subspace: the quadrature is exact from here
            steps = j + 1
            break
        V_prev, V = V, W / b
    total = 0.0
    for p in range(LOG_DET_PROBES):
        T = np.diag(alpha[:steps, p]) + np.diag(beta[:steps - 1, p], 1) + np.diag(beta[:steps - 1, p], -1)
        theta, U = np.linalg.eigh(T)
        total += E * float(np.sum(U[0] ** 2 * np.log(theta)))  # ||z||^2 = E
    return float(np.log(diagonal).sum() + total / LOG_DET_PROBES)


def check_latent_prior(prior, n_entities: int):
    """The prior object for ``prior`` (None -> standard normal), checked against the number of latent points."""
    if prior is None or (isinstance(prior, str) and prior == "standard_normal"):
        return StandardNormalPrior()
    if not callable(getattr(prior, "kl", None)):
        raise TypeError(f"latent_prior must be None, 'standard_normal' or a prior with a kl(mean, variance) method, "
                        f"got {type(prior).__name__}")
    prior.check(n_entities)
    return prior
