"""Feature-level (linear) alignment: manifold projections against the dense generalized problem."""

import numpy as np
import scipy.linalg
from spectral_helpers import (  # tests/spectral_helpers.py
    dense_local_knn,
    random_orthogonal,
)

from bayesalign.data import AlignmentProblem, Correspondence
from bayesalign.metrics import foscttm
from bayesalign.spectral import (
    LinearAlignment,
)


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
