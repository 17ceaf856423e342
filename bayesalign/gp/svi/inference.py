"""What a fitted :class:`~bayesalign.gp.svi.StochasticMRD` says about rows and dimensions: q(x*) of new rows of
one view (its ``infer``) and each view's resolution of each latent dimension (its ``resolution_``)."""

from __future__ import annotations

import numpy as np
import torch
from gpytorch.likelihoods import GaussianLikelihood

from ...data.views import InputTypeError
from ..inference import nearest_observed_rows
from .guide import LatentPosterior
from .likelihoods import check_targets, expected_log_likelihood, fisher_information
from .model import gaussian_expected_log_likelihood

__all__ = ["infer_rows", "view_resolution"]


def view_resolution(est) -> dict[str, np.ndarray]:
    """``resolution_`` of a fitted StochasticMRD [Q] per view (the equation is the property's): the squared
    derivatives of each view's predictive mean at the q(X) means of the entities it observes, weighted by the
    Fisher information of each observed entry (none for a missing one), averaged over the rows and times the
    spread of the means along each dimension."""
    est._check_fitted()
    model, out = est.model_, {}
    means = model.q_x.mean.detach()  # [N, Q]
    for v, name in enumerate(est.view_names_):
        Y, rows = getattr(model, f"targets_{v}"), getattr(model, f"rows_{v}")
        if rows is None:
            mean = means
        else:
            seen = rows >= 0
            mean, Y = means[seen], Y[rows[seen]]  # [N_v, Q], [N_v, D]
        gp, likelihood = model.gps[v], model.likelihoods[v]
        total = mean.new_zeros(mean.shape[1])
        for start in range(0, mean.shape[0], 1024):
            f, J = gp.mean_jacobian(mean[start:start + 1024])  # [n, D], d fbar_nd / d x_nq [n, Q, D]
            information = fisher_information(likelihood, f).detach()  # [n, D] (no graph)
            information = torch.where(torch.isnan(Y[start:start + 1024]), 0.0, information)
            total += (J.square() * information[:, None, :]).sum((0, 2))
        spread = mean.var(0, unbiased=False)  # [Q]
        out[name] = (spread * total / max(mean.shape[0], 1)).detach().cpu().numpy()
    return out


def infer_rows(est, view, Y_new, max_iter: int = 200, num_samples: int = 64, seed=0):
    r"""q(x*) = N(mean, diag(variance)) [n, Q] for new rows ``Y_new`` [n, D_v] of one view (NaN: missing).

    Per-row optimisation with the model fixed (the GPs, q(U), likelihood and the other views
    untouched): q(x*_n) maximises

        E_q(x*_n)[sum_d E_q(f)[log p(y*_nd | f_d(x*_n))]] - KL(q(x*_n) || p(x)).

    For a Gaussian view the expectation is in closed form: the likelihood is quadratic in f, so the
    psi-statistics of q(x*_n) give it exactly, as the collapsed engine's ``MRD.infer`` computes it
    (:func:`~bayesalign.gp.svi.model.gaussian_expected_log_likelihood`, the fit's own Gaussian term).
    For the other likelihoods it is a sample average over
    ``num_samples`` reparameterised draws ``x = mean + sqrt(variance) * eps`` with the draws ``eps``
    fixed for the whole optimisation (sample-average approximation; eps is moment-matched per row and
    dimension, sample mean 0 and mean square 1, so a locally quadratic objective has its optimum
    exactly). Maximised by L-BFGS (strong Wolfe line search) from the fitted q(x) of the view's nearest
    training row (mean squared difference over the entries both rows observe,
    :func:`~bayesalign.gp.inference.nearest_observed_rows`), as ``MRD.infer`` starts (a row with missing
    entries started at the prior can stop in another mode); the variance is a softplus of a free
    parameter above :data:`~bayesalign.gp.svi.guide.VARIANCE_FLOOR`, as in the fit, so a trial step of
    the line search far out gives a poor finite objective that the search backs off from. p(x) is
    N(0, I) for the "normal" and "gp" priors (the GP prior's marginal) and the per-entity distribution
    otherwise (a callable prior is evaluated at entity index 0). Dimensions the view ignores go to the
    prior (only the KL acts on them). Rows are independent given the model: their objectives add.
    """
    est._check_fitted()
    v = est._view_index(view)
    name = est.view_names_[v]
    try:
        Y = np.array(Y_new, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:  # strings, ragged lists
        raise InputTypeError(f"view {name!r}: Y_new cannot be read as a numeric array ({exc})") from None
    if Y.ndim == 1:
        Y = Y[None]
    if Y.ndim != 2 or Y.shape[0] == 0 or Y.shape[1] != est.n_features_in_[name]:
        raise ValueError(f"Y_new for view {name!r} must have at least one row and {est.n_features_in_[name]} "
                         f"columns, got shape {Y.shape}")
    if int(num_samples) < 2:
        raise ValueError(f"num_samples must be >= 2, got {num_samples!r}")
    check_targets(est.likelihoods_[name], Y, name)
    model = est.model_
    like = model.q_x.mean
    keep = est.kept_columns_[name]
    y = torch.as_tensor(Y[:, keep] - est.output_means_[name][keep], dtype=like.dtype, device=like.device)  # [n, D]
    n, Q, S = y.shape[0], like.shape[1], int(num_samples)
    gen = torch.Generator(device=like.device).manual_seed(int(seed))
    eps = torch.randn(S, n, Q, generator=gen, dtype=like.dtype, device=like.device)  # [S, n, Q]
    eps = (eps - eps.mean(0)) / eps.std(0, unbiased=False)  # moment-matched draws
    train = getattr(model, f"targets_{v}")  # [N_v, D] (centred, NaN where missing)
    rows = getattr(model, f"rows_{v}")  # [N] row of each entity, -1 where unobserved; None: row n is entity n
    entity = torch.arange(train.shape[0], device=like.device)
    if rows is not None:
        entity = torch.nonzero(rows >= 0).reshape(-1)[torch.argsort(rows[rows >= 0])]  # the entity of each row
    start = entity[nearest_observed_rows(y, train)]  # [n]
    missing = bool(torch.isnan(y).any())
    q = LatentPosterior(model.q_x.mean.detach()[start], model.q_x.variance.detach()[start])  # q(x*) [n, Q]
    prior = model.prior_of(torch.zeros(n, dtype=torch.long, device=like.device))
    gp, likelihood = model.gps[v], model.likelihoods[v]
    closed = isinstance(likelihood, GaussianLikelihood)
    targets = None if closed else y.expand(S, -1, -1).reshape(S * n, -1)  # [S n, D]: one copy per draw
    optimiser = torch.optim.LBFGS(list(q.parameters()), lr=1.0, max_iter=int(max_iter), line_search_fn="strong_wolfe",
                                  tolerance_grad=1e-9, tolerance_change=1e-12, history_size=20)

    def closure():
        optimiser.zero_grad()
        mean, std = q.mean, q.variance.sqrt()
        if closed:  # summed over the rows and their observed entries
            strategy = gp.variational_strategy
            ell = gaussian_expected_log_likelihood(y, mean, q.variance, gp.covar_module, strategy.inducing_points,
                                                   strategy.jitter_val, gp.inducing_distributions()[1],
                                                   likelihood.noise.reshape(()), any_missing=missing)
        else:
            x = mean + std * eps  # [S, n, Q]
            f_mean, f_var = gp.marginals(x.reshape(-1, Q))  # [S n, D]
            ell = expected_log_likelihood(likelihood, targets, f_mean, f_var).sum(-1).reshape(S, n).mean(0).sum()
        q_x = torch.distributions.Independent(torch.distributions.Normal(mean, std), 1)
        try:
            kl = torch.distributions.kl_divergence(q_x, prior)  # [n]
        except NotImplementedError:
            x = mean + std * eps
            kl = (q_x.log_prob(x) - prior.log_prob(x)).mean(0)
        loss = kl.sum() - ell
        loss.backward()
        return loss

    for p in model.parameters():
        p.requires_grad_(False)
    try:
        optimiser.step(closure)
    finally:
        for p in model.parameters():
            p.requires_grad_(True)
    mean, variance = q.mean.detach(), q.variance.detach()
    if not (torch.isfinite(mean).all() and torch.isfinite(variance).all()):
        raise FloatingPointError(f"infer: q(x*) of view {name!r} became non-finite")
    return mean.cpu().numpy(), variance.cpu().numpy()
