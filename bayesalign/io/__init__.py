"""Reading views and anchor files, writing matches, embeddings and tables (used by the CLI).

Every reader raises :class:`InputError` (a ``ValueError``) whose message names the file and, for
text files, the line, so that the command line can print it as one actionable line. Every writer
goes through :func:`bayesalign._utils.atomic_write`: an interrupted run never leaves a truncated file.

View files
----------
``.csv``, ``.tsv``, ``.txt`` (whitespace separated), each optionally ``.gz`` compressed, ``.npy``
and ``.npz``. A text file may start with a header line (detected: it holds a cell that is not a
number) and its first column may hold row names: when the header's first cell is empty (as
``pandas.DataFrame.to_csv`` writes it) or missing (as R writes it), when no cell of the column is a
number, or with ``row_names=True``. A first column of numbers with some other cell is an error
naming its line, never silently taken for row names. An ``.npz`` holds one 2-D numeric array, or names it with
``FILE.npz:KEY``; optional string arrays ``row_names`` and ``columns`` travel with it.

Anchor files
------------
Text files, ``#`` comments and blank lines ignored. A cell is a row name of its view (when the view
file has row names) or a 0-based row index, one reading for all the cells of a view: where both hold
and differ (row names that are numbers, as R writes them) the cells are row names and a warning says
so. A first column of row numbers under an empty header cell (pandas, R's ``write.csv``) is skipped.
Two layouts:

* wide: one column per view, in the order the views are given (or, with a header line whose cells
  are the view names, in the header's order). A line is one thing seen in several views; an empty
  cell, ``-`` or ``NA`` says the thing is not in that view. Each line gives an anchor pair between
  every two views it names. For two views this is the plain two-column file ``row_a,row_b`` (a
  header of such position names, ``row_a,row_b``, ``V1,V2``, is read as the views in the order given).
* long: a header ``view_a,row_a,view_b,row_b`` (other columns ignored): one pair per line between
  any two views. The matches file written by :func:`write_matches` has this layout, so its
  confident rows can be fed back as anchors.

Examples
--------
>>> import numpy as np, tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> write_view(folder / "a.csv", np.arange(6.0).reshape(3, 2), row_names=["x", "y", "z"])
>>> view = read_view(folder / "a.csv")
>>> view.name, view.data.shape, view.row_names
('a', (3, 2), ('x', 'y', 'z'))
"""

from .anchors import LONG_HEADER, POSITION_HEADER, read_anchors
from .outputs import (
    MATCH_COLUMNS,
    markdown_table,
    matches_frame,
    write_embedding,
    write_matches,
    write_outputs,
    write_table,
)
from .views import (
    ARRAY_SUFFIXES,
    MISSING,
    TEXT_SUFFIXES,
    InputError,
    ViewFile,
    _split_key,  # noqa: F401  (the command line checks output paths with it)
    default_view_name,
    paired_rows,
    read_view,
    write_view,
)

__all__ = ["ARRAY_SUFFIXES", "LONG_HEADER", "MATCH_COLUMNS", "MISSING", "POSITION_HEADER", "TEXT_SUFFIXES",
           "InputError", "ViewFile", "default_view_name", "markdown_table", "matches_frame", "paired_rows",
           "read_anchors", "read_view", "write_embedding", "write_matches", "write_outputs", "write_table",
           "write_view"]
