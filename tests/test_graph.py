"""bayesalign.graph against brute-force dense computations and closed forms."""

import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp

from bayesalign.graph import (
    DEGREE_RATIO_LIMIT,
    check_connected,
    check_degrees,
    connect_components,
    connected_component_labels,
    degree_spread,
    epsilon_graph,
    geodesic_distances,
    heat_kernel,
    knn_graph,
    laplacian,
    local_scales,
    local_scaling_kernel,
    median_edge_length,
    smallest_generalized_eigenvectors,
)


def dense_distances(X):
    return np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))


def brute_knn(X, k):
    """Directed 0/1 k-NN adjacency (self excluded) by sorting the dense distance matrix."""
    dist = dense_distances(X)
    np.fill_diagonal(dist, np.inf)
    A = np.zeros_like(dist, dtype=bool)
    nearest = np.argsort(dist, axis=1, kind="stable")[:, :k]
    A[np.arange(len(X))[:, None], nearest] = True
    return A, dense_distances(X)


@pytest.fixture
def points():
    return np.random.default_rng(0).normal(size=(40, 3))


@pytest.mark.parametrize("symmetrize", ["or", "and", "mutual"])
def test_knn_graph_matches_brute_force(points, symmetrize):
    A, dist = brute_knn(points, 5)
    sym = (A | A.T) if symmetrize == "or" else (A & A.T)
    G = knn_graph(points, 5, symmetrize=symmetrize).toarray()
    np.testing.assert_allclose(G, np.where(sym, dist, 0.0), rtol=1e-12, atol=0)
    C = knn_graph(points, 5, mode="connectivity", symmetrize=symmetrize).toarray()
    np.testing.assert_array_equal(C, sym.astype(float))


def test_knn_graph_directed_rows_hold_k_neighbours(points):
    G = knn_graph(points, 4, symmetrize=None)
    assert np.all(np.diff(G.indptr) == 4)
    assert G.diagonal().max() == 0


def test_knn_graph_bad_k(points):
    with pytest.raises(ValueError, match="n_neighbors must be between 1 and n - 1 = 39"):
        knn_graph(points, 40)


def test_epsilon_graph_matches_brute_force(points):
    dist = dense_distances(points)
    radius = np.median(dist)
    expected = np.where((dist < radius) & ~np.eye(len(points), dtype=bool), dist, 0.0)
    np.testing.assert_allclose(epsilon_graph(points, radius).toarray(), expected, rtol=1e-12)


def test_heat_kernel_formula_and_default_sigma(points):
    G = knn_graph(points, 6)
    dense = G.toarray()
    edges = dense[dense > 0]
    assert median_edge_length(G) == pytest.approx(np.median(edges))
    W = heat_kernel(G).toarray()
    sigma = np.median(edges)
    np.testing.assert_allclose(W, np.where(dense > 0, np.exp(-dense ** 2 / (2 * sigma ** 2)), 0.0), rtol=1e-12)
    W2 = heat_kernel(G, sigma=0.7).toarray()
    np.testing.assert_allclose(W2[dense > 0], np.exp(-edges ** 2 / (2 * 0.49)), rtol=1e-12)
    assert (W == W.T).all()


@pytest.mark.parametrize("k", [1, 4, 6])
def test_local_scales_are_the_kth_neighbour_distances(points, k):
    # Zelnik-Manor & Perona's sigma_i: the distance from i to its k-th nearest neighbour (k <= the
    # graph's k'), read off the "or"-symmetrised graph
    dist = dense_distances(points)
    np.fill_diagonal(dist, np.inf)
    expected = np.sort(dist, axis=1)[:, k - 1]
    np.testing.assert_allclose(local_scales(knn_graph(points, 6), k), expected, rtol=1e-12)


def test_local_scaling_kernel_formula(points):
    G = knn_graph(points, 6)
    dense = G.toarray()
    sigma = local_scales(G, 4)
    W = local_scaling_kernel(G, 4).toarray()
    np.testing.assert_allclose(W, np.where(dense > 0, np.exp(-dense ** 2 / np.outer(sigma, sigma)), 0.0), rtol=1e-12)
    assert (W == W.T).all()
    # an edge no longer than either end's sigma weighs at least exp(-1)
    short = (dense > 0) & (dense <= np.minimum.outer(sigma, sigma))
    assert W[short].min() >= np.exp(-1.0) - 1e-15


def test_degree_warning_names_the_stranded_rows():
    # three far-out rows: with one global width their degrees underflow towards 0
    rng = np.random.default_rng(2)
    X = rng.normal(size=(100, 3))
    X[[7, 30, 61]] *= 40.0
    W = heat_kernel(knn_graph(X, 8))
    ratio, degrees = degree_spread(W)
    np.testing.assert_allclose(degrees, W.toarray().sum(axis=1), rtol=1e-12)
    assert degrees[[7, 30, 61]].max() < 1e-80 and ratio > DEGREE_RATIO_LIMIT  # inf when one underflows to 0
    with pytest.warns(RuntimeWarning, match=r"view 'x'.* rows \(degree\) (7|30|61) .*(7|30|61) .*(7|30|61) \("):
        check_degrees(W, "view 'x'")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ordinary data: no warning
        check_degrees(heat_kernel(knn_graph(rng.normal(size=(100, 3)), 8)), "view 'y'")


@pytest.mark.parametrize("normalized", [False, "sym", "rw"])
def test_laplacian_against_dense_formulas(points, normalized):
    W = heat_kernel(knn_graph(points, 5)).toarray()
    d = W.sum(1)
    expected = {
        False: np.diag(d) - W,
        "sym": np.eye(len(d)) - W / np.sqrt(np.outer(d, d)),
        "rw": np.eye(len(d)) - W / d[:, None],
    }[normalized]
    L, D = laplacian(sp.csr_matrix(W), normalized=normalized)
    np.testing.assert_allclose(L.toarray(), expected, atol=1e-14)
    np.testing.assert_allclose(D.toarray(), np.diag(d))


def test_laplacian_rejects_asymmetric_and_negative():
    with pytest.raises(ValueError, match="symmetric"):
        laplacian(np.array([[0.0, 1.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="non-negative"):
        laplacian(np.array([[0.0, -1.0], [-1.0, 0.0]]))


def floyd_warshall(G):
    D = np.where(G > 0, G, np.inf)
    np.fill_diagonal(D, 0.0)
    for k in range(len(D)):
        D = np.minimum(D, D[:, k:k + 1] + D[k:k + 1, :])
    return D


def test_geodesic_distances_match_floyd_warshall(points):
    G = knn_graph(points, 6)
    expected = floyd_warshall(G.toarray())
    np.testing.assert_allclose(geodesic_distances(points, 6), expected, rtol=1e-12)
    np.testing.assert_allclose(geodesic_distances(G), expected, rtol=1e-12)
    rows = geodesic_distances(points, 6, sources=[3, -1])
    np.testing.assert_allclose(rows, expected[[3, len(points) - 1]], rtol=1e-12)


def test_geodesic_on_a_circle_is_arc_length():
    angles = np.linspace(0, 2 * np.pi, 400, endpoint=False)
    circle = np.c_[np.cos(angles), np.sin(angles)]
    geo = geodesic_distances(circle, 2, sources=[0])[0]
    arc = np.minimum(angles, 2 * np.pi - angles)
    # chords of 2 pi / 400 underestimate the arc by a relative 1 - sinc(pi/400)/..., about 1e-5
    np.testing.assert_allclose(geo, arc, rtol=2e-5, atol=1e-12)


@pytest.fixture
def two_clusters():
    rng = np.random.default_rng(1)
    return np.vstack([rng.normal(size=(10, 2)), rng.normal(size=(5, 2)) + 100.0])


def test_disconnected_graph_raises_with_sizes(two_clusters):
    G = knn_graph(two_clusters, 3)
    with pytest.raises(ValueError, match=r"2 connected components of sizes 10, 5"):
        check_connected(G, name="view 'a'")
    with pytest.raises(ValueError, match="disconnected: 2 connected components"):
        geodesic_distances(two_clusters, 3)


def test_connect_components_adds_the_shortest_edge(two_clusters):
    G = knn_graph(two_clusters, 3)
    joined = connect_components(G, two_clusters)
    assert connected_component_labels(joined)[0] == 1
    dist = dense_distances(two_clusters)
    between = dist[:10, 10:]
    i, j = np.unravel_index(np.argmin(between), between.shape)
    added = (joined - G).toarray()
    assert np.count_nonzero(added) == 2  # one symmetric edge
    assert added[i, 10 + j] == pytest.approx(between.min()) and added[10 + j, i] == added[i, 10 + j]
    geo = geodesic_distances(two_clusters, 3, connect_components=True)
    assert np.isfinite(geo).all()


def test_connect_many_components_is_a_minimum_spanning_forest_of_clusters():
    # 6 tight clusters on a line at 0, 10, 20, ...: the joined graph must link neighbours only
    rng = np.random.default_rng(2)
    X = np.vstack([rng.normal(scale=0.1, size=(8, 1)) + 10.0 * c for c in range(6)])
    X = np.hstack([X, np.zeros_like(X)])
    G = knn_graph(X, 3, mode="connectivity")
    assert connected_component_labels(G)[0] == 6
    joined = connect_components(G, X, mode="connectivity")
    assert connected_component_labels(joined)[0] == 1
    added = sp.triu(joined - G).tocoo()
    assert added.nnz == 5 and np.all(added.data == 1.0)
    clusters = np.round(X[:, 0] / 10.0)
    assert sorted(np.abs(clusters[added.row] - clusters[added.col]).tolist()) == [1.0] * 5


def test_duplicate_points_give_finite_weights_and_embedding():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2))
    X = np.vstack([X, X[:10]])  # ten exact duplicates
    G = knn_graph(X, 4)
    assert G[0, 30] > 0 and G[0, 30] < 1e-8  # the duplicate edge survives, with a tiny length
    W = heat_kernel(G)
    assert np.isfinite(W.data).all() and W[0, 30] == pytest.approx(1.0)
    L, D = laplacian(W)
    values, F = smallest_generalized_eigenvectors(L, D, 3)
    assert np.isfinite(F).all() and np.isfinite(values).all()
    assert np.isfinite(geodesic_distances(X, 4)).all()
    assert np.isfinite(epsilon_graph(X, 0.5).data).all()


# --- generalized eigenproblem ------------------------------------------------------------------
def check_eigenpairs(L, D, values, F, tol=1e-8):
    L, D = L.toarray(), D.toarray()
    residual = L @ F - D @ F * values
    assert np.abs(residual).max() < tol * max(1.0, np.abs(L).max())
    np.testing.assert_allclose(F.T @ D @ F, np.eye(F.shape[1]), atol=tol)


@pytest.mark.parametrize("method", ["dense", "arpack", "lobpcg"])
def test_generalized_eigenvectors_match_dense_eigh(points, method):
    W = heat_kernel(knn_graph(points, 6))
    L, D = laplacian(W)
    values, F = smallest_generalized_eigenvectors(L, D, 4, method=method)
    check_eigenpairs(L, D, values, F)
    ref_values, ref_vectors = scipy.linalg.eigh(L.toarray(), D.toarray())
    assert ref_values[0] == pytest.approx(0.0, abs=1e-12)  # the trivial one, excluded
    np.testing.assert_allclose(values, ref_values[1:5], rtol=1e-8, atol=1e-12)
    ref = ref_vectors[:, 1:5]
    signs = np.sign(np.sum(ref * F, axis=0))
    np.testing.assert_allclose(F, ref * signs, atol=1e-6)
    np.testing.assert_allclose(F.T @ D @ np.ones(len(points)), 0.0, atol=1e-10)  # orthogonal to constant


def test_path_graph_closed_form():
    # path of n nodes: L f = lambda D f has lambda_j = 1 - cos(pi j / (n - 1)), j = 0..n-1
    n = 12
    W = sp.diags([np.ones(n - 1), np.ones(n - 1)], [-1, 1])
    values, F = smallest_generalized_eigenvectors(*laplacian(W), 5)
    np.testing.assert_allclose(values, 1 - np.cos(np.pi * np.arange(1, 6) / (n - 1)), atol=1e-12)
    values0, F0 = smallest_generalized_eigenvectors(*laplacian(W), 2, skip_trivial=False)
    assert values0[0] == pytest.approx(0.0, abs=1e-12)
    assert np.ptp(F0[:, 0]) < 1e-12  # the constant vector comes first without skip_trivial


@pytest.mark.parametrize("method", ["dense", "arpack"])
def test_disconnected_graph_excludes_one_trivial_vector_per_component(two_clusters, method):
    W = heat_kernel(knn_graph(two_clusters, 3))
    L, D = laplacian(W)
    values, F = smallest_generalized_eigenvectors(L, D, 3, method=method)
    check_eigenpairs(L, D, values, F)
    ref_values = scipy.linalg.eigh(L.toarray(), D.toarray(), eigvals_only=True)
    np.testing.assert_allclose(ref_values[:2], 0.0, atol=1e-12)
    np.testing.assert_allclose(values, ref_values[2:5], rtol=1e-8)
    labels = connected_component_labels(W)[1]
    for c in range(2):  # D-orthogonal to each component's indicator
        np.testing.assert_allclose(F.T @ D @ (labels == c), 0.0, atol=1e-10)
    with pytest.raises(ValueError, match=r"k must be between 1 and 13 \(15 nodes minus 2 trivial"):
        smallest_generalized_eigenvectors(L, D, 14)


def test_arpack_on_a_larger_graph_agrees_with_lobpcg():
    from sklearn.datasets import make_swiss_roll

    X, _ = make_swiss_roll(1600, random_state=0)
    L, D = laplacian(heat_kernel(knn_graph(X, 8)))
    values, F = smallest_generalized_eigenvectors(L, D, 5)  # auto -> arpack above 1500 nodes
    check_eigenpairs(L, D, values, F)
    values2, F2 = smallest_generalized_eigenvectors(L, D, 5, method="lobpcg")
    np.testing.assert_allclose(values2, values, rtol=1e-6)


def test_eigen_input_errors():
    W = sp.diags([np.ones(4), np.ones(4)], [-1, 1])
    L, D = laplacian(W)
    with pytest.raises(ValueError, match="degree"):
        smallest_generalized_eigenvectors(L, sp.diags(np.r_[0.0, np.ones(4)]), 1)
    with pytest.raises(ValueError, match="rows summing to zero"):
        smallest_generalized_eigenvectors(L + sp.identity(5), D, 1)
    with pytest.raises(ValueError, match="method must be"):
        smallest_generalized_eigenvectors(L, D, 1, method="magic")


def test_entity_graph_is_the_union_of_the_views_knn_graphs_mapped_to_entities():
    from bayesalign.graph import entity_graph

    rng = np.random.default_rng(4)
    a, b = rng.normal(size=(12, 3)), rng.normal(size=(9, 2))
    rows_a = np.arange(12)
    rows_b = np.r_[np.arange(4), 12 + np.arange(5)]  # b's first 4 rows are anchored to a's first 4
    W = entity_graph([a, b], [rows_a, rows_b], 17, n_neighbors=3).toarray()
    expected = np.zeros((17, 17))
    for X, rows in ((a, rows_a), (b, rows_b)):  # brute force: each row's 3 nearest other rows
        d = ((X[:, None] - X[None]) ** 2).sum(-1)
        np.fill_diagonal(d, np.inf)
        for i in range(len(X)):
            for j in np.argsort(d[i])[:3]:
                expected[rows[i], rows[j]] = expected[rows[j], rows[i]] = 1.0
    np.testing.assert_array_equal(W, expected)
    with pytest.raises(ValueError, match="one entity per row"):
        entity_graph([a], [rows_a[:5]], 17)
