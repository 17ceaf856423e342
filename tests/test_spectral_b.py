"""Global-geometry, multiscale (diffusion wavelets) and local-pattern (unsupervised) alignment."""

import itertools

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from bayesalign import metrics
from bayesalign.data import AlignmentProblem, Correspondence
from bayesalign.datasets.synthetic import manifold_pair
from bayesalign.graph import heat_kernel, knn_graph
from bayesalign.spectral import LeastSquaresAlignment
from bayesalign.spectral.global_geometry import (
    GlobalGeometryAlignment,
    bridge_distances,
    double_centering,
    project_psd,
    rescale_factor,
)
from bayesalign.spectral.local_patterns import (
    LocalPatternAlignment,
    local_pattern_correspondence,
    local_pattern_distance,
    local_pattern_distances,
    local_patterns,
)
from bayesalign.spectral.multiscale import MultiscaleAlignment, diffusion_wavelets


def foscttm(A, B):
    """FOSCTTM of two row-paired coordinate arrays (row i of A <-> row i of B)."""
    return metrics.foscttm(cdist(A, B), np.arange(len(A)))


def rotation(dim, seed):
    q, r = np.linalg.qr(np.random.default_rng(seed).normal(size=(dim, dim)))
    return q * np.sign(np.diag(r))


def brute_pattern_distance(Ra, Rb):
    """Section 5.3.4 literally: all k! orderings, both rescalings, full matrices."""
    k = Ra.shape[0] - 1
    best = np.inf
    for perm in itertools.permutations(range(1, k + 1)):
        q = (0,) + perm
        Rh = Rb[np.ix_(q, q)]
        k1 = np.trace(Ra.T @ Rh) / np.trace(Ra.T @ Ra)
        k2 = np.trace(Rh.T @ Ra) / np.trace(Rh.T @ Rh)
        best = min(best, np.linalg.norm(Rh - k1 * Ra), np.linalg.norm(Ra - k2 * Rh))
    return best


# ---------------------------------------------------------------------------------------------
# Local patterns (section 5.3.4)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [2, 3, 5])
def test_pattern_distance_equals_brute_force(k):
    rng = np.random.default_rng(k)
    R = []
    for _ in range(2):
        Z = rng.normal(size=(k + 1, 3))
        R.append(cdist(Z, Z))
    d, _ = local_pattern_distance(*R)
    assert d == pytest.approx(brute_pattern_distance(*R), rel=1e-12, abs=1e-12)
    assert d > 1e-3  # two random patterns do not match


def test_permutation_search_finds_shuffled_neighbourhood():
    rng = np.random.default_rng(1)
    k = 6
    Z = rng.normal(size=(k + 1, 4))
    Ra = cdist(Z, Z)
    perm = rng.permutation(k)
    q = np.r_[0, perm + 1]
    Rb = 2.7 * Ra[np.ix_(q, q)]  # neighbours listed in another order, another unit
    d, order = local_pattern_distance(Ra, Rb)
    assert d < 1e-10
    # neighbour u of Ra is neighbour order[u] of Rb, i.e. Rb's neighbour perm[v] sits at v
    np.testing.assert_array_equal(perm[order], np.arange(k))


def test_local_pattern_distances_invariant_to_similarity_transforms():
    rng = np.random.default_rng(2)
    Xa = rng.normal(size=(60, 3))
    Xb = 3.5 * Xa @ rotation(3, 0) + np.array([1.0, -2.0, 5.0])
    same = local_pattern_distances(Xa, Xa, 5)["distances"]
    moved = local_pattern_distances(Xa, Xb, 5)["distances"]
    assert np.abs(np.diag(moved)).max() < 1e-10  # each point matches its own image exactly
    np.testing.assert_allclose(moved, same, atol=1e-10)
    # the chapter's raw distance (normalize=False) is invariant to rotation and translation
    raw = local_pattern_distances(Xa, Xa, 5, normalize=False)["distances"]
    raw_moved = local_pattern_distances(Xa, Xa @ rotation(3, 1) - 4.0, 5, normalize=False)["distances"]
    np.testing.assert_allclose(raw_moved, raw, atol=1e-10)


def test_local_pattern_distances_prefilter_matches_full_search():
    rng = np.random.default_rng(3)
    Xa = rng.normal(size=(80, 3))
    Xb = Xa @ rotation(3, 2) + 0.01 * rng.normal(size=(80, 3))
    full = local_pattern_distances(Xa, Xb, 5)
    pre = local_pattern_distances(Xa, Xb, 5, prefilter=15)
    assert pre["certified"].mean() > 0.9
    rows = np.flatnonzero(pre["certified"])
    np.testing.assert_array_equal(pre["distances"][rows].argmin(1), full["distances"][rows].argmin(1))
    kept = np.isfinite(pre["distances"])
    np.testing.assert_allclose(pre["distances"][kept], full["distances"][kept], rtol=1e-12)
    assert kept.sum(1).max() == 15


def test_local_pattern_correspondence_recovers_copies():
    # two rotated + scaled copies of a 150-point cloud, no noise: mutual best matches are right
    rng = np.random.default_rng(4)
    Xa = rng.normal(size=(150, 3))
    Xb = 0.3 * Xa @ rotation(3, 3) + 7.0
    corr = local_pattern_correspondence(Xa, Xb, n_neighbors=6, views=("a", "b"))
    correct = np.mean(corr.index_a == corr.index_b)
    assert len(corr) >= 140 and correct >= 0.99  # observed: 150 pairs, all correct
    assert np.all((corr.weights > 0) & (corr.weights <= 1))
    # with noise the mutual filter keeps fewer but still mostly right pairs
    noisy = local_pattern_correspondence(Xa, Xb + 0.003 * rng.normal(size=Xb.shape), n_neighbors=6)
    assert np.mean(noisy.index_a == noisy.index_b) > 0.8


def test_joint_laplacian_aligns_with_local_pattern_anchors_only():
    # no anchors at all: the inferred correspondences drive the joint Laplacian (section 5.3.4)
    from bayesalign.spectral.joint_laplacian import JointLaplacianAlignment

    rng = np.random.default_rng(4)
    Xa = rng.normal(size=(150, 3))
    cloud = AlignmentProblem.paired({"a": Xa, "b": 0.3 * Xa @ rotation(3, 3) + 7.0})
    model = LocalPatternAlignment(JointLaplacianAlignment(n_components=2, n_neighbors=8), n_neighbors=6)
    emb = model.fit(cloud).embedding_
    assert emb.info["anchors"] == "local patterns" and not cloud.anchors
    assert foscttm(emb["a"], emb["b"]) < 0.01  # observed 0.0
    # a noisy S curve: ~89% of the 129 mutual matches are right; the joint Laplacian tolerates the
    # rest (observed FOSCTTM 0.014; Global geometry, whose eq. 4 takes the *minimum* over bridges,
    # is ruined by the wrong ones: 0.44)
    full = manifold_pair("s_curve", n=200, noise=0.01, dim=3, seed=5)
    model = LocalPatternAlignment(JointLaplacianAlignment(n_components=2), n_neighbors=5).fit(full)
    corr = model.correspondences_[("X", "Y")]
    assert 0.8 < np.mean(corr.index_a == corr.index_b) < 1.0
    assert foscttm(model.embedding_["X"], model.embedding_["Y"]) < 0.05


def test_local_patterns_rejects_duplicates_and_large_k():
    X = np.vstack([np.zeros((4, 2)), np.random.default_rng(0).normal(size=(10, 2))])
    with pytest.raises(ValueError, match="duplicate"):
        local_patterns(X, n_neighbors=3)
    with pytest.raises(ValueError, match="n_neighbors"):
        local_patterns(np.random.default_rng(0).normal(size=(20, 2)), n_neighbors=9)
    with pytest.raises(ValueError, match="rows"):
        local_patterns(np.random.default_rng(0).normal(size=(4, 2)), n_neighbors=4)


# ---------------------------------------------------------------------------------------------
# Diffusion wavelets and multiscale alignment (section 5.3.3)
# ---------------------------------------------------------------------------------------------
def _small_diffusion_operator(n=100, seed=0):
    X = np.random.default_rng(seed).normal(size=(n, 2))
    W = heat_kernel(knn_graph(X, 6)).toarray()
    d = W.sum(1)
    return 0.5 * (np.eye(n) + W / np.sqrt(np.outer(d, d)))  # lazy walk, spectrum in [0, 1]


def test_diffusion_wavelets_span_the_dyadic_eigenspaces():
    T = _small_diffusion_operator()
    eps = 1e-6
    out = diffusion_wavelets(T, eps, max_levels=15)
    lam, V = np.linalg.eigh(T)
    assert out["dimensions"] == sorted(out["dimensions"], reverse=True)
    assert out["dimensions"][-1] == 1 and len(out["dimensions"]) >= 6
    for k, (basis, op) in enumerate(zip(out["bases"], out["operators"])):
        power = lam ** (2**k)
        np.testing.assert_allclose(basis.T @ basis, np.eye(basis.shape[1]), atol=1e-12)
        assert (power >= 10 * eps).sum() <= basis.shape[1] <= (power >= eps / 10).sum()
        strong = power >= 100 * eps  # captured: projection residual ~ eps / lambda^(2^k)
        residual = np.linalg.norm(V[:, strong] - basis @ (basis.T @ V[:, strong]), axis=0)
        assert residual.max() < 0.02
        weak = power < eps / 100  # and nothing of the eigenvectors far below the precision
        if weak.any():
            assert np.linalg.norm(basis.T @ V[:, weak], axis=0).max() < 0.02
        # the compressed operator is T^(2^k) on the basis: its top eigenvalues are lambda^(2^k)
        top = np.sort(np.linalg.eigvalsh(0.5 * (op + op.T)))[::-1][:3]
        np.testing.assert_allclose(top, np.sort(power)[::-1][: top.size], atol=1e-8)


def test_diffusion_wavelets_rejects_non_diffusion_operator():
    with pytest.raises(ValueError, match="spectral norm"):
        diffusion_wavelets(2.0 * np.eye(3))
    with pytest.raises(ValueError, match="epsilon"):
        diffusion_wavelets(np.eye(3), epsilon=0.0)


def _swiss_problem(n=300, noise=0.05, dim=10, fraction=0.2, seed=0):
    problem = manifold_pair("swiss_roll", n=n, noise=noise, dim=dim, seed=seed)
    return problem, problem.split_anchors(fraction, seed=seed)


def test_multiscale_levels_are_the_generalized_eigenspaces():
    import scipy.linalg

    from bayesalign.graph import laplacian
    from bayesalign.spectral._base import correspondence_matrices, joint_adjacency, within_view_affinity

    full, problem = _swiss_problem(n=200, dim=6)
    eps = 1e-4
    model = MultiscaleAlignment(epsilon=eps, n_neighbors=10, level="feature", mu=1.0).fit(problem)
    dims = model.dimensions_
    assert dims[0] == 12 and dims == sorted(dims, reverse=True) and len(dims) >= 3
    # reference: the minimum solutions of X'LX f = lambda X'X f (dense), section 5.3.1
    names = problem.views.names
    W = joint_adjacency({v: within_view_affinity(problem.views[v], 10) for v in names},
                        correspondence_matrices(problem), names)
    L, _ = laplacian(W)
    X = scipy.linalg.block_diag(*[problem.views[v] - problem.views[v].mean(0) for v in names])  # [N, P]
    lam, F = scipy.linalg.eigh(X.T @ (L @ X), X.T @ X)
    ratio = lam[0] / lam  # eigenvalues of the normalised T = (X'LX)^+ in the X'X metric
    coords = X @ F
    coords /= np.linalg.norm(coords, axis=0)
    previous = None
    for emb in model.embeddings_:
        Z = np.vstack([emb[v] for v in names])  # [N, d_k], orthonormal columns
        np.testing.assert_allclose(Z.T @ Z, np.eye(Z.shape[1]), atol=1e-10)
        strong = ratio ** emb.info["power"] >= 100 * eps
        residual = np.linalg.norm(coords[:, strong] - Z @ (Z.T @ coords[:, strong]), axis=0)
        assert residual.max() < 0.05
        if previous is not None:  # nested: span(A_{k+1}) inside span(A_k)
            assert np.linalg.norm(Z - previous @ (previous.T @ Z)) < 1e-6
        previous = Z
        # the linear maps reproduce the coordinates
        for v in names:
            np.testing.assert_allclose(emb.transform(v, problem.views[v]), emb[v], atol=1e-10)
    # a coarse level aligns the held-out rows; the finest (the whole space) does not
    assert foscttm(model.embedding_["X"], model.embedding_["Y"]) < 0.05
    assert foscttm(model.embeddings_[0]["X"], model.embeddings_[0]["Y"]) > 0.3


def test_multiscale_instance_level_and_bad_input():
    _, problem = _swiss_problem(n=150, dim=3)
    model = MultiscaleAlignment(level="instance", epsilon=1e-4).fit(problem)
    assert model.dimensions_[0] > model.dimensions_[-1] >= 1
    assert all(np.isfinite(e["X"]).all() for e in model.embeddings_)
    assert min(foscttm(e["X"], e["Y"]) for e in model.embeddings_) < 0.1
    with pytest.raises(ValueError, match="max_samples"):
        MultiscaleAlignment(level="instance", max_samples=100).fit(problem)
    with pytest.raises(ValueError, match="disconnected"):
        MultiscaleAlignment().fit(problem.replace(anchors=None))  # no anchors: two separate graphs


# ---------------------------------------------------------------------------------------------
# Global geometry (Wang & Mahadevan 2013)
# ---------------------------------------------------------------------------------------------
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
    assert foscttm(emb["a"], emb["b"]) < 0.01
    np.testing.assert_allclose(emb["a"], emb["b"], atol=1e-8)  # D_xy = D_xx: the copies coincide


def test_global_geometry_beats_least_squares_on_rotated_swiss_rolls():
    # 300 points of a swiss roll in R^20, randomly rotated twice, noise 0.05, 10% anchors (30 pairs):
    # a linear map fitted on 30 pairs in 20 dimensions overfits the noise; the global geometry of all
    # 600 points constrains the maps. Observed FOSCTTM over seeds 0-2: ~0.003 against 0.010-0.013.
    full, problem = _swiss_problem(n=300, noise=0.05, dim=20, fraction=0.1, seed=0)
    emb = GlobalGeometryAlignment(n_components=3).fit(problem).embedding_
    ours = foscttm(emb["X"], emb["Y"])
    ls = LeastSquaresAlignment().fit(problem).embedding_  # the affine map Y -> X fitted on the anchors
    baseline = foscttm(ls["X"], ls["Y"])
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
    assert foscttm(emb["X"], emb["Z"]) < 0.02


def test_global_geometry_bad_input():
    full, problem = _swiss_problem(n=100, dim=3)
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
    assert np.isfinite(emb["a"]).all() and foscttm(emb["a"][:20], emb["b"][:20]) < 0.05
