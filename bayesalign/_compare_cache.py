"""The cache of a comparison's finished runs: one JSON file a run, read back only for the same settings."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .data import AlignmentProblem
from .registry import get_method


def _run_settings(fingerprint: dict, label, method, fraction, seed) -> dict:
    """The settings of one run as its cache file records them: the grid's (package version, quick settings,
    latent dimension, device, dataset), the run's place in the grid and the method's registry entry."""
    spec = get_method(method)
    return dict(fingerprint, label=label, method=method, target=spec.target, method_options=dict(spec.options),
                anchor_fraction=float(fraction), seed=seed)


def _cache_path(cache: Path, label, method, fraction, seed) -> Path:
    import re

    stem = f"{label}__{method}__{float(fraction):g}__{seed}"
    return cache / (re.sub(r"[^A-Za-z0-9_.+-]", "_", stem) + ".json")


def _read_cached(cache, label, method, fraction, seed, fingerprint) -> dict | None:
    """The cached row of a run, if there is one made with the same settings."""
    import json

    if cache is None:
        return None
    path = _cache_path(cache, label, method, fraction, seed)
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # absent, or unreadable: run it again
        return None
    if stored.get("settings") != json.loads(json.dumps(fingerprint)):
        return None
    return stored.get("row")


def _write_cached(cache, row, fingerprint) -> None:
    import json

    from ._utils import atomic_write

    if cache is None:
        return
    path = _cache_path(cache, row["dataset"], row["method"], row["anchor_fraction"], row["seed"])
    with atomic_write(path, "w", encoding="utf-8") as handle:  # an interrupted write leaves no half file
        json.dump({"settings": fingerprint, "row": row}, handle, default=_json_number)


def _json_number(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"cannot store {type(value).__name__} in the comparison cache")


def _problem_digest(problem: AlignmentProblem) -> str:
    """A fingerprint of a user's problem (its views and truth), so that a cache is not read for other data."""
    import hashlib

    digest = hashlib.sha256()
    for name in problem.views.names:
        digest.update(name.encode())
        digest.update(np.ascontiguousarray(problem.views[name]).tobytes())
    for (a, b), corr in sorted(problem.truth.items()):
        digest.update(f"{a}|{b}".encode())
        digest.update(corr.index_a.tobytes() + corr.index_b.tobytes())
    return digest.hexdigest()[:16]
