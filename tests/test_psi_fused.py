"""The fused RBF psi-statistics Function and the fast RBF Gram matrix against the plain-torch references."""

import gpytorch
import numpy as np
import pytest
import torch

from bayesalign.gp.bound import kernel_matrix
from bayesalign.gp.functions.rbf_psi import RBFGram, rbf_psi_statistics
from bayesalign.gp.kernels import _kernel_terms, fast_gram, make_kernel
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
    lengthscale = torch.tensor([0.7, 1.9], dtype=DT, requires_grad=True)
    for chunk_size in (None, 2):  # one block kept for the backward / three chunks recomputed
        def f(*args, chunk_size=chunk_size):
            return rbf_psi_statistics(*args, chunk_size=chunk_size)

        assert torch.autograd.gradcheck(f, (variance, lengthscale, mu, S, Z))


@pytest.mark.parametrize("name,ard", [("rbf", True), ("rbf", False), ("rbf+bias+white", True), ("rbf+bias", True)])
def test_fused_equals_reference(name, ard):
    """Values and every gradient (mu, S, Z, raw hyperparameters) equal the plain-torch path to 1e-10."""
    N, M, Q = 60, 7, 3
    kernel = kernel_with(name, Q, ard=ard)
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
    lengthscale = torch.tensor([1.1, 0.6], dtype=DT, requires_grad=True)
    G2 = torch.randn(6, 6, generator=torch.Generator().manual_seed(5), dtype=DT)
    wrt = (variance, lengthscale, mu, S, Z)
    one = rbf_psi_statistics(variance, lengthscale, mu, S, Z, chunk_size=1000)[2]
    chunked = rbf_psi_statistics(variance, lengthscale, mu, S, Z, chunk_size=chunk_size)[2]
    torch.testing.assert_close(chunked, one, rtol=0, atol=1e-12)
    for a, b in zip(torch.autograd.grad((chunked * G2).sum(), wrt), torch.autograd.grad((one * G2).sum(), wrt)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_fused_known_value():
    """Point masses (S = 0) at the inducing inputs: psi1 = k(z, z') and psi2 = sum_n k(z, x_n) k(x_n, z')."""
    Z = torch.tensor([[0.0, 0.0], [1.0, 2.0]], dtype=DT)
    mu = Z[[0, 0, 1]]
    S = torch.zeros(3, 2, dtype=DT)
    variance, lengthscale = torch.tensor(2.0, dtype=DT), torch.tensor([1.0, 2.0], dtype=DT)
    k01 = 2.0 * np.exp(-0.5 * (1.0 + 1.0))  # (1/1)^2 + (2/2)^2
    psi0, psi1, psi2 = rbf_psi_statistics(variance, lengthscale, mu, S, Z)
    assert float(psi0) == pytest.approx(6.0)
    np.testing.assert_allclose(psi1.numpy(), [[2.0, k01], [2.0, k01], [k01, 2.0]], rtol=1e-12)
    np.testing.assert_allclose(psi2.numpy(), psi1.numpy().T @ psi1.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["rbf", "rbf+bias+white", "linear"])
def test_fast_gram_equals_gpytorch(name):
    kernel = kernel_with(name, 3)
    Z = inputs(N=2, M=9, Q=3, seed=6)[2]
    gram = kernel_matrix(kernel, Z)
    if name == "linear":
        assert fast_gram(kernel, Z) is None  # not an RBF: GPyTorch's kernel call
    with gpytorch.settings.lazily_evaluate_kernels(False):
        ref = kernel(Z, Z).to_dense()
    torch.testing.assert_close(gram, ref, rtol=0, atol=1e-12)
    G = torch.randn(9, 9, generator=torch.Generator().manual_seed(7), dtype=DT)
    wrt = (Z, *kernel.parameters())
    for a, b in zip(torch.autograd.grad((gram * G).sum(), wrt), torch.autograd.grad((ref * G).sum(), wrt)):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_gradcheck_gram():
    x = inputs(N=2, M=5, Q=2, seed=8)[2]
    variance = torch.tensor(0.9, dtype=DT, requires_grad=True)
    lengthscale = torch.tensor([0.6, 1.4], dtype=DT, requires_grad=True)
    assert torch.autograd.gradcheck(RBFGram.apply, (variance, lengthscale, x))
    assert torch.equal(RBFGram.apply(variance, lengthscale, x).diagonal(), variance.detach().expand(5))


# ---------------------------------------------------------------------------------------------------
# RBFViewsBound: every view's collapsed bound (Kuu, psi-statistics and F) in one Function
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shared_z", [True, False])
def test_gradcheck_views_bound(shared_z):
    from bayesalign.gp.bound import RBFViewsBound

    g = torch.Generator().manual_seed(3)
    V, N, M, Q = 2, 7, 4, 3
    var = (0.5 + torch.rand(V, generator=g, dtype=DT)).requires_grad_()
    ls = (0.5 + torch.rand(V, Q, generator=g, dtype=DT)).requires_grad_()
    bias = (0.5 * torch.rand(V, generator=g, dtype=DT)).requires_grad_()
    white = (0.05 + 0.3 * torch.rand(V, generator=g, dtype=DT)).requires_grad_()
    noise = (0.2 + torch.rand(V, generator=g, dtype=DT)).requires_grad_()
    mu = torch.randn(N, Q, generator=g, dtype=DT).requires_grad_()
    S = (0.1 + 0.5 * torch.rand(N, Q, generator=g, dtype=DT)).requires_grad_()
    Z = torch.randn(1 if shared_z else V, M, Q, generator=g, dtype=DT).requires_grad_()
    Y = torch.randn(V, N, 5, generator=g, dtype=DT)
    Y[1, :, 3:] = 0.0  # view 1 has 3 columns, zero-padded to 5
    widths = torch.tensor([5.0, 3.0], dtype=DT)
    for chunk_size in (N, 3):  # one kept block / three recomputed chunks
        def f(*args, chunk_size=chunk_size):
            return RBFViewsBound.apply(*args, Y, widths, Y.square().sum((1, 2)), 1e-6, chunk_size)

        assert torch.autograd.gradcheck(f, (var, ls, bias, white, noise, mu, S, Z), eps=1e-6, atol=1e-6, rtol=1e-5)


def _fitted_two_views(data_seed, N, widths, **mrd_options):
    """The module of a short MRD fit on two views of different widths (tanh and sin of a 2-d latent)."""
    from bayesalign.gp import MRD

    rng = np.random.default_rng(data_seed)
    X = rng.normal(size=(N, 2))
    views = {"a": np.tanh(X @ rng.normal(size=(2, widths[0]))) + 0.1 * rng.normal(size=(N, widths[0])),
             "b": np.sin(X @ rng.normal(size=(2, widths[1]))) + 0.1 * rng.normal(size=(N, widths[1]))}
    return MRD(latent_dim=3, warmup_iters=5, progress=False, seed=0, **mrd_options).fit(views).module_


@pytest.mark.parametrize("kernel", ["rbf", "rbf+bias", "rbf+white"])
@pytest.mark.parametrize("inducing", ["shared", "per_view"])
def test_views_bound_equals_the_view_by_view_bound(kernel, inducing):
    """The fused path of LatentGPModule (all views at once) against the per-view autograd path, on views of
    different widths: the same F_v and the same gradient of every parameter."""
    module = _fitted_two_views(0, 40, (9, 4), num_inducing=8, kernel=kernel, inducing=inducing, max_iter=20)
    assert module._rbf_parts() is not None  # the fused path is taken
    params = list(module.parameters())

    def values_and_grads(fused):
        for p in params:
            p.grad = None
        F = module.view_bounds() if fused else torch.stack([module.view_bound(v) for v in range(2)])
        (F.sum() - module.kl()).backward()
        return F.detach(), [p.grad.clone() for p in params]

    F_fused, g_fused = values_and_grads(True)
    F_ref, g_ref = values_and_grads(False)
    torch.testing.assert_close(F_fused, F_ref, rtol=1e-10, atol=1e-8)
    for a, b in zip(g_fused, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7 * float(b.abs().max()))


def _autograd_values_and_grads(module):
    params = list(module.parameters())
    for p in params:
        p.grad = None
    bound = module()
    (-bound).backward()
    return bound.item(), [None if p.grad is None else p.grad.clone() for p in params]


@pytest.mark.parametrize("kernel", ["rbf", "rbf+bias", "rbf+white", "rbf+bias+white"])
@pytest.mark.parametrize("inducing", ["shared", "per_view"])
def test_hand_chained_gradient_equals_autograd(kernel, inducing):
    """evaluate_with_gradient (no autograd graph: the chain rule through the constraints by hand) against
    forward() + backward(): the same bound and the same gradient of every raw parameter, with one
    parameter frozen (its .grad left alone, as in the warm-up)."""
    module = _fitted_two_views(2, 30, (6, 3), num_inducing=7, kernel=kernel, inducing=inducing, max_iter=15)
    assert module._hand_chained() is not None
    with torch.no_grad():  # a shared lengthscale on view b: the raw [1, 1] gradient sums over dimensions
        shared = gpytorch.kernels.RBFKernel().to(DT)
        shared.lengthscale = 0.7
        scale = next(t.scales[0] for t in _kernel_terms(module.kernels[1]) if t.kind == "rbf")
        scale.base_kernel = shared
    module._kernel_terms_cache = None
    del module._hand_chained_cache
    assert module._hand_chained() is not None
    expected, g_ref = _autograd_values_and_grads(module)
    params = list(module.parameters())
    for p in params:
        p.grad = None
    value = module.evaluate_with_gradient()
    assert value == pytest.approx(expected, rel=1e-12)
    for p, ref in zip(params, g_ref):
        torch.testing.assert_close(p.grad, ref, rtol=1e-8, atol=1e-9 * float(ref.abs().max()))
    module.raw_noise.requires_grad_(False)
    module.raw_noise.grad = None
    module.evaluate_with_gradient()
    assert module.raw_noise.grad is None
    module.raw_noise.requires_grad_(True)


def test_hand_chained_gradient_needs_known_constraints():
    """An interval constraint (sigmoid) is not chained by hand: evaluate_with_gradient takes autograd."""
    from gpytorch.constraints import Interval

    from bayesalign.gp import MRD

    rng = np.random.default_rng(3)
    views = {"a": rng.normal(size=(20, 4)), "b": rng.normal(size=(20, 3))}
    kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(
        ard_num_dims=2, lengthscale_constraint=Interval(0.05, 20.0)))
    model = MRD(latent_dim=2, num_inducing=5, kernel=kernel, max_iter=5, warmup_iters=2, progress=False,
                seed=0).fit(views)
    module = model.module_
    assert module._rbf_parts() is not None and module._hand_chained() is None
    expected, g_ref = _autograd_values_and_grads(module)
    assert module.evaluate_with_gradient() == pytest.approx(expected, rel=1e-12)
    for p, ref in zip(module.parameters(), g_ref):
        torch.testing.assert_close(p.grad, ref, rtol=0, atol=0)


def test_views_bound_falls_back_for_other_kernels():
    from bayesalign.gp import MRD

    rng = np.random.default_rng(1)
    views = {"a": rng.normal(size=(20, 4)), "b": rng.normal(size=(20, 3))}
    model = MRD(latent_dim=2, num_inducing=5, kernel="linear+white", max_iter=0, progress=False, seed=0).fit(views)
    module = model.module_
    assert module._rbf_parts() is None
    with torch.no_grad():
        expected = sum(float(module.view_bound(v)) for v in range(2)) - float(module.kl())
        assert float(module()) == pytest.approx(expected, rel=1e-12)


def test_batched_cholesky_warning_names_the_view():
    from linear_operator.utils.warnings import NumericalWarning

    from bayesalign.gp.bound import stable_cholesky

    A = torch.eye(3, dtype=DT).repeat(2, 1, 1)
    A[1, 2, 2] = -1e-12  # view 1 is (barely) indefinite
    with pytest.warns(NumericalWarning, match=r"Kuu of view index \[1\]"):
        L = stable_cholesky(A, "Kuu")
    torch.testing.assert_close(L @ L.mT, A, atol=1e-6, rtol=0)
