"""Unsupervised correspondences between two views: where MAD starts when no anchor is given.

``"gromov_wasserstein"``: the entropic Gromov-Wasserstein coupling T (Peyre, Cuturi & Solomon 2016;
:func:`bayesalign.transport.gromov_wasserstein_coupling`) of the views' within-view Euclidean
distances (standardised columns, each matrix divided by its largest entry); the pairs (i, j) that
are each other's argmax, scored n T_ij in (0, 1]. ``"local_patterns"``: the local-pattern
correspondence of Wang, Krafft & Mahadevan (2011, section 5.3.4), scored by its weights.
``"subspace_procrustes"``: the permutation and the two-dimensional subspaces of the views' leading
principal components that best agree under a rotation (:func:`subspace_procrustes`), which
within-view distances cannot see when each view also has a private signal.

Within-view distances do not change when a view is reflected, so Gromov-Wasserstein cannot tell a
correspondence from its mirror images and ends in whichever its start leads to.
:func:`reflection_starts` gives one start per reflection of the leading principal axes; MAD fits
its model on the pairs of each and keeps the one its bound prefers (``MAD.fit``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

from .data import check_view
from .matching import mutual_nearest, sinkhorn, sinkhorn_marginals
from .transport import gromov_wasserstein_coupling

__all__ = ["BOOTSTRAPS", "SubspaceProcrustes", "reflection_starts", "subspace_procrustes", "unsupervised_pairs"]

BOOTSTRAPS = ("gromov_wasserstein", "local_patterns", "subspace_procrustes")


def _standardised(view) -> np.ndarray:
    Y = np.asarray(view, np.float64)
    return (Y - Y.mean(0)) / np.where(Y.std(0) > 0, Y.std(0), 1.0)


def reflection_starts(view_a, view_b, n_axes: int = 2, temperature: float = 0.05):
    """One starting coupling per reflection of view b's ``n_axes`` leading principal axes: list of
    ``(signs, coupling (n_a, n_b))``, ``2 ** n_axes`` of them, signs (+1, +1, ...) first.

    Each view's standardised rows are projected on their leading principal axes (unit variance
    per axis); the start for the signs s is the entropic transport plan (:func:`sinkhorn` at
    ``temperature`` times the largest cost, rows summing to 1) of the squared distances between
    the projections of a and those of b with each axis multiplied by its sign. The axes' order and
    signs are arbitrary per view, which is why every sign pattern is tried.

    >>> t = np.linspace(0.0, 1.0, 6)[:, None]
    >>> starts = reflection_starts(np.hstack([t, t ** 2]), np.hstack([-t, t ** 2]), n_axes=1)
    >>> [signs for signs, _ in starts]
    [(1,), (-1,)]
    >>> sorted(start.argmax(1).tolist() for _, start in starts)   # the right order and its mirror image
    [[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0]]
    """
    from itertools import product

    if isinstance(n_axes, bool) or not isinstance(n_axes, (int, np.integer)) or n_axes < 1:
        raise ValueError(f"n_axes must be a positive int, got {n_axes!r}")
    projections = []
    for name, view in (("view_a", view_a), ("view_b", view_b)):
        Z = _standardised(check_view(view, name))  # a hole would stop the SVD with no word of where
        k = min(int(n_axes), *Z.shape)
        U, s, _ = np.linalg.svd(Z - Z.mean(0), full_matrices=False)
        P = U[:, :k] * s[:k]  # [n, k] principal scores
        projections.append(P / np.where(P.std(0) > 0, P.std(0), 1.0))
    k = min(projections[0].shape[1], projections[1].shape[1])
    starts = []
    for signs in product((1, -1), repeat=k):
        C = cdist(projections[0][:, :k], projections[1][:, :k] * np.array(signs), "sqeuclidean")  # [n_a, n_b]
        starts.append((signs, sinkhorn(C, temperature=temperature * max(float(C.max()), 1e-12)).marginals))
    return starts


class SubspaceProcrustes(NamedTuple):
    """The result of :func:`subspace_procrustes`."""

    assignment: np.ndarray  # (m, 2) pairs (row of a, row of b) of the optimal assignment; m = min(n_a, n_b)
    coordinates_a: np.ndarray  # (n_a, 2) view a in the found shared plane
    coordinates_b: np.ndarray  # (n_b, 2) view b in it, rotated onto a's
    correlation: float  # mean of the two canonical correlations of the assigned pairs' coordinates, in [0, 1]
    n_components: int  # principal components searched per view


def _whitened_components(view, n_components: int | None, min_variance: float) -> np.ndarray:
    """The leading principal scores of the standardised view, each scaled to unit variance: [n, k]; k =
    ``n_components`` or the number of components holding at least ``min_variance`` of the variance,
    clipped to [2, 3]."""
    Z = _standardised(view)
    U, s, _ = np.linalg.svd(Z - Z.mean(0), full_matrices=False)
    if n_components is None:
        share = s ** 2 / max(float(np.sum(s ** 2)), np.finfo(float).tiny)
        n_components = int(np.clip(np.sum(share >= min_variance), 2, 3))
    k = min(int(n_components), U.shape[1])
    return U[:, :k] * np.sqrt(U.shape[0])


def _plane_bases(k: int, n_planes: int) -> np.ndarray:
    """Orthonormal bases [p, k, 2] of the candidate planes of R^k: R^2 itself (k = 2), or the planes
    perpendicular to ``n_planes`` normals spread evenly over a hemisphere (Fibonacci lattice, k = 3)."""
    if k == 2:
        return np.eye(2)[None]
    i = np.arange(n_planes) + 0.5
    z = i / n_planes  # heights uniform on the hemisphere: equal areas
    phi = np.pi * (1.0 + np.sqrt(5.0)) * i  # golden-angle turns
    normals = np.column_stack([np.sqrt(1.0 - z ** 2) * np.cos(phi), np.sqrt(1.0 - z ** 2) * np.sin(phi), z])
    bases = []
    for n in normals:
        Q, _ = np.linalg.qr(np.column_stack([n, np.eye(3)]))  # first column +-n, the next two span its plane
        bases.append(Q[:, 1:3])
    return np.stack(bases)


def _cheapest_assignment(Pa: np.ndarray, Pb: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """The one-to-one assignment of the rows of Pa to those of Pb with the least total squared distance:
    (mean squared distance of its pairs, rows, cols)."""
    C = cdist(Pa, Pb, "sqeuclidean")
    rows, cols = linear_sum_assignment(C)
    return float(C[rows, cols].mean()), rows, cols


def _canonical_correlations(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Canonical correlations of paired rows of X [m, p] and Y [m, q], largest first."""
    Qx = np.linalg.qr(X - X.mean(0))[0]
    Qy = np.linalg.qr(Y - Y.mean(0))[0]
    return np.clip(np.linalg.svd(Qx.T @ Qy, compute_uv=False), 0.0, 1.0)


def subspace_procrustes(view_a, view_b, n_components: int | None = None, min_variance: float = 0.01,
                        n_planes: int = 300, n_plane_pairs: int = 20, angle_step: float = 4.0,
                        n_refine: int = 10) -> SubspaceProcrustes:
    r"""Unsupervised correspondence of two views that share a two-dimensional signal, each with its own private ones.

    Each view is whitened to its k leading principal components (k in {2, 3}: those holding at
    least ``min_variance`` of the variance, or ``n_components``), Z_a [n_a, k] and Z_b [n_b, k].
    Two views generated linearly from a shared latent plane (and, each, private directions) are then
    each a rotation of their latent, so the shared plane is a plane of a's components (orthonormal
    basis U [k, 2]), one of b's (V), and a rotation or reflection R between them. The search
    minimises, over U, V, R and one-to-one assignments pi,

    .. math:: \min_{\pi, U, V, R} \sum_i \lVert z^a_i U - z^b_{\pi(i)} V R^\top \rVert^2,

    the views' least-squares disagreement in the shared plane: Wasserstein-Procrustes (Grave,
    Joulin & Berthet 2019) restricted to a subspace. With n_a = n_b every plane of a whitened view
    carries the same total variance, so this maximises the sum of the two leading canonical
    correlations of the assigned pairs, close to 2 when the shared signal is clean. Alternating
    the two exact steps (the assignment for fixed planes; the planes from the top-2 singular
    vectors of Z_a^T Pi Z_b for a fixed assignment) barely moves from where it starts (with free
    pairs, every rotation nearly fits itself), so the start is searched: the planes of each view
    (R^2 itself for k = 2; the planes normal to ``n_planes`` directions on a hemisphere for k = 3)
    are screened by a rotation-invariant signature, the sorted distances of the projected rows from
    the origin (the 1-D Wasserstein distance of these distributions), and for the
    ``n_plane_pairs`` closest pairs every rotation
    and reflection on a grid of ``angle_step`` degrees is scored by its exact assignment; the
    ``n_refine`` best are refined by the alternation. Within-view distances (Gromov-Wasserstein)
    compare all k components at once, so a private signal in either view confounds them; this does
    not.

    With n_a != n_b the smaller view's rows are each assigned. What tells the right pairing from
    its mirror images, when the shared signal's shape is symmetric, is the rows' own
    coordinates, so the search runs on every row (random subsets of the views would compare
    distributions only): about 2 n_plane_pairs 360 / angle_step dense (n_a, n_b) assignments,
    seconds at 100 rows, meant for the few hundred rows where MAD needs a bootstrap.

    Examples
    --------
    Two noisy linear views of a figure eight, each with its own private sinusoid, rows of b shuffled:

    >>> t = 2 * np.pi * np.arange(60) / 60
    >>> rng = np.random.default_rng(0)
    >>> a = np.column_stack([np.cos(t), np.sin(2 * t), np.sin(3 * t)]) @ rng.standard_normal((3, 8))
    >>> order = rng.permutation(60)
    >>> b = np.column_stack([np.cos(t), np.sin(2 * t), np.cos(4 * t)])[order] @ rng.standard_normal((3, 8))
    >>> found = subspace_procrustes(a, b)
    >>> bool(np.mean(order[found.assignment[:, 1]] == found.assignment[:, 0]) > 0.9), round(found.correlation, 3)
    (True, 1.0)
    """
    for name, value in (("n_planes", n_planes), ("n_plane_pairs", n_plane_pairs), ("n_refine", n_refine)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not 0 < float(angle_step) <= 90:
        raise ValueError(f"angle_step must be in (0, 90] degrees, got {angle_step!r}")
    if n_components is not None and n_components not in (2, 3):
        raise ValueError(f"n_components must be 2 or 3 (the search is exhaustive up to 3 components), "
                         f"got {n_components!r}")
    for name, view in (("view_a", view_a), ("view_b", view_b)):
        if not np.all(np.isfinite(np.asarray(view, np.float64))):
            raise ValueError(f"subspace_procrustes: {name} has missing or infinite entries; fill them first "
                             "(MAD reads a hole as its column's mean)")
    Za = _whitened_components(view_a, n_components, min_variance)  # [n_a, k]
    Zb = _whitened_components(view_b, n_components, min_variance)  # [n_b, k]
    k = min(Za.shape[1], Zb.shape[1])
    if k < 2:
        raise ValueError("subspace_procrustes needs views with at least 2 non-constant columns")
    Za, Zb = Za[:, :k], Zb[:, :k]
    bases = _plane_bases(k, int(n_planes))  # [p, k, 2]
    # rotation-invariant signature of each plane: the sorted radii of the rows projected on it, resampled
    # to a common length so that views of different sizes compare
    grid = np.linspace(0.0, 1.0, 64)
    sig = [np.stack([np.quantile(np.linalg.norm(S @ B, axis=1), grid) for B in bases]) for S in (Za, Zb)]
    gap = cdist(sig[0], sig[1], "sqeuclidean")  # [p, p]: squared 1-D Wasserstein distances (times 64)
    plane_pairs = np.argsort(gap, axis=None, kind="stable")[:int(n_plane_pairs)]
    angles = np.radians(np.arange(0.0, 360.0, float(angle_step)))
    scored = []
    for flat in plane_pairs:
        pa, pb = np.unravel_index(flat, gap.shape)
        Pa, Pb = Za @ bases[pa], Zb @ bases[pb]  # [n_a, 2], [n_b, 2]
        for reflect in (1.0, -1.0):
            for angle in angles:
                c, s = np.cos(angle), np.sin(angle)
                R = np.array([[c, -s * reflect], [s, c * reflect]])  # rotation, or reflection then rotation
                scored.append((_cheapest_assignment(Pa, Pb @ R.T)[0], bases[pa], bases[pb] @ R.T))
    scored.sort(key=lambda item: item[0])
    best = None
    for _, U, V in scored[:int(n_refine)]:
        previous = None
        for _ in range(50):  # alternate the assignment and the planes (Procrustes on the assigned pairs)
            gap_sq, rows, cols = _cheapest_assignment(Za @ U, Zb @ V)
            if best is None or gap_sq < best[0]:
                best = (gap_sq, U, V)
            if previous is not None and np.array_equal(cols, previous):
                break
            previous = cols
            W, _, Zt = np.linalg.svd(Za[rows].T @ Zb[cols])
            U, V = W[:, :2], Zt[:2].T
    _, U, V = best
    Xa, Xb = Za @ U, Zb @ V  # [n_a, 2], [n_b, 2]: the shared plane, b rotated onto a
    _, rows, cols = _cheapest_assignment(Xa, Xb)
    correlation = float(_canonical_correlations(Xa[rows], Xb[cols]).mean())
    return SubspaceProcrustes(np.column_stack([rows, cols]).astype(np.int64), Xa, Xb, correlation, k)


def _mutual_argmax_pairs(T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (i, j) of a coupling T [n_a, n_b] (summing to 1) that are each other's argmax, scored n T_ij."""
    rows, cols = np.nonzero(mutual_nearest(-T))
    return np.column_stack([rows, cols]), T[rows, cols] * min(T.shape)


def unsupervised_pairs(view_a, view_b, method: str = "gromov_wasserstein", views=("a", "b"), init=None):
    """(pairs (m, 2), scores (m,)): candidate correspondences of two views found without any anchor.

    Dense (n, n) within-view distances: meant for a few hundred rows. ``init``: the coupling
    Gromov-Wasserstein starts from (e.g. one of :func:`reflection_starts`).

    >>> x = np.array([0.0, 1.0, 3.0, 7.0])[:, None]
    >>> pairs, scores = unsupervised_pairs(x, -x[::-1])   # b is a mirrored, reversed copy of a
    >>> sorted(map(tuple, pairs.tolist()))
    [(0, 3), (1, 2), (2, 1), (3, 0)]
    """
    view_a, view_b = check_view(view_a, "view_a"), check_view(view_b, "view_b")  # a hole: say where it is
    if method == "gromov_wasserstein":
        dist = []
        for view in (view_a, view_b):
            Z = _standardised(view)
            D = cdist(Z, Z)  # [n, n]: GW compares within-view distances
            dist.append(D / max(float(D.max()), np.finfo(float).tiny))
        return _mutual_argmax_pairs(gromov_wasserstein_coupling(*dist, init=init))  # coupling [n_a, n_b]
    if method == "subspace_procrustes":
        if init is not None:
            raise ValueError("init (a starting coupling) is for bootstrap='gromov_wasserstein' only")
        found = subspace_procrustes(view_a, view_b)
        # the entropic plan of the squared distances in the found plane, at the typical nearest-neighbour
        # distance: its mutual argmax pairs and n T_ij as their scores, as for Gromov-Wasserstein
        C = cdist(found.coordinates_a, found.coordinates_b, "sqeuclidean")  # [n_a, n_b]
        T, _ = sinkhorn_marginals(C, max(float(np.median(C.min(1))), 1e-12))  # scores need ~1e-2 only
        pairs, scores = _mutual_argmax_pairs(T / max(float(T.sum()), np.finfo(float).tiny))
        return pairs, np.minimum(scores, 1.0)
    if method == "local_patterns":
        if init is not None:
            raise ValueError("init (a starting coupling) is for bootstrap='gromov_wasserstein' only")
        from .spectral import local_pattern_correspondence

        corr = local_pattern_correspondence(view_a, view_b, views=tuple(views))
        return corr.pairs, corr.weights_or_ones()
    raise ValueError(f"bootstrap must be one of {BOOTSTRAPS}, got {method!r}")
