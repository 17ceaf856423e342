"""Baselines of the manifold-alignment papers: CCA, affine matching, least squares, anchor similarities.

- :class:`CCAAlignment`: regularised canonical correlation analysis fitted on the anchors
  (Hotelling 1936; compared against in Wang & Mahadevan, IJCAI 2013, section 4).
- :class:`AffineAlignment`: per-view diffusion maps, then an affine map fitted on the anchors
  (Lafon, Keller & Coifman 2006).
- :class:`LeastSquaresAlignment`: ``F = X^+ Y`` on the anchors (Wang, Krafft & Mahadevan 2011,
  section 5.4.2).
- :class:`AnchorSimilarityBaseline`: every point as its similarities to the anchors of its own
  view (Wang & Mahadevan, IJCAI 2013, section 4.1; ICML 2008, section 4.2).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy.spatial.distance import cdist

from ..data import AlignmentProblem, Correspondence, LatentEmbedding
from ..metrics import foscttm
from ._base import SpectralAlignment, anchor_tuples, check_n_components, embed_view, whitening_basis

__all__ = ["AffineAlignment", "AnchorSimilarityBaseline", "CCAAlignment", "LeastSquaresAlignment"]


def _require_tuples(problem: AlignmentProblem, minimum: int, why: str) -> dict[str, np.ndarray]:
    tuples = anchor_tuples(problem)
    m = next(iter(tuples.values())).size
    if m < minimum:
        names = problem.views.names
        raise ValueError(f"{m} row(s) of view {names[0]!r} are anchored to every other view; {why} needs at "
                         f"least {minimum}")
    return tuples


class CCAAlignment(SpectralAlignment):
    """Regularised CCA fitted on the anchor rows; every point projected into the canonical space.

    For two views, the canonical directions maximise the ridge correlation
    ``w_a' C_ab w_b / sqrt(w_a' (C_aa + gamma_a I) w_a  w_b' (C_bb + gamma_b I) w_b)`` on the
    anchors, ``gamma_v = reg * mean eigenvalue of C_vv``. They solve the generalized eigenproblem

        (C - C_diag) w = rho (C_diag + Gamma) w,

    ``C`` the covariance of the stacked features of all views on the anchors, ``C_diag`` its
    diagonal blocks ``C_vv`` and ``Gamma = diag(gamma_v I)``; for two views the eigenvalues
    ``rho`` are the canonical correlations, and for more views this is the "sum of
    correlations" multi-view CCA. It is solved exactly by whitening each view in its row space
    (:func:`~bayesalign.spectral._base.whitening_basis`), which turns it into the symmetric
    eigenproblem of the off-diagonal blocks ``Z_a' Z_b`` of the whitened anchors, of size
    ``R = sum_v rank_v <= sum_v min(m - 1, p_v)`` (``m`` anchors): dense ``O(R^3)``, never
    ``(sum p)^2`` when p > m. Each view's directions are scaled so its canonical variates have
    unit ridge variance on the anchors; all points are projected as ``(x - anchor mean) @ w_v``.

    Anchors: rows of the first view that have an anchor in every other view
    (:func:`~bayesalign.spectral._base.anchor_tuples`).

    Parameters
    ----------
    n_components : int
        At most the smallest rank of a view's centred anchors.
    reg : float
        Relative ridge (0 gives plain CCA, which overfits when p is close to the number of anchors).

    Examples
    --------
    >>> import numpy as np
    >>> from bayesalign.data import AlignmentProblem
    >>> rng = np.random.default_rng(0)
    >>> Z = rng.normal(size=(200, 1))
    >>> a = np.hstack([Z, rng.normal(size=(200, 2))])
    >>> b = np.hstack([rng.normal(size=(200, 1)), -2.0 * Z + 0.01 * rng.normal(size=(200, 1))])
    >>> emb = CCAAlignment(n_components=1).fit(AlignmentProblem.paired({"a": a, "b": b}).split_anchors(0.5, seed=0))
    >>> bool(abs(np.corrcoef(emb.embedding_["a"][:, 0], emb.embedding_["b"][:, 0])[0, 1]) > 0.99)
    True
    """

    def __init__(self, n_components: int = 2, reg: float = 1e-3):
        self.n_components = n_components
        self.reg = reg

    def _fit(self, problem: AlignmentProblem) -> LatentEmbedding:
        views = problem.views
        names = views.names
        if not self.reg >= 0:  # NaN too
            raise ValueError(f"reg must be non-negative, got {self.reg}")
        tuples = _require_tuples(problem, 2, "CCA")
        centers = {v: views[v][tuples[v]].mean(axis=0) for v in names}
        bases = {v: whitening_basis(views[v][tuples[v]] - centers[v], None, self.reg) for v in names}  # [p_v, r_v]
        d = check_n_components(self.n_components, min(T.shape[1] for T in bases.values()),
                               "CCA (the smallest rank of a view's centred anchors)")
        coords = [(views[v][tuples[v]] - centers[v]) @ bases[v] for v in names]  # Z_v: [m, r_v]
        bounds = np.concatenate([[0], np.cumsum([Z.shape[1] for Z in coords])])
        R = int(bounds[-1])
        M = np.zeros((R, R))  # whitened C - C_diag: the cross-view blocks Z_a' Z_b
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                M[bounds[i]:bounds[i + 1], bounds[j]:bounds[j + 1]] = coords[i].T @ coords[j]
        M = M + M.T
        rho, beta = scipy.linalg.eigh(M, subset_by_index=[R - d, R - 1])  # largest d
        rho, beta = rho[::-1], beta[:, ::-1]  # [d], [R, d]
        projections = {}
        for i, v in enumerate(names):
            block = beta[bounds[i]:bounds[i + 1]]
            norms = np.linalg.norm(block, axis=0)
            projections[v] = bases[v] @ (block / np.where(norms > 0, norms, 1.0))  # [p_v, d]
        ref = projections[names[0]]
        rows = np.argmax(np.abs(ref), axis=0)  # deterministic signs, shared by all views
        signs = np.sign(ref[rows, np.arange(d)])
        projections = {v: P * signs for v, P in projections.items()}
        means = {v: (views[v] - centers[v]) @ projections[v] for v in names}
        self.eigenvalues_ = rho  # for two views: the canonical correlations
        return LatentEmbedding(means, projections=projections, centers=centers, method="cca",
                               info={"eigenvalues": self.eigenvalues_})


class AffineAlignment(SpectralAlignment):
    """Diffusion maps of each view, then an affine map onto the first view fitted on the anchors.

    Lafon, Keller & Coifman (2006), "Data fusion and multicue data matching by diffusion maps":
    each view is embedded by diffusion maps (``embedding="diffusion"``; Laplacian eigenmaps,
    LPP or PCA also possible); then for every other view ``v`` the affine map
    ``y -> y A_v + b_v`` minimising ``sum_anchors ||x_ref - (y_v A_v + b_v)||^2`` (ordinary
    least squares on ``[Y_v, 1]``) is applied to all its points. Unlike Procrustes it may
    shear and stretch a manifold. More than two views: each view is mapped onto the first.

    Parameters
    ----------
    n_components : int
    embedding : "diffusion", "laplacian", "lpp" or "pca"
    n_neighbors : int
    diffusion_time : float
        ``t`` of the diffusion map (``embedding="diffusion"``).
    affinity : "auto", "local", "heat" or "connectivity"
        Within-view weights (:func:`~bayesalign.spectral._base.within_view_affinity`): ``"auto"``
        (default) is one heat-kernel width unless that leaves a row nearly cut off, then local
        scaling for that view; on the shipped real pairs at 10% anchors it is no worse than the
        heat kernel on any pair, and as good as local scaling on average (benchmarks/RESULTS.md,
        "Spectral methods").
    reg : float
        Relative ridge of LPP.
    connect_components : bool

    Attributes
    ----------
    linear_map_, intercept_ : dict view -> A_v (d, d), b_v (d,); identity / zero for the first view.

    Raises
    ------
    ValueError
        Fewer than ``n_components + 1`` anchors between the first view and another.
    """

    def __init__(self, n_components: int = 2, embedding: str = "diffusion", n_neighbors: int = 10, *,
                 diffusion_time: float = 1.0, affinity: str = "auto", reg: float = 1e-6,
                 connect_components: bool = False):
        self.n_components = n_components
        self.embedding = embedding
        self.n_neighbors = n_neighbors
        self.diffusion_time = diffusion_time
        self.affinity = affinity
        self.reg = reg
        self.connect_components = connect_components

    def _fit(self, problem: AlignmentProblem) -> LatentEmbedding:
        views = problem.views
        names = views.names
        reference = names[0]
        if self.embedding == "none":
            raise ValueError("AffineAlignment: embedding='none' is least squares; use LeastSquaresAlignment")
        check_n_components(self.n_components, min(views.n_samples.values()), "a view's rows")
        for v in names[1:]:
            self._anchor_pairs(problem, reference, v, int(self.n_components) + 1,
                               f"an affine map in {self.n_components} dimensions")
        own = {v: embed_view(views[v], self.n_components, self.embedding, n_neighbors=self.n_neighbors,
                             affinity=self.affinity, diffusion_time=self.diffusion_time, reg=self.reg,
                             connect_components=self.connect_components, name=v) for v in names}
        self.degree_ratios_ = {v: e.degree_ratio for v, e in own.items() if e.degree_ratio is not None}
        d = own[reference].coordinates.shape[1]
        self.linear_map_ = {reference: np.eye(d)}
        self.intercept_ = {reference: np.zeros(d)}
        for v in names[1:]:
            corr = problem.anchors_between(reference, v)
            Y = own[v].coordinates[corr.index_b]  # [m, d]
            design = np.hstack([Y, np.ones((Y.shape[0], 1))])  # [m, d + 1]
            coef, *_ = np.linalg.lstsq(design, own[reference].coordinates[corr.index_a], rcond=None)
            self.linear_map_[v], self.intercept_[v] = coef[:d], coef[d]
        means = {v: own[v].coordinates @ self.linear_map_[v] + self.intercept_[v] for v in names}
        linear = all(own[v].projection is not None for v in names)
        return LatentEmbedding(
            means,
            projections={v: own[v].projection @ self.linear_map_[v] for v in names} if linear else None,
            centers={v: own[v].center for v in names} if linear else None,
            offsets=dict(self.intercept_) if linear else None,
            method=f"affine_{self.embedding}", info={"reference": reference},
        )


#: ``direction`` of :class:`LeastSquaresAlignment`.
DIRECTIONS = ("auto", "to_first", "symmetric")


class LeastSquaresAlignment(SpectralAlignment):
    """Linear regression between the views' features, fitted on the anchors.

    Wang, Krafft & Mahadevan (2011), section 5.4.2: ``X F ~ Y`` on the corresponding rows,
    ``F = X^+ Y`` (the minimum-norm least-squares solution, also when p > number of anchors);
    both sides are centred on their anchor means (an intercept, which the chapter omits).
    Regression has a direction (``F`` predicts Y from X, not the reverse), so the result
    depends on which view is predicted from which; ``direction`` says:

    - ``"to_first"``: the chapter's one-sided form. The latent space is the first view's (the
      reference's) feature space; every other view ``v`` is mapped into it by its own ``F_v``,
      fitted to predict the reference from view ``v``.
    - ``"auto"`` (default): the one-sided form with the reference chosen from the anchors, so the
      result does not depend on the order of the views: every view that has anchors to all others
      is tried as the reference, each scored by 5-fold cross-validation over its anchor pairs (the
      maps fitted on four folds, each held-out anchor pair scored by FOSCTTM against all rows of
      the other view, in the reference's space), and the best score wins (ties: the earlier view). ``reference_`` and
      ``reference_scores_`` say which and why. On the shipped real pairs the direction matters
      (benchmarks/RESULTS.md, "Spectral methods").
    - ``"symmetric"``: every view is predicted from every other, and the latent
      space is the concatenation of all views' feature spaces, each centred and divided by its
      root total variance ``s_v = sqrt(tr Cov(X_v))`` so that no view dominates by its units. A row
      ``x`` of view a becomes ``[..., ((x - m_a) F_ab + m_b - c_b) / s_b, ..., (x - c_a) / s_a, ...]``
      (``m`` anchor means, ``c`` view means): its own features in its own block, its prediction
      of view b's features in b's block. Swapping the views only permutes the latent columns.

    With ``n_components`` each block is replaced by its first ``n_components`` principal
    components (PCA of all rows of that view), as in the chapter's LSI variant.

    Parameters
    ----------
    n_components : int or None
    direction : "auto", "to_first" or "symmetric"

    Attributes
    ----------
    coef_ : dict (a, b) -> F (p_a, p_b), the least-squares map from view a's centred features to
        view b's (only pairs into the reference with ``"to_first"`` and ``"auto"``)
    reference_ : str or None, the view whose feature space is the latent space (None: symmetric)
    reference_scores_ : dict view -> cross-validated FOSCTTM of the anchors with that view as the
        reference (``"auto"`` only; empty otherwise)

    Examples
    --------
    >>> import numpy as np
    >>> from bayesalign.data import AlignmentProblem
    >>> X = np.random.default_rng(0).normal(size=(20, 3))
    >>> M = np.array([[1.0, 2.0], [0.0, 1.0], [3.0, -1.0]])
    >>> problem = AlignmentProblem.paired({"ref": X @ M, "b": X}).split_anchors(5, seed=0)
    >>> emb = LeastSquaresAlignment(direction="to_first").fit(problem).embedding_
    >>> bool(np.allclose(emb["b"], emb["ref"]))
    True
    """

    def __init__(self, n_components: int | None = None, direction: str = "auto"):
        self.n_components = n_components
        self.direction = direction

    def _basis(self, X, name):
        """Latent basis of one view's feature block: centred features, or their principal components."""
        if self.n_components is None:
            return embed_view(X, X.shape[1], "none", name=name)
        return embed_view(X, min(self.n_components, X.shape[1]), "pca", name=name)

    def _regression(self, problem, a, b, rows=None):
        """F (p_a, p_b) and the anchor means m_a, m_b: least squares predicting view b from view a.

        ``rows`` selects some of the anchor pairs (cross-validation); F is then not stored.
        """
        why = {"to_first": "least squares",
               "auto": "least squares with direction='auto' (a reference view anchored to every other)",
               "symmetric": "symmetric least squares (a map between every pair of views; direction='to_first' "
                            "needs anchors to the first view only)"}[self.direction]
        corr = self._anchor_pairs(problem, a, b, 1, why)
        index_a, index_b = corr.index_a, corr.index_b
        if rows is not None:
            index_a, index_b = index_a[rows], index_b[rows]
        Xa, Xb = problem.views[a][index_a], problem.views[b][index_b]  # [m, p_a], [m, p_b]
        mean_a, mean_b = Xa.mean(axis=0), Xb.mean(axis=0)
        F, *_ = np.linalg.lstsq(Xa - mean_a, Xb - mean_b, rcond=None)  # F = X^+ Y: [p_a, p_b]
        if rows is None:
            self.coef_[(a, b)] = F
        return F, mean_a, mean_b

    def _reference_score(self, problem, reference, basis, n_folds: int = 5) -> float:
        """Cross-validated FOSCTTM of the anchors with ``reference`` as the latent space (lower is better).

        For every other view v, its anchor pairs with the reference are split into ``n_folds``
        interleaved folds; the map v -> reference is fitted on the other folds, every row of v is
        mapped with it, and each held-out pair is scored by FOSCTTM against all rows of the other
        view (both directions, in the reference's basis), as the alignment itself will be. The
        mean over folds and views.
        """
        scores = []
        own = (problem.views[reference] - basis.center) @ basis.projection  # [n_r, d]
        for v in problem.views.names:
            if v == reference:
                continue
            corr = problem.anchors_between(v, reference)
            m = len(corr)
            folds = min(n_folds, m // 2)
            if folds < 2:
                return np.inf  # too few anchors to judge this direction
            for fold in range(folds):
                held = np.arange(m) % folds == fold
                F, mean_v, mean_r = self._regression(problem, v, reference, rows=~held)
                mapped = ((problem.views[v] - mean_v) @ F + mean_r - basis.center) @ basis.projection  # [n_v, d]
                truth = Correspondence(corr.views, corr.index_a[held], corr.index_b[held])
                scores.append(foscttm(LatentEmbedding({v: mapped, reference: own}), truth))
        return float(np.mean(scores))

    def _fit(self, problem: AlignmentProblem) -> LatentEmbedding:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        views = problem.views
        names = views.names
        self.coef_ = {}
        self.reference_scores_ = {}
        if self.direction == "symmetric":
            targets = list(names)
            self.reference_ = None
        elif self.direction == "to_first":
            targets = names[:1]
            self.reference_ = names[0]
        else:
            linked = [r for r in names if all(len(problem.anchors_between(v, r)) > 0 for v in names if v != r)]
            if not linked:
                raise ValueError("least squares with direction='auto' needs a reference view anchored to every "
                                 "other view; no view is")
            candidates = {r: self._basis(views[r], r) for r in linked}
            self.reference_scores_ = {r: self._reference_score(problem, r, basis) for r, basis in candidates.items()}
            self.reference_ = min(linked, key=lambda r: (self.reference_scores_[r], linked.index(r)))
            targets = [self.reference_]
        bases = {t: candidates[t] if self.direction == "auto" else self._basis(views[t], t) for t in targets}
        scales = {t: 1.0 for t in targets}
        if self.direction == "symmetric":
            scales = {t: 1.0 / max(float(np.sqrt(np.mean(np.sum((views[t] - bases[t].center) ** 2, axis=1)))),
                                   np.finfo(float).tiny) for t in targets}
        projections, centers, offsets = {}, {}, {}
        for v in names:
            c_v = views[v].mean(axis=0)
            blocks, shifts = [], []
            for t in targets:
                P, c_t = bases[t].projection * scales[t], bases[t].center  # [p_t, d_t], [p_t]
                if t == v:
                    blocks.append(P)
                    shifts.append(np.zeros(P.shape[1]))
                else:
                    F, mean_v, mean_t = self._regression(problem, v, t)
                    # predicted row of t: (x - c_v) F + (c_v - mean_v) F + mean_t, in t's latent block
                    blocks.append(F @ P)
                    shifts.append(((c_v - mean_v) @ F + mean_t - c_t) @ P)
            projections[v], centers[v], offsets[v] = np.hstack(blocks), c_v, np.concatenate(shifts)
        means = {v: (views[v] - centers[v]) @ projections[v] + offsets[v] for v in names}
        return LatentEmbedding(means, projections=projections, centers=centers, offsets=offsets,
                               method="least_squares",
                               info={"direction": self.direction, "blocks": list(targets)})


class AnchorSimilarityBaseline(SpectralAlignment):
    """Every point represented by its similarities to the anchors of its own view.

    The baseline of Wang & Mahadevan (IJCAI 2013, section 4.1; ICML 2008, section 4.2): with
    ``m`` anchors, a point ``x`` of view ``v`` becomes ``V(i) = similarity(x, anchor_i in v)``,
    ``i = 1..m``, a vector in the common space ``R^m`` (the k-th coordinate means the same
    anchor in every view). Similarities:

    - ``"heat"``: ``exp(-d^2 / (2 sigma_v^2))``, ``sigma_v`` the median point-to-anchor distance of
      view ``v`` unless ``sigma`` is given;
    - ``"distance"``: ``-d / s_v``, the negative Euclidean distance scaled by that median ``s_v``
      so that views with differently scaled features are comparable.

    The output is dense ``(n_v, m)`` by construction. Anchors: rows of the first view that
    have an anchor in every other view (:func:`~bayesalign.spectral._base.anchor_tuples`).

    Parameters
    ----------
    kernel : "heat" or "distance"
    sigma : float, optional

    Examples
    --------
    >>> import numpy as np
    >>> from bayesalign.data import AlignmentProblem
    >>> X = np.random.default_rng(0).normal(size=(10, 2))
    >>> problem = AlignmentProblem.paired({"a": X, "b": 3.0 * X}).split_anchors(4, seed=0)
    >>> emb = AnchorSimilarityBaseline(kernel="distance").fit(problem).embedding_
    >>> emb.n_components, bool(np.allclose(emb["a"], emb["b"]))
    (4, True)
    """

    def __init__(self, kernel: str = "heat", sigma: float | None = None):
        self.kernel = kernel
        self.sigma = sigma

    def _fit(self, problem: AlignmentProblem) -> LatentEmbedding:
        if self.kernel not in ("heat", "distance"):
            raise ValueError(f"kernel must be 'heat' or 'distance', got {self.kernel!r}")
        if self.sigma is not None and not self.sigma > 0:
            raise ValueError(f"sigma must be positive, got {self.sigma}")
        views = problem.views
        tuples = _require_tuples(problem, 1, "the anchor-similarity baseline")
        means = {}
        for v in views.names:
            # cdist sums squared differences: an anchor's distance to itself is exactly 0, so which distances
            # are positive (and their median, the scale) does not depend on round-off
            dist = cdist(views[v], views[v][tuples[v]])  # [n_v, m]
            positive = dist[dist > 0]
            scale = float(np.median(positive)) if positive.size else 1.0
            if self.kernel == "heat":
                sigma = scale if self.sigma is None else float(self.sigma)
                means[v] = np.exp(-(dist ** 2) / (2.0 * sigma ** 2))
            else:
                means[v] = -dist / scale
        return LatentEmbedding(means, method=f"anchor_similarity_{self.kernel}",
                               info={"anchors": {v: idx for v, idx in tuples.items()}})
