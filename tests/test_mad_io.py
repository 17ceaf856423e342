"""MAD.save / MAD.load: a loaded MAD aligns exactly as the fitted one; no pickle; corrupt files named."""

import numpy as np
import pytest

import bayesalign as ba
from bayesalign.mad_io import MADFileError


@pytest.fixture(scope="module", params=["anchors", "all_rows"])
def fitted(request):
    problem = ba.datasets.mad_toy("linear_shared", seed=0, n_anchors=10).shuffle_unaligned(seed=0)
    mad = ba.MAD(latent_dim=3, num_inducing=8, seed=0, training=request.param,
                 mrd_options={"max_iter": 80, "warmup_iters": 20}).fit(problem)
    return problem, mad


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_loaded_mad_aligns_exactly_as_the_fitted_one(fitted, tmp_path):
    problem, mad = fitted
    path = tmp_path / "mad.npz"
    mad.save(path)
    loaded = ba.MAD.load(path)
    assert loaded.get_params() == mad.get_params()
    for matcher in ("hungarian", "sinkhorn"):
        ours, theirs = mad.align(matcher=matcher), loaded.align(matcher=matcher)
        # the same arrays in, the same code: identical output
        np.testing.assert_array_equal(theirs.index_a, ours.index_a)
        np.testing.assert_array_equal(theirs.index_b, ours.index_b)
        np.testing.assert_array_equal(theirs.probabilities, ours.probabilities)
    for view in problem.views.names:
        np.testing.assert_array_equal(loaded.embedding_.means[view], mad.embedding_.means[view])
    assert loaded.model_.elbo() == mad.model_.elbo()
    shared = {k: v.tolist() for k, v in mad.shared_dims_.items()}
    assert {k: v.tolist() for k, v in loaded.shared_dims_.items()} == shared
    assert loaded.shared_by_ == mad.shared_by_ == "resolution"
    for view in problem.views.names:
        np.testing.assert_array_equal(loaded.resolution_[view], mad.resolution_[view])
    # the file holds plain arrays only: numpy can read every entry without pickle
    with np.load(path, allow_pickle=False) as data:
        assert all(data[key].dtype != object for key in data.files)


def test_corrupt_or_foreign_files_are_named(fitted, tmp_path):
    _, mad = fitted
    truncated = tmp_path / "truncated.npz"
    mad.save(truncated)
    truncated.write_bytes(truncated.read_bytes()[:200])
    with pytest.raises(MADFileError, match="truncated.npz"):
        ba.MAD.load(truncated)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, meta=np.array('{"format": "something else"}'))
    with pytest.raises(MADFileError, match="foreign.npz: not a bayesalign MAD file"):
        ba.MAD.load(foreign)
    with pytest.raises(FileNotFoundError):
        ba.MAD.load(tmp_path / "missing.npz")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_file_from_before_shared_by_loads_with_the_relevance_rule(fitted, tmp_path):
    """Files written before MAD(shared_by=...) have neither ``shared_by_`` nor ``resolution_``: their shared
    dimensions were chosen by ARD relevance, the only rule then, and are loaded as saved."""
    import json

    problem, mad = fitted
    path, old = tmp_path / "mad.npz", tmp_path / "old.npz"
    mad.save(path)
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    meta = json.loads(str(arrays["meta"]))
    del meta["plain"]["shared_by_"], meta["resolution"]
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(old, **arrays)
    loaded = ba.MAD.load(old)
    assert loaded.shared_by_ == "relevance" and loaded.resolution_ is None
    assert {k: v.tolist() for k, v in loaded.shared_dims_.items()} == {k: v.tolist() for k, v in
                                                                       mad.shared_dims_.items()}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_file_from_before_the_cross_view_misfit_loads_without_it(fitted, tmp_path):
    """Files written before MAD(misfit=...) matched on the posterior variances alone, and load that way."""
    import json

    problem, mad = fitted
    path, old = tmp_path / "mad.npz", tmp_path / "old.npz"
    mad.save(path)
    assert ba.MAD.load(path).misfit == "auto"
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    meta = json.loads(str(arrays["meta"]))
    del meta["params"]["misfit"]
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(old, **arrays)
    loaded = ba.MAD.load(old)
    assert loaded.misfit is None and loaded.align().info["misfit"] is False


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_parameters_and_labels_keep_their_kind_through_a_file(fitted, tmp_path):
    # a torch dtype in mrd_options (MRD takes one) made json.dumps fail; numeric labels came back as strings
    import copy

    import torch

    problem, mad = fitted
    mad = copy.deepcopy(mad)
    mad.mrd_options = {**mad.mrd_options, "dtype": torch.float64}
    phase = np.linspace(0.0, 1.0, problem.views.n_samples["Y1"])
    mad.problem_ = mad.problem_.replace(labels={"Y1": phase, "Y2": phase > 0.5})
    mad.save(tmp_path / "mad.npz")
    loaded = ba.MAD.load(tmp_path / "mad.npz")
    assert loaded.mrd_options["dtype"] == "float64"
    np.testing.assert_array_equal(loaded.problem_.labels["Y1"], phase)
    np.testing.assert_array_equal(loaded.problem_.labels["Y2"], phase > 0.5)
    assert loaded.problem_.labels["Y2"].dtype == bool
    mad.mrd_options = {**mad.mrd_options, "callback": object()}
    with pytest.raises(TypeError, match="parameter mrd_options=.* has no JSON form"):
        mad.save(tmp_path / "other.npz")
    assert not (tmp_path / "other.npz").exists()
