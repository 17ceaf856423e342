"""Going on from a fitted :class:`~bayesalign.gp.svi.StochasticMRD`: more epochs, another latent prior, more
inducing inputs (its ``continue_fit`` and ``grow_inducing``)."""

from __future__ import annotations

import numpy as np
import torch
from gpytorch.means import ConstantMean
from gpytorch.variational.natural_variational_distribution import _NaturalVariationalDistribution

from ..inducing import grown_inducing_inputs
from ..priors import GraphLaplacianPrior, StandardNormalPrior
from .guide import ViewGP
from .training import train

__all__ = ["continue_training", "grow_view_gp", "grow_inducing_inputs", "set_latent_prior"]


def set_latent_prior(est, latent_prior) -> None:
    """Replace p(X) of the fitted ``est.model_`` by ``latent_prior``: a prior of :mod:`bayesalign.gp.priors`
    over its entities (:class:`~bayesalign.gp.priors.StandardNormalPrior` or
    :class:`~bayesalign.gp.priors.GraphLaplacianPrior`), as the collapsed engine's ``continue_fit`` takes."""
    model = est.model_
    if isinstance(latent_prior, GraphLaplacianPrior):
        latent_prior.check(est.n_entities_)
        graph = latent_prior
    elif isinstance(latent_prior, StandardNormalPrior):
        graph = None
    else:
        raise TypeError("latent_prior of continue_fit must be a StandardNormalPrior or a GraphLaplacianPrior over "
                        f"the {est.n_entities_} entities, got {type(latent_prior).__name__}")
    model.graph_prior, model.latent_prior, model.time_scale_tril = graph, None, None


def continue_training(est, max_epochs=None, latent_prior=None) -> None:
    """``max_epochs`` more epochs (default ``est.max_epochs``) from the fitted parameters under ``latent_prior``
    when given (:func:`set_latent_prior`): :func:`~bayesalign.gp.svi.training.train` with ``continued``."""
    est._check_fitted()
    epochs = est.max_epochs if max_epochs is None else max_epochs
    if not isinstance(epochs, (int, np.integer)) or isinstance(epochs, bool) or epochs < 1:
        raise ValueError(f"max_epochs must be an int >= 1, got {max_epochs!r}")
    if latent_prior is not None:
        set_latent_prior(est, latent_prior)
    train(est, int(epochs), continued=True)


def grow_view_gp(gp: ViewGP, inducing_inputs: torch.Tensor) -> ViewGP:
    r"""The sparse GP ``gp`` with the inducing inputs ``inducing_inputs`` [M', Q] (its M first, then new ones),
    q(u) extended so that q(f) and the KL term, hence the bound, are unchanged.

    The new inducing outputs get their conditional prior given the old ones: with ``u = [u_o; u_n]``,
    ``q(u) = q(u_o) p(u_n | u_o)``, ``p(u_n | u_o) = N(K_no K_oo^-1 u_o, K_nn - K_no K_oo^-1 K_on)``, so q(u_n)
    has mean ``K_no K_oo^-1 m`` and the covariance is extended by the conditional covariance. Then
    ``int p(f | u) q(u) du = int p(f | u_o) q(u_o) du_o``: q(f(x)) is the same at every x, and
    ``KL(q(u) || p(u)) = KL(q(u_o) || p(u_o))``. In GPyTorch's whitened basis (``u = L v``, ``L`` the
    Cholesky factor of ``K + jitter I``, whose leading block is the old factor) this is
    ``q(v) = N([m_w; 0], blockdiag(S_w, I))``. The kernel and the mean module are the old GP's.
    """
    strategy = gp.variational_strategy
    old = gp.inducing_distributions()[1]  # whitened q(v), batch [D], event [M], built afresh (not GPyTorch's memo)
    D, M = old.mean.shape
    new_M = int(inducing_inputs.shape[0])
    q_u = strategy._variational_distribution
    natural = isinstance(q_u, _NaturalVariationalDistribution)
    grown = ViewGP(inducing_inputs.detach().clone(), gp.num_outputs, gp.covar_module,
                   constant_mean=isinstance(gp.mean_module, ConstantMean), jitter=float(strategy.jitter_val),
                   natural=natural, tied=gp.tied).to(inducing_inputs)  # q(u)'s parameters in the model's dtype
    grown.mean_module.load_state_dict(gp.mean_module.state_dict())
    with torch.no_grad():
        mean = old.mean.new_zeros(D, new_M)
        mean[:, :M] = old.mean
        covariance = torch.eye(new_M, dtype=old.mean.dtype, device=old.mean.device).repeat(D, 1, 1)
        covariance[:, :M, :M] = old.covariance_matrix
        devices = [mean.device] if mean.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # GPyTorch draws a zero-scaled perturbation
            grown.set_inducing_distribution(mean, covariance)
    return grown


def grow_inducing_inputs(est, num_inducing: int) -> None:
    """Grow every view's inducing inputs to ``num_inducing`` by farthest-point selection on the q(X) means of the
    entities some view observes (:func:`~bayesalign.gp.inducing.grown_inducing_inputs`, as the collapsed
    engine's), each view's q(u) extended by :func:`grow_view_gp`; ``num_inducing`` becomes the new size."""
    est._check_fitted()
    model = est.model_
    means = model.q_x.mean.detach()  # [N, Q]
    if any(rows is not None for rows in est._entity_of):
        seen = torch.zeros(means.shape[0], dtype=torch.bool, device=means.device)
        for rows in est._entity_of:
            seen[torch.as_tensor(np.arange(means.shape[0]) if rows is None else rows, device=means.device)] = True
        means = means[seen]
    sets = [gp.variational_strategy.inducing_points.detach() for gp in model.gps]
    if len({int(Z.shape[0]) for Z in sets}) != 1:
        raise ValueError("grow_inducing needs the same number of inducing inputs in every view")
    grown, num_inducing = grown_inducing_inputs(sets, means, num_inducing, stacklevel=4)
    model.gps = torch.nn.ModuleList([grow_view_gp(gp, Z) for gp, Z in zip(model.gps, grown)])
    est.num_inducing = num_inducing
