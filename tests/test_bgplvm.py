"""Bayesian GP-LVM: the collapsed bound against closed forms and GPy, inference, persistence, failures."""

from __future__ import annotations

import math
import zipfile

import numpy as np
import pytest
import torch

from bayesalign.gp import BayesianGPLVM, NonFiniteBoundError, _optim
from bayesalign.gp.bound import (
    collapsed_bound,
    inducing_posterior,
    kl_standard_normal,
    per_point_bound,
    stable_cholesky,
)
from bayesalign.gp.inference import _row_bound
from bayesalign.gp.psi import psi_statistics

F64 = torch.float64


def curve_data(N=60, D=8, seed=0, noise=0.05):
    """Y = a random linear map of (sin t, cos t, sin 2t) + noise: a 1-D latent curve in D dims."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 2 * np.pi, N, endpoint=False)
    Y = np.c_[np.sin(t), np.cos(t), np.sin(2 * t)] @ rng.normal(size=(3, D))
    return Y + noise * rng.normal(size=Y.shape)


def gpy_bound(model) -> float:
    return float(np.asarray(model.log_likelihood()).reshape(-1)[0])


def unfitted(Y, Q, M, X, **kwargs):
    """A model with the right shapes and no optimisation (max_iter=0), q(X) means at X."""
    return BayesianGPLVM(latent_dim=Q, num_inducing=M, init=X, max_iter=0, progress=False, seed=0,
                         **kwargs).fit(Y)


def set_state(model, mu, S, Z, variance, lengthscale, noise):
    module = model.module_
    with torch.no_grad():
        module.q_mean.copy_(torch.as_tensor(mu))
        module.q_variance = torch.as_tensor(S, dtype=F64)
        module.inducing_inputs.copy_(torch.as_tensor(Z)[None].expand_as(module.inducing_inputs))
        kernel = module.kernels[0]
        kernel.outputscale = variance
        kernel.base_kernel.lengthscale = torch.as_tensor(lengthscale, dtype=F64)
        module.noise = torch.as_tensor([noise], dtype=F64)


# ----------------------------------------------------------------------------------------------------
# the bound: closed forms
# ----------------------------------------------------------------------------------------------------
def test_bound_equals_exact_gp_marginal_likelihood_when_q_is_a_point_and_Z_is_X():
    rng = np.random.default_rng(1)
    N, Q, D = 15, 2, 3
    X = rng.uniform(-2, 2, size=(N, Q))
    Y = rng.normal(size=(N, D))
    Y -= Y.mean(0)
    variance, lengthscale, noise = 1.3, np.array([0.8, 1.5]), 0.1
    model = unfitted(Y, Q, N, X, jitter=1e-12)
    set_state(model, X, np.full((N, Q), 1e-10), X, variance, lengthscale, noise)
    with torch.no_grad():
        bound_plus_kl = model.elbo() + float(model.module_.kl())
    # exact log N(Y | 0, K + noise I), column by column, with numpy
    d2 = (((X[:, None, :] - X[None, :, :]) / lengthscale) ** 2).sum(-1)
    K = variance * np.exp(-0.5 * d2) + noise * np.eye(N)
    L = np.linalg.cholesky(K)
    a = np.linalg.solve(L, Y)
    exact = -0.5 * np.square(a).sum() - D * np.log(np.diag(L)).sum() - 0.5 * N * D * math.log(2 * math.pi)
    assert bound_plus_kl == pytest.approx(exact, abs=1e-6)


def test_hand_written_gradient_of_the_bound_passes_gradcheck():
    torch.manual_seed(0)
    N, D, M = 7, 3, 4
    Y = torch.randn(N, D, dtype=F64)
    A = torch.randn(M, M, dtype=F64)
    Kuu = (A @ A.T + M * torch.eye(M, dtype=F64)).requires_grad_()
    psi1 = torch.randn(N, M, dtype=F64, requires_grad=True)
    B = torch.randn(M, M, dtype=F64)
    psi2 = (B @ B.T).requires_grad_()
    psi0 = torch.tensor(3.0, dtype=F64, requires_grad=True)
    noise = torch.tensor(0.7, dtype=F64, requires_grad=True)

    def bound(noise, Kuu, psi0, psi1, psi2):
        return collapsed_bound(Y, noise, 0.5 * (Kuu + Kuu.T), psi0, psi1, 0.5 * (psi2 + psi2.T))

    assert torch.autograd.gradcheck(bound, (noise, Kuu, psi0, psi1, psi2))


def test_per_point_bound_sums_to_collapsed_bound_plus_kl_of_optimal_q_u_and_shares_its_gradient():
    rng = np.random.default_rng(2)
    N, Q, D, M = 25, 2, 4, 6
    Y = torch.as_tensor(rng.normal(size=(N, D)))
    mu = torch.as_tensor(rng.normal(size=(N, Q)), dtype=F64).requires_grad_()
    S = torch.as_tensor(rng.uniform(0.05, 0.3, size=(N, Q)))
    Z = torch.as_tensor(rng.normal(size=(M, Q)))
    from bayesalign.gp.kernels import make_kernel

    kernel = make_kernel("rbf", Q, variance=1.5, lengthscale=0.9)
    noise = torch.tensor(0.2, dtype=F64)
    Kuu = kernel(Z, Z).to_dense().detach() + 1e-10 * torch.eye(M, dtype=F64)
    stats = psi_statistics(kernel, mu, S, Z)
    F = collapsed_bound(Y, noise, Kuu, stats.psi0, stats.psi1, stats.psi2)
    (grad_F,) = torch.autograd.grad(F, mu)
    with torch.no_grad():
        post = inducing_posterior(Y, noise, stable_cholesky(Kuu), stats.psi1, stats.psi2)
    point = psi_statistics(kernel, mu, S, Z, per_point=True)
    per_point = per_point_bound(Y, noise, post, point.psi0, point.psi1, point.psi2)
    (grad_points,) = torch.autograd.grad(per_point.sum(), mu)
    # KL(q(u) || p(u)) for q(u_d) = N(Kuu alpha_d, Kuu A^-1 Kuu), p(u_d) = N(0, Kuu), independently
    with torch.no_grad():
        A = Kuu + stats.psi2 / noise
        Sigma = Kuu @ torch.linalg.solve(A, Kuu)
        means = Kuu @ post.alpha  # [M, D]
        kl_u = 0.5 * (D * torch.trace(torch.linalg.solve(Kuu, Sigma))
                      + torch.trace(means.T @ torch.linalg.solve(Kuu, means)) - D * M
                      + D * (torch.logdet(Kuu) - torch.logdet(Sigma)))
    assert float(per_point.sum().detach()) == pytest.approx(float(F.detach() + kl_u), rel=1e-9)
    # the summed statistics give the same sum (what inference optimises)
    summed = per_point_bound(Y, noise, post, stats.psi0, stats.psi1, stats.psi2)
    assert summed.dim() == 0 and float(summed.detach()) == pytest.approx(float(per_point.sum().detach()), rel=1e-12)
    torch.testing.assert_close(grad_points, grad_F, rtol=1e-7, atol=1e-9)


def test_kl_of_diagonal_gaussians_matches_torch_distributions():
    mean = torch.tensor([[0.3, -1.0]], dtype=F64)
    var = torch.tensor([[0.5, 2.0]], dtype=F64)
    q = torch.distributions.Normal(mean, var.sqrt())
    p = torch.distributions.Normal(torch.zeros_like(mean), torch.ones_like(var))
    assert float(kl_standard_normal(mean, var)) == pytest.approx(float(torch.distributions.kl_divergence(q, p).sum()))


# ----------------------------------------------------------------------------------------------------
# the bound and predictions against GPy
# ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpy_pair():
    GPy = pytest.importorskip("GPy")
    rng = np.random.default_rng(3)
    N, Q, D, M = 30, 3, 4, 8
    Y = curve_data(N, D, seed=3)
    Y = Y - Y.mean(0)
    mu = rng.normal(size=(N, Q))
    S = rng.uniform(0.05, 0.5, size=(N, Q))
    Z = rng.normal(size=(M, Q))
    variance, lengthscale, noise = 1.7, np.array([0.7, 1.4, 2.5]), 0.15
    ours = unfitted(Y, Q, M, mu, jitter=1e-8 / variance)  # GPy adds 1e-8 to Kuu; ours is relative
    set_state(ours, mu, S, Z, variance, lengthscale, noise)
    kern = GPy.kern.RBF(Q, ARD=True, variance=variance, lengthscale=lengthscale)
    gpy = GPy.models.BayesianGPLVM(Y, Q, X=mu.copy(), X_variance=S.copy(), Z=Z.copy(), num_inducing=M,
                                   kernel=kern)
    gpy.likelihood.variance = noise
    return ours, gpy


def test_bound_and_its_gradient_equal_gpy_bayesian_gplvm(gpy_pair):
    ours, gpy = gpy_pair
    module = ours.module_
    module.zero_grad()
    bound = module()
    bound.backward()
    assert float(bound.detach()) == pytest.approx(gpy_bound(gpy), rel=1e-6)
    gpy._grads(gpy.optimizer_array.copy())  # GPy's .gradient attributes are stale until an evaluation
    np.testing.assert_allclose(module.q_mean.grad.numpy(), gpy.X.mean.gradient, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(module.inducing_inputs.grad[0].numpy(), gpy.Z.gradient, rtol=1e-5, atol=1e-7)
    raw = module.kernels[0].base_kernel.raw_lengthscale
    d_lengthscale = (raw.grad / torch.sigmoid(raw.detach())).reshape(-1).numpy()  # softplus' = sigmoid
    np.testing.assert_allclose(d_lengthscale, gpy.kern.lengthscale.gradient, rtol=1e-5)


def test_predict_equals_gpy_and_uncertain_inputs_match_monte_carlo(gpy_pair):
    ours, gpy = gpy_pair
    rng = np.random.default_rng(4)
    Xnew = rng.normal(size=(5, 3))
    mean, var = ours.predict(Xnew)
    g_mean, g_var = gpy.predict(Xnew)  # GPy includes the noise by default
    np.testing.assert_allclose(mean, g_mean + ours.output_means_["Y"], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(var, np.broadcast_to(g_var, var.shape), rtol=1e-6)
    # uncertain input x ~ N(m, s): moments of the predictive mixture by Monte Carlo
    m, s = Xnew[:1], np.array([[0.2, 0.1, 0.3]])
    u_mean, u_var = ours.predict(m, X_variance=s, include_noise=False)
    samples = m + np.sqrt(s) * rng.normal(size=(20000, 3))
    f_mean, f_var = ours.predict(samples, include_noise=False)
    mc_mean = f_mean.mean(0)
    mc_var = f_var.mean(0) + f_mean.var(0)
    se = f_mean.std(0) / math.sqrt(len(samples))
    assert np.all(np.abs(u_mean[0] - mc_mean) < 4 * se)
    np.testing.assert_allclose(u_var[0], mc_var, rtol=0.05)


# ----------------------------------------------------------------------------------------------------
# fitting, inference of new points
# ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted():
    Y = curve_data(N=40)
    model = BayesianGPLVM(latent_dim=3, num_inducing=12, max_iter=300, warmup_iters=100, progress=False,
                          seed=0).fit(Y)
    return Y, model


def test_fit_increases_the_bound_and_keeps_the_best_evaluation(fitted):
    Y, model = fitted
    assert model.history_.size == model.n_iter_ == len(model.history_seconds_) == 300
    assert model.n_warmup_ == 100
    assert model.elbo() == pytest.approx(model.history_.max(), rel=1e-10)
    assert model.elbo() > model.history_[0] + 100
    # the noise is learned near the true 0.05^2
    assert 0.5 * 0.05**2 < model.noise_variance_["Y"] < 2 * 0.05**2


def test_infer_on_training_rows_recovers_their_q_x(fitted):
    """At a stationary point of the bound in q(X), each training row's q(x_n) is the optimum of its
    per-point bound with q(u) fixed (same gradient): infer must return it."""
    Y, model = fitted
    module = model.module_
    # polish q(X) with the hyperparameters fixed, so that the training q(X) is stationary
    for p in module.parameters():
        p.requires_grad_(False)
    q = [module.q_mean, module.raw_q_variance]
    for p in q:
        p.requires_grad_(True)

    try:
        _optim.maximize(module.evaluate_with_gradient, q, max_evals=3000, tol=1e-14)
    finally:
        for p in module.parameters():
            p.requires_grad_(True)
    mean, var = model.infer(Y[:10], tol=1e-14)
    q_mean = model.embedding_.means["Y"][:10]
    q_var = model.embedding_.variances["Y"][:10]
    assert np.abs(mean - q_mean).max() < 1e-3 * np.abs(q_mean).max()
    # the trained q(X) is stationary only to the optimiser's tolerance (the polish above ends in a line-search
    # failure with |gradient| ~ 0.01-0.05), and the variance is the flattest direction: 1e-2 (0.13%-0.8% seen
    # over L-BFGS memories 10-50); the inferred q(x) must be as good for the model's own bound, to the
    # optimisers' tolerance (the two optima differ by round-off in the trajectory: 2e-8 relative seen)
    np.testing.assert_allclose(var, q_var, rtol=1e-2)
    # each row's own bound (q(u) fixed: what infer maximises) is no worse, to its round-off scale
    with torch.no_grad():
        row_bound = _row_bound(module.kernels[0], module.inducing(0), module.posterior(0), module.noise[0],
                               module.outputs(0))
        rows = torch.arange(10)
        inferred = torch.as_tensor(mean), torch.as_tensor(var)
        trained = module.q_mean[:10], module.q_variance[:10]
        (new, roundoff), (old, _) = row_bound(rows, *inferred), row_bound(rows, *trained)
        def kl(m, v):  # per row
            return 0.5 * (m.square() + v - v.log() - 1.0).sum(1)

        gain = (new - kl(*inferred)) - (old - kl(*trained))
    assert bool((gain >= -roundoff).all()), (gain, roundoff)
    # and so is the model's collapsed bound, which is at least the bound with q(u) held fixed (Titsias 2009); it
    # is itself exact to ~1e-7 relative only here (Kuu's condition number ~5e6): -2e-7 relative seen
    saved = module.q_mean.detach().clone(), module.q_variance.detach().clone()
    with torch.no_grad():
        before = float(module())
        module.q_mean[:10] = inferred[0]
        module.q_variance = torch.cat([inferred[1], saved[1][10:]])
        after = float(module())
        module.q_mean.copy_(saved[0])
        module.q_variance = saved[1]
    assert after >= before - 1e-6 * abs(before)


def test_infer_finds_a_latent_point_between_training_points(fitted):
    Y, model = fitted
    rel = model.relevance_["Y"] / model.relevance_["Y"].max()
    active = np.flatnonzero(rel > 0.05)
    X = model.embedding_.means["Y"]
    target = X[[3]].copy()
    target[0, active] = 0.5 * (X[3, active] + X[4, active])  # halfway to the next point on the curve
    Y_new, _ = model.predict(target, include_noise=False)
    mean, _ = model.infer(Y_new)
    gap = np.abs(X[3, active] - X[4, active]).max()
    assert np.abs(mean[0, active] - target[0, active]).max() < 0.2 * gap


# ----------------------------------------------------------------------------------------------------
# persistence
# ----------------------------------------------------------------------------------------------------
def test_save_load_round_trip_is_exact_and_uses_no_pickle(fitted, tmp_path):
    Y, model = fitted
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = BayesianGPLVM.load(path)
    assert loaded.elbo() == model.elbo()
    for (k1, v1), (k2, v2) in zip(model.module_.state_dict().items(), loaded.module_.state_dict().items()):
        assert k1 == k2 and torch.equal(v1, v2)
    np.testing.assert_array_equal(loaded.history_, model.history_)
    np.testing.assert_array_equal(loaded.predict(Y[:3, :3] * 0 + 0.1 * np.ones((3, 3)))[0],
                                  model.predict(0.1 * np.ones((3, 3)))[0])
    assert loaded.get_params() == model.get_params()
    with zipfile.ZipFile(path) as archive:
        assert all(name.endswith(".npy") for name in archive.namelist())
    with np.load(path, allow_pickle=False) as data:  # raises if any entry needed pickle
        assert all(data[key].dtype != object for key in data.files)


def test_load_refuses_a_file_with_pickled_objects(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, meta=np.array('{"format": "bayesalign.gp", "format_version": 1}'),
             payload=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError):
        BayesianGPLVM.load(path)


# ----------------------------------------------------------------------------------------------------
# failures and bad input
# ----------------------------------------------------------------------------------------------------
def _small():
    return BayesianGPLVM(latent_dim=2, num_inducing=8, max_iter=40, warmup_iters=10, progress=False, seed=0)


def test_nan_in_the_bound_stops_with_a_clear_error_and_the_best_parameters(monkeypatch):
    Y = curve_data(30, 5)
    original = _optim._Tracker.record
    calls = {"n": 0}

    def record(self, value, grads_finite=True):
        calls["n"] += 1  # from evaluation 25 on, every bound is NaN
        return original(self, float("nan") if calls["n"] >= 25 else value, grads_finite)

    monkeypatch.setattr(_optim._Tracker, "record", record)
    model = _small()
    with pytest.raises(NonFiniteBoundError, match="evaluation 25; the best parameters so far .* restored"):
        model.fit(Y)
    # L-BFGS-B backtracked (at most MAX_NONFINITE_STEPS times) before giving up
    assert 25 <= calls["n"] <= 25 + _optim.MAX_NONFINITE_STEPS
    # the restored parameters are those of the best evaluation recorded before the NaN
    assert model.n_iter_ == 24
    assert model.elbo() == pytest.approx(model.history_[10:].max(), rel=1e-12)


def test_a_transient_nan_step_is_backtracked_from(monkeypatch):
    Y = curve_data(30, 5)
    original = _optim._Tracker.record
    calls = {"n": 0}

    def record(self, value, grads_finite=True):
        calls["n"] += 1  # one line-search step lands where the bound is NaN
        return original(self, float("nan") if calls["n"] == 25 else value, grads_finite)

    monkeypatch.setattr(_optim._Tracker, "record", record)
    model = _small().fit(Y)
    assert calls["n"] > 25 and np.all(np.isfinite(model.history_))
    assert model.elbo() == pytest.approx(model.history_.max(), rel=1e-9)


def test_keyboard_interrupt_keeps_the_best_parameters(monkeypatch):
    Y = curve_data(30, 5)
    original = _optim._Tracker.record
    calls = {"n": 0}

    def record(self, value, grads_finite=True):
        calls["n"] += 1
        if calls["n"] == 20:
            raise KeyboardInterrupt
        return original(self, value, grads_finite)

    monkeypatch.setattr(_optim._Tracker, "record", record)
    model = _small()
    # the interrupt is said, the best parameters kept, and Ctrl-C reaches the caller
    with pytest.warns(RuntimeWarning, match="interrupted"), pytest.raises(KeyboardInterrupt):
        model.fit(Y)
    assert model.interrupted_ and model.n_iter_ == 19
    assert model.elbo() == pytest.approx(model.history_[10:].max(), rel=1e-12)


def test_constant_column_is_dropped_with_a_warning_and_predicted_as_constant():
    Y = curve_data(30, 5)
    Y = np.c_[Y, np.full(30, 7.0)]
    with pytest.warns(RuntimeWarning, match="constant column"):
        model = _small().fit(Y)
    assert np.isfinite(model.elbo())
    mean, var = model.predict(np.zeros((2, 2)))
    assert mean.shape == (2, 6) and np.all(mean[:, 5] == 7.0) and np.all(var[:, 5] == 0.0)
    infer_mean, _ = model.infer(Y[:2])
    assert np.isfinite(infer_mean).all()


def test_bad_input_raises_clear_errors():
    Y = curve_data(30, 5)
    bad = Y.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="row 3, column 2"):
        _small().fit(bad)
    with pytest.raises(ValueError, match="latent_dim"):
        BayesianGPLVM(latent_dim=0, progress=False).fit(Y)
    with pytest.raises(ValueError, match="larger than PCA"):
        BayesianGPLVM(latent_dim=6, progress=False).fit(Y)
    with pytest.warns(RuntimeWarning, match="num_inducing=50"):
        model = BayesianGPLVM(latent_dim=2, num_inducing=50, max_iter=0, progress=False).fit(Y)
    assert model.module_.inducing_inputs.shape == (1, 30, 2)
    with pytest.raises(ValueError, match="columns"):
        model.infer(Y[:, :4])
    with pytest.raises(AttributeError, match="not fitted"):
        BayesianGPLVM().elbo()


def test_singular_kuu_gets_jitter_with_a_warning_that_says_how_much():
    from linear_operator.utils.warnings import NumericalWarning

    Y = curve_data(30, 5)
    model = BayesianGPLVM(latent_dim=2, num_inducing=8, max_iter=0, progress=False, seed=0, jitter=0.0).fit(Y)
    with torch.no_grad():
        # every inducing input the same point: every entry of Kuu is the same number, a rank-one matrix whose
        # Cholesky meets a zero pivot however it rounds (two equal inputs alone can round to a tiny positive one)
        model.module_.inducing_inputs[0, 1:] = model.module_.inducing_inputs[0, 0]
    with pytest.warns(NumericalWarning,
                      match=r"Kuu of view 0 was not positive definite: added jitter \d\.\de-\d\d"):
        bound = model.elbo()
    assert np.isfinite(bound)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_gives_the_cpu_bound():
    Y = curve_data(30, 5)
    cpu = BayesianGPLVM(latent_dim=2, num_inducing=8, max_iter=0, progress=False, seed=0).fit(Y)
    gpu = BayesianGPLVM(latent_dim=2, num_inducing=8, max_iter=0, progress=False, seed=0, device="cuda").fit(Y)
    assert gpu.module_.q_mean.is_cuda
    assert gpu.elbo() == pytest.approx(cpu.elbo(), rel=1e-10)


def test_diagonal_preconditioner_equalises_curvature_and_keeps_the_optimum():
    """maximize(scales=...) runs L-BFGS-B on params / scale: on a quadratic whose curvatures span 1e-4..1e4,
    scales 1 / sqrt(curvature) make it perfectly conditioned (a few evaluations; unscaled it stops short), the
    optimum is the same point in the original variables, and a frozen parameter's scale is dropped."""
    curvature = torch.logspace(-4, 4, 50, dtype=torch.float64)
    target = torch.linspace(-1.0, 2.0, 50, dtype=torch.float64)

    def run(scales):
        x = torch.zeros(50, dtype=torch.float64, requires_grad=True)
        frozen = torch.zeros(3, dtype=torch.float64)  # requires_grad False: maximize drops it with its scale

        def closure():
            bound = -0.5 * (curvature * (x - target).square()).sum()
            (-bound).backward()
            return bound.item()

        result = _optim.maximize(closure, [x, frozen], max_evals=2000, tol=1e-15, memory=10,
                                 scales=None if scales is None else [scales, torch.ones(3)])
        return x.detach(), result

    x_plain, plain = run(None)
    x_scaled, scaled = run(curvature.rsqrt())
    torch.testing.assert_close(x_scaled, target, rtol=0, atol=1e-6)
    assert scaled.n_evals <= 10 < plain.n_evals
    # unscaled, L-BFGS-B stops (relative reduction below tol) far from the optimum in the flattest directions
    assert float((x_plain - target)[:5].abs().min()) > 0.1
    with pytest.raises(ValueError, match="one entry per parameter"):
        _optim.maximize(lambda: 0.0, [torch.zeros(2, requires_grad=True)], scales=[None, None])
    with pytest.raises(ValueError, match="positive and finite"):
        _optim.maximize(lambda: 0.0, [torch.zeros(2, requires_grad=True)], scales=[torch.zeros(2)])


def test_the_main_phase_is_preconditioned_by_the_latent_spread_after_precondition_after(monkeypatch):
    """The main phase runs precondition_after evaluations unscaled, then L-BFGS restarts on mu / sqrt(S)
    (S at the restart), the rest unscaled; 0 preconditions from the start, None never; bad values refused."""
    seen = []
    maximize = _optim.maximize

    def spy(closure, params, **kwargs):
        seen.append((kwargs["desc"], kwargs.get("scales"), kwargs["max_evals"], [p.shape for p in params]))
        return maximize(closure, params, **kwargs)

    monkeypatch.setattr(_optim, "maximize", spy)
    Y = curve_data(N=20)
    kwargs = dict(latent_dim=2, num_inducing=6, max_iter=20, warmup_iters=5, progress=False, seed=0, tol=0.0)
    BayesianGPLVM(precondition_after=None, **kwargs).fit(Y)
    assert [(scales, n) for _, scales, n, _ in seen] == [(None, 5), (None, 15)]
    seen.clear()
    model = BayesianGPLVM(precondition_after=6, **kwargs).fit(Y)
    (warm, warm_scales, _, _), (plain, plain_scales, n_plain, _), (pre, scales, n_pre, shapes) = seen
    assert warm.endswith("warm-up") and warm_scales is None and plain_scales is None
    assert (n_plain, n_pre) == (6, 9) and pre.endswith("preconditioned") and model.n_iter_ == 20
    assert shapes[0] == (20, 2) and scales[0].shape == (20, 2)  # q_mean first
    assert all(s is None for s in scales[1:]) and bool((scales[0] > 0).all())
    seen.clear()
    BayesianGPLVM(precondition_after=0, **kwargs).fit(Y)
    assert [n for _, _, n, _ in seen] == [5, 15] and seen[1][1] is not None
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="precondition_after"):
            BayesianGPLVM(precondition_after=bad, **kwargs).fit(Y)


# ----------------------------------------------------------------------------------------------------
# registered priors enter the objective
# ----------------------------------------------------------------------------------------------------
def test_a_registered_lengthscale_prior_enters_the_objective_and_moves_the_fit():
    from gpytorch.priors import GammaPrior
    from scipy.stats import gamma

    from bayesalign.gp import make_kernel

    Y = curve_data(N=40, D=6, seed=2)
    kwargs = dict(latent_dim=2, num_inducing=10, max_iter=150, warmup_iters=20, progress=False, seed=0)
    plain = BayesianGPLVM(**kwargs).fit(Y)
    # Gamma(400, 100): mean 4, sd 0.2; far from the lengthscales the data choose on their own
    tight = BayesianGPLVM(kernel=make_kernel("rbf", 2, lengthscale_prior=GammaPrior(400.0, 100.0)), **kwargs).fit(Y)
    free = plain.module_.kernels[0].base_kernel.lengthscale.detach().numpy().ravel()
    pulled = tight.module_.kernels[0].base_kernel.lengthscale.detach().numpy().ravel()
    assert np.abs(free - 4.0).max() > 1.0  # the plain fit is not near the prior's mode
    assert np.abs(pulled - 4.0).max() < 0.6  # within 3 prior sd of its mean
    # the objective is the bound plus the prior's log density (scipy's Gamma, rate 100 = scale 1/100)
    module = tight.module_
    with torch.no_grad():
        bound = float(module.view_bounds().sum() - module.kl())
    log_prior = gamma(a=400.0, scale=1 / 100.0).logpdf(pulled).sum()
    assert module.log_prior().item() == pytest.approx(log_prior, rel=1e-10)
    assert tight.elbo() == pytest.approx(bound + log_prior, rel=1e-10)
    # the hand-chained gradient adds the prior's: equal to autograd through forward()
    module.evaluate_with_gradient()
    hand = {name: p.grad.clone() for name, p in module.named_parameters()}
    for p in module.parameters():
        p.grad = None
    (-module()).backward()
    for name, p in module.named_parameters():
        # two programs for the same derivative: float64 round-off
        np.testing.assert_allclose(hand[name].numpy(), p.grad.numpy(), rtol=1e-8, atol=1e-9, err_msg=name)


def test_lbfgs_finds_the_rosenbrock_minimum_as_scipy_does():
    """maximize's L-BFGS against scipy's L-BFGS-B on the 20-dimensional Rosenbrock function from (-1.2, 1): both
    reach the minimum at 1 (a closed form), ours in about as few evaluations as scipy needs (whose count is the
    reference, not a fixed number)."""
    scipy_optimize = pytest.importorskip("scipy.optimize")
    start = np.tile([-1.2, 1.0], 10)

    def rosenbrock(v):
        a, b = v[0::2], v[1::2]
        return (100.0 * (b - a ** 2) ** 2 + (1.0 - a) ** 2).sum()

    x = torch.tensor(start, dtype=torch.float64, requires_grad=True)

    def closure():
        value = rosenbrock(x)
        value.backward()
        return -value.item()

    ours = _optim.maximize(closure, [x], max_evals=2000, tol=1e-15)

    def value_and_gradient(v):
        t = torch.tensor(v, requires_grad=True)
        value = rosenbrock(t)
        value.backward()
        return value.item(), t.grad.numpy()

    theirs = scipy_optimize.minimize(value_and_gradient, start, jac=True, method="L-BFGS-B",
                                     options={"maxfun": 2000, "maxiter": 2000, "ftol": 1e-15, "gtol": 1e-8,
                                              "maxcor": _optim.LBFGS_MEMORY})
    assert ours.converged and theirs.success
    torch.testing.assert_close(x.detach(), torch.ones(20, dtype=torch.float64), rtol=0, atol=1e-6)
    # both take 50 here; round-off on other CPUs moves either count by a few evaluations, so 20% of slack (steepest
    # descent, or an L-BFGS that loses its curvature pairs, needs hundreds to thousands)
    assert ours.n_evals <= 1.2 * theirs.nfev
