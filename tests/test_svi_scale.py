"""StochasticMRD's training step at scale: it waits for the device only on its factorisations' status flags (the
stopping test reads the ELBO back every ``window`` epochs, outside the step), the flag that spares it the
missing-entry look-up gives the same bound, and the graph term's neighbour gather equals the sparse product."""

from __future__ import annotations

import os
import traceback
import warnings

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bayesalign.gp import StochasticMRD
from bayesalign.gp.svi import model as svi_model

SVI_DIR = os.path.dirname(svi_model.__file__)


def _views(n=80, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2))
    return {"a": np.tanh(x @ rng.standard_normal((2, 6))) + 0.1 * rng.standard_normal((n, 6)),
            "b": np.sin(x @ rng.standard_normal((2, 5))) + 0.1 * rng.standard_normal((n, 5))}


class _ReadBacks(TorchDispatchMode):
    """Records every op that makes the host wait for a tensor's value (``.item()``, ``bool()``, a boolean mask's
    size, a factorisation's error check) made inside :func:`~bayesalign.gp.svi.training.minibatch_step`, with the
    stack it came from. On the CPU they cost nothing; on a GPU each is a synchronisation."""

    WAITS = ("aten._local_scalar_dense", "aten.nonzero", "aten.masked_select", "aten._linalg_check_errors",
             "aten.is_nonzero")

    def __init__(self):
        super().__init__()
        self.reads = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        boolean_index = func is torch.ops.aten.index.Tensor and any(
            i is not None and i.dtype == torch.bool for i in args[1])
        if boolean_index or str(func).startswith(self.WAITS):
            stack = [f for f in traceback.extract_stack()[:-1] if "torch/utils/_python_dispatch" not in f.filename]
            if any(f.name == "minibatch_step" for f in stack):
                self.reads.append((str(func), [f"{f.filename}:{f.lineno} ({f.name})" for f in stack]))
        return func(*args, **(kwargs or {}))


def _allowed(op, stack, partial):
    """The status flags of the Cholesky factorisations (K_uu's, and q(u)'s from its natural parameters, which the
    undo of a bad natural step needs), Adam's step count (a CPU tensor unless capturable), and, for a view that
    observes only some entities, the gather of the minibatch's rows it observes."""
    if op.startswith("aten._linalg_check_errors"):
        return True
    if any("linear_operator/utils/cholesky.py" in f or "torch/optim/" in f for f in stack):
        return True
    caller = [f for f in stack if "/torch/" not in f][-1]
    return partial and caller.startswith(os.path.join(SVI_DIR, "model.py")) and "view_log_likelihood)" in caller


def test_the_training_step_waits_for_the_device_only_on_cholesky_status_flags():
    from bayesalign.gp.priors import GraphLaplacianPrior
    from bayesalign.gp.svi import training
    from bayesalign.graph import entity_graph, laplacian

    views = _views()
    holed = {**views, "a": views["a"].copy()}
    holed["a"][3, 2] = np.nan  # a missing entry: the per-point path of the Gaussian term
    n = views["a"].shape[0]
    counts = np.random.default_rng(0).poisson(2.0, size=(n, 4)).astype(float)
    graph = GraphLaplacianPrior(laplacian(entity_graph([views["a"]], [np.arange(n)], n, n_neighbors=5))[0], 3.0)
    cases = [(views, None, {}), (holed, None, {}),
             ({"a": views["a"], "c": counts}, None, {"likelihood": {"c": "poisson"}, "latent_prior": graph}),
             ({"a": views["a"][:60], "b": views["b"][20:]},  # partial observation: the entity of each row
              {"a": np.arange(60), "b": np.arange(20, 80)}, {})]
    for data, observed, settings in cases:
        model = StochasticMRD(latent_dim=2, num_inducing=8, batch_size=16, max_epochs=0, init="pca",
                              progress=False, seed=0, **settings)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(data, observed=observed)
            model.set_params(max_epochs=2, window=1, tol=0.0, warm_start=True)
            with _ReadBacks() as recorder:
                training.train(model, continued=True)
        refused = [(op, stack) for op, stack in recorder.reads if not _allowed(op, stack, observed is not None)]
        own = [(op, [f for f in stack if "/torch/" not in f][-6:]) for op, stack in refused]
        assert not refused, "\n\n".join(f"{op} from\n  " + "\n  ".join(frames) for op, frames in own)
        assert recorder.reads  # the recorder does see the factorisations' checks
        # each view's q(u) is built once an evaluation: at most its two factorisations and K_uu's a step
        steps = 2 * -(-model.n_entities_ // 16)
        factorisations = [op for op, stack in recorder.reads if not any("torch/optim/" in f for f in stack)
                          and _allowed(op, stack, False)]
        assert len(factorisations) <= 3 * len(data) * steps
        assert model.n_epochs_ == 2 and np.isfinite(model.elbo_history_).all()


def test_the_missing_flag_gives_the_bound_of_the_look_up():
    views = _views(40)
    views["b"][5, 1] = np.nan
    model = StochasticMRD(latent_dim=2, num_inducing=6, max_epochs=2, init="pca", progress=False, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(views)
    pyro_model = model.model_
    assert pyro_model.view_has_missing == [False, True]
    idx = torch.arange(40)
    with torch.no_grad():
        for v in range(2):
            gp = pyro_model.gps[v]
            strategy = gp.variational_strategy
            args = (getattr(pyro_model, f"targets_{v}"), pyro_model.q_x.mean, pyro_model.q_x.variance,
                    gp.covar_module, strategy.inducing_points, strategy.jitter_val, gp.inducing_distributions()[1],
                    pyro_model.likelihoods[v].noise.reshape(()))
            flagged = svi_model.gaussian_expected_log_likelihood(*args, any_missing=pyro_model.view_has_missing[v])
            looked_up = svi_model.gaussian_expected_log_likelihood(*args)
            # the same sum in the same order: equal up to float64 round-off
            assert float(flagged) == pytest.approx(float(looked_up), rel=1e-12)
            assert float(pyro_model.gaussian_view_log_likelihood(v, idx)) == pytest.approx(float(flagged), rel=1e-12)


def test_graph_term_from_neighbours_equals_the_sparse_product_and_its_gradient():
    """The minibatch's rows of (P - diag P) mu gathered from each entity's neighbours against the product of the
    whole sparse P with mu (the reference), value and gradient, on a graph with unequal degrees."""
    import scipy.sparse as sp

    from bayesalign.gp.priors import GraphLaplacianPrior
    from bayesalign.graph import knn_graph, laplacian

    rng = np.random.default_rng(4)
    n = 90
    views = _views(n)
    prior = GraphLaplacianPrior(laplacian(knn_graph(rng.standard_normal((n, 3)), 6, mode="connectivity"))[0], 3.0)
    model = StochasticMRD(latent_dim=2, num_inducing=6, max_epochs=0, init="pca", latent_prior=prior,
                          progress=False, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(views)
    pyro_model = model.model_
    mu, S = pyro_model.q_x.mean, pyro_model.q_x.variance
    idx = torch.as_tensor(rng.choice(n, 25, replace=False))
    P = (sp.identity(n) + 3.0 * prior.laplacian).tocoo()
    dense_P = torch.as_tensor(P.toarray(), dtype=mu.dtype)  # [n, n]: the reference on a small graph
    d = torch.diagonal(dense_P)

    def reference():
        m = mu[idx]
        off = (dense_P @ mu)[idx] - d[idx, None] * m
        return (-0.5 * ((d[idx] - 1.0) * (S[idx].sum(1) + m.square().sum(1)) + (m * off).sum(1))
                + 0.5 * 2 * prior.log_det_precision / n)

    values = []
    for term in (reference, lambda: pyro_model.graph_log_ratio(idx)):
        mu.grad = None
        value = term()
        value.sum().backward()
        values.append((value.detach().clone(), mu.grad.detach().clone()))
    # the same sums in another order: float64 round-off
    torch.testing.assert_close(values[1][0], values[0][0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(values[1][1], values[0][1], rtol=1e-12, atol=1e-12)
