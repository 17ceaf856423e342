"""Input checks of :class:`~bayesalign.gp.svi.StochasticMRD`: its views, parameters, likelihoods and start (and
the start's initial q(X) means)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping

import numpy as np
import torch

from ..._utils import available_host_memory
from ...data import AlignmentProblem, LatentEmbedding, Views
from ...data.views import check_view
from ..initialisation import entity_means_from_embedding, init_latent, partial_latent
from ..module import resolve_dtype
from ..priors import GraphLaplacianPrior
from .likelihoods import LIKELIHOODS

__all__ = ["OPTIMIZERS", "available_memory", "check_params", "check_step_memory", "constant_columns_dropped",
           "initial_latent", "likelihood_names", "start_name", "step_memory", "time_covariance", "views_with_nan"]

#: ``optimizer`` of :class:`~bayesalign.gp.svi.StochasticMRD`.
OPTIMIZERS = ("adam", "lbfgs")


def views_with_nan(data) -> tuple[list[str], list[np.ndarray]]:
    """Names and float64 copies of the views (:func:`~bayesalign.data.views.check_view`): NaN is a missing entry."""
    if isinstance(data, AlignmentProblem):
        data = data.views
    if isinstance(data, Views):
        pairs = [(name, data[name]) for name in data.names]
    elif isinstance(data, Mapping):
        pairs = list(data.items())
    elif isinstance(data, (list, tuple)):
        pairs = [(f"view{i}", a) for i, a in enumerate(data)]
    else:
        raise TypeError("expected Views, an AlignmentProblem, or a dict / list of 2-D arrays, got "
                        f"{type(data).__name__}")
    if len(pairs) < 1:
        raise ValueError("no views given")
    names, arrays = [], []
    for name, a in pairs:
        if not isinstance(name, str) or not name:
            raise TypeError(f"view names must be non-empty strings, got {name!r}")
        names.append(name)
        arrays.append(np.array(check_view(a, name, allow_missing=True)))  # a writable float64 copy
    return names, arrays


def check_params(est):
    for name in ("latent_dim", "num_inducing", "batch_size", "max_epochs", "window", "num_particles",
                 "warmup_epochs"):
        value = getattr(est, name)
        low = 0 if name in ("max_epochs", "warmup_epochs") else 1
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    for name in ("init_variance", "snr", "learning_rate", "time_lengthscale", "jitter"):
        if not getattr(est, name) > 0:
            raise ValueError(f"{name} must be positive, got {getattr(est, name)!r}")
    if not 0 < est.final_lr_fraction <= 1:
        raise ValueError(f"final_lr_fraction must be in (0, 1], got {est.final_lr_fraction!r}")
    if not est.tol >= 0:
        raise ValueError(f"tol must be >= 0, got {est.tol!r}")
    if est.optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {est.optimizer!r}")
    prior = est.latent_prior
    if not (prior in ("normal", "gp") if isinstance(prior, str) else
            isinstance(prior, (torch.distributions.Distribution, GraphLaplacianPrior)) or callable(prior)):
        raise ValueError(f"latent_prior must be 'normal', 'gp', a GraphLaplacianPrior, a pyro distribution or a "
                         f"callable, got {prior!r}")
    if isinstance(prior, torch.distributions.Distribution) and tuple(prior.event_shape) != (int(est.latent_dim),):
        raise ValueError(f"latent_prior must have event shape ({est.latent_dim},) (one latent point), got "
                         f"{tuple(prior.event_shape)}; use .to_event(1) on a per-dimension distribution")
    return resolve_dtype(est.dtype), torch.device(est.device if est.device is not None else "cpu")

def likelihood_names(est, names: list[str]) -> list[str]:
    spec = est.likelihood
    if isinstance(spec, str):
        out = [spec] * len(names)
    elif isinstance(spec, Mapping):
        unknown = [k for k in spec if k not in names]
        if unknown:
            raise ValueError(f"likelihood names views {unknown} that are not among the views {names}")
        out = [spec.get(name, "gaussian") for name in names]
    elif isinstance(spec, (list, tuple)) and len(spec) == len(names):
        out = list(spec)
    else:
        raise ValueError(f"likelihood must be a name, a dict view -> name or a list of {len(names)} names, "
                         f"got {spec!r}")
    for name, lik in zip(names, out):
        if lik not in LIKELIHOODS:
            raise ValueError(f"view {name!r}: unknown likelihood {lik!r}; choose from {LIKELIHOODS}")
    return out


def start_name(est, likelihoods, targets, observed) -> str:
    """The name of the start ``init`` asks for on these views ("auto" resolved; see the class)."""
    init = est.init
    if isinstance(init, LatentEmbedding):
        return "embedding"
    if not isinstance(init, str):
        return "array"
    if init not in ("auto", "collapsed", "pca", "random"):
        raise ValueError(f"init must be 'auto', 'collapsed', 'pca', 'random', a LatentEmbedding or an array, "
                         f"got {init!r}")
    if init not in ("auto", "collapsed"):
        return init
    why = []
    if any(lik != "gaussian" for lik in likelihoods):
        why.append("every view Gaussian")
    if any(r is not None for r in observed):
        why.append("paired views (observed=None)")
    if any(np.isnan(Y).any() for Y in targets):
        why.append("no missing entries")
    if not (isinstance(est.latent_prior, str) and est.latent_prior == "normal"):
        why.append("latent_prior='normal'")
    if not isinstance(est.kernel, str):
        why.append("a kernel given by name")
    if why and init == "collapsed":
        raise ValueError("init='collapsed' (the collapsed MRD on a subsample) needs " + "; ".join(why))
    return "pca" if why else "collapsed"


def initial_latent(est, start, names, targets, likelihoods, observed, N, Q) -> np.ndarray:
    """q(X) means [N, Q] of ``start`` (the collapsed start's PCA start for "collapsed") of the StochasticMRD ``est``."""
    init = est.init
    if start == "embedding" and any(r is not None for r in observed):
        return entity_means_from_embedding(init, names, observed, N, Q)  # each entity: the mean of its rows
    if start in ("embedding", "array", "random"):
        return init_latent(init, names, targets, Q, est.seed, n_rows=N)
    blocks = []
    for Y, lik in zip(targets, likelihoods):
        Y = np.log1p(Y) if lik in ("poisson", "negative_binomial") else Y  # counts on a log scale
        Y = Y - np.nanmean(Y, 0)
        blocks.append(np.where(np.isnan(Y), 0.0, Y))  # a missing entry starts at its column mean
    if any(r is not None for r in observed):  # learned on the entities every view observes, as MRD's
        return partial_latent("pca", names, blocks, observed, N, Q, est.seed)
    return init_latent("pca", names, blocks, Q, est.seed, n_rows=N)


def time_covariance(est, time_index, N, dtype, device) -> torch.Tensor:
    if time_index is None:
        raise ValueError("latent_prior='gp' needs fit(..., time_index=[N times])")
    t = np.asarray(time_index, dtype=np.float64).reshape(-1)
    if t.shape[0] != N or not np.isfinite(t).all():
        raise ValueError(f"time_index must hold {N} finite times (one per entity), got shape {t.shape}")
    # k(t, t') = exp(-(t - t')^2 / 2 l^2) + 1e-6 on the diagonal: dense N x N (the prior couples all entities)
    diff = (t[:, None] - t[None, :]) / float(est.time_lengthscale)
    return torch.as_tensor(np.exp(-0.5 * diff ** 2) + 1e-6 * np.eye(N), dtype=dtype, device=device)


#: Gauss-Hermite nodes of GPyTorch's one-dimensional quadrature (a non-Gaussian view's expected log-likelihood).
QUADRATURE_NODES = 20


def step_memory(rows: int, columns: int, likelihood: str, missing: bool, batch: int, M: int, Q: int,
                itemsize: int) -> tuple[int, int]:
    """(bytes of a view's targets on the device, bytes a training step holds for it at minibatches of ``batch``):
    the step's largest tensors, twice over for autograd. A Gaussian view without missing entries needs
    psi1 [B, M] and its gradients [B, M, Q]; with missing entries about six per-point [B, M, M] blocks (psi2, the
    outer products of q(u), their whitening); a non-Gaussian view the marginals' [D, M, B] product and the
    quadrature's [B, D, nodes] values, three of each. An estimate of the peak, not a bound."""
    B, D = int(batch), int(columns)
    if likelihood != "gaussian":
        per_step = 3 * D * M * B + 3 * B * D * QUADRATURE_NODES
    elif missing:
        per_step = 6 * B * M * M + 3 * B * D
    else:
        per_step = 2 * B * M * (Q + 1) + 3 * B * D
    return int(rows) * D * itemsize, 2 * per_step * itemsize


def available_memory(device: torch.device) -> int | None:
    """Bytes free for new tensors on ``device``: the GPU's free memory, or the host's ``MemAvailable``
    (Linux); None where it cannot be told."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return available_host_memory()


def check_step_memory(est, names, targets, likelihoods, M: int, Q: int, dtype, device) -> None:
    """MemoryError, naming the view and ``batch_size``, when the views' targets and a training step at
    ``est.batch_size`` (:func:`step_memory`) do not fit in the memory available on ``device``."""
    free = available_memory(device)
    if free is None:
        return
    N = max(Y.shape[0] for Y in targets)
    B = min(int(est.batch_size), N)
    itemsize = torch.empty((), dtype=dtype).element_size()
    sizes = [step_memory(Y.shape[0], Y.shape[1], lik, bool(np.isnan(Y).any()), B, M, Q, itemsize)
             for Y, lik in zip(targets, likelihoods)]
    data = sum(d for d, _ in sizes)
    step = sum(s for _, s in sizes)
    if data + step <= free:
        return
    gib = 2.0 ** 30
    if data >= free:
        v = int(np.argmax([d for d, _ in sizes]))
        raise MemoryError(f"view {names[v]!r}: its {targets[v].shape[0]} x {targets[v].shape[1]} targets in {dtype} "
                          f"({sizes[v][0] / gib:.2f} GiB) with the other views' ({data / gib:.2f} GiB in all) do not "
                          f"fit in the {free / gib:.2f} GiB available on {device}; use dtype=torch.float32 or fewer "
                          "columns")
    v = int(np.argmax([s for _, s in sizes]))
    fits = int((free - data) / step * B)  # the step's memory is linear in the minibatch
    advice = f"batch_size={fits} would fit" if fits >= 1 else "lower num_inducing"
    raise MemoryError(f"view {names[v]!r}: a training step at batch_size={B} needs about {sizes[v][1] / gib:.2f} GiB "
                      f"for this view ({step / gib:.2f} GiB for all, beside {data / gib:.2f} GiB of targets), more "
                      f"than the {free / gib:.2f} GiB available on {device}; {advice}")


def constant_columns_dropped(Y: np.ndarray, name: str) -> np.ndarray:
    """The mask [D] of a Gaussian view's columns that are not constant on their observed entries; the
    others are dropped with a RuntimeWarning, as :func:`~bayesalign.gp.initialisation.centre_view` drops
    them for the collapsed engine (a constant column would pull the view's one noise variance to zero)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-missing column: nanmax of nothing
        keep = (np.nanmax(Y, 0) - np.nanmin(Y, 0)) > 0  # [D]; NaN (all missing) compares False
    if not keep.any():
        raise ValueError(f"view {name!r}: every column is constant; nothing to model")
    if not keep.all():
        dropped = np.flatnonzero(~keep)
        warnings.warn(f"view {name!r}: dropping {dropped.size} constant column(s) {dropped[:10].tolist()}"
                      f"{' ...' if dropped.size > 10 else ''}", RuntimeWarning, stacklevel=4)
    return keep
