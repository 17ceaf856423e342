"""Small helpers shared by every layer of the package (seeding, atomic writes, host BLAS threads)."""

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


@contextlib.contextmanager
def host_blas_single_threaded():
    """numpy's and scipy's BLAS limited to one thread inside the block; torch's own BLAS and OpenMP untouched.

    A loop that alternates torch kernels with numpy / scipy calls (scipy's L-BFGS-B between the bound's
    evaluations) runs two thread pools, torch's OpenMP one and OpenBLAS's; each pool's idle threads spin
    after its calls and take the cores from the other's, so on a machine with few cores the loop runs
    several times slower than with one of them single-threaded (benchmarks/RESULTS.md, "Host BLAS
    threads"). The host side of such loops works on vectors (the flat parameters), where threads gain
    nothing. Uses threadpoolctl (scikit-learn's dependency); the libraries inside torch's own folder (a
    torch build on OpenBLAS) are left alone, and the previous limits come back on exit. The limit holds for
    the whole process while the block runs (a library setting, as every threadpoolctl limit).
    """
    import torch
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()
    own = os.path.dirname(os.path.realpath(torch.__file__))
    paths = [lib.filepath for lib in controller.select(user_api="blas").lib_controllers
             if not os.path.realpath(lib.filepath).startswith(own)]
    if not paths:
        yield
        return
    with controller.select(filepath=paths).limit(limits=1):
        yield


def check_count(value, name: str, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``; a bool, a fraction or a smaller number is a ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def user_stacklevel() -> int:
    """The ``stacklevel`` at which ``warnings.warn``, called by the caller of this function, names the first frame
    outside the package: the user's line that led to the warning, however deep inside the package it was issued
    (Python 3.12's ``skip_file_prefixes``, for Python 3.11)."""
    import sys

    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1  # level 1: the function that calls warnings.warn
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        frame, level = frame.f_back, level + 1
    return level
