"""ba.mad.save / ba.mad.load: a loaded MAD aligns exactly as the fitted one; no pickle; corrupt files named;
files of format version 1 load with their parameters translated."""

import json

import numpy as np
import pytest

import bayesalign as ba
from bayesalign.mad import MADFileError

#: Version 1's parameters that version 2 fixes, as a fit at their defaults wrote them (its ``mrd_options`` is
#: version 2's ``engine_options``; the collapsed engine's ``svi_options`` was None)
V1_PARAMS = {"shared_threshold": 0.05, "temperature": "anchors", "infer_max_iter": 500, "latent_prior": "graph",
             "n_neighbors": 10, "svi_options": None, "correspondence_rounds": "auto", "correspondence_neighbors": 5,
             "starts": None, "start_inducing": 30, "shared_by": "auto", "min_resolution": 1.0, "misfit": "auto",
             "calibration_pairs": "reinferred"}


@pytest.fixture(scope="module", params=["anchors", "all_rows"])
def fitted(request):
    problem = ba.datasets.mad_toy("linear_shared", seed=0, n_anchors=10).shuffle_unaligned(seed=0)
    mad = ba.MAD(latent_dim=3, num_inducing=8, seed=0, training=request.param,
                 engine_options={"max_iter": 80, "warmup_iters": 20}).fit(problem)
    return problem, mad


def _rewritten(path, out, change):
    """The file at ``path`` written to ``out`` with ``change(meta, arrays)`` applied to its metadata and arrays."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    meta = json.loads(str(arrays["meta"]))
    change(meta, arrays)
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(out, **arrays)
    return out


def _as_version_1(meta, arrays):
    """Version 1's layout: its format version, its parameters and the fitted attributes it also saved."""
    meta["format_version"] = 1
    params = meta["params"]
    params["mrd_options"] = params.pop("engine_options")
    params.update(V1_PARAMS)
    meta["plain"].update({"shared_threshold_": 0.05, "shared_by_": "resolution"})


def _assert_aligns_the_same(loaded, mad):
    for matcher in ("hungarian", "sinkhorn"):
        ours, theirs = mad.align(matcher=matcher), loaded.align(matcher=matcher)
        # the same arrays in, the same code: identical output
        np.testing.assert_array_equal(theirs.index_a, ours.index_a)
        np.testing.assert_array_equal(theirs.index_b, ours.index_b)
        np.testing.assert_array_equal(theirs.probabilities, ours.probabilities)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_loaded_mad_aligns_exactly_as_the_fitted_one(fitted, tmp_path):
    problem, mad = fitted
    path = tmp_path / "mad.npz"
    ba.mad.save(mad, path)
    loaded = ba.mad.load(path)
    assert isinstance(loaded, ba.MAD)
    assert loaded.get_params() == mad.get_params()
    _assert_aligns_the_same(loaded, mad)
    for view in problem.views.names:
        np.testing.assert_array_equal(loaded.embedding_.means[view], mad.embedding_.means[view])
    assert loaded.model_.elbo() == mad.model_.elbo()
    shared = {k: v.tolist() for k, v in mad.shared_dims_.items()}
    assert {k: v.tolist() for k, v in loaded.shared_dims_.items()} == shared
    for view in problem.views.names:
        np.testing.assert_array_equal(loaded.resolution_[view], mad.resolution_[view])
    # the file holds plain arrays only: numpy can read every entry without pickle
    with np.load(path, allow_pickle=False) as data:
        assert all(data[key].dtype != object for key in data.files)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_mad_fitted_with_the_stochastic_engine_loads_and_aligns_exactly_as_fitted(tmp_path):
    problem = ba.datasets.mad_toy("linear_shared", seed=0, n_anchors=10).shuffle_unaligned(seed=0)
    mad = ba.MAD(latent_dim=3, num_inducing=8, seed=0, engine="svi", engine_options={"max_epochs": 15}).fit(problem)
    path = tmp_path / "mad_svi.npz"
    ba.mad.save(mad, path)
    loaded = ba.mad.load(path)
    assert type(loaded.model_) is type(mad.model_) and loaded.get_params() == mad.get_params()
    _assert_aligns_the_same(loaded, mad)
    np.testing.assert_array_equal(loaded.cost_matrix()[2], mad.cost_matrix()[2])


def test_corrupt_or_foreign_files_are_named(fitted, tmp_path):
    _, mad = fitted
    truncated = tmp_path / "truncated.npz"
    ba.mad.save(mad, truncated)
    truncated.write_bytes(truncated.read_bytes()[:200])
    with pytest.raises(MADFileError, match="truncated.npz"):
        ba.mad.load(truncated)
    foreign = tmp_path / "foreign.npz"
    np.savez(foreign, meta=np.array('{"format": "something else"}'))
    with pytest.raises(MADFileError, match="foreign.npz: not a bayesalign MAD file"):
        ba.mad.load(foreign)
    with pytest.raises(FileNotFoundError):
        ba.mad.load(tmp_path / "missing.npz")
    with pytest.raises(TypeError, match="save writes a MAD or a MADEnsemble, got str"):
        ba.mad.save("not a model", tmp_path / "other.npz")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_version_1_file_loads_and_aligns_exactly_as_the_fitted_model(fitted, tmp_path):
    problem, mad = fitted
    path = tmp_path / "mad.npz"
    ba.mad.save(mad, path)
    loaded = ba.mad.load(_rewritten(path, tmp_path / "v1.npz", _as_version_1))
    assert loaded.get_params() == mad.get_params()  # mrd_options as engine_options, the fixed ones dropped
    assert loaded.engine_options == {"max_iter": 80, "warmup_iters": 20}
    _assert_aligns_the_same(loaded, mad)
    assert {k: v.tolist() for k, v in loaded.shared_dims_.items()} == {k: v.tolist() for k, v in
                                                                       mad.shared_dims_.items()}
    assert loaded.latent_prior_ == mad.latent_prior_
    assert not hasattr(loaded, "shared_by_") and not hasattr(loaded, "shared_threshold_")

    def normal_prior(meta, arrays):  # version 1's latent_prior="standard_normal" is graph_strength 0
        _as_version_1(meta, arrays)
        meta["params"]["latent_prior"] = "standard_normal"

    graphless = ba.mad.load(_rewritten(path, tmp_path / "normal.npz", normal_prior))
    assert graphless.graph_strength == 0.0 and "latent_prior" not in graphless.get_params()

    # a file without the resolutions: the shared dimensions as saved, the resolutions of its MRD
    bare = ba.mad.load(_rewritten(path, tmp_path / "bare.npz", lambda meta, arrays: (
        _as_version_1(meta, arrays), meta.pop("resolution"))))
    assert {k: v.tolist() for k, v in bare.shared_dims_.items()} == {k: v.tolist() for k, v in
                                                                     mad.shared_dims_.items()}
    for view in problem.views.names:
        np.testing.assert_array_equal(bare.resolution_[view], mad.resolution_[view])


@pytest.mark.parametrize("name, value", [("shared_by", "relevance"), ("min_resolution", 2.0),
                                         ("correspondence_rounds", 0), ("temperature", "posterior")])
def test_a_version_1_file_fitted_with_a_setting_mad_has_no_more_is_refused(fitted, tmp_path, name, value):
    _, mad = fitted
    path = tmp_path / "mad.npz"
    ba.mad.save(mad, path)

    def changed(meta, arrays):
        _as_version_1(meta, arrays)
        meta["params"][name] = value

    v1 = _rewritten(path, tmp_path / "v1.npz", changed)
    with pytest.raises(MADFileError, match=rf"v1\.npz.*fitted with {name}={value!r}.*fit the model again"):
        ba.mad.load(v1)


def test_a_version_1_file_without_the_cross_view_misfit_is_refused(fitted, tmp_path):
    """A version-1 file whose parameters have no ``misfit`` matched on the posterior variances alone; MAD always
    adds the anchors' misfit to the likelihood cost, so it cannot align as that fit did."""
    _, mad = fitted
    path = tmp_path / "mad.npz"
    ba.mad.save(mad, path)
    v1 = _rewritten(path, tmp_path / "v1.npz", lambda meta, arrays: (_as_version_1(meta, arrays),
                                                                     meta["params"].pop("misfit")))
    with pytest.raises(MADFileError, match=r"v1\.npz.*misfit.*fit the model again"):
        ba.mad.load(v1)


@pytest.mark.parametrize("entry", ["mean", "var"])
def test_a_file_whose_posteriors_are_not_finite_is_named(fitted, tmp_path, entry):
    _, mad = fitted
    path = tmp_path / "mad.npz"
    ba.mad.save(mad, path)

    def spoiled(meta, arrays):
        values = arrays[f"posteriors/1/{entry}"].copy()
        values[0, 0] = np.nan
        arrays[f"posteriors/1/{entry}"] = values

    kind = "means" if entry == "mean" else "variances"
    with pytest.raises(MADFileError, match=rf"nan\.npz.*posterior {kind} of view 'Y2' hold non-finite values"):
        ba.mad.load(_rewritten(path, tmp_path / "nan.npz", spoiled))


@pytest.mark.parametrize("kernel, message", [("not_a_kernel", "not_a_kernel"),
                                             ({"name": "rbf"}, "is not a kernel name")])
def test_a_file_whose_kernel_is_not_a_kernel_name_is_named(fitted, tmp_path, kernel, message):
    _, mad = fitted
    path = tmp_path / "mad.npz"
    ba.mad.save(mad, path)

    def renamed(meta, arrays):
        meta["params"]["kernel"] = kernel

    with pytest.raises(MADFileError, match=rf"kernel\.npz.*{message}"):
        ba.mad.load(_rewritten(path, tmp_path / "kernel.npz", renamed))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_load_reads_a_mad_and_a_mad_ensemble_file(fitted, tmp_path):
    _, mad = fitted
    pool = ba.MADEnsemble.from_fitted([mad])
    ba.mad.save(mad, tmp_path / "mad.npz")
    ba.mad.save(pool, tmp_path / "pool.npz")
    single, pooled = ba.mad.load(tmp_path / "mad.npz"), ba.mad.load(tmp_path / "pool.npz")
    assert type(single) is ba.MAD and type(pooled) is ba.MADEnsemble
    assert len(pooled.estimators_) == 1 and type(pooled.estimators_[0]) is ba.MAD
    ours, theirs = pool.align(), pooled.align()
    np.testing.assert_array_equal(theirs.index_a, ours.index_a)
    np.testing.assert_array_equal(theirs.index_b, ours.index_b)
    np.testing.assert_array_equal(theirs.probabilities, ours.probabilities)
    np.testing.assert_array_equal(single.align().index_b, mad.align().index_b)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_parameters_and_labels_keep_their_kind_through_a_file(fitted, tmp_path):
    # a torch dtype in engine_options (MRD takes one) is written by name; numeric and boolean labels keep their dtype
    import copy

    import torch

    problem, mad = fitted
    mad = copy.deepcopy(mad)
    mad.engine_options = {**mad.engine_options, "dtype": torch.float64}
    phase = np.linspace(0.0, 1.0, problem.views.n_samples["Y1"])
    mad.problem_ = mad.problem_.replace(labels={"Y1": phase, "Y2": phase > 0.5})
    ba.mad.save(mad, tmp_path / "mad.npz")
    loaded = ba.mad.load(tmp_path / "mad.npz")
    assert loaded.engine_options["dtype"] == "float64"
    np.testing.assert_array_equal(loaded.problem_.labels["Y1"], phase)
    np.testing.assert_array_equal(loaded.problem_.labels["Y2"], phase > 0.5)
    assert loaded.problem_.labels["Y2"].dtype == bool
    mad.engine_options = {**mad.engine_options, "callback": object()}
    with pytest.raises(TypeError, match="parameter engine_options=.* has no JSON form"):
        ba.mad.save(mad, tmp_path / "other.npz")
    assert not (tmp_path / "other.npz").exists()
