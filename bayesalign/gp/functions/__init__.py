"""Custom autograd Functions (hand-written backward passes) for the hot paths of the Bayesian core."""

from .rbf_psi import RBFPsiStatistics, rbf_psi_statistics
from .rbf_psi2 import RBFPsi2Sum, rbf_psi2

__all__ = ["RBFPsi2Sum", "RBFPsiStatistics", "rbf_psi2", "rbf_psi_statistics"]
