"""Unusual but legitimate inputs to the data types, the spectral estimators and the command line:
each test pins a bug found by a bug hunt (it failed before its fix)."""

import numpy as np
import pytest

from bayesalign import cli, spectral
from bayesalign.data import AlignmentProblem, InputTypeError, LatentEmbedding
from bayesalign.spectral import AnchorSimilarityBaseline, CCAAlignment, LinearAlignment, procrustes


def rotated_pair(n=40, seed=0):
    """View b = view a rotated and translated (an isometry), rows paired, 10 anchors."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, 3)) * [3.0, 2.0, 1.0]
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return AlignmentProblem.paired({"a": a, "b": a @ q + 2.0}).split_anchors(10, seed=0)


# LatentEmbedding ---------------------------------------------------------------------------
def test_restrict_keeps_which_dimensions_are_shared():
    emb = LatentEmbedding({"a": np.arange(12.0).reshape(4, 3)}, shared_dims=[2])
    # dims [1, 2] of the old embedding are [0, 1] of the new one; only old dim 2 (new 1) is shared
    assert emb.restrict([1, 2]).shared_dims.tolist() == [1]
    assert emb.restrict([2, 0]).shared_dims.tolist() == [0]
    assert emb.restrict([0, 1]).shared_dims.tolist() == []


def test_restrict_refuses_dimensions_out_of_range():
    emb = LatentEmbedding({"a": np.zeros((4, 3))})
    with pytest.raises(ValueError, match="out of range for 3 dimensions"):
        emb.restrict([3])


def test_embedding_refuses_non_finite_variances_naming_the_view():
    with pytest.raises(ValueError, match="variances of view 'b'.*non-finite"):
        LatentEmbedding({"a": np.zeros((2, 2)), "b": np.zeros((2, 2))},
                        variances={"b": np.array([[0.1, np.nan], [0.1, 0.1]])})


def test_embedding_refuses_projection_of_another_latent_dimension():
    # a (p, 3) projection for a 2-D embedding would make transform return 3 columns
    with pytest.raises(ValueError, match="projections of view 'a'.*2 latent dimensions"):
        LatentEmbedding({"a": np.zeros((4, 2))}, projections={"a": np.eye(3)})


# AlignmentProblem --------------------------------------------------------------------------
def test_problem_labels_not_a_dict_is_a_clear_error():
    X = np.zeros((3, 2))
    with pytest.raises(InputTypeError, match="labels must be a dict"):
        AlignmentProblem({"a": X, "b": X}, labels=[0, 1, 2])


# Spectral estimators -----------------------------------------------------------------------
def test_anchor_similarity_is_the_same_for_isometric_views():
    """Distances are invariant under a rotation plus translation, so with the scale taken from the
    distances (the median point-to-anchor distance) both views' similarity vectors coincide; only
    the round-off of the distances (~1e-15 relative) may differ."""
    problem = rotated_pair()
    for kernel in ("heat", "distance"):
        emb = AnchorSimilarityBaseline(kernel=kernel).fit(problem).embedding_
        np.testing.assert_allclose(emb["a"], emb["b"], rtol=0, atol=1e-12)


@pytest.mark.parametrize("make", [lambda: CCAAlignment(reg=float("nan")),
                                  lambda: LinearAlignment(reg=float("nan"), n_neighbors=5),
                                  lambda: LinearAlignment(mu=float("nan"), n_neighbors=5)])
def test_nan_hyperparameter_is_named(make):
    with pytest.raises(ValueError, match=r"(reg|mu)=nan|got nan"):
        make().fit(rotated_pair())


def test_procrustes_refuses_non_finite_points():
    source = np.array([[0.0, 0.0], [1.0, np.nan], [0.0, 2.0]])
    with pytest.raises(ValueError, match="source.*non-finite"):
        procrustes(source, np.ones((3, 2)))


# Command line ------------------------------------------------------------------------------
def test_align_with_failing_figures_writes_no_output(tmp_path, capsys):
    """A 1-D latent space cannot be drawn as a scatter: the run fails, and --out / --embedding
    must then be left unwritten (the outputs are written all or none)."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=(30, 3))
    np.savetxt(tmp_path / "a.csv", a, delimiter=",")
    np.savetxt(tmp_path / "b.csv", a[:, ::-1], delimiter=",")
    (tmp_path / "pairs.csv").write_text("".join(f"{i},{i}\n" for i in range(0, 30, 3)))
    out, emb, figs = tmp_path / "out.csv", tmp_path / "emb.npz", tmp_path / "figs"
    status = cli.main(["align", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"), "--anchors",
                       str(tmp_path / "pairs.csv"), "--out", str(out), "--embedding", str(emb),
                       "--latent-dim", "1", "--set", "n_neighbors=5", "--plots", str(figs)])
    err = capsys.readouterr().err
    assert status != 0 and "Traceback" not in err and "error:" in err
    assert not out.exists() and not emb.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv", "pairs.csv"]  # no temporary left


@pytest.mark.parametrize("make", [lambda: spectral.ProcrustesAlignment(n_components=None),
                                  lambda: spectral.AffineAlignment(n_components=None)])
def test_n_components_none_is_named(make):
    problem = AlignmentProblem.paired({"a": np.random.default_rng(0).normal(size=(30, 3)),
                                       "b": np.random.default_rng(1).normal(size=(30, 3))}).split_anchors(0.5, seed=0)
    with pytest.raises(TypeError, match="n_components must be an int"):
        make().fit(problem)


def test_knn_graph_refuses_a_fractional_neighbour_count():
    from bayesalign.graph import knn_graph

    with pytest.raises(TypeError, match="n_neighbors must be an int, got 2.5"):
        knn_graph(np.arange(10.0).reshape(5, 2), n_neighbors=2.5)


def test_a_constant_view_is_named_by_linear_alignment():
    rng = np.random.default_rng(0)
    problem = AlignmentProblem.paired({"a": rng.normal(size=(30, 3)), "b": np.ones((30, 2))}).split_anchors(0.5, seed=0)
    with pytest.raises(ValueError, match="view 'b' is constant"):
        LinearAlignment(n_components=1).fit(problem)
