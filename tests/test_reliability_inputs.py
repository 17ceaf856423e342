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
