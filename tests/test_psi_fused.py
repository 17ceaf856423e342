"""The RBF psi-statistics Function against the plain-torch reference, alone, in sums and in the bound."""

import gpytorch
import numpy as np
import pytest
import torch

from bayesalign.gp.bound import collapsed_bound
from bayesalign.gp.functions.rbf_psi import rbf_psi_statistics
from bayesalign.gp.kernels import make_kernel
from bayesalign.gp.psi import psi_statistics

DT = torch.float64


def inputs(N, M, Q, seed):
    g = torch.Generator().manual_seed(seed)
    mu = (torch.randn(N, Q, generator=g, dtype=DT) + 2.0).requires_grad_()  # off-centre: the shift matters
    S = (0.05 + torch.rand(N, Q, generator=g, dtype=DT)).requires_grad_()
    Z = (1.5 * torch.randn(M, Q, generator=g, dtype=DT) + 2.0).requires_grad_()
    return mu, S, Z


def kernel_with(name, Q, ard=True, seed=0):
    kernel = make_kernel(name, Q, ard=ard, bias_variance=0.3, white_variance=0.02)
    rng = np.random.default_rng(seed)
    for module in kernel.modules():
        if isinstance(module, gpytorch.kernels.RBFKernel):
            n = Q if ard else 1
            module.lengthscale = torch.as_tensor(rng.uniform(0.4, 3.0, size=n), dtype=DT)  # some dims nearly off
    return kernel


def test_gradcheck_fused_function():
    mu, S, Z = inputs(N=5, M=3, Q=2, seed=1)
    variance = torch.tensor(1.3, dtype=DT, requires_grad=True)
    precision = torch.tensor([0.7, 1.9], dtype=DT, requires_grad=True)
    for chunk_size in (None, 2):  # one block kept for the backward / three chunks recomputed
        def f(*args, chunk_size=chunk_size):
            return rbf_psi_statistics(*args, chunk_size=chunk_size)

        assert torch.autograd.gradcheck(f, (variance, precision, mu, S, Z))


def _rbf_on_dims_plus_linear(Q):
    """An RBF term on latent dimensions (0, 2) only (active_dims) plus a linear term on all."""
    rbf = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=2, active_dims=(0, 2))).to(DT)
    rbf.base_kernel.lengthscale = torch.tensor([0.7, 2.2], dtype=DT)
    return gpytorch.kernels.AdditiveKernel(rbf, make_kernel("linear", Q, variance=0.3))


@pytest.mark.parametrize("name,ard", [("rbf", True), ("rbf", False), ("rbf+bias+white", True), ("rbf+bias", True),
                                      ("rbf+linear+bias", True), ("rbf on dims + linear", True)])
def test_fused_equals_reference(name, ard):
    """Values and every gradient (mu, S, Z, raw hyperparameters) equal the plain-torch path to 1e-10 (round-off of
    sums of ~60 terms of order 1), for an RBF term alone, in sums and on some dimensions only."""
    N, M, Q = 60, 7, 3
    kernel = _rbf_on_dims_plus_linear(Q) if name == "rbf on dims + linear" else kernel_with(name, Q, ard=ard)
    mu, S, Z = inputs(N, M, Q, seed=2)
    g = torch.Generator().manual_seed(3)
    G1, G2 = torch.randn(N, M, generator=g, dtype=DT), torch.randn(M, M, generator=g, dtype=DT)
    wrt = (mu, S, Z, *kernel.parameters())
    results = []
    for fast in (True, False):
        stats = psi_statistics(kernel, mu, S, Z, fast=fast)
        loss = 0.7 * stats.psi0 + (stats.psi1 * G1).sum() + (stats.psi2 * G2).sum()
        results.append((stats, torch.autograd.grad(loss, wrt)))
    (fused, grads_fused), (ref, grads_ref) = results
    for a, b in zip(fused, ref):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    for a, b in zip(grads_fused, grads_ref):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


@pytest.mark.parametrize("chunk_size", [1, 7, 64, 1000])  # the backward recomputes exp(E) / reuses the forward's
def test_fused_chunks_agree(chunk_size):
    mu, S, Z = inputs(N=50, M=6, Q=2, seed=4)
    variance = torch.tensor(0.8, dtype=DT, requires_grad=True)
    precision = torch.tensor([1.1, 0.6], dtype=DT, requires_grad=True)
    G2 = torch.randn(6, 6, generator=torch.Generator().manual_seed(5), dtype=DT)
    wrt = (variance, precision, mu, S, Z)
    one = rbf_psi_statistics(variance, precision, mu, S, Z, chunk_size=1000)[2]
    chunked = rbf_psi_statistics(variance, precision, mu, S, Z, chunk_size=chunk_size)[2]
    torch.testing.assert_close(chunked, one, rtol=0, atol=1e-12)
    for a, b in zip(torch.autograd.grad((chunked * G2).sum(), wrt), torch.autograd.grad((one * G2).sum(), wrt)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_fused_known_value():
    """Point masses (S = 0) at the inducing inputs: psi1 = k(z, z') and psi2 = sum_n k(z, x_n) k(x_n, z')."""
    Z = torch.tensor([[0.0, 0.0], [1.0, 2.0]], dtype=DT)
    mu = Z[[0, 0, 1]]
    S = torch.zeros(3, 2, dtype=DT)
    variance, precision = torch.tensor(2.0, dtype=DT), torch.tensor([1.0, 2.0], dtype=DT) ** -2  # lengthscales 1, 2
    k01 = 2.0 * np.exp(-0.5 * (1.0 + 1.0))  # (1/1)^2 + (2/2)^2
    psi0, psi1, psi2 = rbf_psi_statistics(variance, precision, mu, S, Z)
    assert float(psi0) == pytest.approx(6.0)
    np.testing.assert_allclose(psi1.numpy(), [[2.0, k01], [2.0, k01], [k01, 2.0]], rtol=1e-12)
    np.testing.assert_allclose(psi2.numpy(), psi1.numpy().T @ psi1.numpy(), rtol=1e-12)


def _fitted_two_views(data_seed, N, widths, **mrd_options):
    """The module of a short MRD fit on two views of different widths (tanh and sin of a 2-d latent)."""
    from bayesalign.gp import MRD

    rng = np.random.default_rng(data_seed)
    X = rng.normal(size=(N, 2))
    views = {"a": np.tanh(X @ rng.normal(size=(2, widths[0]))) + 0.1 * rng.normal(size=(N, widths[0])),
             "b": np.sin(X @ rng.normal(size=(2, widths[1]))) + 0.1 * rng.normal(size=(N, widths[1]))}
    return MRD(latent_dim=3, warmup_iters=5, progress=False, seed=0, **mrd_options).fit(views).module_


@pytest.mark.parametrize("kernel", ["rbf", "rbf+bias+white", "rbf+linear"])
def test_bound_through_the_fused_statistics_equals_the_plain_bound(kernel):
    """The model's objective and the gradient of every parameter (evaluate_with_gradient, the RBF Function
    inside) equal the same bound with the plain-torch psi-statistics (fast=False) to round-off."""
    module = _fitted_two_views(0, 40, (9, 4), num_inducing=8, kernel=kernel, max_iter=20)
    params = list(module.parameters())
    value = module.evaluate_with_gradient()
    fused = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    S = module.q_variance
    plain = -module.kl(S)
    for v in range(module.n_views):
        mu, S_v = module.view_latent(v, S)
        stats = psi_statistics(module.kernels[v], mu, S_v, module.inducing(v), fast=False)
        plain = plain + collapsed_bound(module.outputs(v), module.noise[v], module.kuu(v), *stats)
    (-plain).backward()
    assert value == pytest.approx(float(plain), rel=1e-12)  # the same float64 algebra on equal statistics
    for a, p in zip(fused, params):  # gradients of a bound of order 100: round-off ~1e-12 relative
        torch.testing.assert_close(a, p.grad, rtol=1e-8, atol=1e-9 * float(p.grad.abs().max()))
