"""Joint-Laplacian, linear, Procrustes and baseline alignments: known answers and brute force."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.datasets import make_swiss_roll

from bayesalign.data import AlignmentProblem, Correspondence
from bayesalign.metrics import foscttm
from bayesalign.spectral import (
    AffineAlignment,
    AnchorSimilarityBaseline,
    CCAAlignment,
    JointLaplacianAlignment,
    LeastSquaresAlignment,
    LinearAlignment,
    ProcrustesAlignment,
    embed_view,
    procrustes,
)
from bayesalign.spectral._base import anchor_tuples, within_view_affinity


def random_orthogonal(d, rng, det=None):
    Q, R = np.linalg.qr(rng.normal(size=(d, d)))
    Q = Q * np.sign(np.diag(R))
    if det is not None and np.sign(np.linalg.det(Q)) != det:
        Q[:, 0] *= -1
    return Q


def swiss_roll(n, seed=0):
    X, t = make_swiss_roll(n, random_state=seed)
    return X, t


# --- Procrustes ----------------------------------------------------------------------------------
def test_procrustes_recovers_rotation_with_reflection_and_scale():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    Q = random_orthogonal(4, rng, det=-1)  # includes a reflection
    scale, shift = 2.5, rng.normal(size=4)
    problem = AlignmentProblem.paired({"a": X, "b": scale * X @ Q + shift}).split_anchors(10, seed=1)
    model = ProcrustesAlignment(n_components=4, embedding="none").fit(problem)
    # b is mapped onto a: a = (b - shift) Q' / scale
    np.testing.assert_allclose(model.rotation_["b"], Q.T, atol=1e-10)
    assert np.linalg.det(model.rotation_["b"]) == pytest.approx(-1.0)
    assert model.scale_["b"] == pytest.approx(1.0 / scale, abs=1e-10)
    emb = model.embedding_
    np.testing.assert_allclose(emb["b"], emb["a"], atol=1e-10)  # every point, not only the anchors
    new = rng.normal(size=(3, 4))
    np.testing.assert_allclose(emb.transform("b", scale * new @ Q + shift), emb.transform("a", new), atol=1e-10)
    Q2, k2, t2 = procrustes(X, scale * X @ Q + shift)
    np.testing.assert_allclose(Q2, Q, atol=1e-10)
    assert k2 == pytest.approx(scale, abs=1e-10)
    np.testing.assert_allclose(t2, shift, atol=1e-10)


def test_procrustes_needs_more_anchors_than_dimensions():
    X = np.random.default_rng(0).normal(size=(30, 3))
    problem = AlignmentProblem.paired({"a": X, "b": X}).split_anchors(3, seed=0)
    with pytest.raises(ValueError, match=r"3 anchor pair\(s\) between views 'a' and 'b'; Procrustes in 3 "
                                         r"dimensions .* needs at least 4"):
        ProcrustesAlignment(n_components=3, embedding="pca").fit(problem)


def test_procrustes_three_views_align_to_the_first():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 3))
    Qb, Qc = random_orthogonal(3, rng), random_orthogonal(3, rng)
    problem = AlignmentProblem.paired({"a": X, "b": X @ Qb, "c": 3.0 * X @ Qc}).split_anchors(8, seed=0)
    model = ProcrustesAlignment(n_components=3, embedding="none").fit(problem)
    np.testing.assert_allclose(model.rotation_["a"], np.eye(3))
    np.testing.assert_allclose(model.rotation_["c"], Qc.T, atol=1e-10)
    np.testing.assert_allclose(model.embedding_["c"], model.embedding_["a"], atol=1e-10)


# --- every method on identical views with every point an anchor ------------------------------------
ALL_METHODS = [
    JointLaplacianAlignment(n_components=3, n_neighbors=8),
    JointLaplacianAlignment(n_components=3, n_neighbors=8, hard_constraints=True),
    LinearAlignment(n_components=3, n_neighbors=8),
    ProcrustesAlignment(n_components=3, n_neighbors=8),
    ProcrustesAlignment(n_components=3, embedding="lpp", n_neighbors=8),
    CCAAlignment(n_components=3),
    AffineAlignment(n_components=3, n_neighbors=8),
    LeastSquaresAlignment(),
    AnchorSimilarityBaseline(),
]


@pytest.mark.parametrize("model", ALL_METHODS, ids=lambda m: type(m).__name__)
def test_identical_views_all_anchors_align_perfectly(model):
    X, _ = swiss_roll(300)
    problem = AlignmentProblem.paired({"a": X, "b": X})
    problem = problem.replace(anchors=[Correspondence.identity(300, ("a", "b"))])
    emb = clone(model).fit(problem).embedding_
    assert foscttm(emb, problem.truth_between("a", "b")) < 0.01


def test_swiss_roll_joint_laplacian_beats_least_squares():
    # view a: a rotated swiss roll; view b: the same (t, h) on a roll wound differently, rotated,
    # so the two views are related nonlinearly and a linear map fitted on the anchors cannot align them
    rng = np.random.default_rng(0)
    X, t = swiss_roll(500)
    s = (t - t.min()) / np.ptp(t) * 1.5 * np.pi + np.pi / 2
    B = np.c_[3 * s * np.cos(s), X[:, 1], 3 * s * np.sin(s)]
    views = {"a": X @ random_orthogonal(3, rng), "b": B @ random_orthogonal(3, rng)}
    problem = AlignmentProblem.paired(views).split_anchors(0.1, seed=0)
    joint = foscttm(JointLaplacianAlignment(n_components=3, n_neighbors=10).fit(problem).embedding_, problem)
    least = foscttm(LeastSquaresAlignment().fit(problem).embedding_, problem)
    assert joint < 0.06 and least > 0.09 and joint < 0.5 * least


# --- joint Laplacian ----------------------------------------------------------------------------
def dense_heat_knn(X, k):
    dist = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    order = np.argsort(dist + np.diag(np.full(len(X), np.inf)), axis=1)[:, :k]
    A = np.zeros_like(dist, dtype=bool)
    A[np.arange(len(X))[:, None], order] = True
    A |= A.T
    sigma = np.median(dist[A])
    return np.where(A, np.exp(-dist ** 2 / (2 * sigma ** 2)), 0.0)


def dense_local_knn(X, k):
    """Local scaling (Zelnik-Manor & Perona 2004) by brute force: sigma_i = distance to the min(7, k)-th neighbour."""
    dist = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    ranked = np.sort(dist + np.diag(np.full(len(X), np.inf)), axis=1)
    order = np.argsort(dist + np.diag(np.full(len(X), np.inf)), axis=1)[:, :k]
    A = np.zeros_like(dist, dtype=bool)
    A[np.arange(len(X))[:, None], order] = True
    A |= A.T
    sigma = ranked[:, min(7, k) - 1]
    return np.where(A, np.exp(-dist ** 2 / np.outer(sigma, sigma)), 0.0)


DENSE_AFFINITY = {"heat": dense_heat_knn, "local": dense_local_knn}


@pytest.mark.parametrize("affinity", sorted(DENSE_AFFINITY))
def test_joint_laplacian_matches_dense_construction(affinity):
    rng = np.random.default_rng(5)
    Xa, Xb = rng.normal(size=(30, 2)), rng.normal(size=(25, 3))
    pairs = np.array([[0, 3], [5, 5], [7, 1], [12, 20], [29, 0]])
    weights = np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    problem = AlignmentProblem({"a": Xa, "b": Xb},
                               anchors=Correspondence.from_pairs(pairs, ("a", "b"), weights=weights))
    mu, nu = 0.7, 1.3
    model = JointLaplacianAlignment(n_components=3, n_neighbors=5, mu=mu, nu=nu, affinity=affinity).fit(problem)
    W = np.zeros((55, 55))
    W[:30, :30] = nu * DENSE_AFFINITY[affinity](Xa, 5)
    W[30:, 30:] = nu * DENSE_AFFINITY[affinity](Xb, 5)
    W[pairs[:, 0], 30 + pairs[:, 1]] = mu * weights
    W[30 + pairs[:, 1], pairs[:, 0]] = mu * weights
    D = np.diag(W.sum(1))
    values, vectors = scipy.linalg.eigh(D - W, D)
    np.testing.assert_allclose(model.eigenvalues_, values[1:4], rtol=1e-8)
    F = np.vstack([model.embedding_["a"], model.embedding_["b"]])
    np.testing.assert_allclose(np.abs(F.T @ D @ vectors[:, 1:4]), np.eye(3), atol=1e-6)


def test_anchor_weights_act_like_mu():
    X, _ = swiss_roll(120)
    rows = np.arange(0, 120, 6)
    weighted = Correspondence(("a", "b"), rows, rows, weights=np.full(rows.size, 2.5))
    problem = AlignmentProblem.paired({"a": X, "b": X[:, ::-1]})
    one = JointLaplacianAlignment(3, 6, mu=1.0).fit(problem, anchors=weighted).embedding_
    two = JointLaplacianAlignment(3, 6, mu=2.5).fit(problem, anchors=Correspondence(("a", "b"), rows, rows))
    np.testing.assert_allclose(one["b"], two.embedding_["b"], atol=1e-10)


def test_hard_constraints_on_identical_views_equal_laplacian_eigenmaps():
    # all rows merged: the merged graph is 2 W of one view, so F = eigenmap of that view / sqrt(2)
    X, _ = swiss_roll(200)
    problem = AlignmentProblem.paired({"a": X, "b": X})
    problem = problem.replace(anchors=[Correspondence.identity(200, ("a", "b"))])
    emb = JointLaplacianAlignment(3, 8, hard_constraints=True).fit(problem).embedding_
    eigenmap = embed_view(X, 3, "laplacian", n_neighbors=8).coordinates
    np.testing.assert_allclose(emb["a"], eigenmap / np.sqrt(2.0), atol=1e-8)
    np.testing.assert_array_equal(emb["a"], emb["b"])


def test_hard_constraints_merge_transitively_across_three_views():
    X, _ = swiss_roll(150)
    rng = np.random.default_rng(6)
    views = {"a": X, "b": X @ random_orthogonal(3, rng), "c": X[:, [2, 0, 1]] * 2.0}
    problem = AlignmentProblem.paired(views)
    rows = np.arange(0, 150, 10)
    problem = problem.replace(anchors=[Correspondence(("a", "b"), rows, rows),
                                       Correspondence(("b", "c"), rows, rows)])
    emb = JointLaplacianAlignment(2, 8, hard_constraints=True).fit(problem).embedding_
    np.testing.assert_array_equal(emb["a"][rows], emb["c"][rows])  # linked through b only
    assert foscttm(emb, problem.truth_between("a", "c")) < 0.05
    soft = JointLaplacianAlignment(2, 8, mu=20.0).fit(problem).embedding_  # soft ties: a-b and b-c only
    assert foscttm(soft, problem.truth_between("a", "c")) < 0.05


def test_joint_laplacian_errors():
    X, _ = swiss_roll(50)
    problem = AlignmentProblem.paired({"a": X, "b": X})
    with pytest.raises(ValueError, match="needs anchor pairs"):
        JointLaplacianAlignment(2, 5).fit(problem)
    anchored = problem.split_anchors(5, seed=0)
    with pytest.raises(ValueError, match=r"n_components=100 is out of range: .* allows 1 to 99"):
        JointLaplacianAlignment(100, 5).fit(anchored)
    far = AlignmentProblem({"a": X, "b": np.vstack([X, X + 1e3])},
                           anchors=Correspondence.from_pairs([(0, 0), (1, 1)], ("a", "b")))
    with pytest.raises(ValueError, match=r"disconnected: 2 connected components of sizes 100, 50"):
        JointLaplacianAlignment(2, 5).fit(far)


def test_estimators_follow_the_sklearn_contract():
    model = JointLaplacianAlignment(n_components=4, mu=2.0)
    assert model.get_params()["mu"] == 2.0 and clone(model).get_params() == model.get_params()
    assert not hasattr(model, "embedding_")
    assert model.set_params(mu=3.0).mu == 3.0


# --- linear alignment ---------------------------------------------------------------------------
def test_linear_alignment_matches_dense_generalized_problem():
    rng = np.random.default_rng(7)
    Xa, Xb = rng.normal(size=(60, 4)), rng.normal(size=(50, 3))
    pairs = np.c_[np.arange(10), np.arange(10)]
    problem = AlignmentProblem({"a": Xa, "b": Xb}, anchors=Correspondence.from_pairs(pairs, ("a", "b")))
    reg = 1e-3
    mu = 100.0  # the default
    model = LinearAlignment(n_components=3, n_neighbors=6, reg=reg).fit(problem)
    W = np.zeros((110, 110))
    W[:60, :60] = dense_local_knn(Xa, 6)
    W[60:, 60:] = dense_local_knn(Xb, 6)
    W[pairs[:, 0], 60 + pairs[:, 1]] = W[60 + pairs[:, 1], pairs[:, 0]] = mu
    D = np.diag(W.sum(1))
    X = scipy.linalg.block_diag(Xa - Xa.mean(0), Xb - Xb.mean(0))
    B = X.T @ D @ X
    # gamma_v = reg * mean eigenvalue of X_v' D_v X_v = reg * trace / p_v
    ridge = np.r_[np.full(4, reg * np.trace(B[:4, :4]) / 4), np.full(3, reg * np.trace(B[4:, 4:]) / 3)]
    # the ridge: gamma on X'DX, 2 gamma on X'LX (so null-space directions sit at eigenvalue 2)
    values = scipy.linalg.eigh(X.T @ (D - W) @ X + np.diag(2 * ridge), B + np.diag(ridge), eigvals_only=True)
    np.testing.assert_allclose(model.eigenvalues_, values[:3], rtol=1e-8)
    F = np.vstack([model.embedding_.projections["a"], model.embedding_.projections["b"]])
    np.testing.assert_allclose(F.T @ (B + np.diag(ridge)) @ F, np.eye(3), atol=1e-8)


def test_linear_alignment_more_features_than_rows_is_not_degenerate():
    # p = 150 > n = 40: a plain ridge would return null-space directions with cost 0
    rng = np.random.default_rng(8)
    Z = rng.normal(size=(40, 2))
    Xa = Z @ rng.normal(size=(2, 150)) + 0.01 * rng.normal(size=(40, 150))
    Xb = Z @ rng.normal(size=(2, 120)) + 0.01 * rng.normal(size=(40, 120))
    problem = AlignmentProblem.paired({"a": Xa, "b": Xb}).split_anchors(0.5, seed=0)
    dense = LinearAlignment(n_components=2, n_neighbors=5, eigen_solver="dense").fit(problem)
    lanczos = LinearAlignment(n_components=2, n_neighbors=5, eigen_solver="arpack").fit(problem)
    np.testing.assert_allclose(lanczos.eigenvalues_, dense.eigenvalues_, rtol=1e-7)
    emb = dense.embedding_
    assert np.linalg.norm(emb["a"], axis=0).min() > 1e-3
    assert dense.eigenvalues_.min() > 1e-6
    np.testing.assert_allclose(emb.transform("b", Xb), emb["b"], atol=1e-10)
    assert foscttm(emb, problem) < 0.1


def test_linear_alignment_cross_view_map_recovers_rotation():
    rng = np.random.default_rng(9)
    X = rng.normal(size=(120, 3)) * [3.0, 2.0, 1.0]
    Q = random_orthogonal(3, rng, det=-1)
    problem = AlignmentProblem.paired({"a": X, "b": X @ Q}).split_anchors(0.3, seed=0)
    model = LinearAlignment(n_components=3, n_neighbors=6, mu=10.0).fit(problem)
    np.testing.assert_allclose(model.cross_view_map("a", "b"), Q, atol=1e-8)
    np.testing.assert_allclose(model.cross_view_map("b", "a"), Q.T, atol=1e-8)


# --- baselines ----------------------------------------------------------------------------------
def test_cca_canonical_correlations_match_brute_force():
    rng = np.random.default_rng(10)
    Z = rng.normal(size=(300, 2))
    Xa = np.c_[Z, rng.normal(size=(300, 2))] @ rng.normal(size=(4, 4))
    Xb = np.c_[Z @ rng.normal(size=(2, 2)), rng.normal(size=(300, 1))] + 0.5 * rng.normal(size=(300, 3))
    problem = AlignmentProblem.paired({"a": Xa, "b": Xb}).split_anchors(150, seed=0)
    reg = 0.01
    model = CCAAlignment(n_components=2, reg=reg).fit(problem)
    rows = anchor_tuples(problem)["a"]
    A, B = Xa[rows] - Xa[rows].mean(0), Xb[rows] - Xb[rows].mean(0)
    Caa, Cbb, Cab = A.T @ A, B.T @ B, A.T @ B
    Caa += reg * np.trace(Caa) / 4 * np.eye(4)
    Cbb += reg * np.trace(Cbb) / 3 * np.eye(3)
    lhs = np.block([[np.zeros((4, 4)), Cab], [Cab.T, np.zeros((3, 3))]])
    rho = scipy.linalg.eigh(lhs, scipy.linalg.block_diag(Caa, Cbb), eigvals_only=True)[::-1][:2]
    np.testing.assert_allclose(model.eigenvalues_, rho, rtol=1e-8)
    # the canonical variates of the anchors are correlated by rho (ridge variance normalised to 1)
    za, zb = model.embedding_["a"][rows], model.embedding_["b"][rows]
    np.testing.assert_allclose(np.sum(za * zb, axis=0), rho, rtol=1e-8)


def test_least_squares_is_the_pseudo_inverse_solution():
    rng = np.random.default_rng(11)
    Xa, Xb = rng.normal(size=(40, 5)), rng.normal(size=(40, 30))  # p_b = 30 > 12 anchors
    problem = AlignmentProblem.paired({"a": Xa, "b": Xb}).split_anchors(12, seed=0)
    model = LeastSquaresAlignment(n_components=3, direction="to_first").fit(problem)
    rows = problem.anchors_between("a", "b").index_a
    Xc, Yc = Xb[rows] - Xb[rows].mean(0), Xa[rows] - Xa[rows].mean(0)
    np.testing.assert_allclose(model.coef_[("b", "a")], np.linalg.pinv(Xc) @ Yc, atol=1e-10)
    # on the anchors, b's coordinates are the projected reference rows exactly (p_b > anchors)
    emb = model.embedding_
    np.testing.assert_allclose(emb["b"][rows], emb["a"][rows], atol=1e-8)


def test_affine_alignment_recovers_an_affine_relation():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(80, 3)) * [3.0, 2.0, 1.0]
    A = rng.normal(size=(3, 3))
    problem = AlignmentProblem.paired({"a": X, "b": X @ A + 4.0}).split_anchors(10, seed=0)
    model = AffineAlignment(n_components=3, embedding="pca").fit(problem)
    np.testing.assert_allclose(model.embedding_["b"], model.embedding_["a"], atol=1e-8)
    too_few = problem.replace(anchors=[Correspondence.from_pairs([(0, 0), (1, 1), (2, 2)], ("a", "b"))])
    with pytest.raises(ValueError, match="needs at least 4"):
        AffineAlignment(n_components=3, embedding="pca").fit(too_few)


def test_anchor_similarity_values():
    Xa = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
    Xb = 2.0 * Xa
    problem = AlignmentProblem.paired({"a": Xa, "b": Xb})
    problem = problem.replace(anchors=[Correspondence.from_pairs([(0, 0), (2, 2)], ("a", "b"))])
    emb = AnchorSimilarityBaseline(kernel="heat", sigma=5.0).fit(problem).embedding_
    np.testing.assert_allclose(emb["a"][1], np.exp(-np.array([25.0, 25.0]) / 50.0))
    # default sigma: the median positive point-to-anchor distance of each view, 7.5 in a (15 in b)
    default = AnchorSimilarityBaseline().fit(problem).embedding_
    np.testing.assert_allclose(default["a"], default["b"], atol=1e-12)
    np.testing.assert_allclose(default["a"][1], np.exp(-25.0 / (2 * 7.5 ** 2)) * np.ones(2))


def test_baseline_errors():
    X = np.random.default_rng(0).normal(size=(20, 2))
    problem = AlignmentProblem.paired({"a": X, "b": X}).split_anchors(5, seed=0)
    with pytest.raises(ValueError, match=r"n_components=3 is out of range: CCA .* allows 1 to 2"):
        CCAAlignment(n_components=3).fit(problem)
    with pytest.raises(ValueError, match="kernel must be"):
        AnchorSimilarityBaseline(kernel="cosine").fit(problem)
    with pytest.raises(ValueError, match="n_components must be 2"):
        ProcrustesAlignment(n_components=1, embedding="none").fit(problem)


def test_within_view_affinity_is_the_local_scaling_or_heat_kernel_knn_graph():
    X, _ = swiss_roll(60)
    np.testing.assert_allclose(within_view_affinity(X, 5).toarray(), dense_local_knn(X, 5), atol=1e-14)
    np.testing.assert_allclose(within_view_affinity(X, 12).toarray(), dense_local_knn(X, 12), atol=1e-14)
    np.testing.assert_allclose(within_view_affinity(X, 5, affinity="heat").toarray(), dense_heat_knn(X, 5),
                               atol=1e-14)
    with pytest.raises(ValueError, match="sigma is the width of affinity='heat'"):
        within_view_affinity(X, 5, sigma=1.0)
    assert sp.issparse(within_view_affinity(X, 5, affinity="connectivity"))
