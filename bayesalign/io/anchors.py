"""Anchor files: the known pairs between views, in the wide or the long layout (see :mod:`bayesalign.io`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..data import Correspondence
from .views import MISSING, TEXT_SUFFIXES, InputError, ViewFile, _kind, _read_cells

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
