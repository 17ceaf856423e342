"""The fitted interface that both MRD engines share: q(X) per entity, relevance, shared and private dimensions.

:class:`FittedLatentModel` is the base of the collapsed estimators (:class:`~bayesalign.gp.MRD`,
:class:`~bayesalign.gp.BayesianGPLVM`) and of :class:`~bayesalign.gp.StochasticMRD`. What the engines
compute differently (the bound, q(x*) of new rows, the resolution, files) each engine defines; what
follows from their results alone is written here once:

- ``entity_means_`` / ``entity_variances_`` [n_entities, Q]: q(X) per entity (abstract);
- ``observed_``: per view the entity of each row (abstract);
- ``relevance_`` per view (abstract) and from it :meth:`shared_dims` / :meth:`private_dims`;
- ``embedding_``: the :class:`~bayesalign.data.LatentEmbedding` of every view's rows;
- ``noise_variance_``, :meth:`elbo`, :meth:`infer`, ``resolution_`` (abstract).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from ..data import LatentEmbedding
from .kernels import relevant_dimensions, shared_dimensions

__all__ = ["FittedLatentModel"]


class FittedLatentModel(BaseEstimator):
    """The results of a fitted latent-variable GP model with one ARD kernel per view.

    A subclass sets ``view_names_`` when fitted, names the attribute that only a fitted model has in
    ``_fitted_attribute``, and defines ``entity_means_``, ``entity_variances_``, ``observed_``,
    ``relevance_``, ``resolution_``, ``noise_variance_``, :meth:`elbo` and :meth:`infer`.
    """

    _method = "model"
    #: The attribute a fitted model has (``module_`` of the collapsed engine, ``model_`` of the stochastic one).
    _fitted_attribute = "module_"
    #: The relevance threshold of ``embedding_``'s shared dimensions.
    _default_threshold = 0.05

    def _check_fitted(self) -> None:
        if not hasattr(self, self._fitted_attribute):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def _view_index(self, view) -> int:
        """The position of ``view`` (a name, or an index into ``view_names_``; negative counts from the end)."""
        self._check_fitted()
        names = self.view_names_
        if isinstance(view, (int, np.integer)) and not isinstance(view, bool):
            if not -len(names) <= view < len(names):
                raise IndexError(f"view index {view} out of range for {len(names)} views")
            return int(view) % len(names)
        if view not in names:
            raise ValueError(f"unknown view {view!r}; the views are {list(names)}")
        return names.index(view)

    # -- what each engine computes --------------------------------------------------------------
    @property
    def entity_means_(self) -> np.ndarray:  # pragma: no cover - abstract
        """q(X) means [n_entities, Q], one row per entity (for a paired fit: per row)."""
        raise NotImplementedError

    @property
    def entity_variances_(self) -> np.ndarray:  # pragma: no cover - abstract
        """q(X) diagonal variances [n_entities, Q], one row per entity."""
        raise NotImplementedError

    @property
    def observed_(self) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        """Per view the entity index [N_v] of each of its rows (``arange`` for a paired fit)."""
        raise NotImplementedError

    @property
    def relevance_(self) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        """ARD relevance weights [Q] per view (:func:`~bayesalign.gp.ard_relevance`)."""
        raise NotImplementedError

    def elbo(self) -> float:  # pragma: no cover - abstract
        """The variational lower bound on log p(Y) at the fitted parameters."""
        raise NotImplementedError

    def infer(self, view, Y_new, **options):  # pragma: no cover - abstract
        """q(x*) = N(mean, diag(variance)) [n, Q] of new rows seen in one view."""
        raise NotImplementedError

    # -- what follows from them -----------------------------------------------------------------
    def _active(self, threshold: float) -> dict[str, np.ndarray]:
        return {name: relevant_dimensions(rel, threshold) for name, rel in self.relevance_.items()}

    def shared_dims(self, threshold: float = 0.05) -> np.ndarray:
        """Latent dimensions relevant to every view.

        A dimension is relevant to a view when its relevance divided by the view's largest
        relevance exceeds ``threshold``.
        """
        return shared_dimensions(self.relevance_, threshold)

    def private_dims(self, view, threshold: float = 0.05) -> np.ndarray:
        """Latent dimensions relevant to ``view`` and to no other view (see :meth:`shared_dims`)."""
        name = self.view_names_[self._view_index(view)]
        active = self._active(threshold)
        others = [a for k, a in active.items() if k != name]
        other_any = np.logical_or.reduce(others) if others else np.zeros_like(active[name])
        return np.flatnonzero(active[name] & ~other_any)

    @property
    def embedding_(self) -> LatentEmbedding:
        """q(X) as a LatentEmbedding: per view the means and variances of the entities its rows observe,
        in its row order (the same arrays for every view of a paired fit); shared dimensions at threshold 0.05."""
        self._check_fitted()
        mean, var, rows = self.entity_means_, self.entity_variances_, self.observed_
        relevance = self.relevance_
        return LatentEmbedding(means={v: mean[rows[v]] for v in self.view_names_},
                               variances={v: var[rows[v]] for v in self.view_names_},
                               shared_dims=shared_dimensions(relevance, self._default_threshold),
                               method=self._method, info={"elbo": self.elbo(), "relevance": relevance})
