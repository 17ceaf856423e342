"""Regression tests of a bug hunt over metrics, compare and the dataset loaders."""

from __future__ import annotations

import numpy as np
import pytest

from bayesalign import metrics
from bayesalign.data import Alignment, AlignmentProblem, Correspondence, LatentEmbedding


def _anchored_problem(n: int = 6, anchors=(0, 1)) -> AlignmentProblem:
    X = np.random.default_rng(0).standard_normal((n, 2))
    rows = np.asarray(anchors)
    return AlignmentProblem({"a": X, "b": X + 1.0}, anchors=[Correspondence(("a", "b"), rows, rows)],
                            truth=[Correspondence.identity(n, ("a", "b"))])


# metrics.evaluate ------------------------------------------------------------------------------
def test_evaluate_scores_only_unaligned_rows_like_the_single_metrics():
    # an alignment over every row (anchors 0, 1 included as candidates): anchors right, and of the
    # held-out rows 2..5 only row 2 right; anchors are given, not found, so they must not count
    problem = _anchored_problem()
    al = Alignment.from_permutation([0, 1, 2, 4, 5, 3], views=("a", "b"),
                                    probabilities=[1.0, 1.0, 0.5, 0.5, 0.5, 0.5])
    out = metrics.evaluate(al, problem)
    # exact ratios of small counts: 1 of the 4 held-out true pairs recovered
    assert out["accuracy"] == pytest.approx(0.25, abs=1e-12)
    assert out["accuracy"] == pytest.approx(metrics.matching_accuracy(al, problem), abs=1e-12)
    assert out["kendall_tau"] == pytest.approx(metrics.kendall_tau_distance(al, problem), abs=1e-12)
    # the four held-out pairs at p = 0.5 with one right: |1/4 - 1/2| = 0.25
    assert out["ece"] == pytest.approx(0.25, abs=1e-12)


# NaN confidences -------------------------------------------------------------------------------
@pytest.mark.parametrize("metric", [metrics.expected_calibration_error, metrics.brier_score,
                                    metrics.precision_at_coverage])
def test_nan_confidence_is_refused_naming_its_position(metric):
    with pytest.raises(ValueError, match=r"confidence 1 is NaN"):
        metric(np.array([0.5, np.nan, 0.2]), np.array([True, False, False]))


# retrieval metrics: scores that do not fit the problem -----------------------------------------
@pytest.mark.parametrize("metric", [metrics.foscttm, metrics.top_k_accuracy, metrics.mean_reciprocal_rank])
def test_a_cost_matrix_of_the_wrong_shape_for_the_problem_is_refused(metric):
    problem = _anchored_problem(n=5, anchors=(0,))
    cost = np.random.default_rng(1).random((6, 6))  # one row and column more than the views have
    with pytest.raises(ValueError, match=r"\(6, 6\).*5 and 5 rows"):
        metric(cost, problem, views=("a", "b"))


def test_label_transfer_without_shared_dimensions_says_so():
    X = np.arange(8.0).reshape(4, 2)
    emb = LatentEmbedding({"a": X, "b": X}, shared_dims=[])
    labels = {"a": np.array([0, 0, 1, 1]), "b": np.array([0, 0, 1, 1])}
    with pytest.raises(ValueError, match="no shared dimensions"):
        metrics.label_transfer_accuracy(emb, labels, k=1)


# datasets --------------------------------------------------------------------------------------
@pytest.mark.parametrize("argument, value", [("noise", "a"), ("noise", None), ("scale", None), ("warp", None),
                                             ("warp", "0.2")])
def test_manifold_pair_names_a_non_numeric_argument(argument, value):
    from bayesalign.datasets import manifold_pair

    with pytest.raises(ValueError, match=f"manifold_pair: {argument} must be"):
        manifold_pair("helix", n=20, **{argument: value})


@pytest.mark.parametrize("call", [lambda d: d.digits_halves(digit=True), lambda d: d.mocap(step=True),
                                  lambda d: d.mfeat(("mor", "zer"), n_per_class=True)])
def test_loaders_refuse_a_bool_for_an_integer_argument(call):
    from bayesalign import datasets

    with pytest.raises(ValueError, match="integer"):
        call(datasets)


# compare ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("seeds", [0, -2, 2.5])
def test_run_comparison_refuses_a_count_of_seeds_that_is_not_positive(seeds):
    from bayesalign.compare import run_comparison

    with pytest.raises(ValueError, match="seeds"):
        run_comparison({}, methods=["global-geometry"], seeds=seeds)


# io --------------------------------------------------------------------------------------------
def test_a_zip_suffix_is_refused_not_written_as_plain_text(tmp_path):
    import zipfile

    from bayesalign.io import InputError, read_view, write_view

    target = tmp_path / "v.csv.zip"
    with pytest.raises(InputError, match=r"unknown file type '\.zip'"):
        write_view(target, np.eye(2))  # it was written uncompressed under a .zip name
    assert not target.exists()
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr("v.csv", "1,2\n3,4\n")
    with pytest.raises(InputError, match=r"unknown file type '\.zip'"):
        read_view(target)  # a real zip was reported as "not a readable text file"


def test_counts_that_are_not_positive_integers_are_refused_by_name():
    # k = 1.5 and n_bins = 2.5 were silently rounded down
    D = np.array([[0.1, 0.5], [0.2, 0.3]])
    with pytest.raises(ValueError, match="k must be an int >= 1, got 1.5"):
        metrics.top_k_accuracy(D, [0, 1], k=1.5)
    with pytest.raises(ValueError, match="n_bins must be an int >= 1, got 2.5"):
        metrics.expected_calibration_error([0.9, 0.2], [True, False], n_bins=2.5)
    assert metrics.top_k_accuracy(D, [0, 1], k=np.int64(2)) == 1.0
