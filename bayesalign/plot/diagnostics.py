"""Figures of a fit's diagnostics: ARD relevance, the cost heatmap, the reliability diagram, the bound trace."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._figure import _finish, _history_of, _model_of, _new_figure, _relevance_of


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
    from ..data import AlignmentProblem

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
    p = 1 in the last), so ``sum(count / n * |correct - probability|)`` is its ECE; as there,
    ``alignment`` may also be an array of probabilities and ``truth`` their correctness flags.
    """
    from ..metrics.calibration import _confidence_and_correct

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
        probabilities are skipped) or label -> (probabilities, correctness flags) of pairs pooled by the caller
    truth : AlignmentProblem or Correspondence (as :func:`bayesalign.metrics.expected_calibration_error`);
        unused by the (probabilities, flags) entries
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
        if isinstance(alignment, tuple):  # (probabilities, correctness flags)
            confidence, correct, count = reliability_bins(*alignment, n_bins)
        elif alignment.probabilities is None or not len(alignment):
            continue
        else:
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
    """The variational bound at every evaluation of a fit, one labelled line per optimiser run.

    A fit runs the optimiser several times (the warm-up with the noise fixed, then all parameters,
    a preconditioned phase, the continued fits after the inducing inputs grow); each run starts
    L-BFGS afresh, so the bound may dip at its first evaluations. Each run is drawn as its own
    line, named in the legend, and the lines are not joined.

    Parameters
    ----------
    source : fitted MRD / BayesianGPLVM (``history_``, ``history_phases_`` or ``n_warmup_``,
        ``history_seconds_``), a MAD (its ``model_``), a MethodResult of one, or an array of bounds
    seconds : bool
        Against seconds since the start of the fit instead of the evaluation number.
    path : str or Path, optional

    Returns
    -------
    matplotlib Figure; its axes' lines are the runs, in order, together the whole history.
    """
    history, phases, history_seconds = _history_of(source)
    x = np.arange(1, history.size + 1, dtype=np.float64)
    if seconds:
        if history_seconds is None:
            raise ValueError("seconds=True needs a fitted model with history_seconds_")
        x = np.asarray(history_seconds, dtype=np.float64)
    fig = _new_figure(5.0, 3.0)
    ax = fig.subplots()
    starts = [start for start, _ in phases] + [history.size]
    for k, (start, name) in enumerate(phases):
        end = min(starts[k + 1], history.size)
        if end > start:
            ax.plot(x[start:end], history[start:end], color=f"C{k % 10}",
                    label=f"{len(ax.lines) + 1}. {name} ({end - start})")
    ax.set_xlabel("seconds" if seconds else "evaluation")
    ax.set_ylabel("bound")
    if len(ax.lines) > 1:
        ax.legend(fontsize=7, loc="lower right", title="optimiser run (evaluations)", title_fontsize=7)
    finite = history[np.isfinite(history)]
    if finite.size > 10:  # the first evaluations are far below: show the converging part
        low = np.quantile(finite, 0.05)
        ax.set_ylim(low, finite.max() + 0.02 * (finite.max() - low) + 1e-12)
    return _finish(fig, path)
