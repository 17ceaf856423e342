"""``Correspondence``: known pairs of rows between two named views."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._utils import as_rng
from .views import InputTypeError, _has_bool, _index_array


@dataclass(frozen=True, eq=False)
class Correspondence:
    """Known pairs ``(index_a[k], index_b[k])`` between view ``views[0]`` and ``views[1]``.

    Many-to-many correspondences are allowed (a row may appear in several pairs);
    an identical pair listed twice is an error. ``weights`` (optional, positive)
    say how strongly each pair is believed, as in the weighted correspondence
    matrix W^{(a,b)} of Wang, Krafft & Mahadevan (2011), section 5.2.

    Examples
    --------
    >>> c = Correspondence.from_pairs([(0, 0), (1, 3)], views=("en", "it"))
    >>> len(c), c.pairs.tolist()
    (2, [[0, 0], [1, 3]])
    >>> c.reversed().views
    ('it', 'en')
    """

    views: tuple[str, str]
    index_a: np.ndarray
    index_b: np.ndarray
    weights: np.ndarray | None = None

    def __post_init__(self):
        views = tuple(self.views)
        if len(views) != 2 or not all(isinstance(v, str) for v in views):
            raise ValueError(f"a Correspondence links exactly two named views, got {self.views!r}")
        if views[0] == views[1]:
            raise ValueError(f"a Correspondence links two different views, got {views[0]!r} twice")
        a = _index_array(self.index_a, f"correspondence {views}: index_a")
        b = _index_array(self.index_b, f"correspondence {views}: index_b")
        if a.shape != b.shape:
            raise ValueError(f"correspondence {views}: index_a has {a.size} entries, index_b {b.size}")
        if a.size:  # unique rows of the pairs themselves (a key such as a * (max b + 1) + b can overflow)
            _, first, counts = np.unique(np.stack([a, b], 1), axis=0, return_index=True, return_counts=True)
            if (counts > 1).any():
                k = first[np.argmax(counts > 1)]
                raise ValueError(f"correspondence {views}: duplicated pair ({a[k]}, {b[k]})")
        w = None
        if self.weights is not None:
            w = np.asarray(self.weights, dtype=np.float64).reshape(-1)
            if w.shape != a.shape:
                raise ValueError(f"correspondence {views}: {w.size} weights for {a.size} pairs")
            if not np.all(np.isfinite(w)) or (w <= 0).any():
                raise ValueError(f"correspondence {views}: weights must be finite and positive")
            w.setflags(write=False)
        a.setflags(write=False)
        b.setflags(write=False)
        object.__setattr__(self, "views", views)
        object.__setattr__(self, "index_a", a)
        object.__setattr__(self, "index_b", b)
        object.__setattr__(self, "weights", w)

    # Constructors ------------------------------------------------------------------------
    @classmethod
    def from_pairs(cls, pairs, views=("view0", "view1"), weights=None) -> Correspondence:
        """From a sequence of ``(i, j)`` pairs or an array of shape (k, 2)."""
        if _has_bool(pairs):
            raise InputTypeError(f"pairs {tuple(views)}: row indices must be integers, got a bool (True / False is "
                                 "no row index)")
        pairs = np.asarray(pairs)
        if pairs.size == 0:
            return cls(tuple(views), np.zeros(0, np.int64), np.zeros(0, np.int64))
        if pairs.ndim != 2 or pairs.shape[1] != 2:
            raise ValueError(f"pairs must have shape (k, 2), got {pairs.shape}")
        return cls(tuple(views), pairs[:, 0], pairs[:, 1], weights)

    @classmethod
    def from_matrix(cls, matrix, views=("view0", "view1")) -> Correspondence:
        """From a 0/1 or weighted (n_a, n_b) matrix, dense or scipy.sparse; zeros are no pair."""
        if sp.issparse(matrix):
            coo = sp.coo_matrix(matrix)
            coo.sum_duplicates()
            keep = coo.data != 0
            rows, cols, vals = coo.row[keep], coo.col[keep], coo.data[keep]
        else:
            matrix = np.asarray(matrix, dtype=np.float64)
            if matrix.ndim != 2:
                raise ValueError(f"correspondence matrix must be 2-D, got shape {matrix.shape}")
            rows, cols = np.nonzero(matrix)
            vals = matrix[rows, cols]
        order = np.lexsort((cols, rows))
        vals = vals[order].astype(np.float64)
        weights = None if np.all(vals == 1.0) else vals
        return cls(tuple(views), rows[order], cols[order], weights)

    @classmethod
    def identity(cls, n: int, views=("view0", "view1")) -> Correspondence:
        """Row i of one view <-> row i of the other, for i < n (fully paired data)."""
        if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"Correspondence.identity: n must be a non-negative integer, got {n!r}")
        idx = np.arange(int(n), dtype=np.int64)
        return cls(tuple(views), idx, idx.copy())

    # Views of the data -------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self.index_a.size)

    def __repr__(self) -> str:
        return f"Correspondence({self.views[0]!r} <-> {self.views[1]!r}, {len(self)} pairs)"

    @property
    def pairs(self) -> np.ndarray:
        """The pairs as an int array of shape (k, 2)."""
        return np.stack([self.index_a, self.index_b], axis=1)

    @property
    def is_one_to_one(self) -> bool:
        return (np.unique(self.index_a).size == len(self)) and (np.unique(self.index_b).size == len(self))

    def weights_or_ones(self) -> np.ndarray:
        return np.ones(len(self)) if self.weights is None else np.asarray(self.weights)

    def reversed(self) -> Correspondence:
        """The same pairs seen from the other view."""
        return Correspondence((self.views[1], self.views[0]), self.index_b, self.index_a, self.weights)

    def oriented(self, a: str, b: str) -> Correspondence:
        """These pairs as (a, b); raises if the correspondence is not between a and b."""
        if self.views == (a, b):
            return self
        if self.views == (b, a):
            return self.reversed()
        raise ValueError(f"correspondence is between {self.views}, not ({a!r}, {b!r})")

    def to_matrix(self, shape: tuple[int, int]) -> sp.csr_matrix:
        """Sparse (n_a, n_b) matrix with the weights (1 where none) at the pairs."""
        return sp.csr_matrix((self.weights_or_ones(), (self.index_a, self.index_b)), shape=shape)

    def mapping(self) -> dict[int, int]:
        """dict from index_a to index_b; requires a one-to-one correspondence."""
        if not self.is_one_to_one:
            raise ValueError(f"{self!r} is not one-to-one")
        return dict(zip(self.index_a.tolist(), self.index_b.tolist()))

    def subset(self, keep) -> Correspondence:
        """The pairs selected by a boolean mask or an index array."""
        keep = np.asarray(keep)
        w = None if self.weights is None else self.weights[keep]
        return Correspondence(self.views, self.index_a[keep], self.index_b[keep], w)

    def split(self, n_anchors, seed=None) -> tuple[Correspondence, Correspondence]:
        """Random split into (anchors, held-out); ``n_anchors`` is a count or a fraction in (0, 1)."""
        k = _anchor_count(n_anchors, len(self))
        order = as_rng(seed).permutation(len(self))
        return self.subset(np.sort(order[:k])), self.subset(np.sort(order[k:]))

    def check_bounds(self, n_a: int, n_b: int) -> None:
        """Raise if an index is out of range for views with n_a and n_b rows."""
        for idx, n, view in ((self.index_a, n_a, self.views[0]), (self.index_b, n_b, self.views[1])):
            if idx.size and idx.max() >= n:
                bad = int(idx[np.argmax(idx >= n)])
                raise ValueError(f"correspondence {self.views}: row {bad} is out of range for view "
                                 f"{view!r} with {n} rows")

    def concat(self, other: Correspondence) -> Correspondence:
        """The union of two correspondences between the same views (duplicates are an error)."""
        other = other.oriented(*self.views)
        if self.weights is None and other.weights is None:
            w = None
        else:
            w = np.concatenate([self.weights_or_ones(), other.weights_or_ones()])
        return Correspondence(self.views, np.concatenate([self.index_a, other.index_a]),
                              np.concatenate([self.index_b, other.index_b]), w)


def _anchor_count(n_anchors, total: int) -> int:
    if isinstance(n_anchors, (float, np.floating)) and not float(n_anchors).is_integer() \
            or (isinstance(n_anchors, (float, np.floating)) and 0 < n_anchors < 1):
        if not 0 < n_anchors < 1:
            raise ValueError(f"an anchor fraction must be in (0, 1), got {n_anchors}")
        return max(1, int(round(n_anchors * total)))
    k = int(n_anchors)
    if not 0 <= k <= total:
        raise ValueError(f"cannot take {k} anchors out of {total} pairs")
    return k
