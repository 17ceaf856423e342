"""Figures: ARD relevance per view, latent scatter coloured by a label, bound trace.

Every function draws on given matplotlib axes (or makes a figure) and returns what it drew on,
so figures can be composed and saved by the caller. matplotlib is imported only when a function
runs.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["plot_bound_trace", "plot_latent", "plot_relevance"]


def _relevance_of(source) -> dict[str, np.ndarray]:
    if isinstance(source, Mapping):
        return {str(k): np.asarray(v, dtype=np.float64) for k, v in source.items()}
    if hasattr(source, "relevance_"):
        return dict(source.relevance_)
    raise TypeError(f"expected a fitted MRD / BayesianGPLVM or a dict view -> relevance, got {type(source).__name__}")


def plot_relevance(source, axes=None, normalize: bool = True, threshold: float | None = 0.05):
    """ARD relevance weights as bars, one panel per view (the figure of the MRD paper).

    Parameters
    ----------
    source : fitted MRD / BayesianGPLVM, or dict view -> array [Q]
    axes : sequence of matplotlib Axes, one per view, optional
    normalize : bool
        Divide each view's weights by its largest (the scale ``shared_dims`` thresholds).
    threshold : float, optional
        Draw the relative threshold as a dashed line (only with ``normalize``).

    Returns
    -------
    list of Axes
    """
    import matplotlib.pyplot as plt

    relevance = _relevance_of(source)
    if axes is None:
        _, axes = plt.subplots(1, len(relevance), figsize=(2.6 * len(relevance), 2.4), squeeze=False,
                               sharey=normalize)
        axes = list(axes[0])
    axes = list(np.atleast_1d(axes))
    if len(axes) != len(relevance):
        raise ValueError(f"need one axis per view ({len(relevance)}), got {len(axes)}")
    for ax, (view, weights) in zip(axes, relevance.items()):
        heights = weights / weights.max() if normalize and weights.max() > 0 else weights
        ax.bar(np.arange(heights.size), heights, color="C0")
        if normalize and threshold is not None:
            ax.axhline(threshold, color="k", linestyle="--", linewidth=0.8)
        ax.set_xticks(np.arange(heights.size))
        ax.set_xlabel("latent dimension")
        ax.set_title(str(view))
    axes[0].set_ylabel("relevance / max" if normalize else "ARD relevance")
    return axes


def plot_latent(source, dims=(0, 1), labels=None, view=None, ax=None, show_variance: bool = True):
    """Scatter of latent means in two dimensions, coloured by ``labels``.

    Parameters
    ----------
    source : LatentEmbedding, or a fitted model with ``latent_``
    dims : pair of int
        The latent dimensions to draw (e.g. ``model.shared_dims()[:2]``).
    labels : array [n], optional
        Colours (class labels or a continuous value).
    view : str, optional
        Which view's coordinates (default: the first).
    show_variance : bool
        Marker area grows with the posterior standard deviation (Bayesian embeddings).

    Returns
    -------
    Axes
    """
    import matplotlib.pyplot as plt

    embedding = getattr(source, "latent_", source)
    view = embedding.view_names[0] if view is None else view
    means = embedding.means[view]
    dims = [int(d) for d in dims]
    if len(dims) != 2 or max(dims) >= means.shape[1] or min(dims) < 0:
        raise ValueError(f"dims must be two of the {means.shape[1]} latent dimensions, got {dims}")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.0, 3.6))
    sizes = 20.0
    if show_variance and embedding.variances is not None:
        std = np.sqrt(embedding.variance_of(view)[:, dims].mean(1))  # [n]
        sizes = 20.0 + 200.0 * std / max(float(std.max()), 1e-12)
    colours = None if labels is None else np.asarray(labels)
    if colours is not None and colours.shape != (means.shape[0],):
        raise ValueError(f"labels must have one entry per row ({means.shape[0]}), got shape {colours.shape}")
    if colours is not None and not np.issubdtype(colours.dtype, np.number):
        colours = np.unique(colours, return_inverse=True)[1]
    ax.scatter(means[:, dims[0]], means[:, dims[1]], c=colours, s=sizes, cmap="viridis", alpha=0.8)
    ax.set_xlabel(f"latent dimension {dims[0]}")
    ax.set_ylabel(f"latent dimension {dims[1]}")
    ax.set_title(f"{embedding.method or 'embedding'}: {view}")
    return ax


def plot_bound_trace(source, ax=None, n_warmup: int | None = None, seconds: bool = False):
    """The variational bound at every evaluation of a fit; a dotted line where the warm-up ended.

    Parameters
    ----------
    source : fitted model (``history_``, ``n_warmup_``, ``history_seconds_``) or array of bounds
    seconds : bool
        Against seconds since the start of the fit instead of the evaluation number.

    Returns
    -------
    Axes
    """
    import matplotlib.pyplot as plt

    history = np.asarray(getattr(source, "history_", source), dtype=np.float64)
    if n_warmup is None:
        n_warmup = getattr(source, "n_warmup_", 0)
    x = np.arange(1, history.size + 1, dtype=np.float64)
    if seconds:
        x = np.asarray(source.history_seconds_, dtype=np.float64)
    if ax is None:
        _, ax = plt.subplots(figsize=(5.0, 3.0))
    ax.plot(x, history, color="C0")
    if n_warmup and n_warmup < history.size:
        ax.axvline(x[n_warmup - 1], color="k", linestyle=":", linewidth=0.8)
    ax.set_xlabel("seconds" if seconds else "evaluation")
    ax.set_ylabel("bound")
    finite = history[np.isfinite(history)]
    if finite.size > 10:  # the first evaluations are far below: show the converging part
        ax.set_ylim(np.quantile(finite, 0.05), finite.max() + 0.02 * (finite.max() - np.quantile(finite, 0.05)))
    return ax


def save_figure(fig, path, dpi: int = 120):
    """Write ``fig`` as PNG atomically (a temporary file renamed onto ``path``) and close it.

    An interrupted run never leaves a truncated figure; returns the path.
    """
    import matplotlib.pyplot as plt

    from ._utils import atomic_write

    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=dpi)
    plt.close(fig)
    return path
