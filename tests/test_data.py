"""Tests of the data and result types: validation messages, index bookkeeping, round trips."""

import numpy as np
import pandas as pd
import pytest

from bayesalign.data import Alignment, AlignmentProblem, Correspondence, LatentEmbedding, Views


def rng_views(n_a=6, n_b=6, seed=0):
    rng = np.random.default_rng(seed)
    return {"a": rng.normal(size=(n_a, 3)), "b": rng.normal(size=(n_b, 2))}


# Views -----------------------------------------------------------------------------------
def test_views_copy_and_never_mutate_caller():
    data = rng_views()
    original = data["a"].copy()
    views = Views(data)
    assert not np.shares_memory(views["a"], data["a"])
    with pytest.raises(ValueError):
        views["a"][0, 0] = 1.0  # stored arrays are read-only
    np.testing.assert_array_equal(data["a"], original)


def test_views_accept_list_dataframe_and_int_arrays():
    frame = pd.DataFrame({"x": [1, 2, 3], "y": [4.0, 5.0, 6.0]})
    views = Views([frame, np.arange(6).reshape(3, 2)], names=["df", "ints"])
    assert views.names == ("df", "ints")
    assert views["df"].dtype == np.float64 and views[1][2, 1] == 5.0
    assert views.is_paired and views.check_paired() == 3


@pytest.mark.parametrize(
    "bad, exc, message",
    [
        ({"a": np.zeros((2, 2))}, ValueError, "at least 2 views"),
        ({"a": np.zeros(3), "b": np.zeros((3, 1))}, ValueError, "view 'a': expected a 2-D"),
        ({"a": np.zeros((0, 3)), "b": np.zeros((3, 1))}, ValueError, "view 'a': empty"),
        ({"a": np.zeros((2, 2, 2)), "b": np.zeros((3, 1))}, ValueError, "3-D"),
        ({"a": np.array([["x", "y"]]), "b": np.zeros((3, 1))}, TypeError, "view 'a': expected numeric"),
    ],
)
def test_views_reject_bad_input(bad, exc, message):
    with pytest.raises(exc, match=message):
        Views(bad)


def test_views_name_row_and_column_of_nan():
    data = rng_views()
    data["b"][4, 1] = np.inf
    with pytest.raises(ValueError, match=r"view 'b': non-finite value inf at row 4, column 1"):
        Views(data)


def test_views_reject_duplicate_names_and_non_numeric_frame():
    with pytest.raises(ValueError, match="duplicate view name 'x'"):
        Views([np.zeros((2, 2)), np.zeros((2, 2))], names=["x", "x"])
    frame = pd.DataFrame({"num": [1.0, 2.0], "txt": ["a", "b"]})
    with pytest.raises(TypeError, match=r"view 'f': non-numeric column\(s\) \['txt'\]"):
        Views({"f": frame, "g": np.zeros((2, 1))})


def test_views_check_paired_names_sizes():
    views = Views(rng_views(4, 5))
    with pytest.raises(ValueError, match=r"\{'a': 4, 'b': 5\}"):
        views.check_paired()


# Correspondence --------------------------------------------------------------------------
def test_correspondence_constructors_agree():
    W = np.zeros((4, 5))
    W[0, 2] = W[3, 1] = W[3, 4] = 1.0  # many-to-many: row 3 has two partners
    from_matrix = Correspondence.from_matrix(W, views=("a", "b"))
    from_pairs = Correspondence.from_pairs([(0, 2), (3, 1), (3, 4)], views=("a", "b"))
    np.testing.assert_array_equal(from_matrix.pairs, from_pairs.pairs)
    assert from_matrix.weights is None and not from_matrix.is_one_to_one
    np.testing.assert_array_equal(from_pairs.to_matrix((4, 5)).toarray(), W)
    weighted = Correspondence.from_matrix(W * 0.5, views=("a", "b"))
    np.testing.assert_allclose(weighted.weights, [0.5, 0.5, 0.5])
    ident = Correspondence.identity(3, ("a", "b"))
    assert ident.mapping() == {0: 0, 1: 1, 2: 2}
    back = from_pairs.reversed()
    assert back.views == ("b", "a") and back.pairs.tolist() == [[2, 0], [1, 3], [4, 3]]


def test_correspondence_rejects_duplicates_and_negatives():
    with pytest.raises(ValueError, match=r"duplicated pair \(1, 2\)"):
        Correspondence.from_pairs([(1, 2), (0, 0), (1, 2)], views=("a", "b"))
    with pytest.raises(ValueError, match="negative row index -1"):
        Correspondence.from_pairs([(0, -1)], views=("a", "b"))
    with pytest.raises(TypeError, match="integers"):
        Correspondence(("a", "b"), [0.5], [1])


def test_correspondence_split_is_seeded_partition():
    corr = Correspondence.identity(20, ("a", "b"))
    anchors, held = corr.split(0.25, seed=3)
    assert len(anchors) == 5 and len(held) == 15
    assert set(anchors.index_a) | set(held.index_a) == set(range(20))
    again, _ = corr.split(0.25, seed=3)
    np.testing.assert_array_equal(anchors.pairs, again.pairs)


# AlignmentProblem ------------------------------------------------------------------------
def test_problem_rejects_unknown_view_and_out_of_range_anchor():
    views = Views(rng_views())
    with pytest.raises(ValueError, match="view 'c', which does not exist"):
        AlignmentProblem(views, anchors=Correspondence.from_pairs([(0, 0)], views=("a", "c")))
    with pytest.raises(ValueError, match="row 6 is out of range for view 'b' with 6 rows"):
        AlignmentProblem(views, anchors=Correspondence.from_pairs([(0, 6)], views=("a", "b")))


def test_problem_orients_anchors_and_lists_unaligned():
    views = Views(rng_views())
    problem = AlignmentProblem(views, anchors=Correspondence.from_pairs([(4, 0), (1, 5)], views=("b", "a")))
    assert problem.anchors_between("a", "b").pairs.tolist() == [[0, 4], [5, 1]]
    np.testing.assert_array_equal(problem.unaligned("a"), [1, 2, 3, 4])
    np.testing.assert_array_equal(problem.unaligned("b"), [0, 2, 3, 5])
    with pytest.raises(ValueError, match="no ground truth"):
        problem.truth_between("a", "b")


def test_split_then_shuffle_keeps_truth_consistent_with_data():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 4))
    problem = AlignmentProblem.paired({"x": X, "y": X[:, ::-1] * 2.0}, labels=np.arange(30))
    split = problem.split_anchors(6, seed=0)
    shuffled = split.shuffle_unaligned("y", seed=1)
    assert not np.array_equal(shuffled.views["y"], split.views["y"])  # rows really moved
    truth = shuffled.truth_between("x", "y")
    # the truth still pairs each row of x with the row of y that holds the same point
    np.testing.assert_allclose(shuffled.views["y"][truth.index_b], X[truth.index_a][:, ::-1] * 2.0)
    anchors = shuffled.anchors_between("x", "y")
    np.testing.assert_allclose(shuffled.views["y"][anchors.index_b], X[anchors.index_a][:, ::-1] * 2.0)
    np.testing.assert_array_equal(shuffled.labels["y"][truth.index_b], truth.index_a)
    # anchors stay in place; only held-out rows move
    np.testing.assert_array_equal(anchors.index_a, anchors.index_b)
    assert problem.anchors == {}  # the original is untouched
    with pytest.raises(ValueError, match="not the identity"):
        shuffled.split_anchors(3)


# LatentEmbedding -------------------------------------------------------------------------
def test_embedding_transform_and_restrict():
    P = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 0.0]])
    emb = LatentEmbedding({"a": np.zeros((2, 3)), "b": np.ones((4, 3))},
                          variances={"a": np.full((2, 3), 0.1), "b": np.full((4, 3), 0.2)},
                          projections={"a": P}, centers={"a": np.array([1.0, 1.0])},
                          offsets={"a": np.array([0.0, 0.0, 1.0])})
    np.testing.assert_allclose(emb.transform("a", [[2.0, 3.0]]), [[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="expects 2"):
        emb.transform("a", [[1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="only linear methods"):
        emb.transform("b", [[1.0]])
    sub = emb.restrict([2, 0])
    assert sub.n_components == 2
    np.testing.assert_allclose(sub.projections["a"], P[:, [2, 0]])
    np.testing.assert_allclose(sub.variance_of("b"), 0.2)


def test_embedding_rejects_nan_and_mismatched_dims():
    with pytest.raises(ValueError, match="view 'b' has a non-finite value at row 1, dimension 0"):
        LatentEmbedding({"a": np.zeros((2, 2)), "b": np.array([[0.0, 0.0], [np.nan, 0.0]])})
    with pytest.raises(ValueError, match="share the latent dimension"):
        LatentEmbedding({"a": np.zeros((2, 2)), "b": np.zeros((2, 3))})


# Alignment -------------------------------------------------------------------------------
def test_alignment_permutation_round_trip_and_csv(tmp_path):
    perm = np.array([3, -1, 0, 1])
    al = Alignment.from_permutation(perm, views=("a", "b"), costs=[0.1, 9.0, 0.3, 0.4],
                                    probabilities=[0.9, 0.0, 0.5, 0.2], n_b=5)
    np.testing.assert_array_equal(al.to_permutation(), perm)
    np.testing.assert_array_equal(al.unmatched_a, [1])
    np.testing.assert_array_equal(al.unmatched_b, [2, 4])
    assert al.confident(0.5).pairs.tolist() == [[0, 3], [2, 0]]
    path = tmp_path / "out" / "matches.csv"
    al.to_csv(path)
    frame = pd.read_csv(path)
    assert list(frame.columns) == ["a_index", "b_index", "cost", "probability"]
    np.testing.assert_allclose(frame["cost"], [0.1, 0.3, 0.4])
    assert not any(p.name.endswith(".tmp") for p in path.parent.iterdir())


def test_alignment_rejects_bad_probabilities():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Alignment(("a", "b"), [0], [0], probabilities=[1.5])
    with pytest.raises(ValueError, match="out of range"):
        Alignment(("a", "b"), [0, 3], [0, 1], n_a=2, n_b=2)


# Boundary cases of the issue "trustworthy results" ------------------------------------------------
def test_views_accept_int_bool_and_nullable_frame_columns_as_float():
    frame = pd.DataFrame({"i": [1, 2, 3], "b": [True, False, True],
                          "n": pd.array([4, 5, 6], dtype="Int64"), "f": [0.5, 1.5, 2.5]})
    views = Views({"a": frame, "b": np.zeros((2, 1))})
    np.testing.assert_array_equal(views["a"], [[1, 1, 4, 0.5], [2, 0, 5, 1.5], [3, 1, 6, 2.5]])
    frame.loc[1, "n"] = pd.NA  # a missing value is named, not turned into a "dtype object" error
    with pytest.raises(ValueError, match=r"view 'a': non-finite value nan at row 1, column 2"):
        Views({"a": frame, "b": np.zeros((2, 1))})


def test_views_refuse_a_mask_and_accept_an_empty_one():
    data = np.ma.masked_array(np.arange(6.0).reshape(3, 2), mask=[[0, 0], [0, 1], [0, 0]])
    with pytest.raises(ValueError, match=r"view 'a': a masked array with 1 masked value\(s\) \(the first at "
                                         r"index \(1, 1\)\)"):
        Views({"a": data, "b": np.zeros((2, 1))})
    data.mask = False  # nothing masked: the values are all data
    np.testing.assert_array_equal(Views({"a": data, "b": np.zeros((2, 1))})["a"], np.arange(6.0).reshape(3, 2))


@pytest.mark.parametrize("value", [1e154, -3e160, 1e307])
def test_views_name_a_badly_scaled_view(value):
    data = rng_views()
    data["b"][2, 1] = value
    with pytest.raises(ValueError, match=r"view 'b' is badly scaled: .* \(row 2, column 1\).* standardise"):
        Views(data)
    # the limit is the overflow of a sum of squares: 1e100 is large but safe
    data["b"][2, 1] = 1e100
    assert Views(data)["b"][2, 1] == 1e100


def test_uint64_anchor_indices_neither_wrap_nor_collide():
    big = np.array([2 ** 63, 1], dtype=np.uint64)  # would wrap to -2^63, i.e. "the last row"
    with pytest.raises(ValueError, match=r"index_a: row index 9223372036854775808 is too large"):
        Correspondence(("a", "b"), big, [0, 1])
    with pytest.raises(ValueError, match=r"index_b: row index 1.8446744073709552e\+19 is too large"):
        Correspondence(("a", "b"), [0, 1], np.array([2.0 ** 64, 1.0]))
    # near 2^62 a key a * (max b + 1) + b overflowed and two different pairs looked like one
    near = 2 ** 62
    pairs = Correspondence(("a", "b"), np.array([near + 1, near], dtype=np.uint64),
                           np.array([near, near], dtype=np.uint64))
    assert pairs.pairs.tolist() == [[near + 1, near], [near, near]]
    with pytest.raises(ValueError, match=r"duplicated pair \(4611686018427387904, 3\)"):
        Correspondence(("a", "b"), [near, 1, near], [3, 2, 3])
    with pytest.raises(ValueError, match=r"row 4611686018427387905 is out of range for view 'a' with 6 rows"):
        AlignmentProblem(rng_views(), anchors=pairs.reversed().reversed())


def test_labels_of_an_unknown_view_are_a_value_error_naming_it():
    with pytest.raises(ValueError, match=r"labels name view 'c', which does not exist; views are \['a', 'b'\]"):
        AlignmentProblem(rng_views(), labels={"c": np.zeros(6)})
    with pytest.raises(ValueError, match=r"labels name view 0"):
        AlignmentProblem(rng_views(), labels={0: np.zeros(6)})


def test_standardised_views_have_unit_columns_and_leave_the_original():
    data = rng_views()
    data["a"][:, 1] = data["a"][:, 1] * 1e6 + 3e6
    data["b"][:, 0] = 4.0  # constant: all zeros after, not NaN
    views = Views(data)
    z = views.standardised()
    np.testing.assert_allclose(z["a"].mean(0), 0.0, atol=1e-12)  # round-off of a mean of six values
    np.testing.assert_allclose(z["a"].std(0), 1.0, rtol=1e-12)
    assert (z["b"][:, 0] == 0).all() and np.isfinite(z["b"]).all()
    np.testing.assert_allclose(z["b"][:, 1].std(), 1.0, rtol=1e-12)
    assert views["a"][0, 1] == data["a"][0, 1] and not z["a"].flags.writeable


def test_missing_entries_are_refused_by_default_and_kept_when_allowed():
    data = rng_views()
    data["b"][2, 0] = data["b"][5, 1] = np.nan
    before = data["b"].copy()
    with pytest.raises(ValueError, match=r"view 'b': non-finite value nan at row 2, column 0 .*allow_missing=True"):
        Views(data)
    views = Views(data, allow_missing=True)
    assert views.n_missing == {"a": 0, "b": 2}
    assert np.isnan(views["b"][2, 0]) and np.isnan(views["b"][5, 1])
    np.testing.assert_array_equal(data["b"], before)  # the caller's array is untouched (NaN compare equal here)
    data["a"][0, 0] = np.inf  # inf is never a missing value
    with pytest.raises(ValueError, match=r"view 'a': non-finite value inf at row 0, column 0"):
        Views(data, allow_missing=True)


def test_a_column_with_no_observed_entry_is_refused_naming_it():
    data = rng_views()
    data["a"][:, 1] = np.nan
    with pytest.raises(ValueError, match=r"view 'a': column 1 has no observed entry"):
        Views(data, allow_missing=True)


def test_standardising_leaves_missing_entries_out_of_the_columns_moments():
    data = rng_views()
    data["a"][1, 0] = np.nan
    z = Views(data, allow_missing=True).standardised()
    observed = np.delete(data["a"][:, 0], 1)
    expected = (observed - observed.mean()) / observed.std()  # the moments of the observed entries only
    np.testing.assert_allclose(np.delete(z["a"][:, 0], 1), expected, rtol=1e-12)
    assert np.isnan(z["a"][1, 0])


def test_methods_that_need_complete_views_name_the_view_with_missing_entries():
    from bayesalign import MAD
    from bayesalign.spectral import CCAAlignment

    rng = np.random.default_rng(0)
    data = {"a": rng.standard_normal((30, 3)), "b": rng.standard_normal((30, 4))}
    data["b"][3, 2] = np.nan
    problem = AlignmentProblem(Views(data, allow_missing=True),
                               anchors=Correspondence.from_pairs([(i, i) for i in range(10)], views=("a", "b")))
    with pytest.raises(ValueError, match=r"CCAAlignment needs complete views; view 'b' has 1 missing \(NaN\) entry "
                                         r"\(the first at row 3, column 2\)"):
        CCAAlignment(n_components=2).fit(problem)
    with pytest.raises(ValueError, match=r"MAD\(engine='collapsed'.*view 'b' has 1 missing"):
        MAD(latent_dim=2, num_inducing=5, progress=False).fit(problem)


def test_take_refuses_unknown_views_and_rows_that_are_no_row_indices():
    views = Views({"a": np.arange(12.0).reshape(6, 2), "b": np.ones((4, 3))})
    assert views.take({"a": [5, 0]})["a"].tolist() == [[10.0, 11.0], [0.0, 1.0]]
    with pytest.raises(ValueError, match="no view named 'c'"):
        views.take({"c": [0]})
    with pytest.raises(ValueError, match="row 6 is out of range for view 'a' with 6 rows"):
        views.take({"a": [0, 6]})
    with pytest.raises(ValueError, match="negative row index -1"):
        views.take({"a": [-1]})
    with pytest.raises(TypeError, match="must be integers"):
        views.take({"a": [0.5]})


@pytest.mark.parametrize("n", [-1, 2.7, True, "3"])
def test_identity_correspondence_needs_a_non_negative_integer(n):
    with pytest.raises(ValueError, match="non-negative integer"):
        Correspondence.identity(n)
    assert len(Correspondence.identity(np.int64(3))) == 3


def test_alignment_refuses_nan_costs_fractional_rows_and_out_of_range_candidates():
    Alignment(("a", "b"), [0, 1], [1, 0], costs=[0.5, np.inf])  # +inf is a (forbidden) cost, NaN is not
    with pytest.raises(ValueError, match="cost of pair 1 is NaN"):
        Alignment(("a", "b"), [0, 1], [1, 0], costs=[0.5, np.nan])
    with pytest.raises(TypeError, match="index_a: row indices must be integers"):
        Alignment(("a", "b"), [0.5], [0])
    with pytest.raises(ValueError, match="candidates_b holds row 7, out of range for 3 rows"):
        Alignment(("a", "b"), [0], [2], n_a=2, n_b=3, candidates_b=[2, 7])
    with pytest.raises(ValueError, match="exactly two named views"):
        Alignment(("a",), [0], [0])
