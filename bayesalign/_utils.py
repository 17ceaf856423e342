"""Small helpers shared by every layer of the package (seeding, atomic writes)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

import numpy as np


def as_rng(seed) -> np.random.Generator:
    """Return a ``numpy.random.Generator`` from a seed, a Generator or None."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.RandomState):
        return np.random.default_rng(seed.randint(0, 2**31 - 1))
    return np.random.default_rng(seed)


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", **kwargs):
    """Open a temporary file beside ``path`` and rename it onto ``path`` on success.

    An interrupted writer never leaves a truncated file behind: either the old
    file (or nothing) or the complete new one is at ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
        # mkstemp creates the file 0600; give it the mode an ordinary open() would
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
