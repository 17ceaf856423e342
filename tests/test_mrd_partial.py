"""Partially observed MRD: one latent point per entity, each view's bound over the entities it observes.

F = sum_v F_v(Y_v; q(X)[obs_v]) - KL(q(X) || N(0, I)) is checked against the paired MRD (every entity
observed), against single-view bounds computed separately (ours and GPy's BayesianGPLVM) on each
view's rows, and its hand-written gradient against autograd.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bayesalign.gp import MRD, BayesianGPLVM
from bayesalign.gp.bound import kl_standard_normal

F64 = torch.float64


def signals(N, seed):
    """Latent signals of N entities [N, 4]: shared sin(t), and three private ones."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 4 * np.pi, N)
    X = np.c_[np.sin(t), np.cos(2.5 * t), np.sin(1.7 * t + 1), np.cos(0.7 * t)]
    return X + 0.05 * rng.normal(size=X.shape), rng


def view_of(X, dims, D, rng):
    return X[:, dims] @ rng.normal(size=(len(dims), D)) + 0.05 * rng.normal(size=(X.shape[0], D))


def set_state(model, mu, S, Z, kernels):
    """q(X) of every entity, the inducing inputs (copied to every view's set) and per view
    (outputscale, lengthscales, noise)."""
    module = model.module_
    with torch.no_grad():
        module.q_mean.copy_(torch.as_tensor(mu))
        module.q_variance = torch.as_tensor(S, dtype=F64)
        module.inducing_inputs.copy_(torch.as_tensor(Z)[None].expand_as(module.inducing_inputs))
        for kernel, (variance, lengthscale, _) in zip(module.kernels, kernels):
            rbf = kernel if hasattr(kernel, "outputscale") else kernel.kernels[0]
            rbf.outputscale = variance
            rbf.base_kernel.lengthscale = torch.as_tensor(lengthscale, dtype=F64)
        module.noise = torch.as_tensor([noise for _, _, noise in kernels], dtype=F64)


def gradients(module):
    """Gradient of -bound in every parameter, by name."""
    return {name: p.grad.detach().clone() for name, p in module.named_parameters() if p.grad is not None}


def autograd_gradients(module, per_view=False):
    for p in module.parameters():
        p.grad = None
    if per_view:  # the general path: view_bound (psi_statistics + collapsed_bound) view by view
        bound = sum(module.view_bound(v) for v in range(module.n_views)) - module.kl()
    else:
        bound = module()
    (-bound).backward()
    return float(bound), gradients(module)


KERNELS = [(1.7, np.array([0.7, 1.4, 2.5]), 0.15), (0.9, np.array([2.0, 0.6, 1.1]), 0.3),
           (1.2, np.array([1.0, 3.0, 0.8]), 0.2)]


@pytest.fixture(scope="module")
def partial_data():
    """42 entities (40 and 41 observed by no view); view a sees 25 of them (shuffled), b 28 with an
    overlap of 13 with a, c 10 (overlapping a and b) and entity 8 twice (two rows of one entity)."""
    X, rng = signals(40, seed=3)
    rows = {"a": rng.permutation(25), "b": rng.permutation(np.arange(12, 40)), "c": np.r_[np.arange(5, 35, 3), 8]}
    views = {"a": view_of(X[rows["a"]], [0, 1], 5, rng), "b": view_of(X[rows["b"]], [0, 2], 4, rng),
             "c": view_of(X[rows["c"]], [0, 3], 3, rng)}
    N, Q, M = 42, 3, 7
    mu, S, Z = rng.normal(size=(N, Q)), rng.uniform(0.05, 0.5, size=(N, Q)), rng.normal(size=(M, Q))
    return views, rows, N, mu, S, Z


# ----------------------------------------------------------------------------------------------------
# every entity observed: the paired bound
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["b", "both"])
def test_every_entity_observed_in_any_order_is_the_paired_bound_and_gradient(which):
    X, rng = signals(30, seed=5)
    views = {"a": view_of(X, [0, 1], 5, rng), "b": view_of(X, [0, 2], 4, rng)}
    mu, S, Z = rng.normal(size=(30, 3)), rng.uniform(0.05, 0.5, size=(30, 3)), rng.normal(size=(7, 3))
    kwargs = dict(latent_dim=3, num_inducing=7, max_iter=0, progress=False, seed=0)
    paired = MRD(init=mu, **kwargs).fit(views)
    set_state(paired, mu, S, Z, KERNELS[:2])
    perm = rng.permutation(30)
    shuffled = {"a": views["a"][perm] if which == "both" else views["a"], "b": views["b"][perm]}
    observed = {"a": perm, "b": perm} if which == "both" else {"b": perm}
    partial = MRD(init=mu, **kwargs).fit(shuffled, observed=observed)
    set_state(partial, mu, S, Z, KERNELS[:2])
    # the same sums over rows in another order: float64 round-off (~1e-15 relative per term)
    assert partial.elbo() == pytest.approx(paired.elbo(), rel=1e-12)
    paired.module_.evaluate_with_gradient()
    partial.module_.evaluate_with_gradient()
    expected, got = gradients(paired.module_), gradients(partial.module_)
    assert expected.keys() == got.keys()
    for name in expected:
        np.testing.assert_allclose(got[name].numpy(), expected[name].numpy(), rtol=1e-9, atol=1e-10, err_msg=name)
    # the embedding gives each view its rows, in its order
    np.testing.assert_allclose(partial.embedding_.means["b"], mu[perm])
    np.testing.assert_allclose(partial.entity_means_, mu)


# ----------------------------------------------------------------------------------------------------
# partial observation: sum of single-view bounds on each view's rows, minus the KL of all entities
# ----------------------------------------------------------------------------------------------------
def test_partial_bound_is_the_sum_of_single_view_bounds_on_their_rows_minus_the_kl_of_all(partial_data):
    views, rows, N, mu, S, Z = partial_data
    model = MRD(latent_dim=3, num_inducing=7, init=mu, max_iter=0, progress=False).fit(
        views, observed=rows, n_entities=N)
    set_state(model, mu, S, Z, KERNELS)
    singles = 0.0
    for (name, Y), kernel in zip(views.items(), KERNELS):
        single = BayesianGPLVM(latent_dim=3, num_inducing=7, init=mu[rows[name]], max_iter=0, progress=False).fit(Y)
        set_state(single, mu[rows[name]], S[rows[name]], Z, [kernel])
        singles += single.elbo() + float(single.module_.kl().detach())  # F_v on the view's own rows
    kl_all = float(kl_standard_normal(torch.as_tensor(mu), torch.as_tensor(S)))
    # the same terms computed by different programs (one view at a time vs grouped): float64 round-off
    assert model.elbo() == pytest.approx(singles - kl_all, rel=1e-12)
    np.testing.assert_array_equal(model.observed_["c"], rows["c"])
    assert model.entity_means_.shape == (N, 3)
    # views and observed as lists: the same model
    listed = MRD(latent_dim=3, num_inducing=7, init=mu, max_iter=0, progress=False).fit(
        list(views.values()), observed=list(rows.values()), n_entities=N)
    set_state(listed, mu, S, Z, KERNELS)
    assert listed.elbo() == pytest.approx(model.elbo(), rel=1e-12)  # the same computation on the same inputs
    for name in views:
        np.testing.assert_allclose(model.embedding_.means[name], mu[rows[name]])
        np.testing.assert_allclose(model.embedding_.variances[name], S[rows[name]])


def test_partial_bound_equals_gpy_bayesian_gplvm_on_each_view_s_rows(partial_data):
    GPy = pytest.importorskip("GPy")
    views, rows, N, mu, S, Z = partial_data
    model = MRD(latent_dim=3, num_inducing=7, init=mu, max_iter=0, progress=False).fit(
        views, observed=rows, n_entities=N)
    set_state(model, mu, S, Z, KERNELS)
    expected = -float(kl_standard_normal(torch.as_tensor(mu), torch.as_tensor(S)))
    ours = -float(model.module_.kl().detach())
    for v, ((name, Y), (variance, lengthscale, noise)) in enumerate(zip(views.items(), KERNELS)):
        r = rows[name]
        gpy = GPy.models.BayesianGPLVM(Y - Y.mean(0), 3, X=mu[r].copy(), X_variance=S[r].copy(), num_inducing=7,
                                       kernel=GPy.kern.RBF(3, ARD=True, variance=variance, lengthscale=lengthscale))
        gpy.Z[:] = Z
        gpy.likelihood.variance = noise
        # GPy's bound includes the KL of its own rows: add it back to get F_v
        kl_rows = float(kl_standard_normal(torch.as_tensor(mu[r]), torch.as_tensor(S[r])))
        expected += float(np.asarray(gpy.log_likelihood()).reshape(-1)[0]) + kl_rows
        model.module_.jitter = 1e-8 / variance  # GPy's absolute 1e-8 jitter on Kuu, ours relative to its diagonal
        ours += float(model.module_.view_bound(v).detach())
    # GPy's VarDTC and ours factorise differently: float64 round-off of M x M Cholesky algebra
    assert ours == pytest.approx(expected, rel=1e-8)


@pytest.mark.parametrize("kernel, inducing", [("rbf", "shared"), ("rbf+bias+white", "per_view"),
                                              ("linear+white", "shared")])
def test_partial_gradient_hand_chained_equals_autograd(partial_data, kernel, inducing):
    views, rows, N, mu, S, Z = partial_data
    model = MRD(latent_dim=3, num_inducing=7, init=mu, max_iter=0, progress=False, kernel=kernel,
                inducing=inducing, seed=1).fit(views, observed=rows, n_entities=N)
    module = model.module_
    with torch.no_grad():  # (the fit starts entities no view observes at the prior: move them off it)
        module.q_mean.copy_(torch.as_tensor(mu))
        module.q_variance = torch.as_tensor(S)
    value = module.evaluate_with_gradient()
    hand = gradients(module)
    for per_view in (False, True):
        bound, auto = autograd_gradients(module, per_view=per_view)
        # different programs for the same sums: float64 round-off
        assert value == pytest.approx(bound, rel=1e-11)
        for name in auto:
            np.testing.assert_allclose(hand[name].numpy(), auto[name].numpy(), rtol=1e-8, atol=1e-9, err_msg=name)
    # an entity no view observes: only its KL, whose gradient (of -bound) in mu is mu
    np.testing.assert_allclose(hand["q_mean"][40:].numpy(), mu[40:], rtol=1e-12)


# ----------------------------------------------------------------------------------------------------
# fitting
# ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fitted_partial():
    """80 entities with independent N(0, 1) signals (column 0 shared by every view, 1-3 private to a, b, c);
    a sees entities 0-49, b 30-79 (shuffled; 20 in common with a), c every third; 80-82 no view."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 4))
    rows = {"a": np.arange(50), "b": rng.permutation(np.arange(30, 80)), "c": np.arange(0, 80, 3)}
    views = {"a": view_of(X[rows["a"]], [0, 1], 8, rng), "b": view_of(X[rows["b"]], [0, 2], 6, rng),
             "c": view_of(X[rows["c"]], [0, 3], 5, rng)}
    model = MRD(latent_dim=5, num_inducing=12, max_iter=300, warmup_iters=50, progress=False, seed=0).fit(
        views, observed=rows, n_entities=83)
    return X, views, rows, model


def test_partial_fit_recovers_the_shared_signal_of_every_entity_and_leaves_unseen_ones_at_the_prior(fitted_partial):
    X, views, rows, model = fitted_partial
    shared = model.shared_dims()
    assert len(shared) == 1
    assert all(len(model.private_dims(name)) == 1 for name in views)
    means = model.entity_means_
    # the shared dimension carries the shared signal for all 80 entities, whichever views see them
    # (entities 50-79 are seen by b, some also by c, none by a)
    assert abs(np.corrcoef(means[:80, shared[0]], X[:, 0])[0, 1]) > 0.98
    assert abs(np.corrcoef(means[50:80, shared[0]], X[50:, 0])[0, 1]) > 0.98
    # entities 80-82 are seen by no view: q(x) = N(0, I), the optimum of their KL, where they start
    # and where their gradient is zero
    np.testing.assert_allclose(means[80:], 0.0, atol=1e-12)
    np.testing.assert_allclose(model.entity_variances_[80:], 1.0, rtol=1e-12)
    for name in views:
        np.testing.assert_array_equal(model.embedding_.means[name], means[rows[name]])


def test_partial_fit_infers_predicts_and_round_trips(fitted_partial, tmp_path):
    X, views, rows, model = fitted_partial
    # rows of b inferred from b alone come back near their fitted q(x) in the dimensions b sees
    mean, _ = model.infer("b", views["b"][:10])
    rel = model.relevance_["b"] / model.relevance_["b"].max()
    seen = rel > 0.05
    fitted = model.embedding_.means["b"][:10]
    assert np.abs(mean[:, seen] - fitted[:, seen]).max() < 0.2
    # predicting b's rows from their q(x) reproduces the data to the noise level
    pred, _ = model.predict("b", model.embedding_.means["b"], model.embedding_.variances["b"])
    residual = np.sqrt(np.mean(np.square(pred - views["b"])))
    assert residual < 3 * np.sqrt(model.noise_variance_["b"]) + 0.05
    path = tmp_path / "partial.npz"
    model.save(path)
    loaded = MRD.load(path)
    assert loaded.elbo() == model.elbo()
    for name in views:
        np.testing.assert_array_equal(loaded.observed_[name], rows[name])
    np.testing.assert_array_equal(loaded.entity_means_, model.entity_means_)


def test_partial_init_from_an_embedding_averages_each_entity_s_rows():
    X, rng = signals(30, seed=1)
    rows = {"a": np.arange(20), "b": np.arange(10, 30)}
    views = {"a": view_of(X[:20], [0, 1], 4, rng), "b": view_of(X[10:], [0, 2], 4, rng)}
    from bayesalign.data import LatentEmbedding

    base = rng.normal(size=(30, 2))
    embedding = LatentEmbedding({"a": base[:20], "b": base[10:] + 1.0})
    model = MRD(latent_dim=2, num_inducing=5, max_iter=0, progress=False, init=embedding).fit(views, observed=rows)
    expected = base.copy()
    expected[20:] += 1.0
    expected[10:20] += 0.5  # seen by both: the mean of the two rows
    expected -= expected.mean(0)
    expected /= expected.std(0).max()
    np.testing.assert_allclose(model.entity_means_, expected, atol=1e-12)


def test_partial_bad_input_names_the_view_and_row():
    rng = np.random.default_rng(0)
    views = {"a": rng.normal(size=(10, 3)), "b": rng.normal(size=(8, 2))}
    kwargs = dict(latent_dim=2, num_inducing=4, max_iter=0, progress=False)
    with pytest.raises(ValueError, match=r"numbers of rows differ.*observed="):
        MRD(**kwargs).fit(views)
    with pytest.raises(ValueError, match=r"observed\[.b.\] must be 1-D with one entity index per row"):
        MRD(**kwargs).fit(views, observed={"b": np.arange(7)})
    with pytest.raises(ValueError, match=r"observed\['b'\] row 2: entity index -1"):
        MRD(**kwargs).fit(views, observed={"b": np.array([0, 1, -1, 3, 4, 5, 6, 7])})
    with pytest.raises(ValueError, match=r"observed\['b'\] must hold integer"):
        MRD(**kwargs).fit(views, observed={"b": np.arange(8.0)})
    with pytest.raises(ValueError, match="not among the views"):
        MRD(**kwargs).fit(views, observed={"c": np.arange(8)})
    with pytest.raises(ValueError, match=r"n_entities must be an int >= 12"):
        MRD(**kwargs).fit(views, observed={"b": np.arange(4, 12)}, n_entities=11)
    # a view without indices: row n is entity n
    model = MRD(**kwargs).fit(views, observed={"b": np.arange(4, 12)})
    np.testing.assert_array_equal(model.observed_["a"], np.arange(10))
    assert model.entity_means_.shape == (12, 2)
    with pytest.raises(ValueError, match="init array must have shape"):
        MRD(**{**kwargs, "init": np.zeros((10, 2))}).fit(views, observed={"b": np.arange(4, 12)})


def test_anchored_init_puts_unaligned_rows_of_every_view_in_one_space():
    """Two noise-free linear views of one 2-D latent; 12 of 60 objects are anchors (one entity), the others
    are an entity per view. The least-squares maps learned on the anchors are exact, so an object's
    unaligned row in b starts where its row in a does (to round-off)."""
    from bayesalign.gp.initialisation import anchored_latent

    rng = np.random.default_rng(0)
    latent = rng.normal(size=(60, 2))
    a, b = latent @ rng.normal(size=(2, 6)), latent @ rng.normal(size=(2, 5))
    anchors = rng.choice(60, size=12, replace=False)
    entity_b = np.arange(60, 120)
    entity_b[anchors] = anchors
    X = anchored_latent("pca", ["a", "b"], [a - a.mean(0), b - b.mean(0)], [np.arange(60), entity_b], 120, 2,
                        seed=0)
    assert X.shape == (120, 2)
    np.testing.assert_allclose(X[entity_b], X[:60], atol=1e-9)  # least squares on exact data: round-off
    assert np.linalg.matrix_rank(X[:60]) == 2
    # 3 entities seen by every view anchor 3 - 2 = 1 of the 2 dimensions, again exactly (an affine map of the
    # rank-2 data fitted on 3 points); the other starts small and random
    few = np.r_[np.arange(3), np.arange(60, 117)]
    X = anchored_latent("pca", ["a", "b"], [a - a.mean(0), b - b.mean(0)], [np.arange(60), few], 120, 2, seed=0)
    assert X.shape == (120, 2)
    np.testing.assert_allclose(X[few, 0], X[:60, 0], atol=1e-9)
    assert 0.0 < X[:, 1].std() < 0.2 * X[:60, 0].std()  # 10% of the anchored spread, as drawn
    assert not np.allclose(X[few[3:], 1], X[3:60, 1])  # a random start: nothing carried across the views
    # 5 anchor 3 dimensions, but the rank-2 data give the third none: the padding takes 10% of the smallest
    # spread the anchors did reach, not of the empty one (which would start the fourth dimension at 0 too)
    few5 = np.r_[np.arange(5), np.arange(60, 115)]
    X = anchored_latent("pca", ["a", "b"], [a - a.mean(0), b - b.mean(0)], [np.arange(60), few5], 120, 4, seed=0)
    spread = X.std(0)
    assert spread[2] < 1e-6 and 0.05 * spread[:2].min() < spread[3] < 0.2 * spread[:2].min()
    # fewer than 3: None (the caller completes the views instead)
    assert anchored_latent("pca", ["a", "b"], [a, b], [np.arange(60), np.r_[np.arange(2), np.arange(60, 118)]],
                           120, 2, seed=0) is None


def test_partial_fit_with_ten_percent_anchors_shares_the_common_signal():
    """Both views see the same 200 objects; 20 anchors are one entity, every other row its own entity.
    The latent dimension most relevant to both views carries the common signal on the rows of each view,
    including those the other view never sees as the same entity."""
    rng = np.random.default_rng(1)
    signal = rng.normal(size=(200, 3))  # column 0 shared, 1 private to a, 2 private to b
    a = signal[:, [0, 1]] @ rng.normal(size=(2, 10)) + 0.05 * rng.normal(size=(200, 10))
    b = signal[:, [0, 2]] @ rng.normal(size=(2, 8)) + 0.05 * rng.normal(size=(200, 8))
    anchors = rng.choice(200, size=20, replace=False)
    entity_b = np.arange(200, 400)
    entity_b[anchors] = anchors
    model = MRD(latent_dim=4, num_inducing=15, max_iter=300, warmup_iters=50, progress=False, seed=0).fit(
        {"a": a, "b": b}, observed={"b": entity_b})
    relevance = np.array([r / r.max() for r in model.relevance_.values()])  # [2, Q]
    both = int(np.argmax(relevance.min(0)))
    assert relevance[:, both].min() > 0.5
    for name in ("a", "b"):
        assert abs(np.corrcoef(model.embedding_.means[name][:, both], signal[:, 0])[0, 1]) > 0.95


def test_the_entities_of_an_alignment_problem_are_the_layout_of_the_partial_fit():
    """AlignmentProblem.entities() gives (n_entities, observed): anchored rows share one latent point."""
    from bayesalign.data import AlignmentProblem, Correspondence

    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(30, 4)), rng.normal(size=(25, 3))
    pairs = [(0, 3), (5, 5), (7, 1), (12, 20), (20, 0), (29, 24), (3, 9)]
    problem = AlignmentProblem({"a": a, "b": b}, anchors=Correspondence.from_pairs(pairs, ("a", "b")))
    n_entities, observed = problem.entities()
    model = MRD(latent_dim=2, num_inducing=6, max_iter=0, progress=False, seed=0).fit(
        problem, observed=observed, n_entities=n_entities)
    assert model.entity_means_.shape == (30 + 25 - len(pairs), 2)
    latent = model.embedding_.means
    for i, j in pairs:  # one latent point for both rows of an anchor
        np.testing.assert_array_equal(latent["a"][i], latent["b"][j])


@pytest.mark.parametrize("inducing", ["shared", "per_view"])
def test_grown_inducing_inputs_never_lower_the_bound_and_sit_at_the_farthest_entities(fitted_partial, inducing,
                                                                                       tmp_path):
    # Titsias (2009): the collapsed bound is log p(Y) minus a KL to the exact posterior that a larger inducing set
    # can only shrink, so adding inducing inputs at fixed other parameters never lowers it (Kuu's jitter, relative
    # to its diagonal, perturbs this by round-off only). Each new input is the mean of the observed entity farthest
    # from its set's inputs so far (brute force below); the entities no view observes (80-82) are never picked
    import copy

    X, views, rows, fitted = fitted_partial
    if inducing == "shared":
        model = copy.deepcopy(fitted)
    else:
        model = MRD(latent_dim=5, num_inducing=12, max_iter=150, warmup_iters=50, inducing="per_view",
                    progress=False, seed=0).fit(views, observed=rows, n_entities=83)
    before, Z0 = model.elbo(), model.module_.inducing_inputs.detach().clone()  # [1 or 3, 12, 5]
    model.module_.inducing_inputs = torch.nn.Parameter(torch.stack(model._grown_inducing(20)))  # no fit yet
    added, Z = model.elbo(), model.module_.inducing_inputs.detach()
    assert Z.shape == (Z0.shape[0], 20, 5)
    assert added >= before - 1e-8 * abs(before)
    np.testing.assert_array_equal(Z[:, :12], Z0)
    means = model.entity_means_[:80]  # the observed entities
    for k in range(Z.shape[0]):
        picked = Z0[k].numpy()
        for z in Z[k, 12:].numpy():
            gap = np.sqrt(((means[:, None, :] - picked[None]) ** 2).sum(-1)).min(1)  # [80]
            row = np.flatnonzero((means == z).all(1))  # z is an observed entity's mean, copied
            # ... one at the largest gap (torch and numpy round the distances differently: a near tie may go
            # either way, so the gap, not the argmax, is compared)
            assert row.size >= 1 and gap[row[0]] >= gap.max() * (1 - 1e-9)
            picked = np.vstack([picked, z])
    history = len(model.history_)
    model.continue_fit(max_iter=40)
    assert len(model.history_) > history and model.elbo() >= added - 1e-8 * abs(added)
    path = tmp_path / "grown.npz"
    model.save(path)
    assert MRD.load(path).elbo() == model.elbo()
    with pytest.raises(ValueError, match="fewer than the 20 inducing inputs"):
        model.grow_inducing(15)
    with pytest.warns(RuntimeWarning, match="more than the 80 observed entities"):
        model.grow_inducing(100, max_iter=1)
    assert model.module_.inducing_inputs.shape[1] == 80 and model.num_inducing == 80


def test_split_entities_changes_the_bound_by_the_copies_kl_alone_and_leaves_the_model(fitted_partial):
    # A row split from its entity sees a copy of the same q(x): every view's term of the collapsed bound is unchanged,
    # and under N(0, I) the bound loses exactly the KL of each copy (a new entity of its own); the fitted model itself
    # is not touched, and the split copy goes on fitting from there
    from bayesalign.gp.bound import kl_standard_normal

    X, views, rows, model = fitted_partial
    before = model.elbo()
    means, variances = model.entity_means_.copy(), model.entity_variances_.copy()
    shared = np.flatnonzero(np.isin(rows["b"], rows["a"]))[:5]  # rows of b whose entities a sees too
    split = model.split_entities("b", shared[::-1])  # any order: new entities numbered in row order
    old = rows["b"][np.sort(shared)]
    copies = kl_standard_normal(torch.as_tensor(means[old]), torch.as_tensor(variances[old]))
    np.testing.assert_allclose(split.elbo(), before - float(copies), rtol=1e-10)
    assert model.elbo() == before and model.entity_means_.shape == (83, 5)
    np.testing.assert_array_equal(split.observed_["b"][np.sort(shared)], 83 + np.arange(5))
    np.testing.assert_array_equal(split.observed_["a"], model.observed_["a"])
    np.testing.assert_array_equal(split.entity_means_[83:], means[old])
    start = split.elbo()
    split._warn_convergence = False
    split.continue_fit(30)
    assert split.elbo() >= start and np.isfinite(split.entity_means_).all()
    np.testing.assert_array_equal(model.entity_means_, means)
    with pytest.raises(IndexError, match="rows of view 'b'"):
        model.split_entities("b", [50])


def test_split_entities_inferred_starts_each_split_row_where_its_own_view_alone_places_it(fitted_partial):
    # start="inferred": the new entity of each split row of b starts at MRD.infer of that row from b alone; the entity
    # it left starts at MRD.infer of a's row when a alone still sees it, and keeps its q(x) when c sees it too (two
    # views still pin it down); every other entity keeps its q(x), and the fitted model is not touched
    X, views, rows, model = fitted_partial
    means, variances = model.entity_means_.copy(), model.entity_variances_.copy()
    shared = np.flatnonzero(np.isin(rows["b"], rows["a"]))[:8]  # rows of b whose entities a sees too
    order = np.sort(shared)
    split = model.split_entities("b", shared, start="inferred", infer_max_iter=200)
    # the same computation as infer (each row's own bound from the same start, the same rows in the same order and
    # batch): equal up to round-off, which the per-row L-BFGS may carry to its stopping tolerance (1e-10 of the
    # bound), hence 1e-7 on q(x) rather than bit equality
    mean_b, var_b = model.infer("b", views["b"][order], max_iter=200)
    np.testing.assert_allclose(split.entity_means_[83:], mean_b, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(split.entity_variances_[83:], var_b, rtol=1e-7, atol=1e-9)
    old = rows["b"][order]  # entity e is row e of a (a sees entities 0-49 in order)
    alone = np.sort(old[~np.isin(old, rows["c"])])  # split_entities infers them in a's row order
    assert 0 < alone.size < old.size  # the fixture splits both kinds
    mean_a, var_a = model.infer("a", views["a"][alone], max_iter=200)
    np.testing.assert_allclose(split.entity_means_[alone], mean_a, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(split.entity_variances_[alone], var_a, rtol=1e-7, atol=1e-9)
    seen_by_c = old[np.isin(old, rows["c"])]
    np.testing.assert_array_equal(split.entity_means_[seen_by_c], means[seen_by_c])
    others = np.setdiff1d(np.arange(83), alone)
    np.testing.assert_array_equal(split.entity_means_[others], means[others])
    # the reason for the option: one view alone pins the shared dimension down less than two did
    dim = model.shared_dims()
    assert (split.entity_variances_[83:][:, dim] > variances[old][:, dim]).all()
    np.testing.assert_array_equal(model.entity_means_, means)
    with pytest.raises(ValueError, match="start must be one of"):
        model.split_entities("b", shared, start="middle")


def test_split_entities_of_a_model_with_another_prior_needs_that_prior_given():
    import scipy.sparse as sp

    from bayesalign.gp.priors import GraphLaplacianPrior

    X, rng = signals(20, seed=3)
    rows = {"a": np.arange(12), "b": np.arange(8, 20)}
    views = {"a": view_of(X[rows["a"]], [0, 1], 5, rng), "b": view_of(X[rows["b"]], [0, 2], 5, rng)}
    W = sp.diags(np.ones(19), 1, shape=(20, 20))
    L = sp.diags(np.asarray((W + W.T).sum(1)).ravel()) - (W + W.T)
    model = MRD(latent_dim=3, num_inducing=6, max_iter=40, warmup_iters=10, progress=False, seed=0).fit(
        views, observed=rows, n_entities=20, latent_prior=GraphLaplacianPrior(L, 1.0))
    with pytest.raises(ValueError, match="latent_prior"):
        model.split_entities("b", [0])
    L21 = sp.block_diag([L, sp.csr_matrix((1, 1))])
    split = model.split_entities("b", [0], latent_prior=GraphLaplacianPrior(L21, 1.0))
    assert split.entity_means_.shape == (21, 3) and split.observed_["b"][0] == 20
