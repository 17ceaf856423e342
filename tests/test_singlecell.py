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


def test_a_missing_category_is_an_unlabelled_cell_not_the_string_nan():
    a, b, _ = curve_cells()
    types = a.obs["cell_type"].copy()
    types[:5] = np.nan  # a categorical column with missing values, as scanpy leaves unannotated cells
    a.obs["cell_type"] = types
    labels = singlecell.labels_from_obs(a, "cell_type", "rna")
    assert list(labels[:5]) == [None] * 5 and set(labels[5:]) <= {"T", "B"}
    problem = singlecell.problem_from_anndata({"rna": a, "atac": b}, labels="cell_type", truth="obs_names")
    prior = problem.with_label_prior().label_prior
    assert "rna: 55/60" in repr(prior) and "atac: 60/60" in repr(prior)  # the five count as unlabelled


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


def test_reading_a_file_without_anndata_says_how_to_install(monkeypatch, tmp_path):
    (tmp_path / "x.h5ad").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "anndata", None)  # import anndata now raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'bayesalign\[singlecell\]'"):
        singlecell.problem_from_anndata({"a": tmp_path / "x.h5ad", "b": tmp_path / "x.h5ad"})


def unpaired_cells(n=60, n_anchors=15, seed=0):
    """``curve_cells`` as an unpaired experiment: only the first ``n_anchors`` cells keep one name in both
    modalities (the anchors); every other ATAC cell is named ``atac_<cell>``, so the truth is by name."""
    a, b, order = curve_cells(n, seed)
    shared = {f"cell{i}" for i in range(n_anchors)}
    b.obs_names = [name if name in shared else f"atac_{name}" for name in b.obs_names]
    return a, b


def true_partner(name: str) -> str:
    return name.removeprefix("atac_")


def test_pairs_by_an_obs_column_skip_missing_values_and_refuse_duplicates():
    a, b, order = curve_cells(n=8)
    a.obs["barcode"] = [f"bc{i}" for i in range(8)]
    b.obs["barcode"] = [f"bc{i}" if i % 2 else None for i in order]  # half the ATAC cells carry no barcode
    pairs = singlecell.pairs_by_obs_column({"rna": a, "atac": b}, "barcode")[0]
    assert len(pairs) == 4
    np.testing.assert_array_equal(order[pairs.index_b], pairs.index_a)  # the same cell on both sides
    assert np.all(pairs.index_a % 2 == 1)
    b.obs["barcode"] = ["bc1"] * 8
    with pytest.raises(ValueError, match=r"view 'atac': .obs\['barcode'\] values are not unique \(e.g. \['bc1'"):
        singlecell.pairs_by_obs_column({"rna": a, "atac": b}, "barcode")
    with pytest.raises(ValueError, match="view 'rna': no .obs column 'batch' to pair cells by"):
        singlecell.pairs_by_obs_column({"rna": a, "atac": b}, "batch")


def fitted_on_mudata(estimator, **options):
    mudata = pytest.importorskip("mudata")
    a, b = unpaired_cells()
    mdata = mudata.MuData({"rna": a, "atac": b})
    aligner = singlecell.CellAligner(estimator, layer={"rna": "dense"}, labels="cell_type", **options)
    return mdata, aligner.fit(mdata)


def check_written(back, aligner, n_anchors=15):
    """Every key CellAligner.write stores, read back from a file, against the fitted aligner."""
    import bayesalign

    emb = aligner.embedding_
    rna, atac = back.mod["rna"], back.mod["atac"]
    for view, adata in (("rna", rna), ("atac", atac)):
        np.testing.assert_array_equal(adata.obsm["X_bayesalign"], emb.means[view])
        if emb.variances is not None:
            np.testing.assert_array_equal(adata.obsm["X_bayesalign_var"], emb.variances[view])
        assert "bayesalign" not in adata.uns  # one record, on the MuData
    record = back.uns["bayesalign"]
    assert record["method"] == type(aligner.estimator_).__name__
    assert record["version"] == bayesalign.__version__
    assert record["matcher"] == "hungarian" and record["anchors"] == "obs_names"
    assert set(record["parameters"]) == set(aligner.estimator_.get_params(deep=False))
    pairs = record["pairs"]["rna|atac"]
    alignment = aligner.alignments_[("rna", "atac")]
    assert len(pairs["index_a"]) == n_anchors + len(alignment)  # the anchors are among the stored pairs
    assert pairs["anchor"].sum() == n_anchors
    np.testing.assert_array_equal(pairs["obs_a"][pairs["anchor"]], pairs["obs_b"][pairs["anchor"]])
    np.testing.assert_array_equal(pairs["probability"][pairs["anchor"]], 1.0)
    np.testing.assert_array_equal(pairs["index_b"][~pairs["anchor"]], alignment.index_b)
    np.testing.assert_allclose(pairs["probability"][~pairs["anchor"]], alignment.probabilities)
    # .obs: every cell's partner and probability, as in the pairs
    partner = rna.obs["bayesalign_partner_atac"].astype(object)
    np.testing.assert_array_equal(partner.iloc[pairs["index_a"]].to_numpy(), pairs["obs_b"])
    np.testing.assert_array_equal(atac.obs["bayesalign_partner_rna"].astype(object).iloc[pairs["index_b"]],
                                  pairs["obs_a"])
    np.testing.assert_array_equal(rna.obs["bayesalign_probability_atac"].to_numpy()[pairs["index_a"]],
                                  pairs["probability"])
    # the joint embedding: an anchor cell (one name, two modalities) at the mean of its two coordinates
    joint = back.obsm["X_bayesalign"]
    assert joint.shape == (back.n_obs, emb.n_components) == (105, emb.n_components)  # 60 + 60 - 15 cells
    cell0 = back.obs_names.get_loc("cell0")
    np.testing.assert_allclose(joint[cell0], (emb.means["rna"][0] + emb.means["atac"][atac.obs_names.get_loc(
        "cell0")]) / 2, rtol=1e-12)  # one mean of two float64 values
    only_atac = back.obs_names.get_loc("atac_cell30")
    np.testing.assert_array_equal(joint[only_atac], emb.means["atac"][atac.obs_names.get_loc("atac_cell30")])
    return pairs


def test_cell_aligner_on_a_mudata_with_a_spectral_baseline_round_trips_through_h5mu(tmp_path):
    mudata = pytest.importorskip("mudata")
    from bayesalign.spectral import JointLaplacianAlignment

    mdata, aligner = fitted_on_mudata(JointLaplacianAlignment(n_components=3))
    aligner.write(mdata)
    mdata.write_h5mu(tmp_path / "cells.h5mu")
    back = mudata.read_h5mu(tmp_path / "cells.h5mu")
    pairs = check_written(back, aligner)
    assert back.uns["bayesalign"]["parameters"]["n_components"] == 3
    np.testing.assert_array_equal(aligner.problem_.labels["atac"], mdata.mod["atac"].obs["cell_type"].to_numpy())
    # the pairs are those of the registry's run of the same method on the same problem
    reference = run_method("joint-laplacian", aligner.problem_, latent_dim=3).alignments[("rna", "atac")]
    np.testing.assert_array_equal(pairs["index_b"][~pairs["anchor"]], reference.index_b)
    # and many are the right cells: 45 unpaired cells, so a random matching gets 1 right on average
    matched = ~pairs["anchor"]
    correct = np.sum([true_partner(b) == a for a, b in zip(pairs["obs_a"][matched], pairs["obs_b"][matched])])
    assert correct >= 10
    # cell types carried from RNA to ATAC: right for the anchors (confidence 1) and nearly every matched cell
    out = singlecell.transfer_labels(back, "cell_type", source="rna", target="atac")
    atac = back.mod["atac"]
    np.testing.assert_array_equal(atac.obs["cell_type_from_rna"].astype(object), out["cell_type_from_rna"])
    right = out["cell_type_from_rna"].astype(object).to_numpy() == atac.obs["cell_type"].to_numpy()
    anchor_rows = np.isin(atac.obs_names, [f"cell{i}" for i in range(15)])
    assert right[anchor_rows].all() and np.all(out["cell_type_from_rna_confidence"][anchor_rows] == 1.0)
    assert right.mean() >= 0.9  # a cell type is half the curve: a wrong partner is mostly of the same type


# a tiny budget of bound evaluations, for speed: MAD says it stopped early, which is right and not under test
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cell_aligner_with_mad_writes_variances_and_round_trips_through_h5mu(tmp_path):
    mudata = pytest.importorskip("mudata")
    import bayesalign as ba

    mad = ba.MAD(latent_dim=3, num_inducing=8, seed=0, engine_options={"max_iter": 40})
    mdata, aligner = fitted_on_mudata(mad)
    assert aligner.embedding_.variances is not None
    aligner.write(mdata)
    mdata.write_h5mu(tmp_path / "cells.h5mu")
    back = mudata.read_h5mu(tmp_path / "cells.h5mu")
    check_written(back, aligner)
    assert back.uns["bayesalign"]["parameters"]["latent_dim"] == 3
    assert back.uns["bayesalign"]["parameters"]["engine_options"]["max_iter"] == 40


def test_cell_aligner_on_an_anndata_pair_round_trips_through_h5ad(tmp_path):
    from bayesalign.spectral import JointLaplacianAlignment

    a, b = unpaired_cells()
    adatas = {"rna": a, "atac": b}
    aligner = singlecell.CellAligner(JointLaplacianAlignment(n_components=3), obsm={"rna": "X_pca"}).fit(adatas)
    aligner.write(adatas)
    a.write_h5ad(tmp_path / "rna.h5ad")
    b.write_h5ad(tmp_path / "atac.h5ad")
    for name, view in (("rna.h5ad", "rna"), ("atac.h5ad", "atac")):
        back = anndata.read_h5ad(tmp_path / name)
        np.testing.assert_array_equal(back.obsm["X_bayesalign"], aligner.embedding_.means[view])
        # no common object: each file carries the record
        np.testing.assert_array_equal(back.uns["bayesalign"]["pairs"]["rna|atac"]["index_a"],
                                      aligner.pairs("rna", "atac")["index_a"])


def test_cell_aligner_follows_the_estimator_contract():
    from sklearn.exceptions import NotFittedError

    from bayesalign.spectral import JointLaplacianAlignment

    a, b = unpaired_cells()
    adatas = {"rna": a, "atac": b}
    aligner = singlecell.CellAligner(JointLaplacianAlignment(n_components=3), layer={"rna": "dense"})
    with pytest.raises(NotFittedError, match="CellAligner is not fitted"):
        aligner.write(adatas)
    aligner.set_params(estimator__n_components=2, matcher="sinkhorn")
    assert aligner.get_params()["estimator__n_components"] == 2
    obs_before, obsm_before = a.obs.copy(), dict(a.obsm)
    aligner.fit(adatas)
    assert aligner.estimator.__dict__.get("embedding_") is None  # the estimator given is not fitted in place
    assert aligner.embedding_.n_components == 2
    pd.testing.assert_frame_equal(a.obs, obs_before)  # fit does not write: write does
    assert set(a.obsm) == set(obsm_before)
    with pytest.raises(ValueError, match=r"view 'atac': its cells are not the 60 cells"):
        aligner.write({"rna": a, "atac": b[:50].copy()})
    with pytest.raises(ValueError, match=r"view 'atac': no .obs column 'bayesalign_partner_rna'"):
        singlecell.transfer_labels(adatas, "cell_type", source="rna", target="atac")
    with pytest.raises(ValueError, match=r"modalities \['protein'\] are not in the data"):
        singlecell.CellAligner(JointLaplacianAlignment(), modalities=["rna", "protein"]).fit(adatas)
