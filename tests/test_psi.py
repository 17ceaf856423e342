"""Psi-statistics: closed forms vs Monte Carlo, GPy, quadrature; gradients; fast path vs reference."""

import warnings

import numpy as np
import pytest
import torch
from gpytorch.kernels import AdditiveKernel, LinearKernel, RBFKernel, RQKernel, ScaleKernel

from bayesalign.gp.functions.rbf_psi import rbf_psi_statistics
from bayesalign.gp.kernels import WhiteKernel, ard_relevance, make_kernel
from bayesalign.gp.psi import psi_statistics, supports_analytic

DT = torch.float64


def t64(x):
    return torch.as_tensor(np.asarray(x), dtype=DT)


def inputs(N=3, M=4, Q=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    mu = torch.randn(N, Q, generator=g, dtype=DT)
    S = 0.1 + torch.rand(N, Q, generator=g, dtype=DT)
    Z = 1.5 * torch.randn(M, Q, generator=g, dtype=DT)
    return mu, S, Z


def set_params(kernel, lengthscale=None, variance=None, linear=None, bias=None, white=None):
    """Set a make_kernel kernel's parameters from float64 tensors (python floats go through float32)."""
    for k in kernel.kernels if isinstance(kernel, AdditiveKernel) else [kernel]:
        if isinstance(k, ScaleKernel):
            k.base_kernel.lengthscale = t64(lengthscale)
            k.outputscale = t64(variance)
        elif isinstance(k, LinearKernel):
            k.variance = t64(linear)
        elif isinstance(k, WhiteKernel):
            k.variance = t64(white)
        else:
            k.constant = t64([bias])
    return kernel


PARAMS = dict(lengthscale=[0.8, 1.7], variance=1.3, linear=[0.6, 0.25], bias=0.4, white=0.05)


class _RBFByQuadrature(RBFKernel):
    """An RBF kernel the psi dispatcher does not recognise: goes through Gauss-Hermite quadrature."""


def monte_carlo(kernel, mu, S, Z, n_samples=100_000, seed=1):
    """Sample estimates and standard errors of (psi0, psi1, psi2), evaluating the kernel with gpytorch."""
    g = torch.Generator().manual_seed(seed)
    N, Q = mu.shape
    M = Z.shape[0]
    x = mu + S.sqrt() * torch.randn(n_samples, N, Q, generator=g, dtype=DT)  # [s, N, Q]
    with torch.no_grad():
        flat = x.reshape(-1, Q)
        kxz = kernel(flat, Z).to_dense().reshape(n_samples, N, M)  # [s, N, M]
        kxx = kernel(flat, flat, diag=True).reshape(n_samples, N).sum(1)  # [s]
        k2 = torch.einsum("snm,snk->smk", kxz, kxz)  # [s, M, M]

    def mean_se(samples):
        return samples.mean(0), samples.std(0) / np.sqrt(n_samples)

    return mean_se(kxx), mean_se(kxz), mean_se(k2)


def sum_kernel():
    return set_params(make_kernel("rbf+linear+bias+white", 2), **PARAMS)


def two_rbf_kernel():
    k1, k2 = make_kernel("rbf", 2), make_kernel("rbf", 2)
    set_params(k1, lengthscale=[0.8, 1.7], variance=1.3)
    set_params(k2, lengthscale=[2.0, 0.6], variance=0.7)
    return AdditiveKernel(k1, k2)


def quadrature_kernel():
    rq = ScaleKernel(RQKernel(ard_num_dims=2)).to(DT)
    rq.base_kernel.lengthscale = t64([1.1, 0.9])
    rq.base_kernel.alpha = t64(2.0)
    rq.outputscale = t64(0.8)
    return AdditiveKernel(set_params(make_kernel("rbf+bias", 2), **PARAMS), rq)


KERNELS = {
    "rbf": lambda: set_params(make_kernel("rbf", 2), **PARAMS),
    "linear": lambda: set_params(make_kernel("linear", 2), **PARAMS),
    "rbf+linear+bias+white": sum_kernel,
    "rbf+rbf": two_rbf_kernel,
    "rbf+bias+rq (quadrature)": quadrature_kernel,
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_matches_monte_carlo(name):
    kernel = KERNELS[name]()
    mu, S, Z = inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stats = psi_statistics(kernel, mu, S, Z, n_quadrature=24)
    for value, (mean, se) in zip(stats, monte_carlo(kernel, mu, S, Z)):
        value = value.detach()
        assert value.shape == mean.shape
        assert torch.all((value - mean).abs() <= 3 * se + 1e-12), (name, value, mean, se)


def test_closed_forms_on_a_point_mass():
    # S = 0: the expectations are kernel evaluations at mu.
    kernel = sum_kernel()
    mu, _, Z = inputs()
    stats = psi_statistics(kernel, mu, torch.zeros_like(mu), Z, per_point=True)
    with torch.no_grad():
        kxz = kernel(mu, Z).to_dense()  # [N, M]; the white term is 0 off the diagonal
    torch.testing.assert_close(stats.psi1.detach(), kxz, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(stats.psi2.detach(), kxz[:, :, None] * kxz[:, None, :], rtol=1e-12, atol=1e-12)
    # diag: rbf variance + linear sum_q a mu^2 + bias + white
    expected0 = 1.3 + mu.square() @ t64(PARAMS["linear"]) + 0.4 + 0.05
    torch.testing.assert_close(stats.psi0.detach(), expected0, rtol=1e-12, atol=1e-12)


def test_quadrature_equals_closed_form_for_rbf():
    rbf = ScaleKernel(_RBFByQuadrature(ard_num_dims=2)).to(DT)
    rbf.base_kernel.lengthscale = t64([0.8, 1.7])
    rbf.outputscale = t64(1.3)
    exact = set_params(make_kernel("rbf", 2), **PARAMS)
    assert not supports_analytic(rbf) and supports_analytic(exact)
    mu, S, Z = inputs(N=4, M=3)
    with pytest.warns(UserWarning, match="Gauss-Hermite") if _first_warning() else warnings.catch_warnings():
        approx = psi_statistics(rbf, mu, S, Z, n_quadrature=30)
    reference = psi_statistics(exact, mu, S, Z)
    for a, b in zip(approx, reference):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-9, atol=1e-12)


def _first_warning():
    from bayesalign.gp import psi

    return "_RBFByQuadrature" not in psi._WARNED_QUADRATURE


@pytest.mark.parametrize("name", list(KERNELS))
def test_per_point_sums_to_summed(name):
    kernel = KERNELS[name]()
    mu, S, Z = inputs(N=6, M=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summed = psi_statistics(kernel, mu, S, Z, n_quadrature=5)
        per_point = psi_statistics(kernel, mu, S, Z, per_point=True, n_quadrature=5)
    assert per_point.psi0.shape == (6,) and per_point.psi2.shape == (6, 5, 5)
    torch.testing.assert_close(per_point.psi0.sum(), summed.psi0, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(per_point.psi1, summed.psi1, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(per_point.psi2.sum(0), summed.psi2, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(summed.psi2, summed.psi2.T, rtol=0, atol=1e-14)


# --- gradients --------------------------------------------------------------------------------------


def _raw_params(kernel):
    return [p for _, p in sorted(kernel.named_parameters())]


@pytest.mark.parametrize("name", ["rbf", "linear", "rbf+linear+bias+white"])
@pytest.mark.parametrize("per_point", [False, True])
def test_gradcheck_reference_path(name, per_point):
    kernel = KERNELS[name]()
    mu, S, Z = (x.requires_grad_() for x in inputs(N=3, M=2, Q=2))
    params = _raw_params(kernel)

    def f(mu, S, Z, *raw):  # raw params are perturbed in place by gradcheck
        return tuple(psi_statistics(kernel, mu, S, Z, per_point=per_point, fast=False))

    assert torch.autograd.gradcheck(f, (mu, S, Z, *params), eps=1e-6, atol=1e-7)


def test_gradcheck_quadrature_path():
    kernel = KERNELS["rbf+bias+rq (quadrature)"]()
    mu, S, Z = (x.requires_grad_() for x in inputs(N=2, M=2, Q=2))

    def f(mu, S, Z, *raw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return tuple(psi_statistics(kernel, mu, S, Z, n_quadrature=3))

    assert torch.autograd.gradcheck(f, (mu, S, Z, *_raw_params(kernel)), eps=1e-6, atol=1e-7)


def test_gradcheck_fast_path():
    kernel = KERNELS["rbf"]()
    mu, S, Z = (x.requires_grad_() for x in inputs(N=3, M=2, Q=2))
    params = _raw_params(kernel)  # raw_lengthscale, raw_outputscale

    def f(mu, S, Z, *raw):
        return psi_statistics(kernel, mu, S, Z, fast=True).psi2

    assert torch.autograd.gradcheck(f, (mu, S, Z, *params), eps=1e-6, atol=1e-7)


def test_gradcheck_custom_function_with_an_ignored_dimension():
    """The RBF Function in its precisions, one of them 0 (a dimension outside the term's active_dims)."""
    g = torch.Generator().manual_seed(3)
    mu, S, Z = (x.requires_grad_() for x in inputs(N=5, M=3, Q=3, seed=3))
    variance = t64(0.9).requires_grad_()
    precision = torch.tensor([0.8, 0.0, 1.7], dtype=DT).requires_grad_()
    G1, G2 = torch.randn(5, 3, generator=g, dtype=DT), torch.randn(3, 3, generator=g, dtype=DT)

    def f(*args):  # chunks of 2 points: the backward recomputes three chunks, the last one partial
        _, psi1, psi2 = rbf_psi_statistics(*args, chunk_size=2)
        return (psi1 * G1).sum() + (psi2 * G2).sum()

    assert torch.autograd.gradcheck(f, (variance, precision, mu, S, Z))


@pytest.mark.parametrize("chunk_size", [1, 7, 64])
def test_fast_path_equals_reference(chunk_size):
    mu, S, Z = (x.requires_grad_() for x in inputs(N=50, M=7, Q=3, seed=4))
    variance = t64(1.7).requires_grad_()
    precision = t64([0.5, 2.0, 0.05]).requires_grad_()  # 1 / lengthscale^2; the third nearly off
    G = torch.randn(7, 7, generator=torch.Generator().manual_seed(5), dtype=DT)

    from bayesalign.gp.psi import _rbf_rbf_psi2

    ref = _rbf_rbf_psi2(variance, precision, variance, precision, mu, S, Z).sum(0)
    fast = rbf_psi_statistics(variance, precision, mu, S, Z, chunk_size=chunk_size)[2]
    torch.testing.assert_close(fast, ref, rtol=0, atol=1e-10)
    wrt = (mu, S, Z, variance, precision)
    grads_ref = torch.autograd.grad((ref * G).sum(), wrt)
    grads_fast = torch.autograd.grad((fast * G).sum(), wrt)
    for a, b in zip(grads_fast, grads_ref):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_float32_fast_path_close_to_float64():
    kernel = KERNELS["rbf"]()
    mu, S, Z = inputs(N=40, M=6, Q=2, seed=6)
    ref = psi_statistics(kernel, mu, S, Z).psi2.detach()
    single = psi_statistics(kernel.float(), mu.float(), S.float(), Z.float() + 0.0).psi2.detach()
    assert single.dtype == torch.float32
    torch.testing.assert_close(single.double(), ref, rtol=1e-5, atol=1e-6)


# --- GPy ----------------------------------------------------------------------------------------------


def _gpy_kernel(GPy, name, Q):
    parts = {
        "rbf": lambda: GPy.kern.RBF(Q, variance=1.3, lengthscale=np.array(PARAMS["lengthscale"]), ARD=True),
        "linear": lambda: GPy.kern.Linear(Q, variances=np.array(PARAMS["linear"]), ARD=True),
        "bias": lambda: GPy.kern.Bias(Q, variance=0.4),
        "white": lambda: GPy.kern.White(Q, variance=0.05),
    }
    names = name.split("+")
    kern = parts[names[0]]()
    for n in names[1:]:
        kern = kern + parts[n]()
    return kern


@pytest.mark.parametrize("name", ["rbf", "linear", "rbf+bias", "linear+bias+white", "rbf+bias+white"])
def test_matches_gpy(name):
    GPy = pytest.importorskip("GPy")
    from GPy.core.parameterization.variational import NormalPosterior

    mu, S, Z = inputs(N=6, M=5)
    qx = NormalPosterior(mu.numpy(), S.numpy())
    gk = _gpy_kernel(GPy, name, 2)
    kernel = set_params(make_kernel(name, 2), **PARAMS)
    stats = psi_statistics(kernel, mu, S, Z)
    per_point = psi_statistics(kernel, mu, S, Z, per_point=True)
    z = Z.numpy()
    np.testing.assert_allclose(stats.psi0.item(), gk.psi0(z, qx).sum(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(stats.psi1.detach().numpy(), gk.psi1(z, qx), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(stats.psi2.detach().numpy(), gk.psi2(z, qx), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(per_point.psi2.detach().numpy(), gk.psi2n(z, qx), rtol=1e-10, atol=1e-10)


def test_rbf_linear_on_disjoint_dims_matches_gpy():
    # GPy's exact RBF x linear cross term needs disjoint active dimensions (then it factorises);
    # this also checks active_dims handling. Overlapping dims are covered by Monte Carlo above.
    GPy = pytest.importorskip("GPy")
    from GPy.core.parameterization.variational import NormalPosterior

    mu, S, Z = inputs(N=6, M=5, Q=3)
    rbf = ScaleKernel(RBFKernel(ard_num_dims=2, active_dims=(0, 2))).to(DT)
    rbf.base_kernel.lengthscale = t64([0.8, 1.7])
    rbf.outputscale = t64(1.3)
    lin = LinearKernel(active_dims=(1,)).to(DT)
    lin.variance = t64(0.6)
    stats = psi_statistics(AdditiveKernel(rbf, lin), mu, S, Z)
    grbf = GPy.kern.RBF(2, variance=1.3, lengthscale=np.array([0.8, 1.7]), ARD=True, active_dims=[0, 2])
    gk = grbf + GPy.kern.Linear(1, variances=0.6, active_dims=[1])
    # GPy sends RBF + linear to its own quadrature unless told its exact (disjoint-dims) cross term applies
    gk._exact_psicomp = True
    qx = NormalPosterior(mu.numpy(), S.numpy())
    z = Z.numpy()
    np.testing.assert_allclose(stats.psi1.detach().numpy(), gk.psi1(z, qx), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(stats.psi2.detach().numpy(), gk.psi2(z, qx), rtol=1e-10, atol=1e-10)


# --- validation and kernels -----------------------------------------------------------------------------


def test_bad_inputs():
    kernel = KERNELS["rbf"]()
    mu, S, Z = inputs()
    with pytest.raises(ValueError, match="non-negative"):
        psi_statistics(kernel, mu, -S, Z)
    with pytest.raises(ValueError, match="columns"):
        psi_statistics(kernel, mu, S, Z[:, :1])
    with pytest.raises(ValueError, match="shape of mu"):
        psi_statistics(kernel, mu, S[:2], Z)
    with pytest.raises(TypeError, match="float32"):
        psi_statistics(kernel, mu, S, Z.float())


def test_ard_relevance():
    kernel = sum_kernel()
    # RBF variance / l^2 + linear ARD variances; bias and white add nothing
    expected = 1.3 / t64(PARAMS["lengthscale"]) ** 2 + t64(PARAMS["linear"])
    torch.testing.assert_close(ard_relevance(kernel).detach(), expected, rtol=1e-12, atol=0)
    rbf = ScaleKernel(RBFKernel(ard_num_dims=1, active_dims=(2,))).to(DT)
    rbf.base_kernel.lengthscale = t64(0.5)
    torch.testing.assert_close(ard_relevance(rbf, input_dim=4).detach(), t64([0, 0, 4.0 * rbf.outputscale.item(), 0]))


def test_make_kernel_and_white():
    k = make_kernel("rbf", 3, ard=False, lengthscale=2.0, variance=0.5, white=True)
    rbf, white = k.kernels
    assert rbf.base_kernel.lengthscale.shape == (1, 1) and rbf.base_kernel.lengthscale.item() == 2.0
    assert white.variance.item() == pytest.approx(1e-6, rel=1e-12)
    x = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], dtype=DT)
    off = 0.5 * np.exp(-1 / 8)  # lengthscale 2, distance 1
    expected = torch.tensor([[0.5 + 1e-6, off], [off, 0.5 + 1e-6]], dtype=DT)
    torch.testing.assert_close(k(x, x).to_dense().detach(), expected)
    with pytest.raises(ValueError, match="unknown kernel"):
        make_kernel("rbf+cosine", 2)


def test_pair_layout_is_the_adjoint_of_the_symmetric_fill():
    """psi2 is computed on the pairs m <= k only: <G, sym(x)> = <pairs_of_gradient(G), x> for any G
    (also non-symmetric), and the fill puts every pair at (m, k) and (k, m)."""
    from bayesalign.gp.functions.rbf_psi import n_pairs, pairs_of_gradient, symmetric_from_pairs

    g = torch.Generator().manual_seed(11)
    M = 6
    x = torch.randn(2, n_pairs(M), generator=g, dtype=DT)
    G = torch.randn(2, M, M, generator=g, dtype=DT)
    full = symmetric_from_pairs(x, M)
    torch.testing.assert_close(full, full.mT, rtol=0, atol=0)
    rows, cols = torch.triu_indices(M, M)
    torch.testing.assert_close(full[:, rows, cols], x, rtol=0, atol=0)
    torch.testing.assert_close((G * full).sum((1, 2)), (pairs_of_gradient(G) * x).sum(1), rtol=1e-14, atol=0)
