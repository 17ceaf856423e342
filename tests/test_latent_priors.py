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


# ----------------------------------------------------------------------------------------------------
# the graph prior inside the collapsed MRD bound
# ----------------------------------------------------------------------------------------------------
def _partial_problem(seed=0):
    """30 entities: view a sees 0-19, view b 10-29 (10 in common), a chain graph over the entities."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 3, 30)
    X = np.c_[np.sin(2 * t), np.cos(3 * t)]
    rows = {"a": np.arange(20), "b": np.arange(10, 30)}
    views = {"a": X[rows["a"]] @ rng.normal(size=(2, 4)) + 0.05 * rng.normal(size=(20, 4)),
             "b": X[rows["b"]] @ rng.normal(size=(2, 3)) + 0.05 * rng.normal(size=(20, 3))}
    W = sp.diags([np.ones(29), np.ones(29)], [-1, 1], shape=(30, 30))
    L = sp.diags(np.asarray(W.sum(1)).ravel()) - W
    mu, S = rng.normal(size=(30, 2)), rng.uniform(0.05, 0.5, size=(30, 2))
    return views, rows, L, mu, S


def _fitted(prior, max_iter=0, **kwargs):
    from bayesalign.gp import MRD

    views, rows, L, mu, S = _partial_problem()
    model = MRD(latent_dim=2, num_inducing=6, init=mu, max_iter=max_iter, progress=False, seed=0, **kwargs).fit(
        views, observed=rows, n_entities=30, latent_prior=prior)
    if max_iter == 0:
        with torch.no_grad():
            model.module_.q_mean.copy_(torch.as_tensor(mu))
            model.module_.q_variance = torch.as_tensor(S)
    return model


def test_mrd_bound_with_a_graph_prior_is_the_view_bounds_minus_the_graph_kl():
    _, _, L, mu, S = _partial_problem()
    prior = GraphLaplacianPrior(L, strength=4.0)
    model = _fitted(prior)
    module = model.module_
    expected = float(module.view_bounds().sum()) - float(prior.kl(torch.as_tensor(mu), torch.as_tensor(S)))
    # the same sums in another order: float64 round-off
    assert float(module()) == pytest.approx(expected, rel=1e-12)
    # strength 0 is the standard normal prior: the default model's bound
    assert float(_fitted(GraphLaplacianPrior(L, strength=0.0)).module_()) == pytest.approx(
        float(_fitted(None).module_()), rel=1e-12)


@pytest.mark.parametrize("kernel", ["rbf", "linear+white"])
def test_mrd_gradient_with_a_graph_prior_is_the_finite_difference_of_the_bound(kernel):
    """evaluate_with_gradient's gradient (the closure of every fit) along a random direction of all parameters
    equals the central difference of the objective."""
    _, _, L, _, _ = _partial_problem()
    module = _fitted(GraphLaplacianPrior(L, strength=4.0), kernel=kernel).module_
    params = [p for p in module.parameters() if p.requires_grad]
    value = module.evaluate_with_gradient()
    gen = torch.Generator().manual_seed(5)
    direction = [torch.randn(p.shape, generator=gen, dtype=p.dtype) for p in params]
    slope = -sum(float((p.grad * d).sum()) for p, d in zip(params, direction))  # .grad is of the negative bound
    step = 1e-5
    with torch.no_grad():
        def moved(by):
            for p, d in zip(params, direction):
                p.add_(by * d)
            out = float(module())
            for p, d in zip(params, direction):
                p.sub_(by * d)
            return out

        central = (moved(step) - moved(-step)) / (2 * step)
    assert float(module()) == pytest.approx(value, rel=1e-12)
    # central difference: truncation O(step^2) and round-off ~1e-16 |F| / step on a bound of order 100
    assert central == pytest.approx(slope, rel=1e-6, abs=1e-6)


def test_graph_prior_pulls_neighbouring_entities_together_and_round_trips(tmp_path):
    from bayesalign.gp import load_model

    _, _, L, _, _ = _partial_problem()
    free = _fitted(None, max_iter=200, warmup_iters=20)
    tied = _fitted(GraphLaplacianPrior(L, strength=50.0), max_iter=200, warmup_iters=20)

    def roughness(model):  # tr(X' L X) / tr(X' X): how far chain neighbours sit apart, scale-free
        X = model.entity_means_
        return float(np.trace(X.T @ (L @ X)) / np.trace(X.T @ X))

    assert roughness(tied) < 0.5 * roughness(free)
    path = tmp_path / "graph.npz"
    tied.save(path)
    loaded = load_model(path)
    assert isinstance(loaded.module_.latent_prior, GraphLaplacianPrior)
    assert loaded.module_.latent_prior.strength == 50.0
    # the same arrays loaded back: the bound is recomputed from identical inputs
    assert loaded.elbo() == pytest.approx(tied.elbo(), rel=1e-12)
