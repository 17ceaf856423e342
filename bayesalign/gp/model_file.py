"""Save and load fitted latent GP models (BayesianGPLVM, MRD, StochasticMRD): one ``.npz`` file of arrays
plus JSON metadata.

No pickle anywhere: the tensors of the model's state dict are stored as plain numpy arrays
(``np.savez``; read back with ``allow_pickle=False``), the metadata (class name, constructor
parameters, view names, fit history) as a JSON string. Loading builds the model from a fixed list
of classes and kernel names, so a file can never make the loader run code. Round trips are exact:
the raw parameter values are stored bit for bit.

Every file has the same header (``format``, ``format_version``, ``class``, ``params``, ``view_names``,
``n_features``); what follows it is the class's: each class registered with :func:`register_model_class`
names the writer and reader of its state (the collapsed engine's, :func:`write_collapsed` and
:func:`read_collapsed`, by default).
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

__all__ = ["ModelFileError", "json_params", "load_model", "read_collapsed", "read_latent_prior", "register_model_class",
           "save_model", "write_collapsed", "write_latent_prior"]

FORMAT = "bayesalign.gp"
FORMAT_VERSION = 1

#: The estimator classes a model file may name, each with the writer and reader of its state (filled by
#: :func:`register_model_class`: MRD, BayesianGPLVM, StochasticMRD); loading builds only these, so a file
#: can never make the loader run other code.
MODEL_CLASSES: dict[str, tuple[type, object, object]] = {}


def register_model_class(cls=None, *, write=None, read=None):
    """``cls`` may be named in a model file (its ``__name__`` is the file's class); a class decorator.

    ``write(model) -> (meta, arrays)`` gives the class's metadata (a JSON-able dict joined to the header) and
    arrays; ``read(cls, meta, arrays, device) -> model`` builds a fitted model from them (``meta`` with
    ``params["dtype"]`` already a torch dtype). Default: :func:`write_collapsed` and :func:`read_collapsed`.
    """
    def register(cls):
        MODEL_CLASSES[cls.__name__] = (cls, write or write_collapsed, read or read_collapsed)
        return cls
    return register if cls is None else register(cls)


def json_params(model) -> dict:
    """The constructor parameters of ``model`` as JSON values (a kernel given by name only; an array start
    becomes None; dtype, device and an int seed as strings and ints, another seed None)."""
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
    """Write a fitted model to ``path`` (an ``.npz`` file; written atomically): the header, then the class's
    metadata and arrays (see :func:`register_model_class`)."""
    model._check_fitted()
    name = type(model).__name__
    if name not in MODEL_CLASSES:
        raise TypeError(f"{name} cannot be saved in a model file (not a registered model class)")
    meta, arrays = MODEL_CLASSES[name][1](model)
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "class": name, "params": json_params(model),
            "view_names": list(model.view_names_),
            "n_features": {k: int(v) for k, v in model.n_features_in_.items()}, **meta}
    arrays = {"meta": np.array(json.dumps(meta)), **arrays}
    with atomic_write(Path(path), "wb") as handle:
        np.savez(handle, **arrays)


def write_latent_prior(prior, prefix: str = "latent_prior") -> tuple[dict, dict]:
    """The metadata ``{name, strength}`` and arrays (a graph as COO arrays under ``prefix/``) of a prior of
    :mod:`bayesalign.gp.priors`."""
    arrays = {}
    if isinstance(prior, GraphLaplacianPrior):
        graph = prior.laplacian.tocoo()
        arrays = {f"{prefix}/row": graph.row, f"{prefix}/col": graph.col, f"{prefix}/data": graph.data}
    return {"name": prior.name, "strength": float(getattr(prior, "strength", 0.0))}, arrays


def write_collapsed(model) -> tuple[dict, dict]:
    """The state of a collapsed model (:func:`save_model`): every tensor of ``model.module_.state_dict()`` (raw
    parameters, constraint bounds, the centred training outputs), the column means and kept-column masks of
    each view, the bound history, the final bound and start of every restart, and the latent prior."""
    module = model.module_
    prior, arrays = write_latent_prior(module.latent_prior)
    meta = {"jitter": module.jitter, "n_iter": int(model.n_iter_), "n_warmup": int(model.n_warmup_),
            "converged": bool(model.converged_), "interrupted": bool(getattr(model, "interrupted_", False)),
            "latent_prior": prior}
    if hasattr(model, "restart_bounds_"):  # every restart of the fit, and which one was kept
        meta.update(restart_inits=list(model.restart_inits_), best_restart=int(model.best_restart_))
        arrays["restart_bounds"] = np.asarray(model.restart_bounds_, dtype=np.float64)
    arrays.update({"history": np.asarray(model.history_, dtype=np.float64),
                   "history_seconds": np.asarray(model.history_seconds_, dtype=np.float64)})
    for key, value in module.state_dict().items():
        arrays[f"state/{key}"] = value.detach().cpu().numpy()
    for i, name in enumerate(model.view_names_):
        arrays[f"output_means/{i}"] = model.output_means_[name]
        arrays[f"kept_columns/{i}"] = model.kept_columns_[name]
    return meta, arrays


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
    # NaN nowhere (but in the buffers where it marks a missing entry); inf nowhere but in the constraints'
    # bounds (an upper bound may be +inf)
    module = getattr(model, model._fitted_attribute)
    parameters = dict(module.named_parameters())
    missing = tuple(getattr(model, "_buffers_with_missing", ()))
    bad = [key for key, value in module.state_dict().items() if value.is_floating_point() and (
        (bool(torch.isnan(value).any()) and not key.startswith(missing))
        or (key in parameters and not bool(torch.isfinite(value).all())))]
    bad += [f"output_means/{name}" for name, mean in model.output_means_.items() if not np.isfinite(mean).all()]
    if bad:
        raise ModelFileError(f"{path}: non-finite values in {', '.join(bad[:4])}; the file is corrupt (or was "
                             "saved from a failed fit) and is refused")
    return model


def read_latent_prior(spec, arrays, n_entities, prefix: str = "latent_prior"):
    """The latent prior a model file names (written by :func:`write_latent_prior`; None: N(0, I))."""
    if spec is None or spec.get("name") == StandardNormalPrior.name:
        return None
    if spec.get("name") != GraphLaplacianPrior.name:
        raise ValueError(f"unknown latent prior {spec.get('name')!r}")
    row, col = arrays[f"{prefix}/row"].astype(np.int64), arrays[f"{prefix}/col"].astype(np.int64)
    laplacian = sp.coo_matrix((arrays[f"{prefix}/data"], (row, col)), shape=(n_entities, n_entities))
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
    if meta["class"] not in MODEL_CLASSES:
        raise ValueError(f"{path}: unknown model class {meta['class']!r}")
    cls, _, read = MODEL_CLASSES[meta["class"]]
    meta["params"] = dict(meta["params"], dtype=resolve_dtype(meta["params"]["dtype"]))
    return read(cls, meta, arrays, device)


def read_collapsed(cls, meta, arrays, device):
    """A fitted collapsed model of class ``cls`` from the metadata and arrays of :func:`write_collapsed`."""
    params = dict(meta["params"])
    dtype = params["dtype"]
    model = cls(**params)
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
        latent_prior=read_latent_prior(meta.get("latent_prior"), arrays, int(state["q_mean"].shape[0])))
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
