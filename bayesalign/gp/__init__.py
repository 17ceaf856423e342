"""The Bayesian core: variational Bayesian GP-LVM and MRD with ARD kernels (collapsed bound, psi-statistics).

- :class:`BayesianGPLVM` (Titsias & Lawrence, 2010): one view.
- :class:`MRD` (Damianou, Ek, Titsias & Lawrence, 2012): any number of views sharing one latent
  space, one ARD kernel per view, paired or partially observed (``fit(views, observed=...)``: one
  latent point per entity, each view's bound over the entities it observes); ``relevance_``,
  ``shared_dims`` / ``private_dims``, ``predict``, ``infer`` (q(x*) for new rows of one view),
  ``save`` / ``load``.
- The collapsed engine: :mod:`.module` (the torch module whose forward is the bound), :mod:`.bound`
  (the collapsed bound and the optimal q(u)), :mod:`.psi` and :mod:`.functions` (psi-statistics: the
  closed forms and the fused RBF path), :mod:`.kernels` (kernel factory, ARD relevance),
  :mod:`.initialisation` (views in, q(X) starts; :func:`cca_latent`), :mod:`._model` (the estimator
  base), :mod:`._optim` (L-BFGS / Adam), :mod:`.inference` (q(x*) of new rows), :mod:`.prediction`
  (predictions, resolution), :mod:`.extend` (split entities, grown inducing inputs), :mod:`.model_file`
  (files), :mod:`.priors` (p(X): N(0, I) or a graph prior, :class:`GraphLaplacianPrior`;
  ``MRD.fit(latent_prior=...)``).
- The stochastic engine (Pyro / SVI, minibatches, other likelihoods): :mod:`.svi`.
- Both engines' fitted interface (``entity_means_``, ``entity_variances_``, ``observed_``, ``relevance_``,
  ``shared_dims``, ``private_dims``, ``embedding_``): :class:`~bayesalign.gp.fitted.FittedLatentModel`.
"""

import warnings

with warnings.catch_warnings():
    # linear_operator (imported by gpytorch) applies @torch.jit.script to two functions at import
    # (linear_operator/utils/linear_cg.py), which torch 2.13 deprecates: two DeprecationWarnings in every
    # process, from a dependency; silenced for that import only, not for any code of ours.
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=DeprecationWarning)
    import linear_operator  # noqa: F401

from ._optim import NonFiniteBoundError
from .bgplvm import BayesianGPLVM
from .initialisation import StartError, cca_latent
from .kernels import ard_relevance, make_kernel, relevant_dimensions, shared_dimensions
from .model_file import load_model
from .mrd import MRD
from .priors import GraphLaplacianPrior, StandardNormalPrior
from .svi import StochasticMRD

__all__ = ["BayesianGPLVM", "GraphLaplacianPrior", "MRD", "NonFiniteBoundError", "StandardNormalPrior",
           "StartError", "StochasticMRD", "ard_relevance", "cca_latent", "load_model", "make_kernel",
           "relevant_dimensions", "shared_dimensions"]
