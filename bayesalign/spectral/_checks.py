"""Argument checks of the spectral estimators: a view's scale, the number of components."""

from __future__ import annotations

import numpy as np

# The smallest largest-magnitude accepted: squares of values below ~1e-154 underflow float64 (1e-308).
_SMALLEST_MAGNITUDE = 1e-145


def check_scale(X: np.ndarray, name: str) -> None:
    """Refuse a view whose values are so small that squared distances underflow float64, naming it.

    The spectral methods square differences of features (k-NN distances, kernels, ``X' X``).
    With every value below about 1e-154 the squares underflow to 0 and every row looks like a
    duplicate of every other. (Values so large that the squares overflow are refused when the
    ``Views`` are built.) Standardising the view fixes it.

    >>> check_scale(np.full((3, 2), 1e-160), "a")
    Traceback (most recent call last):
    ...
    ValueError: view 'a' is badly scaled: its largest magnitude is 1e-160, so squared distances underflow \
to 0 in float64; standardise the view (e.g. divide each column by its standard deviation)
    """
    largest = float(np.max(np.abs(X))) if X.size else 0.0
    if 0.0 < largest < _SMALLEST_MAGNITUDE:
        raise ValueError(f"view {name!r} is badly scaled: its largest magnitude is {largest:.3g}, so squared "
                         "distances underflow to 0 in float64; standardise the view (e.g. divide each column by "
                         "its standard deviation)")


def check_n_components(n_components, limit: int, what: str) -> int:
    """``n_components`` as an int in ``[1, limit]``, else a ValueError saying why ``limit``."""
    if isinstance(n_components, bool) or not isinstance(n_components, (int, np.integer)):
        raise TypeError(f"n_components must be an int, got {n_components!r}")
    n_components = int(n_components)
    if not 1 <= n_components <= limit:
        raise ValueError(f"n_components={n_components} is out of range: {what} allows 1 to {limit}")
    return n_components
