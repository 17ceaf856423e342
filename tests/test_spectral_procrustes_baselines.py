"""Procrustes alignment and the papers' baselines (CCA, least squares, affine, anchor similarities)."""

import numpy as np
import pytest
import scipy.linalg
from spectral_helpers import (  # tests/spectral_helpers.py
    random_orthogonal,
)

from bayesalign.data import AlignmentProblem, Correspondence
from bayesalign.spectral import (
    AffineAlignment,
    AnchorSimilarityBaseline,
    CCAAlignment,
    LeastSquaresAlignment,
    ProcrustesAlignment,
    procrustes,
)
from bayesalign.spectral._base import anchor_tuples


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
