"""Multiscale alignment with diffusion wavelets (section 5.3.3)."""

import numpy as np
import pytest
import scipy.linalg
from spectral_helpers import (  # tests/spectral_helpers.py
    paired_foscttm,
    swiss_problem,
)

from bayesalign.graph import heat_kernel, knn_graph
from bayesalign.spectral._base import within_view_affinity
from bayesalign.spectral.multiscale import MultiscaleAlignment, diffusion_wavelets


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


def test_multiscale_levels_are_the_generalized_eigenspaces():

    from bayesalign.graph import laplacian
    from bayesalign.spectral._base import correspondence_matrices, joint_adjacency

    full, problem = swiss_problem(n=200, dim=6)
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
    assert paired_foscttm(model.embedding_["X"], model.embedding_["Y"]) < 0.05
    assert paired_foscttm(model.embeddings_[0]["X"], model.embeddings_[0]["Y"]) > 0.3


def test_multiscale_instance_level_and_bad_input():
    _, problem = swiss_problem(n=150, dim=3)
    model = MultiscaleAlignment(level="instance", epsilon=1e-4).fit(problem)
    assert model.dimensions_[0] > model.dimensions_[-1] >= 1
    assert all(np.isfinite(e["X"]).all() for e in model.embeddings_)
    assert min(paired_foscttm(e["X"], e["Y"]) for e in model.embeddings_) < 0.1
    with pytest.raises(ValueError, match="max_samples"):
        MultiscaleAlignment(level="instance", max_samples=100).fit(problem)
    with pytest.raises(ValueError, match="disconnected"):
        MultiscaleAlignment().fit(problem.replace(anchors=None))  # no anchors: two separate graphs


def test_multiscale_auto_level_is_instance_for_small_problems_else_feature():
    _, problem = swiss_problem(n=150, dim=3)  # 300 rows in all
    small = MultiscaleAlignment(epsilon=1e-4).fit(problem)
    instance = MultiscaleAlignment(epsilon=1e-4, level="instance").fit(problem)
    assert small.level_ == "instance" and small.dimensions_ == instance.dimensions_
    np.testing.assert_allclose(small.embedding_["X"], instance.embedding_["X"], atol=1e-12)  # same computation
    large = MultiscaleAlignment(epsilon=1e-4, auto_instance_limit=299).fit(problem)
    assert large.level_ == "feature" and large.embedding_.projections is not None
    with pytest.raises(ValueError, match="level must be 'auto', 'feature' or 'instance'"):
        MultiscaleAlignment(level="both").fit(problem)
