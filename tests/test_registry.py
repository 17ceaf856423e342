"""The method table's construction: common settings mapped onto each class, options forwarded to inner models."""

from __future__ import annotations

import warnings

import pytest


def test_build_forwards_unknown_options_to_the_inner_model():
    from bayesalign.mad import MAD
    from bayesalign.pipelines import MRDProcrustes
    from bayesalign.registry import _build

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        mad = _build(MAD, latent_dim=3, seed=1, progress=False, max_iter=5, cost="mean")
    assert (mad.latent_dim, mad.seed, mad.cost, mad.engine_options) == (3, 1, "mean", {"max_iter": 5})
    pipe = _build(MRDProcrustes, latent_dim=2, seed=0, max_iter=7)
    assert pipe.gplvm_options == {"max_iter": 7} and pipe.latent_dim == 2


def test_build_still_refuses_unknown_options_of_a_plain_class():
    from bayesalign.registry import _build
    from bayesalign.spectral import CCAAlignment

    with pytest.raises(ValueError, match="CCAAlignment has no option 'max_iter'"):
        _build(CCAAlignment, latent_dim=2, max_iter=5)


def test_every_method_entry_loads():
    from bayesalign.registry import METHODS

    for name, spec in METHODS.items():
        assert spec.available, name
        assert callable(spec.load())
