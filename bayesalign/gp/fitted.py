"""The fitted interface that both MRD engines share: q(X) per entity, relevance, shared and private dimensions.

:class:`FittedLatentModel` is the base of the collapsed estimators (:class:`~bayesalign.gp.MRD`,
:class:`~bayesalign.gp.BayesianGPLVM`) and of :class:`~bayesalign.gp.StochasticMRD`. What the engines
compute differently (the bound, q(x*) of new rows, the resolution, files) each engine defines; what
follows from their results alone is written here once:

- ``entity_means_`` / ``entity_variances_`` [n_entities, Q]: q(X) per entity (abstract);
- ``observed_``: per view the entity of each row (abstract);
- ``relevance_`` per view (abstract) and from it :meth:`shared_dims` / :meth:`private_dims`;
- ``embedding_``: the :class:`~bayesalign.data.LatentEmbedding` of every view's rows;
- ``noise_variance_``, :meth:`elbo`, :meth:`infer`, ``resolution_`` (abstract);
- :meth:`continue_fit` (more optimisation from the fitted parameters) and :meth:`grow_inducing` (more
  inducing inputs by farthest-point selection, then :meth:`continue_fit`) (abstract);
- :meth:`save` / :meth:`load`: one model file (:mod:`bayesalign.gp.model_file`; no pickle) for every engine.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from ..data import LatentEmbedding
from .kernels import relevant_dimensions, shared_dimensions
from .model_file import load_model, save_model

__all__ = ["FittedLatentModel"]


class FittedLatentModel(BaseEstimator, metaclass=ABCMeta):
    """The results of a fitted latent-variable GP model with one ARD kernel per view.

    A subclass sets ``view_names_`` when fitted, names the attribute that only a fitted model has in
    ``_fitted_attribute`` (the torch module with every parameter), and defines ``entity_means_``,
    ``entity_variances_``, ``observed_``, ``relevance_``, ``resolution_``, ``noise_variance_``,
    :meth:`elbo`, :meth:`infer`, :meth:`continue_fit` and :meth:`grow_inducing`; it is registered with
    :func:`~bayesalign.gp.model_file.register_model_class` for :meth:`save` and :meth:`load`.
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
    @abstractmethod
    def entity_means_(self) -> np.ndarray:  # pragma: no cover - abstract
        """q(X) means [n_entities, Q], one row per entity (for a paired fit: per row)."""
        raise NotImplementedError

    @property
    @abstractmethod
    def entity_variances_(self) -> np.ndarray:  # pragma: no cover - abstract
        """q(X) diagonal variances [n_entities, Q], one row per entity."""
        raise NotImplementedError

    @property
    @abstractmethod
    def observed_(self) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        """Per view the entity index [N_v] of each of its rows (``arange`` for a paired fit)."""
        raise NotImplementedError

    @property
    @abstractmethod
    def relevance_(self) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        """ARD relevance weights [Q] per view (:func:`~bayesalign.gp.ard_relevance`)."""
        raise NotImplementedError

    @property
    @abstractmethod
    def resolution_(self) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        """How finely each view's data pin down each latent dimension [Q] per view, unit-free."""
        raise NotImplementedError

    @property
    @abstractmethod
    def noise_variance_(self) -> dict[str, float]:  # pragma: no cover - abstract
        """The noise variance of each Gaussian view."""
        raise NotImplementedError

    @abstractmethod
    def elbo(self) -> float:  # pragma: no cover - abstract
        """The variational lower bound on log p(Y) at the fitted parameters."""
        raise NotImplementedError

    @abstractmethod
    def infer(self, view, Y_new, **options):  # pragma: no cover - abstract
        """q(x*) = N(mean, diag(variance)) [n, Q] of new rows seen in one view."""
        raise NotImplementedError

    @abstractmethod
    def continue_fit(self, budget=None, latent_prior=None):  # pragma: no cover - abstract
        """Go on maximising the bound from the fitted parameters for ``budget`` more steps (the engine's unit:
        ``max_iter`` bound evaluations of the collapsed engine, ``max_epochs`` epochs of the stochastic one;
        default the constructor's), the optimiser restarted, under ``latent_prior`` (a prior of
        :mod:`bayesalign.gp.priors` over the same entities) when given; ``converged_`` and a
        ConvergenceWarning (only when it did not converge) report the engine's own stopping rule. Returns self."""
        raise NotImplementedError

    @abstractmethod
    def grow_inducing(self, num_inducing: int, budget=None):  # pragma: no cover - abstract
        """Add inducing inputs up to ``num_inducing`` per set by farthest-point selection on the q(X) means
        (:func:`~bayesalign.gp.inducing.grown_inducing_inputs`), the bound unchanged by the growth itself,
        then :meth:`continue_fit` for ``budget`` steps. Returns self."""
        raise NotImplementedError

    # -- files ----------------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the fitted model to one ``.npz`` file: tensors and JSON metadata, no pickle
        (:func:`bayesalign.gp.model_file.save_model`)."""
        save_model(self, path)

    @classmethod
    def load(cls, path, device=None):
        """Read a model written by :meth:`save` onto ``device`` (default: the one it was fitted on, else CPU);
        never unpickles, so loading runs no code from the file (:func:`bayesalign.gp.model_file.load_model`)."""
        model = load_model(path, device=device)
        if not isinstance(model, cls):
            raise TypeError(f"{path} holds a {type(model).__name__}, not a {cls.__name__}")
        return model

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
