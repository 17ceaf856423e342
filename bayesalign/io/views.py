"""View files: reading and writing one view, pairing the rows of paired files (see :mod:`bayesalign.io`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from .._utils import atomic_write
from ..data import check_view

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
    try:
        data = check_view(data, name)  # e.g. values that overflow once squared
    except (TypeError, ValueError) as exc:
        raise InputError(f"{path}: {exc}") from None
    return ViewFile(name, data, names, columns, str(path))


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
