"""Inputs refused clearly at the boundary that meets them."""

import numpy as np
import pytest

import bayesalign as ba


@pytest.mark.parametrize("every_column", [False, True])
def test_mrd_refuses_missing_entries_naming_the_view(every_column):
    # the collapsed MRD has no model of missing entries: a NaN is refused, never taken for a constant column
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(12, 3))
    Y[0, 1] = np.nan
    if every_column:
        Y[1, 0] = Y[2, 2] = np.nan
    views = ba.Views({"a": rng.normal(size=(12, 2)), "b": Y}, allow_missing=True)
    for data in (views, ba.AlignmentProblem(views)):
        with pytest.raises(ValueError, match=r"view 'b' has \d missing \(NaN\)"):
            ba.MRD(latent_dim=2, num_inducing=4, max_iter=2).fit(data)


def test_timedelta_arrays_are_not_numbers():
    td = np.array([[1, 2], [3, 4]], dtype="timedelta64[s]")
    with pytest.raises(TypeError, match=r"view 'a'.*timedelta64"):
        ba.Views({"a": td, "b": np.zeros((2, 2))})
    with pytest.raises(TypeError, match="timedelta64"):
        ba.Correspondence(("a", "b"), np.array([1, 2], dtype="timedelta64[s]"), [0, 1])


@pytest.mark.parametrize("build", [
    lambda: ba.Correspondence(("a", "b"), [True, 0], [0, 1]),
    lambda: ba.Correspondence.from_pairs([(True, 0), (0, 1)], ("a", "b")),
    lambda: ba.Correspondence.from_pairs([[0, np.True_]], ("a", "b")),
])
def test_a_bool_in_an_index_list_is_no_row(build):
    with pytest.raises(TypeError, match="bool"):
        build()
