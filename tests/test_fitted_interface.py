"""The fitted interface both MRD engines share (bayesalign.gp.fitted.FittedLatentModel): files, continuation,
growth of the inducing inputs, inference and the embedding, checked the same way on MRD and StochasticMRD, and
what each claim of the stochastic engine's versions must hold against (a saved model is the model, a grown
q(u) leaves the bound where it was, a continued fit goes on from the fit)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from test_mrd import toy_views  # tests/test_mrd.py: the MAD paper's toy (shared sin, two private signals)

from bayesalign.gp import MRD, StochasticMRD
from bayesalign.gp.extend import farthest_points
from bayesalign.gp.fitted import FittedLatentModel
from bayesalign.gp.model_file import ModelFileError
from bayesalign.gp.priors import GraphLaplacianPrior, StandardNormalPrior

N, Q, M = 60, 3, 8


def _quiet(fit, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fit(*args, **kw)


@pytest.fixture(scope="module")
def views():
    return toy_views(N=N, D=8, seed=0)


def _engine(name):
    if name == "MRD":
        return MRD(latent_dim=Q, num_inducing=M, max_iter=60, warmup_iters=10, progress=False, seed=0)
    return StochasticMRD(latent_dim=Q, num_inducing=M, init="pca", max_epochs=40, warmup_epochs=10,
                         progress=False, seed=0)


def _budget(model):
    return "max_iter" if isinstance(model, MRD) else "max_epochs"


def _history(model):
    return model.history_ if isinstance(model, MRD) else model.elbo_history_


@pytest.fixture(scope="module", params=["MRD", "StochasticMRD"])
def fitted(request, views):
    return _quiet(_engine(request.param).fit, views)


def test_the_contract_is_abstract_and_both_engines_fill_it():
    assert {"entity_means_", "entity_variances_", "observed_", "relevance_", "resolution_", "noise_variance_",
            "elbo", "infer", "continue_fit", "grow_inducing"} <= FittedLatentModel.__abstractmethods__
    assert not MRD.__abstractmethods__ and not StochasticMRD.__abstractmethods__

    class Partial(FittedLatentModel):  # every member but continue_fit and grow_inducing
        entity_means_ = entity_variances_ = observed_ = relevance_ = resolution_ = noise_variance_ = None

        def elbo(self):
            return 0.0

        def infer(self, view, Y_new, **options):
            return None

    with pytest.raises(TypeError, match="continue_fit"):
        Partial()


def test_unfitted_models_refuse_the_interface(tmp_path):
    for model in (_engine("MRD"), _engine("StochasticMRD")):
        for call in ("save", "continue_fit", "grow_inducing", "embedding_"):
            with pytest.raises(NotFittedError):
                if call == "embedding_":
                    _ = model.embedding_
                else:
                    getattr(model, call)(*{"save": (tmp_path / "m.npz",), "grow_inducing": (M + 2,)}.get(call, ()))


def test_save_load_round_trip(fitted, views, tmp_path):
    # the loaded model holds the same float64 tensors and computes with them the same way: equal to round-off
    # of identical operations (rtol 1e-12 leaves room only for a different order of summation)
    path = tmp_path / "model.npz"
    fitted.save(path)
    loaded = type(fitted).load(path)
    assert type(loaded) is type(fitted) and loaded.get_params()["latent_dim"] == Q
    for name in ("entity_means_", "entity_variances_"):
        np.testing.assert_allclose(getattr(loaded, name), getattr(fitted, name), rtol=1e-12, atol=0)
    for name in ("relevance_", "resolution_", "noise_variance_"):
        ours, theirs = getattr(loaded, name), getattr(fitted, name)
        assert ours.keys() == theirs.keys()
        for view in ours:
            np.testing.assert_allclose(ours[view], theirs[view], rtol=1e-12, atol=0)
    assert loaded.elbo() == pytest.approx(fitted.elbo(), rel=1e-12)
    np.testing.assert_allclose(_history(loaded), _history(fitted), rtol=0, atol=0)  # stored values, not computed
    assert loaded.converged_ == fitted.converged_
    new_rows = views["b"][:5] + 0.05
    for ours, theirs in zip(loaded.infer("b", new_rows), fitted.infer("b", new_rows)):
        assert ours.shape == (5, Q)
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-12)  # the same optimisation from the same start
    embedding = loaded.embedding_
    assert embedding.means["a"].shape == (N, Q) and embedding.variances["b"].shape == (N, Q)
    np.testing.assert_array_equal(embedding.shared_dims, fitted.embedding_.shared_dims)
    with pytest.raises(TypeError, match="not a"):  # a file of the other engine
        (MRD if isinstance(fitted, StochasticMRD) else StochasticMRD).load(path)


def test_continue_fit_goes_on_from_the_fit(fitted, tmp_path):
    # a loaded model continued equals the original continued (seeded, same parameters); the history goes on from
    # the fit's; the convergence report is said the same way by the attribute and the warning
    path = tmp_path / "model.npz"
    fitted.save(path)
    original, loaded = type(fitted).load(path), type(fitted).load(path)
    before, history = original.elbo(), _history(original).copy()
    for model in (original, loaded):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.continue_fit(30)
        said = any(issubclass(w.category, ConvergenceWarning) for w in caught)
        assert said == (not model.converged_)
    grown = _history(original)
    assert grown.size > history.size
    np.testing.assert_array_equal(grown[:history.size], history)
    np.testing.assert_allclose(_history(loaded), grown, rtol=1e-10)  # the same steps: round-off only
    np.testing.assert_allclose(loaded.entity_means_, original.entity_means_, rtol=1e-8, atol=1e-10)
    # Gaussian views: both bounds are exact (no Monte Carlo term), so more optimisation must not end lower;
    # 1e-6 of its size covers the round-off of the bound's cancelling psi-statistic terms
    assert original.elbo() >= before - 1e-6 * abs(before)
    with pytest.raises(ValueError, match="must be"):
        original.continue_fit(0)


def test_grow_inducing_adds_farthest_points_and_goes_on(fitted, tmp_path):
    path = tmp_path / "model.npz"
    fitted.save(path)
    model = type(fitted).load(path)
    means = torch.as_tensor(model.entity_means_)
    old = (model.module_.inducing_inputs.detach()[0] if isinstance(model, MRD)
           else model.model_.gps[0].variational_strategy.inducing_points.detach())
    expected = farthest_points(old, means, M + 4)
    _quiet(model.grow_inducing, M + 4, **{_budget(model): 5})
    assert model.num_inducing == M + 4
    grown = (model.module_.inducing_inputs.detach()[0] if isinstance(model, MRD)
             else model.model_.gps[0].variational_strategy.inducing_points.detach())
    assert grown.shape == (M + 4, Q)
    if isinstance(model, StochasticMRD):  # the continued fit moves them; before it they are the farthest points
        again = type(fitted).load(path)
        from bayesalign.gp.svi.continuation import grow_inducing_inputs
        grow_inducing_inputs(again, M + 4)
        grown = again.model_.gps[0].variational_strategy.inducing_points.detach()
        np.testing.assert_allclose(grown.numpy(), expected.numpy(), rtol=0, atol=0)  # copies of the same rows
    with pytest.raises(ValueError, match="only adds"):
        model.grow_inducing(M)
    with pytest.warns(RuntimeWarning, match="observed entities"):
        _quiet(model.grow_inducing, N + 5, **{_budget(model): 1})
    assert model.num_inducing == N


# -- the stochastic engine's own claims ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def svi(views):
    return _quiet(_engine("StochasticMRD").fit, views)


def test_growing_q_u_leaves_q_f_and_the_bound_unchanged(svi, tmp_path):
    # the new inducing outputs at their conditional prior given the old ones: q(f(x)) is the same at every x,
    # the KL of q(u) the same, so the ELBO is unchanged; at q(u)'s optimum (the collapsed bound) more inducing
    # inputs can only raise it (Titsias, 2009)
    from bayesalign.gp.svi.continuation import grow_inducing_inputs

    path = tmp_path / "svi.npz"
    svi.save(path)
    model = StochasticMRD.load(path)
    x = torch.as_tensor(np.random.default_rng(1).normal(size=(7, Q)))
    before = [gp.marginals(x) for gp in model.model_.gps]
    kl = [float(gp.kl_divergence().detach()) for gp in model.model_.gps]
    elbo, collapsed = model.elbo(), model.collapsed_elbo()
    grow_inducing_inputs(model, M + 5)
    for gp, (mean, var), kl_old in zip(model.model_.gps, before, kl):
        grown_mean, grown_var = gp.marginals(x)
        # a prediction is k_xu K_uu^-1 (...): round-off times K_uu's condition number, here far below 1e-8
        np.testing.assert_allclose(grown_mean.detach().numpy(), mean.detach().numpy(), rtol=1e-8, atol=1e-8)
        np.testing.assert_allclose(grown_var.detach().numpy(), var.detach().numpy(), rtol=1e-8, atol=1e-8)
        assert float(gp.kl_divergence().detach()) == pytest.approx(kl_old, rel=1e-8, abs=1e-8)
    # the bound's trace terms, whitened, carry round-off amplified by K_uu's condition number (a few thousand
    # on this toy): within 1e-9 of its size
    assert model.elbo() == pytest.approx(elbo, rel=1e-9)
    assert model.collapsed_elbo() >= collapsed - 1e-6 * abs(collapsed)


def test_growing_q_u_of_a_binary_view_leaves_its_sampled_term_unchanged(views, tmp_path):
    # a Bernoulli view's term is a Monte Carlo estimate over draws of X (Gauss-Hermite in f given each draw):
    # given the same draws it is unchanged by the growth up to round-off, and so is KL(q(u) || p(u))
    from bayesalign.gp.svi.continuation import grow_inducing_inputs

    binary = {"a": views["a"], "b": (views["b"] > 0).astype(float)}
    model = _quiet(StochasticMRD(latent_dim=Q, num_inducing=M, likelihood={"b": "bernoulli"}, max_epochs=20,
                                 progress=False, seed=0).fit, binary)
    model.save(tmp_path / "binary.npz")  # a loaded model draws the same X for the same seed: the same estimate
    assert StochasticMRD.load(tmp_path / "binary.npz").elbo(num_samples=4, seed=3) == pytest.approx(
        model.elbo(num_samples=4, seed=3), rel=1e-12)
    x = torch.as_tensor(np.random.default_rng(2).normal(size=(N, Q)))  # one draw of X for every entity
    idx = torch.arange(N)
    with torch.no_grad():
        term, kl = model.model_.view_log_likelihood(1, x, idx), model.model_.gps[1].kl_divergence()
        grow_inducing_inputs(model, M + 4)
        grown_term, grown_kl = model.model_.view_log_likelihood(1, x, idx), model.model_.gps[1].kl_divergence()
    # q(f(x)) is k_xu K_uu^-1 (...) either way: round-off times K_uu's condition number
    np.testing.assert_allclose(grown_term.numpy(), term.numpy(), rtol=1e-7, atol=1e-9)
    assert float(grown_kl) == pytest.approx(float(kl), rel=1e-8)


def test_a_partially_observed_model_with_missing_entries_round_trips(views, tmp_path):
    # rows per view, NaN targets (a missing entry is data, not a corrupt parameter) and a graph prior in force
    a = views["a"].copy()
    a[3, 2] = np.nan
    observed = {"a": np.arange(N), "b": np.r_[np.arange(20), np.arange(N, N + 20)]}
    model = _quiet(StochasticMRD(latent_dim=Q, num_inducing=M, max_epochs=10, warmup_epochs=0, progress=False,
                                 seed=0).fit, {"a": a, "b": views["b"][:40]}, observed=observed)
    rng = np.random.default_rng(0)
    edges = rng.integers(0, N + 20, size=(100, 2))
    import scipy.sparse as sp
    W = sp.coo_matrix((np.ones(100), (edges[:, 0], edges[:, 1])), shape=(N + 20, N + 20))
    W = ((W + W.T) > 0).astype(float)
    laplacian = sp.diags(np.asarray(W.sum(1)).ravel()) - W
    _quiet(model.continue_fit, 2, latent_prior=GraphLaplacianPrior(laplacian, 0.5))
    path = tmp_path / "partial.npz"
    model.save(path)
    loaded = StochasticMRD.load(path)
    assert isinstance(loaded.model_.graph_prior, GraphLaplacianPrior)
    assert (loaded.model_.graph_prior.laplacian != model.model_.graph_prior.laplacian).nnz == 0
    for view in ("a", "b"):
        np.testing.assert_array_equal(loaded.observed_[view], model.observed_[view])
        np.testing.assert_array_equal(loaded.embedding_.means[view], model.embedding_.means[view])
    assert loaded.elbo() == pytest.approx(model.elbo(), rel=1e-12)  # same tensors, same computation
    _quiet(loaded.continue_fit, 1, latent_prior=StandardNormalPrior())  # back to N(0, I)
    assert loaded.model_.graph_prior is None
    with pytest.raises(TypeError, match="StandardNormalPrior or a GraphLaplacianPrior"):
        loaded.continue_fit(1, latent_prior="gp")


def test_bad_model_files_are_refused_naming_the_file(svi, tmp_path):
    path = tmp_path / "svi.npz"
    svi.save(path)
    with np.load(path, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}

    def rewrite(name, change):
        changed = {key: value.copy() for key, value in arrays.items()}
        change(changed)
        target = tmp_path / name
        np.savez(target, **changed)
        return target

    def meta(**fields):
        def change(a):
            a["meta"] = np.array(json.dumps({**json.loads(str(a["meta"])), **fields}))
        return change

    def poison(a):
        a["state/q_x.mean"][2, 1] = np.inf

    cases = {"version.npz": (meta(format_version=99), "unsupported format"),
             "klass.npz": (meta(**{"class": "Pickled"}), "unknown model class 'Pickled'"),
             "inf.npz": (poison, "non-finite values in q_x.mean")}
    for name, (change, message) in cases.items():
        with pytest.raises(ModelFileError, match=rf"{name}: .*{message}"):
            StochasticMRD.load(rewrite(name, change))
    not_a_model = tmp_path / "plain.npz"
    np.savez(not_a_model, x=np.zeros(3))
    with pytest.raises(ModelFileError, match=r"plain\.npz"):
        StochasticMRD.load(not_a_model)


def test_a_prior_given_as_code_cannot_be_saved(views, tmp_path):
    import pyro.distributions as dist

    prior = dist.Normal(torch.zeros(Q, dtype=torch.float64), 2.0 * torch.ones(Q, dtype=torch.float64)).to_event(1)
    model = _quiet(StochasticMRD(latent_dim=Q, num_inducing=M, latent_prior=prior, init="pca", max_epochs=2,
                                 progress=False, seed=0).fit, views)
    with pytest.raises(TypeError, match="cannot be saved"):
        model.save(tmp_path / "code.npz")
    assert not (tmp_path / "code.npz").exists()


def test_continue_fit_reports_convergence_by_the_fit_s_rule(svi, tmp_path):
    # the stopping rule is the fit's (two windows of mean ELBO estimates within tol of each other): a loose tol
    # passes it without a warning, tol=0 never does and says so
    path = tmp_path / "svi.npz"
    svi.save(path)
    model = StochasticMRD.load(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model.set_params(tol=1.0).continue_fit(100)
    assert model.converged_ and model.n_epochs_ == svi.n_epochs_ + 2 * model.window  # stopped at the first test
    with pytest.warns(ConvergenceWarning, match="10 further epochs continue_fit was given"):
        model.set_params(tol=0.0).continue_fit(10)
    assert not model.converged_


def test_continue_fit_of_the_lbfgs_engine_goes_on_without_a_warm_up(views):
    # optimizer="lbfgs": the ELBO is exact and L-BFGS only accepts steps that raise it, so the continued
    # bound is not lower (round-off: 1e-9 of its size)
    model = _quiet(StochasticMRD(latent_dim=Q, num_inducing=M, init="pca", optimizer="lbfgs", max_epochs=30,
                                 warmup_epochs=5, batch_size=N, progress=False, seed=0).fit, views)
    before, history = model.elbo(), model.elbo_history_.size
    _quiet(model.continue_fit, 20)
    assert model.elbo_history_.size > history
    assert model.elbo() >= before - 1e-9 * abs(before)
