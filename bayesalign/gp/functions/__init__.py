"""Custom autograd Functions (hand-written backward passes) for the hot paths of the Bayesian core."""

from .rbf_psi import RBFPsiStatistics, rbf_psi_statistics

__all__ = ["RBFPsiStatistics", "rbf_psi_statistics"]
