"""Figures of fitted models: the joint latent space, latent scatter, ARD relevance, cost heatmap, reliability
diagram, bound trace.

Each function takes a fitted model (``MRD``, ``BayesianGPLVM``, ``MAD``, a spectral baseline), a
:class:`~bayesalign.registry.MethodResult` or the plain result types (LatentEmbedding, Alignment,
arrays), draws one figure and returns the :class:`matplotlib.figure.Figure`; with ``path`` it
also writes it as PNG (atomically). Figures are made without pyplot (``Figure()``), so nothing
accumulates in pyplot's figure manager and no display is needed; in a notebook a returned figure
shows itself. :func:`write_figures` writes every figure a fitted method has (``bayesalign align
--plots DIR``). matplotlib is imported only when a function runs.

Modules: :mod:`~bayesalign.plot.latent` (the latent space), :mod:`~bayesalign.plot.diagnostics`
(the fit's diagnostics).
"""

from __future__ import annotations

from pathlib import Path

from ._figure import _embedding_of, _model_of, save_figure
from .diagnostics import plot_bound_trace, plot_cost_heatmap, plot_relevance, plot_reliability, reliability_bins
from .latent import joint_coordinates, plot_joint, plot_latent

__all__ = ["joint_coordinates", "plot_bound_trace", "plot_cost_heatmap", "plot_joint", "plot_latent",
           "plot_relevance", "plot_reliability", "reliability_bins", "save_figure", "write_figures"]


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
