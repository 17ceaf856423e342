"""Single-cell data: alignment problems from AnnData / MuData, and the alignment written back.

Single-cell multi-omics (RNA, ATAC, methylation, protein) lives in AnnData objects (one
modality: cells x features, with ``.X``, ``.layers``, ``.obsm``, ``.obs``) and MuData objects (one
AnnData per modality, ``.mod``). Here each modality is a view; a view's matrix is ``.X``, a layer
(``layer="counts"``) or a low-dimensional representation in ``.obsm`` (``obsm="X_pca"``). Rows
that carry the same cell name (``obs_names``) in two modalities can serve as anchors or as the
truth (paired assays such as 10x Multiome). After a fit, :func:`write_alignment` stores the
latent coordinates in ``.obsm["X_bayesalign"]`` and the matched pairs in ``.uns["bayesalign"]``,
both of which ``write_h5ad`` / ``write_h5mu`` save.

anndata and mudata are an optional extra (``pip install bayesalign[singlecell]``), imported
only when a function here runs.

Examples
--------
>>> import anndata, numpy as np  # doctest: +SKIP
>>> rna = anndata.AnnData(np.random.default_rng(0).poisson(2.0, (50, 30)).astype(float))  # doctest: +SKIP
>>> problem = problem_from_anndata({"rna": rna, "atac": atac}, anchors="obs_names")  # doctest: +SKIP
>>> result = bayesalign.registry.run_method("mad", problem)  # doctest: +SKIP
>>> write_alignment({"rna": rna, "atac": atac}, result)  # doctest: +SKIP
>>> rna.obsm["X_bayesalign"].shape  # doctest: +SKIP
(50, 5)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import numpy as np

from .data import AlignmentProblem, Correspondence, Views

__all__ = ["labels_from_obs", "pairs_by_obs_names", "problem_from_anndata", "problem_from_mudata",
           "view_from_anndata", "write_alignment"]

#: Largest dense view (bytes of float64) a sparse matrix is expanded to; above it, choose a
#: representation in ``.obsm`` (e.g. ``X_pca``) or raise ``max_dense_bytes``.
MAX_DENSE_BYTES = 2**31


def _require(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"reading single-cell data needs {module}: pip install 'bayesalign[singlecell]' "
                          f"(anndata and mudata)") from exc


def _option(value, view: str):
    """A per-view option given once for every view or as dict view -> value."""
    return value.get(view) if isinstance(value, Mapping) else value


# Reading ---------------------------------------------------------------------------------------
def _read(source, kind: str):
    """An AnnData (``kind="anndata"``) / MuData given as the object or the path of its .h5ad / .h5mu file."""
    from pathlib import Path

    if not isinstance(source, (str, Path)):
        return source
    if not Path(source).is_file():
        raise FileNotFoundError(f"no such file: {source}")
    if kind == "anndata":
        return _require("anndata").read_h5ad(source)
    return _require("mudata").read_h5mu(source)


def view_from_anndata(adata, layer: str | None = None, obsm: str | None = None, name: str = "view",
                      max_dense_bytes: int = MAX_DENSE_BYTES) -> np.ndarray:
    """The (cells x features) float64 matrix of one AnnData: ``.X``, ``.layers[layer]`` or ``.obsm[obsm]``.

    A sparse matrix is made dense (the methods need dense rows), after checking that the dense
    copy stays under ``max_dense_bytes``; a larger one raises a ValueError naming the view.
    The AnnData is not modified.
    """
    if layer is not None and obsm is not None:
        raise ValueError(f"view {name!r}: give layer or obsm, not both")
    if obsm is not None:
        if obsm not in adata.obsm:
            raise ValueError(f"view {name!r}: no .obsm[{obsm!r}]; it has {sorted(adata.obsm.keys())}")
        data, where = adata.obsm[obsm], f".obsm[{obsm!r}]"
    elif layer is not None:
        if layer not in adata.layers:
            raise ValueError(f"view {name!r}: no .layers[{layer!r}]; it has {sorted(adata.layers.keys())}")
        data, where = adata.layers[layer], f".layers[{layer!r}]"
    else:
        data, where = adata.X, ".X"
    if data is None:
        raise ValueError(f"view {name!r}: {where} is empty (None)")
    if hasattr(data, "to_numpy"):  # an .obsm DataFrame
        data = data.to_numpy()
    shape = tuple(data.shape)
    if len(shape) != 2:
        raise ValueError(f"view {name!r}: {where} must be 2-D (cells x features), got shape {shape}")
    if hasattr(data, "toarray"):  # scipy.sparse
        dense_bytes = shape[0] * shape[1] * 8
        if dense_bytes > max_dense_bytes:
            raise ValueError(f"view {name!r}: {where} is sparse {shape[0]} x {shape[1]}; dense it would take "
                             f"{dense_bytes / 2**30:.1f} GiB (> max_dense_bytes = {max_dense_bytes / 2**30:.1f} "
                             "GiB). Use a low-dimensional representation (obsm='X_pca', 'X_lsi') or a layer of "
                             "selected features, or raise max_dense_bytes")
        data = data.toarray()
    return np.array(data, dtype=np.float64, copy=True)


def labels_from_obs(adata, column: str, name: str = "view", obs=None) -> np.ndarray:
    """The ``.obs[column]`` of an AnnData as an array (one entry per cell).

    ``obs`` is a further table to look in when the AnnData has no such column (MuData's global
    ``.obs``, indexed by cell name).
    """
    if column in adata.obs:
        values = adata.obs[column]
    elif obs is not None and column in obs:
        values = obs[column].reindex(adata.obs_names)
    else:
        raise ValueError(f"view {name!r}: no .obs column {column!r}; it has {list(adata.obs.columns)}")
    values = np.asarray(values.astype(str) if values.dtype.name == "category" else values)
    return values


def pairs_by_obs_names(adatas: Mapping) -> list[Correspondence]:
    """Between every two views: the rows that carry the same cell name (``obs_names``).

    The pairing of a paired assay (a cell measured in both modalities); names must be unique
    within a view.
    """
    names = {}
    for view, adata in adatas.items():
        index = adata.obs_names
        if not index.is_unique:
            duplicated = index[index.duplicated()][:3].tolist()
            raise ValueError(f"view {view!r}: obs_names are not unique (e.g. {duplicated}); "
                             "call .obs_names_make_unique() or pass anchors yourself")
        names[view] = index
    views = list(adatas)
    out = []
    for i, a in enumerate(views):
        for b in views[i + 1:]:
            rows_b = names[b].get_indexer(names[a])  # [n_a], -1 where the cell is not in b
            found = np.flatnonzero(rows_b >= 0)
            if found.size:
                out.append(Correspondence((a, b), found, rows_b[found]))
    return out


def problem_from_anndata(adatas: Mapping, layer=None, obsm=None, labels: str | None = None, anchors=None,
                         truth=None, name: str = "", max_dense_bytes: int = MAX_DENSE_BYTES,
                         _global_obs=None) -> AlignmentProblem:
    """An AlignmentProblem whose views are AnnData objects (dict view name -> AnnData, 2 or more).

    Parameters
    ----------
    adatas : dict view name -> AnnData, or the path of its .h5ad file
    layer, obsm : str or dict view -> str, optional
        Which matrix of each AnnData is its view (default ``.X``; see :func:`view_from_anndata`).
    labels : str, optional
        An ``.obs`` column with class labels (e.g. cell types), for metrics and figures.
    anchors, truth : "obs_names", Correspondence(s), optional
        Known pairs / the true pairing; ``"obs_names"``: cells with the same name in two views
        (:func:`pairs_by_obs_names`).
    max_dense_bytes : int
        Limit of a sparse matrix made dense.
    """
    if not isinstance(adatas, Mapping) or len(adatas) < 2:
        raise ValueError("problem_from_anndata needs a dict of 2 or more views: name -> AnnData")
    adatas = {view: _read(adata, "anndata") for view, adata in adatas.items()}
    views = Views({view: view_from_anndata(adata, _option(layer, view), _option(obsm, view), view, max_dense_bytes)
                   for view, adata in adatas.items()})
    by_name = None

    def pairing(value, what):
        nonlocal by_name
        if isinstance(value, str):
            if value != "obs_names":
                raise ValueError(f"{what} must be 'obs_names' or Correspondence(s), got {value!r}")
            by_name = pairs_by_obs_names(adatas) if by_name is None else by_name
            if not by_name:
                raise ValueError(f"{what}='obs_names': no cell name is shared by any two views")
            return by_name
        return value

    label_arrays = None
    if labels is not None:
        label_arrays = {view: labels_from_obs(adata, labels, view, _global_obs) for view, adata in adatas.items()}
    return AlignmentProblem(views, anchors=pairing(anchors, "anchors"), truth=pairing(truth, "truth"),
                            labels=label_arrays, name=name)


def problem_from_mudata(mdata, modalities=None, layer=None, obsm=None, labels: str | None = None, anchors=None,
                        truth=None, max_dense_bytes: int = MAX_DENSE_BYTES) -> AlignmentProblem:
    """An AlignmentProblem whose views are the modalities of a MuData (``.mod``; default all of them).

    ``mdata`` is a MuData or the path of a .h5mu file.

    Options as :func:`problem_from_anndata`; ``labels`` is looked up in each modality's ``.obs``,
    then in the MuData's global ``.obs``.
    """
    mdata = _read(mdata, "mudata")
    modalities = list(mdata.mod) if modalities is None else list(modalities)
    unknown = [m for m in modalities if m not in mdata.mod]
    if unknown:
        raise ValueError(f"modalities {unknown} are not in the MuData; it has {list(mdata.mod)}")
    return problem_from_anndata({m: mdata.mod[m] for m in modalities}, layer=layer, obsm=obsm, labels=labels,
                                anchors=anchors, truth=truth, max_dense_bytes=max_dense_bytes,
                                _global_obs=mdata.obs)


# Writing back ----------------------------------------------------------------------------------
def write_alignment(data, alignments, embedding=None, key: str = "bayesalign") -> None:
    """Store an alignment and its latent space in the AnnData / MuData objects it came from.

    For each view v: ``.obsm["X_" + key]`` the latent means of its cells (n_v x d) and, for a
    Bayesian method, ``.obsm["X_" + key + "_var"]`` their variances. The pairs go to ``.uns[key]``
    (of every view's AnnData, and of the MuData): ``method``, ``shared_dims`` and ``pairs``, a dict
    "a|b" -> {``index_a``, ``index_b`` (row positions), ``obs_a``, ``obs_b`` (cell names), ``cost``,
    ``probability`` (NaN where the matcher gives none)}. Everything is an array or a string, so
    ``write_h5ad`` / ``write_h5mu`` save it.

    Parameters
    ----------
    data : dict view -> AnnData, or MuData (its modalities are the views)
    alignments : MethodResult (its alignments and embedding), Alignment, or dict (a, b) -> Alignment
    embedding : LatentEmbedding, optional (default: the MethodResult's)
    key : str
    """
    from .data import Alignment

    if hasattr(alignments, "alignments"):  # a MethodResult
        embedding = alignments.embedding if embedding is None else embedding
        method, alignments = alignments.method, alignments.alignments
    else:
        method = ""
    if isinstance(alignments, Alignment):
        alignments = {tuple(alignments.views): alignments}
    adatas = dict(data.mod) if hasattr(data, "mod") else dict(data)
    for a, b in alignments:
        for view in (a, b):
            if view not in adatas:
                raise ValueError(f"the alignment names view {view!r}, which is not among {list(adatas)}")
    if embedding is not None:
        for view, means in embedding.means.items():
            if view not in adatas:
                continue
            if means.shape[0] != adatas[view].n_obs:
                raise ValueError(f"view {view!r}: the embedding has {means.shape[0]} rows, the AnnData "
                                 f"{adatas[view].n_obs} cells")
            adatas[view].obsm[f"X_{key}"] = np.array(means)
            if embedding.variances is not None and view in embedding.variances:
                adatas[view].obsm[f"X_{key}_var"] = np.array(embedding.variances[view])
    pairs = {}
    for (a, b), alignment in alignments.items():
        method = method or alignment.method
        probability = (np.full(len(alignment), np.nan) if alignment.probabilities is None
                       else np.array(alignment.probabilities))
        pairs[f"{a}|{b}"] = {
            "index_a": np.array(alignment.index_a), "index_b": np.array(alignment.index_b),
            "obs_a": np.asarray(adatas[a].obs_names[alignment.index_a], dtype=str),
            "obs_b": np.asarray(adatas[b].obs_names[alignment.index_b], dtype=str),
            "cost": np.array(alignment.costs), "probability": probability}
    record = {"method": method or "", "pairs": pairs,
              "shared_dims": np.array([] if embedding is None else embedding.shared_dims, dtype=np.int64)}
    for adata in list(adatas.values()) + ([data] if hasattr(data, "mod") else []):
        adata.uns[key] = copy.deepcopy(record)
