"""Save and load a fitted MAD: one ``.npz`` file of plain arrays plus JSON metadata, no pickle.

The file holds what :meth:`bayesalign.MAD.align` and the streaming matcher need: the problem it
was fitted on (views, anchors, truth, labels), the training groups, the posteriors of the rows
being aligned, the shared dimensions, the discovered pairs, and the collapsed MRD itself (its own
model file, :func:`bayesalign.gp.model_file.save_model`, stored as bytes). Loading reads arrays with
``allow_pickle=False`` and builds objects from a fixed list of types, so a file cannot make the
loader run code.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from ._utils import atomic_write
from .data import AlignmentProblem, Correspondence, LatentEmbedding, Views

__all__ = ["MADFileError", "load_ensemble", "load_mad", "save_ensemble", "save_mad"]

FORMAT = "bayesalign.mad"
FORMAT_VERSION = 1
#: A MADEnsemble's file: its parameters as JSON and each member's MAD file kept whole inside it.
ENSEMBLE_FORMAT = "bayesalign.mad_ensemble"
#: MAD's fitted attributes saved as JSON (their values are JSON types or converted by _jsonable)
_PLAIN = ("shared_threshold_", "shared_by_", "converged_", "switched_off_views_", "timings_",
          "self_training_history_", "latent_prior_", "correspondence_history_", "correspondence_rounds_", "starts_",
          "start_")


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


def save_mad(model, path) -> None:
    """Write a fitted :class:`~bayesalign.MAD` to ``path`` (an ``.npz`` file, written atomically)."""
    from .gp.model_file import save_model

    model._check_fitted()
    if model.engine != "collapsed":
        raise ValueError("only MAD fitted with the collapsed engine can be saved (engine='collapsed')")
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
    with tempfile.TemporaryDirectory() as folder:  # the MRD's own file, kept whole inside this one
        inner = Path(folder) / "mrd.npz"
        save_model(model.model_, inner)
        arrays["mrd"] = np.frombuffer(inner.read_bytes(), dtype=np.uint8)
    if model.entities_ is not None:
        for i, name in enumerate(names):
            arrays[f"entities/{i}"] = model.entities_[1][name]
    edges = getattr(model, "_prior_edges", None)  # the kept correspondence round's edges of the graph prior
    if edges is not None:
        edges = edges.tocoo()
        arrays["prior_edges/row"], arrays["prior_edges/col"] = edges.row, edges.col
        arrays["prior_edges/data"] = edges.data
    meta = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "params": _json_params(params), "view_names": names,
        "problem_name": problem.name, "anchors": _correspondences("anchors", problem.anchors, arrays),
        "truth": _correspondences("truth", problem.truth, arrays),
        "shared_dims": [[a, b, np.asarray(d).tolist()] for (a, b), d in model.shared_dims_.items()],
        "relevance": {k: np.asarray(v).tolist() for k, v in model.relevance_.items()},
        "resolution": (None if getattr(model, "resolution_", None) is None
                       else {k: np.asarray(v).tolist() for k, v in model.resolution_.items()}),
        "discovered": discovered, "bootstrap": _jsonable(model.bootstrap_),
        "n_entities": None if model.entities_ is None else int(model.entities_[0]),
        "plain": {key: _jsonable(getattr(model, key, None)) for key in _PLAIN},
        "embedding_shared_dims": np.asarray(model.embedding_.shared_dims).tolist(),
    }
    arrays["meta"] = np.array(json.dumps(meta))
    with atomic_write(Path(path), "wb") as handle:
        np.savez(handle, **arrays)


def load_mad(path, device=None):
    """Read a MAD written by :func:`save_mad` (``MAD.save``); raises :class:`MADFileError` naming the file."""
    return _load(_read, path, device, "MAD")


def _load(reader, path, device, kind: str):
    """``reader(path, device)``, any failure to read the file raised as a :class:`MADFileError` naming it."""
    import zipfile

    try:
        return reader(path, device)
    except (FileNotFoundError, MADFileError):
        raise
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, IndexError, RuntimeError, TypeError, ValueError) as exc:
        raise MADFileError(f"{path}: not a readable bayesalign {kind} file ({type(exc).__name__}: "
                           f"{' '.join(str(exc).split())[:200]})") from exc


def _arrays_and_meta(path, fmt: str, kind: str) -> tuple[dict, dict]:
    """The arrays of a file (never unpickled) and its JSON metadata, checked to be of format ``fmt``."""
    with np.load(Path(path), allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    meta = json.loads(str(arrays.pop("meta")))
    if meta.get("format") != fmt or meta.get("format_version") != FORMAT_VERSION:
        raise MADFileError(f"{path}: not a bayesalign {kind} file (format {meta.get('format')!r} "
                           f"version {meta.get('format_version')!r})")
    return arrays, meta


def _read(path, device):
    from .gp.model_file import load_model
    from .mad import MAD

    arrays, meta = _arrays_and_meta(path, FORMAT, "MAD")
    names = list(meta["view_names"])
    labels = {name: arrays[f"labels/{i}"] for i, name in enumerate(names) if f"labels/{i}" in arrays}
    problem = AlignmentProblem(Views({name: arrays[f"views/{i}"] for i, name in enumerate(names)}),
                               anchors=_read_correspondences("anchors", meta["anchors"], arrays),
                               truth=_read_correspondences("truth", meta["truth"], arrays),
                               labels=labels or None, name=meta["problem_name"])
    model = MAD(**meta["params"])
    if "misfit" not in meta["params"]:  # a file from before the cross-view misfit: the likelihood cost had none
        model.misfit = None
    if "correspondence_rounds" not in meta["params"]:  # a file from before the rounds: there were none
        model.correspondence_rounds = 0
    model.problem_ = problem
    with tempfile.TemporaryDirectory() as folder:
        inner = Path(folder) / "mrd.npz"
        inner.write_bytes(arrays["mrd"].tobytes())
        model.model_ = load_model(inner, device=device)
    model.anchors_ = arrays["anchors_"]
    model.posteriors_ = {name: (arrays[f"posteriors/{i}/rows"], arrays[f"posteriors/{i}/mean"],
                                arrays[f"posteriors/{i}/var"]) for i, name in enumerate(names)}
    model.relevance_ = {k: np.asarray(v) for k, v in meta["relevance"].items()}
    resolution = meta.get("resolution")  # absent from files written before shared_by existed
    model.resolution_ = None if resolution is None else {k: np.asarray(v) for k, v in resolution.items()}
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
    if "prior_edges/row" in arrays:  # absent from files of fits that kept no round, or written before 2026-11-27
        import scipy.sparse as sp

        n = int(meta["n_entities"])
        model._prior_edges = sp.csr_matrix((arrays["prior_edges/data"], (arrays["prior_edges/row"],
                                                                         arrays["prior_edges/col"])), shape=(n, n))
    else:
        model._prior_edges = None
    model.correspondence_history_ = []  # files written before it existed
    rounds = model.correspondence_rounds  # files written before "auto": the number asked for
    model.correspondence_rounds_ = 0 if rounds == "auto" else int(rounds)
    for key, value in meta["plain"].items():
        setattr(model, key, value)
    if getattr(model, "shared_by_", None) is None:  # a file from before shared_by: relevance was the only rule
        model.shared_by_ = "relevance"
    model._fit_prior = getattr(model, "latent_prior_", model.latent_prior)  # a refit keeps the fit's own prior
    model.embedding_ = LatentEmbedding({n: arrays[f"embedding/{i}/mean"] for i, n in enumerate(names)},
                                       {n: arrays[f"embedding/{i}/var"] for i, n in enumerate(names)},
                                       shared_dims=np.asarray(meta["embedding_shared_dims"], dtype=np.int64),
                                       method="mad")
    model._stream = {}
    model._forget_derived()
    return model


def save_ensemble(ensemble, path) -> None:
    """Write a fitted :class:`~bayesalign.MADEnsemble` to ``path`` (an ``.npz`` file, written atomically): its
    parameters and each member's own MAD file (:func:`save_mad`), kept whole inside it."""
    from .ensemble import SCALINGS

    ensemble._check_fitted()
    params = ensemble.get_params(deep=False)
    params["estimators"] = None  # the members are stored whole, below
    # described as from_fitted describes its members: they are loaded whole (each with its own settings, starts
    # and options), so the options that make the default members would only contradict them
    params["latent_dims"] = [int(member.latent_dim) for member in ensemble.estimators_]
    params["start_members"], params["member_options"], params["scalings"] = [], None, list(SCALINGS)
    arrays = {}
    with tempfile.TemporaryDirectory() as folder:
        for k, member in enumerate(ensemble.estimators_):
            inner = Path(folder) / f"member{k}.npz"
            save_mad(member, inner)
            arrays[f"members/{k}"] = np.frombuffer(inner.read_bytes(), dtype=np.uint8)
    meta = {"format": ENSEMBLE_FORMAT, "format_version": FORMAT_VERSION, "params": _json_params(params),
            "n_members": len(ensemble.estimators_), "timings": _jsonable(getattr(ensemble, "timings_", {})),
            "members_left_out": _jsonable(getattr(ensemble, "members_left_out_", [])),
            "self_training_history": _jsonable(getattr(ensemble, "self_training_history_", []))}
    arrays["meta"] = np.array(json.dumps(meta))
    with atomic_write(Path(path), "wb") as handle:
        np.savez(handle, **arrays)


def load_ensemble(path, device=None):
    """Read a MADEnsemble written by :func:`save_ensemble` (``MADEnsemble.save``); raises :class:`MADFileError`
    naming the file."""
    return _load(_read_ensemble, path, device, "MADEnsemble")


def _read_ensemble(path, device):
    from sklearn.base import clone

    from .ensemble import SCALINGS, MADEnsemble

    arrays, meta = _arrays_and_meta(path, ENSEMBLE_FORMAT, "MADEnsemble")
    members = []
    with tempfile.TemporaryDirectory() as folder:
        for k in range(int(meta["n_members"])):
            inner = Path(folder) / f"member{k}.npz"
            inner.write_bytes(arrays[f"members/{k}"].tobytes())
            members.append(_read(inner, device))
    # estimators: unfitted copies of the members' settings (the file stores the members whole, not the list)
    # (files of the twenty-second session say scalings ["centred"], the default then: the members hold theirs)
    params = {**meta["params"], "scalings": SCALINGS, "estimators": [clone(member) for member in members]}
    ensemble = MADEnsemble(**params)
    ensemble._pool(members, members[0].problem_)
    ensemble.timings_ = meta["timings"]
    ensemble.members_left_out_ = meta.get("members_left_out", [])  # files of the twenty-first session have none
    ensemble.self_training_history_ = meta.get("self_training_history", [])  # none before the twenty-seventh
    return ensemble
