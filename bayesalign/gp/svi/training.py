"""The training loops of :class:`~bayesalign.gp.svi.StochasticMRD`: stochastic (Adam and natural gradients on
minibatches) and full-batch L-BFGS, and the exact latent normalisation both use.

The stochastic step waits for the device only on the status flags of its Cholesky factorisations and, for a
view that observes only some entities, on the count of the minibatch's rows it observes (:func:`minibatch_step`):
the ELBO estimates of the epochs stay on the device and are read back every ``window`` epochs, where the stopping
test, the finiteness check and the latent normalisation need them.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from gpytorch.optim import NGD
from linear_operator.utils.errors import NotPSDError
from sklearn.exceptions import ConvergenceWarning
from tqdm.auto import tqdm

from ..bound import collapsed_bound
from ..kernels import normalise_latent_symmetries
from ..psi import psi_statistics
from .model import negative_elbo

__all__ = ["ADAM_BETA2", "MAX_NATURAL_HALVINGS", "collapsed_elbo", "minibatch_step", "normalise_latent",
           "standard_normal_prior", "train", "train_lbfgs", "train_stochastic", "undo_natural_step"]

#: How often a natural-gradient step that broke q(u)'s positive definiteness is undone (its size halved each
#: time) before the fit gives up with a FloatingPointError.
MAX_NATURAL_HALVINGS = 10
#: Adam's second-moment decay in the stochastic fit (a memory of about 100 steps; see StochasticMRD).
ADAM_BETA2 = 0.99


def _parameter_groups(model):
    """q(u)'s natural parameters, the likelihoods' parameters, and every other parameter of ``model``."""
    named = list(model.named_parameters())
    natural = [p for name, p in named if "natural_" in name]
    noise = [p for name, p in named if name.startswith("likelihoods.")]
    params = [p for name, p in named if "natural_" not in name and not name.startswith("likelihoods.")]
    return natural, noise, params


def standard_normal_prior(model) -> bool:
    """Whether p(X) of the Pyro ``model`` is N(0, I) (no time GP, graph or user prior)."""
    return model.latent_prior is None and model.graph_prior is None and model.time_scale_tril is None


def train(est, epochs: int | None = None, continued: bool = False) -> None:
    """Fit ``est.model_`` by ``est.optimizer`` for ``epochs`` (default ``est.max_epochs``); ``continued``: go on
    from the fitted parameters (no warm-up, the history appended to ``elbo_history_``; see
    :func:`train_stochastic`). The caller's global torch RNG is left as it was."""
    device = est.model_.q_x.mean.device
    epochs = int(est.max_epochs if epochs is None else epochs)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        if est.optimizer == "lbfgs":  # Pyro's guide draws X (unused by the exact Gaussian terms)
            return train_lbfgs(est, epochs, continued)
        return train_stochastic(est, epochs, continued)


def _finish(est, history, converged: bool, continued: bool) -> None:
    """Record the history (appended to the fit's when ``continued``), the epochs and the convergence."""
    if continued:
        history = list(est.elbo_history_) + list(history)
    est.elbo_history_ = np.asarray(history, dtype=np.float64)
    est.n_epochs_ = len(history)
    est.converged_ = converged


def train_stochastic(est, epochs: int, continued: bool = False) -> None:
    """Adam on the minibatch ELBO with natural-gradient steps on q(u) of the Gaussian views; the learning
    rate decays exponentially; the likelihoods' parameters are held for the warm-up epochs (none after a
    collapsed start, whose noise is fitted). Every ``window`` epochs the epochs' mean ELBO estimates are read
    back, the latent dimensions normalised (:func:`normalise_latent`), and the fit stops when the mean of the
    last window differs from the window before by less than ``tol`` times its magnitude.

    ``continued``: ``epochs`` more from the fitted parameters, with Adam restarted: no warm-up, the learning
    rate going on along the fit's decay from where its ``n_epochs_`` left it, the natural-gradient step size
    the fit ended with (``natural_gradient_lr_``), the minibatches drawn from a seed of ``seed`` and
    ``n_epochs_``; the stopping test on the continuation's own epochs."""
    model = est.model_
    N = est.n_entities_
    B = min(int(est.batch_size), N)
    steps = math.ceil(N / B)
    done = int(est.n_epochs_) if continued else 0
    particles = int(est.num_particles)
    natural, noise, params = _parameter_groups(model)
    warmup = 0 if continued or est.start_ == "collapsed" else int(est.warmup_epochs)
    gamma = float(est.final_lr_fraction) ** (1.0 / max(int(est.max_epochs), 1))  # the fit's decay per epoch
    lr = float(est.learning_rate) * gamma ** done
    # the likelihood's parameters (the noise) held for the warm-up: lr 0 in their group until then
    optimiser = torch.optim.Adam([{"params": params}, {"params": noise, "lr": 0.0 if warmup else lr}], lr=lr,
                                 betas=(0.9, ADAM_BETA2))
    # the loss is the ELBO itself, not divided by N as GPyTorch's VariationalELBO: num_data=1
    natural_lr = est.natural_gradient_lr_ if continued else est.natural_gradient_lr
    ngd = NGD(natural, num_data=1, lr=float(natural_lr)) if natural else None
    schedule = torch.optim.lr_scheduler.ExponentialLR(optimiser, gamma=gamma)
    device = model.q_x.mean.device
    history, pending, converged = [], [], False  # pending: the epochs' ELBO estimates not yet read back
    w = int(est.window)
    seed = 0 if est.seed is None else int(np.random.default_rng(est.seed).integers(2**31))
    torch.manual_seed(int(np.random.default_rng([seed, done]).integers(2**31)) if continued else seed)
    generator = torch.Generator(device=device).manual_seed(int(torch.randint(2**31, ()).item()))
    bar = tqdm(total=epochs, desc=est._method, disable=not est.progress, leave=False)
    before_step = None  # q(u)'s natural parameters before the last natural-gradient step
    if not continued:
        est.natural_gradient_halvings_ = 0
    for epoch in range(epochs):
        order = torch.randperm(N, generator=generator, device=device)
        total = torch.zeros((), dtype=model.q_x.mean.dtype, device=device)
        for s in range(steps):
            idx = order[s * B:(s + 1) * B]
            while True:
                try:
                    elbo, before_step = minibatch_step(model, idx, optimiser, ngd, particles)
                    break
                except NotPSDError as exc:  # the last natural step broke q(u): undo it, then this step again
                    undo_natural_step(est, ngd, natural, before_step, epoch + 1, exc)
                    before_step = None
            total = total + elbo
        pending.append(total / steps)
        schedule.step()
        if epoch + 1 == warmup:
            optimiser.param_groups[1]["lr"] = optimiser.param_groups[0]["lr"]
        if len(pending) < w and epoch + 1 < epochs:
            continue
        values = torch.stack(pending).tolist()  # the one read-back of the window
        pending = []
        bar.update(len(values))
        if not np.isfinite(values).all():
            raise FloatingPointError(f"the ELBO became {values[-1]} by epoch {epoch + 1}; lower learning_rate or "
                                     "use float64")
        history.extend(values)
        bar.set_postfix(elbo=f"{history[-1]:.4g}")
        if epoch + 1 > warmup:
            normalise_latent(est)  # exact; a no-op under other priors
        if len(history) >= warmup + 2 * w:
            last, before = np.mean(history[-w:]), np.mean(history[-2 * w:-w])
            if abs(last - before) <= est.tol * abs(last):
                converged = True
                break
    bar.close()
    est.natural_gradient_lr_ = None if ngd is None else float(ngd.param_groups[0]["lr"])
    _finish(est, history, converged, continued)
    if not converged:
        budget = f"the {epochs} further epochs continue_fit was given" if continued else f"{epochs} epochs"
        warnings.warn(f"{est._method} did not converge in {budget}: the mean ELBO of the last {w} epochs "
                      f"still moved by more than tol={est.tol} relative to the {w} before; increase max_epochs",
                      ConvergenceWarning, stacklevel=5)


def minibatch_step(model, idx, optimiser, ngd, particles: int = 1):
    """One step on the minibatch ``idx``: ``optimiser`` on the minibatch ELBO, then the natural-gradient step
    ``ngd`` on q(u) (or none). Returns the ELBO estimate, left on the device, and q(u)'s natural parameters
    before the natural step (None without one), to undo that step should it have broken q(u). Nothing is read
    back from the device but the status flags of the Cholesky factorisations (K_uu's, and q(u)'s from its
    natural parameters, which raise ``NotPSDError``), and, for a view observing only some entities, the count of
    the minibatch's entities it observes."""
    optimiser.zero_grad(set_to_none=True)
    if ngd is not None:
        ngd.zero_grad(set_to_none=True)
    loss = negative_elbo(model, idx, particles)
    loss.backward()
    optimiser.step()
    before = None
    if ngd is not None:
        before = [p.detach().clone() for group in ngd.param_groups for p in group["params"]]
        ngd.step()
    return -loss.detach(), before


def undo_natural_step(est, ngd, natural, before_step, epoch: int, exc: Exception) -> None:
    """q(u) lost positive definiteness after a natural-gradient step (its precision, rounded in float32,
    is no longer positive definite): restore q(u) from before that step and halve the step size for the
    rest of the fit (``natural_gradient_lr_``), at most :data:`MAX_NATURAL_HALVINGS` times; otherwise
    (no step to undo, or too many halvings) raise a FloatingPointError with the remedies."""
    if ngd is None or before_step is None or est.natural_gradient_halvings_ >= MAX_NATURAL_HALVINGS:
        raise FloatingPointError(
            f"q(u) lost positive definiteness at epoch {epoch} (its natural parameters after a natural-gradient "
            f"step, in {est.model_.q_x.mean.dtype}; step size halved {est.natural_gradient_halvings_} times): "
            f"use dtype=torch.float64 or a smaller natural_gradient_lr (now {est.natural_gradient_lr})") from exc
    with torch.no_grad():
        for p, saved in zip(natural, before_step):
            p.copy_(saved)
    for group in ngd.param_groups:
        group["lr"] *= 0.5
    est.natural_gradient_halvings_ += 1
    warnings.warn(f"{est._method}: q(u) lost positive definiteness after a natural-gradient step at epoch "
                  f"{epoch} (in {est.model_.q_x.mean.dtype}); the step was undone and natural_gradient_lr halved "
                  f"to {ngd.param_groups[0]['lr']:.4g} for the rest of the fit (natural_gradient_lr_)",
                  RuntimeWarning, stacklevel=5)

def train_lbfgs(est, budget: int, continued: bool = False) -> None:
    """Full-batch L-BFGS on the ELBO with q(u) at its optimum at every evaluation (``optimizer="lbfgs"``),
    ``budget`` evaluations; ``continued``: from the fitted parameters, without the warm-up, the history
    appended to the fit's."""
    model = est.model_
    N = est.n_entities_
    why = []
    if any(lik != "gaussian" for lik in est.likelihoods_.values()):
        why.append("every view Gaussian (the other likelihoods' terms are Monte Carlo estimates)")
    if not (model.latent_prior is None and model.time_scale_tril is None):
        why.append("latent_prior='normal' or a GraphLaplacianPrior (the KL of the others may be a Monte Carlo "
                   "estimate)")
    if est.natural_gradient_lr is None:
        why.append("natural-gradient q(u) (natural_gradient_lr not None)")
    if int(est.batch_size) < N:
        why.append(f"batch_size >= the {N} entities (full batch)")
    if why:
        raise ValueError("optimizer='lbfgs' needs a deterministic full-batch ELBO: " + "; ".join(why))
    natural, noise, params = _parameter_groups(model)
    ngd = NGD(natural, num_data=1, lr=1.0)  # one step of size 1: the optimal q(u) of a Gaussian view
    idx = torch.arange(N, device=model.q_x.mean.device)
    history: list[float] = []
    bar = tqdm(total=budget, desc=est._method, disable=not est.progress, leave=False)

    def closure():
        try:
            ngd.zero_grad(set_to_none=True)
            negative_elbo(model, idx).backward()
            ngd.step()  # q(u) at its optimum given the other parameters
            for p in params + noise:
                p.grad = None
            loss = negative_elbo(model, idx)
        except NotPSDError as exc:
            raise FloatingPointError(f"q(u) lost positive definiteness at evaluation {len(history) + 1} (in "
                                     f"{model.q_x.mean.dtype}): use dtype=torch.float64") from exc
        if not torch.isfinite(loss):
            raise FloatingPointError(f"the ELBO became {loss.item()} at evaluation {len(history) + 1}; "
                                     "use float64 or a smaller init_variance")
        loss.backward()
        history.append(-loss.item())
        bar.update()
        bar.set_postfix(elbo=f"{history[-1]:.6g}")
        return loss

    # torch's tolerance on the change of the loss is absolute: 1e-9 of the ELBO's size at the start
    tolerance = 1e-9 * max(abs(closure().item()), 1.0) if budget else 0.0
    converged = False
    warmup = min(0 if continued else int(est.warmup_epochs), budget - 1) if budget else 0
    # the likelihoods' parameters (the noise) held for the warm-up, as MRD's warm-up; L-BFGS restarted with
    # a fresh memory whenever it stops early (a stale curvature pair can give a non-descent direction),
    # until a restart no longer improves the ELBO by more than the tolerance
    for group, end in ((params, 1 + warmup), (params + noise, budget)):
        while end - len(history) > 0:
            if group is not params:
                normalise_latent(est)  # the exact step along the likelihood's flat directions
                closure()
            start, before = len(history), max(history)
            optimiser = torch.optim.LBFGS(group, lr=1.0, max_iter=end - start, max_eval=end - start,
                                          history_size=30, line_search_fn="strong_wolfe", tolerance_grad=1e-12,
                                          tolerance_change=tolerance)
            optimiser.step(closure)
            if group is params:
                break  # the warm-up is a fixed number of evaluations
            if max(history[start:], default=before) - before <= tolerance:
                converged = True
                break
    bar.close()
    if budget:  # q(u) at its optimum for the final parameters (the last evaluation may be a line-search trial)
        ngd.zero_grad(set_to_none=True)
        negative_elbo(model, idx).backward()
        ngd.step()
    for p in model.parameters():
        p.grad = None
    est.natural_gradient_lr_, est.natural_gradient_halvings_ = 1.0, 0  # q(u) set to its optimum, never halved
    _finish(est, history, converged, continued)
    if not converged:
        warnings.warn(f"{est._method} (optimizer='lbfgs') stopped at max_epochs={budget} ELBO evaluations before "
                      "L-BFGS converged; increase max_epochs", ConvergenceWarning, stacklevel=5)


def normalise_latent(est) -> None:
    """Shift and scale each latent dimension (with the inducing inputs and the kernels) to where the KL to
    N(0, I) is smallest at the same likelihood (:func:`~bayesalign.gp.kernels.normalise_latent_symmetries`;
    the whitened q(u) stays valid since K_uu is unchanged). Only under the standard normal prior in force and with no
    registered kernel prior (both would change); as the collapsed engine does at every L-BFGS restart."""
    model = est.model_
    if not standard_normal_prior(model):
        return
    if any(True for gp in model.gps for _ in gp.covar_module.named_priors()):
        return
    with torch.no_grad():
        mu, S = model.q_x.mean, model.q_x.variance
        moved = normalise_latent_symmetries([gp.covar_module for gp in model.gps], mu, S)
        if moved is None:
            return
        shift, scale = moved
        model.q_x.mean.copy_((mu - shift) * scale)
        model.q_x.variance = S * scale.square()
        for gp in model.gps:
            Z = gp.variational_strategy.inducing_points
            Z.copy_((Z - shift) * scale)


def collapsed_elbo(est) -> float:
    """The ELBO with q(U) of every view at its optimum given the other parameters: for Gaussian views the
    collapsed bound of :class:`~bayesalign.gp.MRD` at the fitted kernels, noise variances, inducing inputs
    and q(X) (Titsias & Lawrence, 2010), the quantity to compare with ``MRD.elbo()``; the model is left as it
    was. A view without missing entries enters through the collapsed bound itself
    (:func:`~bayesalign.gp.bound.collapsed_bound`, factored through ``I + beta L^-1 Psi2 L^-T``, stable for a small
    noise variance): its expected log-likelihood and KL(q(u) || p(u)) at the fitted q(u) are swapped for F. A
    view with missing entries takes one full-batch natural-gradient step of size 1 on a copy of its q(u) (exact:
    each output's own optimum). Gaussian views only; a view with missing entries needs natural-gradient q(U)
    (``natural_gradient_lr`` not None)."""
    if any(n != "gaussian" for n in est.likelihoods_.values()):
        raise ValueError("collapsed_elbo needs every view Gaussian")
    model = est.model_
    holed = [v for v in range(model.n_views) if model.view_has_missing[v]]
    if holed and est.natural_gradient_lr is None:
        raise ValueError("collapsed_elbo needs natural-gradient q(u) for a view with missing entries")
    idx = torch.arange(est.n_entities_, device=model.q_x.mean.device)
    swapped = 0.0
    with torch.no_grad():
        for v in range(model.n_views):
            if v not in holed:
                swapped += float(_collapsed_view_bound(model, v) - _view_terms(model, v, idx))
    natural = [p for v in holed for name, p in model.gps[v].named_parameters() if "natural_" in name]
    saved = [p.detach().clone() for p in natural]
    device = model.q_x.mean.device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        try:
            if natural:
                negative_elbo(model, idx).backward()
                NGD(natural, num_data=1, lr=1.0).step()
            with torch.no_grad():
                return -float(negative_elbo(model, idx)) + swapped
        except NotPSDError as exc:
            raise FloatingPointError(f"collapsed_elbo: q(u) at its optimum is not positive definite in "
                                     f"{model.q_x.mean.dtype} (a small noise variance against K_uu)") from exc
        finally:
            with torch.no_grad():
                for p, value in zip(natural, saved):
                    p.copy_(value)
            for p in model.parameters():
                p.grad = None
            for gp in model.gps:  # GPyTorch's memo of q(u) holds the stepped one
                gp.variational_strategy._clear_cache()


def _view_terms(model, v: int, idx: torch.Tensor) -> torch.Tensor:
    """View v's part of the ELBO at its fitted q(u): its expected log-likelihood minus KL(q(u) || p(u))."""
    p_u, q_u = model.gps[v].inducing_distributions()
    kl = torch.distributions.kl_divergence(q_u.to_event(len(q_u.batch_shape)), p_u.to_event(len(p_u.batch_shape)))
    return model.gaussian_view_log_likelihood(v, idx) - kl


def _collapsed_view_bound(model, v: int) -> torch.Tensor:
    """The collapsed bound F of Gaussian view v (no missing entries) at the fitted kernel, noise, inducing
    inputs and q(X) of the entities it observes."""
    Y = getattr(model, f"targets_{v}")
    rows = getattr(model, f"rows_{v}")
    mean, variance = model.q_x.mean, model.q_x.variance
    if rows is not None:
        entities = torch.empty(Y.shape[0], dtype=torch.long, device=Y.device)
        seen = rows >= 0
        entities[rows[seen]] = torch.arange(rows.numel(), device=Y.device)[seen]  # the entity of each row
        mean, variance = mean[entities], variance[entities]
    gp = model.gps[v]
    strategy = gp.variational_strategy
    Z = strategy.inducing_points
    Kuu = gp.covar_module(Z).to_dense() + strategy.jitter_val * torch.eye(Z.shape[0], dtype=Z.dtype, device=Z.device)
    stats = psi_statistics(gp.covar_module, mean, variance, Z)
    return collapsed_bound(Y, model.likelihoods[v].noise.reshape(()), Kuu, stats.psi0.sum(), stats.psi1, stats.psi2,
                           what=f"K_uu of view {v}")
