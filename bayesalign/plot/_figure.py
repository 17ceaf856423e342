"""What every figure shares: the model or result a figure is of, a new Figure, and writing it as PNG."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np


# Sources: a fitted model, a MethodResult or the result types themselves ------------------------
def _model_of(source):
    """The fitted model behind a MethodResult (``.model``), else ``source``."""
    model = getattr(source, "model", None)
    return source if model is None or not hasattr(source, "alignments") else model


def _relevance_of(source) -> dict[str, np.ndarray]:
    if isinstance(source, Mapping):
        return {str(k): np.asarray(v, dtype=np.float64) for k, v in source.items()}
    model = _model_of(source)
    if hasattr(model, "relevance_"):  # MRD, BayesianGPLVM, MAD (its MRD's weights)
        return {str(k): np.asarray(v, dtype=np.float64) for k, v in model.relevance_.items()}
    raise TypeError(f"expected a fitted MRD / BayesianGPLVM / MAD or a dict view -> relevance, got "
                    f"{type(source).__name__}")


def _embedding_of(source):
    from ..data import LatentEmbedding

    if isinstance(source, LatentEmbedding):
        return source
    for name in ("embedding", "embedding_"):  # MethodResult; MAD, spectral estimators, MRD, StochasticMRD
        found = getattr(source, name, None)
        if isinstance(found, LatentEmbedding):
            return found
    raise TypeError(f"expected a LatentEmbedding or a fitted model / result that has one, got {type(source).__name__}")


def _history_of(source):
    """(bounds, phases, seconds) of a fit: a GP model's ``history_``, MAD's through its ``model_``.

    ``phases`` is a list of (first evaluation, name) of the optimiser's runs in the history: the
    model's ``history_phases_`` where it records them, else the warm-up (``n_warmup_``) and the rest.
    """
    model = _model_of(source)
    model = getattr(model, "model_", model) if not hasattr(model, "history_") else model
    if hasattr(model, "history_"):
        history = np.asarray(model.history_, dtype=np.float64)
        phases = [(int(start), str(name)) for start, name in getattr(model, "history_phases_", None) or []]
        n_warmup = int(getattr(model, "n_warmup_", 0) or 0)
        if not phases:
            phases = [(0, "warm-up (noise fixed)"), (n_warmup, "all parameters")] if n_warmup else [(0, "fit")]
        return history, phases, getattr(model, "history_seconds_", None)
    history = np.asarray(source, dtype=np.float64)
    if history.ndim != 1:
        raise TypeError(f"expected a fitted GP model (history_) or a 1-D array of bounds, got {type(source).__name__}")
    return history, [(0, "fit")], None


def _new_figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _finish(fig, path):
    if path is not None:
        save_figure(fig, path)
    return fig


def save_figure(fig, path, dpi: int = 120):
    """Write ``fig`` as PNG atomically (a temporary file renamed onto ``path``) and close it.

    An interrupted run never leaves a truncated figure; returns the path.
    """
    import matplotlib.pyplot as plt

    from .._utils import atomic_write

    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=dpi)
    plt.close(fig)
    return path
