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

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ._utils import atomic_write
from .data import Alignment, Correspondence, LatentEmbedding, check_view

TEXT_SUFFIXES = (".csv", ".tsv", ".txt")
ARRAY_SUFFIXES = (".npy", ".npz")
MISSING = ("", "-", "na", "nan", "none", "null")


class InputError(ValueError):
    """A problem with a user's file: the message names the file (and line) and says what is wrong."""


@dataclass(frozen=True)
class ViewFile:
    """One view read from a file: its name, data (n, p), and optional row / column names."""

    name: str
    data: np.ndarray
    row_names: tuple[str, ...] | None = None
    columns: tuple[str, ...] | None = None
    path: str = ""

    @property
    def n_samples(self) -> int:
        return int(self.data.shape[0])

    @cached_property
    def row_index(self) -> dict[str, int]:
        """Row name -> row index (empty without row names)."""
        return {name: i for i, name in enumerate(self.row_names or ())}

    def label(self, rows) -> list[str]:
        """How rows are called in output files: their names, else their 0-based indices."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.row_names is None:
            return [str(int(r)) for r in rows]
        return [self.row_names[int(r)] for r in rows]


def _split_key(path) -> tuple[Path, str | None]:
    """``"x.npz:key"`` -> (Path("x.npz"), "key")."""
    text = str(path)
    match = re.fullmatch(r"(.+\.npz):([^:/\\]+)", text)
    if match and not Path(text).exists():
        return Path(match.group(1)), match.group(2)
    return Path(text), None


def default_view_name(path) -> str:
    """A view's default name: the file name without suffixes, or KEY for ``FILE.npz:KEY``."""
    path, key = _split_key(path)
    return key or path.name.split(".")[0] or path.name


def _kind(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2", ".xz"):
        suffixes = suffixes[:-1]
    kind = suffixes[-1] if suffixes else ""
    if kind not in TEXT_SUFFIXES + ARRAY_SUFFIXES:
        raise InputError(f"{path}: unknown file type {kind or '(no suffix)'!r}; use one of "
                         f"{', '.join(TEXT_SUFFIXES + ARRAY_SUFFIXES)}")
    return kind


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _open_text(path: Path):
    import bz2
    import gzip
    import lzma

    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}.get(path.suffix.lower(), open)
    return opener(path, "rt", newline="", encoding="utf-8-sig")


def _read_cells(path: Path, kind: str) -> tuple[list[list[str]], list[int]]:
    """Rows of string cells and their 1-based line numbers (blank lines and # comments skipped)."""
    import csv

    rows, lines = [], []
    try:
        with _open_text(path) as handle:
            if kind == ".txt":
                records = (line.split() for line in handle)
            else:
                records = csv.reader(handle, delimiter="," if kind == ".csv" else "\t")
            for number, record in enumerate(records, start=1):
                cells = [c.strip() for c in record]
                if not cells or all(c == "" for c in cells) or cells[0].startswith("#"):
                    continue
                rows.append(cells)
                lines.append(number)
    except (UnicodeDecodeError, EOFError) as exc:
        raise InputError(f"{path}: not a readable text file ({exc.__class__.__name__}); "
                         "use .npy / .npz for binary arrays") from None
    except OSError as exc:  # permission denied, a corrupt archive, an I/O error
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except csv.Error as exc:
        raise InputError(f"{path}: malformed CSV ({exc})") from None
    if not rows:
        raise InputError(f"{path}: the file holds no data")
    return rows, lines


def read_view(path, name: str | None = None, row_names: bool | None = None) -> ViewFile:
    """Read one view from ``.csv/.tsv/.txt[.gz]/.npy/.npz``; see the module docstring for the layout.

    Parameters
    ----------
    path : str or Path
        The file; ``FILE.npz:KEY`` picks one array of an ``.npz``.
    name : str, optional
        The view's name (default: the file name without its suffixes).
    row_names : bool, optional
        Whether the first column of a text file holds row names (default: detected).
    """
    path, key = _split_key(path)
    kind = _kind(path)
    if name is None:
        name = key or path.name.split(".")[0] or path.name
    if not path.is_file():
        raise InputError(f"{path}: no such file" if not path.exists() else f"{path}: not a file")
    if kind in ARRAY_SUFFIXES:
        return _read_array_view(path, kind, key, name)
    rows, lines = _read_cells(path, kind)
    if len(rows) > 1 and len(rows[0]) == len(rows[1]) - 1 and not all(_is_number(c) for c in rows[0]):
        rows[0] = [""] + rows[0]  # a header without a cell over the row names (R's write.table writes it)
    width = len(rows[0])
    for cells, line in zip(rows, lines):
        if len(cells) != width:
            raise InputError(f"{path} line {line}: {len(cells)} cells, but line {lines[0]} has {width}")
    first = rows[0]
    has_header = not all(_is_number(c) for c in first[1:]) or (width == 1 and not _is_number(first[0]))
    body = rows[1:] if has_header else rows
    body_lines = lines[1:] if has_header else lines
    if not body:
        raise InputError(f"{path}: a header line but no data rows")
    if row_names is None:
        row_names = width > 1 and _first_column_is_names(body, body_lines, has_header and first[0] == "", path)
    start = 1 if row_names else 0
    if width - start < 1:
        raise InputError(f"{path}: no numeric columns besides the row names")
    data = np.empty((len(body), width - start))
    for i, (cells, line) in enumerate(zip(body, body_lines)):
        for j, cell in enumerate(cells[start:]):
            try:
                value = float(cell)
            except ValueError:
                what = "a missing value" if cell == "" else f"{cell!r} is not a number"
                raise InputError(f"{path} line {line}, column {j + start + 1}: {what}") from None
            if not np.isfinite(value):
                raise InputError(f"{path} line {line}, column {j + start + 1}: non-finite value {cell!r}")
            data[i, j] = value
    names = tuple(r[0] for r in body) if row_names else None
    if names is not None:
        _check_unique_names(names, path)
    columns = tuple(first[start:]) if has_header else None
    return ViewFile(name, check_view(data, name), names, columns, str(path))


def _first_column_is_names(body, body_lines, header_says_so: bool, path) -> bool:
    """Whether the first column holds row names, when the caller did not say: the header says so (its
    first cell is empty, as pandas writes it, or it is one cell short, as R writes it), or no cell of
    the column is a number (so none of it can be data). A column of numbers with a few other cells is
    an error naming the first of them, never silently turned into row names (which would drop a data
    column and make index anchors read as names)."""
    if header_says_so:
        return True
    text = [(cells[0], line) for cells, line in zip(body, body_lines) if not _is_number(cells[0])]
    if not text:
        return False
    if len(text) == len(body) and all(cell != "" for cell, _ in text):
        return True
    cell, line = text[0]
    what = "a missing value" if cell == "" else f"{cell!r} is not a number"
    raise InputError(f"{path} line {line}, column 1: {what}, but other rows hold numbers there; if the first "
                     "column holds row names say so (--row-names, read_view(row_names=True), or an empty first "
                     "header cell)")


def _check_unique_names(names, path) -> None:
    seen: dict[str, int] = {}
    for i, item in enumerate(names):
        if item in seen:
            raise InputError(f"{path}: row name {item!r} appears twice (rows {seen[item]} and {i})")
        seen[item] = i


def _read_array_view(path: Path, kind: str, key: str | None, name: str) -> ViewFile:
    import zipfile
    import zlib

    try:
        return _read_array_file(path, kind, key, name)
    except InputError:
        raise
    except ValueError as exc:  # object arrays would need pickle, which we never load; a bad header
        raise InputError(f"{path}: cannot be read as a numeric array without pickle ({' '.join(str(exc).split())})"
                         "; save numeric arrays") from None
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error, KeyError) as exc:  # truncated or corrupt
        raise InputError(f"{path}: not a readable {kind} file ({type(exc).__name__}: {exc})") from None


def _read_array_file(path: Path, kind: str, key: str | None, name: str) -> ViewFile:
    loaded = np.load(path, allow_pickle=False)
    if kind == ".npy" and not isinstance(loaded, np.ndarray):  # a zip (an .npz) under an .npy name
        loaded.close()
        raise InputError(f"{path}: holds an .npz archive, not one .npy array; rename it to .npz")
    row_names = columns = None
    if kind == ".npz":
        if isinstance(loaded, np.ndarray):
            raise InputError(f"{path}: holds one .npy array, not an .npz archive; rename it to .npy")
        with loaded:
            keys = list(loaded.files)
            data_keys = [k for k in keys if k not in ("row_names", "columns")]
            if key is None:
                if len(data_keys) != 1:
                    raise InputError(f"{path}: holds arrays {keys}; name the view's one as {path}:KEY")
                key = data_keys[0]
            if key not in keys:
                raise InputError(f"{path}: no array {key!r}; it holds {keys}")
            array = loaded[key]
            row_names = tuple(str(s) for s in loaded["row_names"]) if "row_names" in keys else None
            columns = tuple(str(s) for s in loaded["columns"]) if "columns" in keys else None
    else:
        array = loaded
    try:
        data = check_view(array, name)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{path}: {exc}") from None
    if row_names is not None:
        if len(row_names) != data.shape[0]:
            raise InputError(f"{path}: {len(row_names)} row_names for {data.shape[0]} rows")
        _check_unique_names(row_names, path)
    return ViewFile(name, data, row_names, columns, str(path))


def write_view(path, data, row_names=None, columns=None) -> None:
    """Write one view (atomically) in the format of the suffix; ``read_view`` reads it back exactly.

    Row names that are numbers need a header line (its first cell empty, as pandas writes it) to be read
    back as names: a text file with such names and no ``columns`` gets the header ``column0``, ``column1``, ...
    """
    path = Path(path)
    kind = _kind(path)
    data = check_view(data, path.name)
    if kind == ".npy":
        if row_names is not None or columns is not None:
            raise ValueError(f"{path}: .npy holds no row or column names; use .npz or a text format")
        with atomic_write(path, "wb") as handle:
            np.save(handle, data)
        return
    if kind == ".npz":
        extra = {}
        if row_names is not None:
            extra["row_names"] = np.asarray([str(r) for r in row_names])
        if columns is not None:
            extra["columns"] = np.asarray([str(c) for c in columns])
        with atomic_write(path, "wb") as handle:
            np.savez(handle, data=data, **extra)
        return
    import pandas as pd

    if row_names is not None and columns is None and any(_is_number(str(r)) for r in row_names):
        columns = [f"column{j}" for j in range(data.shape[1])]
    frame = pd.DataFrame(data, columns=None if columns is None else list(columns))
    if row_names is not None:
        frame.index = [str(r) for r in row_names]
    sep = {".csv": ",", ".tsv": "\t", ".txt": " "}[kind]
    compression = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz"}.get(path.suffix.lower())
    mode = "wb" if compression else "w"
    kwargs = {} if compression else {"newline": ""}
    with atomic_write(path, mode, **kwargs) as handle:
        # repr-exact floats so that a round trip returns the same numbers
        frame.to_csv(handle, sep=sep, header=columns is not None, index=row_names is not None,
                     float_format="%.17g", compression=compression)


def paired_rows(files: Sequence[ViewFile]) -> tuple[list[np.ndarray], str]:
    """The rows of paired view files in one order, and how they were paired ("name" or "position").

    When every file has row names, rows are paired by name (in the first file's order; every file must
    hold the same names); otherwise row i of each file is the same thing, and the files must have as many
    rows each.
    """
    if all(f.row_names is not None for f in files):
        first = files[0]
        out = [first.data]
        for f in files[1:]:
            missing = [n for n in first.row_names if n not in f.row_index]
            extra = [n for n in f.row_names if n not in first.row_index]
            if missing or extra:
                raise InputError(f"{f.path or f.name}: its row names are not those of {first.path or first.name} "
                                 f"(missing {missing[:3]}, extra {extra[:3]}); paired files name the same rows")
            out.append(f.data[[f.row_index[n] for n in first.row_names]])
        return out, "name"
    sizes = {f.name: f.n_samples for f in files}
    if len(set(sizes.values())) != 1:
        raise InputError(f"paired files need the same number of rows (or row names in every file); got {sizes}")
    return [f.data for f in files], "position"


# Anchors -----------------------------------------------------------------------------------
LONG_HEADER = ("view_a", "row_a", "view_b", "row_b")


#: Header cells of the wide layout that name no view but the position of one (``--help`` shows ``row_a,row_b``)
POSITION_HEADER = re.compile(r"(row|index)_?[a-z0-9]*|v\d+|x\d*|view\d*|\d+", re.IGNORECASE)


def _rows_of(view: ViewFile, cells: Sequence[tuple[str, str]], path) -> list[int]:
    """The rows named by the anchor cells of one view, ``cells`` = [(cell, where)], read one way for all of them.

    Row names when every cell is one, 0-based row indices when every cell is one in range. When both readings
    hold and they differ (row names that are numbers, as R's ``write.csv`` writes them: "1" for row 0), the cells
    are read as row names and a warning says so. Errors name the line of the first cell neither reading takes.
    """
    import warnings

    lookup = view.row_index if view.row_names is not None else {}
    as_names = [lookup.get(cell) for cell, _ in cells]
    as_indices = [int(cell) if re.fullmatch(r"\d+", cell) and int(cell) < view.n_samples else None
                  for cell, _ in cells]
    names_ok = view.row_names is not None and all(r is not None for r in as_names)
    indices_ok = all(r is not None for r in as_indices)
    if names_ok:
        if indices_ok and as_names != as_indices:
            cell = next(c for (c, _), n, i in zip(cells, as_names, as_indices) if n != i)
            warnings.warn(f"{path}: every anchor cell of view {view.name!r} is both one of its row names and a "
                          f"0-based row index, and the two differ ({cell!r} is row {lookup[cell]} by name, row "
                          f"{int(cell)} by index): read as row names", UserWarning, stacklevel=3)
        return as_names
    if indices_ok:
        return as_indices
    if any(n is not None for n in as_names):  # read as row names: the first cell that is not one
        cell, where = next(c for c, n in zip(cells, as_names) if n is None)
        mixed = " (the file's other cells for that view are row names)" if re.fullmatch(r"\d+", cell) else ""
        raise InputError(f"{where}: {cell!r} is not a row name of view {view.name!r}{mixed}")
    cell, where = next(c for c, i in zip(cells, as_indices) if i is None)
    if re.fullmatch(r"\d+", cell):
        raise InputError(f"{where}: row {int(cell)} is out of range for view {view.name!r} with "
                         f"{view.n_samples} rows (rows are counted from 0)")
    if view.row_names is not None:
        raise InputError(f"{where}: {cell!r} is not a row name of view {view.name!r}")
    raise InputError(f"{where}: {cell!r} is not a row index (view {view.name!r} has no row names; "
                     "rows are counted from 0)")


def read_anchors(path, views: Sequence[ViewFile]) -> list[Correspondence]:
    """Read an anchors file (wide or long layout, see the module docstring) for the given views.

    Returns one :class:`~bayesalign.data.Correspondence` per pair of views that has anchors. The cells of a
    view are read one way for the whole file (:func:`_rows_of`: row names, or 0-based indices; a warning when
    both readings hold and differ). A first column of row numbers under an empty header cell (as pandas'
    ``to_csv`` and R's ``write.csv`` write them) is skipped. Errors name the file and line: a wrong number of
    cells, an unknown row name, a row out of range, a line naming fewer than two views, a pair given twice.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such anchors file" if not path.exists() else
                         f"{path}: not a file (the anchors must be one text file)")
    kind = _kind(path)
    if kind not in TEXT_SUFFIXES:
        raise InputError(f"{path}: an anchors file must be text (.csv, .tsv, .txt)")
    by_name = {v.name: v for v in views}
    rows, lines = _read_cells(path, kind)
    if len(rows[0]) == len(views) + 1 and rows[0][0] == "" and len(rows) > 1:
        rows = [cells[1:] for cells in rows]  # an index column (pandas, R write.csv) under an empty header cell
    first = [c.lower() for c in rows[0]]
    found: list[tuple[str, str, str, str, int]] = []  # (view a, cell a, view b, cell b, line)

    if all(h in first for h in LONG_HEADER):
        cols = [first.index(h) for h in LONG_HEADER]
        for cells, line in zip(rows[1:], lines[1:]):
            where = f"{path} line {line}"
            if len(cells) != len(first):
                raise InputError(f"{where}: {len(cells)} cells, the header has {len(first)}")
            va, ca, vb, cb = (cells[c] for c in cols)
            for v in (va, vb):
                if v not in by_name:
                    raise InputError(f"{where}: unknown view {v!r}; the views are {list(by_name)}")
            found.append((va, ca, vb, cb, line))
    else:
        order = list(views)
        body, body_lines = rows, lines
        header = rows[0]
        names_a_view = any(c in by_name for c in header)
        if names_a_view and all(c in by_name or c.lower() in MISSING for c in header):
            order = [by_name.get(c) for c in header]  # None: a column for no view, ignored
            body, body_lines = rows[1:], lines[1:]
        elif not names_a_view and len(header) == len(views) and all(POSITION_HEADER.fullmatch(c) for c in header) \
                and not _looks_like_rows(header, views):
            body, body_lines = rows[1:], lines[1:]  # "row_a,row_b": the views in the order given
        elif not _looks_like_rows(header, views):
            raise InputError(f"{path} line {lines[0]}: a header that names no view; use the view names "
                             f"{list(by_name)}, row_a,row_b, or the long layout {','.join(LONG_HEADER)}")
        width = len(order)
        if width < 2 and len(views) >= 2:
            raise InputError(f"{path}: {width} column(s); an anchors file needs one column per view")
        for cells, line in zip(body, body_lines):
            where = f"{path} line {line}"
            if len(cells) != width:
                raise InputError(f"{where}: {len(cells)} cells, expected {width} (one per view: "
                                 f"{[v.name if v else '-' for v in order]})")
            present = [(v.name, c) for v, c in zip(order, cells) if v is not None and c.lower() not in MISSING]
            if len(present) < 2:
                raise InputError(f"{where}: names a row in fewer than two views, so it pairs nothing")
            for i, (va, ca) in enumerate(present):
                for vb, cb in present[i + 1:]:
                    found.append((va, ca, vb, cb, line))
    if not found:
        raise InputError(f"{path}: no anchor pairs in the file")
    cells: dict[str, list[tuple[str, str]]] = {}
    for va, ca, vb, cb, line in found:
        cells.setdefault(va, []).append((ca, f"{path} line {line}"))
        cells.setdefault(vb, []).append((cb, f"{path} line {line}"))
    resolved = {v: dict(zip((c for c, _ in items), _rows_of(by_name[v], items, path))) for v, items in cells.items()}
    names = list(by_name)
    pairs: dict[tuple[str, str], dict[tuple[int, int], int]] = {}
    for va, ca, vb, cb, line in found:
        ra, rb = resolved[va][ca], resolved[vb][cb]
        if va == vb:
            raise InputError(f"{path} line {line}: a pair within one view ({va!r})")
        if names.index(va) > names.index(vb):
            va, ra, vb, rb = vb, rb, va, ra
        seen = pairs.setdefault((va, vb), {})
        if (ra, rb) in seen:
            raise InputError(f"{path} line {line}: the pair ({va} row {ra}, {vb} row {rb}) is already given "
                             f"on line {seen[(ra, rb)]}")
        seen[(ra, rb)] = line
    return [Correspondence((a, b), [p[0] for p in got], [p[1] for p in got]) for (a, b), got in pairs.items()]


def _looks_like_rows(cells, views) -> bool:
    """Whether a first line is data rather than a header: some cell is a row index or a row name
    (so a typo in a first data line is reported as such, not as a bad header)."""
    return any(re.fullmatch(r"\d+", cell) or cell in view.row_index for cell, view in zip(cells, views))


# Outputs -----------------------------------------------------------------------------------
MATCH_COLUMNS = ("view_a", "row_a", "view_b", "row_b", "index_a", "index_b", "cost", "probability", "anchor")


def matches_frame(alignments: Sequence[Alignment], anchors: Sequence[Correspondence],
                  views: Sequence[ViewFile]):
    """One table of every matched pair, anchors included (cost 0, probability 1, ``anchor`` True).

    Columns :data:`MATCH_COLUMNS`: ``row_*`` are row names (or indices when a view has none),
    ``index_*`` 0-based row indices; ``probability`` is empty where a method gives none.
    """
    import pandas as pd

    by_name = {v.name: v for v in views}

    def block(pair_views, index_a, index_b, costs, probabilities, anchor):
        va, vb = by_name[pair_views[0]], by_name[pair_views[1]]
        return pd.DataFrame({"view_a": va.name, "row_a": va.label(index_a), "view_b": vb.name,
                             "row_b": vb.label(index_b), "index_a": index_a, "index_b": index_b,
                             "cost": costs, "probability": probabilities, "anchor": anchor})

    parts = [block(c.views, c.index_a, c.index_b, 0.0, 1.0, True) for c in anchors if len(c)]
    for al in alignments:
        probs = al.probabilities if al.probabilities is not None else np.full(len(al), np.nan)
        parts.append(block(al.views, al.index_a, al.index_b, al.costs, probs, False))
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(MATCH_COLUMNS))
    return frame.sort_values(["view_a", "view_b", "index_a", "index_b"], kind="stable",
                             ignore_index=True)[list(MATCH_COLUMNS)]


def write_table(path, frame) -> None:
    """Write a DataFrame atomically as CSV (or Markdown for a ``.md`` path)."""
    path = Path(path)
    with atomic_write(path, "w", newline="") as handle:
        if path.suffix.lower() == ".md":
            handle.write(markdown_table(frame))
        else:
            frame.to_csv(handle, index=False)


def write_matches(path, alignments, anchors, views) -> None:
    """Write :func:`matches_frame` as CSV, atomically."""
    write_table(path, matches_frame(alignments, anchors, views))


def write_outputs(matches_path, alignments, anchors, views, *, embedding_path=None, embedding=None) -> None:
    """Write the matches (:func:`write_matches`) and, with ``embedding_path``, the latent coordinates
    (:func:`write_embedding`) all or none: both are complete in their temporary files before either
    replaces its path, and an error or interrupt while writing leaves both paths as they were."""
    import contextlib

    frame = matches_frame(alignments, anchors, views)
    arrays = _embedding_arrays(embedding, views) if embedding_path else None
    with contextlib.ExitStack() as stack:
        matches_handle = stack.enter_context(atomic_write(matches_path, "w", newline=""))
        embedding_handle = stack.enter_context(atomic_write(embedding_path, "wb")) if arrays else None
        frame.to_csv(matches_handle, index=False)
        if embedding_handle is not None:
            np.savez(embedding_handle, **arrays)


def write_embedding(path, embedding: LatentEmbedding, views: Sequence[ViewFile] = ()) -> None:
    """Write latent coordinates to ``.npz`` atomically: ``means_<view>``, ``variances_<view>`` (if any),
    ``row_names_<view>`` (if the view has names), ``shared_dims`` and ``method``."""
    arrays = _embedding_arrays(embedding, views)
    with atomic_write(path, "wb") as handle:
        np.savez(handle, **arrays)


def _embedding_arrays(embedding: LatentEmbedding, views: Sequence[ViewFile]) -> dict:
    arrays = {"shared_dims": np.asarray(embedding.shared_dims), "method": np.asarray(embedding.method)}
    names = {v.name: v.row_names for v in views}
    for view, mean in embedding.means.items():
        arrays[f"means_{view}"] = mean
        if embedding.variances is not None and view in embedding.variances:
            arrays[f"variances_{view}"] = embedding.variances[view]
        if names.get(view) is not None:
            arrays[f"row_names_{view}"] = np.asarray(names[view])
    return arrays


def markdown_table(frame, floatfmt: str = ".3g") -> str:
    """A GitHub Markdown table of a DataFrame (no extra dependency; NaN shown as empty)."""
    import pandas as pd

    def cell(value) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return ""
        if isinstance(value, (float, np.floating)):
            return format(float(value), floatfmt)
        return str(value).replace("|", "\\|").replace("\n", " ")

    header = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(frame[c]) else ":---"
                            for c in frame.columns) + "|"]
    for row in frame.itertuples(index=False, name=None):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"
