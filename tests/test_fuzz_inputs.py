"""Fuzzing the file readers and the Views / Correspondence constructors: only the documented errors escape.

The readers raise :class:`bayesalign.io.InputError` (a ValueError) for any file they cannot read; ``Views`` and
``Correspondence`` raise ValueError or TypeError (``InputTypeError`` is both). Anything else (an IndexError,
a KeyError, a numpy error, a UnicodeError) is a bug.
"""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bayesalign as ba
from bayesalign.io import InputError, ViewFile, read_anchors, read_view

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# cells people write: numbers, names, quotes, blanks, NA markers, a BOM, separators inside quotes
CELL = st.one_of(
    st.integers(-3, 12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["", "NA", "-", "nan", "inf", "x", "pt1", '"pt2"', '"a,b"', "\ufeff", "1e400", "0x10", "True",
                     "row_a", "row_b", "a", "b", "view_a", "view_b", "#", " 3 "]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=4),
)
LINES = st.lists(st.lists(CELL, min_size=0, max_size=4), min_size=0, max_size=6)


def _write(path, lines, separator, bom):
    text = "\n".join(separator.join(cells) for cells in lines) + "\n"
    path.write_bytes((("\ufeff" if bom else "") + text).encode("utf-8", "surrogatepass"))


@SETTINGS
@given(lines=LINES, separator=st.sampled_from([",", "\t", " "]), bom=st.booleans(),
       suffix=st.sampled_from([".csv", ".tsv", ".txt"]), row_names=st.sampled_from([None, True, False]))
def test_read_view_raises_only_input_errors(tmp_path, lines, separator, bom, suffix, row_names):
    path = tmp_path / f"v{suffix}"
    _write(path, lines, separator, bom)
    try:
        view = read_view(path, row_names=row_names)
    except InputError:
        return
    assert view.data.ndim == 2 and np.all(np.isfinite(view.data))


def test_a_text_view_too_large_to_square_is_an_input_error_naming_the_file(tmp_path):
    # found by the fuzz test above: a value whose square overflows float64 is refused by the view check, and the
    # file reader says so as an error about the user's file
    path = tmp_path / "v.csv"
    path.write_text("1.3407807929942597e+151\n")
    with pytest.raises(InputError, match=r"v\.csv: view 'v' is badly scaled"):
        read_view(path)


@SETTINGS
@given(data=st.binary(max_size=64), suffix=st.sampled_from([".npy", ".npz", ".csv.gz", ".csv"]))
def test_read_view_of_arbitrary_bytes_raises_only_input_errors(tmp_path, data, suffix):
    path = tmp_path / f"v{suffix}"
    path.write_bytes(data)
    try:
        read_view(path)
    except InputError:
        pass


VIEWS = [ViewFile("a", np.zeros((5, 2)), tuple(f"pt{i}" for i in range(5))), ViewFile("b", np.zeros((4, 2)))]


@SETTINGS
@given(lines=LINES, bom=st.booleans())
def test_read_anchors_raises_only_input_errors(tmp_path, lines, bom):
    path = tmp_path / "pairs.csv"
    _write(path, lines, ",", bom)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "read as row names": information, not an error
            corrs = read_anchors(path, VIEWS)
    except InputError:
        return
    for corr in corrs:
        corr.check_bounds(5, 4)


ARRAYS = st.one_of(
    st.lists(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2, 2), st.booleans(),
                                st.none(), st.text(max_size=2)), max_size=3), max_size=4),
    st.sampled_from([np.zeros((0, 3)), np.zeros((3, 0)), np.ones(4), np.ones((2, 2, 2)),
                     np.array([[1, 2]], dtype="timedelta64[s]"), np.array([["a"]]), np.array([[1 + 2j]]),
                     np.array([[1e300, 1e300]]), np.ma.masked_array([[1.0]], mask=[[True]]), np.array([[np.nan]]),
                     np.array([[1, 2], [3, 4]], dtype=np.uint8), np.array([[True, False]])]),
)


@SETTINGS
@given(a=ARRAYS, b=ARRAYS, allow_missing=st.booleans())
def test_views_raise_only_value_or_type_errors(a, b, allow_missing):
    try:
        views = ba.Views({"a": a, "b": b}, allow_missing=allow_missing)
    except (ValueError, TypeError):
        return
    for name in views.names:
        assert views[name].dtype == np.float64 and views[name].ndim == 2


INDICES = st.one_of(
    st.lists(st.one_of(st.integers(-2, 2 ** 64), st.floats(allow_nan=True), st.booleans(), st.none(),
                       st.text(max_size=2)), max_size=4),
    st.sampled_from([np.array([1, 2], dtype="timedelta64[s]"), np.array([[0, 1]]), np.array([1.5]),
                     np.array([2 ** 63], dtype=np.uint64), np.array([True]), np.array([], dtype=object)]),
)


@SETTINGS
@given(index_a=INDICES, index_b=INDICES, weights=st.one_of(st.none(), st.lists(st.floats(), max_size=3)),
       views=st.sampled_from([("a", "b"), ("a", "a"), ("a",), (1, 2)]))
def test_correspondence_raises_only_value_or_type_errors(index_a, index_b, weights, views):
    try:
        corr = ba.Correspondence(views, index_a, index_b, weights)
    except (ValueError, TypeError):
        return
    assert corr.index_a.dtype == np.int64 and (corr.index_a >= 0).all()


@SETTINGS
@given(pairs=st.one_of(st.lists(st.tuples(st.integers(0, 5), st.one_of(st.integers(0, 5), st.booleans())),
                                max_size=4), st.lists(st.lists(st.integers(0, 3), max_size=3), max_size=3)))
def test_correspondence_from_pairs_raises_only_value_or_type_errors(pairs):
    try:
        ba.Correspondence.from_pairs(pairs, ("a", "b"))
    except (ValueError, TypeError):
        pass

