"""Manifold alignment preserving global geometry (Wang & Mahadevan 2013)."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from spectral_helpers import (  # tests/spectral_helpers.py
    paired_foscttm,
    rotation,
    swiss_problem,
)

from bayesalign.data import AlignmentProblem, Correspondence
from bayesalign.datasets.synthetic import manifold_pair
from bayesalign.spectral import (
    LeastSquaresAlignment,
)
from bayesalign.spectral.global_geometry import (
    GlobalGeometryAlignment,
    bridge_distances,
    double_centering,
    project_psd,
    rescale_factor,
)


def test_rescale_factor_recovers_scale_between_views():
    rng = np.random.default_rng(5)
    Xa = rng.normal(size=(100, 3))
    s = 2.5
    Xb = s * Xa @ rotation(3, 4)
    anchors = np.arange(0, 100, 5)
    assert rescale_factor(cdist(Xa[anchors], Xa[anchors]), cdist(Xb[anchors], Xb[anchors])) == \
        pytest.approx(1 / s, rel=1e-12)
    problem = AlignmentProblem({"a": Xa, "b": Xb},
                               anchors=Correspondence.from_pairs(np.c_[anchors, anchors], ("a", "b")))
    for metric in ("geodesic", "euclidean"):  # geodesics scale with the view too
        model = GlobalGeometryAlignment(n_components=2, metric=metric, n_neighbors=8).fit(problem)
        assert model.rescale_factors_["b"] == pytest.approx(1 / s, rel=1e-10)


def test_tau_recovers_gram_matrix_and_psd_projection():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(30, 4)) + 10.0
    Xc = X - X.mean(0)
    np.testing.assert_allclose(double_centering(cdist(X, X)), Xc @ Xc.T, atol=1e-10)
    # a non-Euclidean "distance" matrix: tau has negative eigenvalues, the projection removes them
    D = cdist(X, X, "cityblock")
    G = double_centering(D)
    P, values, vectors = project_psd(G, return_eigen=True)
    assert np.linalg.eigvalsh(G).min() < -1e-3 and np.linalg.eigvalsh(P).min() > -1e-9
    lam = np.linalg.eigvalsh(G)
    assert np.linalg.norm(G - P) == pytest.approx(np.sqrt(np.sum(lam[lam < 0] ** 2)), rel=1e-10)


def test_bridge_distances_brute_force():
    rng = np.random.default_rng(7)
    Da, Db = rng.uniform(size=(6, 4)), rng.uniform(size=(5, 4))
    expected = np.array([[min(Da[i, u] + Db[j, u] for u in range(4)) for j in range(5)] for i in range(6)])
    np.testing.assert_allclose(bridge_distances(Da, Db, block=7), expected)


@pytest.mark.parametrize("level", ["feature", "instance"])
def test_global_geometry_identical_views_all_anchors(level):
    X = np.asarray(manifold_pair("swiss_roll", n=200, noise=0.0, seed=1).views["X"])
    problem = AlignmentProblem({"a": X, "b": X}, anchors=Correspondence.identity(200, ("a", "b")))
    emb = GlobalGeometryAlignment(n_components=2, level=level).fit(problem).embedding_
    assert paired_foscttm(emb["a"], emb["b"]) < 0.01
    np.testing.assert_allclose(emb["a"], emb["b"], atol=1e-8)  # D_xy = D_xx: the copies coincide


def test_global_geometry_beats_least_squares_on_rotated_swiss_rolls():
    # 300 points of a swiss roll in R^20, randomly rotated twice, noise 0.05, 10% anchors (30 pairs):
    # a linear map fitted on 30 pairs in 20 dimensions overfits the noise; the global geometry of all
    # 600 points constrains the maps. Observed FOSCTTM over seeds 0-2: ~0.003 against 0.010-0.013.
    full, problem = swiss_problem(n=300, noise=0.05, dim=20, fraction=0.1, seed=0)
    emb = GlobalGeometryAlignment(n_components=3).fit(problem).embedding_
    ours = paired_foscttm(emb["X"], emb["Y"])
    ls = LeastSquaresAlignment().fit(problem).embedding_  # the affine map Y -> X fitted on the anchors
    baseline = paired_foscttm(ls["X"], ls["Y"])
    assert ours < 0.006 and ours < 0.5 * baseline
    # linear: the projections transform the rows they were fitted on
    np.testing.assert_allclose(emb.transform("Y", full.views["Y"]), emb["Y"], atol=1e-8)


def test_global_geometry_three_views_and_composed_bridges():
    full = manifold_pair("s_curve", n=150, noise=0.0, seed=3)
    X, Y = np.asarray(full.views["X"]), np.asarray(full.views["Y"])
    Z = 0.5 * X @ rotation(3, 9)
    idx = np.arange(0, 150, 5)
    pairs = np.c_[idx, idx]
    # anchors X-Y and Y-Z only: X-Z distances are composed through Y
    problem = AlignmentProblem({"X": X, "Y": Y, "Z": Z},
                               anchors=[Correspondence.from_pairs(pairs, ("X", "Y")),
                                        Correspondence.from_pairs(pairs, ("Y", "Z"))])
    model = GlobalGeometryAlignment(n_components=2, level="instance").fit(problem)
    assert model.rescale_factors_["Z"] == pytest.approx(2.0, rel=1e-10)  # chained: (1/2) * 4
    emb = model.embedding_
    assert paired_foscttm(emb["X"], emb["Z"]) < 0.02


def test_global_geometry_bad_input():
    full, problem = swiss_problem(n=100, dim=3)
    with pytest.raises(ValueError, match="n_components"):
        GlobalGeometryAlignment(n_components=7).fit(problem)  # 6 features in all
    with pytest.raises(ValueError, match="max_samples"):
        GlobalGeometryAlignment(max_samples=150).fit(problem)
    with pytest.raises(ValueError, match="not linked"):
        GlobalGeometryAlignment().fit(problem.replace(anchors=None))
    # two far-apart clusters: the 3-NN graph is disconnected, geodesics would be infinite
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(20, 2)), 100 + rng.normal(size=(20, 2))])
    split = AlignmentProblem({"a": X, "b": X}, anchors=Correspondence.identity(40, ("a", "b")))
    with pytest.raises(ValueError, match="disconnected"):
        GlobalGeometryAlignment(n_neighbors=3).fit(split)
    emb = GlobalGeometryAlignment(n_neighbors=3, connect_components=True).fit(split).embedding_
    assert np.isfinite(emb["a"]).all()
    # duplicate rows: zero distances are fine (no NaN)
    Xd = np.vstack([X[:20], X[:5]])
    dup = AlignmentProblem({"a": Xd, "b": Xd @ rotation(2, 1)}, anchors=Correspondence.identity(25, ("a", "b")))
    emb = GlobalGeometryAlignment(n_neighbors=4, level="instance").fit(dup).embedding_
    assert np.isfinite(emb["a"]).all() and paired_foscttm(emb["a"][:20], emb["b"][:20]) < 0.05


@pytest.mark.parametrize("scale", [1e8, 1e-8])
def test_global_geometry_is_invariant_to_the_units_of_a_view(scale):
    # Scaling view b by c scales its distances by c, its rescale factor by 1/c and its projection by 1/c:
    # the latent coordinates of every row are the same up to round-off of the generalized eigensolve.
    rng = np.random.default_rng(3)
    t = np.sort(rng.uniform(0, 3, 60))
    Xa = np.c_[t, np.sin(t), 0.1 * rng.normal(size=60)]
    Xb = np.c_[np.cos(t), t ** 2, 0.1 * rng.normal(size=60)] @ rotation(3, 1)
    anchors = Correspondence.from_pairs([(i, i) for i in range(0, 60, 4)], ("a", "b"))
    fits = [GlobalGeometryAlignment(n_components=2, n_neighbors=6).fit(
        AlignmentProblem({"a": Xa, "b": c * Xb}, anchors=anchors)).embedding_ for c in (1.0, scale)]
    for v in ("a", "b"):
        # relative 1e-6: eigh's error on a problem whose blocks differ by c**2 in magnitude
        np.testing.assert_allclose(fits[1][v], fits[0][v], rtol=0, atol=1e-6 * np.abs(fits[0][v]).max())
