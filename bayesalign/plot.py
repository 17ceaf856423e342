"""Figures of fitted models: ARD relevance, latent scatter, cost heatmap, reliability diagram, bound trace.

Each function takes a fitted model (``MRD``, ``BayesianGPLVM``, ``MAD``), a
:class:`~bayesalign.registry.MethodResult` or the plain result types (LatentEmbedding, Alignment,
arrays), draws one figure and returns the :class:`matplotlib.figure.Figure`; with ``path`` it
also writes it as PNG (atomically). Figures are made without pyplot (``Figure()``), so nothing
accumulates in pyplot's figure manager and no display is needed; in a notebook a returned figure
shows itself. :func:`write_figures` writes every figure a fitted method has (``bayesalign align
--plots DIR``). matplotlib is imported only when a function runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

__all__ = ["plot_bound_trace", "plot_cost_heatmap", "plot_latent", "plot_relevance", "plot_reliability",
           "save_figure", "write_figures"]


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
    from .data import LatentEmbedding

    if isinstance(source, LatentEmbedding):
        return source
    for name in ("embedding", "embedding_"):  # MethodResult; MAD, spectral estimators, MRD, StochasticMRD
        found = getattr(source, name, None)
        if isinstance(found, LatentEmbedding):
            return found
    raise TypeError(f"expected a LatentEmbedding or a fitted model / result that has one, got {type(source).__name__}")


def _history_of(source):
    """(bounds, n_warmup, seconds) of the fit: a GP model's ``history_``, MAD's through its ``model_``."""
    model = _model_of(source)
    model = getattr(model, "model_", model) if not hasattr(model, "history_") else model
    if hasattr(model, "history_"):
        return (np.asarray(model.history_, dtype=np.float64), int(getattr(model, "n_warmup_", 0) or 0),
                getattr(model, "history_seconds_", None))
    history = np.asarray(source, dtype=np.float64)
    if history.ndim != 1:
        raise TypeError(f"expected a fitted GP model (history_) or a 1-D array of bounds, got {type(source).__name__}")
    return history, 0, None


def _new_figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def _finish(fig, path):
    if path is not None:
        save_figure(fig, path)
    return fig


# ARD relevance ---------------------------------------------------------------------------------
def plot_relevance(source, normalize: bool = True, threshold: float | None = 0.05, path=None):
    """ARD relevance weights as bars, one panel per view (the figure of the MRD paper, Damianou et al. 2012).

    A view's weight of latent dimension q is its ARD kernel's variance over squared lengthscale
    (``relevance_``); a dimension with weight in two views is shared by them, one with weight in
    one view is private to it.

    Parameters
    ----------
    source : fitted MRD / BayesianGPLVM / MAD, a MethodResult of one, or dict view -> array [Q]
    normalize : bool
        Divide each view's weights by its largest (the scale ``shared_dims`` thresholds).
    threshold : float, optional
        Draw the relative threshold as a dashed line (only with ``normalize``).
    path : str or Path, optional
        Also write the figure there (PNG).

    Returns
    -------
    matplotlib Figure, one axes per view (bar heights: the drawn weights).
    """
    relevance = _relevance_of(source)
    fig = _new_figure(2.6 * len(relevance), 2.6)
    axes = fig.subplots(1, len(relevance), squeeze=False, sharey=normalize)[0]
    for ax, (view, weights) in zip(axes, relevance.items()):
        heights = weights / weights.max() if normalize and weights.max() > 0 else weights
        ax.bar(np.arange(heights.size), heights, color="C0")
        if normalize and threshold is not None:
            ax.axhline(threshold, color="k", linestyle="--", linewidth=0.8)
        ax.set_xticks(np.arange(heights.size))
        ax.set_xlabel("latent dimension")
        ax.set_title(str(view))
    axes[0].set_ylabel("relevance / max" if normalize else "ARD relevance")
    return _finish(fig, path)


# Latent scatter --------------------------------------------------------------------------------
def _per_view(value, embedding, what: str) -> dict:
    """``value`` per view of the embedding: a dict view -> array, or one array for every view."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        unknown = set(value) - set(embedding.view_names)
        if unknown:
            raise ValueError(f"{what} given for unknown view(s) {sorted(unknown)}; views: {embedding.view_names}")
        return dict(value)
    return {view: value for view in embedding.view_names}


def _match_confidence(alignment, embedding) -> dict[str, np.ndarray]:
    """Per row of both views of ``alignment``: the probability of the pair it is in (NaN: unmatched)."""
    if alignment.probabilities is None:
        raise ValueError(f"the {alignment.method or 'given'} alignment carries no match probabilities to colour by")
    out = {}
    for view, index in zip(alignment.views, (alignment.index_a, alignment.index_b)):
        if view not in embedding.means:
            raise ValueError(f"the alignment's view {view!r} is not in the embedding ({embedding.view_names})")
        conf = np.full(embedding.means[view].shape[0], np.nan)
        conf[index] = alignment.probabilities
        out[view] = conf
    return out


def plot_latent(source, dims=None, labels=None, confidence=None, views=None, show_variance: bool = True,
                path=None):
    """Scatter of the latent means in two dimensions, one panel per view, coloured by a label or by match confidence.

    Parameters
    ----------
    source : LatentEmbedding, or a fitted model / MethodResult that has one (``embedding_``)
    dims : pair of int, optional
        The latent dimensions to draw; default the first two shared dimensions of the embedding
        (its first two dimensions when fewer are shared).
    labels : array [n], or dict view -> array [n_v], optional
        Colours: class labels (categorical) or a continuous value.
    confidence : Alignment with probabilities, optional
        Colour each row of its two views by the probability of the pair it is in (colour bar on
        [0, 1]); rows in no pair (anchors, unmatched) are grey.
    views : view names, optional
        The panels (default: every view of the embedding).
    show_variance : bool
        Marker area grows with the posterior standard deviation (Bayesian embeddings).
    path : str or Path, optional

    Returns
    -------
    matplotlib Figure, one axes per view (its first collection: the plotted points).
    """
    import matplotlib

    embedding = _embedding_of(source)
    if labels is not None and confidence is not None:
        raise ValueError("colour by labels or by confidence, not both")
    views = list(embedding.view_names if views is None else views)
    for view in views:
        if view not in embedding.means:
            raise ValueError(f"view {view!r} is not in the embedding ({embedding.view_names})")
    n_dims = embedding.n_components
    if dims is None:
        shared = [int(d) for d in embedding.shared_dims]
        dims = shared[:2] if len(shared) >= 2 else [0, 1]
    dims = [int(d) for d in dims]
    if len(dims) != 2 or max(dims) >= n_dims or min(dims) < 0:
        raise ValueError(f"dims must be two of the {n_dims} latent dimensions, got {dims}")
    colours = _per_view(labels, embedding, "labels") if confidence is None else _match_confidence(confidence,
                                                                                                  embedding)
    fig = _new_figure(3.8 * len(views) + (0.6 if confidence is not None else 0.0), 3.6)
    axes = fig.subplots(1, len(views), squeeze=False)[0]
    mappable = None
    for ax, view in zip(axes, views):
        means = embedding.means[view]  # [n_v, Q]
        sizes = 20.0
        if show_variance and embedding.variances is not None:
            std = np.sqrt(embedding.variance_of(view)[:, dims].mean(1))  # [n_v]
            sizes = 20.0 + 200.0 * std / max(float(std.max()), 1e-12)
        c = colours.get(view)
        kwargs = {}
        if c is not None:
            c = np.asarray(c)
            if c.shape != (means.shape[0],):
                raise ValueError(f"labels of view {view!r} must have one entry per row ({means.shape[0]}), "
                                 f"got shape {c.shape}")
            if not np.issubdtype(c.dtype, np.number):
                c = np.unique(c, return_inverse=True)[1]
            kwargs = {"c": c, "cmap": "viridis"}
            if confidence is not None:  # rows in no pair (NaN) in grey
                kwargs.update(vmin=0.0, vmax=1.0, plotnonfinite=True,
                              cmap=matplotlib.colormaps["viridis"].with_extremes(bad="0.75"))
        mappable = ax.scatter(means[:, dims[0]], means[:, dims[1]], s=sizes, alpha=0.8, **kwargs)
        ax.set_xlabel(f"latent dimension {dims[0]}")
        ax.set_ylabel(f"latent dimension {dims[1]}")
        ax.set_title(f"{embedding.method or 'embedding'}: {view}", fontsize=9)
    if confidence is not None:
        fig.colorbar(mappable, ax=list(axes), label="match probability")
    return _finish(fig, path)


# Cost heatmap ----------------------------------------------------------------------------------
def plot_cost_heatmap(source, a=None, b=None, cost: str | None = None, truth=None, path=None):
    """The cost between the unaligned rows of two views as a heatmap (MAD's D** matrix, Damianou et al. 2016).

    Parameters
    ----------
    source : fitted MAD (its :meth:`~bayesalign.mad.MAD.cost_matrix` for views ``a``, ``b`` and
        ``cost``), a MethodResult of one, or a cost array [n_a, n_b]
    truth : AlignmentProblem or Correspondence, optional
        Reorder rows and columns so that each row's true partner lies on the diagonal (rows and
        columns without a partner go last): a good cost is then low along the diagonal.
    path : str or Path, optional

    Returns
    -------
    matplotlib Figure: the image (``fig.axes[0].images[0]``, in the drawn row / column order) and
    its colour bar over the cost's range.
    """
    from .data import AlignmentProblem

    model = _model_of(source)
    if hasattr(model, "cost_matrix"):
        rows_a, rows_b, C = model.cost_matrix(a, b, cost)  # [n_a, n_b], dense as MAD's assignment needs it
        names = model._pair(a, b)
    else:
        C = np.asarray(source, dtype=np.float64)
        if C.ndim != 2:
            raise TypeError(f"expected a fitted MAD or a 2-D cost array, got {type(source).__name__}")
        rows_a, rows_b = np.arange(C.shape[0]), np.arange(C.shape[1])
        names = (a or "a", b or "b")
    if not np.all(np.isfinite(C)):
        raise ValueError(f"the cost matrix has {int((~np.isfinite(C)).sum())} non-finite entries")
    order = np.arange(C.shape[1])
    if truth is not None:
        corr = truth.truth_between(*names) if isinstance(truth, AlignmentProblem) else truth.oriented(*names)
        partner = corr.mapping()  # row of a -> row of b
        column_of = {int(r): k for k, r in enumerate(rows_b)}
        diagonal = [column_of[partner[int(r)]] for r in rows_a if partner.get(int(r)) in column_of]
        order = np.concatenate([np.asarray(diagonal, dtype=np.int64),
                                np.setdiff1d(np.arange(C.shape[1]), diagonal)]).astype(np.int64)
        has_partner = np.array([partner.get(int(r)) in column_of for r in rows_a])
        row_order = np.concatenate([np.flatnonzero(has_partner), np.flatnonzero(~has_partner)])
        C, rows_a = C[row_order], rows_a[row_order]
    C = C[:, order]
    fig = _new_figure(5.2, 4.4)
    ax = fig.subplots()
    image = ax.imshow(C, aspect="auto", cmap="magma_r", interpolation="nearest")
    kind = cost if cost is not None else getattr(model, "cost", "")
    fig.colorbar(image, ax=ax, label=f"{kind} cost".strip())
    ax.set_xlabel(f"unaligned rows of {names[1]}" + (" (true partners on the diagonal)" if truth is not None else ""))
    ax.set_ylabel(f"unaligned rows of {names[0]}")
    ax.set_title(f"cost {names[0]} x {names[1]} ({C.shape[0]} x {C.shape[1]})", fontsize=9)
    return _finish(fig, path)


# Reliability diagram ---------------------------------------------------------------------------
def reliability_bins(alignment, truth, n_bins: int = 10):
    """(mean probability, fraction correct, count) of each non-empty bin of an alignment's match probabilities.

    The bins and the scored pairs are those of
    :func:`bayesalign.metrics.expected_calibration_error` (``n_bins`` equal-width bins on [0, 1],
    p = 1 in the last), so ``sum(count / n * |correct - probability|)`` is its ECE.
    """
    from .metrics import _confidence_and_correct

    p, y = _confidence_and_correct(alignment, truth, None)
    n_bins = int(n_bins)
    if n_bins < 1:
        raise ValueError(f"n_bins must be positive, got {n_bins}")
    bins = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(bins, minlength=n_bins)
    used = count > 0
    confidence = np.bincount(bins, p, n_bins)[used] / count[used]
    correct = np.bincount(bins, y.astype(np.float64), n_bins)[used] / count[used]
    return confidence, correct, count[used]


def plot_reliability(alignments, truth, n_bins: int = 10, path=None):
    """Reliability diagram: the fraction of correct pairs against the stated match probability.

    One line per alignment, a point per non-empty bin (:func:`reliability_bins`; marker area
    proportional to the pairs in the bin). Points on the diagonal are calibrated; below it,
    over-confident (Guo et al. 2017, Figure 1).

    Parameters
    ----------
    alignments : Alignment with probabilities, or dict label -> Alignment (alignments without
        probabilities are skipped)
    truth : AlignmentProblem or Correspondence (as :func:`bayesalign.metrics.expected_calibration_error`)
    path : str or Path, optional

    Returns
    -------
    matplotlib Figure; its axes' lines: the diagonal, then one per drawn alignment.
    """
    if not isinstance(alignments, Mapping):
        alignments = {alignments.method or "alignment": alignments}
    fig = _new_figure(5.2, 4.6)
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="0.6", linestyle=":", label="calibrated")
    for label, alignment in alignments.items():
        if alignment.probabilities is None or not len(alignment):
            continue
        confidence, correct, count = reliability_bins(alignment, truth, n_bins)
        line = ax.plot(confidence, correct, label=str(label))[0]
        ax.scatter(confidence, correct, s=12 + 200 * count / count.sum(), color=line.get_color())
    ax.set_xlim(-0.02, 1.02)  # a margin so that points at 0 or 1 are not cut in half
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("match probability (bin mean)")
    ax.set_ylabel("fraction of pairs that are right")
    ax.set_title("calibration of the match probabilities", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    return _finish(fig, path)


# Bound trace -----------------------------------------------------------------------------------
def plot_bound_trace(source, seconds: bool = False, path=None):
    """The variational bound at every evaluation of a fit; a dotted line where the warm-up ended.

    Parameters
    ----------
    source : fitted MRD / BayesianGPLVM (``history_``, ``n_warmup_``, ``history_seconds_``), a MAD
        (its ``model_``), a MethodResult of one, or an array of bounds
    seconds : bool
        Against seconds since the start of the fit instead of the evaluation number.
    path : str or Path, optional

    Returns
    -------
    matplotlib Figure; its axes' first line is the trace, the second the end of the warm-up.
    """
    history, n_warmup, history_seconds = _history_of(source)
    x = np.arange(1, history.size + 1, dtype=np.float64)
    if seconds:
        if history_seconds is None:
            raise ValueError("seconds=True needs a fitted model with history_seconds_")
        x = np.asarray(history_seconds, dtype=np.float64)
    fig = _new_figure(5.0, 3.0)
    ax = fig.subplots()
    ax.plot(x, history, color="C0")
    if n_warmup and n_warmup < history.size:
        ax.axvline(x[n_warmup - 1], color="k", linestyle=":", linewidth=0.8)
    ax.set_xlabel("seconds" if seconds else "evaluation")
    ax.set_ylabel("bound")
    finite = history[np.isfinite(history)]
    if finite.size > 10:  # the first evaluations are far below: show the converging part
        low = np.quantile(finite, 0.05)
        ax.set_ylim(low, finite.max() + 0.02 * (finite.max() - low) + 1e-12)
    return _finish(fig, path)


# All figures of a fit ----------------------------------------------------------------------------
def write_figures(result, out_dir, problem=None, labels=None) -> list[Path]:
    """Write every figure a fitted method has to ``out_dir``; returns the written paths.

    ``result`` is a :class:`~bayesalign.registry.MethodResult` (or a fitted model): the latent
    scatter of each pair of aligned views coloured by match confidence (or by ``labels``) where
    there is an embedding, ARD relevance and bound trace for the Bayesian models, the cost heatmap
    for MAD (true partners on its diagonal when ``problem`` has a truth), and the reliability
    diagram when ``problem`` has a truth and the alignments carry probabilities.
    """
    out_dir = Path(out_dir)
    model = _model_of(result)
    alignments = getattr(result, "alignments", {}) or {}
    has_truth = problem is not None and problem.has_truth
    paths = []
    try:
        embedding = _embedding_of(result)
    except TypeError:
        embedding = None
    if embedding is not None:
        for (a, b), alignment in alignments.items():
            colour = alignment if labels is None and alignment.probabilities is not None else None
            paths.append(out_dir / f"latent_{a}_{b}.png")
            plot_latent(embedding, labels=labels, confidence=colour, views=(a, b), path=paths[-1])
        if not alignments:
            paths.append(out_dir / "latent.png")
            plot_latent(embedding, labels=labels, path=paths[-1])
    if hasattr(model, "relevance_"):
        paths.append(out_dir / "relevance.png")
        plot_relevance(model, path=paths[-1])
    if hasattr(model, "history_") or hasattr(getattr(model, "model_", None), "history_"):
        paths.append(out_dir / "bound_trace.png")
        plot_bound_trace(model, path=paths[-1])
    if hasattr(model, "cost_matrix"):
        for a, b in alignments or [(None, None)]:
            paths.append(out_dir / (f"cost_{a}_{b}.png" if a else "cost.png"))
            plot_cost_heatmap(model, a, b, truth=problem if has_truth else None, path=paths[-1])
    with_probabilities = {f"{a} <-> {b}": al for (a, b), al in alignments.items() if al.probabilities is not None}
    if has_truth and with_probabilities:
        paths.append(out_dir / "reliability.png")
        plot_reliability(with_probabilities, problem, path=paths[-1])
    return paths


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
