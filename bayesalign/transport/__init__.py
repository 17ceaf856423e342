"""Optimal-transport aligners on POT: Gromov-Wasserstein, fused GW with anchors, semi-relaxed forms.

=====================================  =================================================================
``GromovWassersteinAlignment``         entropic GW between the views' k-NN geodesic distances (SCOT),
                                       no anchors needed; balanced or semi-relaxed marginals
``FusedGromovWassersteinAlignment``    entropic fused GW, the anchors as a feature cost and as fixed mass,
                                       settings chosen by cross-fitting on the anchors
``gromov_wasserstein_coupling``        the entropic GW coupling of two distance matrices
``solve_coupling``                     one (fused, semi-relaxed) entropic GW coupling through POT
``structure_matrix``                   a view's k-NN shortest-path distances, divided by the largest
``anchor_profiles``, ``profile_cost``  rows described by their distances to their view's anchors
``barycentric_projection``             a coupling's projection of one view onto the other's features
``coupling_rank``                      FOSCTTM of known pairs when partners are ranked by a coupling
``coupling_disagreement``              how far two couplings pick different partners
=====================================  =================================================================

Every estimator follows the scikit-learn contract of the spectral baselines: ``Method(...).fit(problem)``,
``embedding_`` a LatentEmbedding, and ``match_probabilities(a, b)`` the coupling's rows normalised. All are
dense: GW needs every pair of rows of each view and the full (n_a, n_b) coupling.
"""

from ._base import (
    MARGINALS,
    TransportAlignment,
    anchor_profiles,
    barycentric_projection,
    coupling_disagreement,
    coupling_rank,
    profile_cost,
    solve_coupling,
    structure_matrix,
)
from .fused import FusedGromovWassersteinAlignment, pinned_cost
from .gromov import GromovWassersteinAlignment, gromov_wasserstein_coupling

__all__ = ["MARGINALS", "FusedGromovWassersteinAlignment", "GromovWassersteinAlignment", "TransportAlignment",
           "anchor_profiles", "barycentric_projection", "coupling_disagreement", "coupling_rank",
           "gromov_wasserstein_coupling", "pinned_cost", "profile_cost", "solve_coupling", "structure_matrix"]
