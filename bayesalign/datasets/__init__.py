"""Alignment problems with known answers: the seed papers' synthetic generators and real data.

Every loader returns an ``AlignmentProblem`` whose views are paired row by row, with
the truth (identity) and, where there are any, labels; split anchors off with
``problem.split_anchors(n, seed)`` and hide the order with ``problem.shuffle_unaligned(seed=...)``.
The real data are shipped inside the package (``bayesalign/datasets/_data``); nothing is
downloaded.

``DATASETS`` maps a name to a loader; ``load(name, **kwargs)`` calls it.

Examples
--------
>>> sorted(DATASETS)[:3]
['digits_halves', 'helix', 'mad_toy_linear_shared']
>>> load("protein", models=(1, 21)).views.names
('model1', 'model21')
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from ..data import AlignmentProblem
from .acclaim import Bone, Skeleton, joint_positions, read_amc, read_asf
from .real import MFEAT_VIEWS, PROTEIN_SCALES, digits_halves, mfeat, mocap, protein
from .simulations import (
    MMDMA_KINDS,
    accessibility_view,
    branching_trajectory,
    count_view,
    mmdma_simulation,
    single_cell_simulation,
)
from .synthetic import MAD_TOY_SETTINGS, mad_toy, manifold_pair


def _named(func: Callable, *args, **kwargs) -> Callable[..., AlignmentProblem]:
    """``partial`` that keeps the loader's docstring, so a listing can show it."""
    bound = partial(func, *args, **kwargs)
    bound.__doc__ = func.__doc__
    return bound


#: name -> loader returning an AlignmentProblem (keyword arguments are passed through).
DATASETS: dict[str, Callable[..., AlignmentProblem]] = {
    **{f"mad_toy_{setting}": _named(mad_toy, setting) for setting in MAD_TOY_SETTINGS},
    **{kind: _named(manifold_pair, kind) for kind in ("swiss_roll", "s_curve", "helix")},
    "protein": protein,
    "mocap": mocap,
    "mfeat": mfeat,
    "digits_halves": digits_halves,
}


def load(name: str, **kwargs) -> AlignmentProblem:
    """Load the data set registered as ``name`` in ``DATASETS``, passing ``kwargs`` to its loader."""
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; available: {sorted(DATASETS)}")
    return DATASETS[name](**kwargs)


__all__ = [
    "DATASETS", "MAD_TOY_SETTINGS", "MFEAT_VIEWS", "MMDMA_KINDS", "PROTEIN_SCALES", "Bone", "Skeleton",
    "accessibility_view", "branching_trajectory", "count_view", "digits_halves", "joint_positions", "load",
    "mad_toy", "manifold_pair", "mfeat", "mmdma_simulation", "mocap", "protein", "read_amc", "read_asf",
    "single_cell_simulation",
]
