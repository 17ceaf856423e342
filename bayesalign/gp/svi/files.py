"""The model file of :class:`~bayesalign.gp.svi.StochasticMRD`: its writer and reader for the one format of
:mod:`bayesalign.gp.model_file` (JSON metadata and arrays; no pickle).

Stored: every tensor of ``model_.state_dict()`` (q(X), the inducing inputs, q(u) in its own parameterisation,
the kernels, likelihoods and constant means, the centred targets with their NaN, the rows of a partially
observed view, the time prior's Cholesky factor), per view its likelihood, q(u)'s family and the jitter of
K_uu, the entities each view observes, the column means and kept columns, the ELBO history and the
convergence report, and the latent prior (the constructor's and the one in force). A model whose prior is a
Pyro distribution or a callable cannot be saved: code is never stored.
"""

from __future__ import annotations

import numpy as np
import torch
from gpytorch.means import ConstantMean
from gpytorch.variational.natural_variational_distribution import _NaturalVariationalDistribution

from ..kernels import make_kernel
from ..model_file import json_params, read_latent_prior, write_latent_prior
from ..priors import GraphLaplacianPrior
from .guide import LatentPosterior, ViewGP
from .likelihoods import make_likelihood
from .model import SVIMRDModel

__all__ = ["read_stochastic", "write_stochastic"]


def _write_prior(prior, prefix: str, what: str) -> tuple[dict, dict]:
    """The metadata and arrays of a latent prior: "normal" (None), "gp", or a GraphLaplacianPrior."""
    if prior is None or isinstance(prior, str) and prior in ("normal", "gp"):
        return {"name": prior or "normal"}, {}
    if isinstance(prior, GraphLaplacianPrior):
        return write_latent_prior(prior, prefix=prefix)
    raise TypeError(f"a StochasticMRD whose {what} is a {type(prior).__name__} cannot be saved (only 'normal', "
                    "'gp' and a GraphLaplacianPrior: a model file holds no code)")


def write_stochastic(est) -> tuple[dict, dict]:
    """The metadata and arrays of a fitted StochasticMRD (:func:`~bayesalign.gp.model_file.save_model`)."""
    model = est.model_
    if model.latent_prior is not None:  # a distribution or a callable
        _write_prior(model.latent_prior, "latent_prior", "latent prior in force")
    in_force = "gp" if model.time_scale_tril is not None else model.graph_prior
    specs, arrays = {}, {}
    for key, prior, what in (("params/latent_prior", est.latent_prior, "latent_prior"),
                             ("latent_prior", in_force, "latent prior in force")):
        specs[key], prior_arrays = _write_prior(prior, key, what)
        arrays.update(prior_arrays)
    views = []
    for gp, name in zip(model.gps, est.view_names_):
        q_u = gp.variational_strategy._variational_distribution
        views.append({"likelihood": est.likelihoods_[name], "constant_mean": isinstance(gp.mean_module, ConstantMean),
                      "natural": isinstance(q_u, _NaturalVariationalDistribution), "tied": bool(gp.tied),
                      "jitter": float(gp.variational_strategy.jitter_val)})
    params = json_params(est)
    params["latent_prior"] = specs["params/latent_prior"]["name"]  # the prior itself: under priors
    meta = {"params": params, "views": views, "n_entities": int(est.n_entities_), "start": est.start_,
            "n_epochs": int(est.n_epochs_), "converged": bool(est.converged_),
            "natural_gradient_lr": est.natural_gradient_lr_,
            "natural_gradient_halvings": int(getattr(est, "natural_gradient_halvings_", 0)), "priors": specs}
    arrays["history"] = np.asarray(est.elbo_history_, dtype=np.float64)
    for key, value in model.state_dict().items():
        arrays[f"state/{key}"] = value.detach().cpu().numpy()
    for v, name in enumerate(est.view_names_):
        arrays[f"output_means/{v}"] = est.output_means_[name]
        arrays[f"kept_columns/{v}"] = est.kept_columns_[name]
        if est._entity_of[v] is not None:
            arrays[f"observed/{v}"] = np.asarray(est._entity_of[v], dtype=np.int64)
    return meta, arrays


def _read_prior(spec, arrays, n_entities, prefix):
    if spec["name"] in ("normal", "gp"):
        return spec["name"]
    return read_latent_prior(spec, arrays, n_entities, prefix=prefix)


def read_stochastic(cls, meta, arrays, device):
    """A fitted StochasticMRD from the metadata and arrays of :func:`write_stochastic`."""
    params = dict(meta["params"])
    dtype = params["dtype"]
    N = int(meta["n_entities"])
    priors = meta["priors"]
    params["latent_prior"] = _read_prior(priors["params/latent_prior"], arrays, N, "params/latent_prior")
    est = cls(**params)
    device = torch.device(device if device is not None else (params["device"] or "cpu"))
    state = {key[len("state/"):]: torch.as_tensor(value).to(device)
             for key, value in arrays.items() if key.startswith("state/")}
    names = list(meta["view_names"])
    Q = int(state["q_x.mean"].shape[1])
    gps, liks = [], []
    for v, spec in enumerate(meta["views"]):
        Z = state[f"gps.{v}.variational_strategy.inducing_points"]  # [M, Q]
        D = int(state[f"targets_{v}"].shape[1])
        gps.append(ViewGP(torch.zeros_like(Z), D, make_kernel(params["kernel"], Q, dtype=dtype),
                          constant_mean=bool(spec["constant_mean"]), jitter=float(spec["jitter"]),
                          natural=bool(spec["natural"]), tied=bool(spec["tied"])))
        liks.append(make_likelihood(spec["likelihood"]))
    in_force = _read_prior(priors["latent_prior"], arrays, N, "latent_prior")
    tril = state.get("time_scale_tril")
    model = SVIMRDModel(gps, liks, [state[f"targets_{v}"] for v in range(len(names))],
                        [state.get(f"rows_{v}") for v in range(len(names))],
                        LatentPosterior(torch.zeros_like(state["q_x.mean"]), torch.ones_like(state["q_x.mean"])),
                        time_covariance=None if tril is None else tril @ tril.mT,
                        graph_prior=in_force if isinstance(in_force, GraphLaplacianPrior) else None).to(
        device=device, dtype=dtype)
    model.load_state_dict(state, strict=True)  # every tensor as saved, bit for bit
    est.model_ = model
    est.view_names_ = tuple(names)
    est.likelihoods_ = {name: spec["likelihood"] for name, spec in zip(names, meta["views"])}
    est.n_entities_ = N
    est._entity_of = [arrays[f"observed/{v}"].astype(np.int64) if f"observed/{v}" in arrays else None
                      for v in range(len(names))]
    est.output_means_ = {name: arrays[f"output_means/{v}"] for v, name in enumerate(names)}
    est.kept_columns_ = {name: arrays[f"kept_columns/{v}"].astype(bool) for v, name in enumerate(names)}
    est.n_features_in_ = {k: int(v) for k, v in meta["n_features"].items()}
    est.start_ = str(meta["start"])
    est.elbo_history_ = arrays["history"]
    est.n_epochs_ = int(meta["n_epochs"])
    est.converged_ = bool(meta["converged"])
    est.natural_gradient_lr_ = meta["natural_gradient_lr"]
    est.natural_gradient_halvings_ = int(meta["natural_gradient_halvings"])
    return est
