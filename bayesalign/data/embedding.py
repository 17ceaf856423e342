"""``LatentEmbedding``: the common result of every method (per-view latent coordinates)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np


def _frozen(array, dtype=np.float64) -> np.ndarray:
    out = np.array(array, dtype=dtype, copy=True)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class LatentEmbedding:
    """Per-view latent coordinates in one common space.

    Attributes
    ----------
    means : dict view -> array (n_v, d)
        Latent coordinates (posterior means for Bayesian methods).
    variances : dict view -> array (n_v, d), optional
        Diagonal posterior variances per point (Bayesian methods).
    covariances : dict view -> array (n_v, d, d), optional
        Full posterior covariances per point, where a method has them.
    shared_dims : array of int
        Indices of the latent dimensions shared by the views (all by default).
    projections : dict view -> array (p_v, d), optional
        For linear methods: z = (x - centers[v]) @ projections[v] + offsets[v].
    centers, offsets : dict view -> array, optional
        Feature means subtracted before projecting (p_v,), and latent offsets (d,).
    method : str
        Name of the method that produced it.

    Examples
    --------
    >>> import numpy as np
    >>> emb = LatentEmbedding({"a": np.zeros((2, 2)), "b": np.ones((3, 2))},
    ...                       projections={"a": np.eye(2), "b": np.eye(2)})
    >>> emb.n_components, emb.transform("b", [[1.0, 2.0]]).tolist()
    (2, [[1.0, 2.0]])
    """

    means: Mapping[str, np.ndarray]
    variances: Mapping[str, np.ndarray] | None = None
    covariances: Mapping[str, np.ndarray] | None = None
    shared_dims: np.ndarray | None = None
    projections: Mapping[str, np.ndarray] | None = None
    centers: Mapping[str, np.ndarray] | None = None
    offsets: Mapping[str, np.ndarray] | None = None
    method: str = ""
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.means, Mapping) or len(self.means) == 0:
            raise TypeError("LatentEmbedding.means must be a non-empty dict view -> (n_v, d) array")
        means = {}
        dims = set()
        for view, m in self.means.items():
            m = _frozen(m)
            if m.ndim != 2:
                raise ValueError(f"embedding of view {view!r}: expected (n, d), got shape {m.shape}")
            if not np.all(np.isfinite(m)):
                row, col = np.argwhere(~np.isfinite(m))[0]
                raise ValueError(f"embedding of view {view!r} has a non-finite value at row {row}, "
                                 f"dimension {col}")
            means[view] = m
            dims.add(m.shape[1])
        if len(dims) != 1:
            raise ValueError(f"all views must share the latent dimension; got {sorted(dims)}")
        d = dims.pop()
        object.__setattr__(self, "means", means)

        def per_view(store, name, shape_of):
            if store is None:
                return None
            out = {}
            for view, value in store.items():
                if view not in means:
                    raise ValueError(f"{name} given for unknown view {view!r}")
                value = _frozen(value)
                if shape_of(view) is not None and value.shape != shape_of(view):
                    raise ValueError(f"{name} of view {view!r}: expected shape {shape_of(view)}, "
                                     f"got {value.shape}")
                out[view] = value
            return out

        object.__setattr__(self, "variances", per_view(self.variances, "variances",
                                                       lambda v: means[v].shape))
        object.__setattr__(self, "covariances", per_view(self.covariances, "covariances",
                                                         lambda v: means[v].shape + (d,)))
        object.__setattr__(self, "projections", per_view(self.projections, "projections", lambda v: None))
        for view, projection in (self.projections or {}).items():
            if projection.ndim != 2 or projection.shape[1] != d:  # transform would return another dimension
                raise ValueError(f"projections of view {view!r}: expected shape (p, {d}) for {d} latent dimensions, "
                                 f"got {projection.shape}")
        object.__setattr__(self, "centers", per_view(self.centers, "centers", lambda v: None))
        object.__setattr__(self, "offsets", per_view(self.offsets, "offsets", lambda v: (d,)))
        if self.variances is not None:
            for view, var in self.variances.items():
                if not np.all(np.isfinite(var)):
                    row, col = np.argwhere(~np.isfinite(var))[0]
                    raise ValueError(f"variances of view {view!r} have a non-finite value at row {row}, "
                                     f"dimension {col}")
                if (var < 0).any():
                    raise ValueError(f"variances of view {view!r} must be non-negative")
        shared = np.arange(d) if self.shared_dims is None else np.asarray(self.shared_dims, dtype=np.int64)
        if shared.size and (shared.min() < 0 or shared.max() >= d):
            raise ValueError(f"shared_dims {shared.tolist()} out of range for {d} dimensions")
        object.__setattr__(self, "shared_dims", _frozen(shared, np.int64))

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k!r}: {v.shape[0]}x{v.shape[1]}" for k, v in self.means.items())
        extra = " with variances" if self.variances is not None else ""
        return f"LatentEmbedding({self.method or 'unnamed'}: {{{shapes}}}{extra})"

    def __getitem__(self, view) -> np.ndarray:
        return self.means[view]

    @property
    def view_names(self) -> tuple[str, ...]:
        return tuple(self.means)

    @property
    def n_components(self) -> int:
        return next(iter(self.means.values())).shape[1]

    def variance_of(self, view) -> np.ndarray:
        """Per-point diagonal variances, from ``variances`` or the diagonal of ``covariances``;
        zeros for a deterministic method."""
        if self.variances is not None and view in self.variances:
            return self.variances[view]
        if self.covariances is not None and view in self.covariances:
            return np.diagonal(self.covariances[view], axis1=1, axis2=2).copy()
        return np.zeros_like(self.means[view])

    def transform(self, view, X) -> np.ndarray:
        """Map new rows of a view into the latent space (linear methods only)."""
        if self.projections is None or view not in self.projections:
            raise ValueError(f"{self.method or 'this method'} has no projection for view {view!r}: "
                             "only linear methods can transform new rows")
        from .views import check_view

        P = self.projections[view]
        X = check_view(X, view)
        if X.shape[1] != P.shape[0]:
            raise ValueError(f"view {view!r}: new rows have {X.shape[1]} features, the projection "
                             f"expects {P.shape[0]}")
        centre = self.centers[view] if self.centers and view in self.centers else 0.0
        offset = self.offsets[view] if self.offsets and view in self.offsets else 0.0
        return (X - centre) @ P + offset

    def restrict(self, dims) -> LatentEmbedding:
        """The embedding in a subset of its dimensions (e.g. the shared ones); a kept shared dimension stays shared."""
        dims = np.asarray(dims, dtype=np.int64).reshape(-1)
        d = self.n_components
        if dims.size and (dims.min() < 0 or dims.max() >= d):
            raise ValueError(f"dims {dims.tolist()} out of range for {d} dimensions")

        def sub(store, axes):
            if store is None:
                return None
            return {k: v[(slice(None),) * axes + (dims,)] if axes < 2 else v[:, dims][:, :, dims]
                    for k, v in store.items()}

        return LatentEmbedding(
            means=sub(self.means, 1), variances=sub(self.variances, 1), covariances=sub(self.covariances, 2),
            shared_dims=np.flatnonzero(np.isin(dims, self.shared_dims)),  # positions of the kept shared dims
            projections=sub(self.projections, 1), centers=self.centers,
            offsets=None if self.offsets is None else {k: v[dims] for k, v in self.offsets.items()},
            method=self.method, info=dict(self.info),
        )
