"""The synthetic benchmarks: MMD-MA's three simulations and the single-cell simulator (shapes, seeds, the
truth and labels, the negative-binomial law of the counts, the sparsity of the accessibility)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

import bayesalign as ba
from bayesalign.datasets import (
    MMDMA_KINDS,
    accessibility_view,
    branching_trajectory,
    count_view,
    mmdma_simulation,
    single_cell_simulation,
)


def _shared_neighbours(X, Y, k=5) -> float:
    """Mean fraction of each row's k nearest neighbours that are the same rows in both views."""
    nx = NearestNeighbors(n_neighbors=k).fit(X).kneighbors(return_distance=False)
    ny = NearestNeighbors(n_neighbors=k).fit(Y).kneighbors(return_distance=False)
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(nx, ny)]))


@pytest.mark.parametrize("kind", MMDMA_KINDS)
def test_mmdma_simulations_pair_the_same_points_in_two_views(kind):
    problem = mmdma_simulation(kind, n_samples=150, n_features=(40, 60), seed=0)
    assert problem.views.n_samples == {"view1": 150, "view2": 150}
    assert problem.views.n_features == {"view1": 40, "view2": 60}
    truth = problem.truth_between("view1", "view2")
    np.testing.assert_array_equal(truth.index_a, truth.index_b)
    np.testing.assert_array_equal(problem.labels["view1"], problem.labels["view2"])
    assert set(problem.labels["view1"].tolist()) == {0, 1, 2}
    # the truth is right: both views keep the same neighbourhoods, which a shuffled pairing does not
    X, Y = problem.views["view1"], problem.views["view2"]
    assert _shared_neighbours(X, Y) > 0.3
    assert _shared_neighbours(X, Y[np.random.default_rng(0).permutation(150)]) < 0.1  # chance is 5/149
    again = mmdma_simulation(kind, n_samples=150, n_features=(40, 60), seed=0)
    np.testing.assert_array_equal(again.views["view2"], Y)
    assert not np.allclose(mmdma_simulation(kind, n_samples=150, n_features=(40, 60), seed=1).views["view2"], Y)


def test_mmdma_defaults_are_the_papers_sizes_and_branch_labels_are_thirds():
    problem = ba.datasets.mmdma_simulation("branch", seed=3)
    assert problem.views.n_samples["view1"] == 300
    assert problem.views.n_features == {"view1": 1000, "view2": 2000}
    np.testing.assert_array_equal(np.bincount(problem.labels["view1"]), [100, 100, 100])
    with pytest.raises(ValueError, match="kind must be one of"):
        mmdma_simulation("torus")


def test_branching_trajectory_puts_each_type_on_its_segment():
    latent, pseudotime, cell_type = branching_trajectory(3000, n_branches=3, latent_dim=4, jitter=0.0, seed=0)
    assert latent.shape == (3000, 4) and set(cell_type.tolist()) == {0, 1, 2, 3}
    np.testing.assert_allclose(np.linalg.norm(latent[cell_type == 0], axis=1), pseudotime[cell_type == 0])
    branch = cell_type > 0
    assert np.all((pseudotime[branch] >= 1) & (pseudotime[branch] <= 1.8))
    longest = [pseudotime[cell_type == b].max() - 1 for b in (1, 2, 3)]  # lengths 0.8, 0.65, 0.5
    np.testing.assert_allclose(longest, [0.8, 0.65, 0.5], atol=0.01)  # 750 cells a branch: the max is near the end


def test_counts_follow_the_negative_binomial_mean_variance_law():
    latent = np.random.default_rng(0).normal(size=(20000, 3))
    counts, mean = count_view(latent, n_genes=40, dispersion=2.0, seed=1)
    np.testing.assert_array_equal(counts, np.round(counts))
    assert counts.min() >= 0
    residual = (counts - mean) / np.sqrt(mean + mean**2 / 2.0)  # [n, G]: mean 0, variance 1 under the law
    # 800,000 entries: Monte Carlo standard errors about 1e-3 for the mean and a few 1e-3 for the variance
    assert abs(residual.mean()) < 0.01
    assert abs(residual.var() - 1.0) < 0.05
    poisson = (counts - mean) / np.sqrt(mean)
    assert poisson.var() > 1.5  # over-dispersed: a Poisson law would give 1


def test_accessibility_is_binary_with_the_intended_sparsity():
    latent = np.random.default_rng(0).normal(size=(6000, 3))
    open_, probability = accessibility_view(latent, n_peaks=200, sparsity=0.05, seed=0)
    assert set(np.unique(open_).tolist()) == {0.0, 1.0}
    # offsets set on 2000 of the 6000 rows: each peak's open fraction within sampling error (sd ~0.005)
    assert abs(open_.mean() - 0.05) < 0.003
    assert np.max(np.abs(open_.mean(0) - 0.05)) < 0.03
    assert np.median(probability.std(0)) > 0.02  # the peaks vary with the latent point


def test_single_cell_simulation_pairs_cells_and_labels_them():
    problem = single_cell_simulation(2000, n_genes=200, n_peaks=300, n_branches=2, seed=0)
    assert problem.views.names == ("rna", "atac")
    assert problem.views.n_samples == {"rna": 2000, "atac": 2000}
    np.testing.assert_array_equal(problem.labels["rna"], problem.labels["atac"])
    assert set(problem.labels["rna"].tolist()) == {0, 1, 2}
    truth = problem.truth_between("rna", "atac")
    np.testing.assert_array_equal(truth.index_a, np.arange(2000))
    np.testing.assert_array_equal(truth.index_b, np.arange(2000))
    rna, atac = np.log1p(problem.views["rna"]), problem.views["atac"]
    # the same cells: the types are separable in both views by their own nearest neighbours
    for X in (rna, atac):
        neighbours = NearestNeighbors(n_neighbors=10).fit(X).kneighbors(return_distance=False)
        agree = np.mean(problem.labels["rna"][neighbours] == problem.labels["rna"][:, None])
        assert agree > 0.42  # a third by chance (three types equally likely; 20,000 neighbours); noisy by design
    again = single_cell_simulation(2000, n_genes=200, n_peaks=300, seed=0)
    np.testing.assert_array_equal(again.views["atac"], atac)
    gaussian = single_cell_simulation(300, n_genes=20, n_peaks=10, second_view="gaussian", seed=0)
    assert gaussian.views.names == ("rna", "protein") and gaussian.views.n_features["protein"] == 10
    with pytest.raises(ValueError, match="second_view must be"):
        single_cell_simulation(10, second_view="methylation")
