"""Unsupervised alignment by local pattern matching (Wang, Krafft & Mahadevan 2011, section 5.3.4)."""

import itertools

import numpy as np
import pytest
from scipy.spatial.distance import cdist
from spectral_helpers import (  # tests/spectral_helpers.py
    paired_foscttm,
    rotation,
)

from bayesalign.data import AlignmentProblem
from bayesalign.datasets.synthetic import manifold_pair
from bayesalign.spectral.local_patterns import (
    LocalPatternAlignment,
    local_pattern_correspondence,
    local_pattern_distance,
    local_pattern_distances,
    local_patterns,
)


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
    assert paired_foscttm(emb["a"], emb["b"]) < 0.01  # observed 0.0
    # a noisy S curve: ~89% of the 129 mutual matches are right; the joint Laplacian tolerates the
    # rest (observed FOSCTTM 0.014; Global geometry, whose eq. 4 takes the *minimum* over bridges,
    # is ruined by the wrong ones: 0.44)
    full = manifold_pair("s_curve", n=200, noise=0.01, dim=3, seed=5)
    model = LocalPatternAlignment(JointLaplacianAlignment(n_components=2), n_neighbors=5).fit(full)
    corr = model.correspondences_[("X", "Y")]
    assert 0.8 < np.mean(corr.index_a == corr.index_b) < 1.0
    assert paired_foscttm(model.embedding_["X"], model.embedding_["Y"]) < 0.05


def test_local_patterns_rejects_duplicates_and_large_k():
    X = np.vstack([np.zeros((4, 2)), np.random.default_rng(0).normal(size=(10, 2))])
    with pytest.raises(ValueError, match="duplicate"):
        local_patterns(X, n_neighbors=3)
    with pytest.raises(ValueError, match="n_neighbors"):
        local_patterns(np.random.default_rng(0).normal(size=(20, 2)), n_neighbors=9)
    with pytest.raises(ValueError, match="rows"):
        local_patterns(np.random.default_rng(0).normal(size=(4, 2)), n_neighbors=4)
