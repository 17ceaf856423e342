"""MRD: bound against GPy and single-view models, shared/private discovery, per-view inference, persistence."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_mrd_partial import set_state  # tests/test_mrd_partial.py: q(X), Z and kernel settings of a fit

from bayesalign.data import AlignmentProblem, LatentEmbedding, Views
from bayesalign.gp import MRD, BayesianGPLVM, cca_latent

F64 = torch.float64


def toy_views(N=60, D=12, seed=0):
    """The MAD paper's toy data (section 4): signals sin(t) (shared), cos(2.5 t) (private to a) and
    sin(1.7 t + 1) (private to b), each plus N(0, 0.1^2) noise, mapped linearly (standard normal
    weights) to D dimensions per view, plus N(0, 0.1^2) noise."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 4 * np.pi, N)
    X = np.c_[np.sin(t), np.cos(2.5 * t), np.sin(1.7 * t + 1)] + 0.1 * rng.normal(size=(N, 3))
    Ya = X[:, [0, 1]] @ rng.normal(size=(2, D)) + 0.1 * rng.normal(size=(N, D))
    Yb = X[:, [0, 2]] @ rng.normal(size=(2, D)) + 0.1 * rng.normal(size=(N, D))
    return {"a": Ya, "b": Yb}


@pytest.fixture(scope="module")
def fitted():
    views = toy_views()
    model = MRD(latent_dim=5, num_inducing=12, max_iter=300, warmup_iters=100, progress=False, seed=0).fit(views)
    return views, model


# ----------------------------------------------------------------------------------------------------
# the bound
# ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def state():
    rng = np.random.default_rng(5)
    views = {k: v - v.mean(0) for k, v in toy_views(N=30, D=5, seed=5).items()}
    N, Q, M = 30, 3, 7
    return (views, rng.normal(size=(N, Q)), rng.uniform(0.05, 0.5, size=(N, Q)), rng.normal(size=(M, Q)),
            [(1.7, np.array([0.7, 1.4, 2.5]), 0.15), (0.9, np.array([2.0, 0.6, 1.1]), 0.3)])


def test_bound_equals_gpy_mrd(state):
    GPy = pytest.importorskip("GPy")
    views, mu, S, Z, kernels = state
    ours = MRD(latent_dim=3, num_inducing=7, init=mu, max_iter=0, progress=False, jitter=1e-8).fit(views)
    # GPy adds an absolute 1e-8 to Kuu, ours is relative to the mean diagonal: match them per view
    set_state(ours, mu, S, Z, kernels)
    gpy_kernels = [GPy.kern.RBF(3, ARD=True, variance=v, lengthscale=ls) for v, ls, _ in kernels]
    gpy = GPy.models.MRD(list(views.values()), input_dim=3, X=mu.copy(), X_variance=S.copy(), num_inducing=7,
                         kernel=gpy_kernels)
    gpy.Z[:] = Z  # GPy's MRD draws its own Z even when given one
    for b, (_, _, noise) in zip(gpy.bgplvms, kernels):
        b.likelihood.variance = noise
    gpy_bound = float(np.asarray(gpy.log_likelihood()).reshape(-1)[0])
    jitter_free = []
    for v, (variance, _, _) in enumerate(kernels):
        ours.module_.jitter = 1e-8 / variance
        jitter_free.append(float(ours.module_.view_bound(v).detach()))
    ours_bound = sum(jitter_free) - float(ours.module_.kl().detach())
    assert ours_bound == pytest.approx(gpy_bound, rel=1e-6)


def test_bound_equals_gpy_mrd_with_linear_plus_white_kernels(state):
    GPy = pytest.importorskip("GPy")
    views, mu, S, Z, _ = state
    ard = [np.array([0.5, 1.5, 0.2]), np.array([2.0, 0.1, 0.7])]
    white, noise = 1e-2, [0.2, 0.4]
    ours = MRD(latent_dim=3, num_inducing=7, init=mu, max_iter=0, progress=False, kernel="linear+white",
               jitter=0.0).fit(views)
    module = ours.module_
    with torch.no_grad():
        module.q_mean.copy_(torch.as_tensor(mu))
        module.q_variance = torch.as_tensor(S)
        module.inducing_inputs.copy_(torch.as_tensor(Z)[None])
        for kernel, variances in zip(module.kernels, ard):
            kernel.kernels[0].variance = torch.as_tensor(variances).reshape(1, -1)
            kernel.kernels[1].variance = white
        module.noise = torch.as_tensor(noise)
    kernels = [GPy.kern.Linear(3, ARD=True, variances=a) + GPy.kern.White(3, variance=white) for a in ard]
    gpy = GPy.models.MRD(list(views.values()), input_dim=3, X=mu.copy(), X_variance=S.copy(), num_inducing=7,
                         kernel=kernels)
    gpy.Z[:] = Z
    for b, value in zip(gpy.bgplvms, noise):
        b.likelihood.variance = value
    gpy_bound = float(np.asarray(gpy.log_likelihood()).reshape(-1)[0])
    # GPy's Kuu has its constant 1e-8 jitter on top of the white variance 1e-2: relative 1e-6 effect
    assert ours.elbo() == pytest.approx(gpy_bound, rel=1e-6)
    np.testing.assert_allclose(ours.relevance_["b"], ard[1])


def test_mrd_bound_is_the_sum_of_single_view_bounds_with_the_kl_counted_once(state):
    views, mu, S, Z, kernels = state
    mrd = MRD(latent_dim=3, num_inducing=7, init=mu, max_iter=0, progress=False).fit(views)
    set_state(mrd, mu, S, Z, kernels)
    singles = []
    for Y, kernel in zip(views.values(), kernels):
        model = BayesianGPLVM(latent_dim=3, num_inducing=7, init=mu, max_iter=0, progress=False).fit(Y)
        set_state(model, mu, S, Z, [kernel])
        singles.append(model.elbo())
    kl = float(mrd.module_.kl().detach())
    assert mrd.elbo() == pytest.approx(sum(singles) + kl, rel=1e-12)
    assert kl > 1.0


# ----------------------------------------------------------------------------------------------------
# shared and private dimensions
# ----------------------------------------------------------------------------------------------------
def test_finds_one_shared_and_one_private_dimension_per_view(fitted):
    views, model = fitted
    shared = model.shared_dims()
    private_a, private_b = model.private_dims("a"), model.private_dims("b")
    assert len(shared) == 1 and len(private_a) == 1 and len(private_b) == 1
    # the other latent dimensions are switched off in both views
    off = set(range(5)) - set(shared) - set(private_a) - set(private_b)
    for name in ("a", "b"):
        rel = model.relevance_[name] / model.relevance_[name].max()
        assert np.all(rel[list(off)] < 0.05)
    # the shared dimension is the shared signal sin(t): |correlation| with it near 1
    t = np.linspace(0, 4 * np.pi, 60)
    latent = model.embedding_
    assert abs(np.corrcoef(latent.means["a"][:, shared[0]], np.sin(t))[0, 1]) > 0.95
    np.testing.assert_array_equal(latent.shared_dims, shared)
    np.testing.assert_array_equal(latent.means["a"], latent.means["b"])


def test_shared_and_private_dims_for_three_views_follow_the_relevance():
    rng = np.random.default_rng(0)
    views = {name: rng.normal(size=(20, 4)) for name in ("a", "b", "c")}
    model = MRD(latent_dim=5, num_inducing=5, max_iter=0, progress=False, seed=0).fit(views)
    active = {"a": [0, 1, 3], "b": [0, 2, 3], "c": [0, 4]}
    with torch.no_grad():
        for kernel, name in zip(model.module_.kernels, ("a", "b", "c")):
            lengthscale = torch.full((5,), 100.0, dtype=F64)
            lengthscale[active[name]] = 1.0
            kernel.outputscale = 2.0
            kernel.base_kernel.lengthscale = lengthscale
    np.testing.assert_allclose(model.relevance_["c"], [2.0, 2e-4, 2e-4, 2e-4, 2.0])
    assert model.shared_dims().tolist() == [0]
    assert model.private_dims("a").tolist() == [1]
    assert model.private_dims("b").tolist() == [2]
    assert model.private_dims("c").tolist() == [4]  # dimension 3 is shared by a and b only
    assert model.shared_dims(threshold=1e-5).tolist() == [0, 1, 2, 3, 4]


def _toy_signals(N=60, seed=0):
    """The (noisy) latent signals of toy_views with the same arguments [N, 3]."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 4 * np.pi, N)
    return np.c_[np.sin(t), np.cos(2.5 * t), np.sin(1.7 * t + 1)] + 0.1 * rng.normal(size=(N, 3))


def _abs_corr(x, y):
    return abs(np.corrcoef(x, y)[0, 1])


def test_cca_init_puts_the_shared_signal_first_then_each_view_s_private_signal():
    views = {k: v - v.mean(0) for k, v in toy_views(N=200, D=12, seed=3).items()}
    signals = _toy_signals(N=200, seed=3)
    X, correlations, owners = cca_latent(list(views.values()), 5, list(views))
    assert correlations[0] > 0.99 and correlations[1] < 0.5
    # shared first, then a's private dimensions, then b's (largest first in each)
    a, b = owners.index("a"), owners.index("b")
    assert owners == [None] + ["a"] * (b - a) + ["b"] * (5 - b)
    assert _abs_corr(X[:, 0], signals[:, 0]) > 0.99
    assert _abs_corr(X[:, a], signals[:, 1]) > 0.99
    assert _abs_corr(X[:, b], signals[:, 2]) > 0.99
    # the private dimensions carry nothing of the shared signal; the noise dimensions start small
    assert _abs_corr(X[:, a], signals[:, 0]) < 0.05 and _abs_corr(X[:, b], signals[:, 0]) < 0.05
    noise = [q for q in range(5) if q not in (0, a, b)]
    assert X[:, noise].std(0).max() < 0.1 * X[:, [0, a, b]].std(0).min()
    # MRD with it: the same start as the array itself (scaled to unit largest variance)
    model = MRD(latent_dim=5, num_inducing=6, max_iter=0, init="cca", progress=False).fit(views)
    np.testing.assert_allclose(model.embedding_.means["a"] * X.std(0).max(), X, atol=1e-10)


def test_cca_init_is_pca_constrained_to_shared_or_private_axes():
    """Where everything is shared, the kept dimensions are the views' largest principal components
    (within the shared subspace), not the most correlated directions."""
    rng = np.random.default_rng(4)
    latent = rng.normal(size=(300, 4)) * [3.0, 2.0, 0.3, 0.2]  # all shared, two strong, two weak
    a, b = latent @ rng.normal(size=(4, 6)), latent @ rng.normal(size=(4, 5))  # no noise: span = everything
    a, b = a - a.mean(0), b - b.mean(0)
    X, correlations, owners = cca_latent([a, b], 2, kept=1.0)
    assert owners == [None, None] and np.sum(correlations > 0.99) == 4
    # X spans the top two principal components of the views (each scaled to unit total variance)
    U = np.linalg.svd(np.hstack([a / np.linalg.norm(a), b / np.linalg.norm(b)]), full_matrices=False)[0][:, :2]
    residual = U - X @ np.linalg.lstsq(X, U, rcond=None)[0]
    assert np.abs(residual).max() < 1e-8


def test_cca_correlations_are_hotellings_canonical_correlations():
    """Two full-rank views, all components kept: the leading (sigma^2 - 1) are the singular values of
    Saa^-1/2 Sab Sbb^-1/2 (Hotelling, 1936), computed here from Cholesky factors."""
    rng = np.random.default_rng(1)
    common = rng.normal(size=(500, 2))
    a = np.c_[common, rng.normal(size=(500, 1))] @ rng.normal(size=(3, 3)) + 0.5 * rng.normal(size=(500, 3))
    b = np.c_[common, rng.normal(size=(500, 2))] @ rng.normal(size=(4, 4)) + 0.5 * rng.normal(size=(500, 4))
    a, b = a - a.mean(0), b - b.mean(0)
    La, Lb = np.linalg.cholesky(a.T @ a), np.linalg.cholesky(b.T @ b)
    expected = np.linalg.svd(np.linalg.solve(La, a.T @ b) @ np.linalg.inv(Lb).T, compute_uv=False)  # [3]
    _, correlations, _ = cca_latent([a, b], 4, kept=1.0)
    np.testing.assert_allclose(correlations[:3], expected, rtol=1e-10)
    # three views sharing one signal: it is the first dimension, with correlation near 1
    t = rng.normal(size=500)
    views = [np.outer(t, rng.normal(size=4)) + 0.05 * rng.normal(size=(500, 4)) for _ in range(3)]
    X, correlations, owners = cca_latent([v - v.mean(0) for v in views], 3)
    assert owners[0] is None and correlations[0] > 0.99 and _abs_corr(X[:, 0], t) > 0.999


def test_cca_init_refuses_one_view_and_too_many_private_dimensions():
    views = toy_views(N=30, D=5)
    with pytest.raises(ValueError, match="needs at least two views"):
        BayesianGPLVM(latent_dim=2, init="cca", progress=False).fit(views["a"])
    rng = np.random.default_rng(0)
    t = rng.normal(size=(30, 1))  # exactly shared; then a has 4 private directions and b 1
    narrow = {"a": np.hstack([t, rng.normal(size=(30, 4))]), "b": np.hstack([2 * t, rng.normal(size=(30, 1))])}
    with pytest.raises(ValueError, match=r"latent_dim=9 is larger than init='cca' allows here: 1 shared and "
                                         r"\{'a': 4, 'b': 1\} private"):
        MRD(latent_dim=9, init="cca", progress=False).fit(narrow)
    # a view with fewer private components than an even split gives the rest to the others
    X, _, owners = cca_latent([v - v.mean(0) for v in narrow.values()], 6, list(narrow))
    assert owners == [None, "a", "a", "a", "a", "b"] and np.linalg.matrix_rank(X) == 6
    assert _abs_corr(X[:, 0], t[:, 0]) > 1 - 1e-12


def test_mrd_from_the_cca_init_finds_the_shared_and_private_dimensions():
    model = MRD(latent_dim=5, num_inducing=12, max_iter=300, init="cca", progress=False, seed=0).fit(toy_views())
    assert len(model.shared_dims()) == 1
    assert len(model.private_dims("a")) == 1 and len(model.private_dims("b")) == 1
    assert _abs_corr(model.embedding_.means["a"][:, model.shared_dims()[0]], _toy_signals()[:, 0]) > 0.95


@pytest.mark.filterwarnings("ignore:MaternKernel has no closed-form psi-statistics")
@pytest.mark.parametrize("kernel", ["rbf", "rbf+bias+white", "linear+white", "matern32+linear"])
def test_normalise_latent_keeps_the_likelihood_and_minimises_the_kl_in_closed_form(kernel):
    views = toy_views(N=30, D=5)
    model = MRD(latent_dim=3, num_inducing=7, kernel=kernel, max_iter=15, warmup_iters=5, progress=False,
                seed=2).fit(views)
    module = model.module_
    with torch.no_grad():  # a latent space off its best scale and centre
        module.q_mean.mul_(torch.tensor([0.5, 2.0, 1.0], dtype=F64)).add_(0.3)
    with torch.no_grad():
        likelihood, kl, bound = module.view_bounds().sum().item(), module.kl().item(), module().item()
    mu, S = module.q_mean.detach().clone(), module.q_variance.detach().clone()
    gain = module.normalise_latent()
    with torch.no_grad():
        np.testing.assert_allclose(module.view_bounds().sum().item(), likelihood, rtol=1e-10)
        assert module().item() == pytest.approx(bound + gain, rel=1e-10)
    # the closed form: shift by the mean (not where a linear term sees the dimension), second moment 1
    shiftable = "linear" not in kernel
    shift = mu.mean(0) if shiftable else torch.zeros(3, dtype=F64)
    moment = ((mu - shift).square() + S).mean(0)
    N = mu.shape[0]
    expected = float((0.5 * N * (moment - 1 - moment.log())).sum() + 0.5 * N * shift.square().sum())
    assert gain == pytest.approx(expected, rel=1e-9) and gain > 0
    assert kl - module.kl().item() == pytest.approx(gain, rel=1e-9)
    new_mu, new_S = module.q_mean.detach(), module.q_variance.detach()
    np.testing.assert_allclose((new_mu.square() + new_S).mean(0), 1.0, rtol=1e-12)
    if shiftable:
        np.testing.assert_allclose(new_mu.mean(0), 0.0, atol=1e-12)
    # a second step changes nothing
    assert abs(module.normalise_latent()) < 1e-9


@pytest.mark.filterwarnings("ignore:PeriodicKernel has no closed-form psi-statistics")
def test_normalise_latent_leaves_other_kernels_alone():
    import gpytorch

    views = toy_views(N=20, D=4)
    periodic = gpytorch.kernels.ScaleKernel(gpytorch.kernels.PeriodicKernel())
    model = MRD(latent_dim=2, num_inducing=5, kernel=periodic, max_iter=0, progress=False).fit(views)
    module = model.module_
    before = [p.detach().clone() for p in module.parameters()]
    assert module.normalise_latent() == 0.0
    assert all(torch.equal(a, b.detach()) for a, b in zip(before, module.parameters()))


# ----------------------------------------------------------------------------------------------------
# inference of new points from one view
# ----------------------------------------------------------------------------------------------------
def test_infer_uses_only_the_named_view(fitted):
    views, model = fitted
    shared = model.shared_dims()[0]
    private = {"a": model.private_dims("a")[0], "b": model.private_dims("b")[0]}
    q_mean = model.embedding_.means["a"][:20]
    q_var = model.embedding_.variances["a"][:20]
    for name, other in (("a", "b"), ("b", "a")):
        mean, var = model.infer(name, views[name][:20])
        # the dimensions this view sees come back as the trained q(x) of those rows
        for d in (shared, private[name]):
            assert np.abs(mean[:, d] - q_mean[:, d]).max() < 0.15
            assert var[:, d].max() < 5 * q_var[:, d].max() + 1e-3
        # the other view's private dimension: this view carries (almost) no information about it,
        # so q(x*) stays near the prior N(0, 1) instead of the trained, certain q(x)
        d = private[other]
        assert var[:, d].mean() > 0.3 > 100 * q_var[:, d].mean()
        assert np.abs(mean[:, d]).mean() < 0.5 * np.abs(q_mean[:, d]).mean()


def test_infer_batches_are_independent(fitted):
    views, model = fitted
    together, _ = model.infer("b", views["b"][:6])
    alone, _ = model.infer("b", views["b"][4:6])
    # equal up to the optimiser's tolerance (the dimensions view b ignores are nearly flat)
    np.testing.assert_allclose(together[4:6], alone, atol=1e-3)


# ----------------------------------------------------------------------------------------------------
# persistence, inputs, errors
# ----------------------------------------------------------------------------------------------------
def test_save_load_round_trip(fitted, tmp_path):
    views, model = fitted
    path = tmp_path / "mrd.npz"
    model.save(path)
    loaded = MRD.load(path)
    assert loaded.elbo() == model.elbo()
    assert loaded.view_names_ == ("a", "b")
    for name in ("a", "b"):
        np.testing.assert_array_equal(loaded.relevance_[name], model.relevance_[name])
    X = np.zeros((2, 5))
    np.testing.assert_array_equal(loaded.predict("b", X)[0], model.predict("b", X)[0])
    with pytest.raises(TypeError, match="not a BayesianGPLVM"):
        BayesianGPLVM.load(path)


def test_accepts_views_problems_embeddings_and_per_view_inducing_inputs():
    views = toy_views(N=30, D=5)
    problem = AlignmentProblem.paired(views)
    a = MRD(latent_dim=3, num_inducing=6, max_iter=0, progress=False, seed=1).fit(problem)
    b = MRD(latent_dim=3, num_inducing=6, max_iter=0, progress=False, seed=1).fit(Views(views))
    assert a.elbo() == b.elbo()
    embedding = LatentEmbedding({"a": a.embedding_.means["a"] * 10, "b": a.embedding_.means["a"] * 10})
    c = MRD(latent_dim=3, num_inducing=6, max_iter=0, progress=False, seed=1, init=embedding).fit(views)
    # an embedding is rescaled to unit largest-column variance: the same start as PCA here
    np.testing.assert_allclose(c.embedding_.means["a"], a.embedding_.means["a"], atol=1e-12)
    per_view = MRD(latent_dim=3, num_inducing=6, max_iter=20, warmup_iters=5, progress=False, seed=1,
                   inducing="per_view", init="pca_split").fit(views)
    assert per_view.module_.inducing_inputs.shape == (2, 6, 3)
    assert not torch.equal(per_view.module_.inducing_inputs[0], per_view.module_.inducing_inputs[1])


def test_bad_input_raises_clear_errors():
    views = toy_views(N=30, D=5)
    with pytest.raises(ValueError, match=r"numbers of rows differ.*'b': 29.*\['b'\] differ from 30"):
        MRD(progress=False).fit({"a": views["a"], "b": views["b"][:29], "c": views["a"]})
    with pytest.raises(ValueError, match=r"view 'b' 4 dimensions, more than its PCA allows \(2\)"):
        MRD(latent_dim=9, init="pca_split", progress=False).fit({"a": views["a"], "b": views["b"][:, :2]})
    with pytest.raises(ValueError, match="inducing"):
        MRD(inducing="each", progress=False).fit(views)
    with pytest.raises(TypeError, match="BayesianGPLVM"):
        MRD(progress=False).fit(views["a"])
    model = MRD(latent_dim=2, num_inducing=5, max_iter=0, progress=False).fit(views)
    with pytest.raises(ValueError, match=r"unknown view 'c'; the views are \['a', 'b'\]"):
        model.infer("c", views["a"])
    with pytest.raises(ValueError, match="threshold"):
        model.shared_dims(threshold=1.5)



@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # short budgets by design
def test_raced_starts_are_each_start_alone_then_the_best_grows_and_goes_on():
    # race_inducing: every start runs as a fit of its own would at race_inducing inducing inputs for RACE_FRACTION
    # of max_iter (the same bounds, round-off aside: the same seed draws the same inducing inputs); the highest is
    # kept, grown to num_inducing (never lowering its bound, Titsias 2009) and continued
    from bayesalign.gp._model import RACE_FRACTION

    views = toy_views(N=40, D=6)
    common = {"latent_dim": 3, "warmup_iters": 5, "progress": False, "seed": 0}
    raced = MRD(num_inducing=12, init=("pca", "random"), race_inducing=6, max_iter=120, **common).fit(views)
    short = int(RACE_FRACTION * 120)
    alone = [MRD(num_inducing=6, init=init, max_iter=short, **common).fit(views) for init in ("pca", "random")]
    np.testing.assert_allclose(raced.restart_bounds_, [m.elbo() for m in alone], rtol=1e-9)
    assert raced.best_restart_ == int(np.argmax(raced.restart_bounds_))
    assert raced.module_.inducing_inputs.shape[1] == 12 and raced.num_inducing == 12
    assert raced.elbo() >= raced.restart_bounds_.max() and raced.n_iter_ > short
    with pytest.raises(ValueError, match="race_inducing must be None or an int >= 1"):
        MRD(race_inducing=0, progress=False).fit(views)

@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_fit_infer_and_bound_match_cpu():
    views = toy_views(N=30, D=5)
    cpu = MRD(latent_dim=3, num_inducing=6, max_iter=0, progress=False, seed=0).fit(views)
    gpu = MRD(latent_dim=3, num_inducing=6, max_iter=0, progress=False, seed=0, device="cuda").fit(views)
    assert gpu.elbo() == pytest.approx(cpu.elbo(), rel=1e-10)
    mean_cpu, _ = cpu.infer("a", views["a"][:3], max_iter=50)
    mean_gpu, _ = gpu.infer("a", views["a"][:3], max_iter=50)
    np.testing.assert_allclose(mean_gpu, mean_cpu, atol=1e-6)


def test_plots_draw_the_model_numbers(fitted):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")

    from bayesalign.plot import plot_bound_trace, plot_latent, plot_relevance

    views, model = fitted
    axes = plot_relevance(model).axes
    for ax, name in zip(axes, ("a", "b")):
        heights = [patch.get_height() for patch in ax.patches]
        np.testing.assert_allclose(heights, model.relevance_[name] / model.relevance_[name].max())
    dims = (model.shared_dims()[0], model.private_dims("a")[0])
    ax = plot_latent(model, dims=dims, labels=np.arange(60) % 3).axes[0]
    np.testing.assert_allclose(ax.collections[0].get_offsets(), model.embedding_.means["a"][:, dims])
    ax = plot_bound_trace(model).axes[0]
    np.testing.assert_allclose(np.concatenate([line.get_ydata() for line in ax.lines]), model.history_)
    assert ax.lines[1].get_xdata()[0] == model.n_warmup_ + 1  # the run after the warm-up, at its first evaluation


def _restart_workload():
    """Two views of 30 rows sharing one curve, and a short fit's settings (restart and start tests)."""
    rng = np.random.default_rng(4)
    t = np.linspace(0, 3 * np.pi, 30)[:, None]
    views = {"a": np.hstack([np.sin(t), np.cos(t)]) @ rng.normal(size=(2, 5)) + 0.05 * rng.normal(size=(30, 5)),
             "b": np.hstack([np.sin(t), np.sin(2 * t)]) @ rng.normal(size=(2, 4)) + 0.05 * rng.normal(size=(30, 4))}
    return views, dict(latent_dim=3, num_inducing=8, max_iter=60, warmup_iters=20, progress=False, seed=3)


def test_restarts_keep_the_best_bound_and_the_first_restart_is_the_plain_fit():
    views, kwargs = _restart_workload()
    plain = MRD(**kwargs).fit(views)
    three = MRD(n_restarts=3, **kwargs).fit(views)
    assert three.restart_bounds_.shape == (3,)
    assert three.restart_bounds_[0] == pytest.approx(plain.elbo(), rel=1e-12)  # restart 0 is the plain fit
    assert three.elbo() == pytest.approx(three.restart_bounds_.max(), rel=1e-12)
    assert three.n_iter_ == len(three.history_)
    assert len(set(np.round(three.restart_bounds_, 6))) == 3  # the restarts really start elsewhere
    with pytest.raises(ValueError, match="n_restarts"):
        MRD(n_restarts=0, **kwargs).fit(views)


def test_lbfgs_memory_reaches_the_optimiser_and_is_validated(monkeypatch):
    """lbfgs_memory is the number of L-BFGS correction pairs (checked where the optimiser receives it); bad values
    name the parameter."""
    from bayesalign.gp import MRD, _optim

    seen = []
    run = _optim.minimize_rows

    def spy(*args, memory, **kwargs):
        seen.append(memory)
        return run(*args, memory=memory, **kwargs)

    monkeypatch.setattr(_optim, "minimize_rows", spy)
    rng = np.random.default_rng(0)
    views = {"a": rng.normal(size=(20, 3)), "b": rng.normal(size=(20, 2))}
    MRD(latent_dim=2, num_inducing=5, max_iter=10, warmup_iters=4, lbfgs_memory=7, progress=False, seed=0).fit(views)
    assert seen == [7, 7]  # warm-up and main phase
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="lbfgs_memory"):
            MRD(latent_dim=2, num_inducing=5, lbfgs_memory=bad, progress=False).fit(views)


def test_a_fit_stopped_by_max_iter_warns_and_says_so():
    from sklearn.exceptions import ConvergenceWarning

    views = toy_views(N=30, D=5)
    kwargs = dict(latent_dim=2, num_inducing=6, warmup_iters=5, progress=False, seed=0)
    with pytest.warns(ConvergenceWarning, match=r"MRD stopped after 20 bound evaluations, at max_iter=20,"):
        short = MRD(max_iter=20, **kwargs).fit(views)
    assert not short.converged_ and short.n_iter_ == 20
    # a loose tolerance is met long before the budget: no warning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        done = MRD(max_iter=2000, tol=1e-3, **kwargs).fit(views)
    assert done.converged_ and done.n_iter_ < 2000


def test_shared_dimension_rule_has_one_owner_with_an_explicit_fallback():
    from bayesalign.gp import relevant_dimensions, shared_dimensions

    relevance = {"a": np.array([1.0, 0.5, 0.01, 0.0]), "b": np.array([0.9, 0.01, 0.4, 0.0])}
    # 0.05 x the largest: a keeps 0 and 1, b keeps 0 and 2
    assert relevant_dimensions(relevance["a"], 0.05).tolist() == [True, True, False, False]
    assert shared_dimensions(relevance, 0.05).tolist() == [0]
    assert relevant_dimensions(np.zeros(3), 0.05).tolist() == [False] * 3  # a switched-off view uses nothing
    apart = {"a": np.array([1.0, 0.0, 0.3]), "b": np.array([0.0, 1.0, 0.2])}
    assert shared_dimensions(apart, 0.5).size == 0  # MRD says so: no shared space
    with pytest.warns(RuntimeWarning, match="no latent dimension is shared by views \\('a', 'b'\\).*dimension 2"):
        assert shared_dimensions(apart, 0.5, fallback=True).tolist() == [2]  # max of min(0.3, 0.2)
    with pytest.raises(ValueError, match="must be in \\[0, 1\\)"):
        relevant_dimensions(relevance["a"], 1.0)


def test_continue_fit_goes_on_from_the_fitted_parameters_and_a_new_prior_counts_by_its_kl(fitted):
    import copy

    import scipy.sparse as sp
    from sklearn.exceptions import ConvergenceWarning

    from bayesalign.gp.priors import GraphLaplacianPrior

    _, model = fitted
    before, n_before = model.elbo(), model.n_iter_
    mu, S = model.module_.q_mean.detach(), model.module_.q_variance.detach()
    kl_before = float(model.module_.kl().detach())
    N = mu.shape[0]
    chain = sp.diags([np.ones(N - 1), np.ones(N - 1)], [-1, 1])  # each row a neighbour of the next
    prior = GraphLaplacianPrior(sp.diags(np.asarray(chain.sum(1)).ravel()) - chain, 2.0)
    # one evaluation: the parameters stay where they were, so the bound changes by exactly the KLs' difference
    with pytest.warns(ConvergenceWarning):
        swapped = copy.deepcopy(model).continue_fit(max_iter=1, latent_prior=prior)
    expected = before + kl_before - float(prior.kl(mu, S))
    assert swapped.elbo() == pytest.approx(expected, rel=1e-9)
    assert swapped.n_iter_ == n_before + 1 and swapped.module_.latent_prior is not model.module_.latent_prior
    # more evaluations under the same prior: no warm-up, the history goes on, the bound does not drop
    # a 30-evaluation budget stops before the tolerance, and the warning counts them as further evaluations
    with pytest.warns(ConvergenceWarning, match=rf"after {n_before + 30} bound evaluations, at the end of the 30 "
                      r"further evaluations continue_fit was given"):
        more = copy.deepcopy(model).continue_fit(max_iter=30)
    assert more.n_iter_ == n_before + 30 and len(more.history_) == n_before + 30
    assert more.elbo() >= before - 1e-6 * abs(before)
    assert model.n_iter_ == n_before  # the fitted model itself is untouched
    with pytest.raises(ValueError, match="max_iter"):
        copy.deepcopy(model).continue_fit(max_iter=0)


def test_several_starts_are_each_the_fit_from_that_start_alone_and_the_best_bound_is_kept():
    views, kwargs = _restart_workload()
    alone = {init: MRD(init=init, **kwargs).fit(views).elbo() for init in ("pca", "cca", "random")}
    both = MRD(init=("pca", "cca", "random"), **kwargs).fit(views)
    assert both.restart_inits_ == ["pca", "cca", "random"]
    # the same computation on the same shapes and thread count: equal to round-off
    np.testing.assert_allclose(both.restart_bounds_, [alone["pca"], alone["cca"], alone["random"]], rtol=1e-9)
    assert both.best_restart_ == int(np.argmax(both.restart_bounds_))
    assert both.elbo() == pytest.approx(both.restart_bounds_.max(), rel=1e-12)
    # with n_restarts, each start is restarted (jittered) that often
    jittered = MRD(init=("pca", "cca"), n_restarts=2, **kwargs).fit(views)
    assert jittered.restart_inits_ == ["pca", "pca (jitter 1)", "cca", "cca (jitter 1)"]
    assert jittered.restart_bounds_[2] == pytest.approx(alone["cca"], rel=1e-9)
    with pytest.raises(ValueError, match="empty sequence of starts"):
        MRD(init=(), **kwargs).fit(views)


def test_a_start_that_cannot_be_computed_is_skipped_with_a_warning():
    from bayesalign.gp import BayesianGPLVM

    Y = np.random.default_rng(0).normal(size=(25, 4))
    kwargs = dict(latent_dim=2, num_inducing=6, max_iter=20, warmup_iters=5, progress=False, seed=0)
    with pytest.warns(RuntimeWarning, match="start 'cca' was skipped: init='cca' needs at least two views"):
        model = BayesianGPLVM(init=("cca", "pca"), **kwargs).fit(Y)
    assert model.restart_inits_ == ["pca"]
    with pytest.raises(ValueError, match="needs at least two views"):  # a single start keeps its own error
        BayesianGPLVM(init="cca", **kwargs).fit(Y)
    with pytest.raises(ValueError, match="none of the starts"), pytest.warns(RuntimeWarning):
        BayesianGPLVM(init=("cca", "cca"), **kwargs).fit(Y)
    with pytest.raises(ValueError, match="init array must have shape"):  # a given start that does not fit: bad input
        BayesianGPLVM(init=("pca", np.zeros((24, 2))), **kwargs).fit(Y)


# ----------------------------------------------------------------------------------------------------
# resolution: how finely each view pins down each latent dimension
# ----------------------------------------------------------------------------------------------------
def _rbf_resolution_by_hand(model, name):
    """r_vq of MRD.resolution_ from the RBF derivative written out: d k(x, z_m) / d x_q =
    -k(x, z_m) (x_q - z_mq) / l_q^2, so d f / d x_q = sum_m -k_m (x_q - z_mq) / l_q^2 alpha_m."""
    module = model.module_
    v = list(model.view_names_).index(name)
    with torch.no_grad():
        X = module.view_latent(v)[0].numpy()
        Z = module.inducing(v).numpy()
        kernel = module.kernels[v]
        variance = float(kernel.outputscale)
        ls = kernel.base_kernel.lengthscale.reshape(-1).numpy()
        alpha = module.posterior(v).alpha.numpy()
        noise = float(module.noise[v])
    diff = X[:, None, :] - Z[None, :, :]  # [N, M, Q]
    K = variance * np.exp(-0.5 * ((diff / ls) ** 2).sum(-1))  # [N, M]
    out = []
    for q in range(X.shape[1]):
        slope = (-K * diff[:, :, q] / ls[q] ** 2) @ alpha  # [N, D]
        out.append(X[:, q].var() * (slope ** 2).sum(1).mean() / noise)
    return np.array(out)


def test_resolution_is_the_fisher_information_times_the_spread(fitted):
    views, model = fitted
    resolution = model.resolution_
    for name in ("a", "b"):
        # forward-mode derivatives against the derivative written out; both float64, same formula: round-off
        np.testing.assert_allclose(resolution[name], _rbf_resolution_by_hand(model, name), rtol=1e-9)
    # the toy's private and shared signals are resolved hundreds of times over, the dimensions ARD switched
    # off less than once (after this short fit): MAD's threshold of 1
    # separates them
    for name in ("a", "b"):
        used = set(model.shared_dims()) | set(model.private_dims(name))
        off = sorted(set(range(5)) - used)
        assert resolution[name][sorted(used)].min() > 100 and resolution[name][off].max() < 1.0


def test_resolution_of_a_float32_model(fitted):
    # the inducing posterior is solved in float64 whatever the model's dtype, so resolution_ of a float32 MRD is
    # computed without a dtype clash
    views, _ = fitted
    model = MRD(latent_dim=5, num_inducing=12, max_iter=60, warmup_iters=20, progress=False, seed=0,
                dtype="float32").fit(views)
    resolution = model.resolution_
    for name in ("a", "b"):
        assert resolution[name].dtype == np.float32 and np.isfinite(resolution[name]).all()
        # float32 derivatives against the float64-free hand formula on the same parameters: single precision
        np.testing.assert_allclose(resolution[name], _rbf_resolution_by_hand(model, name), rtol=1e-3)


def test_resolution_does_not_change_when_a_latent_dimension_is_rescaled(fitted):
    """x_q -> c x_q with Z_q -> c Z_q, S_q -> c^2 S_q and l_q -> c l_q leaves the model's functions as
    they are: the ARD relevance changes by 1 / c^2, the resolution must not."""
    import copy

    views, model = fitted
    scaled = copy.deepcopy(model)
    module, q, c = scaled.module_, int(model.shared_dims()[0]), 7.0
    with torch.no_grad():
        module.q_mean[:, q] *= c
        variance = module.q_variance.clone()
        variance[:, q] *= c ** 2
        module.q_variance = variance
        module.inducing_inputs[..., q] *= c
        for kernel in module.kernels:
            ls = kernel.base_kernel.lengthscale.clone()
            ls[..., q] *= c
            kernel.base_kernel.lengthscale = ls
    for name in ("a", "b"):
        np.testing.assert_allclose(scaled.relevance_[name][q], model.relevance_[name][q] / c ** 2, rtol=1e-9)
        np.testing.assert_allclose(scaled.resolution_[name], model.resolution_[name], rtol=1e-8)


def test_shared_dimensions_by_an_absolute_threshold():
    from bayesalign.gp import shared_dimensions

    resolution = {"a": np.array([900.0, 7.0, 0.01]), "b": np.array([300.0, 20.0, 400.0])}
    # relative to the largest, dimension 1 (7 / 900) would be dropped at 0.05; absolutely it is resolved
    assert shared_dimensions(resolution, 0.05).tolist() == [0]
    assert shared_dimensions(resolution, 1.0, relative=False).tolist() == [0, 1]
    with pytest.warns(RuntimeWarning, match="dimension 0"):
        assert shared_dimensions(resolution, 1e4, relative=False, fallback=True).tolist() == [0]
    with pytest.raises(ValueError, match="threshold must be >= 0"):
        shared_dimensions(resolution, -1.0, relative=False)
