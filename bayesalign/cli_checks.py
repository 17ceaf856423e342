"""Checks of the command line's arguments, made before any file is read or any fit starts.

Each raises :class:`CommandError` (printed by :func:`bayesalign.cli.main` as one line, exit status 2) naming the
argument at fault: an output path that is an input, a directory or unwritable, an unavailable ``--device``, a
``--set KEY=VALUE`` of the wrong type, a negative ``--seed``, grid options that cannot work.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import tempfile
from pathlib import Path


class CommandError(Exception):
    """An error the user can act on: printed as one line, exit status 2."""


def _seed(text: str) -> int:
    """``--seed``: a non-negative integer (what numpy's generators accept), else argparse's usage error."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return value


def _check_option_types(cls, options: dict) -> None:
    """Refuse, before any fit, a ``--set KEY=VALUE`` whose value is text where the option's default is a number
    or a bool (``--set max_iter=abc``), naming the option."""
    import inspect

    try:
        parameters = dict(inspect.signature(cls).parameters)
        if "engine_options" in parameters:  # MAD: the keywords it does not take go to its engine, MRD by default
            from .gp import MRD

            parameters = {**inspect.signature(MRD).parameters, **parameters}
    except (TypeError, ValueError, ImportError):
        return
    for key, value in options.items():
        default = parameters[key].default if key in parameters else None
        if isinstance(default, (bool, int, float)) and not isinstance(value, (bool, int, float)):
            kind = "True or False" if isinstance(default, bool) else "a number"
            raise CommandError(f"--set {key}={value}: {key} takes {kind} (default {default!r}), got "
                               f"{type(value).__name__} {value!r}")


def _parse_options(items) -> dict:
    options = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip().isidentifier():
            raise CommandError(f"--set {item!r}: expected KEY=VALUE, e.g. --set max_iter=500")
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            value = text.strip()
        options[key.strip()] = value
    return options


def _check_outputs(outputs: dict, inputs: dict) -> None:
    """Refuse, before any fit, an output path that is an input file, is named twice, is a directory,
    or cannot be written (its folder is not writable, or it is a read-only file)."""
    from .io import _split_key

    def same(a: Path, b: Path) -> bool:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)  # also a hard link or another spelling of one file
        return os.path.realpath(a) == os.path.realpath(b)

    given = {flag: Path(path) for flag, path in outputs.items() if path}
    for flag, path in given.items():
        for what, source in inputs.items():
            if same(path, _split_key(source)[0]):
                raise CommandError(f"{flag} {path} is the {what}: it would be overwritten; write elsewhere")
        for other, other_path in given.items():
            if other < flag and same(path, other_path):
                raise CommandError(f"{other} and {flag} name the same file {path}")
        if path.is_dir():
            raise CommandError(f"{flag} {path}: is a directory; give a file name")
        _check_writable_folder(flag, path, Path(os.path.realpath(path)).parent)
        if path.exists() and not os.access(path, os.W_OK):
            raise CommandError(f"{flag} {path}: the file is read-only")


def _check_writable_folder(flag: str, path, folder: Path) -> None:
    """Refuse ``path`` unless ``folder`` (or, where it does not exist yet, its nearest existing parent,
    in which the writer will create it) is a directory this process can create files in."""
    folder = _existing_folder(folder)
    if not folder.is_dir():
        raise CommandError(f"{flag} {path}: {folder} is not a directory")
    try:  # a real probe: os.access is always true for root and blind to read-only file systems
        fd, probe = tempfile.mkstemp(prefix=".bayesalign-probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise CommandError(f"{flag} {path}: cannot write in {folder} ({exc.strerror})") from None


def _existing_folder(folder: Path) -> Path:
    """``folder``, or where it does not exist yet its nearest existing parent (where it will be created)."""
    while not folder.exists():
        folder = folder.parent
    return folder


def _check_device(text: str | None) -> None:
    """Refuse, before any fit, a ``--device`` torch cannot use here."""
    if text is None:
        return
    import torch

    try:
        device = torch.device(text)
    except (RuntimeError, ValueError) as exc:
        raise CommandError(f"--device {text!r} is not a torch device ({_one_line(exc)}); e.g. cpu, cuda, "
                           "cuda:1") from None
    if device.type == "cpu":
        return
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise CommandError(f"--device {text}: no CUDA device is available to this torch; use --device cpu")
        if device.index is not None and device.index >= count:
            raise CommandError(f"--device {text}: there are {count} CUDA device(s), numbered from 0")
        return
    if device.type == "mps" and torch.backends.mps.is_available():
        return
    raise CommandError(f"--device {text}: not available here; use cpu or cuda")


def add_grid_options(p) -> None:
    """--jobs, --backend, --scheduler, --cache: how a comparison grid runs (also experiments/compare.py)."""
    p.add_argument("--jobs", type=int, default=1, help="runs in parallel (default 1; -1: every core, or every "
                   "Dask worker); every run is seeded, so the table does not depend on it")
    p.add_argument("--backend", choices=("loky", "dask"), default="loky",
                   help="loky: processes on this machine (default); dask: a Dask distributed cluster")
    p.add_argument("--scheduler", metavar="ADDRESS", help="the Dask scheduler, e.g. tcp://10.0.0.1:8786 "
                   "(with --backend dask)")
    p.add_argument("--cache", metavar="DIR", help="keep every finished run in DIR (one JSON file each) and "
                   "reuse them: an interrupted or extended comparison redoes no finished run")


def check_grid_options(args) -> None:
    """Refuse, before a run of minutes, grid options that cannot work."""
    if args.jobs == 0 or args.jobs < -1:
        raise CommandError(f"--jobs must be a positive number or -1, got {args.jobs}")
    if args.scheduler and args.backend != "dask":
        raise CommandError("--scheduler is the Dask scheduler's address; add --backend dask")
    if args.backend == "dask":
        if importlib.util.find_spec("distributed") is None:
            raise CommandError("--backend dask needs dask distributed: pip install 'bayesalign[dask]'")
        if not args.scheduler:
            raise CommandError("--backend dask needs --scheduler ADDRESS (e.g. tcp://10.0.0.1:8786)")
    if args.cache:
        _check_writable_folder("--cache", args.cache, Path(args.cache))


def _one_line(exc: BaseException) -> str:
    text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return " ".join(text.split()) or type(exc).__name__


def _view_names(paths, names) -> list[str]:
    from .io import default_view_name

    if names is not None:
        if len(names) != len(paths):
            raise CommandError(f"--names gives {len(names)} names for {len(paths)} view files")
        if len(set(names)) != len(names):
            raise CommandError(f"--names: duplicate view names {names}")
        return list(names)
    stems = [default_view_name(p) or f"view{i}" for i, p in enumerate(paths)]
    if len(set(stems)) == len(stems):
        return stems
    return [f"{stem}{i}" for i, stem in enumerate(stems)]
