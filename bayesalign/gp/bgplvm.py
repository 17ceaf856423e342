"""Bayesian GP-LVM (Titsias & Lawrence, AISTATS 2010): one view, variational q(X), collapsed bound."""

from __future__ import annotations

import torch

from ..data import check_view
from ._model import LatentGPBase
from ._optim import TOL
from .model_file import register_model_class

__all__ = ["BayesianGPLVM"]


@register_model_class
class BayesianGPLVM(LatentGPBase):
    r"""Bayesian Gaussian process latent variable model of one data matrix.

    ``y_n = f(x_n) + eps``, ``x_n ~ N(0, I_Q)``, ``f ~ GP(0, k)`` with an ARD kernel,
    ``eps ~ N(0, sigma^2 I)``; q(X) = prod_n N(mu_n, diag S_n) maximises the collapsed bound
    (Titsias & Lawrence 2010, eq. 14-18)

        F = -N D/2 log(2 pi sigma^2) - tr(Y'Y) / (2 sigma^2) + D/2 log|Kuu| - D/2 log|A|
            + tr(Y' psi1 A^-1 psi1' Y) / (2 sigma^4) - D psi0 / (2 sigma^2)
            + D tr(Kuu^-1 psi2) / (2 sigma^2) - KL(q(X) || N(0, I)),   A = Kuu + psi2 / sigma^2.

    It is :class:`bayesalign.gp.MRD` with one view (named ``"Y"``); every parameter means the same
    (see there). The outputs are centred; ``relevance_`` holds the one ARD weight vector.

    Examples
    --------
    >>> import numpy as np
    >>> t = np.linspace(0, 2 * np.pi, 40)[:, None]
    >>> Y = np.hstack([np.sin(t), np.cos(t), np.sin(2 * t)]) @ np.random.default_rng(0).normal(size=(3, 8))
    >>> model = BayesianGPLVM(latent_dim=2, num_inducing=10, max_iter=50, warmup_iters=10, progress=False,
    ...                       seed=0).fit(Y)
    >>> model.embedding_.means["Y"].shape
    (40, 2)
    """

    _method = "BayesianGPLVM"
    _view_name = "Y"

    def __init__(self, latent_dim: int = 2, num_inducing: int = 20, kernel="rbf", init="pca",
                 init_variance: float = 0.1, snr: float = 100.0, warmup_iters: int = 100,
                 optimizer: str = "lbfgs", max_iter: int = 2000, tol: float = TOL, learning_rate: float = 0.01,
                 jitter: float | None = None, seed=None, device=None, dtype=torch.float64,
                 progress: bool = True, n_restarts: int = 1,
                 lbfgs_memory: int = 30, precondition_after: int | None = 200):
        self.latent_dim = latent_dim
        self.num_inducing = num_inducing
        self.kernel = kernel
        self.init = init
        self.init_variance = init_variance
        self.snr = snr
        self.warmup_iters = warmup_iters
        self.optimizer = optimizer
        self.max_iter = max_iter
        self.tol = tol
        self.learning_rate = learning_rate
        self.jitter = jitter
        self.seed = seed
        self.device = device
        self.dtype = dtype
        self.progress = progress
        self.n_restarts = n_restarts
        self.lbfgs_memory = lbfgs_memory
        self.precondition_after = precondition_after

    def fit(self, Y, y=None) -> BayesianGPLVM:
        """Fit to one data matrix Y [N, D] (array-like or DataFrame)."""
        return self._fit_views([self._view_name], [check_view(Y, "Y", min_rows=2)])

    def predict(self, X, X_variance=None, include_noise: bool = True):
        """Posterior mean and variance [n, D] of the outputs at latent X [n, Q] (see ``MRD.predict``)."""
        return self._predict(self._view_name, X, X_variance, include_noise)

    def infer(self, Y_new, max_iter: int = 500, tol: float = 1e-10, progress: bool | None = None):
        """q(x*) = N(mean, diag(variance)) [n, Q] for new rows Y_new [n, D] (see ``MRD.infer``)."""
        return self._infer(self._view_name, Y_new, max_iter=max_iter, tol=tol, progress=progress)
