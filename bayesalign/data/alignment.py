"""``Alignment``: matched pairs between two views, with costs and (optionally) probabilities."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._utils import atomic_write
from .correspondence import Correspondence
from .views import _index_array


@dataclass(frozen=True, eq=False)
class Alignment:
    """A matching between the rows of view ``views[0]`` (a) and view ``views[1]`` (b).

    Attributes
    ----------
    views : (str, str)
    index_a, index_b : int arrays (k,)
        Matched pairs: row ``index_a[t]`` of a <-> row ``index_b[t]`` of b.
    costs : float array (k,)
        The matcher's cost of each pair (lower is better).
    probabilities : float array (k,), optional
        Probability that each pair is a true match, where the matcher gives one.
    n_a, n_b : int
        Number of rows of a and b that took part in the matching problem; rows not
        in a pair are ``unmatched_a`` / ``unmatched_b``.
    candidates_a, candidates_b : int arrays, optional
        The rows that were being matched (default: all rows); unmatched rows are
        the candidates that ended in no pair.

    Examples
    --------
    >>> al = Alignment.from_permutation([2, 0, 1], views=("a", "b"))
    >>> al.to_permutation().tolist(), len(al)
    ([2, 0, 1], 3)
    """

    views: tuple[str, str]
    index_a: np.ndarray
    index_b: np.ndarray
    costs: np.ndarray | None = None
    probabilities: np.ndarray | None = None
    n_a: int | None = None
    n_b: int | None = None
    candidates_a: np.ndarray | None = None
    candidates_b: np.ndarray | None = None
    method: str = ""
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        if len(tuple(self.views)) != 2:
            raise ValueError(f"an Alignment matches exactly two named views, got {self.views!r}")
        a = _index_array(np.asarray(self.index_a).reshape(-1), "alignment: index_a").copy()
        b = _index_array(np.asarray(self.index_b).reshape(-1), "alignment: index_b").copy()
        if a.shape != b.shape:
            raise ValueError(f"alignment: {a.size} rows of a but {b.size} rows of b")
        k = a.size
        costs = np.zeros(k) if self.costs is None else np.asarray(self.costs, dtype=np.float64).reshape(-1).copy()
        if costs.shape != (k,):
            raise ValueError(f"alignment: {costs.size} costs for {k} pairs")
        if np.isnan(costs).any():
            raise ValueError(f"alignment: the cost of pair {int(np.flatnonzero(np.isnan(costs))[0])} is NaN")
        probs = None
        if self.probabilities is not None:
            probs = np.asarray(self.probabilities, dtype=np.float64).reshape(-1).copy()
            if probs.shape != (k,):
                raise ValueError(f"alignment: {probs.size} probabilities for {k} pairs")
            if not np.all((probs >= -1e-12) & (probs <= 1 + 1e-9)):
                raise ValueError("alignment: probabilities must lie in [0, 1]")
            probs = np.clip(probs, 0.0, 1.0)
        n_a = int(a.max() + 1 if k else 0) if self.n_a is None else int(self.n_a)
        n_b = int(b.max() + 1 if k else 0) if self.n_b is None else int(self.n_b)
        if k and (a.max() >= n_a or b.max() >= n_b or a.min() < 0 or b.min() < 0):
            raise ValueError(f"alignment: pair indices out of range for views of {n_a} and {n_b} rows")
        cand_a = np.arange(n_a) if self.candidates_a is None else \
            _index_array(np.asarray(self.candidates_a).reshape(-1), "alignment: candidates_a").copy()
        cand_b = np.arange(n_b) if self.candidates_b is None else \
            _index_array(np.asarray(self.candidates_b).reshape(-1), "alignment: candidates_b").copy()
        for name, cand, n in (("candidates_a", cand_a, n_a), ("candidates_b", cand_b, n_b)):
            if cand.size and cand.max() >= n:
                raise ValueError(f"alignment: {name} holds row {int(cand.max())}, out of range for {n} rows")
        for name, value in (("index_a", a), ("index_b", b), ("costs", costs), ("probabilities", probs),
                            ("candidates_a", cand_a), ("candidates_b", cand_b)):
            if value is not None:
                value.setflags(write=False)
            object.__setattr__(self, name, value)
        object.__setattr__(self, "views", tuple(self.views))
        object.__setattr__(self, "n_a", n_a)
        object.__setattr__(self, "n_b", n_b)

    @classmethod
    def from_permutation(cls, permutation, views=("view0", "view1"), costs=None, probabilities=None,
                         n_b=None, **kwargs) -> Alignment:
        """From ``permutation[i] = j`` (row i of a matched to row j of b; -1 for unmatched)."""
        perm = np.asarray(permutation, dtype=np.int64)
        keep = perm >= 0
        a = np.flatnonzero(keep)
        sel = (lambda v: None if v is None else np.asarray(v)[keep])
        return cls(tuple(views), a, perm[keep], sel(costs), sel(probabilities), n_a=perm.size,
                   n_b=n_b if n_b is not None else (int(perm.max()) + 1 if keep.any() else 0), **kwargs)

    def __len__(self) -> int:
        return int(self.index_a.size)

    def __repr__(self) -> str:
        extra = ", with probabilities" if self.probabilities is not None else ""
        return (f"Alignment({self.views[0]!r} <-> {self.views[1]!r}, {len(self)} pairs, "
                f"{self.unmatched_a.size}+{self.unmatched_b.size} unmatched{extra})")

    @property
    def pairs(self) -> np.ndarray:
        return np.stack([self.index_a, self.index_b], axis=1)

    @property
    def unmatched_a(self) -> np.ndarray:
        return np.setdiff1d(self.candidates_a, self.index_a)

    @property
    def unmatched_b(self) -> np.ndarray:
        return np.setdiff1d(self.candidates_b, self.index_b)

    @property
    def confidence(self) -> np.ndarray:
        """Per-pair confidence: the match probability (raises if the matcher gave none)."""
        if self.probabilities is None:
            raise ValueError(f"{self.method or 'this'} alignment carries no match probabilities")
        return self.probabilities

    def to_permutation(self) -> np.ndarray:
        """Array of length n_a with the matched row of b, or -1 where a row of a is unmatched.

        Raises if a row of a is matched more than once (not a one-to-one matching).
        """
        if np.unique(self.index_a).size != self.index_a.size:
            raise ValueError("alignment is not one-to-one on view a; no permutation exists")
        perm = np.full(self.n_a, -1, dtype=np.int64)
        perm[self.index_a] = self.index_b
        return perm

    def to_correspondence(self) -> Correspondence:
        return Correspondence(self.views, self.index_a, self.index_b)

    def subset(self, keep) -> Alignment:
        keep = np.asarray(keep)
        sel = (lambda v: None if v is None else v[keep])
        return Alignment(self.views, self.index_a[keep], self.index_b[keep], self.costs[keep],
                         sel(self.probabilities), self.n_a, self.n_b, self.candidates_a, self.candidates_b,
                         self.method, dict(self.info))

    def confident(self, threshold: float = 0.5) -> Alignment:
        """The pairs whose match probability is at least ``threshold``."""
        return self.subset(self.confidence >= threshold)

    def to_frame(self):
        """A pandas DataFrame with one row per pair (columns named after the views)."""
        import pandas as pd

        cols = {f"{self.views[0]}_index": self.index_a, f"{self.views[1]}_index": self.index_b,
                "cost": self.costs}
        if self.probabilities is not None:
            cols["probability"] = self.probabilities
        return pd.DataFrame(cols)

    def to_csv(self, path) -> None:
        """Write the pairs as CSV, atomically (no truncated file if interrupted)."""
        frame = self.to_frame()
        with atomic_write(path, "w", newline="") as handle:
            frame.to_csv(handle, index=False)
