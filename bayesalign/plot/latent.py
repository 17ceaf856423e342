"""Figures of the latent space: every view on the same axes (:func:`plot_joint`), or one panel per view
coloured by match confidence (:func:`plot_latent`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ._figure import _embedding_of, _finish, _new_figure


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


# The joint view -------------------------------------------------------------------------------
#: Markers of the views in :func:`plot_joint`, in the order of the views.
VIEW_MARKERS = ("o", "^", "s", "D", "v", "P", "X", "*")


def joint_coordinates(embedding, views=None, method: str = "auto", seed=0):
    """Two coordinates per row of every view, in one common 2-D map of the shared latent dimensions.

    The rows of all views are stacked (view after view) in the embedding's shared dimensions
    (every dimension when none is shared) and reduced to two once, so the views stay comparable:
    ``"tsne"`` is scikit-learn's Barnes-Hut t-SNE (van der Maaten & Hinton 2008; sparse neighbour
    affinities, no dense N x N matrix), ``"umap"`` umap-learn's UMAP (McInnes et al. 2018),
    ``"leading"`` the first two shared dimensions as they are. ``"auto"``: the leading dimensions
    when at most two are shared, else UMAP where umap-learn is installed, else t-SNE.

    Returns
    -------
    (dict view -> array (n_v, 2), the method used, the two axis names)
    """
    views = list(embedding.view_names if views is None else views)
    for view in views:
        if view not in embedding.means:
            raise ValueError(f"view {view!r} is not in the embedding ({embedding.view_names})")
    dims = [int(d) for d in embedding.shared_dims] or list(range(embedding.n_components))
    if method == "auto":
        import importlib.util

        method = "leading" if len(dims) <= 2 else "umap" if importlib.util.find_spec("umap") else "tsne"
    if method not in ("leading", "tsne", "umap"):
        raise ValueError(f"method must be 'auto', 'leading', 'tsne' or 'umap', got {method!r}")
    stacked = np.vstack([embedding.means[view][:, dims] for view in views])  # [sum n_v, len(dims)]
    if method == "leading" or stacked.shape[1] <= 2:
        if len(dims) < 2 and embedding.n_components >= 2:  # one shared dimension: the next one beside it
            dims = dims + [next(d for d in range(embedding.n_components) if d not in dims)]
            stacked = np.vstack([embedding.means[view][:, dims] for view in views])
        if stacked.shape[1] < 2:
            raise ValueError(f"a 2-D view needs 2 latent dimensions; the embedding has {embedding.n_components}")
        xy, names, method = stacked[:, :2], [f"latent dimension {d}" for d in dims[:2]], "leading"
    elif method == "tsne":
        from sklearn.manifold import TSNE

        perplexity = min(30.0, max(2.0, (stacked.shape[0] - 1) / 3.0))  # t-SNE needs perplexity < n
        xy = TSNE(2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(stacked)
        names = ["t-SNE 1", "t-SNE 2"]
    else:
        import umap

        xy, names = umap.UMAP(n_components=2, random_state=seed).fit_transform(stacked), ["UMAP 1", "UMAP 2"]
    sizes = np.cumsum([0] + [embedding.means[view].shape[0] for view in views])
    return {view: xy[sizes[k]:sizes[k + 1]] for k, view in enumerate(views)}, method, names


def plot_joint(source, labels=None, views=None, method: str = "auto", seed=0, label_name: str = "label",
               path=None):
    """The aligned space in 2-D with every view on the same axes: coloured by view, and by a label.

    The 2-D map is :func:`joint_coordinates` (the shared dimensions, reduced by t-SNE or UMAP
    when more than two are shared). The left panel colours each view, with its own marker (a
    legend names them); the right panel, drawn when ``labels`` are given, colours every row by its
    label with the same markers: a legend of the classes for categorical labels (strings, integers,
    booleans), a colour bar for continuous ones (floats). Views that overlap in the left panel,
    and classes that gather across markers in the right one, are what a good alignment shows.

    Parameters
    ----------
    source : LatentEmbedding, or a fitted estimator / result that has one (``embedding_``)
    labels : array [n] for every view (views of one size), or dict view -> array [n_v], optional
        A view missing from the dict is drawn in grey in the right panel.
    views : view names, optional (default every view of the embedding)
    method : {"auto", "leading", "tsne", "umap"}
    seed : int
        Seed of t-SNE / UMAP.
    label_name : str
        What the labels are ("cell type", "pseudotime"): the title of their legend or colour bar.
    path : str or Path, optional

    Returns
    -------
    matplotlib Figure: ``axes[0]`` one collection per view (the views' legend); with labels
    ``axes[1]`` one collection per view coloured by label, and a legend or a colour bar axes.
    """
    embedding = _embedding_of(source)
    xy, method, names = joint_coordinates(embedding, views, method, seed)
    views = list(xy)
    colours = _per_view(labels, embedding, "labels")
    for view, values in colours.items():
        if np.shape(values) != (embedding.means[view].shape[0],):
            raise ValueError(f"labels of view {view!r} must have one entry per row ({embedding.means[view].shape[0]}), "
                             f"got shape {np.shape(values)}")
    fig = _new_figure(4.4 * (2 if colours else 1) + 0.8, 4.0)
    axes = fig.subplots(1, 2 if colours else 1, squeeze=False)[0]
    title = f"{embedding.method or 'embedding'}" + ("" if method == "leading" else f", {names[0][:-2]}")
    for k, view in enumerate(views):
        axes[0].scatter(*xy[view].T, s=14, alpha=0.7, marker=VIEW_MARKERS[k % len(VIEW_MARKERS)],
                        color=f"C{k % 10}", label=f"{view} ({xy[view].shape[0]})")
    axes[0].legend(fontsize=8, title="view", title_fontsize=8, markerscale=1.5)
    axes[0].set_title(f"{title}: views", fontsize=9)
    if colours:
        values = {view: np.asarray(colours[view]) for view in views if view in colours}
        continuous = all(v.dtype.kind == "f" for v in values.values())
        if continuous:
            low = min(float(np.nanmin(v)) for v in values.values())
            high = max(float(np.nanmax(v)) for v in values.values())
        else:
            classes = np.unique(np.concatenate([v.astype(str) for v in values.values()]))
        for k, view in enumerate(views):
            style = {"s": 14, "alpha": 0.7, "marker": VIEW_MARKERS[k % len(VIEW_MARKERS)]}
            if view not in values:
                axes[1].scatter(*xy[view].T, color="0.75", **style)
            elif continuous:
                mappable = axes[1].scatter(*xy[view].T, c=values[view], cmap="viridis", vmin=low, vmax=high, **style)
            else:
                codes = np.searchsorted(classes, values[view].astype(str)) % (10 if classes.size <= 10 else 20)
                axes[1].scatter(*xy[view].T, c=codes, cmap="tab10" if classes.size <= 10 else "tab20",
                                vmin=-0.5, vmax=(9.5 if classes.size <= 10 else 19.5), **style)
        if continuous:
            fig.colorbar(mappable, ax=axes[1], label=label_name)
        else:
            from matplotlib.lines import Line2D

            cmap = axes[1].collections[0].get_cmap()
            period = 10 if classes.size <= 10 else 20
            handles = [Line2D([], [], linestyle="", marker="o", color=cmap((j % period + 0.5) / period), label=str(c))
                       for j, c in enumerate(classes)]
            axes[1].legend(handles=handles, fontsize=8, title=label_name, title_fontsize=8, loc="center left",
                           bbox_to_anchor=(1.0, 0.5))  # beside the points, not over them
        axes[1].set_title(f"{title}: labels", fontsize=9)
    for ax in axes:
        ax.set_xlabel(names[0])
        ax.set_ylabel(names[1])
    return _finish(fig, path)
