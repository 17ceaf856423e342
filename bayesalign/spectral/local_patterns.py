"""Unsupervised correspondences by local pattern matching (Wang, Krafft & Mahadevan 2011, section 5.3.4).

With no anchors, two views described by different features cannot be compared row
against row. Their *local geometry* can: each point is described by the
``(k+1) x (k+1)`` matrix of Euclidean distances between itself and its ``k``
nearest neighbours (its *local pattern*), which does not depend on the coordinate
frame. Two patterns are compared after the best rescaling of one onto the other
(the section's Theorem) and the best ordering of the neighbours (a minimum over the
``k!`` permutations):

    dist(R_a, R_b) = min_h min(|| {R_b}_h - k_1 R_a ||_F, || R_a - k_2 {R_b}_h ||_F),
    k_1 = tr(R_a' {R_b}_h) / tr(R_a' R_a),   k_2 = tr({R_b}_h' R_a) / tr({R_b}_h' {R_b}_h),
    W^(a,b)(i, j) = exp(-dist(R_a(i), R_b(j)) / delta^2).

Both terms are minimised by the permutation that maximises the inner product
``<R_a, {R_b}_h>`` (the norms do not depend on h), so the search is one batched
matrix product of the patterns of view a against all permuted patterns of view b
followed by a max over h. The permutation index array is built once per ``k``.

The sparse ``Correspondence`` returned by :func:`local_pattern_correspondence`
can be given as anchors to any anchored method (joint Laplacian, linear,
Procrustes), which then runs with no given correspondence at all;
:class:`LocalPatternAlignment` does exactly that.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
from sklearn.base import clone

from ..data import AlignmentProblem, Correspondence, LatentEmbedding, check_view
from ..graph import knn_graph
from ._base import SpectralAlignment

__all__ = [
    "LocalPatternAlignment",
    "local_pattern_correspondence",
    "local_pattern_distance",
    "local_pattern_distances",
    "local_patterns",
]

#: Largest neighbourhood for which the exact k! search is allowed (8! = 40320 orderings).
MAX_PATTERN_NEIGHBORS = 8


@functools.lru_cache(maxsize=8)
def _permuted_triangle_index(k: int) -> np.ndarray:
    """Index array [k!, m] with m = (k+1)k/2: entry (h, e) is where the upper-triangle entry e
    of the pattern {R}_h (neighbours reordered by permutation h, centre fixed) lies in the
    upper-triangle vector of R. Built once per k and reused by every comparison."""
    rows, cols = np.triu_indices(k + 1, 1)  # [m], [m]
    position = np.full((k + 1, k + 1), -1, dtype=np.int64)
    position[rows, cols] = np.arange(rows.size)
    position[cols, rows] = np.arange(rows.size)
    perms = np.array([(0,) + tuple(p + 1 for p in q) for q in itertools.permutations(range(k))],
                     dtype=np.int64)  # [k!, k+1], node u of {R}_h is node perms[h, u] of R
    index = position[perms[:, rows], perms[:, cols]]  # [k!, m]
    index.setflags(write=False)
    return index


@functools.lru_cache(maxsize=8)
def _inverse_permutation_index(k: int) -> np.ndarray:
    """inverse[h] is the index of the inverse of permutation h (same order as the index array)."""
    perms = _neighbour_permutations(k)  # [k!, k]
    inverse_perms = np.argsort(perms, axis=1)
    lookup = {tuple(p): i for i, p in enumerate(perms.tolist())}
    inverse = np.array([lookup[tuple(q)] for q in inverse_perms.tolist()], dtype=np.int64)
    inverse.setflags(write=False)
    return inverse


def _neighbour_permutations(k: int) -> np.ndarray:
    """The k! orderings of the neighbours (centre excluded), in the order of the index array."""
    return np.array(list(itertools.permutations(range(k))), dtype=np.int64)  # [k!, k]


def _check_n_neighbors(n_neighbors, n: int, view: str) -> int:
    if isinstance(n_neighbors, bool) or not isinstance(n_neighbors, (int, np.integer)):
        raise TypeError(f"n_neighbors must be an integer, got {n_neighbors!r}")
    k = int(n_neighbors)
    if not 1 <= k <= MAX_PATTERN_NEIGHBORS:
        raise ValueError(f"n_neighbors must be in [1, {MAX_PATTERN_NEIGHBORS}] for the exact search over "
                         f"the k! orderings of a neighbourhood, got {k}")
    if k >= n:
        raise ValueError(f"view {view!r}: n_neighbors={k} needs at least {k + 1} rows, got {n}")
    return k


def local_patterns(X, n_neighbors: int = 6, *, view: str = "X") -> tuple[np.ndarray, np.ndarray]:
    """Local distance patterns R_{X(i,.)} of every row of one view (section 5.3.4).

    Parameters
    ----------
    X : array (n, p)
    n_neighbors : int
        k; the pattern of row i is the (k+1) x (k+1) Euclidean distance matrix of
        z_1 = X(i, .) and its k nearest neighbours z_2..z_{k+1} (nearest first).
    view : str
        Name used in error messages.

    Returns
    -------
    patterns : array (n, k+1, k+1)
    neighbors : int array (n, k)
        The neighbours' row indices, nearest first.

    Raises
    ------
    ValueError
        If a row and all its k nearest neighbours coincide (duplicate points): that
        pattern is all zeros and no rescaling can be defined for it.

    Examples
    --------
    >>> R, nbrs = local_patterns([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], n_neighbors=2)
    >>> R[0].round(3).tolist(), nbrs[0].tolist()
    ([[0.0, 1.0, 2.0], [1.0, 0.0, 2.236], [2.0, 2.236, 0.0]], [1, 2])
    """
    X = check_view(X, view)
    k = _check_n_neighbors(n_neighbors, X.shape[0], view)
    # row i of the directed k-NN graph holds exactly the k neighbours of i (itself excluded by
    # index, so a duplicate point is a neighbour at distance ~0); order them nearest first
    G = knn_graph(X, k, mode="distance", symmetrize=None, name=view)  # [n, n], k entries per row
    G.sort_indices()
    cols = G.indices.reshape(-1, k)  # [n, k]
    order = np.argsort(G.data.reshape(-1, k), axis=1, kind="stable")
    neighbors = np.take_along_axis(cols, order, axis=1).astype(np.int64)  # [n, k]
    rows = np.arange(X.shape[0])
    nodes = np.concatenate([rows[:, None], neighbors], axis=1)  # [n, k+1]
    Z = X[nodes]  # [n, k+1, p]
    patterns = np.sqrt(np.maximum(((Z[:, :, None, :] - Z[:, None, :, :]) ** 2).sum(-1), 0.0))  # [n, k+1, k+1]
    norms = np.sqrt((patterns**2).sum(axis=(1, 2)))
    if (norms == 0).any():
        bad = int(np.argmax(norms == 0))
        raise ValueError(f"view {view!r}: row {bad} and its {k} nearest neighbours coincide (duplicate "
                         "points), so its local pattern is all zeros; remove duplicate rows or increase "
                         "n_neighbors")
    return patterns, neighbors


def _triangle(patterns: np.ndarray) -> np.ndarray:
    """Upper-triangle vectors [n, m] of symmetric patterns [n, k+1, k+1]; ||R||_F^2 = 2 ||vec||^2."""
    rows, cols = np.triu_indices(patterns.shape[-1], 1)
    return np.ascontiguousarray(patterns[:, rows, cols])


def _pattern_distances(A: np.ndarray, B: np.ndarray, k: int, *, candidates: np.ndarray | None = None,
                       batch_size: int = 2**22) -> tuple[np.ndarray, np.ndarray]:
    """Core of section 5.3.4 on upper-triangle vectors A [n_a, m], B [n_b, m].

    Returns the distances [n_a, n_b] (or [n_a, c] for the given candidate columns
    ``candidates`` [n_a, c]) and the index h of the best permutation of each pair.
    ``batch_size`` bounds the number of floats of the temporary inner-product block.
    """
    index = _permuted_triangle_index(k)  # [k!, m]
    n_perm, m = index.shape
    norm_a = np.sqrt(2.0) * np.linalg.norm(A, axis=1)  # Frobenius norms of the full patterns [n_a]
    norm_b = np.sqrt(2.0) * np.linalg.norm(B, axis=1)  # [n_b]
    n_a, n_b = A.shape[0], B.shape[0]
    width = n_b if candidates is None else candidates.shape[1]
    dist = np.empty((n_a, width))
    best = np.empty((n_a, width), dtype=np.int64)

    if candidates is None:
        # chunk sizes: ca rows of A against cb rows of B with all k! orderings
        cb = max(1, min(n_b, batch_size // (n_perm * m)))
        for b0 in range(0, n_b, cb):
            b1 = min(n_b, b0 + cb)
            Bp = B[b0:b1][:, index]  # [cb, k!, m] every ordering of every pattern of this block
            Bp_flat = Bp.reshape(-1, m)  # [cb * k!, m]
            ca = max(1, min(n_a, batch_size // ((b1 - b0) * n_perm)))
            for a0 in range(0, n_a, ca):
                a1 = min(n_a, a0 + ca)
                inner = (A[a0:a1] @ Bp_flat.T).reshape(a1 - a0, b1 - b0, n_perm)  # [ca, cb, k!]
                h = inner.argmax(axis=-1)  # [ca, cb]
                Bh = Bp[np.arange(b1 - b0)[None, :], h]  # [ca, cb, m] best ordering of each pattern
                dist[a0:a1, b0:b1] = _residual(A[a0:a1, None, :], Bh, norm_a[a0:a1, None], norm_b[None, b0:b1])
                best[a0:a1, b0:b1] = h
        return dist, best

    # Few candidates per row: permute the row's own pattern instead of every candidate's,
    # <{a}_s, b> = <a, {b}_(s^-1)>, so each row costs one (k! x m) @ (m x c) product and only
    # the c candidate vectors are gathered.
    inverse = _inverse_permutation_index(k)  # [k!]
    c = candidates.shape[1]
    ca = max(1, min(n_a, batch_size // (n_perm * (m + c))))
    for a0 in range(0, n_a, ca):
        a1 = min(n_a, a0 + ca)
        cand = candidates[a0:a1]  # [ca, c]
        Ap = A[a0:a1][:, index]  # [ca, k!, m] every ordering of the row's pattern
        Bc = B[cand]  # [ca, c, m]
        inner = np.matmul(Ap, Bc.transpose(0, 2, 1))  # [ca, k!, c]
        h = inverse[inner.argmax(axis=1)]  # [ca, c] the matching ordering of the candidate
        Bh = np.take_along_axis(Bc, index[h], axis=-1)  # [ca, c, m]
        dist[a0:a1] = _residual(A[a0:a1, None, :], Bh, norm_a[a0:a1, None], norm_b[cand])
        best[a0:a1] = h
    return dist, best


def _residual(a, bh, norm_a, norm_b) -> np.ndarray:
    """min(||{R_b}_h - k_1 R_a||_F, ||R_a - k_2 {R_b}_h||_F) with the Theorem's k_1, k_2, on
    upper-triangle vectors (the factor sqrt(2) restores the Frobenius norm of the full matrices)."""
    inner = 2.0 * (a * bh).sum(-1)  # tr(R_a' {R_b}_h)
    k1 = inner / norm_a**2
    k2 = inner / norm_b**2
    dist1 = np.sqrt(2.0) * np.linalg.norm(bh - k1[..., None] * a, axis=-1)
    dist2 = np.sqrt(2.0) * np.linalg.norm(a - k2[..., None] * bh, axis=-1)
    return np.minimum(dist1, dist2)


def local_pattern_distance(Ra, Rb) -> tuple[float, np.ndarray]:
    """The distance of section 5.3.4 between two local patterns, and the best neighbour ordering.

    Parameters
    ----------
    Ra, Rb : arrays (k+1, k+1)
        Symmetric distance matrices, row/column 0 the centre point.

    Returns
    -------
    dist : float
        min over the k! orderings h of min(dist_1(h), dist_2(h)).
    order : int array (k,)
        The best ordering: neighbour u of ``Ra`` (1-based position u+1) matches
        neighbour ``order[u]`` of ``Rb``.

    Examples
    --------
    >>> Ra = np.array([[0., 1., 2.], [1., 0., 2.5], [2., 2.5, 0.]])
    >>> Rb = 3 * Ra[np.ix_([0, 2, 1], [0, 2, 1])]      # scaled, neighbours swapped
    >>> d, order = local_pattern_distance(Ra, Rb)
    >>> round(d, 12), order.tolist()
    (0.0, [1, 0])
    """
    Ra, Rb = (np.asarray(R, dtype=np.float64) for R in (Ra, Rb))
    if Ra.ndim != 2 or Ra.shape[0] != Ra.shape[1] or Ra.shape != Rb.shape:
        raise ValueError(f"patterns must be two square matrices of one shape, got {Ra.shape} and {Rb.shape}")
    k = Ra.shape[0] - 1
    _check_n_neighbors(k, k + 1, "pattern")
    for name, R in (("Ra", Ra), ("Rb", Rb)):
        if not np.allclose(R, R.T) or not np.all(np.isfinite(R)):
            raise ValueError(f"{name} must be a finite symmetric distance matrix")
        if not np.any(R):
            raise ValueError(f"{name} is all zeros (coincident points): no rescaling is defined")
    dist, best = _pattern_distances(_triangle(Ra[None]), _triangle(Rb[None]), k)
    return float(dist[0, 0]), _neighbour_permutations(k)[best[0, 0]] if k else np.zeros(0, np.int64)


def _view_scale(patterns: np.ndarray) -> float:
    """Root mean square of the off-diagonal pattern entries: the view's length unit."""
    k1 = patterns.shape[-1]
    return float(np.sqrt((patterns**2).sum() / (patterns.shape[0] * k1 * (k1 - 1))))


def local_pattern_distances(Xa, Xb, n_neighbors: int = 6, *, normalize: bool = True,
                            prefilter: int | None = None, batch_size: int = 2**22,
                            views=("a", "b")) -> dict:
    """All-pairs local-pattern distances between two views (section 5.3.4).

    The cost is n_a * n_b * k! * (k+1)k/2 multiply-adds, done as blocked matrix
    products whose temporaries hold at most ``batch_size`` floats (the full
    n_a x n_b x k! tensor is never formed). k = 6 (720 orderings) and a few hundred
    points per view take about a second on one core.

    Parameters
    ----------
    Xa, Xb : arrays (n_a, p_a), (n_b, p_b)
    n_neighbors : int
        k, at most 8.
    normalize : bool
        Divide each view's patterns by the view's own length unit (root mean square of
        its pattern entries) before comparing. The chapter's distance is measured in
        the units of the smaller of the two patterns, so without this a global scale
        between the views changes every distance (and ``delta`` would have to follow);
        with it, the distances are invariant to rotating, translating and scaling
        either view. ``False`` gives the chapter's raw numbers.
    prefilter : int, optional
        Only compare each point of view a with the ``prefilter`` points of view b whose
        permutation-invariant signatures (the sorted pattern entries, unit norm) are
        closest. Because <R_a, {R_b}_h> <= <sort(R_a), sort(R_b)> for every ordering h
        (rearrangement inequality), the signature gives a lower bound on the distance; a
        point's result is *certified* exact when its m-th best signature bound is no
        smaller than the best distance found. ``None`` (default) compares all pairs.
    batch_size : int
        Maximum number of floats in one temporary block.
    views : (str, str)
        Names of the two views (for error messages).

    Returns
    -------
    dict with
        ``distances`` (n_a, n_b) float array (``inf`` for pairs the prefilter skipped),
        ``orderings`` (n_a, n_b) index of the best ordering (into ``itertools.permutations(range(k))``),
        ``neighbors_a``, ``neighbors_b`` (n, k) neighbour indices,
        ``certified`` (n_a,) bool, whether each row's best match is exact (all True without prefilter).
    """
    view_a, view_b = views
    Ra, nbrs_a = local_patterns(Xa, n_neighbors, view=view_a)
    Rb, nbrs_b = local_patterns(Xb, n_neighbors, view=view_b)
    k = Ra.shape[-1] - 1
    if normalize:
        Ra = Ra / _view_scale(Ra)
        Rb = Rb / _view_scale(Rb)
    A, B = _triangle(Ra), _triangle(Rb)  # [n_a, m], [n_b, m]
    n_a, n_b = A.shape[0], B.shape[0]
    if prefilter is None or prefilter >= n_b:
        dist, best = _pattern_distances(A, B, k, batch_size=batch_size)
        return {"distances": dist, "orderings": best, "neighbors_a": nbrs_a, "neighbors_b": nbrs_b,
                "certified": np.ones(n_a, dtype=bool)}
    prefilter = int(prefilter)
    if prefilter < 1:
        raise ValueError(f"prefilter must be a positive number of candidates or None, got {prefilter}")
    # Permutation-invariant signature: sorted entries. Lower bound on dist from the bound on the
    # inner product: with c <= s, dist >= min(|a|, |b|) * sqrt(1 - (s / (|a||b|))^2).
    sig_a = np.sort(A, axis=1)
    sig_b = np.sort(B, axis=1)
    norm_a = np.linalg.norm(A, axis=1)
    norm_b = np.linalg.norm(B, axis=1)
    cos_bound = np.clip((sig_a @ sig_b.T) / np.outer(norm_a, norm_b), 0.0, 1.0)  # [n_a, n_b]
    lower = np.sqrt(2.0) * np.minimum.outer(norm_a, norm_b) * np.sqrt(1.0 - cos_bound**2)
    candidates = np.argpartition(lower, prefilter - 1, axis=1)[:, :prefilter]  # [n_a, prefilter]
    cand_dist, cand_best = _pattern_distances(A, B, k, candidates=candidates, batch_size=batch_size)
    dist = np.full((n_a, n_b), np.inf)
    best = np.full((n_a, n_b), -1, dtype=np.int64)
    rows = np.arange(n_a)[:, None]
    dist[rows, candidates] = cand_dist
    best[rows, candidates] = cand_best
    skipped = np.ones((n_a, n_b), dtype=bool)
    skipped[rows, candidates] = False
    # certified: no skipped column could beat the best distance found
    smallest_skipped = np.where(skipped, lower, np.inf).min(axis=1)
    certified = smallest_skipped >= cand_dist.min(axis=1)
    return {"distances": dist, "orderings": best, "neighbors_a": nbrs_a, "neighbors_b": nbrs_b,
            "certified": certified}


def local_pattern_correspondence(Xa, Xb, n_neighbors: int = 6, delta: float | None = None, *,
                                 n_candidates: int = 1, mutual: bool = True, normalize: bool = True,
                                 prefilter: int | None = None, views=("a", "b"),
                                 batch_size: int = 2**22) -> Correspondence:
    """Correspondences between two views inferred from their local geometry alone (section 5.3.4).

    W^(a,b)(i, j) = exp(-dist(R_a(i), R_b(j)) / delta^2) is dense in the chapter;
    here only the most likely pairs are kept, so that the result is a sparse,
    weighted :class:`~bayesalign.data.Correspondence` usable as anchors.

    Parameters
    ----------
    Xa, Xb : arrays (n_a, p_a), (n_b, p_b)
        The two views; their features need not be comparable.
    n_neighbors : int
        k, the neighbourhood size of a pattern (k! orderings are searched; at most 8).
    delta : float, optional
        Width of the weight kernel. ``None`` sets delta^2 to the median distance of the
        kept pairs, so a typical kept pair gets weight exp(-1).
    n_candidates : int
        Keep, for each point, its ``n_candidates`` nearest patterns in the other view.
    mutual : bool
        Keep (i, j) only if j is among i's candidates *and* i among j's (mutual
        nearest patterns: fewer but much more reliable pairs). With ``False``, the union
        of both directions is kept.
    normalize, prefilter, batch_size
        See :func:`local_pattern_distances`.
    views : (str, str)
        Names of the two views; they name the returned correspondence.

    Returns
    -------
    Correspondence
        Pairs with weights W^(a,b)(i, j), in (0, 1].

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> Xa = rng.normal(size=(40, 3))
    >>> Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    >>> Xb = 2.5 * Xa @ Q + 1.0                        # another frame, another unit
    >>> corr = local_pattern_correspondence(Xa, Xb, n_neighbors=4, views=("a", "b"))
    >>> bool(np.mean(corr.index_a == corr.index_b) > 0.9)
    True
    """
    if isinstance(n_candidates, bool) or not isinstance(n_candidates, (int, np.integer)) or n_candidates < 1:
        raise ValueError(f"n_candidates must be a positive integer, got {n_candidates!r}")
    if delta is not None and not (np.isfinite(delta) and delta > 0):
        raise ValueError(f"delta must be a positive number, got {delta!r}")
    result = local_pattern_distances(Xa, Xb, n_neighbors, normalize=normalize, prefilter=prefilter,
                                     views=views, batch_size=batch_size)
    dist = result["distances"]  # [n_a, n_b]
    n_a, n_b = dist.shape
    ca, cb = min(int(n_candidates), n_b), min(int(n_candidates), n_a)
    # candidates in both directions; a stable sort keeps ties deterministic (lowest index first)
    top_b = np.argsort(dist, axis=1, kind="stable")[:, :ca]  # [n_a, ca] best b for each a
    top_a = np.argsort(dist, axis=0, kind="stable")[:cb, :]  # [cb, n_b] best a for each b
    from_a = np.zeros((n_a, n_b), dtype=bool)
    from_a[np.arange(n_a)[:, None], top_b] = True
    from_b = np.zeros((n_a, n_b), dtype=bool)
    from_b[top_a, np.arange(n_b)[None, :]] = True
    keep = (from_a & from_b) if mutual else (from_a | from_b)
    keep &= np.isfinite(dist)
    rows, cols = np.nonzero(keep)
    kept = dist[rows, cols]
    if delta is None:
        scale = float(np.median(kept)) if kept.size else 1.0
        delta2 = scale if scale > 0 else 1.0
    else:
        delta2 = float(delta) ** 2
    weights = np.exp(-kept / delta2)
    # exp underflows to 0 for pairs far beyond delta; a Correspondence needs positive weights
    weights = np.maximum(weights, np.finfo(np.float64).tiny)
    return Correspondence(tuple(views), rows, cols, weights)


class LocalPatternAlignment(SpectralAlignment):
    """Unsupervised alignment: anchors from local pattern matching, then any anchored method.

    Section 5.3.4: "After generating correspondence information using this approach,
    any of the previous manifold alignment algorithms work." For every pair of views,
    :func:`local_pattern_correspondence` infers weighted pairs; the problem's own anchors
    (if any) are ignored and replaced by them; a clone of ``estimator`` (e.g.
    ``JointLaplacianAlignment`` or ``LinearAlignment``) is fitted on the result.

    Parameters
    ----------
    estimator : estimator with ``fit(problem)`` and ``embedding_``
        The anchored method to run on the inferred correspondences.
    n_neighbors, delta, n_candidates, mutual, normalize, prefilter
        See :func:`local_pattern_correspondence`.

    Attributes
    ----------
    correspondences_ : dict (view_a, view_b) -> Correspondence
        The inferred anchors, for every pair of views.
    estimator_ : the fitted clone of ``estimator``
    embedding_ : LatentEmbedding
        ``estimator_.embedding_``, with ``info["anchors"] = "local patterns"``.
    """

    def __init__(self, estimator, n_neighbors: int = 6, delta: float | None = None, n_candidates: int = 1,
                 mutual: bool = True, normalize: bool = True, prefilter: int | None = None):
        self.estimator = estimator
        self.n_neighbors = n_neighbors
        self.delta = delta
        self.n_candidates = n_candidates
        self.mutual = mutual
        self.normalize = normalize
        self.prefilter = prefilter

    def _fit(self, problem: AlignmentProblem) -> LatentEmbedding:
        views = problem.views
        names = views.names
        inferred = {}
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                inferred[(a, b)] = local_pattern_correspondence(
                    views[a], views[b], self.n_neighbors, self.delta, n_candidates=self.n_candidates,
                    mutual=self.mutual, normalize=self.normalize, prefilter=self.prefilter, views=(a, b))
        self.correspondences_ = inferred
        self.estimator_ = clone(self.estimator).fit(problem.replace(anchors=list(inferred.values())))
        emb = self.estimator_.embedding_
        info = dict(emb.info, anchors="local patterns",
                    n_inferred={f"{a}-{b}": len(c) for (a, b), c in inferred.items()})
        return LatentEmbedding(means=emb.means, variances=emb.variances, covariances=emb.covariances,
                               shared_dims=emb.shared_dims, projections=emb.projections, centers=emb.centers,
                               offsets=emb.offsets, method=f"{emb.method} + local patterns", info=info)
