"""Access to the data files shipped inside the package (``bayesalign/datasets/_data``).

Every loader reads through here, so the package never touches a path outside
its own installation (no network, no shared folders).
"""

from __future__ import annotations

import gzip
from importlib.resources import files
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importlib.resources.abc is Python >= 3.11; the package supports 3.10
    from importlib.abc import Traversable

DATA_FILES = (
    "1G7O-1.pdb.3d.real.gz", "1G7O-10.pdb.3d.real.gz", "1G7O-21.pdb.3d.real.gz",
    "35.asf.gz", "35_01.amc.gz",
    "mfeat-fac.csv.gz", "mfeat-fou.csv.gz", "mfeat-kar.csv.gz",
    "mfeat-mor.csv.gz", "mfeat-pix.csv.gz", "mfeat-zer.csv.gz",
)


def data_file(name: str) -> Traversable:
    """The shipped file ``name`` (one of ``DATA_FILES``) as an importlib.resources Traversable."""
    if name not in DATA_FILES:
        raise ValueError(f"no shipped data file {name!r}; files are {list(DATA_FILES)}")
    return files("bayesalign.datasets").joinpath("_data", name)


def read_gzip_text(name: str) -> str:
    """Decompress and decode one shipped ``.gz`` text file."""
    with data_file(name).open("rb") as raw, gzip.GzipFile(fileobj=raw) as unzipped:
        return unzipped.read().decode("ascii")
