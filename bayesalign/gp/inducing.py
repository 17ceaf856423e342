"""Growing the inducing inputs of a fitted model by farthest-point selection on its q(X) means."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from .extend import farthest_points

__all__ = ["grown_inducing_inputs"]


def grown_inducing_inputs(inducing_sets, means: torch.Tensor, num_inducing, stacklevel: int = 3):
    """Each set of inducing inputs grown to ``num_inducing`` by greedy farthest-point selection on ``means``.

    Each new inducing input is the q(X) mean farthest (Euclidean) from every inducing input of its set so
    far (:func:`~bayesalign.gp.extend.farthest_points`), so the new ones cover the latent regions the old
    ones leave out. The collapsed and the stochastic engine grow their inducing inputs this way.

    Parameters
    ----------
    inducing_sets : sequence of tensors [M, Q]
        The inducing inputs of each set (one shared set, or one per view), all of the same size M.
    means : tensor [N_seen, Q]
        The q(X) means of the entities some view observes: the candidates.
    num_inducing : int
        The new size of every set: at least M; more than ``N_seen`` is capped there with a RuntimeWarning.
    stacklevel : int
        Of that warning (the caller's caller by default).

    Returns
    -------
    grown : list of tensors [num_inducing, Q]
        Each set, its M old inputs first.
    num_inducing : int
        The size used (after the cap).
    """
    if not isinstance(num_inducing, (int, np.integer)) or isinstance(num_inducing, bool):
        raise ValueError(f"num_inducing must be an int, got {num_inducing!r}")
    M = int(inducing_sets[0].shape[0])
    if num_inducing < M:
        raise ValueError(f"num_inducing={num_inducing} is fewer than the {M} inducing inputs the model "
                         "has; grow_inducing only adds")
    if num_inducing > means.shape[0]:
        warnings.warn(f"num_inducing={num_inducing} is more than the {means.shape[0]} observed entities; using "
                      f"{means.shape[0]}", RuntimeWarning, stacklevel=stacklevel + 1)
        num_inducing = int(means.shape[0])
    return [farthest_points(Z, means, int(num_inducing)) for Z in inducing_sets], int(num_inducing)
