"""Spectral manifold alignment: the classic deterministic baselines and initialisers.

Every estimator follows the scikit-learn contract and returns a ``LatentEmbedding``::

    emb = JointLaplacianAlignment(n_components=3).fit(problem).embedding_
"""

from ._base import SpectralAlignment, as_problem, correspondence_matrices, embed_view, joint_adjacency
from .baselines import AffineAlignment, AnchorSimilarityBaseline, CCAAlignment, LeastSquaresAlignment
from .joint_laplacian import JointLaplacianAlignment
from .linear import LinearAlignment
from .procrustes import ProcrustesAlignment, procrustes

__all__ = [
    "AffineAlignment",
    "AnchorSimilarityBaseline",
    "CCAAlignment",
    "JointLaplacianAlignment",
    "LeastSquaresAlignment",
    "LinearAlignment",
    "ProcrustesAlignment",
    "procrustes",
    "SpectralAlignment",
    "as_problem",
    "correspondence_matrices",
    "embed_view",
    "joint_adjacency",
]

# Each module adds its public names below, as two lines:
#   from .module import Name
#   __all__ += ["Name"]
from .global_geometry import GlobalGeometryAlignment  # noqa: E402

__all__ += ["GlobalGeometryAlignment"]
from .multiscale import MultiscaleAlignment, diffusion_wavelets  # noqa: E402

__all__ += ["MultiscaleAlignment", "diffusion_wavelets"]
from .local_patterns import (  # noqa: E402
    LocalPatternAlignment,
    local_pattern_correspondence,
    local_pattern_distances,
)

__all__ += ["LocalPatternAlignment", "local_pattern_correspondence", "local_pattern_distances"]
