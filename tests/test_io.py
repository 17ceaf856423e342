"""Reading and writing the CLI's files: views (csv/tsv/txt/npy/npz, header, row names), anchors, matches."""

import gzip

import numpy as np
import pandas as pd
import pytest

from bayesalign.data import Alignment, Correspondence
from bayesalign.io import (
    MATCH_COLUMNS,
    InputError,
    ViewFile,
    markdown_table,
    matches_frame,
    read_anchors,
    read_view,
    write_embedding,
    write_matches,
    write_view,
)

# Awkward values: negatives, tiny and huge magnitudes, non-terminating binary fractions.
DATA = np.array([[0.1, -2.5e-12, 3.0], [1e15, 1 / 3, -0.0], [np.pi, 7.0, 2.0 ** -30], [5.0, 6.0, 8.5]])
NAMES = ("r0", "row one", "r2", "r3")


# Views: round trips -------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".txt", ".csv.gz", ".npz"])
@pytest.mark.parametrize("with_names", [False, True])
@pytest.mark.parametrize("with_header", [False, True])
def test_write_read_round_trip_is_exact(tmp_path, suffix, with_names, with_header):
    if suffix == ".txt" and with_names:
        names = tuple(n.replace(" ", "_") for n in NAMES)  # whitespace-separated: no spaces in names
    else:
        names = NAMES
    columns = ("x", "y", "z") if with_header else None
    path = tmp_path / f"view{suffix}"
    write_view(path, DATA, row_names=names if with_names else None, columns=columns)
    view = read_view(path)
    np.testing.assert_array_equal(view.data, DATA)  # bit-exact, including -0.0 == 0.0 and 1e15
    assert view.row_names == (names if with_names else None)
    assert view.columns == columns
    assert view.name == "view"


def test_npy_round_trip_and_names_refused(tmp_path):
    write_view(tmp_path / "a.npy", DATA)
    np.testing.assert_array_equal(read_view(tmp_path / "a.npy").data, DATA)
    with pytest.raises(ValueError, match="no row or column names"):
        write_view(tmp_path / "b.npy", DATA, row_names=NAMES)


def test_reads_files_written_by_pandas_and_numpy(tmp_path):
    frame = pd.DataFrame(DATA, columns=["a", "b", "c"], index=list(NAMES))
    frame.to_csv(tmp_path / "indexed.csv")  # header's first cell is empty: row names
    view = read_view(tmp_path / "indexed.csv")
    assert view.row_names == NAMES and view.columns == ("a", "b", "c")
    np.testing.assert_allclose(view.data, DATA, rtol=1e-15)

    frame.to_csv(tmp_path / "plain.tsv", sep="\t", index=False)
    view = read_view(tmp_path / "plain.tsv")
    assert view.row_names is None and view.data.shape == (4, 3)

    np.savetxt(tmp_path / "saved.txt", DATA)
    np.testing.assert_array_equal(read_view(tmp_path / "saved.txt").data, DATA)

    np.savez(tmp_path / "many.npz", first=DATA, second=DATA[:2])
    assert read_view(f"{tmp_path / 'many.npz'}:second").data.shape == (2, 3)
    assert read_view(f"{tmp_path / 'many.npz'}:second").name == "second"
    with pytest.raises(InputError, match=r"name the view's one as .*many.npz:KEY"):
        read_view(tmp_path / "many.npz")


def test_numeric_row_names_need_the_flag(tmp_path):
    path = tmp_path / "ids.csv"
    path.write_text("1001,0.5,1.5\n1002,2.5,3.5\n")
    assert read_view(path).data.shape == (2, 3)  # numbers: read as a feature by default
    view = read_view(path, row_names=True)
    assert view.row_names == ("1001", "1002") and view.data.tolist() == [[0.5, 1.5], [2.5, 3.5]]


def test_one_text_cell_in_a_numeric_first_column_is_an_error_not_row_names(tmp_path):
    """A typo in the first column must not turn it into row names: that would drop a data column
    and make the index anchors 0,0 ... read as names (the issue's "anchor 0,0 attached to row 16")."""
    rows = [f"{i}.5,{i},{2 * i}" for i in range(20)]
    rows[15] = "1.2.3,15,30"  # line 16
    path = tmp_path / "typo.csv"
    path.write_text("\n".join(rows) + "\n")
    with pytest.raises(InputError, match=r"typo.csv line 16, column 1: '1.2.3' is not a number.*--row-names"):
        read_view(path)
    # said by the caller: names
    assert read_view(path, row_names=True).row_names[15] == "1.2.3"
    # said by the header (an empty first cell, as pandas writes it; or one cell short, as R writes it)
    for header in (",a,b\n", "a,b\n"):
        path.write_text(header + "\n".join(rows) + "\n")
        view = read_view(path)
        assert view.row_names[15] == "1.2.3" and view.data.shape == (20, 2)
    # a first column with no number at all cannot be data: names
    path.write_text("p,1,2\nq,3,4\n")
    assert read_view(path).row_names == ("p", "q")


def test_comments_blank_lines_and_gzip(tmp_path):
    path = tmp_path / "v.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("# made by hand\nf1,f2\n\n1,2\n3,4\n")
    view = read_view(path)
    assert view.name == "v" and view.columns == ("f1", "f2") and view.data.tolist() == [[1, 2], [3, 4]]


# Views: errors name the file and line ------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ("1,2\n3,x\n", r"line 2, column 2: 'x' is not a number"),
    ("a,b\n1,2\n3\n", r"line 3: 1 cells, but line 1 has 2"),
    ("1,2\n,4\n", r"line 2, column 1: a missing value"),
    ("1,inf\n", r"line 1, column 2: non-finite value 'inf'"),
    ("x,1\nx,2\n", r"row name 'x' appears twice"),
    ("a,b\n", r"a header line but no data rows"),
    ("\n# nothing\n", r"holds no data"),
])
def test_bad_view_files(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        read_view(path)


def test_missing_and_unknown_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_view(tmp_path / "nope.csv")
    (tmp_path / "data.xlsx").write_text("")
    with pytest.raises(InputError, match="unknown file type '.xlsx'"):
        read_view(tmp_path / "data.xlsx")
    np.save(tmp_path / "flat.npy", np.arange(3.0))
    with pytest.raises(InputError, match="expected a 2-D array"):
        read_view(tmp_path / "flat.npy")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="without pickle"):
        read_view(tmp_path / "objects.npy")


# Anchors -------------------------------------------------------------------------------------------
def views3(names_b=("p", "q", "r", "s")):
    return [ViewFile("a", np.zeros((4, 2))), ViewFile("b", np.zeros((4, 2)), tuple(names_b)),
            ViewFile("c", np.zeros((5, 1)))]


def test_two_column_anchors_by_index_and_by_name(tmp_path):
    path = tmp_path / "pairs.csv"
    path.write_text("0,q\n3,p\n")
    (corr,) = read_anchors(path, views3()[:2])
    assert corr.views == ("a", "b") and corr.pairs.tolist() == [[0, 1], [3, 0]]
    path.write_text("b,a\ns,2\n")  # a header of view names may reorder the columns
    (corr,) = read_anchors(path, views3()[:2])
    assert corr.pairs.tolist() == [[2, 3]]


def test_wide_anchors_for_three_views_give_every_pair(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("0\tp\t4\n1\t\t2\n-\tr\t0\n")
    found = {c.views: c.pairs.tolist() for c in read_anchors(path, views3())}
    assert found == {("a", "b"): [[0, 0]], ("a", "c"): [[0, 4], [1, 2]], ("b", "c"): [[0, 4], [2, 0]]}


def test_long_anchors_and_matches_file_feed_back(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("view_a,row_a,view_b,row_b,extra\nc,1,a,2,x\nb,s,a,0,y\n")
    found = {c.views: c.pairs.tolist() for c in read_anchors(path, views3())}
    assert found == {("a", "c"): [[2, 1]], ("a", "b"): [[0, 3]]}  # stored in view order
    # the matches file is a valid long-layout anchors file for the same views
    files = views3()
    al = Alignment(("a", "b"), [1], [2], [0.5], [0.9], n_a=4, n_b=4)
    write_matches(tmp_path / "m.csv", [al], [Correspondence.from_pairs([(0, 3)], ("a", "b"))], files)
    again = {c.views: c.pairs.tolist() for c in read_anchors(tmp_path / "m.csv", files)}
    assert again == {("a", "b"): [[0, 3], [1, 2]]}


@pytest.mark.parametrize("text, message", [
    ("0,p\n1\n", r"pairs.csv line 2: 1 cells, expected 2"),
    ("0,p\n7,q\n", r"line 2: row 7 is out of range for view 'a' with 4 rows"),
    ("0,p\n1,zz\n", r"line 2: 'zz' is not a row name of view 'b'"),
    ("0,p\n-1,q\n", r"line 2: '-1' is not a row index"),
    ("# c\n0,p\n\n0,p\n", r"line 4: the pair \(a row 0, b row 0\) is already given on line 2"),
    ("0,p\n2,-\n", r"line 2: names a row in fewer than two views"),
    ("left,right\n0,p\n", r"line 1: a header that names no view"),
    ("0,typo\n1,q\n", r"line 1: 'typo' is not a row name of view 'b'"),
])
def test_bad_anchor_files_name_the_line(tmp_path, text, message):
    path = tmp_path / "pairs.csv"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        read_anchors(path, views3()[:2])


def test_long_anchors_unknown_view(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text("view_a,row_a,view_b,row_b\na,0,zz,1\n")
    with pytest.raises(InputError, match=r"line 2: unknown view 'zz'; the views are \['a', 'b', 'c'\]"):
        read_anchors(path, views3())


# Outputs ---------------------------------------------------------------------------------------------
def test_matches_frame_columns_names_and_anchor_rows():
    files = views3()[:2]
    al = Alignment(("a", "b"), [2, 1], [3, 2], [0.25, 0.5], [0.75, 1.0], n_a=4, n_b=4)
    frame = matches_frame([al], [Correspondence.from_pairs([(0, 1)], ("a", "b"))], files)
    assert tuple(frame.columns) == MATCH_COLUMNS
    assert frame["index_a"].tolist() == [0, 1, 2]  # sorted by row of a
    assert frame["row_b"].tolist() == ["q", "r", "s"] and frame["row_a"].tolist() == ["0", "1", "2"]
    assert frame["anchor"].tolist() == [True, False, False]
    assert frame["cost"].tolist() == [0.0, 0.5, 0.25] and frame["probability"].tolist() == [1.0, 1.0, 0.75]


def test_write_embedding_npz(tmp_path):
    from bayesalign.data import LatentEmbedding

    emb = LatentEmbedding({"a": np.ones((4, 2)), "b": np.zeros((4, 2))},
                          variances={"a": np.full((4, 2), 0.5)}, method="m")
    write_embedding(tmp_path / "e.npz", emb, views3()[:2])
    with np.load(tmp_path / "e.npz") as z:
        assert sorted(z.files) == ["means_a", "means_b", "method", "row_names_b", "shared_dims",
                                   "variances_a"]
        assert z["means_a"].shape == (4, 2) and z["row_names_b"].tolist() == ["p", "q", "r", "s"]
        assert str(z["method"]) == "m" and z["shared_dims"].tolist() == [0, 1]


def test_markdown_table():
    frame = pd.DataFrame({"method": ["x|y", "z"], "acc": [0.123456, np.nan]})
    assert markdown_table(frame) == "| method | acc |\n|:---|---:|\n| x\\|y | 0.123 |\n| z |  |\n"
