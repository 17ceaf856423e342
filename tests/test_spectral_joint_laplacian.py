"""Joint-Laplacian (instance-level) alignment, its within-view graphs, and every method on identical views."""

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from sklearn.base import clone
from spectral_helpers import (  # tests/spectral_helpers.py
    DENSE_AFFINITY,
    dense_heat_knn,
    dense_local_knn,
    random_orthogonal,
    swiss_roll,
)

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
)
from bayesalign.spectral._base import within_view_affinity

ALL_METHODS = [
    JointLaplacianAlignment(n_components=3, n_neighbors=8),
    JointLaplacianAlignment(n_components=3, n_neighbors=8, hard_constraints=True),
    LinearAlignment(n_components=3, n_neighbors=8),
    ProcrustesAlignment(n_components=3, embedding="laplacian", n_neighbors=8),
    ProcrustesAlignment(n_components=3, n_neighbors=8),  # LPP
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


def test_within_view_affinity_is_the_local_scaling_or_heat_kernel_knn_graph():
    X, _ = swiss_roll(60)
    np.testing.assert_allclose(within_view_affinity(X, 5).toarray(), dense_local_knn(X, 5), atol=1e-14)
    np.testing.assert_allclose(within_view_affinity(X, 12).toarray(), dense_local_knn(X, 12), atol=1e-14)
    np.testing.assert_allclose(within_view_affinity(X, 5, affinity="heat").toarray(), dense_heat_knn(X, 5),
                               atol=1e-14)
    with pytest.raises(ValueError, match="sigma is the width of affinity='heat'"):
        within_view_affinity(X, 5, sigma=1.0)
    assert sp.issparse(within_view_affinity(X, 5, affinity="connectivity"))
