"""MRDProcrustes: a Bayesian GP-LVM per view, superimposed on the anchors by Procrustes."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone


def test_mrd_procrustes_is_the_composition_of_its_parts_and_superimposes_the_anchors():
    from bayesalign.data import Views
    from bayesalign.datasets import mad_toy
    from bayesalign.gp import BayesianGPLVM
    from bayesalign.pipelines import MRDProcrustes
    from bayesalign.spectral import ProcrustesAlignment

    problem = mad_toy("linear_shared", seed=0, n_anchors=20)
    options = {"max_iter": 40, "warmup_iters": 10, "num_inducing": 10}
    model = MRDProcrustes(latent_dim=2, seed=0, gplvm_options=options).fit(problem)
    assert clone(model).get_params() == model.get_params()
    # the same two steps by hand give the same coordinates (same seeds; one thread in the tests)
    means = {v: np.asarray(next(iter(BayesianGPLVM(latent_dim=2, seed=0, progress=False, **options)
                                       .fit(problem.views[v]).embedding_.means.values())))
             for v in problem.views.names}
    by_hand = ProcrustesAlignment(n_components=2, embedding="none").fit(problem.replace(views=Views(means)))
    for v in problem.views.names:
        np.testing.assert_allclose(model.embedding_.means[v], by_hand.embedding_.means[v], rtol=1e-6, atol=1e-8)
    # Procrustes brings the anchor rows of the two views together: closer than before the superimposition
    rows_a, rows_b = problem.anchors_between("Y1", "Y2").index_a, problem.anchors_between("Y1", "Y2").index_b
    before = np.linalg.norm(means["Y1"][rows_a] - means["Y2"][rows_b], axis=1).mean()
    emb = model.embedding_.means
    after = np.linalg.norm(emb["Y1"][rows_a] - emb["Y2"][rows_b], axis=1).mean()
    scale = np.linalg.norm(emb["Y1"][rows_a] - emb["Y1"][rows_a].mean(0), axis=1).mean()
    assert after < 0.5 * scale and after < before


def test_mrd_procrustes_checks_its_parameters():
    from bayesalign.datasets import mad_toy
    from bayesalign.pipelines import MRDProcrustes

    problem = mad_toy("linear_shared", seed=0, n_anchors=20)
    with pytest.raises(ValueError, match="latent_dim must be a positive integer"):
        MRDProcrustes(latent_dim=0).fit(problem)
    with pytest.raises(ValueError, match=r"must not set \['seed'\]"):
        MRDProcrustes(gplvm_options={"seed": 1}).fit(problem)
    with pytest.raises(TypeError, match="AlignmentProblem"):
        MRDProcrustes().fit(problem.views)
