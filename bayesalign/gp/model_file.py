"""Save and load fitted BayesianGPLVM / MRD models: one ``.npz`` file of arrays plus JSON metadata.

No pickle anywhere: the tensors of the model's state dict are stored as plain numpy arrays
(``np.savez``; read back with ``allow_pickle=False``), the metadata (class name, constructor
parameters, view names, fit history) as a JSON string. Loading builds the model from a fixed list
of classes and kernel names, so a file can never make the loader run code. Round trips are exact:
the raw parameter values are stored bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from .._utils import atomic_write
from .kernels import make_kernel
from .module import LatentGPModule, noise_floor_in_state, resolve_dtype
from .priors import GraphLaplacianPrior, StandardNormalPrior

__all__ = ["ModelFileError", "load_model", "register_model_class", "save_model"]

FORMAT = "bayesalign.gp"
FORMAT_VERSION = 1

#: The estimator classes a model file may name (filled by :func:`register_model_class`: MRD,
#: BayesianGPLVM); loading builds only these, so a file can never make the loader run other code.
MODEL_CLASSES: dict[str, type] = {}


def register_model_class(cls):
    """Class decorator: ``cls`` may be named in a model file (its ``__name__`` is the file's class)."""
    MODEL_CLASSES[cls.__name__] = cls
    return cls


def _json_params(model) -> dict:
    params = model.get_params(deep=False)
    if not isinstance(params["kernel"], str):
        raise TypeError("only models whose kernel was given by name (e.g. 'rbf', 'linear+bias') can be saved; "
                        f"this one has {type(params['kernel']).__name__}")
    params["init"] = params["init"] if isinstance(params["init"], str) else None  # arrays are not needed again
    params["dtype"] = str(params["dtype"]).replace("torch.", "")
    params["device"] = None if params["device"] is None else str(params["device"])
    seed = params["seed"]
    params["seed"] = int(seed) if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) else None
    return params


def save_model(model, path) -> None:
    """Write a fitted model to ``path`` (an ``.npz`` file; written atomically).

    Stored: every tensor of ``model.module_.state_dict()`` (raw parameters, constraint bounds, the
    centred training outputs), the column means and kept-column masks of each view, the bound
    history, the final bound and start of every restart, and JSON metadata.
    """
    model._check_fitted()
    module = model.module_
    meta = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "class": type(model).__name__,
        "params": _json_params(model), "view_names": list(model.view_names_),
        "n_features": {k: int(v) for k, v in model.n_features_in_.items()},
        "jitter": module.jitter, "n_iter": int(model.n_iter_), "n_warmup": int(model.n_warmup_),
        "converged": bool(model.converged_), "interrupted": bool(getattr(model, "interrupted_", False)),
        "latent_prior": {"name": module.latent_prior.name,
                         "strength": float(getattr(module.latent_prior, "strength", 0.0))},
    }
    restarts = {}
    if hasattr(model, "restart_bounds_"):  # every restart of the fit, and which one was kept
        meta.update(restart_inits=list(model.restart_inits_), best_restart=int(model.best_restart_))
        restarts["restart_bounds"] = np.asarray(model.restart_bounds_, dtype=np.float64)
    arrays = {"meta": np.array(json.dumps(meta)), "history": np.asarray(model.history_, dtype=np.float64),
              "history_seconds": np.asarray(model.history_seconds_, dtype=np.float64), **restarts}
    for key, value in module.state_dict().items():
        arrays[f"state/{key}"] = value.detach().cpu().numpy()
    if isinstance(module.latent_prior, GraphLaplacianPrior):  # its graph, as plain arrays
        graph = module.latent_prior.laplacian.tocoo()
        arrays.update({"latent_prior/row": graph.row, "latent_prior/col": graph.col, "latent_prior/data": graph.data})
    for i, name in enumerate(model.view_names_):
        arrays[f"output_means/{i}"] = model.output_means_[name]
        arrays[f"kept_columns/{i}"] = model.kept_columns_[name]
    with atomic_write(Path(path), "wb") as handle:
        np.savez(handle, **arrays)


class ModelFileError(ValueError):
    """A model file that cannot be loaded (truncated, corrupt, not a model, non-finite parameters); the
    message names the file."""


def load_model(path, device=None):
    """Read a model written by :func:`save_model` (or ``model.save``); returns MRD or BayesianGPLVM.

    Parameters
    ----------
    path : str or Path
    device : str or torch.device, optional
        Where to put the tensors (default: the ``device`` the model was fitted with, else CPU).

    Raises
    ------
    FileNotFoundError
        When there is no such file.
    ModelFileError
        (a ValueError) naming the file, when it is truncated or corrupt (not a zip, a missing or
        malformed array or metadata field, tensors of the wrong shape), or holds a non-finite
        parameter: such a model is refused here rather than failing later.
    """
    import zipfile

    if device is not None:
        device = torch.device(device)  # a bad device is the caller's error, not the file's
    try:
        model = _read_model(path, device)
    except (FileNotFoundError, ModelFileError):
        raise
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, IndexError, RuntimeError, TypeError,
            ValueError) as exc:
        raise ModelFileError(f"{path}: not a readable bayesalign model file ({type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:200]})") from exc
    # NaN nowhere; inf nowhere but in the constraints' bounds (an upper bound may be +inf)
    parameters = dict(model.module_.named_parameters())
    bad = [key for key, value in model.module_.state_dict().items() if value.is_floating_point() and (
        bool(torch.isnan(value).any()) or (key in parameters and not bool(torch.isfinite(value).all())))]
    bad += [f"output_means/{name}" for name, mean in model.output_means_.items() if not np.isfinite(mean).all()]
    if bad:
        raise ModelFileError(f"{path}: non-finite values in {', '.join(bad[:4])}; the file is corrupt (or was "
                             "saved from a failed fit) and is refused")
    return model


def _read_latent_prior(spec, arrays, n_entities):
    """The latent prior a model file names (files without one: N(0, I))."""
    if spec is None or spec.get("name") == StandardNormalPrior.name:
        return None
    if spec.get("name") != GraphLaplacianPrior.name:
        raise ValueError(f"unknown latent prior {spec.get('name')!r}")
    row, col = arrays["latent_prior/row"].astype(np.int64), arrays["latent_prior/col"].astype(np.int64)
    laplacian = sp.coo_matrix((arrays["latent_prior/data"], (row, col)), shape=(n_entities, n_entities))
    return GraphLaplacianPrior(laplacian, float(spec["strength"]))


def _read_model(path, device):
    with np.load(Path(path), allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    try:
        meta = json.loads(str(arrays.pop("meta")))
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{path} is not a bayesalign.gp model file (no readable metadata)") from exc
    if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path}: unsupported format {meta.get('format')!r} version {meta.get('format_version')!r}")
    classes = MODEL_CLASSES
    if meta["class"] not in classes:
        raise ValueError(f"{path}: unknown model class {meta['class']!r}")
    params = dict(meta["params"])
    params["dtype"] = dtype = resolve_dtype(params["dtype"])
    model = classes[meta["class"]](**params)
    device = torch.device(device if device is not None else (params["device"] or "cpu"))
    state = {key[len("state/"):]: torch.as_tensor(value).to(device)
             for key, value in arrays.items() if key.startswith("state/")}
    names = list(meta["view_names"])
    V = len(names)
    Q = int(state["q_mean"].shape[1])
    module = LatentGPModule(
        outputs=[state[f"outputs_{v}"] for v in range(V)], q_mean=state["q_mean"],
        q_variance=torch.ones_like(state["q_mean"]), inducing_inputs=state["inducing_inputs"],
        kernels=[make_kernel(params["kernel"], Q, dtype=dtype).to(device) for _ in range(V)],
        noise=2.0 * noise_floor_in_state(state).expand(V).clone(),
        noise_floor=noise_floor_in_state(state), jitter=float(meta["jitter"]),
        observed=[state.get(f"observed_{v}") for v in range(V)],
        latent_prior=_read_latent_prior(meta.get("latent_prior"), arrays, int(state["q_mean"].shape[0])))
    module.load_state_dict(state, strict=True)
    model.module_ = module
    model.view_names_ = tuple(names)
    model.n_features_in_ = {k: int(v) for k, v in meta["n_features"].items()}
    model.output_means_ = {name: arrays[f"output_means/{v}"] for v, name in enumerate(names)}
    model.kept_columns_ = {name: arrays[f"kept_columns/{v}"].astype(bool) for v, name in enumerate(names)}
    model.history_ = arrays["history"]
    model.history_seconds_ = arrays["history_seconds"]
    model.n_iter_ = int(meta["n_iter"])
    model.n_warmup_ = int(meta["n_warmup"])
    model.converged_ = bool(meta["converged"])
    model.interrupted_ = bool(meta.get("interrupted", False))
    if "restart_bounds" in arrays:  # a file without the restarts' record has none
        model.restart_bounds_ = arrays["restart_bounds"]
        model.restart_inits_ = [str(label) for label in meta["restart_inits"]]
        model.best_restart_ = int(meta["best_restart"])
    return model
