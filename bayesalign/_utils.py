"""Small helpers shared by every layer of the package (seeding, atomic writes)."""

from __future__ import annotations

import contextlib
import os
import stat
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
    file (or nothing) or the complete new one is at ``path``, and the temporary
    file is removed on any exception (a ``SystemExit`` from a SIGTERM handler
    included). Replacing a file keeps its permission bits (a 0600 file stays
    0600); a new file gets those of an ordinary ``open()``. A symbolic link is
    written through: its target is replaced and the link stays a link.
    """
    path = Path(path)
    if path.is_symlink():
        path = Path(os.path.realpath(path))  # replace the link's target, not the link
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        permissions = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        permissions = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
        os.chmod(tmp, permissions)  # mkstemp makes it 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
