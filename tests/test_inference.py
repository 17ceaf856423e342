"""Inference of q(x*) for new rows: the batched per-row optimiser and the per-row bounds it maximises."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize
import torch

from bayesalign.gp import MRD, inference
from bayesalign.gp._optim import NonFiniteBoundError, minimize_rows
from bayesalign.gp.bound import per_point_bound
from bayesalign.gp.inference import infer_latent
from bayesalign.gp.kernels import make_kernel
from bayesalign.gp.psi import psi_statistics

sys.path.insert(0, str(Path(__file__).parent))
from test_mrd_partial import set_state  # noqa: E402

F64 = torch.float64


# ----------------------------------------------------------------------------------------------------
# the optimiser on functions with known minima
# ----------------------------------------------------------------------------------------------------
def rosenbrock_rows(a):
    """Row n: a_n (x2 - x1^2)^2 + (1 - x1)^2, minimum 0 at (1, 1) whatever a_n."""
    calls = []

    def fun(x, rows):
        calls.append(rows.clone())
        a_n = a[rows]
        r = x[:, 1] - x[:, 0].square()
        f = a_n * r.square() + (1 - x[:, 0]).square()
        g = torch.stack([-4 * a_n * r * x[:, 0] - 2 * (1 - x[:, 0]), 2 * a_n * r], 1)
        return f, g

    return fun, calls


def test_minimize_rows_solves_each_row_as_if_it_were_alone():
    a = torch.tensor([1.0, 10.0, 100.0, 3.0], dtype=F64)
    x0 = torch.tensor([[-1.2, 1.0], [0.0, 0.0], [-1.5, 2.0], [2.0, 2.0]], dtype=F64)
    fun, calls = rosenbrock_rows(a)
    x, info = minimize_rows(fun, x0, tol=1e-15)
    np.testing.assert_allclose(x.numpy(), 1.0, atol=1e-6)
    assert bool(info["converged"].all())
    # converged rows leave the batch: every call evaluates only the rows still moving
    assert [len(c) for c in calls] == sorted((len(c) for c in calls), reverse=True)
    assert info["n_evals"] == len(calls) == int(info["row_evals"].max())
    # a row's path does not depend on the other rows: alone it takes the same evaluations, same answer
    for n in range(4):
        alone, alone_info = minimize_rows(rosenbrock_rows(a[n:n + 1])[0], x0[n:n + 1], tol=1e-15)
        assert int(alone_info["row_evals"][0]) == int(info["row_evals"][n])
        np.testing.assert_allclose(alone.numpy(), x[n:n + 1].numpy(), rtol=0, atol=1e-13)


def test_minimize_rows_backtracks_out_of_non_finite_regions():
    """The bound is NaN beyond |x| > 1.5; the minimum (1.4) is near the edge and the first steps overshoot."""
    target = torch.tensor([[1.4, -1.4], [1.45, 0.3]], dtype=F64)

    def fun(x, rows):
        diff = x - target[rows]
        f = 50.0 * diff.square().sum(1)
        outside = (x.abs() > 1.5).any(1)
        nan = float("nan")
        return f.masked_fill(outside, nan), (100.0 * diff).masked_fill(outside[:, None], nan)

    x, info = minimize_rows(fun, torch.zeros(2, 2, dtype=F64), tol=1e-15)
    assert bool(torch.isfinite(x).all())
    np.testing.assert_allclose(x.numpy(), target.numpy(), atol=1e-7)


def test_minimize_rows_refuses_a_non_finite_start_naming_the_rows():
    def fun(x, rows):
        f = x.square().sum(1)
        return f.masked_fill(rows == 2, float("nan")), 2 * x

    with pytest.raises(NonFiniteBoundError, match=r"1 row\(s\), e.g. rows \[2\]"):
        minimize_rows(fun, torch.ones(4, 3, dtype=F64))


def test_minimize_rows_counts_evaluations_and_passes_an_interrupt_on():
    a = torch.tensor([100.0, 100.0], dtype=F64)
    x0 = torch.tensor([[-1.2, 1.0], [0.5, -0.5]], dtype=F64)
    fun, calls = rosenbrock_rows(a)
    f0 = fun(x0, torch.arange(2))[0]
    x, info = minimize_rows(fun, x0, max_iter=5)
    assert len(calls) - 1 == info["n_evals"] == 5 and not bool(info["converged"].any())

    def interrupted(x, rows):
        if len(calls) >= 4:
            raise KeyboardInterrupt
        return fun(x, rows)

    calls.clear()
    # the interrupt is said and reaches the caller: Ctrl-C must stop whatever called the optimiser
    with pytest.warns(RuntimeWarning, match="interrupted after 4 evaluations"), pytest.raises(KeyboardInterrupt):
        minimize_rows(interrupted, x0)
    assert len(calls) == 4 and bool((f0 > 0).all())


# ----------------------------------------------------------------------------------------------------
# a model whose new rows are well determined: GP samples at known latent points
# ----------------------------------------------------------------------------------------------------
def rbf_matrix(A, B, variance, lengthscale):
    return variance * np.exp(-0.5 * (((A[:, None, :] - B[None]) / lengthscale) ** 2).sum(-1))


@pytest.fixture(scope="module")
def sampled():
    """Two views drawn from the model's own GP prior at 40 + 20 latent points; the model holds q(X) of
    the first 40 at the true points, and the last 20 rows of view b are the new rows."""
    rng = np.random.default_rng(0)
    N, n, Q, D, M = 40, 20, 2, 6, 6
    X = rng.normal(size=(N + n, Q))
    hyper = [(1.0, np.array([1.0, 1.5]), 0.01), (1.5, np.array([1.2, 0.8]), 0.01)]
    views = {}
    for name, (variance, lengthscale, noise) in zip("ab", hyper):
        K = rbf_matrix(X, X, variance, lengthscale) + 1e-8 * np.eye(N + n)
        F = np.linalg.cholesky(K) @ rng.normal(size=(N + n, D))
        views[name] = F + np.sqrt(noise) * rng.normal(size=F.shape)
    model = MRD(latent_dim=Q, num_inducing=M, max_iter=0, progress=False, seed=0).fit(
        {k: v[:N] for k, v in views.items()})
    set_state(model, X[:N], np.full((N, Q), 0.01), X[rng.choice(N, M, replace=False)], hyper)
    keep = model.kept_columns_["b"]
    Y = model._tensor(views["b"][N:][:, keep] - model.output_means_["b"][keep])  # [n, D] centred
    return model, Y


def row_bounds(module, view, Y, mean, var):
    """F_n - KL_n [n] through the reference per-point statistics (plain torch, not the fused path)."""
    mean, var = torch.as_tensor(mean), torch.as_tensor(var)
    with torch.no_grad():
        stats = psi_statistics(module.kernels[view], mean, var, module.inducing(view), per_point=True,
                               fast=False)
        F = per_point_bound(Y, module.noise[view], module.posterior(view), stats.psi0, stats.psi1, stats.psi2)
    return (F - 0.5 * (mean.square() + var - var.log() - 1).sum(1)).numpy()


def test_infer_matches_the_joint_lbfgs_optimum(sampled):
    """The former method: one L-BFGS on the sum of the rows' bounds (summed statistics) from the same
    start, run by scipy to its limit, then polished by Newton steps on the same sum (its Hessian by
    autograd): the new rows agree with that optimum to 1e-5 (means, absolute on their scale) and 2e-5
    (variances, relative: log S is the flattest direction, where a 1e-5 change moves a row's bound by
    2.5e-11, its round-off, at which the rows stop), and no row's bound is lower than scipy's by more
    than 1e-8."""
    model, Y = sampled
    module, view = model.module_, 1
    mean, var = infer_latent(module, view, Y, tol=1e-14)
    n, Q = mean.shape
    kernel, Z, noise = module.kernels[view], module.inducing(view), module.noise[view]
    posterior = module.posterior(view)

    def joint_bound(x, fast=True):
        x = x.reshape(n, 2 * Q)
        mu, log_S = x[:, :Q], x[:, Q:]
        stats = psi_statistics(kernel, mu, log_S.exp(), Z, fast=fast)  # summed: the former objective
        return (per_point_bound(Y, noise, posterior, stats.psi0, stats.psi1, stats.psi2)
                - 0.5 * (mu.square() + log_S.exp() - log_S - 1).sum())

    def negative_bound(flat):
        x = torch.tensor(flat).requires_grad_(True)
        bound = joint_bound(x)
        (grad,) = torch.autograd.grad(-bound, x)
        return -bound.item(), grad.numpy()

    nearest = inference._nearest_rows(Y, module.outputs(view), 100)
    start = torch.cat([module.q_mean[nearest], module.q_variance[nearest].log()], 1).detach().numpy()
    for p in module.parameters():
        p.requires_grad_(False)
    try:
        res = scipy.optimize.minimize(negative_bound, start.ravel(), jac=True, method="L-BFGS-B",
                                      options={"ftol": 0, "gtol": 1e-13, "maxiter": 5000, "maxcor": 20})
        x = torch.tensor(res.x)
        for _ in range(3):  # Newton on the joint objective (plain-torch statistics: twice differentiable)
            hessian = torch.autograd.functional.hessian(lambda z: -joint_bound(z, fast=False), x)
            grad = torch.autograd.functional.jacobian(lambda z: -joint_bound(z, fast=False), x)
            x = x - torch.linalg.solve(hessian, grad)
    finally:
        for p in module.parameters():
            p.requires_grad_(True)
    ref = x.reshape(n, 2 * Q).numpy()
    ref_mean, ref_var = ref[:, :Q], np.exp(ref[:, Q:])
    np.testing.assert_allclose(res.x.reshape(n, 2 * Q), ref, atol=1e-2)  # scipy got close; Newton finished
    np.testing.assert_allclose(mean.numpy(), ref_mean, rtol=0, atol=1e-5 * np.abs(ref_mean).max())
    np.testing.assert_allclose(var.numpy(), ref_var, rtol=2e-5)
    scipy_rows = res.x.reshape(n, 2 * Q)
    ours = row_bounds(module, view, Y, mean, var)
    assert (ours >= row_bounds(module, view, Y, scipy_rows[:, :Q], np.exp(scipy_rows[:, Q:])) - 1e-8).all()
    np.testing.assert_allclose(ours, row_bounds(module, view, Y, ref_mean, ref_var), rtol=0, atol=1e-9)


def test_infer_rows_do_not_depend_on_the_batch(sampled):
    """A row's q(x*) does not depend on which other rows are inferred with it, nor on their order.

    Not bit for bit: BLAS sums in an order that depends on the CPU and on the batch's shape, so the
    paths of one row in two batches differ by round-off and the rows stop at slightly different
    points. What the optimiser guarantees is its stopping rule: a row stops when a step gains at most
    ``tol * |F_n|`` (tol = 1e-10 here) or the round-off of ``F_n``; so each row's bound must agree
    between batches to a few times that. The point itself is fixed only to about
    sqrt(tol * |F_n| / curvature): along log S, the flattest direction (a 1e-5 relative change moves
    F_n by 2.5e-11), that is ~5e-4 relative, hence rtol 2e-3 on the variances and 2e-3 of the
    means' scale on the means."""
    model, Y = sampled
    module, view, tol = model.module_, 1, 1e-10
    together = infer_latent(module, view, Y, tol=tol)
    F_together = row_bounds(module, view, Y, *together)
    # the stopping rule's slack (two stops) plus a generous round-off of |F_n| in float64
    slack = 2 * tol * np.maximum(np.abs(F_together), 1.0) + 1e-12 * np.abs(F_together).max()

    def assert_same_rows(rows, other):
        np.testing.assert_allclose(row_bounds(module, view, Y[rows], *other), F_together[rows], rtol=0,
                                   atol=slack[rows].max())
        mean, var = together[0][rows].numpy(), together[1][rows].numpy()
        np.testing.assert_allclose(other[0].numpy(), mean, rtol=0, atol=2e-3 * np.abs(mean).max())
        np.testing.assert_allclose(other[1].numpy(), var, rtol=2e-3)

    for rows in (slice(3, 5), slice(11, 12)):
        assert_same_rows(rows, infer_latent(module, view, Y[rows], tol=tol))
    # and not on their order
    order = torch.randperm(Y.shape[0], generator=torch.Generator().manual_seed(0))
    assert_same_rows(order.numpy(), infer_latent(module, view, Y[order], tol=tol))


def test_infer_of_a_non_finite_row_is_an_error_naming_it(sampled):
    model, Y = sampled
    bad = Y.clone()
    bad[7, 2] = float("nan")
    with pytest.raises(NonFiniteBoundError, match=r"rows \[7\]"):
        infer_latent(model.module_, 1, bad)


def test_infer_warns_about_rows_that_run_out_of_evaluations(sampled):
    model, Y = sampled
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match=r"20 of 20 rows had not converged after 2 evaluations"):
        mean, var = infer_latent(model.module_, 1, Y, max_iter=2)
    assert bool(torch.isfinite(mean).all() & (var > 0).all())


# ----------------------------------------------------------------------------------------------------
# the fused per-row bound of the RBF kernel against the per-point statistics
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["rbf", "rbf+bias+white"])
def test_fused_row_bound_equals_the_per_point_statistics(sampled, name):
    model, Y = sampled
    module = model.module_
    rng = np.random.default_rng(3)
    kernel = make_kernel(name, 2, bias_variance=0.3, white_variance=0.05)
    rbf = kernel.kernels[0] if name != "rbf" else kernel
    rbf.base_kernel.lengthscale = torch.tensor([0.7, 1.9], dtype=F64)
    Z, noise, posterior = module.inducing(1).detach(), module.noise[1].detach(), module.posterior(1)
    for p in kernel.parameters():
        p.requires_grad_(False)
    fused = inference._row_bound(kernel, Z, posterior, noise, Y)
    assert isinstance(fused, inference._RBFRowBound)
    G = (posterior.alpha @ posterior.alpha.T - Y.shape[1] * posterior.woodbury_inv)
    reference = inference._PerPointRowBound(kernel, Z, posterior, 0.5 * (G + G.T), noise, Y)
    rows = torch.tensor([4, 0, 19, 4])
    mu = torch.tensor(rng.normal(size=(4, 2)), requires_grad=True)
    S = torch.tensor(rng.uniform(0.001, 2.0, size=(4, 2)), requires_grad=True)
    values, grads = [], []
    for bound in (fused, reference):
        value, roundoff = bound(rows, mu, S)
        values.append(value.detach().numpy())
        grads.append(torch.cat(torch.autograd.grad(value.sum(), (mu, S)), 1).numpy())
        assert (roundoff > 0).all() and (roundoff < 1e-9 * np.abs(values[-1]).max()).all()
    np.testing.assert_allclose(values[0], values[1], rtol=1e-11)
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-9, atol=1e-11)
    # rows 0 and 3 are the same row at the same point
    with torch.no_grad():
        twice, twice_roundoff = fused(rows[[0, 0]], mu[[0, 0]], S[[0, 0]])
    # the same value to its own round-off estimate (not bit for bit: a batch of 2 and one of 4 may be
    # summed in different orders by BLAS, depending on the CPU)
    np.testing.assert_allclose(twice.numpy(), values[0][0], rtol=0, atol=float(twice_roundoff.max()))


def test_the_per_point_path_finds_the_same_rows(sampled, monkeypatch):
    """Kernels without the fused path (e.g. a sum with a linear term) take per-point psi-statistics:
    forced onto that path, the RBF model's rows come out the same."""
    model, Y = sampled
    fused = infer_latent(model.module_, 1, Y[:6], tol=1e-14)
    monkeypatch.setattr(inference, "_rbf_parts", lambda *args: None)
    general = infer_latent(model.module_, 1, Y[:6], tol=1e-14)
    for a, b in zip(fused, general):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_infer_on_cuda_matches_cpu(sampled):
    model, Y = sampled
    mean, var = infer_latent(model.module_, 1, Y)
    module = model.module_.to("cuda")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mean_gpu, var_gpu = infer_latent(module, 1, Y.cuda())
    finally:
        model.module_.to("cpu")
    assert mean_gpu.device.type == "cuda"
    # each device's optimiser stops at its own tolerance after other round-off: the variances (about 1e-3 here)
    # agree to 2e-8 absolute, 1.5e-5 relative (a GPU against its host's CPU)
    np.testing.assert_allclose(mean_gpu.cpu().numpy(), mean.numpy(), atol=1e-6)
    np.testing.assert_allclose(var_gpu.cpu().numpy(), var.numpy(), rtol=1e-4)


def test_nearest_observed_rows_is_the_brute_force_over_co_observed_entries():
    from bayesalign.gp.inference import nearest_observed_rows

    rng = np.random.default_rng(0)
    train, Y = torch.as_tensor(rng.normal(size=(40, 6))), torch.as_tensor(rng.normal(size=(9, 6)))
    train[rng.random(train.shape) < 0.3] = float("nan")
    Y[rng.random(Y.shape) < 0.3] = float("nan")
    expected = []
    for y in Y.numpy():
        both = ~np.isnan(y) & ~np.isnan(train.numpy())  # [40, 6]
        sq = np.where(both, (y - np.nan_to_num(train.numpy())) ** 2, 0.0).sum(1)
        expected.append(np.argmin(np.where(both.any(1), sq / np.maximum(both.sum(1), 1), np.inf)))
    for block in (1 << 22, 40, 1):  # one block, one row of Y per block, and the smallest
        assert nearest_observed_rows(Y, train, block_entries=block).tolist() == expected
    complete = torch.as_tensor(rng.normal(size=(40, 6)))  # no NaN: the Euclidean nearest row
    assert nearest_observed_rows(torch.nan_to_num(Y), complete).tolist() == \
        torch.cdist(torch.nan_to_num(Y), complete).argmin(1).tolist()


def _scripted(values):
    """A closure for maximize that returns ``values`` in turn, with a zero gradient."""
    x = torch.zeros(1, dtype=F64, requires_grad=True)
    it = iter(values)

    def closure():
        x.grad = torch.zeros_like(x)
        return next(it)
    return closure, [x]


def test_maximize_stops_when_the_best_bound_rose_by_less_than_tol_over_the_window():
    from bayesalign.gp._optim import STOP_WINDOW, maximize

    # the rule watches the recorded bounds, whatever the optimiser (Adam here: a zero gradient does not end it)
    # a bound rising 1e-3 per evaluation from -100: 0.05 = 5e-4 of |bound| over a window of STOP_WINDOW = 50
    rising = [-100.0 + 1e-3 * k for k in range(400)]
    closure, params = _scripted(rising)
    result = maximize(closure, params, method="adam", max_evals=300, tol=1e-3)
    assert result.converged and result.n_evals == STOP_WINDOW + 1  # the first window already rose too little
    closure, params = _scripted(rising)
    result = maximize(closure, params, method="adam", max_evals=300, tol=1e-4)
    assert not result.converged and result.n_evals == 300  # 5e-4 per window > 1e-4: it climbs to the budget


def test_maximize_goes_on_through_a_flat_stretch_shorter_than_the_window():
    from bayesalign.gp._optim import STOP_WINDOW, maximize

    # 20 flat evaluations between rises of 1 (1% of |bound|): a per-step rule would stop in the first stretch
    values = [-100.0 + (k // 20) for k in range(10 * STOP_WINDOW)]
    closure, params = _scripted(values)
    result = maximize(closure, params, method="adam", max_evals=5 * STOP_WINDOW, tol=1e-3)
    assert not result.converged and result.n_evals == 5 * STOP_WINDOW
