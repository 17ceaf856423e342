"""StochasticMRD's training step at scale: it never reads a value back from the device (only the stopping test
does, every ``window`` epochs), and the flag that spares it the missing-entry look-up gives the same bound."""

from __future__ import annotations

import os
import traceback
import warnings

import numpy as np
import pytest
import torch

from bayesalign.gp import StochasticMRD
from bayesalign.gp.svi import model as svi_model

SVI_DIR = os.path.dirname(svi_model.__file__)


def _views(n=80, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2))
    return {"a": np.tanh(x @ rng.standard_normal((2, 6))) + 0.1 * rng.standard_normal((n, 6)),
            "b": np.sin(x @ rng.standard_normal((2, 5))) + 0.1 * rng.standard_normal((n, 5))}


def test_the_training_step_reads_nothing_back_from_the_device(monkeypatch):
    """Every conversion of a tensor to a Python value made from a file of bayesalign/gp/svi during the epochs is
    recorded: only the window's read-back (training.py, ``torch.stack(pending).tolist()``) may appear, once per
    window, and nothing from the model or the guide (the step)."""
    from bayesalign.gp.svi import training

    seen = []

    def recording(name):
        original = getattr(torch.Tensor, name)

        def wrapper(self, *args, **kwargs):
            frame = traceback.extract_stack(limit=3)[-2]  # the caller of the conversion
            if frame.filename.startswith(SVI_DIR):
                seen.append((os.path.basename(frame.filename), frame.lineno, name))
            return original(self, *args, **kwargs)
        return wrapper

    views = _views()
    holed = {**views, "a": views["a"].copy()}
    holed["a"][3, 2] = np.nan  # a missing entry: the per-point path of the Gaussian term
    for data, observed in ((views, None), (holed, None),
                           ({"a": views["a"][:60], "b": views["b"][20:]},  # partial observation:
                            {"a": np.arange(60), "b": np.arange(20, 80)})):  # the entity of each row
        model = StochasticMRD(latent_dim=2, num_inducing=8, batch_size=16, max_epochs=0, init="pca",
                              progress=False, seed=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(data, observed=observed)
            model.set_params(max_epochs=6, window=3, tol=0.0, warm_start=True)
            seen.clear()
            with monkeypatch.context() as patch:
                for name in ("item", "tolist", "__bool__", "__float__", "__int__"):
                    patch.setattr(torch.Tensor, name, recording(name))
                training.train(model, continued=True)
        step_files = {f for f, _, _ in seen} - {"training.py"}
        assert not step_files, seen
        # one read-back per window of 3 epochs (the random generator's seed is drawn once, before the epochs)
        assert sum(name == "tolist" for _, _, name in seen) == 2, seen


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
