"""The field's synthetic benchmarks for aligning views of one population: the three simulations of MMD-MA
and a single-cell-like simulator (a branching trajectory seen as counts and as accessibility).

- :func:`mmdma_simulation`: a branching tree (2-D), a Swiss roll (3-D) or a circular frustum (3-D), each
  mapped into two views of different dimension with noise (Liu, Huang, Singh & Noble 2019, "Jointly
  embedding multiple single-cell omics measurements", section 3.1).
- :func:`single_cell_simulation`: cells on a branching latent trajectory (:func:`branching_trajectory`),
  one view of negative-binomial counts (:func:`count_view`) and one of binary accessibility
  (:func:`accessibility_view`) or Gaussian features, any size, memory linear in the number of cells.

Every generator takes a seed and returns an ``AlignmentProblem`` whose views are paired row by row
(truth = identity) with labels per view.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .._utils import as_rng, check_count
from ..data import AlignmentProblem

__all__ = ["MMDMA_KINDS", "accessibility_view", "branching_trajectory", "count_view", "mmdma_simulation",
           "single_cell_simulation"]

#: The three manifolds of MMD-MA's simulations.
MMDMA_KINDS = ("branch", "swiss_roll", "frustum")
#: Rows used to set the accessibility view's per-peak offsets (enough for a sparsity within a percent).
_OFFSET_ROWS = 2000


def _mmdma_latent(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Points on the manifold (n, 2 or 3) and their labels (n,): the branch (tree) or the third of the
    manifold's length (Swiss roll: angle; frustum: height) each point lies in."""
    if kind == "branch":
        # a trunk from (0, 0) to (1, 0), then two branches to (2, 1) and (2, -1); a third of the points each
        segment = rng.permutation(np.arange(n) % 3)
        t = rng.uniform(0.0, 1.0, n)
        ends = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, -1.0]])  # direction of each segment
        starts = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
        points = starts[segment] + t[:, None] * ends[segment]
        return points + 0.02 * rng.standard_normal((n, 2)), segment
    if kind == "swiss_roll":
        angle = rng.uniform(1.5 * np.pi, 4.5 * np.pi, n)
        height = rng.uniform(0.0, 10.0, n)
        points = np.c_[angle * np.cos(angle), height, angle * np.sin(angle)]
        return points, np.minimum(((angle - 1.5 * np.pi) / np.pi).astype(np.int64), 2)
    # circular frustum: circles of radius falling from 1 to 0.5 as the height rises from 0 to 1
    height = rng.uniform(0.0, 1.0, n)
    angle = rng.uniform(0.0, 2 * np.pi, n)
    radius = 1.0 - 0.5 * height
    points = np.c_[radius * np.cos(angle), radius * np.sin(angle), height]
    return points, np.minimum((3 * height).astype(np.int64), 2)


def mmdma_simulation(kind: str = "branch", n_samples: int = 300, n_features=(1000, 2000), noise: float = 0.1,
                     seed=0) -> AlignmentProblem:
    r"""One of the three simulations of MMD-MA (Liu, Huang, Singh & Noble 2019).

    ``n_samples`` points on a manifold: ``"branch"``, a 2-D tree (a trunk and two branches, a third of the
    points each, with a 0.02 jitter); ``"swiss_roll"``, the 3-D roll :math:`(t\cos t, h, t\sin t)`,
    :math:`t \sim U(1.5\pi, 4.5\pi)`, :math:`h \sim U(0, 10)`; ``"frustum"``, circles of radius
    :math:`1 - h/2` at heights :math:`h \sim U(0, 1)`. The paper's description fixes the manifolds, the 300
    points and the two views' 1000 and 2000 features; the map is ours: the columns of the points are
    standardised to Z, and view v is :math:`\tanh(Z W_v) + \sigma E_v` with :math:`W_v` a random
    Gaussian (q, p_v) matrix of variance 1/q (so :math:`Z W_v` has unit variance), a different one per
    view, and :math:`E_v` standard Gaussian noise (``noise`` = :math:`\sigma`).

    Labels (per view, the same array): the tree's segment (0 trunk, 1 and 2 the branches), or which third
    of the roll's angle or of the frustum's height a point lies in.

    Returns
    -------
    AlignmentProblem with views ``"view1"`` (n, p_1) and ``"view2"`` (n, p_2), paired row by row.

    >>> p = mmdma_simulation("frustum", n_samples=30, n_features=(5, 7), seed=0)
    >>> p.views.n_features, sorted(set(p.labels["view1"].tolist()))
    ({'view1': 5, 'view2': 7}, [0, 1, 2])
    """
    if kind not in MMDMA_KINDS:
        raise ValueError(f"kind must be one of {MMDMA_KINDS}, got {kind!r}")
    n = check_count(n_samples, "n_samples", minimum=3)
    dims = tuple(check_count(p, "n_features") for p in n_features)
    if len(dims) != 2:
        raise ValueError(f"n_features gives the two views' feature counts, got {n_features!r}")
    if not noise >= 0:
        raise ValueError(f"noise must be non-negative, got {noise}")
    rng = as_rng(seed)
    points, labels = _mmdma_latent(kind, n, rng)
    Z = (points - points.mean(0)) / points.std(0)  # [n, q]
    q = Z.shape[1]
    views = {}
    for name, p in zip(("view1", "view2"), dims):
        W = rng.standard_normal((q, p)) / np.sqrt(q)  # [q, p]
        views[name] = np.tanh(Z @ W) + noise * rng.standard_normal((n, p))
    return AlignmentProblem.paired(views, labels=labels, name=f"mmdma_{kind}")


def branching_trajectory(n_cells: int, n_branches: int = 2, latent_dim: int = 5, jitter: float = 0.05, seed=0):
    """Cells on a branching trajectory in a ``latent_dim``-dimensional latent space.

    A trunk of unit length from the origin along a random unit direction, and ``n_branches`` branches from
    its end, each along its own random unit direction, of lengths falling from 0.8 to 0.5 (no two arms of
    the tree alike, so no isometry swaps them); each cell is on one segment (the trunk and each branch
    equally likely) at a uniform position along it, plus isotropic Gaussian ``jitter``. The segment is the
    cell type (0 the trunk, b the b-th branch).

    Returns
    -------
    latent : (n_cells, latent_dim)
    pseudotime : (n_cells,): the distance from the root along the tree (without the jitter)
    cell_type : (n_cells,) int
    """
    n = check_count(n_cells, "n_cells")
    n_branches = check_count(n_branches, "n_branches")
    rng = as_rng(seed)
    directions = rng.standard_normal((n_branches + 1, latent_dim))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)  # [n_branches + 1, q]
    lengths = np.r_[1.0, np.linspace(0.8, 0.5, n_branches)]  # [n_branches + 1]
    cell_type = rng.integers(0, n_branches + 1, n)
    along = rng.uniform(0.0, 1.0, n) * lengths[cell_type]  # [n]
    start = np.where(cell_type[:, None] > 0, directions[0], 0.0)  # [n, q]: branches start at the trunk's end
    latent = start + along[:, None] * directions[cell_type] + jitter * rng.standard_normal((n, latent_dim))
    return latent, along + (cell_type > 0), cell_type


def count_view(latent, n_genes: int = 500, dispersion: float = 5.0, mean_count: float = 2.0, seed=0):
    r"""Negative-binomial counts of ``n_genes`` genes for cells at ``latent`` (n, q).

    Gene g of cell n has mean :math:`\mu_{ng} = s_n \exp(b_g + z_n' w_g)` with :math:`w_g \sim N(0, I)`
    (every gene varies along the trajectory, by up to a few log-fold over a unit of latent distance),
    :math:`b_g \sim N(\log(\text{mean\_count}) - 1/2, 1)` and a library size
    :math:`s_n \sim \text{LogNormal}(0, 0.25^2)`; the count is negative binomial with mean :math:`\mu` and
    variance :math:`\mu + \mu^2 / r`, r = ``dispersion`` (a gamma-Poisson mixture).

    Returns
    -------
    counts : (n, n_genes) float64 holding non-negative integers
    mean : (n, n_genes) the :math:`\mu` they were drawn with
    """
    latent = np.asarray(latent, np.float64)
    n, q = latent.shape
    if not dispersion > 0:
        raise ValueError(f"dispersion must be positive, got {dispersion}")
    rng = as_rng(seed)
    W = rng.standard_normal((q, check_count(n_genes, "n_genes")))  # [q, G]
    base = rng.normal(np.log(mean_count) - 0.5, 1.0, n_genes)  # [G]
    library = np.exp(0.25 * rng.standard_normal(n))  # [n]
    mean = library[:, None] * np.exp(base + latent @ W)  # [n, G]
    counts = rng.negative_binomial(dispersion, dispersion / (dispersion + mean)).astype(np.float64)
    return counts, mean


def accessibility_view(latent, n_peaks: int = 1000, sparsity: float = 0.1, seed=0):
    r"""Binary accessibility of ``n_peaks`` peaks for cells at ``latent`` (n, q).

    Peak k of cell n is open with probability :math:`\sigma(c_k + 2 z_n' v_k)`, :math:`v_k \sim N(0, I)`,
    the offset :math:`c_k` set (by Newton's method on up to 2000 cells) so that each peak is open in a
    fraction ``sparsity`` of the cells on average: the view is binary with about that fraction of ones.

    Returns
    -------
    accessible : (n, n_peaks) float64 of 0 and 1
    probability : (n, n_peaks)
    """
    latent = np.asarray(latent, np.float64)
    n, q = latent.shape
    if not 0 < sparsity < 1:
        raise ValueError(f"sparsity (the fraction of open peaks) must lie in (0, 1), got {sparsity}")
    rng = as_rng(seed)
    logits = 2.0 * latent @ rng.standard_normal((q, check_count(n_peaks, "n_peaks")))  # [n, K]
    sample = logits[rng.permutation(n)[:_OFFSET_ROWS]]
    offset = np.full(n_peaks, np.log(sparsity / (1 - sparsity)))  # [K]
    for _ in range(20):  # Newton on mean_n sigma(c + h_n) = sparsity, per peak (monotone, converges fast)
        p = expit(offset + sample)
        gap = p.mean(0) - sparsity  # [K]
        if np.max(np.abs(gap)) < 1e-4 * sparsity:
            break
        offset -= gap / np.maximum((p * (1 - p)).mean(0), 1e-12)
    probability = expit(offset + logits)
    return (rng.random((n, n_peaks)) < probability).astype(np.float64), probability


def single_cell_simulation(n_cells: int = 1000, n_genes: int = 500, n_peaks: int = 1000, n_branches: int = 2,
                           latent_dim: int = 5, second_view: str = "accessibility", dispersion: float = 5.0,
                           sparsity: float = 0.1, noise: float = 0.5, seed=0) -> AlignmentProblem:
    """Paired single-cell-like views of one population on a branching trajectory.

    The cells (:func:`branching_trajectory`: a trunk and ``n_branches`` branches, the segment the cell
    type) are seen twice: ``"rna"``, negative-binomial counts of ``n_genes`` genes (:func:`count_view`);
    and ``"atac"``, binary accessibility of ``n_peaks`` peaks with about ``sparsity`` of them open
    (:func:`accessibility_view`), or, with ``second_view="gaussian"``, ``"protein"``: ``n_peaks`` Gaussian
    features, a random linear map of the latent point plus noise of standard deviation ``noise``. The two
    views' maps are independent draws: they share the cells, nothing else. Memory and time are linear
    in the number of cells (about ``n_cells * (n_genes + 2 n_peaks)`` floats).

    Returns
    -------
    AlignmentProblem paired row by row (truth = identity), labels = the cell types in each view.

    >>> p = single_cell_simulation(50, n_genes=20, n_peaks=30, seed=0)
    >>> p.views.names, p.views.n_features
    (('rna', 'atac'), {'rna': 20, 'atac': 30})
    """
    if second_view not in ("accessibility", "gaussian"):
        raise ValueError(f"second_view must be 'accessibility' or 'gaussian', got {second_view!r}")
    seeds = as_rng(seed).integers(0, 2**63 - 1, 3)
    latent, _, cell_type = branching_trajectory(n_cells, n_branches, latent_dim, seed=seeds[0])
    counts, _ = count_view(latent, n_genes, dispersion, seed=seeds[1])
    if second_view == "accessibility":
        second, _ = accessibility_view(latent, n_peaks, sparsity, seed=seeds[2])
        name = "atac"
    else:
        rng = as_rng(seeds[2])
        p = check_count(n_peaks, "n_peaks")
        second = latent @ (rng.standard_normal((latent_dim, p)) / np.sqrt(latent_dim)) + noise * rng.standard_normal(
            (latent.shape[0], p))
        name = "protein"
    return AlignmentProblem.paired({"rna": counts, name: second}, labels=cell_type, name="single_cell_simulation")
