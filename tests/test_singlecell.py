"""bayesalign.singlecell: views from AnnData / MuData built in memory, and the alignment written back."""

import sys

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

anndata = pytest.importorskip("anndata")
# MuData's notice that a future version changes what .update() pulls: about mudata, not these tests
pytestmark = pytest.mark.filterwarnings("ignore:From 0.4 .update:FutureWarning")

from bayesalign import singlecell  # noqa: E402
from bayesalign.registry import run_method  # noqa: E402


def curve_cells(n=60, seed=0):
    """Two modalities of one latent curve: RNA-like sparse counts and an ATAC-like dense matrix; the
    ATAC cells are the RNA cells in another order (and under the same names), with cell types."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, 2 * np.pi, n))
    latent = np.c_[np.cos(t), np.sin(t), 0.5 * np.sin(2 * t)]  # [n, 3]
    rna = np.maximum(latent @ rng.normal(size=(3, 20)) + 0.05 * rng.normal(size=(n, 20)), 0.0)
    rna[rna < 0.3] = 0.0  # sparse, as counts are
    atac = latent @ rng.normal(size=(3, 8)) + 0.05 * rng.normal(size=(n, 8))
    names = np.array([f"cell{i}" for i in range(n)])
    cell_type = np.where(t < np.pi, "T", "B")
    order = rng.permutation(n)  # row k of atac is cell order[k]
    a = anndata.AnnData(sp.csr_matrix(rna), obs=pd.DataFrame({"cell_type": pd.Categorical(cell_type)}, index=names))
    a.layers["dense"] = rna.copy()
    a.obsm["X_pca"] = rna @ np.linalg.svd(rna - rna.mean(0), full_matrices=False)[2][:4].T
    b = anndata.AnnData(atac[order], obs=pd.DataFrame({"cell_type": cell_type[order]}, index=names[order]))
    a.var_names = [f"gene{j}" for j in range(a.n_vars)]
    b.var_names = [f"peak{j}" for j in range(b.n_vars)]
    return a, b, order


def split(adatas, n_anchors=15):
    """The first ``n_anchors`` cells paired by name as anchors, all of them as the truth."""
    pairs = singlecell.pairs_by_obs_names(adatas)[0]
    return {"anchors": pairs.subset(np.arange(n_anchors)), "truth": pairs}


def test_views_from_x_layer_and_obsm_without_touching_the_anndata():
    a, _, _ = curve_cells()
    before = a.X.copy()
    X = singlecell.view_from_anndata(a, name="rna")
    np.testing.assert_array_equal(X, a.X.toarray())
    np.testing.assert_array_equal(singlecell.view_from_anndata(a, layer="dense"), a.layers["dense"])
    np.testing.assert_array_equal(singlecell.view_from_anndata(a, obsm="X_pca"), a.obsm["X_pca"])
    X[0, 0] = 1e6
    assert (a.X != before).nnz == 0  # the returned matrix is a copy
    with pytest.raises(ValueError, match=r"view 'rna': .*sparse 60 x 20.*obsm='X_pca'"):
        singlecell.view_from_anndata(a, name="rna", max_dense_bytes=60 * 20 * 8 - 1)
    with pytest.raises(ValueError, match=r"view 'rna': no .layers\['counts'\]"):
        singlecell.view_from_anndata(a, layer="counts", name="rna")
    with pytest.raises(ValueError, match=r"no .obsm\['X_umap'\]; it has \['X_pca'\]"):
        singlecell.view_from_anndata(a, obsm="X_umap")


def test_problem_from_anndata_pairs_cells_by_name_and_reads_labels():
    a, b, order = curve_cells()
    problem = singlecell.problem_from_anndata({"rna": a, "atac": b}, obsm={"rna": "X_pca"}, labels="cell_type",
                                              truth="obs_names")
    assert problem.views.n_features == {"rna": 4, "atac": 8}
    truth = problem.truth_between("rna", "atac")
    # cell i of rna is row k of atac where order[k] == i
    np.testing.assert_array_equal(order[truth.index_b], truth.index_a)
    assert len(truth) == 60
    np.testing.assert_array_equal(problem.labels["atac"], b.obs["cell_type"].to_numpy())
    assert set(problem.labels["rna"]) == {"T", "B"}
    with pytest.raises(ValueError, match="view 'rna': no .obs column 'batch'"):
        singlecell.problem_from_anndata({"rna": a, "atac": b}, labels="batch")


def test_mudata_modalities_and_global_labels():
    mudata = pytest.importorskip("mudata")
    a, b, order = curve_cells()
    b = b[10:].copy()  # 50 of the 60 cells measured in the second modality
    del a.obs["cell_type"]
    mdata = mudata.MuData({"rna": a, "atac": b})
    mdata.obs["cell_type"] = np.where(np.isin(mdata.obs_names, a.obs_names[:30]), "early", "late")
    problem = singlecell.problem_from_mudata(mdata, anchors="obs_names", labels="cell_type")
    assert problem.views.names == ("rna", "atac")
    anchors = problem.anchors_between("rna", "atac")
    assert len(anchors) == 50
    np.testing.assert_array_equal(order[10:][anchors.index_b], anchors.index_a)
    np.testing.assert_array_equal(problem.labels["rna"], np.repeat(["early", "late"], 30))


def test_round_trip_through_h5ad(tmp_path):
    a, b, order = curve_cells()
    problem = singlecell.problem_from_anndata({"rna": a, "atac": b}, layer={"rna": "dense"},
                                              **split({"rna": a, "atac": b}))
    result = run_method("joint-laplacian", problem, seed=0, latent_dim=3)
    singlecell.write_alignment({"rna": a, "atac": b}, result)
    a.write_h5ad(tmp_path / "rna.h5ad")
    b.write_h5ad(tmp_path / "atac.h5ad")
    back = anndata.read_h5ad(tmp_path / "atac.h5ad")
    np.testing.assert_array_equal(back.obsm["X_bayesalign"], result.embedding.means["atac"])
    stored = back.uns["bayesalign"]
    alignment = result.alignments[("rna", "atac")]
    pairs = stored["pairs"]["rna|atac"]
    np.testing.assert_array_equal(pairs["index_a"], alignment.index_a)
    np.testing.assert_array_equal(pairs["obs_b"], b.obs_names[alignment.index_b])
    np.testing.assert_allclose(pairs["probability"], alignment.probabilities)
    assert stored["method"] == "joint-laplacian"
    # the files read back give the same problem
    again = singlecell.problem_from_anndata({"rna": tmp_path / "rna.h5ad", "atac": tmp_path / "atac.h5ad"},
                                            layer={"rna": "dense"}, truth="obs_names")
    np.testing.assert_array_equal(again.views["rna"], problem.views["rna"])
    np.testing.assert_array_equal(again.truth_between("rna", "atac").index_b, order.argsort())


def test_round_trip_through_h5mu(tmp_path):
    mudata = pytest.importorskip("mudata")
    a, b, _ = curve_cells()
    mdata = mudata.MuData({"rna": a, "atac": b})
    problem = singlecell.problem_from_mudata(mdata, layer={"rna": "dense"}, **split(mdata.mod))
    result = run_method("joint-laplacian", problem, seed=0, latent_dim=3)
    singlecell.write_alignment(mdata, result)
    mdata.write_h5mu(tmp_path / "cells.h5mu")
    back = mudata.read_h5mu(tmp_path / "cells.h5mu")
    np.testing.assert_array_equal(back.mod["rna"].obsm["X_bayesalign"], result.embedding.means["rna"])
    np.testing.assert_array_equal(back.uns["bayesalign"]["pairs"]["rna|atac"]["index_b"],
                                  result.alignments[("rna", "atac")].index_b)


def test_write_alignment_refuses_an_embedding_of_other_cells():
    a, b, _ = curve_cells()
    from bayesalign.data import LatentEmbedding

    emb = LatentEmbedding({"rna": np.zeros((5, 2)), "atac": np.zeros((60, 2))})
    from bayesalign.data import Alignment

    with pytest.raises(ValueError, match="view 'rna': the embedding has 5 rows, the AnnData 60 cells"):
        singlecell.write_alignment({"rna": a, "atac": b}, Alignment(("rna", "atac"), [0], [0]), emb)


def test_reading_a_file_without_anndata_says_how_to_install(monkeypatch, tmp_path):
    (tmp_path / "x.h5ad").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "anndata", None)  # import anndata now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'bayesalign\[singlecell\]'"):
        singlecell.problem_from_anndata({"a": tmp_path / "x.h5ad", "b": tmp_path / "x.h5ad"})
