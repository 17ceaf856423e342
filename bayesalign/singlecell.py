"""Single-cell data: fit any bayesalign estimator on AnnData / MuData, and write the alignment back.

Single-cell multi-omics (RNA, ATAC, methylation, protein) lives in AnnData objects (one
modality: cells x features, with ``.X``, ``.layers``, ``.obsm``, ``.obs``) and MuData objects (one
AnnData per modality, ``.mod``). Here each modality is a view; a view's matrix is ``.X``, a layer
(``layer="counts"``) or a low-dimensional representation in ``.obsm`` (``obsm="X_pca"``). Anchors
are the cells that carry the same name (``obs_names``, as in a paired assay such as 10x Multiome)
or the same value of an ``.obs`` column in two modalities.

:class:`CellAligner` is the entry point: it wraps any estimator with ``fit(problem)`` and
``embedding_`` (``bayesalign.MAD``, a spectral baseline), fits it on the modalities and matches
every pair of them (the estimator's own ``align`` where it has one, else
:func:`bayesalign.matching.match` on its embedding). :meth:`CellAligner.write` stores, as scGLUE and
scanpy do, per modality ``.obsm["X_bayesalign"]`` (and ``"X_bayesalign_var"`` for a Bayesian method)
and ``.obs`` columns ``bayesalign_partner_<other>`` / ``bayesalign_probability_<other>``; on a MuData
also the joint ``.obsm["X_bayesalign"]`` and one ``.uns["bayesalign"]`` record. :func:`transfer_labels`
carries an ``.obs`` column across the stored pairs. Everything written is arrays and strings, so
``write_h5ad`` / ``write_h5mu`` save it and reading it back runs no code.

anndata and mudata are an optional extra (``pip install bayesalign[singlecell]``), imported
only when a function here runs.

Examples
--------
>>> import bayesalign as ba  # doctest: +SKIP
>>> mdata = mudata.MuData({"rna": rna, "atac": atac})  # doctest: +SKIP
>>> aligner = CellAligner(ba.spectral.JointLaplacianAlignment(n_components=5), obsm="X_pca")  # doctest: +SKIP
>>> aligner.fit(mdata).write(mdata)  # doctest: +SKIP
>>> transfer_labels(mdata, "cell_type", source="rna", target="atac")  # doctest: +SKIP
>>> mdata.mod["atac"].obs[["cell_type_from_rna", "cell_type_from_rna_confidence"]]  # doctest: +SKIP
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError

from .data import AlignmentProblem, Correspondence, Views

__all__ = ["CellAligner", "labels_from_obs", "pairs_by_obs_column", "pairs_by_obs_names", "problem_from_anndata",
           "problem_from_mudata", "transfer_labels", "view_from_anndata"]

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


def _modalities(data, modalities=None) -> dict:
    """view name -> AnnData of a MuData (its ``.mod``) or of a dict of AnnData, restricted to ``modalities``."""
    adatas = dict(data.mod) if hasattr(data, "mod") else dict(data) if isinstance(data, Mapping) else None
    if adatas is None:
        raise TypeError(f"expected a MuData or a dict modality name -> AnnData, got {type(data).__name__}")
    if modalities is not None:
        unknown = [m for m in modalities if m not in adatas]
        if unknown:
            raise ValueError(f"modalities {unknown} are not in the data; it has {list(adatas)}")
        adatas = {m: adatas[m] for m in modalities}
    if len(adatas) < 2:
        raise ValueError(f"aligning needs 2 or more modalities, got {list(adatas)}")
    return adatas


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
    """The ``.obs[column]`` of an AnnData as an array (one entry per cell): a categorical column's values as
    strings, a missing one as None (an unlabelled cell).

    ``obs`` is a further table to look in when the AnnData has no such column (MuData's global
    ``.obs``, indexed by cell name).
    """
    if column in adata.obs:
        values = adata.obs[column]
    elif obs is not None and column in obs:
        values = obs[column].reindex(adata.obs_names)
    else:
        raise ValueError(f"view {name!r}: no .obs column {column!r}; it has {list(adata.obs.columns)}")
    if values.dtype.name != "category":
        return np.asarray(values)
    present = values.notna().to_numpy()
    out = np.full(len(values), None, dtype=object)  # a missing category is no label (None), not the string "nan"
    out[present] = values[present].astype(str).to_numpy()
    return out


def _pairs_by_keys(keys: Mapping) -> list[Correspondence]:
    """Between every two views: the rows whose keys (dict view -> pandas Index, unique, NaN for none) are equal."""
    views = list(keys)
    out = []
    for i, a in enumerate(views):
        for b in views[i + 1:]:
            present_b = np.flatnonzero(~keys[b].isna())  # rows of b with a key
            hits = keys[b][present_b].get_indexer(keys[a])  # [n_a], -1 where the key is not in b
            found = np.flatnonzero((hits >= 0) & ~keys[a].isna())
            if found.size:
                out.append(Correspondence((a, b), found, present_b[hits[found]]))
    return out


def _unique_keys(index, view: str, what: str, fix: str):
    present = index[~index.isna()]
    if not present.is_unique:
        duplicated = present[present.duplicated()][:3].tolist()
        raise ValueError(f"view {view!r}: {what} are not unique (e.g. {duplicated}); {fix}")
    return index


def pairs_by_obs_names(adatas: Mapping) -> list[Correspondence]:
    """Between every two views: the rows that carry the same cell name (``obs_names``).

    The pairing of a paired assay (a cell measured in both modalities); names must be unique
    within a view.
    """
    return _pairs_by_keys({view: _unique_keys(adata.obs_names, view, "obs_names",
                                              "call .obs_names_make_unique() or pass anchors yourself")
                           for view, adata in adatas.items()})


def pairs_by_obs_column(adatas: Mapping, column: str) -> list[Correspondence]:
    """Between every two views: the rows with the same value of ``.obs[column]`` (a shared barcode,
    a cell identifier); a missing value (NaN) pairs with nothing. Values must be unique within a view."""
    import pandas as pd

    keys = {}
    for view, adata in adatas.items():
        if column not in adata.obs:
            raise ValueError(f"view {view!r}: no .obs column {column!r} to pair cells by; "
                             f"it has {list(adata.obs.columns)}")
        values = adata.obs[column]
        keys[view] = _unique_keys(pd.Index(values.astype(object).where(values.notna(), np.nan)), view,
                                  f".obs[{column!r}] values", "pair cells by a column that names each cell once")
    return _pairs_by_keys(keys)


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
        An ``.obs`` column with class labels (e.g. cell types), for label transfer, metrics and figures.
    anchors, truth : "obs_names", an ``.obs`` column name, Correspondence(s), optional
        Known pairs / the true pairing; ``"obs_names"``: cells with the same name in two views
        (:func:`pairs_by_obs_names`); a column name: cells with the same value in it
        (:func:`pairs_by_obs_column`).
    max_dense_bytes : int
        Limit of a sparse matrix made dense.
    """
    if not isinstance(adatas, Mapping) or len(adatas) < 2:
        raise ValueError("problem_from_anndata needs a dict of 2 or more views: name -> AnnData")
    adatas = {view: _read(adata, "anndata") for view, adata in adatas.items()}
    views = Views({view: view_from_anndata(adata, _option(layer, view), _option(obsm, view), view, max_dense_bytes)
                   for view, adata in adatas.items()})

    def pairing(value, what):
        if not isinstance(value, str):
            return value
        found = pairs_by_obs_names(adatas) if value == "obs_names" else pairs_by_obs_column(adatas, value)
        if not found:
            raise ValueError(f"{what}={value!r}: no {'cell name' if value == 'obs_names' else 'value'} is shared "
                             "by any two views")
        return found

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
    return problem_from_anndata(_modalities(mdata, modalities), layer=layer, obsm=obsm, labels=labels,
                                anchors=anchors, truth=truth, max_dense_bytes=max_dense_bytes,
                                _global_obs=mdata.obs)


# Fitting ---------------------------------------------------------------------------------------
class CellAligner(BaseEstimator):
    """Fit a bayesalign estimator on the modalities of a MuData (or a dict of AnnData) and match them.

    Parameters
    ----------
    estimator : estimator
        Anything with ``fit(problem)`` that sets ``embedding_`` (a LatentEmbedding), e.g.
        ``bayesalign.MAD(...)`` or a ``bayesalign.spectral`` baseline. It is cloned, never fitted in
        place. Where it has ``align(a, b, matcher=...)`` (MAD) that matches each pair of views;
        otherwise :func:`bayesalign.matching.match` matches them in ``embedding_``.
    modalities : list of str, optional
        The modalities that are the views, in order (default all).
    layer, obsm : str or dict modality -> str, optional
        The matrix of each modality (default ``.X``; see :func:`view_from_anndata`).
    anchors : "obs_names", str, Correspondence(s) or None
        Known pairs: the cells of the same name (default), the cells with the same value of the
        ``.obs`` column of that name, or pairs given as Correspondence objects.
    labels : str, optional
        An ``.obs`` column of class labels (of the modalities, or the MuData's global ``.obs``),
        kept in ``problem_.labels`` for the metrics and figures.
    matcher : str
        The matcher of every pair of views: "hungarian", "myopic", "sinkhorn" or "perturb".
    align_options : dict, optional
        Further keywords of the matching (``cost``, ``cost_limit``, ``temperature``, ...).
    key : str
        The name of what :meth:`write` stores.

    Attributes
    ----------
    estimator_ : the fitted clone of ``estimator``
    problem_ : AlignmentProblem
    embedding_ : LatentEmbedding
        ``estimator_.embedding_``: the latent coordinates of every cell of every view.
    alignments_ : dict (a, b) -> Alignment
        The matched pairs of the cells that are no anchors, for every pair of views.
    obs_names_ : dict view -> array of str
        The cells it was fitted on (what :meth:`write` checks).
    """

    def __init__(self, estimator, modalities=None, layer=None, obsm=None, anchors="obs_names", labels=None,
                 matcher: str = "hungarian", align_options: dict | None = None, key: str = "bayesalign"):
        self.estimator = estimator
        self.modalities = modalities
        self.layer = layer
        self.obsm = obsm
        self.anchors = anchors
        self.labels = labels
        self.matcher = matcher
        self.align_options = align_options
        self.key = key

    def fit(self, data):
        """Fit on a MuData or a dict modality name -> AnnData (not modified); returns self."""
        adatas = _modalities(data, self.modalities)
        self.problem_ = problem_from_anndata(adatas, self.layer, self.obsm, self.labels, self.anchors,
                                             _global_obs=data.obs if hasattr(data, "mod") else None)
        self.estimator_ = clone(self.estimator).fit(self.problem_)
        self.embedding_ = self.estimator_.embedding_
        options = dict(self.align_options or {})
        names = self.problem_.views.names
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
        if hasattr(self.estimator_, "align"):
            self.alignments_ = {(a, b): self.estimator_.align(a, b, matcher=self.matcher, **options) for a, b in pairs}
        else:
            from .matching import match

            self.alignments_ = {(a, b): match(self.embedding_, self.problem_, a, b, matcher=self.matcher, **options)
                                for a, b in pairs}
        self.obs_names_ = {view: np.asarray(adatas[view].obs_names, dtype=str) for view in names}
        return self

    def _check_fitted(self):
        if not hasattr(self, "alignments_"):
            raise NotFittedError("this CellAligner is not fitted yet; call fit(data) first")

    def pairs(self, a: str, b: str) -> dict:
        """Every pair of cells between views a and b, the anchors included: a dict of arrays ``index_a``,
        ``index_b`` (rows), ``obs_a``, ``obs_b`` (cell names), ``cost``, ``probability`` (NaN where the
        matcher gives none) and ``anchor``; an anchor has cost 0 and probability 1."""
        self._check_fitted()
        alignment = self.alignments_[(a, b)] if (a, b) in self.alignments_ else None
        if alignment is None:
            raise ValueError(f"no alignment between {a!r} and {b!r}; the pairs of views are {list(self.alignments_)}")
        anchors = self.problem_.anchors_between(a, b, implied=True)
        k = len(anchors)
        probability = np.full(len(alignment), np.nan) if alignment.probabilities is None else alignment.probabilities
        index_a = np.r_[anchors.index_a, alignment.index_a].astype(np.int64)
        index_b = np.r_[anchors.index_b, alignment.index_b].astype(np.int64)
        return {"index_a": index_a, "index_b": index_b,
                "obs_a": self.obs_names_[a][index_a], "obs_b": self.obs_names_[b][index_b],
                "cost": np.r_[np.zeros(k), alignment.costs], "probability": np.r_[np.ones(k), probability],
                "anchor": np.r_[np.ones(k, bool), np.zeros(len(alignment), bool)]}

    def record(self) -> dict:
        """The ``.uns[key]`` record: ``method``, ``parameters`` (the estimator's), ``version``, ``matcher``,
        ``align_options``, ``anchors``, ``views``, ``shared_dims`` and ``pairs`` ("a|b" -> :meth:`pairs`)."""
        self._check_fitted()
        from . import __version__

        return {"method": type(self.estimator_).__name__,
                "parameters": _storable(self.estimator_.get_params(deep=False)), "version": __version__,
                "matcher": self.matcher, "align_options": _storable(self.align_options or {}),
                "anchors": _storable(self.anchors if isinstance(self.anchors, str) or self.anchors is None
                                     else "given"),
                "views": np.array(self.problem_.views.names, dtype=str),
                "shared_dims": np.asarray(self.embedding_.shared_dims, dtype=np.int64),
                "pairs": {f"{a}|{b}": self.pairs(a, b) for a, b in self.alignments_}}

    def write(self, data) -> None:
        """Store the fit in ``data``, the MuData or dict of AnnData it was fitted on (in place).

        Per view v: ``.obsm["X_<key>"]`` the latent means of its cells (n_v x d), and for a
        Bayesian method ``.obsm["X_<key>_var"]`` their variances; for every other view w, ``.obs``
        columns ``<key>_partner_<w>`` (the name of the matched cell of w, missing where none) and
        ``<key>_probability_<w>`` (its match probability; 1 for an anchor). A MuData also gets the
        joint ``.obsm["X_<key>"]`` (n_obs x d: the mean of a cell's coordinates over the modalities
        that measure it, NaN for a cell in none of the views) and the one ``.uns[key]``
        (:meth:`record`); a dict of AnnData, having no common object, gets the record in each.
        """
        import pandas as pd

        self._check_fitted()
        adatas = _modalities(data, list(self.obs_names_))
        for view, adata in adatas.items():
            if not np.array_equal(np.asarray(adata.obs_names, dtype=str), self.obs_names_[view]):
                raise ValueError(f"view {view!r}: its cells are not the {self.obs_names_[view].size} cells "
                                 "this CellAligner was fitted on")
        key, embedding, record = self.key, self.embedding_, self.record()
        for view, adata in adatas.items():
            adata.obsm[f"X_{key}"] = np.array(embedding.means[view])
            if embedding.variances is not None and view in embedding.variances:
                adata.obsm[f"X_{key}_var"] = np.array(embedding.variances[view])
        for (a, b) in self.alignments_:
            pairs = record["pairs"][f"{a}|{b}"]
            for view, rows, other, partners in ((a, pairs["index_a"], b, pairs["obs_b"]),
                                                (b, pairs["index_b"], a, pairs["obs_a"])):
                # a cell in several pairs keeps its most probable one (an anchor first)
                order = np.argsort(-np.nan_to_num(pairs["probability"], nan=-1.0), kind="stable")
                rows_in_order, first = np.unique(rows[order], return_index=True)
                partner = np.full(adatas[view].n_obs, None, dtype=object)
                probability = np.full(adatas[view].n_obs, np.nan)
                partner[rows_in_order] = partners[order][first]
                probability[rows_in_order] = pairs["probability"][order][first]
                adatas[view].obs[f"{key}_partner_{other}"] = pd.Categorical(partner)
                adatas[view].obs[f"{key}_probability_{other}"] = probability
        if hasattr(data, "mod"):
            data.obsm[f"X_{key}"] = self._joint(data)
            data.uns[key] = record
        else:
            for adata in adatas.values():
                adata.uns[key] = copy.deepcopy(record)

    def _joint(self, mdata) -> np.ndarray:
        """(n_obs, d): per cell of the MuData, the mean of its coordinates over the views that measure it."""
        total = np.zeros((mdata.n_obs, self.embedding_.n_components))  # [n_obs, d]
        count = np.zeros(mdata.n_obs)
        for view, means in self.embedding_.means.items():
            rows = np.asarray(mdata.obsmap[view]).reshape(-1)  # [n_obs], 1-based row of the modality, 0: absent
            if rows.size != mdata.n_obs or rows.max() > means.shape[0]:
                raise ValueError(f"view {view!r}: the MuData's map of cells is out of date; call mdata.update()")
            present = rows > 0
            total[present] += means[rows[present] - 1]
            count[present] += 1
        with np.errstate(invalid="ignore"):  # a cell in no view: 0 / 0, NaN as documented
            return total / count[:, None]


def _storable(value):
    """``value`` as what .h5ad / .h5mu store (numbers, strings, numeric arrays, dicts of them); anything
    else (None, an estimator, a callable) as its repr."""
    if isinstance(value, Mapping):
        return {str(k): _storable(v) for k, v in value.items()}
    if isinstance(value, (bool, int, float, str, np.bool_, np.integer, np.floating)):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        array = np.asarray(value)
        if array.dtype.kind in "biuf":
            return array
        if array.dtype.kind in "US":
            return array.astype(str)
    return repr(value)


# Label transfer --------------------------------------------------------------------------------
def transfer_labels(data, column: str, source: str, target: str, key: str = "bayesalign"):
    """Carry ``.obs[column]`` of modality ``source`` to the cells of ``target`` across the stored pairs.

    Each cell of ``target`` takes the label of its partner in ``source`` (``.obs["<key>_partner_<source>"]``,
    written by :meth:`CellAligner.write`) and, as its confidence, the match probability of that pair
    (1 for an anchor, NaN where the matcher gives none); a cell without a partner gets a missing
    label and confidence 0. Writes ``target.obs["<column>_from_<source>"]`` (categorical) and
    ``["<column>_from_<source>_confidence"]``, and returns the two columns as a DataFrame.

    Parameters
    ----------
    data : MuData or dict modality -> AnnData (after :meth:`CellAligner.write`)
    column : str
        An ``.obs`` column of ``source`` (or of the MuData's global ``.obs``).
    source, target : str
        Modality names.
    key : str
        The ``key`` the alignment was written under.
    """
    import pandas as pd

    adatas = _modalities(data, [source, target])
    partner_column = f"{key}_partner_{source}"
    if partner_column not in adatas[target].obs:
        raise ValueError(f"view {target!r}: no .obs column {partner_column!r}; fit a CellAligner and write() it first")
    labels = pd.Series(labels_from_obs(adatas[source], column, source, getattr(data, "obs", None)),
                       index=adatas[source].obs_names)
    partner = adatas[target].obs[partner_column].astype(object)
    found = partner.notna().to_numpy()
    carried = np.full(adatas[target].n_obs, None, dtype=object)
    carried[found] = labels.reindex(partner[found]).to_numpy()
    confidence = np.where(found, adatas[target].obs[f"{key}_probability_{source}"].to_numpy(dtype=float), 0.0)
    out = pd.DataFrame({f"{column}_from_{source}": pd.Categorical(carried),
                        f"{column}_from_{source}_confidence": confidence}, index=adatas[target].obs_names)
    for name in out:
        adatas[target].obs[name] = out[name].to_numpy() if out[name].dtype.kind == "f" else out[name].array
    return out
