"""Manifold alignment by Procrustes analysis (Wang & Mahadevan, ICML 2008)."""

from __future__ import annotations

import numpy as np

from ..data import AlignmentProblem, LatentEmbedding
from ._base import SpectralAlignment, check_n_components, embed_view

__all__ = ["ProcrustesAlignment", "procrustes"]


def procrustes(source: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """Rotation/reflection ``Q``, scale ``k`` and translation ``t`` minimising ``||target - (k source Q + t)||_F``.

    Wang & Mahadevan (2008), section 2.2, step 3, with ``Y = source`` and ``X = target`` (rows
    paired): centre both on their centroids, ``U Sigma V' = SVD(Y' X)``, ``Q = U V'``,
    ``k = trace(Sigma) / trace(Y' Y)``; the translation ``t = mean(X) - k mean(Y) Q`` undoes the
    centring.

    Parameters
    ----------
    source, target : arrays (m, d), row i of one paired with row i of the other

    Returns
    -------
    Q : ndarray (d, d), orthogonal (a rotation or a reflection)
    k : float
    t : ndarray (d,)

    >>> import numpy as np
    >>> Y = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
    >>> R = np.array([[0.0, 1.0], [-1.0, 0.0]])  # 90 degrees
    >>> Q, k, t = procrustes(Y, 3.0 * Y @ R + [1.0, -1.0])
    >>> bool(np.allclose(Q, R)), round(k, 12), t.round(12).tolist()
    (True, 3.0, [1.0, -1.0])
    """
    source = np.asarray(source, dtype=np.float64)
    target = np.asarray(target, dtype=np.float64)
    if source.shape != target.shape or source.ndim != 2:
        raise ValueError(f"procrustes needs paired (m, d) arrays of one shape, got {source.shape} and "
                         f"{target.shape}")
    for name, points in (("source", source), ("target", target)):
        if not np.all(np.isfinite(points)):
            row = int(np.flatnonzero(~np.all(np.isfinite(points), axis=1))[0])
            raise ValueError(f"procrustes: the {name} points have a non-finite value in row {row}")
    mean_y, mean_x = source.mean(axis=0), target.mean(axis=0)
    Y, X = source - mean_y, target - mean_x  # [m, d]
    U, sigma, Vt = np.linalg.svd(Y.T @ X)  # Y' X = U Sigma V'
    Q = U @ Vt  # [d, d]
    norm = float(np.sum(Y * Y))  # trace(Y' Y)
    if norm == 0.0:
        raise ValueError("procrustes: the source points all coincide; no rotation or scale is defined")
    k = float(sigma.sum()) / norm
    return Q, k, mean_x - k * mean_y @ Q


class ProcrustesAlignment(SpectralAlignment):
    """Embed each view on its own, then align the embeddings on the anchors by Procrustes analysis.

    Wang & Mahadevan (2008), section 2.2: (1-2) a low-dimensional embedding of each view
    (Laplacian eigenmaps by default, as in the paper; LPP, a map defined for new rows, or PCA also); (3) on the
    anchors, the isotropic scale ``k``, rotation/reflection ``Q`` and translation that best map
    the second view's embedding onto the first's (:func:`procrustes`); (4) the same ``k``,
    ``Q`` applied to every point of the second view. The shape of each manifold is kept, unlike
    affine matching.

    More than two views: every view is aligned to the first one (the reference), with the
    anchors between it and that view; the reference is left as embedded.

    Parameters
    ----------
    n_components : int
        Dimension of the per-view embeddings (for ``"none"``: the common number of features).
    embedding : "laplacian", "diffusion", "lpp", "pca" or "none"
        See :func:`bayesalign.spectral.embed_view`. Default: Laplacian eigenmaps (the paper's),
        on the ``"auto"`` graph, which aligned best on average over the shipped real pairs at 10%
        anchors and no worse than the heat kernel on any of them (benchmarks/RESULTS.md,
        "Spectral methods"). ``"lpp"`` (locality preserving projections, which the paper names
        beside Laplacian eigenmaps) is a linear map defined for new rows. Laplacian eigenmaps on a
        single-width heat kernel can place a row far from all others at ~1/sqrt(its tiny degree)
        and collapse the rest of the view to a few distinct points; ``"auto"`` switches such a
        view to local scaling, and the base class reports any degenerate embedding
        (``degenerate_views_`` and a warning).
    n_neighbors : int
        k of the k-NN graphs (graph embeddings only).
    affinity : "auto", "local", "heat" or "connectivity"
        Within-view weights of the graph embeddings
        (:func:`~bayesalign.spectral._base.within_view_affinity`): ``"auto"`` (default) is one
        heat-kernel width unless that leaves a row nearly cut off (degree ratio above
        ``bayesalign.graph.DEGREE_RATIO_LIMIT``), then local scaling for that view.
    reg : float
        Relative ridge of LPP.
    connect_components : bool
        Join disconnected k-NN graphs by their shortest edges.

    Attributes
    ----------
    embedding_ : LatentEmbedding (with projections for the linear embeddings "lpp", "pca", "none")
    rotation_, scale_, translation_ : dict view -> Q (d, d), k, t (d,)
        ``aligned = k * own_embedding @ Q + t``; identity for the reference view.

    Raises
    ------
    ValueError
        Fewer than ``n_components + 1`` anchor pairs between the reference and a view: after
        centring m anchors span at most m - 1 dimensions, so Q would not be determined.

    Examples
    --------
    >>> import numpy as np
    >>> from bayesalign.data import AlignmentProblem
    >>> X = np.random.default_rng(0).normal(size=(30, 2))
    >>> R = np.array([[0.6, 0.8], [0.8, -0.6]])  # a reflection
    >>> problem = AlignmentProblem.paired({"a": X, "b": 2.0 * X @ R + 5.0}).split_anchors(5, seed=0)
    >>> model = ProcrustesAlignment(n_components=2, embedding="none").fit(problem)
    >>> bool(np.allclose(model.rotation_["b"], R.T)), round(model.scale_["b"], 10)
    (True, 0.5)
    """

    def __init__(self, n_components: int = 2, embedding: str = "laplacian", n_neighbors: int = 10, *,
                 affinity: str = "auto", reg: float = 1e-6, connect_components: bool = False):
        self.n_components = n_components
        self.embedding = embedding
        self.n_neighbors = n_neighbors
        self.affinity = affinity
        self.reg = reg
        self.connect_components = connect_components

    def _fit(self, problem: AlignmentProblem) -> LatentEmbedding:
        views = problem.views
        names = views.names
        reference = names[0]
        d = check_n_components(self.n_components, min(views.n_samples.values()), "a view's rows")
        for v in names[1:]:  # check the anchors before the (costly) embeddings
            self._anchor_pairs(problem, reference, v, int(d) + 1,
                               f"Procrustes in {d} dimensions (m anchors span m - 1 after centring)")
        own = {v: embed_view(views[v], d, self.embedding, n_neighbors=self.n_neighbors, affinity=self.affinity,
                             reg=self.reg, connect_components=self.connect_components, name=v)
               for v in names}
        self.degree_ratios_ = {v: e.degree_ratio for v, e in own.items() if e.degree_ratio is not None}
        d = own[reference].coordinates.shape[1]
        self.rotation_ = {reference: np.eye(d)}
        self.scale_ = {reference: 1.0}
        self.translation_ = {reference: np.zeros(d)}
        for v in names[1:]:
            corr = problem.anchors_between(reference, v)
            Q, k, t = procrustes(own[v].coordinates[corr.index_b], own[reference].coordinates[corr.index_a])
            self.rotation_[v], self.scale_[v], self.translation_[v] = Q, k, t
        means = {v: self.scale_[v] * own[v].coordinates @ self.rotation_[v] + self.translation_[v] for v in names}
        linear = all(own[v].projection is not None for v in names)
        return LatentEmbedding(
            means,
            projections={v: self.scale_[v] * own[v].projection @ self.rotation_[v] for v in names} if linear else None,
            centers={v: own[v].center for v in names} if linear else None,
            offsets=dict(self.translation_) if linear else None,
            method=f"procrustes_{self.embedding}",
            info={"reference": reference},
        )
