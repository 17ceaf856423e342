"""Small helpers shared by every layer of the package (seeding, atomic writes, host BLAS threads)."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import threading
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


@contextlib.contextmanager
def ctrl_c_held():
    """While joblib starts its workers: SIGINT blocked in this thread, and an interrupt that arrives meanwhile raised
    at the end. A terminal's Ctrl-C reaches the whole process group: a worker that gets it while it imports prints a
    traceback, and one raised inside joblib's start leaves its pool half made (an error instead of the interrupt).
    The processes and threads started here inherit the blocked signal (signal masks survive fork and exec); this
    process stops them when it is interrupted. Outside the main thread (no signal handlers there) or without
    POSIX signal masks (Windows): nothing."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()  # started inside, it would unblock SIGINT here (it does not restore the mask)
    arrived = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: arrived.append(signum))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a pending SIGINT is taken here, by the handler above
        signal.signal(signal.SIGINT, previous)
    if arrived and callable(previous):
        previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt (the CLI's records it too)
    elif arrived and previous == signal.SIG_DFL:
        raise KeyboardInterrupt


def available_host_memory() -> int | None:
    """Bytes of host memory free for new allocations (Linux's ``MemAvailable``); None where it cannot be told."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
