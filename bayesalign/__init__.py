"""bayesalign: Bayesian alignment of datasets that describe the same things with different features.

The Bayesian core (``MRD``, ``BayesianGPLVM``, ``MAD``; torch + GPyTorch) is imported on first
use, so ``import bayesalign`` stays light for the spectral baselines, metrics and solvers.

>>> import bayesalign as ba
>>> problem = ba.datasets.mad_toy("linear_shared", seed=0)
>>> problem.views.n_samples
{'Y1': 100, 'Y2': 100}
"""

import importlib

from . import datasets, graph, matching, metrics, spectral, transport
from .data import Alignment, AlignmentProblem, Correspondence, LatentEmbedding, Views

__version__ = "0.1.0"

# name -> module that defines it; loaded lazily (PEP 562), since most of them import torch
_LAZY = {"bootstrap": "bayesalign.bootstrap", "gp": "bayesalign.gp", "mad": "bayesalign.mad", "plot": "bayesalign.plot",
         "pipelines": "bayesalign.pipelines", "ensemble": "bayesalign.ensemble",
         "MRD": "bayesalign.gp", "BayesianGPLVM": "bayesalign.gp", "MAD": "bayesalign.mad",
         "MADEnsemble": "bayesalign.ensemble"}

__all__ = ["Alignment", "AlignmentProblem", "BayesianGPLVM", "Correspondence", "LatentEmbedding", "MAD", "MADEnsemble",
           "MRD", "Views", "__version__", "bootstrap", "datasets", "ensemble", "gp", "graph", "mad", "matching",
           "metrics", "pipelines", "plot", "spectral", "transport"]


def __getattr__(name):
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = module if module.__name__.endswith("." + name) else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bayesalign' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
