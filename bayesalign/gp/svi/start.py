"""The collapsed start of :class:`~bayesalign.gp.svi.StochasticMRD`: the collapsed MRD fitted on a subsample
of the entities, carried to every entity and loaded into the stochastic model.

Adam and natural gradients climb the uncollapsed bound slowly from a PCA start: the scale of q(X)
against the lengthscales and the noise move together along flat directions. The collapsed bound
(Titsias & Lawrence, 2010) is the uncollapsed one maximised in q(u), and L-BFGS on it reaches an
optimum on a few hundred entities in seconds; the stochastic fit goes on from there on every entity.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from ..mrd import MRD

__all__ = ["COLLAPSED_ENTITIES", "collapsed_start", "load_collapsed_state"]

#: Entities of the subsample the collapsed start is fitted on (all of them when there are fewer).
COLLAPSED_ENTITIES = 500


def collapsed_start(names, targets, X_pca: np.ndarray, est, num_inducing: int):
    """Fit the collapsed MRD on a random subsample of the entities and carry its q(X) to all of them.

    Parameters
    ----------
    names, targets : list of str, list of arrays [N, D_v]
        The views, centred, complete and paired.
    X_pca : array [N, Q]
        The PCA start of every entity; the collapsed fit starts from its rows of the subsample.
    est : StochasticMRD
        Gives the latent dimension, kernel, signal-to-noise ratio, seed and device (the collapsed fit runs in
        float64 whatever the stochastic model's dtype).
    num_inducing : int
        M.

    Returns
    -------
    mrd : MRD
        The collapsed fit on the subsample.
    subsample : int array [n]
        Its entities.
    means, variances : arrays [N, Q]
        q(X) of every entity: the collapsed fit's on the subsample; elsewhere the least-squares affine map
        from the PCA start to the fitted means, applied to the entity's PCA start, and the mean fitted
        variance of each dimension.
    """
    N, Q = X_pca.shape
    rng = np.random.default_rng(est.seed)
    subsample = np.sort(rng.choice(N, size=min(N, COLLAPSED_ENTITIES), replace=False))
    mrd = MRD(latent_dim=Q, num_inducing=min(int(num_inducing), subsample.size), kernel=est.kernel,
              init=X_pca[subsample], snr=est.snr, seed=est.seed, device=est.device, dtype=torch.float64,
              progress=False)  # float64 whatever est.dtype: float32 psi-statistics can break the bound's Cholesky
    mrd._warn_convergence = False  # the stochastic fit that follows says whether it converged
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant columns of the subsample: dropped there only
        mrd.fit(dict(zip(names, (Y[subsample] for Y in targets))))
    fitted_means, fitted_variances = mrd.entity_means_, mrd.entity_variances_
    design = np.c_[X_pca[subsample], np.ones(subsample.size)]  # [n, Q + 1]
    carry, *_ = np.linalg.lstsq(design, fitted_means, rcond=None)  # [Q + 1, Q]
    means = np.c_[X_pca, np.ones(N)] @ carry  # [N, Q]
    means[subsample] = fitted_means
    variances = np.tile(fitted_variances.mean(0), (N, 1))
    variances[subsample] = fitted_variances
    return mrd, subsample, means, variances


def load_collapsed_state(model, mrd, entities=None) -> None:
    """Set the kernels, noise variances, inducing inputs and q(U) of the Pyro ``model`` to those of a fitted
    collapsed ``mrd`` on the same Gaussian views (and q(X) of ``entities``, all of them by default, to its
    q(X)): q(U) at the collapsed bound's optimum (Titsias, 2009, eq. 10), whitened, mean ``L' alpha`` and
    covariance ``B^-1 = I - L' W L``, the same for every output. A view whose subsample dropped a constant
    column keeps its own q(U)."""
    source = mrd.module_
    device = model.q_x.mean.device
    # setting q(U) draws GPyTorch's (zero-scaled) perturbation from torch's RNG: the caller's is left as it was
    with torch.no_grad(), torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        rows = slice(None) if entities is None else torch.as_tensor(entities, device=device)
        mean, variance = model.q_x.mean.detach().clone(), model.q_x.variance.detach().clone()
        mean[rows] = source.q_mean.to(mean)
        variance[rows] = source.q_variance.to(variance)
        model.q_x.mean.copy_(mean)
        model.q_x.variance = variance
        for v, (gp, lik) in enumerate(zip(model.gps, model.likelihoods)):
            gp.covar_module.load_state_dict(source.kernels[v].state_dict())
            strategy = gp.variational_strategy
            strategy.inducing_points.copy_(source.inducing(v).to(strategy.inducing_points))
            Kuu = source.kuu(v)
            jitter = Kuu.diagonal() - source.kernels[v](source.inducing(v)).to_dense().diagonal()
            strategy.jitter_val = float(jitter.mean())  # the same Kuu + jitter as the collapsed bound
            lik.noise = source.noise[v].reshape(1).to(model.q_x.mean)
            kept = mrd.kept_columns_[mrd.view_names_[v]]
            if not kept.all():
                continue
            post = source.posterior(v)
            L = post.L  # [M, M]
            eye = torch.eye(L.shape[0], dtype=L.dtype, device=L.device)
            u_mean = (L.mT @ post.alpha).mT  # [D, M] whitened mean of q(u)
            covariance = eye - L.mT @ post.woodbury_inv @ L  # [M, M] B^-1, the same for every output
            gp.set_inducing_distribution(u_mean, 0.5 * (covariance + covariance.mT))
