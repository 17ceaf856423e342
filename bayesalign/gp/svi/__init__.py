"""The stochastic engine: MRD as a Pyro model over GPyTorch sparse variational GPs, fitted by SVI.

- :mod:`.model`: the generative model (latent prior, per-view GPs and likelihoods) and its guide;
- :mod:`.guide`: q(X) and the per-view sparse variational GPs;
- :mod:`.likelihoods`: Gaussian, Bernoulli, Poisson, negative binomial; expected log-likelihoods with missing entries;
- :mod:`.estimator`: :class:`StochasticMRD`, the scikit-learn style estimator;
- :mod:`.inputs`: its input checks; :mod:`.start`: its collapsed start; :mod:`.training`: its training loops;
  :mod:`.inference`: q(x*) of new rows and the resolution; :mod:`.continuation`: more epochs and inducing
  inputs after a fit; :mod:`.files`: its model file.
"""

from .estimator import StochasticMRD
from .likelihoods import LIKELIHOODS, expected_log_likelihood, make_likelihood
from .model import SVIMRDModel

__all__ = ["LIKELIHOODS", "SVIMRDModel", "StochasticMRD", "expected_log_likelihood", "make_likelihood"]
