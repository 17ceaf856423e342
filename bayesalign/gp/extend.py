"""Extending a fitted model: entities split off the groups they shared with other views, inducing inputs added."""

from __future__ import annotations

import copy

import numpy as np
import torch

from .inference import infer_latent
from .module import LatentGPModule

__all__ = ["SPLIT_STARTS", "farthest_points", "split_entities"]

#: Where :func:`split_entities` starts the q(x) of the entities it splits.
SPLIT_STARTS = ("copy", "inferred")


def split_entities(model, view, rows, latent_prior=None, start: str = "copy", infer_max_iter: int = 500):
    """A copy of a fitted collapsed ``model`` whose ``rows`` of ``view`` are entities of their own, not refitted.

    Each row given leaves the entity it shared with other views (e.g. an anchor pair) for a new entity,
    appended after the model's; every other parameter (kernels, noise, inducing inputs, the other
    entities' q(x)) is kept. Where the split entities start (``start``):

    - ``"copy"``: the new entity's q(x) is a copy of the old one's, which keeps its own. Each view's
      term of the bound is then unchanged (its rows see the same q(x) as before), and the bound differs
      only by the new entities' KL: under the standard normal prior exactly
      :math:`-\\sum_n \\mathrm{KL}(q(x_n) \\| N(0, I))` over the copies.
    - ``"inferred"``: each new entity starts at the q(x) its row alone gives under the fitted model
      (:func:`~bayesalign.gp.inference.infer_latent`, as :meth:`~bayesalign.gp.MRD.infer`, at most ``infer_max_iter``
      evaluations), and each entity a row left that one view alone still observes starts at the q(x) of
      that view's row, inferred the same way (an entity still seen by several views keeps its q(x)).
      A copy starts with the posterior of an entity that both views pinned down, about half the
      variance one view gives, and a short continuation does not undo that (benchmarks/RESULTS.md,
      "Held-out anchors placed by their own views"); inferred, the split rows start where unaligned
      rows of their views are placed.

    :meth:`~bayesalign.gp.MRD.continue_fit` goes on from there: the anchor pairs that judge MAD's self-training
    (:func:`bayesalign.mad.anchors.held_out_anchors`) are pairs split this way (``"inferred"``) and refitted.

    ``latent_prior``: p(X) over the enlarged set of entities (None: the standard normal); a model fitted
    under another prior needs it given, since how a prior over entities extends to new ones is the
    caller's knowledge (e.g. which graph edges move with the row). The model itself is not changed.
    """
    model._check_fitted()
    v = model._view_index(view)
    module = model.module_
    entity_of = module.observed(v)
    if entity_of is None:
        raise ValueError("split_entities needs a partially observed model (fitted with observed=...); this "
                         "one has one latent point per row of every view")
    rows = np.unique(np.asarray(rows, dtype=np.int64).ravel())
    n_rows = int(entity_of.shape[0])
    if rows.size and (rows.min() < 0 or rows.max() >= n_rows):
        raise IndexError(f"rows of view {model.view_names_[v]!r} must lie in [0, {n_rows}), got "
                         f"{rows.min()}..{rows.max()}")
    if latent_prior is None and getattr(module.latent_prior, "name", None) != "standard_normal":
        raise ValueError(f"the model was fitted under the prior {module.latent_prior.name!r}: give "
                         "latent_prior over the enlarged set of entities")
    if start not in SPLIT_STARTS:
        raise ValueError(f"start must be one of {SPLIT_STARTS}, got {start!r}")
    device = entity_of.device
    E = int(module.q_mean.shape[0])
    rows_t = torch.as_tensor(rows, device=device)
    old = entity_of[rows_t]  # [k] the entities the rows leave
    observed = [module.observed(u) for u in range(module.n_views)]
    observed[v] = entity_of.clone()
    observed[v][rows_t] = E + torch.arange(rows.size, device=device)
    inferred = []  # (entities, their q(x) inferred from one view's rows alone)
    if start == "inferred" and rows.size:
        per_view = [rows_u if rows_u is not None else torch.arange(module.outputs(u).shape[0], device=device)
                    for u, rows_u in enumerate(observed)]  # each view's entity per row, after the split
        n_seen = torch.zeros(E + rows.size, dtype=torch.long, device=device)
        for rows_u in per_view:
            n_seen.index_add_(0, rows_u, torch.ones_like(rows_u))
        left = torch.zeros(E + rows.size, dtype=torch.bool, device=device)
        left[old] = True
        sources = [(E + torch.arange(rows.size, device=device), v, rows_t)]  # (entities, view, its rows)
        for u, rows_u in enumerate(per_view):
            alone = torch.nonzero(left[rows_u] & (n_seen[rows_u] == 1)).ravel()  # rows of u left seen by u only
            if u != v and alone.numel():
                sources.append((rows_u[alone], u, alone))
        inferred = [(entities, infer_latent(module, u, module.outputs(u)[rows_u], max_iter=infer_max_iter))
                    for entities, u, rows_u in sources]
    with torch.no_grad():
        mean = torch.cat([module.q_mean, module.q_mean[old]])  # [E + k, Q]
        variance = torch.cat([module.q_variance, module.q_variance[old]])
        for entities, (mu, S) in inferred:
            mean[entities], variance[entities] = mu.to(mean.dtype), S.to(variance.dtype)
        split = LatentGPModule(
            outputs=[module.outputs(u) for u in range(module.n_views)], q_mean=mean, q_variance=variance,
            inducing_inputs=module.inducing_inputs.detach(),
            kernels=[copy.deepcopy(kernel) for kernel in module.kernels], noise=module.noise.detach(),
            noise_floor=module.raw_noise_constraint.lower_bound.detach(), jitter=module.jitter,
            observed=[None if rows_u is None else rows_u.clone() for rows_u in observed],
            latent_prior=latent_prior)
    fitted = copy.copy(model)
    fitted.module_ = split
    fitted.history_ = np.zeros(0)
    fitted.history_seconds_ = np.zeros(0)
    fitted.n_iter_ = 0
    fitted.converged_ = False
    return fitted


def farthest_points(Z: torch.Tensor, means: torch.Tensor, num_inducing: int) -> torch.Tensor:
    """Inducing inputs ``Z`` [M, Q] grown to ``num_inducing`` by greedy farthest-point selection among ``means``.

    Each new inducing input is the point of ``means`` [N, Q] farthest (Euclidean) from every inducing input
    chosen so far, so the new ones cover the latent regions the old ones leave out. Returns [num_inducing, Q].
    """
    gap = torch.cdist(means, Z).min(1).values  # [N] distance to the nearest inducing input
    chosen = []
    for _ in range(num_inducing - Z.shape[0]):
        i = int(torch.argmax(gap))
        chosen.append(i)
        gap = torch.minimum(gap, (means - means[i]).square().sum(1).sqrt())
    return torch.cat([Z, means[chosen]], 0)
