"""Composite estimators built from the core's parts.

:class:`MRDProcrustes`: a Bayesian GP-LVM on each view alone (Titsias & Lawrence 2010), then the
views' latent means superimposed on the anchors by Procrustes (Wang & Mahadevan 2008). A baseline
for MAD that shares its model family but learns no shared space.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from .data import AlignmentProblem, Views

__all__ = ["MRDProcrustes"]


class MRDProcrustes(BaseEstimator):
    """A Bayesian GP-LVM per view, superimposed on the anchors by Procrustes.

    Each view v gets its own :class:`bayesalign.gp.BayesianGPLVM` on all its rows (no anchors
    needed: q(X_v) = N(M_v, S_v)); the means M_v are then aligned by
    :class:`bayesalign.spectral.ProcrustesAlignment` (``embedding="none"``: the means are the
    per-view coordinates), i.e. the rotation, scale and shift that best superimpose the anchor
    rows (Wang & Mahadevan 2008, the orthogonal Procrustes problem).

    Parameters
    ----------
    latent_dim : int
        Q of every GP-LVM and of the aligned space.
    seed, device : passed to each BayesianGPLVM
    progress : bool
        Progress bars of the GP-LVM fits.
    gplvm_options : dict, optional
        Further keywords of :class:`bayesalign.gp.BayesianGPLVM` (``max_iter``, ``num_inducing``, ...).

    Attributes
    ----------
    models_ : dict view -> BayesianGPLVM
    embedding_ : LatentEmbedding
        The aligned latent means of every view.

    Examples
    --------
    >>> from bayesalign.datasets import mad_toy
    >>> problem = mad_toy("linear_shared", seed=0, n_anchors=10)
    >>> model = MRDProcrustes(latent_dim=2, seed=0, gplvm_options={"max_iter": 30}).fit(problem)  # doctest: +SKIP
    >>> model.embedding_.means["Y1"].shape  # doctest: +SKIP
    (100, 2)
    """

    def __init__(self, latent_dim: int = 2, seed=None, device=None, progress: bool = False,
                 gplvm_options: dict | None = None):
        self.latent_dim = latent_dim
        self.seed = seed
        self.device = device
        self.progress = progress
        self.gplvm_options = gplvm_options

    def fit(self, problem: AlignmentProblem) -> MRDProcrustes:
        """Fit a GP-LVM on each view, then Procrustes on the anchors of their latent means."""
        from .gp import BayesianGPLVM
        from .spectral import ProcrustesAlignment

        if not isinstance(problem, AlignmentProblem):
            raise TypeError(f"MRDProcrustes.fit expects an AlignmentProblem, got {type(problem).__name__}")
        if isinstance(self.latent_dim, bool) or not isinstance(self.latent_dim, (int, np.integer)) \
                or self.latent_dim < 1:
            raise ValueError(f"latent_dim must be a positive integer, got {self.latent_dim!r}")
        options = dict(self.gplvm_options or {})
        reserved = {"latent_dim", "seed", "device", "progress"} & set(options)
        if reserved:
            raise ValueError(f"gplvm_options must not set {sorted(reserved)}: they are MRDProcrustes' own parameters")
        self.models_, means = {}, {}
        for view in problem.views.names:
            gplvm = BayesianGPLVM(latent_dim=int(self.latent_dim), seed=self.seed, device=self.device,
                                  progress=self.progress, **options)
            self.models_[view] = gplvm.fit(problem.views[view])
            means[view] = np.asarray(next(iter(gplvm.embedding_.means.values())))  # [n_v, Q]
        procrustes = ProcrustesAlignment(n_components=int(self.latent_dim), embedding="none")
        self.embedding_ = procrustes.fit(problem.replace(views=Views(means))).embedding_
        return self
