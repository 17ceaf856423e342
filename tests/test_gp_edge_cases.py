"""Edge cases of the public API of bayesalign.gp: float32 models, persistence of every fitted attribute, data
far from unit scale, bad hyperparameters and infer contexts, the StochasticMRD input checks and its use of the
global RNGs. Each test reproduces a case that once failed."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from bayesalign.gp import MRD, BayesianGPLVM, StochasticMRD, load_model


def two_views(N=30, seed=0):
    """Two views of one latent curve (sin t shared, cos 2t / cos 3t private), view a with a constant column."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, N)[:, None]
    a = np.hstack([np.sin(t), np.cos(2 * t)]) @ rng.normal(size=(2, 5)) + 0.05 * rng.normal(size=(N, 5))
    b = np.hstack([np.sin(t), np.cos(3 * t)]) @ rng.normal(size=(2, 4)) + 0.05 * rng.normal(size=(N, 4))
    a[:, 2] = 7.0  # dropped at fit, predicted as its constant
    return {"a": a, "b": b}


def quiet_fit(model, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)  # the constant column's warning
        return model.fit(*args, **kwargs)


SMALL = dict(latent_dim=2, num_inducing=8, max_iter=30, warmup_iters=5, progress=False, seed=0)


def test_a_float32_model_predicts_as_its_parameters_do_in_float64_and_after_a_round_trip(tmp_path):
    # predict multiplied float32 psi-statistics by the float64 q(u): "expected m1 and m2 to have the same dtype"
    views = two_views()
    model = quiet_fit(MRD(**SMALL, dtype="float32"), views)
    twin = copy.deepcopy(model)
    twin.module_.to(torch.float64)  # the same (float32-valued) parameters, every statistic in float64
    X = model.entity_means_[:6].astype(np.float64) + 0.1
    S = np.full_like(X, 0.05)
    for v, view in enumerate(("a", "b")):
        mean, var = model.predict(view, X, S)
        mean64, var64 = twin.predict(view, X, S)
        assert mean.dtype == np.float64 and mean.shape == (6, views[view].shape[1])
        # float32 psi-statistics (round-off 6e-8) through the solve of q(u) against Kuu (condition ~1e5 here):
        # about 3 digits
        scale = np.abs(mean64).max()
        np.testing.assert_allclose(mean, mean64, atol=1e-2 * scale)
        # the variance is a difference of terms of the size of the signal variance psi0, each with that error
        psi0 = float(twin.module_.kernels[v].outputscale.detach())
        np.testing.assert_allclose(var, var64, atol=1e-2 * psi0)
    np.testing.assert_array_equal(model.predict("a", X)[0][:, 2], 7.0)  # the dropped column, exactly
    path = tmp_path / "f32.npz"
    model.save(path)
    loaded = load_model(path)
    assert loaded.module_.q_mean.dtype == torch.float32
    for view in ("a", "b"):  # the parameters are stored bit for bit: same computation, same numbers
        for got, want in zip(loaded.predict(view, X, S), model.predict(view, X, S)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
        inferred, expected = loaded.infer(view, views[view][:4], progress=False), \
            model.infer(view, views[view][:4], progress=False)
        np.testing.assert_allclose(inferred[0], expected[0], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(loaded.kept_columns_[view], model.kept_columns_[view])


def test_save_and_load_keep_the_restart_attributes(tmp_path):
    # restart_bounds_, restart_inits_, best_restart_ and interrupted_ (documented attributes) were lost by load
    views = two_views()
    model = quiet_fit(MRD(**{**SMALL, "n_restarts": 2}), views)
    path = tmp_path / "restarts.npz"
    model.save(path)
    loaded = MRD.load(path)
    np.testing.assert_array_equal(loaded.restart_bounds_, model.restart_bounds_)  # stored as float64, exactly
    assert loaded.restart_inits_ == model.restart_inits_ == ["pca", "pca (jitter 1)"]
    assert loaded.best_restart_ == model.best_restart_ == int(np.argmax(model.restart_bounds_))
    assert loaded.interrupted_ is False
    assert loaded.elbo() == pytest.approx(model.restart_bounds_[model.best_restart_], rel=1e-12)


def test_data_of_a_large_scale_fit_as_the_same_data_of_unit_scale(tmp_path):
    # the noise floor (1e-6 of the data's variance) went through gpytorch's float32 bounds: above 3e38 (data of
    # scale 1e22) it was inf and the fit stopped with "Got parameter bounds with empty intervals"
    Y = two_views()["b"]
    scale = 1e15
    # the bound is equivariant in the data's scale, and so is the optimiser's path once the positive parameters'
    # softplus is linear (values above ~30): a fit at scale 1e10 (which worked) is one at 1e25 up to round-off
    unit = quiet_fit(BayesianGPLVM(**SMALL), Y * 1e10)
    large = quiet_fit(BayesianGPLVM(**SMALL), Y * 1e10 * scale)
    assert large.noise_variance_["Y"] / scale**2 == pytest.approx(unit.noise_variance_["Y"], rel=1e-6)
    # the two bounds differ by a constant (N D log scale), whose round-off the line search's comparisons see: the
    # paths part by a few 1e-6 (2.8e-6 measured with the torch L-BFGS, within 1e-6 with scipy's L-BFGS-B)
    np.testing.assert_allclose(large.entity_means_, unit.entity_means_, atol=1e-5)
    path = tmp_path / "large.npz"
    large.save(path)  # the loader builds the same constraint from the stored floor
    loaded = load_model(path)
    assert loaded.noise_variance_["Y"] == large.noise_variance_["Y"]
    np.testing.assert_allclose(loaded.predict(unit.entity_means_[:3])[0], large.predict(unit.entity_means_[:3])[0],
                               rtol=1e-12)


@pytest.mark.parametrize("param, value", [("jitter", -1e-6), ("jitter", float("nan")),
                                          ("init_variance", float("inf")), ("latent_dim", True),
                                          ("num_inducing", True), ("tol", -1.0), ("tol", float("nan"))])
def test_bad_hyperparameters_are_refused_by_name(param, value):
    # a negative or NaN jitter and an infinite init_variance ended in a NaN bound blamed on the noise (snr);
    # latent_dim=True fitted a one-dimensional model
    Y = two_views()["b"]
    with pytest.raises(ValueError, match=param):
        BayesianGPLVM(**{**SMALL, param: value}).fit(Y)


SVI = dict(latent_dim=2, num_inducing=8, init="pca", max_epochs=5, warmup_epochs=2, batch_size=30,
           progress=False, seed=0)


def test_stochastic_mrd_refuses_views_of_different_sizes_without_observed():
    # without observed the views are paired (the docstring); a shorter view was silently taken to observe the
    # first entities, where MRD refuses
    views = two_views()
    with pytest.raises(ValueError, match=r"numbers of rows differ: \{'a': 30, 'b': 20\}"):
        StochasticMRD(**SVI).fit({"a": views["a"], "b": views["b"][:20]})
    # with observed= the same views are a legitimate partial fit
    model = quiet_fit(StochasticMRD(**SVI), {"a": views["a"], "b": views["b"][:20]}, observed={"b": np.arange(20)})
    assert model.entity_means_.shape == (30, 2)


def test_stochastic_mrd_infer_refuses_empty_and_non_numeric_rows():
    # zero rows gave torch's "cannot reshape tensor of 0 elements"; strings numpy's message without the view
    views = two_views()
    model = quiet_fit(StochasticMRD(**SVI), views)
    with pytest.raises(ValueError, match=r"view 'a' must have at least one row and 5 columns, got shape \(0, 5\)"):
        model.infer("a", np.zeros((0, 5)))
    with pytest.raises(ValueError, match="view 'b': Y_new cannot be read as a numeric array"):
        model.infer("b", [["x"] * 4])
    with pytest.raises(ValueError, match=r"unknown view True; the views are \['a', 'b'\]"):  # was taken as view 1
        model.infer(True, views["b"][:2])
    mean, var = model.infer("a", views["a"][0])  # one row given 1-D is still one row
    assert mean.shape == var.shape == (1, 2) and np.isfinite(mean).all() and (var > 0).all()


def test_infer_refuses_a_context_of_the_wrong_shape_by_name():
    # a context with the wrong columns, latent width or row count failed deep in numpy / torch ("boolean index did
    # not match", "Sizes of tensors must match", "mat1 and mat2 shapes cannot be multiplied")
    views = two_views()
    model = quiet_fit(MRD(**SMALL), views)
    Y = views["a"]
    mean, var = model.infer("a", Y[:3], progress=False)
    with_context = model.infer("a", Y[3:5], progress=False, context=(Y[:3], mean, var))[0]
    assert with_context.shape == (2, 2) and np.isfinite(with_context).all()
    shapes = r"context must be \(Y \[n, 5\], mean \[n, 2\], variance \[n, 2\] >= 0\), got shapes"
    for context in [(Y[:3, :4], mean, var), (Y[:3], mean[:, :1], var[:, :1]), (Y[:2], mean, var), (Y[:3], mean, -var)]:
        with pytest.raises(ValueError, match=r"view 'a': " + shapes):
            model.infer("a", Y[3:5], progress=False, context=context)


def test_infer_refuses_a_budget_or_tolerance_it_cannot_run_with():
    # max_iter = -1 and tol = NaN ran and warned only that the rows had not converged
    views = two_views()
    model = quiet_fit(MRD(**SMALL), views)
    for kwargs, what in (({"max_iter": -1}, "max_iter must be an int >= 1"), ({"max_iter": 2.5}, "max_iter"),
                         ({"tol": float("nan")}, "tol must be a finite float >= 0")):
        with pytest.raises(ValueError, match=what):
            model.infer("a", views["a"][:2], progress=False, **kwargs)


def test_a_float32_model_refuses_inputs_that_overflow_float32_instead_of_returning_nan():
    # X = 1e100 is finite in float64 but inf in the model's float32: predict returned NaN means and variances
    views = two_views()
    model = quiet_fit(BayesianGPLVM(**SMALL, dtype="float32"), views["b"])
    with pytest.raises(ValueError, match=r"X has values beyond the range of the model's float32 \(largest magnitude "
                                         r"1e\+100\)"):
        model.predict(np.full((2, 2), 1e100))
    with pytest.raises(ValueError, match="view 'Y': Y_new has values beyond the range of the model's float32"):
        model.infer(views["b"][:2] * 1e100, progress=False)
    mean, var = model.predict(np.full((2, 2), 1e30))  # finite in float32: far from every inducing input, the prior
    np.testing.assert_allclose(mean, np.tile(views["b"].mean(0), (2, 1)), rtol=1e-12)
    assert np.isfinite(var).all()


@pytest.mark.parametrize("optimizer", ["adam", "lbfgs"])
def test_stochastic_mrd_leaves_the_global_rngs_as_they_were(optimizer):
    # building q(u) drew GPyTorch's (zero-scaled) perturbation from torch's global RNG, and the L-BFGS path Pyro's
    # draws of X: a fit advanced the caller's random stream (the results were seeded, the side effect was not)
    views = two_views()
    torch.manual_seed(3)
    np.random.seed(3)
    expected_torch, expected_numpy = torch.rand(4), np.random.rand(4)
    torch.manual_seed(3)
    np.random.seed(3)
    model = quiet_fit(StochasticMRD(**{**SVI, "optimizer": optimizer}), views)
    model.infer("a", views["a"][:2])
    torch.testing.assert_close(torch.rand(4), expected_torch, rtol=0, atol=0)  # the same draws, exactly
    np.testing.assert_array_equal(np.random.rand(4), expected_numpy)
