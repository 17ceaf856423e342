"""One view embedded on its own: Laplacian eigenmaps, diffusion maps, LPP, PCA or the centred features."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import degree_spread, laplacian, smallest_generalized_eigenvectors
from ._checks import check_n_components
from ._graphs import within_view_affinity
from ._linalg import locality_preserving_projections


@dataclass(frozen=True)
class ViewEmbedding:
    """One view embedded on its own: ``coordinates`` (n, d); for linear methods also
    ``projection`` (p, d) and ``center`` (p,) with ``coordinates = (X - center) @ projection``;
    for graph embeddings ``degree_ratio``, the largest over the smallest degree of its graph."""

    coordinates: np.ndarray
    projection: np.ndarray | None = None
    center: np.ndarray | None = None
    degree_ratio: float | None = None


EMBEDDINGS = ("laplacian", "diffusion", "lpp", "pca", "none")


def embed_view(X, n_components: int, method: str = "laplacian", *, n_neighbors: int = 10,
               affinity: str = "local", diffusion_time: float = 1.0, reg: float = 1e-6,
               connect_components: bool = False, name: str = "X") -> ViewEmbedding:
    """Embed one view on its own (the first step of Procrustes and affine alignment).

    Methods
    -------
    ``"laplacian"``
        Laplacian eigenmaps: the ``n_components`` smallest non-trivial solutions of
        ``L f = lambda D f`` with ``F' D F = I`` (Belkin & Niyogi 2003). These are the
        eigenvectors of the normalized Laplacian used by Wang & Mahadevan (2008), step 2,
        rescaled by ``D^{-1/2}``: that normalisation is the coordinates' scale (a row of degree
        ``d_i`` sits at about ``1/sqrt(d_i)`` times the typical magnitude).
    ``"diffusion"``
        Diffusion maps (Coifman & Lafon 2006; used by Lafon, Keller & Coifman 2006): the same
        eigenvectors scaled by ``(1 - lambda)^t``, the eigenvalues of the random walk
        ``D^{-1} W`` raised to the diffusion time ``t``.
    ``"lpp"``
        Locality preserving projections (He & Niyogi 2003): ``X' L X a = lambda X' D X a`` on the
        centred view, over the graph of all its points (:func:`locality_preserving_projections`,
        with the relative ridge ``reg``; well posed for ``p >= n``). Linear.
    ``"pca"``
        Principal components of the centred view. Linear.
    ``"none"``
        The centred features themselves (``n_components`` must equal the number of features).

    ``affinity`` is the within-view graph's weighting (:func:`within_view_affinity`; local
    scaling by default).
    """
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    if method not in EMBEDDINGS:
        raise ValueError(f"embedding must be one of {EMBEDDINGS}, got {method!r}")
    if method in ("laplacian", "diffusion"):
        check_n_components(n_components, n - 1, f"a spectral embedding of view {name!r} with {n} rows")
        W = within_view_affinity(X, n_neighbors, affinity=affinity, connect_components=connect_components,
                                 name=name)
        L, D = laplacian(W)
        values, F = smallest_generalized_eigenvectors(L, D, n_components)  # [n, d]
        if method == "diffusion":
            F = F * np.clip(1.0 - values, 0.0, None) ** diffusion_time
        return ViewEmbedding(F, degree_ratio=degree_spread(W)[0])
    center = X.mean(axis=0)
    Xc = X - center  # [n, p]
    if method == "none":
        if n_components != p:
            raise ValueError(f"embedding='none' keeps the {p} features of view {name!r}; "
                             f"n_components must be {p}, got {n_components}")
        return ViewEmbedding(Xc, np.eye(p), center)
    check_n_components(n_components, min(n - 1, p), f"a linear embedding of view {name!r} ({n} x {p})")
    if method == "pca":
        _, _, Vt = np.linalg.svd(Xc, full_matrices=False)
        P = Vt[:n_components].T  # [p, d]
        rows = np.argmax(np.abs(P), axis=0)
        P = P * np.sign(P[rows, np.arange(n_components)])
        return ViewEmbedding(Xc @ P, P, center)
    W = within_view_affinity(X, n_neighbors, affinity=affinity, connect_components=connect_components,
                             name=name)
    L, D = laplacian(W)
    _, projections = locality_preserving_projections(L, D, {name: Xc}, {name: slice(0, n)}, n_components, reg=reg)
    return ViewEmbedding(Xc @ projections[name], projections[name], center, degree_spread(W)[0])
