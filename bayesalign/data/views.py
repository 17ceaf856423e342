"""``Views``: two or more named data matrices describing the same kind of things."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


class InputTypeError(ValueError, TypeError):
    """Bad input of the wrong type (strings for numbers, a list for a dict, ...): a ``ValueError``,
    the package's one error for bad input, that is also a ``TypeError`` (as numpy's ``AxisError`` is
    both a ValueError and an IndexError), so that either ``except`` catches it."""


def _has_bool(values) -> bool:
    """Whether a list (or nested list) of row indices holds a bool, which numpy would silently make 0 or 1."""
    if isinstance(values, np.ndarray):
        return values.dtype == bool
    if isinstance(values, (bool, np.bool_)):
        return True
    return isinstance(values, (list, tuple)) and any(_has_bool(v) for v in values)


def _index_array(values, what: str) -> np.ndarray:
    if _has_bool(values):
        raise InputTypeError(f"{what}: row indices must be integers, got a bool (True / False is no row index; "
                             "for a mask use numpy.flatnonzero)")
    array = np.asarray(values)
    if array.dtype.kind in "mM":  # numpy counts timedelta64 among the integers
        raise InputTypeError(f"{what}: row indices must be integers, got dtype {array.dtype}")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.ndim != 1:
        raise ValueError(f"{what}: expected a 1-D array of row indices, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        if np.issubdtype(array.dtype, np.floating) and np.all(np.isfinite(array)) \
                and np.all(array == np.round(array)):
            if (np.abs(array) >= 2.0 ** 53).any():  # beyond 2^53 a float is no exact integer
                raise ValueError(f"{what}: row index {array[np.abs(array) >= 2.0 ** 53][0]:.17g} is too large "
                                 "to be a row index")
            array = array.astype(np.int64)
        else:
            raise InputTypeError(f"{what}: row indices must be integers, got dtype {array.dtype}")
    if array.dtype == np.uint64 and (array > np.iinfo(np.int64).max).any():  # would wrap to negative
        raise ValueError(f"{what}: row index {int(array[array > np.iinfo(np.int64).max][0])} is too large to be "
                         "a row index")
    if (array < 0).any():
        raise ValueError(f"{what}: negative row index {int(array[array < 0][0])}")
    return array.astype(np.int64)


def check_view(data, name: str = "view", *, min_rows: int = 1, allow_missing: bool = False) -> np.ndarray:
    """Validate one view and return it as a read-only float64 copy of shape (n, p).

    This is the single validation boundary of the package: every estimator that
    takes raw arrays passes them through here (directly or via ``Views``).

    With ``allow_missing=True`` a NaN is a missing entry (a pandas ``NA`` too) and is kept; inf is
    still refused, and so is a column with no observed entry (a row with none is a row the view does
    not observe: it adds nothing to that view's likelihood). Only the models that leave missing
    entries out of their likelihood accept such views (:class:`~bayesalign.gp.StochasticMRD`,
    ``MAD(engine="svi")``).

    Raises
    ------
    InputTypeError
        (a ValueError and a TypeError) if the data are not numeric (strings, objects).
    ValueError
        If the data are not 2-D, are empty, contain inf or (unless ``allow_missing``) NaN, are a masked array
        with masked values, or are so badly scaled that their squares overflow
        (values around 1e154); the message names the view and the first
        offending row and column.
    """
    if hasattr(data, "to_numpy") and hasattr(data, "columns"):  # pandas DataFrame
        from pandas.api.types import is_bool_dtype, is_numeric_dtype

        non_numeric = [c for c, t in zip(data.columns, data.dtypes)
                       if not (is_numeric_dtype(t) or is_bool_dtype(t))]
        if non_numeric:
            raise InputTypeError(f"view {name!r}: non-numeric column(s) {non_numeric[:5]}")
        # int, bool and nullable (Int64, boolean) columns as float; a missing value (pd.NA) becomes NaN,
        # reported below with its row and column
        data = data.to_numpy(dtype=np.float64, na_value=np.nan)
    if isinstance(data, np.ma.MaskedArray):
        masked = np.ma.getmaskarray(data)
        if masked.any():  # a mask is never ignored: the masked values are not data
            where = tuple(int(i) for i in np.argwhere(masked)[0])
            raise ValueError(f"view {name!r}: a masked array with {int(masked.sum())} masked value(s) (the first "
                             f"at index {where}); bayesalign does not ignore masks: drop those rows or fill them "
                             "(data.filled(value)) first")
        data = np.ma.getdata(data)
    try:
        array = np.asarray(data)
    except Exception as exc:  # ragged nested lists and the like
        raise InputTypeError(f"view {name!r}: cannot be read as a numeric array ({exc})") from None
    if array.dtype == object or array.dtype.kind in "mM" or not (np.issubdtype(array.dtype, np.number)
                                                                  or array.dtype == bool):  # timedelta64 too
        raise InputTypeError(f"view {name!r}: expected numeric data, got dtype {array.dtype}")
    if np.iscomplexobj(array):
        raise InputTypeError(f"view {name!r}: complex data are not supported")
    if array.ndim == 1:
        raise ValueError(
            f"view {name!r}: expected a 2-D array (n_samples, n_features), got 1-D of length "
            f"{array.shape[0]}; use x.reshape(-1, 1) for a single feature"
        )
    if array.ndim != 2:
        raise ValueError(f"view {name!r}: expected a 2-D array, got {array.ndim}-D of shape {array.shape}")
    if array.shape[0] < min_rows or array.shape[1] == 0:
        raise ValueError(f"view {name!r}: empty (shape {array.shape}); need at least {min_rows} row(s) "
                         "and 1 column")
    array = np.array(array, dtype=np.float64, copy=True)
    missing = np.isnan(array)
    bad = np.isinf(array) if allow_missing else ~np.isfinite(array)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        count = int(bad.sum())
        hint = ""
        if not allow_missing and missing[row, col]:
            hint = ("; a NaN read as a missing entry is modelled by StochasticMRD and MAD(engine='svi') only "
                    "(Views(..., allow_missing=True)); for the other methods drop or impute those rows")
        raise ValueError(
            f"view {name!r}: non-finite value {array[row, col]} at row {row}, column {col} "
            f"({count} non-finite value(s) in all){hint}"
        )
    empty = missing.all(0) if allow_missing else ()
    if np.any(empty):
        raise ValueError(f"view {name!r}: column {int(np.flatnonzero(empty)[0])} has no observed entry "
                         f"({int(np.sum(empty))} such column(s)); drop it, it carries no information")
    _check_scale(array, name)
    array.setflags(write=False)
    return array


#: The largest sum of squares of a view's values accepted (a millionth of float64's range): distances,
#: Gram matrices and variances of every method sum squares of the values, and overflow above it.
MAX_SUM_OF_SQUARES = np.finfo(np.float64).max * 1e-6


def _check_scale(array: np.ndarray, name: str) -> None:
    """Refuse values whose squares, summed over the view, overflow float64 (values around 1e154 and
    up), naming the view: later they would fail as an unrelated error deep inside a method."""
    magnitude = np.nan_to_num(np.abs(array), nan=0.0)  # a missing entry (NaN) has no size
    largest = float(magnitude.max())
    if largest * largest * array.size > MAX_SUM_OF_SQUARES:  # overflows to inf there, which also fails
        row, col = np.unravel_index(int(magnitude.argmax()), array.shape)
        raise ValueError(f"view {name!r} is badly scaled: values up to {largest:.3g} (row {row}, column {col}) "
                         f"overflow float64 once squared and summed over its {array.size} values; standardise "
                         "the view (e.g. divide each column by its standard deviation)")


class Views(Mapping):
    """An ordered, named collection of two or more views.

    View ``v`` is a float64 matrix of shape ``(n_v, p_v)``; the numbers of rows
    and of columns may differ between views. The data are validated once here
    (finite, numeric, 2-D, non-empty) and copied, so the caller's arrays are
    never modified and the stored arrays are read-only.

    Parameters
    ----------
    data : dict, list or tuple of array-likes (numpy arrays, pandas DataFrames), or Views
        A dict gives the names; a sequence is named ``"view0", "view1", ...``
        unless ``names`` is given.
    names : sequence of str, optional
        Names for a sequence of views.
    allow_missing : bool
        Keep NaN entries as missing values (see :func:`check_view`) instead of refusing them. Only
        :class:`~bayesalign.gp.StochasticMRD` and ``MAD(engine="svi")`` model missing entries
        (each view's likelihood over its observed entries); every other method refuses such views
        with an error naming the view. ``n_missing`` counts them.

    Examples
    --------
    >>> import numpy as np
    >>> views = Views({"en": np.zeros((3, 2)), "it": np.ones((4, 5))})
    >>> views.names, views.n_samples, views.n_features
    (('en', 'it'), {'en': 3, 'it': 4}, {'en': 2, 'it': 5})
    >>> Views([np.zeros((2, 2))])
    Traceback (most recent call last):
    ...
    ValueError: Views needs at least 2 views, got 1
    """

    def __init__(self, data, names: Sequence[str] | None = None, allow_missing: bool = False):
        if isinstance(data, Views):
            items = list(data.items())
            if names is not None:
                items = list(zip(self._check_names(names, len(items)), (a for _, a in items)))
        elif isinstance(data, Mapping):
            if names is not None:
                raise ValueError("names= is only for a list of views; a dict already names them")
            items = list(data.items())
        elif isinstance(data, (list, tuple)):
            names = self._check_names(names, len(data)) if names is not None else \
                [f"view{i}" for i in range(len(data))]
            items = list(zip(names, data))
        else:
            raise InputTypeError(f"Views expects a dict or list of 2-D arrays, got {type(data).__name__}")
        if len(items) < 2:
            raise ValueError(f"Views needs at least 2 views, got {len(items)}")
        seen = set()
        for name, _ in items:
            if not isinstance(name, str) or not name:
                raise InputTypeError(f"view names must be non-empty strings, got {name!r}")
            if name in seen:
                raise ValueError(f"duplicate view name {name!r}")
            seen.add(name)
        self._arrays = {name: (array if isinstance(data, Views) else
                               check_view(array, name, allow_missing=bool(allow_missing)))
                        for name, array in items}

    @staticmethod
    def _check_names(names, count):
        names = list(names)
        if len(names) != count:
            raise ValueError(f"got {len(names)} names for {count} views")
        return names

    # Mapping interface -------------------------------------------------------------------
    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, (int, np.integer)):
            return self._arrays[self.names[key]]
        try:
            return self._arrays[key]
        except KeyError:
            raise KeyError(f"no view named {key!r}; views are {list(self._arrays)}") from None

    def __iter__(self):
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k!r}: {v.shape[0]}x{v.shape[1]}" for k, v in self._arrays.items())
        return f"Views({{{shapes}}})"

    # Properties --------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._arrays)

    @property
    def n_samples(self) -> dict[str, int]:
        return {k: v.shape[0] for k, v in self._arrays.items()}

    @property
    def n_features(self) -> dict[str, int]:
        return {k: v.shape[1] for k, v in self._arrays.items()}

    @property
    def n_missing(self) -> dict[str, int]:
        """Missing (NaN) entries per view: all 0 unless the views were built with ``allow_missing=True``."""
        return {k: int(np.isnan(v).sum()) for k, v in self._arrays.items()}

    def check_complete(self, method: str) -> None:
        """Raise a ValueError naming the first view with missing entries: ``method`` needs complete views."""
        for name, count in self.n_missing.items():
            if count:
                row, col = np.argwhere(np.isnan(self._arrays[name]))[0]
                raise ValueError(f"{method} needs complete views; view {name!r} has {count} missing (NaN) "
                                 f"entr{'y' if count == 1 else 'ies'} (the first at row {row}, column {col}). "
                                 "StochasticMRD and MAD(engine='svi') model missing entries; for the other "
                                 "methods drop or impute those rows")

    @property
    def is_paired(self) -> bool:
        """True when every view has the same number of rows."""
        return len(set(self.n_samples.values())) == 1

    def name_of(self, key) -> str:
        """The name of a view given by name or position; raises a clear error otherwise."""
        if isinstance(key, (int, np.integer)):
            if not -len(self) <= key < len(self):
                raise IndexError(f"view index {key} out of range for {len(self)} views")
            return self.names[key]
        if key not in self._arrays:
            raise KeyError(f"no view named {key!r}; views are {list(self._arrays)}")
        return key

    def check_paired(self) -> int:
        """Return the common number of rows, or raise naming the views that differ."""
        sizes = self.n_samples
        if not self.is_paired:
            raise ValueError(f"views must have the same number of rows (paired data); got {sizes}")
        return next(iter(sizes.values()))

    def standardised(self) -> Views:
        """New Views with every column of every view centred and divided by its standard deviation
        (a constant column becomes all zeros). Missing entries (NaN) stay missing and do not count
        in the columns' means and deviations.

        Distances, kernels and the GP-LVMs' ARD weights all see raw units: a column in metres next
        to one in millimetres is, to them, a thousand times less relevant. Standardising gives every
        column the same weight; it is the user's choice (the command line's ``--standardise``), as
        the units may carry meaning (pixel intensities, counts).
        """
        out = {}
        for name, array in self._arrays.items():
            centre, scale = self.column_scaling(name)
            z = (array - centre) / scale
            z.setflags(write=False)
            out[name] = z
        new = object.__new__(Views)
        new._arrays = out
        return new

    def column_scaling(self, view) -> tuple[np.ndarray, np.ndarray]:
        """(means [p], scales [p]) by which :meth:`standardised` maps view's rows, ``(y - means) / scales``:
        the columns' means and standard deviations over the observed entries, a constant column's scale 1.
        New rows of the view (e.g. streamed to a model fitted on standardised views) take the same map."""
        array = self._arrays[self.name_of(view)]
        spread = np.nanstd(array, 0)  # [p]; NaN (missing) entries left out
        return np.nanmean(array, 0), np.where(spread > 0, spread, 1.0)

    def take(self, rows: Mapping[str, np.ndarray]) -> Views:
        """New Views with the given rows of each view (views not named are kept whole)."""
        unknown = [name for name in rows if name not in self._arrays]
        if unknown:
            raise ValueError(f"take: no view named {unknown[0]!r}; views are {list(self._arrays)}")
        out = {}
        for name, array in self._arrays.items():
            if name in rows:
                index = _index_array(rows[name], f"take: rows of view {name!r}")
                if index.size and index.max() >= array.shape[0]:
                    raise ValueError(f"take: row {int(index.max())} is out of range for view {name!r} with "
                                     f"{array.shape[0]} rows")
            sub = array if name not in rows else array[index]
            sub = np.ascontiguousarray(sub)
            sub.setflags(write=False)
            out[name] = sub
        new = object.__new__(Views)
        new._arrays = out
        for name, sub in out.items():
            if sub.shape[0] == 0:
                raise ValueError(f"view {name!r}: selection leaves no rows")
        return new
