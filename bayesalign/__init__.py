"""bayesalign: Bayesian alignment of datasets that describe the same things with different features.

>>> import bayesalign as ba
>>> problem = ba.datasets.mad_toy("linear_shared", seed=0)
>>> problem.views.n_samples
{'Y1': 100, 'Y2': 100}
"""

from . import datasets
from .data import Alignment, AlignmentProblem, Correspondence, LatentEmbedding, Views

__version__ = "0.1.0"

__all__ = ["datasets", "Alignment", "AlignmentProblem", "Correspondence", "LatentEmbedding", "Views", "__version__"]
