"""bayesalign: Bayesian alignment of datasets that describe the same things with different features.

``import bayesalign`` loads nothing but this module. Every part (the core types ``Views``,
``Correspondence``, ``AlignmentProblem``, ``LatentEmbedding``, ``Alignment`` on numpy and scipy.sparse; the
datasets, the spectral baselines, the matchers, the metrics, the Bayesian core ``MRD`` / ``MAD`` on torch and
GPyTorch, the optimal-transport stack) is imported on first use (PEP 562), so that the command line and a
script that needs one part do not pay for the others (and a Ctrl-C while the command line starts meets the
command's own handling, not an import).

>>> import bayesalign as ba
>>> problem = ba.datasets.mad_toy("linear_shared", seed=0)
>>> problem.views.n_samples
{'Y1': 100, 'Y2': 100}
"""

import importlib

__version__ = "0.1.0"

#: public name -> the module that is it or defines it; loaded on first attribute access
_LAZY = {"compare": "bayesalign.compare", "datasets": "bayesalign.datasets",
         "gp": "bayesalign.gp", "graph": "bayesalign.graph",
         "mad": "bayesalign.mad", "matching": "bayesalign.matching", "metrics": "bayesalign.metrics",
         "pipelines": "bayesalign.pipelines", "plot": "bayesalign.plot", "registry": "bayesalign.registry",
         "singlecell": "bayesalign.singlecell", "spectral": "bayesalign.spectral", "transport": "bayesalign.transport",
         "MRD": "bayesalign.gp", "BayesianGPLVM": "bayesalign.gp", "MAD": "bayesalign.mad",
         "MADEnsemble": "bayesalign.mad", "Alignment": "bayesalign.data", "AlignmentProblem": "bayesalign.data",
         "Correspondence": "bayesalign.data", "LatentEmbedding": "bayesalign.data", "Views": "bayesalign.data"}

__all__ = ["Alignment", "AlignmentProblem", "BayesianGPLVM", "Correspondence", "LatentEmbedding", "MAD", "MADEnsemble",
           "MRD", "Views", "__version__", "compare", "datasets", "gp", "graph", "mad",
           "matching", "metrics", "pipelines", "plot", "registry", "singlecell", "spectral", "transport"]


def __getattr__(name):
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = module if module.__name__.endswith("." + name) else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'bayesalign' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
