"""Output files: matches, latent embeddings and tables, each written atomically (see :mod:`bayesalign.io`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._utils import atomic_write
from ..data import Alignment, Correspondence, LatentEmbedding
from .views import ViewFile

# Outputs -----------------------------------------------------------------------------------
MATCH_COLUMNS = ("view_a", "row_a", "view_b", "row_b", "index_a", "index_b", "cost", "probability", "anchor")


def matches_frame(alignments: Sequence[Alignment], anchors: Sequence[Correspondence],
                  views: Sequence[ViewFile]):
    """One table of every matched pair, anchors included (cost 0, probability 1, ``anchor`` True).

    Columns :data:`MATCH_COLUMNS`: ``row_*`` are row names (or indices when a view has none),
    ``index_*`` 0-based row indices; ``probability`` is empty where a method gives none.
    """
    import pandas as pd

    by_name = {v.name: v for v in views}

    def block(pair_views, index_a, index_b, costs, probabilities, anchor):
        va, vb = by_name[pair_views[0]], by_name[pair_views[1]]
        return pd.DataFrame({"view_a": va.name, "row_a": va.label(index_a), "view_b": vb.name,
                             "row_b": vb.label(index_b), "index_a": index_a, "index_b": index_b,
                             "cost": costs, "probability": probabilities, "anchor": anchor})

    parts = [block(c.views, c.index_a, c.index_b, 0.0, 1.0, True) for c in anchors if len(c)]
    for al in alignments:
        probs = al.probabilities if al.probabilities is not None else np.full(len(al), np.nan)
        parts.append(block(al.views, al.index_a, al.index_b, al.costs, probs, False))
    frame = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(MATCH_COLUMNS))
    return frame.sort_values(["view_a", "view_b", "index_a", "index_b"], kind="stable",
                             ignore_index=True)[list(MATCH_COLUMNS)]


def write_table(path, frame) -> None:
    """Write a DataFrame atomically as CSV (or Markdown for a ``.md`` path)."""
    path = Path(path)
    with atomic_write(path, "w", newline="") as handle:
        if path.suffix.lower() == ".md":
            handle.write(markdown_table(frame))
        else:
            frame.to_csv(handle, index=False)


def write_matches(path, alignments, anchors, views) -> None:
    """Write :func:`matches_frame` as CSV, atomically."""
    write_table(path, matches_frame(alignments, anchors, views))


def write_outputs(matches_path, alignments, anchors, views, *, embedding_path=None, embedding=None) -> None:
    """Write the matches (:func:`write_matches`) and, with ``embedding_path``, the latent coordinates
    (:func:`write_embedding`) all or none: both are complete in their temporary files before either
    replaces its path, and an error or interrupt while writing leaves both paths as they were."""
    import contextlib

    frame = matches_frame(alignments, anchors, views)
    arrays = _embedding_arrays(embedding, views) if embedding_path else None
    with contextlib.ExitStack() as stack:
        matches_handle = stack.enter_context(atomic_write(matches_path, "w", newline=""))
        embedding_handle = stack.enter_context(atomic_write(embedding_path, "wb")) if arrays else None
        frame.to_csv(matches_handle, index=False)
        if embedding_handle is not None:
            np.savez(embedding_handle, **arrays)


def write_embedding(path, embedding: LatentEmbedding, views: Sequence[ViewFile] = ()) -> None:
    """Write latent coordinates to ``.npz`` atomically: ``means_<view>``, ``variances_<view>`` (if any),
    ``row_names_<view>`` (if the view has names), ``shared_dims`` and ``method``."""
    arrays = _embedding_arrays(embedding, views)
    with atomic_write(path, "wb") as handle:
        np.savez(handle, **arrays)


def _embedding_arrays(embedding: LatentEmbedding, views: Sequence[ViewFile]) -> dict:
    arrays = {"shared_dims": np.asarray(embedding.shared_dims), "method": np.asarray(embedding.method)}
    names = {v.name: v.row_names for v in views}
    for view, mean in embedding.means.items():
        arrays[f"means_{view}"] = mean
        if embedding.variances is not None and view in embedding.variances:
            arrays[f"variances_{view}"] = embedding.variances[view]
        if names.get(view) is not None:
            arrays[f"row_names_{view}"] = np.asarray(names[view])
    return arrays


def markdown_table(frame, floatfmt: str = ".3g") -> str:
    """A GitHub Markdown table of a DataFrame (no extra dependency; NaN shown as empty)."""
    import pandas as pd

    def cell(value) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return ""
        if isinstance(value, (float, np.floating)):
            return format(float(value), floatfmt)
        return str(value).replace("|", "\\|").replace("\n", " ")

    header = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(frame[c]) else ":---"
                            for c in frame.columns) + "|"]
    for row in frame.itertuples(index=False, name=None):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines) + "\n"
