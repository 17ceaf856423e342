"""Files as spreadsheets, pandas and R write them."""

import warnings

import numpy as np
import pandas as pd
import pytest

from bayesalign.io import InputError, read_anchors, read_view, write_view


def _views(folder, row_names=None):
    rng = np.random.default_rng(0)
    write_view(folder / "a.csv", rng.normal(size=(6, 2)), row_names=row_names)
    write_view(folder / "b.csv", rng.normal(size=(6, 3)), row_names=row_names)
    return [read_view(folder / "a.csv"), read_view(folder / "b.csv")]


def _pairs(corrs):
    (corr,) = corrs
    return corr.pairs.tolist()


def test_r_row_numbers_as_row_names_are_read_as_names_with_a_warning(tmp_path):
    # R's write.csv names rows "1".."n": the anchor "2" is row 1 by name and row 2 by index
    views = _views(tmp_path, row_names=[str(i + 1) for i in range(6)])
    (tmp_path / "pairs.csv").write_text('"a","b"\n"2","3"\n"5","1"\n')
    with pytest.warns(UserWarning, match=r"read as row names"):
        corrs = read_anchors(tmp_path / "pairs.csv", views)
    assert _pairs(corrs) == [[1, 2], [4, 0]]


def test_names_and_indices_that_agree_need_no_warning(tmp_path):
    views = _views(tmp_path, row_names=[str(i) for i in range(6)])
    (tmp_path / "pairs.csv").write_text("a,b\n2,3\n5,1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _pairs(read_anchors(tmp_path / "pairs.csv", views)) == [[2, 3], [5, 1]]


@pytest.mark.parametrize("writer", ["pandas", "R"])
def test_an_index_column_and_a_row_a_row_b_header(tmp_path, writer):
    views = _views(tmp_path)
    if writer == "pandas":  # DataFrame.to_csv: the index under an empty header cell
        pd.DataFrame({"row_a": [0, 4], "row_b": [3, 5]}).to_csv(tmp_path / "pairs.csv")
    else:  # write.csv(data.frame(row_a=..., row_b=...)): quoted, row numbers from 1
        (tmp_path / "pairs.csv").write_text('"","row_a","row_b"\n"1",0,3\n"2",4,5\n')
    assert _pairs(read_anchors(tmp_path / "pairs.csv", views)) == [[0, 3], [4, 5]]


def test_the_header_help_shows_and_a_byte_order_mark(tmp_path):
    views = _views(tmp_path, row_names=list("uvwxyz"))
    (tmp_path / "pairs.csv").write_bytes("\ufeffrow_a,row_b\n\"u\",\"z\"\nw,x\n".encode())
    assert _pairs(read_anchors(tmp_path / "pairs.csv", views)) == [[0, 5], [2, 3]]


def test_quoted_row_names_in_a_view_with_a_byte_order_mark(tmp_path):
    (tmp_path / "v.csv").write_bytes('\ufeff"","x","y"\n"r1",1,2\n"r2",3,4\n'.encode())
    view = read_view(tmp_path / "v.csv")
    assert view.row_names == ("r1", "r2") and view.data.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_a_directory_as_the_anchors_file_is_named_as_such(tmp_path):
    views = _views(tmp_path)
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(InputError, match="not a file"):
        read_anchors(tmp_path / "folder.csv", views)


def test_a_header_naming_an_unknown_view_is_still_refused(tmp_path):
    views = _views(tmp_path)
    (tmp_path / "pairs.csv").write_text("a,c\n0,1\n")
    with pytest.raises(InputError, match="names no view|not a row"):
        read_anchors(tmp_path / "pairs.csv", views)


def test_row_names_that_are_numbers_survive_a_round_trip(tmp_path):
    write_view(tmp_path / "v.csv", np.arange(6.0).reshape(3, 2), row_names=["10", "20", "30"])
    view = read_view(tmp_path / "v.csv")
    assert view.row_names == ("10", "20", "30") and view.data.tolist() == [[0, 1], [2, 3], [4, 5]]


def test_paired_rows_by_name_or_position(tmp_path):
    from bayesalign.io import paired_rows

    data = np.arange(8.0).reshape(4, 2)
    write_view(tmp_path / "a.csv", data, row_names=list("wxyz"))
    write_view(tmp_path / "b.csv", data[::-1], row_names=list("zyxw"))
    write_view(tmp_path / "c.csv", data[:3], row_names=list("wxy"))
    a, b, c = (read_view(tmp_path / f"{v}.csv") for v in "abc")
    arrays, how = paired_rows([a, b])
    assert how == "name" and np.array_equal(arrays[1], data)
    with pytest.raises(InputError, match="missing \\['z'\\]"):
        paired_rows([a, c])
    write_view(tmp_path / "d.csv", data[::-1])
    arrays, how = paired_rows([a, read_view(tmp_path / "d.csv")])
    assert how == "position" and np.array_equal(arrays[1], data[::-1])
