"""StochasticMRD's training step on CUDA against the same step on CPU (skipped without CUDA)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from test_mrd import toy_views  # tests/test_mrd.py: the MAD paper's toy

from bayesalign.gp import StochasticMRD

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _fit(device, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return StochasticMRD(latent_dim=3, num_inducing=10, max_epochs=6, window=3, progress=False, seed=0,
                             device=device, **options).fit(toy_views(N=60, D=8, seed=0))


def test_cuda_steps_follow_the_cpu_steps():
    # full batch (batch_size >= N): every step sees all entities whatever the device's permutation, and with
    # Gaussian views the ELBO has no Monte Carlo term, so both devices take the same float64 steps; their
    # histories differ by the round-off of different reduction orders (1e-6 relative, over 6 Adam steps)
    cpu, cuda = _fit("cpu", init="pca", batch_size=64), _fit("cuda", init="pca", batch_size=64)
    assert cuda.model_.q_x.mean.device.type == "cuda"
    np.testing.assert_allclose(cuda.elbo_history_, cpu.elbo_history_, rtol=1e-6)
    np.testing.assert_allclose(cuda.elbo(), cpu.elbo(), rtol=1e-6)
    mean_cpu, _ = cpu.infer("a", toy_views(N=60, D=8, seed=0)["a"][:5])
    mean_cuda, _ = cuda.infer("a", toy_views(N=60, D=8, seed=0)["a"][:5])
    np.testing.assert_allclose(mean_cuda, mean_cpu, atol=1e-4)  # L-BFGS on the same objective, to its tolerance


def test_minibatch_steps_on_cuda_give_a_finite_rising_elbo():
    # minibatches of 16: the device's own permutation; the ELBO read back every window rises from the PCA start
    model = _fit("cuda", init="pca", batch_size=16, dtype=torch.float32)
    history = model.elbo_history_
    assert np.isfinite(history).all() and history[-1] > history[0]


def test_the_collapsed_start_on_cuda_reaches_the_cpu_bound():
    # the collapsed MRD of the start runs its L-BFGS on the device: its path may part from the CPU's by
    # round-off over hundreds of evaluations, so the bounds are compared to 0.1% of their size, not digit by digit
    cpu, cuda = _fit("cpu", batch_size=64), _fit("cuda", batch_size=64)
    assert cpu.start_ == cuda.start_ == "collapsed"
    assert cuda.elbo() == pytest.approx(cpu.elbo(), rel=1e-3)
