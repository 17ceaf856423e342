"""Latent priors of the collapsed engine: the graph (GMRF) prior's KL against the dense closed form."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch.distributions import MultivariateNormal, kl_divergence

from bayesalign.gp.priors import GraphLaplacianPrior, StandardNormalPrior, check_latent_prior

F64 = torch.float64


def _random_laplacian(n, rng, p=0.3):
    W = np.triu((rng.random((n, n)) < p) * rng.random((n, n)), 1)
    W = W + W.T
    return sp.csr_matrix(np.diag(W.sum(1)) - W)


@pytest.mark.parametrize("strength", [0.0, 0.5, 7.0])
def test_graph_prior_kl_equals_the_dense_multivariate_normal_kl(strength):
    rng = np.random.default_rng(0)
    E, Q = 9, 3
    L = _random_laplacian(E, rng)
    mean = torch.tensor(rng.normal(size=(E, Q)), dtype=F64)
    variance = torch.tensor(rng.uniform(0.1, 2.0, size=(E, Q)), dtype=F64)
    precision = torch.tensor(np.eye(E) + strength * L.toarray(), dtype=F64)
    prior = MultivariateNormal(torch.zeros(E, dtype=F64), precision_matrix=precision)
    # the latent dimensions are independent under both q and p: the KL is a sum over them
    dense = sum(kl_divergence(MultivariateNormal(mean[:, q], torch.diag(variance[:, q])), prior) for q in range(Q))
    ours = GraphLaplacianPrior(L, strength).kl(mean, variance)
    # both are O(10) sums of a few dozen terms in float64: agreement to 1e-10 relative is round-off
    assert float(ours) == pytest.approx(float(dense), rel=1e-10)


def test_zero_strength_is_the_standard_normal_prior():
    rng = np.random.default_rng(1)
    mean = torch.tensor(rng.normal(size=(6, 2)), dtype=F64)
    variance = torch.tensor(rng.uniform(0.1, 2.0, size=(6, 2)), dtype=F64)
    graph = GraphLaplacianPrior(_random_laplacian(6, rng), strength=0.0).kl(mean, variance)
    assert float(graph) == pytest.approx(float(StandardNormalPrior().kl(mean, variance)), rel=1e-12)


def test_graph_prior_pulls_neighbours_together():
    # a chain 0-1-2: moving entity 2 away from its neighbour raises the KL, moving an isolated entity does not
    # change it more than the standard normal would
    L = sp.csr_matrix(np.array([[1.0, -1, 0, 0], [-1, 2, -1, 0], [0, -1, 1, 0], [0, 0, 0, 0]]))
    prior = GraphLaplacianPrior(L, strength=10.0)
    variance = torch.full((4, 1), 0.5, dtype=F64)
    base = torch.zeros(4, 1, dtype=F64)
    moved_chain, moved_alone = base.clone(), base.clone()
    moved_chain[2] = 1.0
    moved_alone[3] = 1.0
    rise_chain = float(prior.kl(moved_chain, variance) - prior.kl(base, variance))
    rise_alone = float(prior.kl(moved_alone, variance) - prior.kl(base, variance))
    assert rise_alone == pytest.approx(0.5, rel=1e-12)  # 0.5 * P_33 * 1^2 with P_33 = 1
    assert rise_chain == pytest.approx(0.5 * (1 + 10.0), rel=1e-12)  # 0.5 * P_22 with P_22 = 1 + 10 * 1


def test_bad_laplacians_and_sizes_are_refused():
    with pytest.raises(ValueError, match="symmetric"):
        GraphLaplacianPrior(sp.csr_matrix(np.array([[1.0, -1.0], [0.0, 0.0]])))
    with pytest.raises(ValueError, match="sum to zero"):
        GraphLaplacianPrior(sp.csr_matrix(np.array([[2.0, -1.0], [-1.0, 2.0]])))
    with pytest.raises(ValueError, match="non-positive off-diagonal"):
        GraphLaplacianPrior(sp.csr_matrix(np.array([[-1.0, 1.0], [1.0, -1.0]])))
    with pytest.raises(ValueError, match="strength"):
        GraphLaplacianPrior(sp.csr_matrix((2, 2)), strength=-1.0)
    prior = GraphLaplacianPrior(sp.csr_matrix((3, 3)))
    with pytest.raises(ValueError, match="3 nodes, the model has 4 latent points"):
        check_latent_prior(prior, 4)
    with pytest.raises(TypeError, match="latent_prior"):
        check_latent_prior(42, 4)


@pytest.mark.parametrize("prior", [StandardNormalPrior(), GraphLaplacianPrior(
    _random_laplacian(7, np.random.default_rng(2)), strength=3.0)])
def test_closed_form_gradients_equal_autograd(prior):
    rng = np.random.default_rng(3)
    mean = torch.tensor(rng.normal(size=(7, 2)), dtype=F64, requires_grad=True)
    variance = torch.tensor(rng.uniform(0.1, 2.0, size=(7, 2)), dtype=F64, requires_grad=True)
    value, d_mean, d_variance = prior.kl_and_gradient(mean.detach(), variance.detach())
    reference = prior.kl(mean, variance)
    reference.backward()
    # the same arithmetic in a different order: float64 round-off
    assert float(value) == pytest.approx(float(reference), rel=1e-12)
    np.testing.assert_allclose(d_mean.numpy(), mean.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(d_variance.numpy(), variance.grad.numpy(), rtol=1e-10, atol=1e-12)
