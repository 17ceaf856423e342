"""The stochastic MRD engine (bayesalign.gp.svi): its bound against the collapsed one, each likelihood's
expected log-likelihood against Monte Carlo, missing entries, partial observation, priors, inference."""

import math
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

import bayesalign as ba
from bayesalign.gp.svi import StochasticMRD, expected_log_likelihood, make_likelihood
from bayesalign.gp.svi.likelihoods import fisher_information

F64 = torch.float64  # the package's default dtype; the tests make their tensors in it explicitly


def _quiet(estimator, views, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(views, **kw)


def _copy_parameters(source, target, skip=("targets", "rows")):
    """Give ``target`` (a fitted StochasticMRD) every parameter of ``source``: a complete Gaussian view's q(u) is
    tied (one covariance) and a holed one's is not, so q(u) is copied as a distribution, not as a state."""
    state = {k: v for k, v in source.model_.state_dict().items()
             if not k.startswith(skip) and "_variational_distribution" not in k}
    target.model_.load_state_dict(state, strict=False)
    for gp_source, gp_target in zip(source.model_.gps, target.model_.gps):
        q_u = gp_source.inducing_distributions()[1]
        gp_target.set_inducing_distribution(q_u.mean.detach(), q_u.covariance_matrix.detach())
        gp_target.variational_strategy.jitter_val = gp_source.variational_strategy.jitter_val  # relative to the data


def _elbo_samples(model, n=100):
    values = np.array([model.elbo(num_samples=1, seed=s) for s in range(n)])
    return values.mean(), values.std(ddof=1) / math.sqrt(n)


@pytest.fixture(scope="module")
def toy_views():
    views = ba.datasets.mad_toy("linear_shared_private", seed=0, n=60).views
    return {"a": views["Y1"], "b": views["Y2"]}


@pytest.fixture(scope="module")
def collapsed(toy_views):
    return ba.MRD(latent_dim=4, num_inducing=10, max_iter=300, progress=False, seed=0).fit(toy_views)


def test_bound_equals_collapsed_bound_at_optimal_q_u(toy_views, collapsed):
    # At the collapsed MRD's q(X), hyperparameters and its optimal q(u), the uncollapsed SVI bound equals the
    # collapsed bound (Titsias & Lawrence 2010). Gaussian views take the expectation over q(X) in closed form
    # (psi-statistics) and every KL term is analytic, so the ELBO has no Monte Carlo error: equal up to the
    # round-off of two different float64 computations (the bound is ~350, built from terms of ~1e4).
    svi = _quiet(StochasticMRD(init="pca", latent_dim=4, num_inducing=10, max_epochs=0, progress=False, seed=0),
                               toy_views)
    svi.load_collapsed(collapsed)
    values = [svi.elbo(num_samples=1, seed=s) for s in range(3)]
    assert values[0] == pytest.approx(collapsed.elbo(), rel=1e-7, abs=1e-6)
    assert max(values) - min(values) < 1e-9  # no sampled term left

    # moving q(u) away from the optimum lowers the bound
    gp = svi.model_.gps[0]
    with torch.no_grad():
        q_u = gp.inducing_distributions()[1]
        gp.set_inducing_distribution(0.99 * q_u.mean, q_u.covariance_matrix)
    assert svi.elbo() < values[0] - 1e-3


def test_closed_form_gaussian_term_against_monte_carlo(toy_views, collapsed):
    # The closed-form E_q(x) E_q(f)[log p(y | f)] of a Gaussian view (psi-statistics) against the sampled path the
    # other likelihoods use (draws of x, then E_q(f) per draw), 2000 draws of X: within 4 standard errors.
    # GPyTorch adds its jitter to k(x, x) in the sampled path: jitter / (2 noise) per entry, added back.
    from bayesalign.gp.svi.model import gaussian_expected_log_likelihood

    svi = _quiet(StochasticMRD(init="pca", latent_dim=4, num_inducing=10, max_epochs=0, progress=False, seed=0),
                               toy_views)
    svi.load_collapsed(collapsed)
    model = svi.model_
    gp, lik, Y = model.gps[1], model.likelihoods[1], model.targets_1.clone()
    Y[3, 5] = float("nan")  # with a missing entry: the per-point path
    with torch.no_grad():
        strategy = gp.variational_strategy
        exact = gaussian_expected_log_likelihood(Y, model.q_x.mean, model.q_x.variance, gp.covar_module,
                                                 strategy.inducing_points, strategy.jitter_val,
                                                 gp.inducing_distributions()[1], lik.noise.reshape(()))
        gen = torch.Generator().manual_seed(0)
        draws = []
        for _ in range(20):
            x = model.q_x.mean + model.q_x.variance.sqrt() * torch.randn(100, *model.q_x.mean.shape, generator=gen,
                                                                                 dtype=F64)
            m, v = gp.marginals(x.reshape(-1, x.shape[-1]))
            ell = expected_log_likelihood(lik, Y.repeat(100, 1), m, v).reshape(100, -1).sum(1)
            draws.append(ell)
        draws = torch.cat(draws)
    jitter_cost = 0.5 * strategy.jitter_val / lik.noise.item() * int((~torch.isnan(Y)).sum())
    assert abs(float(draws.mean()) + jitter_cost - float(exact)) < 4 * float(draws.std()) / math.sqrt(draws.numel())


@pytest.mark.parametrize("name", ["gaussian", "bernoulli", "poisson", "negative_binomial"])
def test_expected_log_likelihood_against_monte_carlo(name):
    gen = torch.Generator().manual_seed(0)
    mean = torch.randn(4, 3, generator=gen, dtype=F64) * 0.8
    variance = torch.rand(4, 3, generator=gen, dtype=F64) * 0.5 + 0.05
    likelihood = make_likelihood(name, noise=0.3).double()
    if name == "negative_binomial":
        likelihood.dispersion = 2.5
    if name == "gaussian":
        y = torch.randn(4, 3, generator=gen, dtype=F64)
    elif name == "bernoulli":
        y = (torch.rand(4, 3, generator=gen, dtype=F64) < 0.5).double()
    else:
        y = torch.poisson(mean.exp(), generator=gen)
    with torch.no_grad():
        value = expected_log_likelihood(likelihood, y, mean, variance)  # [4, 3]
        f = mean + variance.sqrt() * torch.randn(100_000, 4, 3, generator=gen, dtype=F64)  # 1e5 draws of f ~ q(f)
        if name == "gaussian":
            log_p = torch.distributions.Normal(f, likelihood.noise.sqrt()).log_prob(y)
        else:
            log_p = likelihood(f).log_prob(y)
    mc, se = log_p.mean(0), log_p.std(0) / math.sqrt(f.shape[0])
    # 5 standard errors of the Monte Carlo mean over 12 entries (chance of a false alarm < 1e-5); quadrature error
    # (20 Gauss-Hermite nodes) is far below it
    assert torch.all((value - mc).abs() < 5 * se + 1e-6), (value - mc) / se
    if name == "poisson":  # and the closed form y m - exp(m + s/2) - log y!
        exact = y * mean - (mean + variance / 2).exp() - torch.lgamma(y + 1)
        assert torch.allclose(value, exact, atol=1e-8)
    if name == "gaussian":
        noise = likelihood.noise.item()
        exact = -0.5 * (math.log(2 * math.pi * noise) + ((y - mean) ** 2 + variance) / noise)
        assert torch.allclose(value, exact, atol=1e-12)


@pytest.mark.parametrize("name", ["gaussian", "bernoulli", "poisson", "negative_binomial"])
def test_fisher_information_against_monte_carlo(name):
    # I(f) = E_y[(d log p(y | f) / df)^2], the score by autograd of the likelihood's own log_prob, 2e5 draws of y
    likelihood = make_likelihood(name, noise=0.3).double()
    if name == "negative_binomial":
        likelihood.dispersion = 2.5
    f = torch.tensor([-2.5, -0.7, 0.0, 0.4, 1.3], dtype=F64)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        exact = fisher_information(likelihood, f)  # [5]
        if name == "gaussian":
            y = f + likelihood.noise.sqrt().reshape(()) * torch.randn(200_000, 5, generator=gen, dtype=F64)
        elif name == "bernoulli":
            y = (torch.rand(200_000, 5, generator=gen, dtype=F64) < torch.special.ndtr(f)).double()
        else:
            torch.manual_seed(1)
            y = likelihood(f.expand(200_000, 5)).sample()
    g = f.clone().requires_grad_(True)
    dist = (torch.distributions.Normal(g, likelihood.noise.sqrt().reshape(()).detach()) if name == "gaussian"
            else likelihood(g.expand(200_000, 5)))
    score = torch.autograd.grad(dist.log_prob(y).sum(), g)[0]  # sum over draws of d log p / df   [5]
    per_draw = []
    for k in range(5):  # the score of each draw in closed form, checked against autograd's sum below
        yk = y[:, k]
        if name == "gaussian":
            s_k = (yk - f[k]) / likelihood.noise.reshape(())
        elif name == "bernoulli":
            phi = torch.exp(torch.distributions.Normal(0.0, 1.0).log_prob(f[k]))
            s_k = torch.where(yk > 0, phi / torch.special.ndtr(f[k]), -phi / torch.special.ndtr(-f[k]))
        elif name == "poisson":
            s_k = yk - f[k].exp()
        else:
            r, mu = likelihood.dispersion.reshape(()), f[k].exp()
            s_k = r * (yk - mu) / (r + mu)
        per_draw.append(s_k.detach())
    squared = torch.stack(per_draw, 1).square()  # [draws, 5]
    mc, se = squared.mean(0), squared.std(0) / math.sqrt(squared.shape[0])
    # the hand-written scores are the likelihood's own (their sum is autograd's), and their mean square is I(f)
    assert torch.allclose(torch.stack(per_draw, 1).sum(0), score, rtol=1e-8, atol=1e-6)
    # 5 standard errors (the probit at f = 0 has the same squared score for both outcomes: se = 0, round-off)
    assert torch.all((exact - mc).abs() < 5 * se + 1e-12), (exact - mc) / se


def test_resolution_is_the_collapsed_engine_s_for_gaussian_views(toy_views, collapsed):
    # At the collapsed fit's parameters and its optimal q(u) the SVI model's predictive mean is the collapsed one,
    # and with I = 1 / sigma^2 the resolution is MRD.resolution_ (two computations of the same float64 numbers:
    # the derivatives by output columns here, by inducing inputs there)
    svi = _quiet(StochasticMRD(init="pca", latent_dim=4, num_inducing=10, max_epochs=0, progress=False, seed=0),
                               toy_views)
    svi.load_collapsed(collapsed)
    ours, theirs = svi.resolution_, collapsed.resolution_
    for view in ("a", "b"):
        np.testing.assert_allclose(ours[view], theirs[view], rtol=1e-6, atol=1e-9 * theirs[view].max())


def test_resolution_counts_observed_entries_only(toy_views, collapsed):
    # a missing entry carries no information: with every entry of column 0 missing, view a's resolution is that of
    # its other columns, i.e. the complete one minus column 0's share (brute force: each column's contribution)
    svi = _quiet(StochasticMRD(init="pca", latent_dim=4, num_inducing=10, max_epochs=0, progress=False, seed=0),
                               toy_views)
    svi.load_collapsed(collapsed)
    model = svi.model_
    full = svi.resolution_["a"]
    x = model.q_x.mean.detach().clone().requires_grad_(True)
    f0 = model.gps[0].marginals(x)[0][:, 0]
    (grad,) = torch.autograd.grad(f0.sum(), x)  # d fbar_n0 / d x_n   [N, Q]
    spread = model.q_x.mean.detach().var(0, unbiased=False)
    column0 = (spread * grad.square().mean(0) / model.likelihoods[0].noise.reshape(())).detach().numpy()
    with torch.no_grad():
        model.targets_0[:, 0] = float("nan")
    np.testing.assert_allclose(svi.resolution_["a"], full - column0, rtol=1e-8, atol=1e-12 * full.max())


def test_mean_jacobian_is_autograd_through_the_predictive_mean(toy_views, monkeypatch):
    # ViewGP.mean_jacobian differentiates k(x, Z) alpha instead of GPyTorch's batched predictive mean: the same
    # derivatives as reverse mode through marginals (float64 round-off), for a tied q(u) (complete Gaussian
    # view), an untied one (a view with a hole) and a constant mean (a Poisson view), after a few epochs of fitting
    from bayesalign.gp.svi.guide import ViewGP

    counts = np.random.default_rng(0).poisson(2.0, size=toy_views["b"].shape).astype(float)
    holed = toy_views["a"].copy()
    holed[0, 0] = np.nan
    views = ba.Views({"a": holed, "b": counts, "c": toy_views["b"]}, allow_missing=True)
    svi = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, max_epochs=5, likelihood={"b": "poisson"},
                               progress=False, seed=0), views)
    assert [gp.tied for gp in svi.model_.gps] == [False, False, True]
    calls = []
    monkeypatch.setattr(ViewGP, "marginals", lambda self, x, f=ViewGP.marginals: calls.append(x.requires_grad)
                        or f(self, x))
    x = svi.model_.q_x.mean.detach()
    for gp in svi.model_.gps:
        calls.clear()
        _, J = gp.mean_jacobian(x)
        assert calls == [False]  # the fast path: marginals only for the check, never differentiated
        xg = x.clone().requires_grad_(True)
        f = gp.marginals(xg)[0]
        expected = torch.stack([torch.autograd.grad(f[:, d].sum(), xg, retain_graph=True)[0]
                                for d in range(f.shape[1])], -1)
        torch.testing.assert_close(J, expected, rtol=1e-7, atol=1e-9 * float(expected.abs().max()))
    # where K_ZZ + jitter does not factor as GPyTorch's did, the derivatives go through marginals itself
    # (GPyTorch's own factorisations, which pass keywords, are left alone)
    monkeypatch.setattr(torch.linalg, "cholesky_ex", lambda K, f=torch.linalg.cholesky_ex, **kw: f(K, **kw) if kw
                        else (torch.eye(K.shape[-1], dtype=K.dtype), torch.tensor(1)))
    calls.clear()
    _, J = svi.model_.gps[2].mean_jacobian(x)
    assert calls == [False, True]
    torch.testing.assert_close(J, expected, rtol=1e-7, atol=1e-9 * float(expected.abs().max()))


def test_nan_entry_is_left_out_of_the_likelihood(toy_views):
    # The ELBO with entry (i, d) missing equals the complete data's ELBO minus that entry's expected
    # log-likelihood E_q(x_i) E_q(f)[log p(y_id | f)] (closed form for a Gaussian view), the same parameters
    # in both: equal up to round-off.
    from bayesalign.gp.svi.model import gaussian_expected_log_likelihood

    views = {k: v.copy() for k, v in toy_views.items()}
    holed = {k: v.copy() for k, v in toy_views.items()}
    holed["b"][7, 3] = np.nan
    full = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, max_epochs=3, progress=False, seed=0), views)
    masked = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, max_epochs=0, progress=False, seed=0),
                                  holed)
    _copy_parameters(full, masked, skip=())
    # the holed view's output mean differs (the column mean of the observed entries): give it the full one
    masked.model_.targets_1.copy_(torch.as_tensor(holed["b"] - full.output_means_["b"]))
    model = full.model_
    gp = model.gps[1]
    only = torch.full_like(model.targets_1[7:8], float("nan"))
    only[0, 3] = model.targets_1[7, 3]
    with torch.no_grad():
        term = gaussian_expected_log_likelihood(only, model.q_x.mean[7:8], model.q_x.variance[7:8], gp.covar_module,
                                                gp.variational_strategy.inducing_points,
                                                gp.variational_strategy.jitter_val, gp.inducing_distributions()[1],
                                                model.likelihoods[1].noise.reshape(()))
    difference = full.elbo(num_samples=1, seed=0) - masked.elbo(num_samples=1, seed=0) - float(term)
    assert abs(difference) < 1e-8  # round-off of sums of ~2000 terms of size ~1


def test_missing_entries_train_without_nan(toy_views):
    rng = np.random.default_rng(1)
    holed = {k: np.where(rng.random(v.shape) < 0.2, np.nan, v) for k, v in toy_views.items()}
    before = {k: v.copy() for k, v in holed.items()}
    model = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, max_epochs=15, batch_size=20,
                                 progress=False, seed=0),
                   holed)
    for k in holed:  # the caller's arrays are untouched
        assert np.array_equal(np.isnan(before[k]), np.isnan(holed[k]))
    assert np.isfinite(model.elbo_history_).all()
    assert all(torch.isfinite(p).all() for p in model.model_.parameters())
    assert model.elbo_history_[-5:].mean() > model.elbo_history_[:5].mean()  # it learned something


def test_partial_observation_equals_missing_rows(toy_views):
    # An entity that view b does not observe (observed=) contributes exactly what a row of NaN would:
    # nothing to view b's likelihood; both models share parameters and draws of X.
    a, b = toy_views["a"], toy_views["b"]
    keep = np.r_[0:10, 15:60]
    partial = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, max_epochs=3, progress=False, seed=0),
                     {"a": a, "b": b[keep]}, observed={"b": keep})
    holed = b.copy()
    holed[10:15] = np.nan
    paired = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, max_epochs=0, progress=False, seed=0),
                    {"a": a, "b": holed})
    _copy_parameters(partial, paired)
    paired.model_.targets_1.copy_(torch.as_tensor(holed - partial.output_means_["b"]))
    for s in range(3):
        assert partial.elbo(num_samples=1, seed=s) == pytest.approx(paired.elbo(num_samples=1, seed=s), abs=1e-8)
    assert partial.embedding_.means["b"].shape == (55, 3)
    assert np.array_equal(partial.embedding_.means["b"], partial.entity_means_[keep])


def test_priors_change_the_bound_by_their_log_density(toy_views):
    # A kernel prior adds exactly its log density; a latent prior N(0, 4 I) instead of N(0, I) changes
    # the (analytic) KL of q(X) by the closed-form difference. Same parameters and draws: round-off only.
    from gpytorch.priors import GammaPrior

    base = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, max_epochs=3, progress=False, seed=0),
                                toy_views)
    kernel = ba.gp.make_kernel("rbf", 3, lengthscale_prior=GammaPrior(2.0, 2.0))
    with_prior = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, kernel=kernel, max_epochs=0,
                                      progress=False,
                                      seed=0), toy_views)
    with_prior.model_.load_state_dict(base.model_.state_dict(), strict=False)  # all but the prior's own buffers
    two = torch.tensor(2.0, dtype=F64)
    log_density = sum(GammaPrior(two, two).log_prob(gp.covar_module.base_kernel.lengthscale).sum().item()
                      for gp in base.model_.gps)
    assert with_prior.elbo(seed=1) - base.elbo(seed=1) == pytest.approx(log_density, abs=1e-8)

    import pyro.distributions as dist
    prior = dist.Normal(torch.zeros(3, dtype=F64), 2.0 * torch.ones(3, dtype=F64)).to_event(1)
    wide = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, max_epochs=0, progress=False, seed=0,
                                latent_prior=prior), toy_views)
    wide.model_.load_state_dict(base.model_.state_dict())
    mu, s = base.entity_means_, base.entity_variances_
    kl = lambda var: 0.5 * np.sum((s + mu ** 2) / var - 1 - np.log(s / var))  # noqa: E731
    assert wide.elbo(seed=1) - base.elbo(seed=1) == pytest.approx(kl(1.0) - kl(4.0), abs=1e-8)


def test_convergence_is_reported(toy_views):
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        model = StochasticMRD(init="pca", latent_dim=2, num_inducing=5, max_epochs=3, progress=False,
                              seed=0).fit(toy_views)
    assert not model.converged_ and model.n_epochs_ == 3


def test_bad_input_names_the_view_row_and_column(toy_views):
    a = toy_views["a"]
    counts = np.ones((60, 4))
    counts[5, 2] = 1.5
    with pytest.raises(ValueError, match=r"'b'.*row 5, column 2"):
        StochasticMRD(init="pca", likelihood={"b": "poisson"}, progress=False).fit({"a": a, "b": counts})
    with pytest.raises(ValueError, match="unknown likelihood"):
        StochasticMRD(init="pca", likelihood="student", progress=False).fit({"a": a})
    bad = a.copy()
    bad[3, 1] = np.inf
    with pytest.raises(ValueError, match=r"'a'.*row 3, column 1"):
        StochasticMRD(init="pca", progress=False).fit({"a": bad})


def test_a_step_that_does_not_fit_in_memory_is_refused_naming_the_view_and_batch_size(toy_views, monkeypatch):
    # The step's memory is estimated from the views' shapes (step_memory). With the available memory patched to the
    # targets plus a third of a full-batch step, a full-batch fit is refused before any work, naming the view whose
    # step is the largest (the one with a missing entry: per-point [B, M, M] blocks) and a batch size that fits,
    # which then fits; with less memory than the targets themselves, the message says so.
    from bayesalign.gp.svi import inputs

    holed = {"a": toy_views["a"].copy(), "b": toy_views["b"]}
    holed["a"][0, 0] = np.nan
    sizes = [inputs.step_memory(60, Y.shape[1], "gaussian", name == "a", 60, 10, 3, 8) for name, Y in holed.items()]
    data = sum(d for d, _ in sizes)
    monkeypatch.setattr(inputs, "available_memory", lambda device: data + sum(s for _, s in sizes) // 3)
    model = StochasticMRD(latent_dim=3, num_inducing=10, batch_size=60, max_epochs=1, init="pca", progress=False,
                          seed=0)
    with pytest.raises(MemoryError, match=r"view 'a': a training step at batch_size=60 .* batch_size=\d+ would fit"
                       ) as refused:
        model.fit(holed)
    fits = int(str(refused.value).split("; batch_size=")[1].split()[0])
    assert 1 <= fits < 60
    _quiet(model.set_params(batch_size=fits), holed)  # the advice holds
    assert model.n_epochs_ == 1
    monkeypatch.setattr(inputs, "available_memory", lambda device: data // 2)
    with pytest.raises(MemoryError, match=r"targets in torch.float64 .* use dtype=torch.float32"):
        model.fit(holed)


def test_gp_latent_prior_enters_as_its_kl(toy_views):
    # latent_prior="gp": each latent dimension a GP over time_index. The ELBO changes from the N(0, I) prior's
    # by KL(q || N(0, I)) - KL(q || N(0, K_t)) (closed form, per dimension
    # 0.5 [tr(K^-1 S) + m' K^-1 m - N + log|K| - sum log s]). Both KL terms are analytic in Pyro and the
    # Gaussian views' terms are in closed form, so the two agree to round-off (of K^-1 with K's condition number).
    t = np.linspace(0, 6, 60)
    base = _quiet(StochasticMRD(init="pca", latent_dim=2, num_inducing=8, max_epochs=3, progress=False, seed=0),
                                toy_views)
    gp = _quiet(StochasticMRD(init="pca", latent_dim=2, num_inducing=8, max_epochs=0, progress=False, seed=0,
                              latent_prior="gp",
                              time_lengthscale=1.5), toy_views, time_index=t)
    gp.model_.load_state_dict(base.model_.state_dict(), strict=False)
    mu, s = base.entity_means_, base.entity_variances_
    K = np.exp(-0.5 * (t[:, None] - t[None, :]) ** 2 / 1.5 ** 2) + 1e-6 * np.eye(60)
    K_inv = np.linalg.inv(K)
    kl_gp = sum(0.5 * (np.trace(K_inv * s[:, q]) + mu[:, q] @ K_inv @ mu[:, q] - 60 + np.linalg.slogdet(K)[1]
                       - np.log(s[:, q]).sum()) for q in range(2))
    kl_normal = 0.5 * np.sum(s + mu ** 2 - 1 - np.log(s))
    difference = gp.elbo(num_samples=1) - base.elbo(num_samples=1)
    assert difference == pytest.approx(kl_normal - kl_gp, rel=1e-8)
    assert abs(kl_normal - kl_gp) > 100  # and the prior made a difference worth testing


def test_infer_matches_the_collapsed_engine(toy_views, collapsed):
    # With the collapsed MRD's state and optimal q(u), q(x*) for rows of view "a" maximises the same per-row bound
    # as MRD.infer; for a Gaussian view both compute it in closed form (psi-statistics), so the optima agree to the
    # two optimisers' stopping tolerances (L-BFGS here, MRD.infer's own tol; about 1e-5 in the means and 1e-3 in
    # log variance on this toy), far inside the spread of the latent points (about 2 per dimension).
    svi = _quiet(StochasticMRD(init="pca", latent_dim=4, num_inducing=10, max_epochs=0, progress=False, seed=0),
                               toy_views)
    svi.load_collapsed(collapsed)
    rows = toy_views["a"][:6]
    mean, var = svi.infer("a", rows)
    ref_mean, ref_var = collapsed.infer("a", rows)
    relevant = collapsed.relevance_["a"] > 0.05 * collapsed.relevance_["a"].max()
    assert np.abs(mean - ref_mean)[:, relevant].max() < 2e-4
    assert np.allclose(np.log(var[:, relevant]), np.log(ref_var[:, relevant]), atol=0.01)


def test_infer_stays_finite_on_a_barely_fitted_model():
    # Two epochs leave q(u) near its prior, where the sampled per-row objective of a count view is flat in places.
    # q(x*) stays finite with positive variances (the variance is a softplus above its floor, as in the fit) and
    # the draws are seeded: the same call gives the same answer.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 1))
    views = {"a": rng.poisson(np.exp(1 + x @ rng.normal(size=(1, 6)))).astype(float), "b": x @ rng.normal(size=(1, 4))}
    svi = _quiet(StochasticMRD(latent_dim=2, num_inducing=8, max_epochs=2, likelihood={"a": "poisson"},
                               progress=False, seed=0), views)
    mean, var = svi.infer("a", views["a"][:5], num_samples=8)
    again = svi.infer("a", views["a"][:5], num_samples=8)
    assert np.isfinite(mean).all() and (var > 0).all() and np.isfinite(var).all()
    np.testing.assert_array_equal(mean, again[0])


def test_svi_keeps_the_collapsed_shared_private_split(toy_views, collapsed):
    # MRD's toy with one shared and one private signal per view: started at the collapsed MRD's optimum, SVI keeps
    # its shared / private split and stays close to its bound (the from-scratch fit is in benchmarks/bench_svi.py).
    svi = _quiet(StochasticMRD(init="pca", latent_dim=4, num_inducing=10, max_epochs=0, progress=False, seed=0),
                               toy_views)
    svi.load_collapsed(collapsed)
    svi.set_params(warm_start=True, max_epochs=100, warmup_epochs=0, learning_rate=0.005)
    _quiet(svi, toy_views)
    assert svi.shared_dims().tolist() == collapsed.shared_dims().tolist()
    for view in ("a", "b"):
        assert svi.private_dims(view).tolist() == collapsed.private_dims(view).tolist()
    # (the ELBO may end above the collapsed bound at the collapsed fit's parameters: SVI moves them on, and the
    # 300-evaluation collapsed fit is not at its optimum)
    assert svi.elbo() > collapsed.elbo() - 0.01 * abs(collapsed.elbo())


def test_minibatch_elbo_is_unbiased(toy_views, collapsed):
    # elbo() over chunks of 16 entities (each chunk's plate and Gaussian sums scaled by N / B, and the whole chunk
    # by B / N, so global terms count once) is the same bound as over all 60 at once: with the Gaussian views in
    # closed form, equal to round-off; a Bernoulli view's sampled term agrees within 4 Monte Carlo standard errors.
    svi = _quiet(StochasticMRD(init="pca", latent_dim=4, num_inducing=10, max_epochs=0, progress=False, seed=0),
                               toy_views)
    svi.load_collapsed(collapsed)
    # sums of terms ~1e3 in other orders, through K_uu^-1 and S of condition numbers ~1e5: round-off ~1e-16 * 1e5 *
    # 1e5 = 1e-6 per view's sum, so 3.5e-5 of the total of ~350
    assert svi.elbo(batch_size=16) == pytest.approx(svi.elbo(), rel=1e-7)
    binary = {"a": toy_views["a"], "b": (toy_views["b"] > 0).astype(float)}
    svi = _quiet(StochasticMRD(init="pca", latent_dim=2, num_inducing=8, likelihood={"b": "bernoulli"}, max_epochs=5,
                               progress=False, seed=0), binary)
    full = np.array([svi.elbo(num_samples=1, seed=s) for s in range(30)])
    chunked = np.array([svi.elbo(num_samples=1, batch_size=16, seed=s) for s in range(30)])
    se = math.hypot(full.std(ddof=1), chunked.std(ddof=1)) / math.sqrt(30)
    assert 0 < se and abs(full.mean() - chunked.mean()) < 4 * se


def test_embedding_start_under_partial_observation(toy_views):
    # A LatentEmbedding start (what MAD passes: per-view rows) gives each entity the mean of its rows' coordinates,
    # as the collapsed engine does (entity_means_from_embedding): an anchor entity sits between its two rows.
    from bayesalign.data import LatentEmbedding

    a, b = toy_views["a"], toy_views["b"]
    rows_b = np.r_[0:10, 60:110]  # entities 0-9 seen by both views, 10-59 by "a" only, 60-109 by "b" only
    rng = np.random.default_rng(0)
    emb = LatentEmbedding({"a": rng.normal(size=(60, 2)), "b": rng.normal(size=(60, 2))})
    model = _quiet(StochasticMRD(latent_dim=2, num_inducing=8, init=emb, max_epochs=0, progress=False, seed=0),
                   {"a": a, "b": b}, observed={"a": np.arange(60), "b": rows_b})
    mean = model.entity_means_
    assert mean.shape == (110, 2)
    # up to the common centring and scaling: entity 3 (both views) is the midpoint of its two rows' coordinates
    scale = (emb.means["a"][20] - emb.means["a"][30]) / (mean[20] - mean[30])
    assert np.allclose((emb.means["a"][3] + emb.means["b"][3]) / 2 - emb.means["a"][20],
                       (mean[3] - mean[20]) * scale, atol=1e-10)


def test_pca_start_under_partial_observation_is_the_collapsed_engine_s(toy_views):
    # init="pca" with views of different entities: the start learned on the entities both views observe and carried
    # to the others (partial_latent), the collapsed engine's; it used to complete the views by a low-rank SVD
    from bayesalign.gp.initialisation import partial_latent

    a, b = toy_views["a"], toy_views["b"]
    rows_b = np.r_[0:10, 60:110]  # entities 0-9 seen by both views, 10-59 by "a" only, 60-109 by "b" only
    model = _quiet(StochasticMRD(latent_dim=2, num_inducing=8, init="pca", max_epochs=0, progress=False, seed=0),
                   {"a": a, "b": b}, observed={"a": np.arange(60), "b": rows_b})
    expected = partial_latent("pca", ["a", "b"], [a - a.mean(0), b - b.mean(0)], [np.arange(60), rows_b], 110, 2, 0)
    np.testing.assert_allclose(model.entity_means_, expected, rtol=1e-9, atol=1e-9)  # the start itself, untrained
    assert model.entity_means_.shape == (110, 2) and np.isfinite(model.entity_means_).all()


def test_lbfgs_from_scratch_reaches_the_collapsed_bound(toy_views):
    # optimizer="lbfgs": q(u) at its optimum at every evaluation, L-BFGS on the rest, i.e. the collapsed bound as a
    # function of the other parameters. From the same PCA start as a converged collapsed MRD, on MRD's toy, it
    # must end within 1% of that bound (it may end above it: another local optimum of the same bound).
    # (the budget leaves about a third more evaluations than this toy needs to get within 1%, room for another
    # CPU's path)
    mrd = ba.MRD(latent_dim=4, num_inducing=10, max_iter=1000, progress=False, seed=0).fit(toy_views)
    svi = StochasticMRD(latent_dim=4, num_inducing=10, batch_size=60, max_epochs=1150, warmup_epochs=100,
                        optimizer="lbfgs", init="pca", progress=False, seed=0)
    _quiet(svi, toy_views)
    assert svi.elbo() > mrd.elbo() - 0.01 * abs(mrd.elbo())
    # the final state (q(u) set to its optimum there) is the best point L-BFGS evaluated, to the line search's
    # last trial step (relative 1e-5)
    assert svi.elbo() == pytest.approx(svi.elbo_history_.max(), rel=1e-5)
    assert svi.shared_dims().tolist() == mrd.shared_dims().tolist()
    # the history of accepted steps rises after the warm-up (L-BFGS with a line search never accepts a descent)
    assert svi.elbo_history_[-1] > svi.elbo_history_[100]


def test_adam_path_normalises_the_latent_at_every_read_back(toy_views):
    # Under N(0, I) the Adam path moves q(X), the inducing inputs and the lengthscales to the exact shift and
    # scale of each latent dimension that minimise the KL at equal likelihood (as the collapsed engine does at
    # its L-BFGS restarts), every `window` epochs: a fit of two windows ends on it, so each dimension's
    # means average 0 and its second moments (mu^2 + S) average 1 (to round-off), and the likelihood terms are
    # those before the step (compared through the ELBO minus its KL, on the same parameters).
    svi = _quiet(StochasticMRD(latent_dim=3, num_inducing=8, batch_size=30, max_epochs=10, window=5, warmup_epochs=0,
                               init="pca", progress=False, seed=0), toy_views)
    mu, S = svi.entity_means_, svi.entity_variances_
    np.testing.assert_allclose(mu.mean(0), 0.0, atol=1e-10)
    np.testing.assert_allclose((mu ** 2 + S).mean(0), 1.0, rtol=1e-10)
    # the step itself: the ELBO rises by exactly the KL it removes (the likelihood terms are unchanged)
    svi.model_.q_x.mean.data.mul_(2.0)  # off the normalised point
    kl = lambda: 0.5 * float((svi.model_.q_x.mean ** 2 + svi.model_.q_x.variance - 1
                              - svi.model_.q_x.variance.log()).sum().detach())
    before, kl_before = svi.elbo(), kl()
    svi._normalise_latent()
    assert kl() < kl_before
    assert svi.elbo() - before == pytest.approx(kl_before - kl(), rel=1e-8)
    # under another prior (a GP over time, whose KL the step would not minimise) nothing moves
    timed = _quiet(StochasticMRD(init="pca", latent_dim=2, num_inducing=8, batch_size=60, max_epochs=2, warmup_epochs=0,
                                 latent_prior="gp", progress=False, seed=0), toy_views, time_index=np.arange(60.0))
    state = {k: v.clone() for k, v in timed.model_.state_dict().items()}
    timed._normalise_latent()
    assert all(torch.equal(state[k], v) for k, v in timed.model_.state_dict().items())


def test_lbfgs_refuses_a_stochastic_elbo(toy_views):
    binary = {"a": toy_views["a"], "b": (toy_views["b"] > 0).astype(float)}
    with pytest.raises(ValueError, match="every view Gaussian"):
        StochasticMRD(init="pca", latent_dim=2, num_inducing=8, likelihood={"b": "bernoulli"}, optimizer="lbfgs",
                      progress=False).fit(binary)
    with pytest.raises(ValueError, match="batch_size >= the 60 entities"):
        StochasticMRD(init="pca", latent_dim=2, num_inducing=8, batch_size=16, optimizer="lbfgs",
                      progress=False).fit(toy_views)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        StochasticMRD(init="pca", optimizer="sgd").fit(toy_views)


def test_q_u_losing_positive_definiteness_is_reported(toy_views):
    # natural parameters whose -2 * Theta_2 is not positive definite (what a float32 natural-gradient step can
    # leave at scale): a FloatingPointError that says what to change, not GPyTorch's NotPSDError from deep inside
    svi = _quiet(StochasticMRD(init="pca", latent_dim=2, num_inducing=8, max_epochs=2, progress=False, seed=0),
                               toy_views)
    distribution = svi.model_.gps[0].variational_strategy._variational_distribution
    with torch.no_grad():
        distribution.natural_mat.copy_(torch.eye(8, dtype=F64).expand_as(distribution.natural_mat))
    svi.set_params(warm_start=True, max_epochs=1)
    with pytest.raises(FloatingPointError, match="q\\(u\\) lost positive definiteness at epoch 1.*float64"):
        _quiet(svi, toy_views)


def test_a_natural_gradient_step_that_breaks_q_u_is_undone_and_halved(toy_views):
    # a step of size 3 overshoots the optimal q(u) (size 1 reaches it for a Gaussian view) to a precision that is
    # no longer positive definite, as float32 round-off can at 100,000 rows: the step is undone, its size halved
    with pytest.warns(RuntimeWarning, match="q\\(u\\) lost positive definiteness .* step was undone"):
        svi = _quiet(StochasticMRD(init="pca", latent_dim=2, num_inducing=8, max_epochs=30, batch_size=20,
                                   natural_gradient_lr=3.0,
                                   progress=False, seed=0), toy_views)
    assert svi.natural_gradient_halvings_ >= 1
    assert svi.natural_gradient_lr_ == 3.0 / 2 ** svi.natural_gradient_halvings_
    assert np.isfinite(svi.elbo_history_).all() and svi.n_epochs_ == 30
    for gp in svi.model_.gps:  # q(u) is a proper Gaussian again: its covariance factorises
        torch.linalg.cholesky(gp.variational_strategy.variational_distribution.covariance_matrix)


def test_a_collapsed_latent_variance_gives_a_finite_elbo_not_a_refused_zero_scale(toy_views):
    # a line-search trial far out along a raw variance (softplus underflows to exactly 0 below about -745) once
    # ended a fit with torch's "Expected parameter scale ... GreaterThan(lower_bound=0.0)"; the variance has a floor
    from bayesalign.gp.svi.guide import VARIANCE_FLOOR

    svi = _quiet(StochasticMRD(init="pca", latent_dim=2, num_inducing=8, max_epochs=2, progress=False, seed=0),
                               toy_views)
    with torch.no_grad():
        svi.model_.q_x.raw_variance[:5].fill_(-1e4)
    assert float(svi.model_.q_x.variance.min()) == pytest.approx(VARIANCE_FLOOR, rel=1e-6)
    assert np.isfinite(svi.elbo(num_samples=1))  # a value the line search can compare, and back off from


def test_graph_prior_bound_equals_the_collapsed_engine_s(toy_views):
    # The same Gaussian Markov random field prior in both engines: at the collapsed fit's parameters and its optimal
    # q(u), the SVI ELBO (KL to N(0, I) plus the closed-form log-ratio term) equals the collapsed bound (whose KL is
    # the GMRF's in closed form), to the round-off of two float64 computations; and it is not the N(0, I) bound
    from bayesalign.gp.priors import GraphLaplacianPrior
    from bayesalign.graph import entity_graph, laplacian

    n = toy_views["a"].shape[0]
    W = entity_graph([toy_views["a"], toy_views["b"]], [np.arange(n), np.arange(n)], n, n_neighbors=5)
    prior = GraphLaplacianPrior(laplacian(W)[0], strength=3.0)
    mrd = ba.MRD(latent_dim=3, num_inducing=8, max_iter=150, progress=False, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mrd.fit(toy_views, latent_prior=prior)
    svi = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, max_epochs=0, latent_prior=prior,
                               progress=False,
                               seed=0), toy_views)
    svi.load_collapsed(mrd)
    assert svi.elbo(num_samples=1) == pytest.approx(mrd.elbo(), rel=1e-7, abs=1e-6)
    plain = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, max_epochs=0, progress=False, seed=0),
                                 toy_views)
    plain.load_collapsed(mrd)
    assert abs(plain.elbo(num_samples=1) - mrd.elbo()) > 1.0
    # the per-entity terms, summed over a partition of the entities into minibatches, are KL(q || N(0, I)) minus
    # the GMRF's closed-form KL (GraphLaplacianPrior.kl), whatever q is
    from bayesalign.gp.priors import StandardNormalPrior

    model = svi.model_
    with torch.no_grad():
        mu, S = model.q_x.mean, model.q_x.variance
        batches = sum(float(model.graph_log_ratio(part).sum()) for part in torch.arange(n).chunk(3))
        expected = float(StandardNormalPrior().kl(mu, S) - prior.kl(mu, S))
    assert batches == pytest.approx(expected, rel=1e-9, abs=1e-8)  # round-off of sums of ~1e2 terms


def _untied_copy(svi):
    """A deep copy of a fitted StochasticMRD whose Gaussian views' q(u) are GPyTorch's own (untied)
    NaturalVariationalDistribution, set to the same distribution."""
    import copy

    from gpytorch.variational import NaturalVariationalDistribution

    for gp in svi.model_.gps:  # GPyTorch's memo of q(u) holds a graph, which deepcopy refuses
        gp.variational_strategy._clear_cache()
    other = copy.deepcopy(svi)
    for gp in other.model_.gps:
        strategy = gp.variational_strategy
        q_u = gp.inducing_distributions()[1]
        D, M = q_u.mean.shape
        strategy._variational_distribution = NaturalVariationalDistribution(M, batch_shape=torch.Size([D]),
                                                                            mean_init_std=0.0).to(q_u.mean)
        gp.set_inducing_distribution(q_u.mean.detach(), q_u.covariance_matrix.detach())
        assert not gp.tied
    return other


def test_tied_q_u_takes_the_same_natural_gradient_step_as_gpytorch_s(toy_views):
    # A complete Gaussian view shares one q(u) covariance among its outputs. From the same q(u), one
    # natural-gradient step of size 0.3 on the same minibatch must land the tied family (one M x M precision, its
    # gradient with respect to the expectation parameters in closed form) where GPyTorch's untied
    # NaturalVariationalDistribution lands (D precisions, whose targets are equal here): the ELBO, the KL and the
    # step agree to round-off (float64, M = 8).
    from gpytorch.optim import NGD
    from pyro.infer import TraceMeanField_ELBO

    tied = _quiet(StochasticMRD(init="pca", latent_dim=3, num_inducing=8, max_epochs=3, batch_size=20,
                                progress=False, seed=0),
                  toy_views)
    assert all(gp.tied for gp in tied.model_.gps)
    untied = _untied_copy(tied)
    idx = torch.arange(5, 25)
    loss_fn = TraceMeanField_ELBO()
    after = []
    for svi in (tied, untied):
        model = svi.model_
        natural = [p for name, p in model.named_parameters() if "natural_" in name]
        for p in model.parameters():  # the fit's last gradients would add up with this step's
            p.grad = None
        loss = loss_fn.differentiable_loss(model.model, model.guide, idx)
        loss.backward()
        NGD(natural, num_data=1, lr=0.3).step()
        after.append([gp.inducing_distributions()[1] for gp in model.gps])
        kl = sum(float(gp.kl_divergence().detach()) for gp in model.gps)
        after[-1].append((float(loss.detach()), kl, svi.elbo()))
    for q_tied, q_untied in zip(after[0][:2], after[1][:2]):
        assert torch.allclose(q_tied.mean, q_untied.mean, rtol=1e-8, atol=1e-10)
        assert torch.allclose(q_tied.covariance_matrix, q_untied.covariance_matrix, rtol=1e-8, atol=1e-10)
    for a, b in zip(after[0][2], after[1][2]):
        assert a == pytest.approx(b, rel=1e-9)


def test_tied_kl_and_samples_against_the_untied_gaussian():
    # The closed-form KL between two tied Gaussians (one factor) equals torch's KL between the same D Gaussians
    # written out; samples have the tied covariance (Monte Carlo, 4 standard errors).
    from bayesalign.gp.svi.guide import TiedMultivariateNormal

    rng = np.random.default_rng(0)
    D, M = 4, 5

    def random_factor():
        A = torch.as_tensor(rng.standard_normal((M, M)))
        return torch.linalg.cholesky(A @ A.mT + M * torch.eye(M, dtype=F64))

    q = TiedMultivariateNormal(torch.as_tensor(rng.standard_normal((D, M))), random_factor())
    p = TiedMultivariateNormal(torch.as_tensor(rng.standard_normal((D, M))), random_factor())
    kl = torch.distributions.kl_divergence(q, p)
    plain = torch.distributions.kl_divergence(
        torch.distributions.MultivariateNormal(q.mean, scale_tril=q.shared_scale_tril.expand(D, M, M)),
        torch.distributions.MultivariateNormal(p.mean, scale_tril=p.shared_scale_tril.expand(D, M, M)))
    assert kl.shape == (D,) and torch.allclose(kl, plain, rtol=1e-12)
    torch.manual_seed(0)
    draws = q.rsample(torch.Size([20000]))  # [S, D, M]
    centred = (draws - q.mean).reshape(-1, M)
    empirical = centred.mT @ centred / centred.shape[0]
    S = q.shared_covariance
    se = torch.sqrt((S.diagonal()[:, None] * S.diagonal()[None] + S.square()) / centred.shape[0])
    assert ((empirical - S).abs() < 4 * se).all()


def test_q_u_is_tied_exactly_where_it_loses_nothing(toy_views):
    # tied: a Gaussian view without missing entries under natural gradients; untied: a view with a hole (its
    # outputs' optimal covariances differ), a non-Gaussian view, or Adam on a Cholesky q(u)
    holed = {k: v.copy() for k, v in toy_views.items()}
    holed["b"][3, 1] = np.nan
    svi = _quiet(StochasticMRD(init="pca", latent_dim=2, num_inducing=8, max_epochs=1, progress=False, seed=0), holed)
    assert [gp.tied for gp in svi.model_.gps] == [True, False]
    binary = {"a": toy_views["a"], "b": (toy_views["b"] > 0).astype(float)}
    svi = _quiet(StochasticMRD(init="pca", latent_dim=2, num_inducing=8, likelihood={"b": "bernoulli"}, max_epochs=1,
                               progress=False, seed=0), binary)
    assert [gp.tied for gp in svi.model_.gps] == [True, False]
    svi = _quiet(StochasticMRD(init="pca", latent_dim=2, num_inducing=8, natural_gradient_lr=None, max_epochs=1,
                               progress=False,
                               seed=0), toy_views)
    assert [gp.tied for gp in svi.model_.gps] == [False, False]


@pytest.mark.parametrize("prior", ["normal", "gp"])
def test_the_training_loss_is_pyro_s_mean_field_estimate(toy_views, prior):
    # negative_elbo against Pyro's own TraceMeanField_ELBO at the same draws (one seed before each): the same terms
    # summed in another order, so the values and the gradients agree to float64 round-off. A Poisson view samples
    # X; the GP prior over time has no registered KL against the guide's q(X), so its term is log p - log q at
    # the draw in both.
    from pyro.infer import TraceMeanField_ELBO

    from bayesalign.gp.svi.model import negative_elbo

    counts = np.random.default_rng(0).poisson(2.0, size=(60, 4)).astype(float)
    est = _quiet(StochasticMRD(init="pca", latent_dim=2, num_inducing=8, max_epochs=2, progress=False, seed=0,
                               likelihood={"c": "poisson"}, latent_prior=prior),
                 {"a": toy_views["a"], "c": counts}, **({"time_index": np.linspace(0, 6, 60)} if prior == "gp" else {}))
    model, idx = est.model_, torch.arange(0, 60, 3)
    pyro_loss = TraceMeanField_ELBO(num_particles=2, vectorize_particles=False)
    results = []
    for loss in (lambda: negative_elbo(model, idx, 2),
                 lambda: pyro_loss.differentiable_loss(model.model, model.guide, idx)):
        torch.manual_seed(1)
        model.zero_grad(set_to_none=True)
        value = loss()
        value.backward()
        results.append((value.item(), [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    (ours, our_grads), (theirs, their_grads) = results
    assert ours == pytest.approx(theirs, rel=1e-12)
    assert len(our_grads) == len(their_grads) > 0
    for g, h in zip(our_grads, their_grads):
        torch.testing.assert_close(g, h, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("family", ["tied", "natural", "cholesky"])
def test_marginals_are_gpytorch_s_whitened_predictive(family):
    # ViewGP.marginals in closed form against a call of the GP (GPyTorch's VariationalStrategy): the same
    # whitened predictive computed in another order, equal to float64 round-off; q(u) moved off the prior, and
    # a constant mean per output.
    from bayesalign.gp.kernels import make_kernel
    from bayesalign.gp.svi.guide import ViewGP

    g = torch.Generator().manual_seed(0)
    Z, x = torch.randn(7, 2, generator=g, dtype=F64), torch.randn(11, 2, generator=g, dtype=F64)
    gp = ViewGP(Z, 3, make_kernel("rbf", input_dim=2, variance=1.5).double(), constant_mean=True, jitter=1e-6,
                natural=family != "cholesky", tied=family == "tied").double()
    mean = torch.randn(3, 7, generator=g, dtype=F64)
    root = 0.3 * torch.randn(1 if family == "tied" else 3, 7, 7, generator=g, dtype=F64)
    gp.set_inducing_distribution(mean, root @ root.mT + 0.1 * torch.eye(7, dtype=F64))
    with torch.no_grad():
        gp.mean_module.constant.copy_(torch.tensor([0.5, -1.0, 2.0], dtype=F64))
        q_f = gp(x)
        ours = gp.marginals(x)
    torch.testing.assert_close(ours[0], q_f.mean.mT, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(ours[1], q_f.variance.mT, rtol=1e-10, atol=1e-10)
    assert not torch.allclose(ours[1][:, 0], ours[1][:, 1]) or family == "tied"
