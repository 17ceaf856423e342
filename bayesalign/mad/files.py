"""Save and load a fitted MAD or MADEnsemble: one ``.npz`` file of plain arrays plus JSON metadata, no pickle.

The file holds what :meth:`bayesalign.MAD.align` and the streaming matcher need: the problem it
was fitted on (views, anchors, truth, labels, label prior), the training groups, the posteriors of the rows
being aligned, the shared dimensions, the discovered pairs, and the engine's model itself (MRD or StochasticMRD, its own
model file, :func:`bayesalign.gp.model_file.save_model`, stored as bytes). Loading reads arrays with
``allow_pickle=False`` and builds objects from a fixed list of types, so a file cannot make the
loader run code.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from .._utils import atomic_write
from ..data import AlignmentProblem, Correspondence, LabelPrior, LatentEmbedding, Views
from ..gp.model_file import load_model, save_model
from .ensemble import SCALINGS, MADEnsemble
from .estimator import MAD

__all__ = ["MADFileError", "load", "save"]

FORMAT = "bayesalign.mad"
#: The layout of the files written here; files of version 1 load too (their parameters translated, ``_params``).
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
#: A MADEnsemble's file: its parameters as JSON and each member's MAD file kept whole inside it.
ENSEMBLE_FORMAT = "bayesalign.mad_ensemble"
#: MAD's fitted attributes saved as JSON (their values are JSON types or converted by _jsonable)
_PLAIN = ("converged_", "switched_off_views_", "timings_", "self_training_history_", "latent_prior_",
          "correspondence_history_", "correspondence_rounds_", "starts_", "start_")
#: Version 1's parameters that version 2 fixes, with the only value it reads them at.
_FIXED_V1 = {"shared_threshold": 0.05, "infer_max_iter": 500, "n_neighbors": 10, "correspondence_rounds": "auto",
             "correspondence_neighbors": 5, "starts": None, "start_inducing": 30, "shared_by": "auto",
             "min_resolution": 1.0, "misfit": "auto", "calibration_pairs": "reinferred", "temperature": "anchors"}


class MADFileError(ValueError):
    """A MAD file that cannot be loaded (truncated, corrupt, another kind of file); the message names it."""


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":  # e.g. mrd_options' dtype
        return str(value).removeprefix("torch.")  # "float32": MRD reads the name back
    return value


def _json_params(params: dict) -> dict:
    """MAD's parameters as JSON values, or a TypeError naming the one that has none (e.g. an object in
    mrd_options): a file must load without running code, so objects are not pickled."""
    out = {}
    for name, value in params.items():
        out[name] = _jsonable(value)
        try:
            json.dumps(out[name])
        except TypeError as exc:
            raise TypeError(f"MAD.save: parameter {name}={value!r} has no JSON form ({exc}); the file stores "
                            f"parameters as JSON, never pickled objects") from None
    return out


def _correspondences(prefix, store, arrays) -> list:
    out = []
    for k, corr in enumerate(store.values()):
        arrays[f"{prefix}/{k}/index_a"], arrays[f"{prefix}/{k}/index_b"] = corr.index_a, corr.index_b
        if corr.weights is not None:
            arrays[f"{prefix}/{k}/weights"] = corr.weights
        out.append(list(corr.views))
    return out


def _read_correspondences(prefix, views_of, arrays) -> list[Correspondence]:
    return [Correspondence(tuple(v), arrays[f"{prefix}/{k}/index_a"], arrays[f"{prefix}/{k}/index_b"],
                           arrays.get(f"{prefix}/{k}/weights")) for k, v in enumerate(views_of)]


def save(model, path) -> None:
    """Write a fitted :class:`~bayesalign.MAD` or :class:`~bayesalign.MADEnsemble` to ``path`` (an ``.npz`` file,
    written atomically); :func:`load` reads it back and aligns exactly as before."""
    if isinstance(model, MADEnsemble):
        return _save_ensemble(model, path)
    if not isinstance(model, MAD):
        raise TypeError(f"save writes a MAD or a MADEnsemble, got {type(model).__name__}")
    model._check_fitted()
    params = model.get_params(deep=False)
    if not isinstance(params["kernel"], str):
        raise TypeError(f"only a MAD whose kernel was given by name can be saved; this one has "
                        f"{type(params['kernel']).__name__}")
    problem = model.problem_
    arrays: dict[str, np.ndarray] = {}
    names = list(problem.views.names)
    for i, name in enumerate(names):
        arrays[f"views/{i}"] = np.asarray(problem.views[name])
        rows, mean, var = model.posteriors_[name]
        arrays[f"posteriors/{i}/rows"], arrays[f"posteriors/{i}/mean"], arrays[f"posteriors/{i}/var"] = rows, mean, var
        arrays[f"embedding/{i}/mean"] = model.embedding_.means[name]
        arrays[f"embedding/{i}/var"] = model.embedding_.variance_of(name)
        if problem.labels and name in problem.labels:
            labels = np.asarray(problem.labels[name])  # numbers and booleans as they are, objects as unicode
            arrays[f"labels/{i}"] = labels.astype(str) if labels.dtype == object else labels
    arrays["anchors_"] = np.asarray(model.anchors_, dtype=np.int64)
    discovered = {}
    for k, ((a, b), found) in enumerate(model.discovered_.items()):
        discovered[k] = [a, b]
        for key, value in found.items():
            arrays[f"discovered/{k}/{key}"] = np.asarray(value)
    with tempfile.TemporaryDirectory() as folder:  # the engine model's own file, kept whole inside this one
        inner = Path(folder) / "mrd.npz"
        save_model(model.model_, inner)
        arrays["mrd"] = np.frombuffer(inner.read_bytes(), dtype=np.uint8)
    if model.entities_ is not None:
        for i, name in enumerate(names):
            arrays[f"entities/{i}"] = model.entities_[1][name]
    if model.prior_edges_ is not None:  # the kept correspondence round's edges of the graph prior
        edges = model.prior_edges_.tocoo()
        arrays["prior_edges/row"], arrays["prior_edges/col"], arrays["prior_edges/data"] = edges.row, edges.col, \
            edges.data
    meta = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "params": _json_params(params), "view_names": names,
        "problem_name": problem.name, "anchors": _correspondences("anchors", problem.anchors, arrays),
        "truth": _correspondences("truth", problem.truth, arrays),
        "shared_dims": [[a, b, np.asarray(d).tolist()] for (a, b), d in model.shared_dims_.items()],
        "relevance": {k: np.asarray(v).tolist() for k, v in model.relevance_.items()},
        "resolution": {k: np.asarray(v).tolist() for k, v in model.resolution_.items()},
        "discovered": discovered, "bootstrap": _jsonable(model.bootstrap_),
        "n_entities": None if model.entities_ is None else int(model.entities_[0]),
        "plain": {key: _jsonable(getattr(model, key, None)) for key in _PLAIN},
        "embedding_shared_dims": np.asarray(model.embedding_.shared_dims).tolist(),
    }
    if problem.label_prior is not None:  # the partner hints the matcher uses
        prior_arrays, meta["label_prior"] = problem.label_prior.to_arrays()
        arrays.update({f"label_prior/{key}": value for key, value in prior_arrays.items()})
    arrays["meta"] = np.array(json.dumps(meta))
    with atomic_write(Path(path), "wb") as handle:
        np.savez(handle, **arrays)


def load(path, device=None):
    """Read a MAD or a MADEnsemble written by :func:`save` (never unpickles); a file that cannot be read raises
    :class:`MADFileError` naming it."""
    import zipfile

    try:
        with np.load(Path(path), allow_pickle=False) as data:
            arrays = {key: data[key] for key in data.files}
        meta = json.loads(str(arrays.pop("meta")))
        if meta.get("format") not in (FORMAT, ENSEMBLE_FORMAT) or meta.get("format_version") not in READABLE_VERSIONS:
            raise MADFileError(f"{path}: not a bayesalign MAD file (format {meta.get('format')!r} "
                               f"version {meta.get('format_version')!r})")
        if meta["format"] == ENSEMBLE_FORMAT:
            return _read_ensemble(arrays, meta, device)
        return _read(arrays, meta, device)
    except FileNotFoundError:
        raise
    except MADFileError as exc:  # raised by the reader, which does not know the file's name
        if str(path) in str(exc):
            raise
        raise MADFileError(f"{path}: {exc}") from exc
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, IndexError, RuntimeError, TypeError, ValueError) as exc:
        raise MADFileError(f"{path}: not a readable bayesalign MAD file ({type(exc).__name__}: "
                           f"{' '.join(str(exc).split())[:200]})") from exc


def _params(meta) -> dict:
    """MAD's parameters from a file's metadata; version 1's translated (its two option dicts as ``engine_options``,
    the parameters version 2 fixes checked to hold the value it reads them at)."""
    params = dict(meta["params"])
    if meta["format_version"] == 2:
        return params
    engine = params.get("engine", "collapsed")
    options = params.pop("svi_options" if engine == "svi" else "mrd_options", None)
    params.pop("mrd_options" if engine == "svi" else "svi_options", None)
    prior = params.pop("latent_prior", "graph")
    if prior == "standard_normal":
        params["graph_strength"] = 0.0
    if "misfit" not in params:  # such a fit matched on the posterior variances alone
        raise MADFileError("the file was fitted without the cross-view misfit (its parameters have no misfit), a "
                           "setting MAD no longer has (it always uses 'auto'); fit the model again")
    for name, value in _FIXED_V1.items():
        if name in params and params.pop(name) != value:
            raise MADFileError(f"the file was fitted with {name}={meta['params'][name]!r}, a setting MAD no longer "
                               f"has (a version-1 file loads only at {value!r}); fit the model again")
    params["engine_options"] = options
    return params


def _check_finite(name: str, array: np.ndarray) -> np.ndarray:
    if not np.all(np.isfinite(array)):
        raise MADFileError(f"the file's {name} hold non-finite values")
    return array


def _read(arrays, meta, device):
    from ..gp.kernels import make_kernel

    names = list(meta["view_names"])
    labels = {name: arrays[f"labels/{i}"] for i, name in enumerate(names) if f"labels/{i}" in arrays}
    problem = AlignmentProblem(Views({name: arrays[f"views/{i}"] for i, name in enumerate(names)}),
                               anchors=_read_correspondences("anchors", meta["anchors"], arrays),
                               truth=_read_correspondences("truth", meta["truth"], arrays),
                               labels=labels or None, name=meta["problem_name"])
    if meta.get("label_prior") is not None:
        prior = {key[len("label_prior/"):]: value for key, value in arrays.items() if key.startswith("label_prior/")}
        problem = problem.replace(label_prior=LabelPrior.from_arrays(prior, meta["label_prior"]))
    params = _params(meta)
    kernel = params.get("kernel", "rbf")
    if not isinstance(kernel, str):
        raise MADFileError(f"the file's kernel {kernel!r} is not a kernel name")
    make_kernel(kernel, 1)  # an unknown name raises here, naming it
    model = MAD(**params)
    model.problem_ = problem
    with tempfile.TemporaryDirectory() as folder:
        inner = Path(folder) / "mrd.npz"
        inner.write_bytes(arrays["mrd"].tobytes())
        model.model_ = load_model(inner, device=device)
    model.anchors_ = arrays["anchors_"]
    model.posteriors_ = {name: (arrays[f"posteriors/{i}/rows"],
                                _check_finite(f"posterior means of view {name!r}", arrays[f"posteriors/{i}/mean"]),
                                _check_finite(f"posterior variances of view {name!r}", arrays[f"posteriors/{i}/var"]))
                         for i, name in enumerate(names)}
    model.relevance_ = {k: np.asarray(v) for k, v in meta["relevance"].items()}
    resolution = meta.get("resolution")
    model.resolution_ = model.model_.resolution_ if resolution is None else {k: np.asarray(v)
                                                                            for k, v in resolution.items()}
    model.shared_dims_ = {(a, b): np.asarray(d, dtype=np.int64) for a, b, d in meta["shared_dims"]}
    model.discovered_ = {}
    for k, (a, b) in meta["discovered"].items():
        prefix = f"discovered/{k}/"
        model.discovered_[(a, b)] = {key[len(prefix):]: value for key, value in arrays.items()
                                     if key.startswith(prefix)}
    model.bootstrap_ = meta["bootstrap"]
    if model.bootstrap_ is not None and "pairs" in model.bootstrap_:
        model.bootstrap_["pairs"] = np.asarray(model.bootstrap_["pairs"], dtype=np.int64)
    model.entities_ = None if meta["n_entities"] is None else (
        int(meta["n_entities"]), {name: arrays[f"entities/{i}"] for i, name in enumerate(names)})
    model.prior_edges_ = None
    if "prior_edges/row" in arrays:
        import scipy.sparse as sp

        n = int(meta["n_entities"])
        model.prior_edges_ = sp.csr_matrix((arrays["prior_edges/data"], (arrays["prior_edges/row"],
                                                                         arrays["prior_edges/col"])), shape=(n, n))
    model.correspondence_history_, model.correspondence_rounds_ = [], 0
    for key, value in meta["plain"].items():
        if key in _PLAIN:
            setattr(model, key, value)
    model.embedding_ = LatentEmbedding({n: arrays[f"embedding/{i}/mean"] for i, n in enumerate(names)},
                                       {n: arrays[f"embedding/{i}/var"] for i, n in enumerate(names)},
                                       shared_dims=np.asarray(meta["embedding_shared_dims"], dtype=np.int64),
                                       method="mad")
    model.misfit_, model.calibration_ = {}, {}
    model._calibration_potentials, model._anchor_cache, model._stream = {}, {}, {}
    return model


def _save_ensemble(ensemble, path) -> None:
    """An ensemble's file: its parameters and each member's own MAD file, kept whole inside it."""
    ensemble._check_fitted()
    params = ensemble.get_params(deep=False)
    params["estimators"] = None  # the members are stored whole, below
    params["latent_dims"] = [int(member.latent_dim) for member in ensemble.estimators_]
    params["member_options"], params["scalings"] = None, list(SCALINGS)
    arrays = {}
    with tempfile.TemporaryDirectory() as folder:
        for k, member in enumerate(ensemble.estimators_):
            inner = Path(folder) / f"member{k}.npz"
            save(member, inner)
            arrays[f"members/{k}"] = np.frombuffer(inner.read_bytes(), dtype=np.uint8)
    meta = {"format": ENSEMBLE_FORMAT, "format_version": FORMAT_VERSION, "params": _json_params(params),
            "n_members": len(ensemble.estimators_), "timings": _jsonable(getattr(ensemble, "timings_", {})),
            "self_training_history": _jsonable(getattr(ensemble, "self_training_history_", []))}
    arrays["meta"] = np.array(json.dumps(meta))
    with atomic_write(Path(path), "wb") as handle:
        np.savez(handle, **arrays)


def _read_ensemble(arrays, meta, device):
    from sklearn.base import clone

    members = []
    with tempfile.TemporaryDirectory() as folder:
        for k in range(int(meta["n_members"])):
            inner = Path(folder) / f"member{k}.npz"
            inner.write_bytes(arrays[f"members/{k}"].tobytes())
            members.append(load(inner, device))
    params = {key: value for key, value in meta["params"].items() if key != "start_members"}
    ensemble = MADEnsemble(**{**params, "scalings": SCALINGS, "estimators": [clone(m) for m in members]})
    ensemble._pool(members, members[0].problem_)
    ensemble.timings_ = meta["timings"]
    ensemble.self_training_history_ = meta.get("self_training_history", [])
    return ensemble
