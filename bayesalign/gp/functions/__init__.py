"""Custom autograd Functions (hand-written backward passes) for the hot paths of the Bayesian core."""

from .rbf_psi2 import RBFPsi2Sum, rbf_psi2

__all__ = ["RBFPsi2Sum", "rbf_psi2"]
